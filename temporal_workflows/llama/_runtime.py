"""How a LlamaIndex step runs on the engine: one step task, its invocations, their effects.

A step is an executor. The engine hands it a task: the events delivered to it
in one superstep (``kind="batch"`` when more than one: the executor is
``Topology.batched``), or the answer to a ``wait_for_event`` (``"response"``).
This module runs the step's function once per event, at most ``num_workers``
at a time, and turns what each invocation does into the task's
``StepResult``:

* the events it returns or sends answer the waits they match, then become
  routed messages to every step whose accepted events match (``_routing``: the
  one rule every sender follows; routing happens here, in the sending step,
  as for graphs); an event nothing takes is streamed as ``UnhandledEvent``;
* a ``StopEvent`` becomes the run's output and ends the run (``halt``);
* ``write_event_to_stream`` becomes a custom event (``ctx.add_event``);
* store writes become state writes (one key per state field, or per key of
  the untyped ``DictState``), visible at once to the other invocations of
  the task and to the other steps at the commit;
* ``collect_events`` buffers in the step's private state;
* ``wait_for_event`` becomes a pending request (a durable wait on Temporal).

Effects of one task are written in the order its invocations finished (as
LlamaIndex emits them), and the first to return a ``StopEvent`` cancels the
others: decided where the step runs (on Temporal inside its activity, whose
recorded result fixes it for replays). Retries (the step's
``retry_policy``) run here, the same on both hosts.

In process a run keeps the Python objects next to their JSON
(:class:`RunObjects`): events, results and state values keep their identity and
type (a tuple stays a tuple, an LLM client need not serialize), and a step
waiting in ``wait_for_event`` stays suspended, so its work before the wait is
never repeated. On Temporal, or after ``Context.from_dict``, the waiting step
runs again from the top when its event arrives, replaying a journal: what it
read comes back the same, what it sent, streamed and wrote before the wait
is not done twice, and ``ctx.idempotency_key`` is the same as on the first
run, for side effects of its own.

The parts, one module each: the wire types and constants here (their type
keys are in recorded histories and checkpoints, so they stay in this module);
``_run_objects`` (the in-process registry of a run's Python objects), ``_tasks``
(:class:`TaskRun`), ``_invocations`` (:class:`Invocation` and its journal),
``_scheduling`` (running a task's invocations, retries, recoveries).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from temporal_workflows._engine.machine import (
    REQUEST_TIMED_OUT_TYPE,
    PendingRequest,
    is_shared_key,
)
from temporal_workflows._engine.serde import Envelope, decode, json_schema, register_type
from temporal_workflows._events import WorkflowEvent
from temporal_workflows._live import LiveEvent
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows.llama._routing import Wait
from temporal_workflows.llama.events import (
    HumanResponseEvent,
)

if TYPE_CHECKING:
    pass


__all__ = [
    "COLLECT_PREFIX",
    "LlamaFailedStreamEvent",
    "LlamaStreamEvent",
    "RECOVERY_PREFIX",
    "UNSERIALIZABLE",
    "WAIT_PREFIX",
    "WaitRequest",
    "check_timeout",
    "timed_out",
    "waiter_records",
    "waits_of_requests",
]

UNSERIALIZABLE = "temporal_workflows.llama:unserializable"
"""Type key of a value kept only as a Python object (in process): it has no JSON form."""

WAIT_PREFIX = "llama.wait."
COLLECT_PREFIX = "llama.collect."
RECOVERY_PREFIX = "llama.recoveries"
_JOURNAL_READS_MAX = 256 * 1024
"""Bytes of values a waiting step's journal records; past it, a re-run reads the current values."""


def _wait_schema(event_type: type, requirements: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON schema of the event a ``wait_for_event`` accepts, as an answer must be written.

    ``HumanResponseEvent`` declares no fields (LlamaIndex's neither), but its
    answer is conventionally ``{"response": ...}``; the wait's requirements are
    fields the answer must carry with those values. A reader (the CLI's respond
    hint) then shows ``{"response": <string>, "kind": "approval"}``, not ``<object>``.
    """
    schema = dict(json_schema(event_type))
    props = dict(schema.get("properties") or {})
    required = list(schema.get("required") or [])
    if issubclass(event_type, HumanResponseEvent) and "response" not in props:
        props["response"] = {"type": "string"}
        required.append("response")
    for name, value in (requirements or {}).items():
        with contextlib.suppress(TypeError, ValueError):
            json.dumps(value)
            props[name] = {"const": value}
            if name not in required:
                required.append(name)
    if props:
        schema["properties"], schema["required"] = props, required
    return schema


class LlamaStreamEvent(WorkflowEvent):
    """An event a step wrote with ``write_event_to_stream`` (or a waiter event), as the run streams it.

    Attributes:
        event: The LlamaIndex event as ``{"type": "module:Class", "data": {...}}``.
    """

    type: str = "llama"
    event: dict[str, Any]


class WaitRequest(BaseModel):
    """What a pending ``wait_for_event`` request says (the ``pending_requests`` query shows it).

    Attributes:
        event_type: ``"module:Class"`` of the awaited event.
        requirements: Field values the event must have.
        waiter_id: The waiter's id (``waiter_id=``, or derived).
        waiter_event: The event streamed to ask for it, if any, as ``{"type", "data"}``.
    """

    event_type: str
    requirements: dict[str, Any] = {}
    waiter_id: str
    waiter_event: dict[str, Any] | None = None


class LlamaFailedStreamEvent(LiveEvent):
    """What a step that failed had written to the stream, published live as its step fails.

    A step's stream writes normally join the run's stream with the step's
    result (the run's host records them when the step completes). LlamaIndex
    publishes each write at once, so its reader sees a failing step's writes,
    then the failure; on a host that runs the step apart from its reader
    (Temporal) the failed step has no result to carry them, so they are sent
    as live events before the failure is reported, tagged (as every live
    item) with the step and the attempt that wrote them.

    Attributes:
        event: The LlamaIndex event as ``{"type": "module:Class", "data": {...}}``.
    """

    type: str = "llama_failed_stream"
    event: dict[str, Any]


register_type(LlamaStreamEvent)
register_type(LlamaFailedStreamEvent)
register_type(WaitRequest)


def waits_of_requests(pending: Iterable[PendingRequest]) -> list[Wait]:
    """The waits among a run's pending requests (what a host sees at a boundary)."""
    out: list[Wait] = []
    for req in pending:
        try:
            wait = decode(req.data)
        except Exception:
            continue
        if isinstance(wait, WaitRequest):
            out.append(Wait(req.request_id, req.executor_id, wait.event_type, wait.requirements))
    return out


# -- live values (in process) -----------------------------------------------------------------------------------


def check_timeout(value: Any) -> float | None:
    if value is None:
        return None
    return float(value)


def waiter_records(state: Mapping[str, Envelope]) -> list[tuple[str, dict[str, Any]]]:
    """``(request id, record)`` of every waiting invocation in committed state."""
    out: list[tuple[str, dict[str, Any]]] = []
    for key, env in state.items():
        if not is_shared_key(key) and WAIT_PREFIX in key and isinstance(env.data, dict):
            out.append((key.rsplit(WAIT_PREFIX, 1)[1], env.data))
    return out


def timed_out(response: Any) -> bool:
    return isinstance(response, RequestTimedOut) or (
        isinstance(response, Envelope) and response.type == REQUEST_TIMED_OUT_TYPE
    )
