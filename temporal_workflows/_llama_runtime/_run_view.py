"""What the project's tools read of a LlamaIndex run: its status, its open requests, its store (pure workflow code).

Graph runs answer the ``status``, ``pending_requests`` and ``state`` queries; a LlamaIndex run answers
the same names with the same shapes where they mean the same (the package README lists each field), so
one client layer serves both kinds of run. Everything here is read from what the run holds: LlamaIndex's
broker state (its waiters, its running invocations), the ``InputRequiredEvent``s its loop published, and
the store. Nothing here issues a command.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.events import Event, HumanResponseEvent, InputRequiredEvent

    from temporal_workflows._engine.limits import truncated_requests, truncated_state

__all__ = ["MAX_WARNINGS", "RunBoard", "store_json"]

MAX_WARNINGS = 20
"""Warnings about unusable outside input the ``status`` query keeps (newest last)."""

WARNING_LIMIT = 500
"""Characters a warning keeps."""

MAX_REQUESTS_KEPT = 1000
"""Published ``InputRequiredEvent``s a run remembers (the oldest answered ones go first)."""


def _name(cls: type[Any]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _schema(cls: type[Any]) -> dict[str, Any]:
    try:
        schema: dict[str, Any] = cls.model_json_schema()
    except Exception:
        return {}
    return schema


@dataclasses.dataclass
class _Request:
    request_id: str
    data: Any
    """The event as JSON (``model_dump``), taken when it was published: what the query shows, and what a
    continued-as-new run carries (plain JSON: the next run needs no class to show it)."""
    request_type: str
    created_at: str
    waiter: tuple[str, str] | None = None
    """``(step, waiter_id)`` of the ``wait_for_event`` this event was published for, if any."""
    answered: bool = False

    def carried(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "data": self.data,
            "request_type": self.request_type,
            "created_at": self.created_at,
            "waiter": list(self.waiter) if self.waiter is not None else None,
        }

    @classmethod
    def from_carried(cls, d: dict[str, Any]) -> _Request:
        waiter = d.get("waiter")
        return cls(
            str(d["request_id"]),
            d.get("data"),
            str(d.get("request_type") or ""),
            str(d.get("created_at") or ""),
            (str(waiter[0]), str(waiter[1])) if waiter else None,
        )


def _dump(event: Event) -> Any:
    try:
        return event.model_dump(mode="json")
    except Exception:
        return None


class RunBoard:
    """The run's status, warnings and requests, as the queries answer them."""

    def __init__(self, warnings: list[dict[str, Any]] | None = None, requests: dict[str, Any] | None = None) -> None:
        self.status = "running"
        self.error: str | None = None
        self.error_type: str | None = None
        self.warnings: list[dict[str, Any]] = list(warnings or [])
        carried = requests or {}
        self._requests: list[_Request] = [_Request.from_carried(r) for r in carried.get("open") or []]
        self._seq = int(carried.get("seq") or 0)

    def carried_requests(self) -> dict[str, Any]:
        """The requests still open, for the run that continues this one as new (``RunInput.requests``): an
        ``InputRequiredEvent`` published before the continue-as-new is still a request after it."""
        return {"seq": self._seq, "open": [r.carried() for r in self._requests if not r.answered]}

    # -- warnings ---------------------------------------------------------------------------------
    def warn(self, message: str) -> None:
        """Outside input the run could not use: kept (bounded) for the ``status`` query, logged without values."""
        if len(message) > WARNING_LIMIT:
            message = message[: WARNING_LIMIT - 1] + "…"
        # The graph runs' warning shape: {message, request_id, executor_id}.
        warning = {"message": message, "request_id": None, "executor_id": None}
        self.warnings = [*self.warnings, warning][-MAX_WARNINGS:]
        # The log names what was dropped, never a value (it may be a secret the codec encrypts elsewhere).
        workflow.logger.warning("%s", message)

    # -- requests ---------------------------------------------------------------------------------
    def published(self, event: Event, waiters: list[tuple[str, Any]]) -> None:
        """The loop published ``event``; an ``InputRequiredEvent`` is a request until answered.

        ``waiters``: the run's open waiters now (``(step, StepWorkerWaiter)``): one no request names yet was
        added by the step result being reduced, which published this event as its ``waiter_event``.
        """
        if not isinstance(event, InputRequiredEvent):
            return
        linked = {r.waiter for r in self._requests if r.waiter is not None}
        fresh = [(step, w.waiter_id) for step, w in waiters if (step, w.waiter_id) not in linked]
        waiter = fresh[-1] if fresh else None
        self._seq += 1
        request_id = waiter[1] if waiter is not None else f"input-{self._seq}"
        self._requests.append(
            _Request(request_id, _dump(event), _name(type(event)), workflow.now().isoformat(), waiter)
        )
        while len(self._requests) > MAX_REQUESTS_KEPT:
            oldest = next((i for i, r in enumerate(self._requests) if r.answered), 0)
            del self._requests[oldest]

    def delivered(self, event: Event, response_types: list[type[Any]]) -> None:
        """An event reached the loop from outside: it answers the oldest open request it is a response to
        (requests a ``wait_for_event`` made close when their waiter is resolved)."""
        if not any(isinstance(event, t) for t in response_types):
            return
        for r in self._requests:
            if not r.answered and r.waiter is None:
                r.answered = True
                return

    def pending(
        self, waiters: list[tuple[str, Any]], response_types: list[type[Any]], payload_limit: int
    ) -> list[dict[str, Any]]:
        """Open requests, oldest first, as ``request_info`` records (graph runs' ``pending_requests`` shape)."""
        open_waiters = {(step, w.waiter_id): w for step, w in waiters if w.resolved_event is None and not w.timed_out}
        out: list[dict[str, Any]] = []
        named: set[tuple[str, str]] = set()
        for r in self._requests:
            if r.waiter is not None:
                w = open_waiters.get(r.waiter)
                if w is None:
                    continue
                named.add(r.waiter)
                out.append(self._record(r.request_id, r.waiter[0], r, [w.waiting_for_event], r.created_at))
            elif not r.answered:
                out.append(self._record(r.request_id, None, r, response_types, r.created_at))
        for key, w in open_waiters.items():
            if key not in named:  # wait_for_event with no InputRequiredEvent: still waiting for input
                out.append(self._record(w.waiter_id, key[0], None, [w.waiting_for_event], None))
        return truncated_requests(out, payload_limit)

    @staticmethod
    def _record(
        request_id: str, step: str | None, request: _Request | None, types: list[type[Any]], created_at: str | None
    ) -> dict[str, Any]:
        response = types[0] if len(types) == 1 else HumanResponseEvent
        record: dict[str, Any] = {
            "type": "request_info",
            "request_id": request_id,
            "source_executor_id": step or "",
            "data": request.data if request is not None else None,
            "request_type": request.request_type if request is not None else None,
            "response_type": _name(response),
            "response_schema": _schema(response),
        }
        if len(types) > 1:
            record["response_types"] = [_name(t) for t in types]
        if created_at is not None:
            record["created_at"] = created_at
        return record


