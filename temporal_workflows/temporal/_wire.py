"""The JSON a step activity receives and returns: compact, readable, self-describing.

Every step is one activity, so its input and result are recorded in history
once each; their size is most of what a run costs in history bytes beyond
Temporal's own bookkeeping. The encoding keeps the field names of the
engine's dataclasses (so the Web UI stays readable and every older, fully
spelled-out payload still decodes) but leaves out what the other side
already knows:

* empty lists, ``None`` and default values (``"kind": "message"``,
  ``"type": null``, ``"on_timeout": "respond"``);
* what the activity's own identity says: the graph (the activity type), the
  executor (the activity type), the run id (the workflow id);
* a sent message's or an output's type when the step's input has it (its
  index there: a loop sends on what it got), and a task's index when it is 0;
* what the pinned topology derives: a sent message's source is the step's
  executor, and its fan-in group is the one group joining that source to
  that target (spelled out only when that is ambiguous or not the case);
* a request's executor and superstep, which are the step's;
* the order the step did things in, when it differs from the default only in
  where its sends are (they publish no event of their own).

Committed state rides inline only while it is small (see ``StepInput``);
otherwise the input names the state version and the activity reads it from
its worker's cache, so no value is recorded twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from temporal_workflows._engine.machine import (
    FanInGroup,
    PendingRequest,
    RoutedMessage,
    StateWrite,
    StepResult,
    StepTask,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._protocol import StepInput

__all__ = [
    "decode_step_input",
    "decode_step_result",
    "encode_step_input",
    "encode_step_result",
]


def _encode_request(req: PendingRequest, *, executor_id: str | None, superstep: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"request_id": req.request_id}
    if req.executor_id != executor_id:
        out["executor_id"] = req.executor_id
    out["data"] = req.data.to_json(compact=True)
    out["response_type"] = req.response_type
    if req.response_schema:
        out["response_schema"] = req.response_schema
    if req.superstep != superstep:
        out["superstep"] = req.superstep
    if req.timeout is not None:
        out["timeout"] = req.timeout
    if req.on_timeout != "respond":
        out["on_timeout"] = req.on_timeout
    if req.created_at is not None:
        out["created_at"] = req.created_at
    if req.deadline is not None:
        out["deadline"] = req.deadline
    return out


def _decode_request(raw: Mapping[str, Any], *, executor_id: str | None, superstep: int | None) -> PendingRequest:
    return PendingRequest(
        request_id=raw["request_id"],
        executor_id=raw.get("executor_id", executor_id),
        data=Envelope.from_json(raw["data"]),
        response_type=raw["response_type"],
        response_schema=raw.get("response_schema") or {},
        superstep=raw.get("superstep", superstep),
        timeout=raw.get("timeout"),
        on_timeout=raw.get("on_timeout", "respond"),
        created_at=raw.get("created_at"),
        deadline=raw.get("deadline"),
    )


def encode_step_input(inp: StepInput) -> dict[str, Any]:
    """The activity input of one step (``inp.state`` ``None``: fetch ``inp.state_version``)."""
    task = inp.task
    out: dict[str, Any] = {"superstep": task.superstep}
    if task.index:
        out["index"] = task.index
    if task.kind != "message":
        out["kind"] = task.kind
    out["messages"] = [m.to_json(compact=True) for m in task.messages]
    if any(s is not None for s in task.source_ids) or len(task.source_ids) != len(task.messages):
        out["source_ids"] = list(task.source_ids)
    if task.request is not None:
        out["request"] = _encode_request(task.request, executor_id=task.executor_id, superstep=None)
    if inp.state is None:
        out["state_version"] = inp.state_version
    elif inp.state:
        out["state"] = {k: v.to_json(compact=True) for k, v in inp.state.items()}
    if inp.epoch:
        out["epoch"] = inp.epoch
    if inp.signature:
        out["signature"] = inp.signature
    if inp.streaming is not None:
        out["stream"] = inp.streaming
    if inp.invocation_kwargs:
        out["invocation_kwargs"] = inp.invocation_kwargs
    return out


def decode_step_input(raw: Mapping[str, Any], executor_id: str) -> StepInput:
    """A step activity's input, for the executor the activity runs.

    Accepts the older, fully spelled-out form too (``{"graph", "task": {...},
    "run_id", "state_version", "state"}``), which a step scheduled by an older
    worker may still carry.
    """
    t: Mapping[str, Any] = raw.get("task", raw)
    messages = tuple(Envelope.from_json(m) for m in t["messages"])
    sources = t.get("source_ids")
    request = t.get("request")
    task = StepTask(
        superstep=t["superstep"],
        index=t.get("index", 0),
        executor_id=t.get("executor_id", executor_id),
        kind=cast(Literal["message", "fan_in", "response"], t.get("kind", "message")),
        messages=messages,
        source_ids=tuple(sources) if sources is not None else (None,) * len(messages),
        request=_decode_request(request, executor_id=executor_id, superstep=None) if request is not None else None,
    )
    state: dict[str, Envelope] | None
    if "task" in raw:  # the older form: state null means "fetch it"
        state = None if raw.get("state") is None else {k: Envelope.from_json(v) for k, v in raw["state"].items()}
    elif "state_version" in raw:
        state = None
    else:
        state = {k: Envelope.from_json(v) for k, v in raw.get("state", {}).items()}
    stream = raw.get("stream")
    return StepInput(
        task,
        raw.get("state_version", ""),
        state,
        raw.get("epoch", 0),
        raw.get("signature", ""),
        stream if isinstance(stream, bool) else None,
        kwargs if isinstance(kwargs := raw.get("invocation_kwargs"), dict) else None,
    )


def _by_input(env: Envelope, task: StepTask) -> dict[str, Any]:
    """``Envelope.to_json``, but a type the step's input has is its index there (a loop sends what it got)."""
    if env.type is not None:
        for i, m in enumerate(task.messages):
            if m.type == env.type:
                return {"type": i, "data": env.data}
    return env.to_json(compact=True)


