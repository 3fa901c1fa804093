"""What crosses Temporal between LlamaIndex's loop (workflow code) and its steps (activities).

Everything is plain JSON built with the workflow's own LlamaIndex serializer
(``Runtime.get_serializer``): events travel as that serializer's strings,
step outputs as LlamaIndex's own pydantic result models, so a payload reads
the same in the Web UI and the ``temporal`` CLI as in ``ctx.to_dict()``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from workflows.context.serializers import BaseSerializer, JsonSerializer
from workflows.context.utils import import_module_from_qualified_name
from workflows.events import Event, StopEvent, _deserialize_exception, _serialize_exception
from workflows.runtime.types.results import (
    AddCollectedEvent,
    AddWaiter,
    DeleteCollectedEvent,
    DeleteWaiter,
    RetryAttempt,
    SentEvent,
    StepWorkerFailed,
    StepWorkerOutput,
    StepWorkerResult,
    StepWorkerState,
    StepWorkerWaiter,
    _deserialize_release_payload_value,
    _serialize_release_payload_value,
)

__all__ = [
    "decode_event",
    "decode_outputs",
    "decode_retry",
    "decode_state",
    "encode_event",
    "encode_outputs",
    "encode_retry",
    "encode_state",
]

_OUTPUT_KINDS: dict[str, type[BaseModel]] = {
    "result": StepWorkerResult,
    "failed": StepWorkerFailed,
    "add_collected": AddCollectedEvent,
    "delete_collected": DeleteCollectedEvent,
    "add_waiter": AddWaiter[Event],
    "delete_waiter": DeleteWaiter,
    "sent": SentEvent,
}


EncodeMemo = dict[int, tuple[Event, str]]
"""Events already encoded, by ``id`` (the event is held too, so its id is not reused): a fan-in buffer's
events go into every invocation's input, and encoding each once keeps a wide fan-in linear."""

MAX_MEMO = 4096
"""A memo holding more events than this is cleared before it grows further."""


def encode_event(serializer: BaseSerializer, event: Event, memo: EncodeMemo | None = None) -> str:
    if memo is not None:
        hit = memo.get(id(event))
        if hit is not None and hit[0] is event:
            return hit[1]
    from temporal_workflows.llama._runtime_temporal._registry import note_type

    note_type(event)
    data = serializer.serialize(event)
    if memo is not None:
        if len(memo) >= MAX_MEMO:
            memo.clear()
        memo[id(event)] = (event, data)
    return data


def decode_event(serializer: BaseSerializer, data: str) -> Event:
    with serializer.validation_context():
        event = serializer.deserialize(data)
    if not isinstance(event, Event):
        raise TypeError(f"expected a LlamaIndex Event, got {type(event).__name__}")
    return event


def _resolve_class(serializer: BaseSerializer, qualified_name: str) -> Any:
    resolve = getattr(serializer, "resolve_class", None)
    if resolve is not None:
        return resolve(qualified_name)
    return import_module_from_qualified_name(qualified_name)


def _encode_waiter(serializer: BaseSerializer, w: StepWorkerWaiter[Any]) -> dict[str, Any]:
    return {
        "waiter_id": w.waiter_id,
        "event": encode_event(serializer, w.event),
        "waiting_for_event": f"{w.waiting_for_event.__module__}.{w.waiting_for_event.__qualname__}",
        "requirements": serializer.serialize(w.requirements),
        "has_requirements": w.has_requirements,
        "resolved_event": None if w.resolved_event is None else encode_event(serializer, w.resolved_event),
        "bound_events": None
        if w.bound_events is None
        else {k: encode_event(serializer, v) for k, v in w.bound_events.items()},
        "timed_out": w.timed_out,
        "scope_path": list(w.scope_path),
        "collection_release_payload": _serialize_release_payload_value(w.collection_release_payload),
        "work_item_id": w.work_item_id,
    }


def _decode_waiter(serializer: BaseSerializer, d: dict[str, Any]) -> StepWorkerWaiter[Any]:
    with serializer.validation_context():
        waiting_for = _resolve_class(serializer, d["waiting_for_event"])
        payload = _deserialize_release_payload_value(d["collection_release_payload"])
        requirements = serializer.deserialize(d["requirements"])
    return StepWorkerWaiter(
        waiter_id=d["waiter_id"],
        event=decode_event(serializer, d["event"]),
        waiting_for_event=waiting_for,
        requirements=requirements,
        has_requirements=d["has_requirements"],
        resolved_event=None if d["resolved_event"] is None else decode_event(serializer, d["resolved_event"]),
        bound_events=None
        if d["bound_events"] is None
        else {k: decode_event(serializer, v) for k, v in d["bound_events"].items()},
        timed_out=d["timed_out"],
        scope_path=tuple(d["scope_path"]),
        collection_release_payload=payload,
        work_item_id=d["work_item_id"],
    )