def store_json(store: dict[str, Any] | None, payload_limit: int) -> dict[str, Any]:
    """``ctx.store`` (as the run holds it: LlamaIndex's state payload) as plain JSON: ``{key: value}`` for a
    ``DictState``, the model's fields for a typed state. A value plain JSON would change shows in its tagged
    form (``{"__tagged": {"type": "datetime", "data": ...}}``); a model as its fields."""
    if not store:
        return {}
    data = store.get("state_data")
    values: Any
    if isinstance(data, dict) and data.get("_tree") == "dict" and isinstance(data.get("_data"), dict):
        values = {k: _plain(v) for k, v in data["_data"].items()}  # the state tree: values as JSON already
    elif isinstance(data, dict) and data.get("_tree") == "model":
        values = _plain({k: v for k, v in data.items() if k != "_tree"})
    elif isinstance(data, dict) and isinstance(data.get("_data"), dict):
        values = {k: _plain(_parsed(v)) for k, v in data["_data"].items()}  # each value the serializer's string
    else:
        values = _plain(_parsed(data))
    if not isinstance(values, dict):
        values = {"state": values}
    out: dict[str, Any] = truncated_state(values, payload_limit)
    return out


def _parsed(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _plain(value: Any) -> Any:
    """LlamaIndex's ``{"__is_pydantic": true, "value": ..., "qualified_name": ...}`` records as their values."""
    if isinstance(value, dict):
        if value.get("__is_pydantic") and "value" in value:
            return _plain(value["value"])
        return {k: _plain(v) for k, v in value.items() if k != "__exact"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