def _from_input(raw: Mapping[str, Any], task: StepTask) -> Envelope:
    """The inverse of :func:`_by_input`."""
    kind = raw.get("type")
    if isinstance(kind, int) and not isinstance(kind, bool):
        return Envelope(task.messages[kind].type, raw.get("data"))
    return Envelope.from_json(raw)


def _derived_fan_in(groups: Mapping[str, FanInGroup], source_id: str | None, target_id: str) -> str | None:
    """The one fan-in group joining ``source_id`` to ``target_id``, if exactly one does."""
    found = [g.id for g in groups.values() if g.target == target_id and source_id in g.sources]
    return found[0] if len(found) == 1 else None


def encode_step_result(result: StepResult, task: StepTask, fan_in_groups: Mapping[str, FanInGroup]) -> dict[str, Any]:
    """What a step did, as its activity returns it (empty parts left out)."""
    out: dict[str, Any] = {}
    if result.writes:
        out["writes"] = [
            {"key": w.key} if w.value is None else {"key": w.key, "value": w.value.to_json(compact=True)}
            for w in result.writes
        ]
    if result.sent:
        sent: list[dict[str, Any]] = []
        for d in result.sent:
            item: dict[str, Any] = {"target_id": d.target_id, "messages": [_by_input(m, task) for m in d.messages]}
            if d.source_ids != (task.executor_id,) * len(d.messages):
                item["source_ids"] = list(d.source_ids)
            source = d.source_ids[0] if d.source_ids else None
            if d.fan_in != _derived_fan_in(fan_in_groups, source, d.target_id):
                item["fan_in"] = d.fan_in
            sent.append(item)
        out["sent"] = sent
    if result.outputs:
        out["outputs"] = [_by_input(o, task) for o in result.outputs]
    if result.requests:
        out["requests"] = [
            _encode_request(r, executor_id=task.executor_id, superstep=task.superstep) for r in result.requests
        ]
    if result.events:
        out["events"] = [e.to_json(compact=True) for e in result.events]
    if result.unrouted:
        out["unrouted"] = [m.to_json(compact=True) for m in result.unrouted]
    if result.emitted and not _same_events(result.emitted, _default_order(result)):
        # The order the step did things in (for its events), unless it is the order derived anyway.
        out["emitted"] = list(result.emitted)
    return out


def _default_order(result: StepResult) -> list[str]:
    return StepResult(result.writes, result.sent, result.outputs, result.requests, result.events).production_order()


def _same_events(emitted: list[str], default: list[str]) -> bool:
    """Whether ``emitted`` publishes what ``default`` does, in the same order.

    A send publishes no event (the driver lists sent messages in the step's
    ``executor_completed``, in the order of the sends), so where the sends
    sit among the outputs, events and requests does not matter; their own
    order and counts do.
    """
    sends = [c for c in emitted if c.startswith("s")]
    return sends == [c for c in default if c.startswith("s")] and [c for c in emitted if not c.startswith("s")] == [
        c for c in default if not c.startswith("s")
    ]


def decode_step_result(raw: Mapping[str, Any], task: StepTask, fan_in_groups: Mapping[str, FanInGroup]) -> StepResult:
    """The inverse of :func:`encode_step_result`; also reads the older, fully spelled-out form."""
    sent: list[RoutedMessage] = []
    for d in raw.get("sent") or ():
        messages = tuple(_from_input(m, task) for m in d["messages"])
        sources = d.get("source_ids")
        source_ids: tuple[str | None, ...] = (
            tuple(sources) if sources is not None else (task.executor_id,) * len(messages)
        )
        fan_in = (
            d["fan_in"]
            if "fan_in" in d
            else _derived_fan_in(fan_in_groups, source_ids[0] if source_ids else None, d["target_id"])
        )
        sent.append(RoutedMessage(d["target_id"], messages, source_ids, fan_in))
    return StepResult(
        writes=[
            StateWrite(w["key"], Envelope.from_json(w["value"]) if w.get("value") is not None else None)
            for w in raw.get("writes") or ()
        ],
        sent=sent,
        outputs=[_from_input(o, task) for o in raw.get("outputs") or ()],
        requests=[
            _decode_request(r, executor_id=task.executor_id, superstep=task.superstep)
            for r in raw.get("requests") or ()
        ],
        events=[Envelope.from_json(e) for e in raw.get("events") or ()],
        emitted=[str(c) for c in raw.get("emitted") or ()],
        unrouted=[Envelope.from_json(m) for m in raw.get("unrouted") or ()],
    )