def _encode_events(serializer: BaseSerializer, events: list[Event], memo: EncodeMemo | None) -> list[str]:
    if memo is None:
        return [encode_event(serializer, e) for e in events]
    out: list[str] = []
    for e in events:  # the memo's hits inline: a wide fan-in's buffer is read per invocation
        hit = memo.get(id(e))
        out.append(hit[1] if hit is not None and hit[0] is e else encode_event(serializer, e, memo))
    return out


def encode_state(serializer: BaseSerializer, state: StepWorkerState, memo: EncodeMemo | None = None) -> dict[str, Any]:
    """A step's ``StepWorkerState`` (its fan-in buffers, waiters, release payload) as JSON."""
    return {
        "step_name": state.step_name,
        "collected_events": {k: _encode_events(serializer, v, memo) for k, v in state.collected_events.items()},
        "collected_waiters": [_encode_waiter(serializer, w) for w in state.collected_waiters],
        "collection_release_payload": _serialize_release_payload_value(state.collection_release_payload),
        "scope_path": list(state.scope_path),
        "work_item_id": state.work_item_id,
        "invocation_id": state.invocation_id,
    }


def decode_state(serializer: BaseSerializer, d: dict[str, Any]) -> StepWorkerState:
    with serializer.validation_context():
        payload = _deserialize_release_payload_value(d["collection_release_payload"])
    return StepWorkerState(
        step_name=d["step_name"],
        collected_events={k: [decode_event(serializer, e) for e in v] for k, v in d["collected_events"].items()},
        collected_waiters=[_decode_waiter(serializer, w) for w in d["collected_waiters"]],
        collection_release_payload=payload,
        scope_path=tuple(d["scope_path"]),
        work_item_id=d["work_item_id"],
        invocation_id=d["invocation_id"],
    )


def encode_retry(retry: RetryAttempt) -> dict[str, Any]:
    return {
        "retry_number": retry.retry_number,
        "first_attempt_at": retry.first_attempt_at,
        "last_exception": None if retry.last_exception is None else _serialize_exception(retry.last_exception),
        "last_failed_at": retry.last_failed_at,
        "recovery_counts": dict(retry.recovery_counts),
    }


def decode_retry(serializer: BaseSerializer, d: dict[str, Any]) -> RetryAttempt:
    with serializer.validation_context():
        exc = None if d["last_exception"] is None else _deserialize_exception(d["last_exception"])
    return RetryAttempt(
        retry_number=d["retry_number"],
        first_attempt_at=d["first_attempt_at"],
        last_exception=exc,
        last_failed_at=d["last_failed_at"],
        recovery_counts=dict(d["recovery_counts"]),
    )


def encode_outputs(outputs: list[StepWorkerOutput], serializer: BaseSerializer | None = None) -> list[dict[str, Any]]:
    """A step's results and recorded sends, each LlamaIndex's own model dumped to JSON.

    A plain ``StopEvent``'s ``result`` also goes through the serializer's ``serialize_value``
    (``stop_result``): the model dump turns events and models inside it into dicts, and the default
    runtime hands the caller the objects themselves.
    """
    encoded = []
    for item in outputs:
        kind = "sent" if isinstance(item, SentEvent) else item.type
        entry: dict[str, Any] = {"kind": kind, "data": item.model_dump(mode="json")}
        if (
            isinstance(item, StepWorkerResult)
            and type(item.result) is StopEvent
            and isinstance(serializer, JsonSerializer)
            and item.result.result is not None
        ):
            entry["stop_result"] = serializer.serialize_value(item.result.result)
        if isinstance(item, AddWaiter) and item.requirements and isinstance(serializer, JsonSerializer):
            # AddWaiter's own dump writes its requirements as {} (has_requirements=True), and a waiter with
            # no requirements takes any event of its type: they go beside it, as JSON, when they can.
            try:
                requirements = serializer.serialize_value(item.requirements)
                json.dumps(requirements)
            except Exception:
                pass
            else:
                entry["requirements"] = requirements
        encoded.append(entry)
    return encoded


def decode_outputs(serializer: BaseSerializer, data: list[dict[str, Any]]) -> list[StepWorkerOutput]:
    out: list[StepWorkerOutput] = []
    with serializer.validation_context():
        for item in data:
            model = _OUTPUT_KINDS[item["kind"]]
            decoded = model.model_validate(item["data"])
            if "stop_result" in item and isinstance(serializer, JsonSerializer):
                typed = StopEvent(result=serializer.deserialize_value(item["stop_result"]))
                decoded = decoded.model_copy(update={"result": typed})
            if "requirements" in item and isinstance(serializer, JsonSerializer):
                decoded = decoded.model_copy(
                    update={"requirements": serializer.deserialize_value(item["requirements"])}
                )
            out.append(decoded)  # type: ignore[arg-type]
    return out
