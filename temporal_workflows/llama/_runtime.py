"""How a LlamaIndex step runs on the engine: one step task, its invocations, their effects.

A step is an executor. The engine hands it a task: the events delivered to it
in one superstep (``kind="batch"`` when more than one: the executor is
``Topology.batched``), or the answer to a ``wait_for_event`` (``"response"``).
This module runs the step's function once per event, at most ``num_workers``
at a time, and turns what each invocation does into the task's
``StepResult``:

* the events it returns or sends answer the waits they match, then become
  deliveries to every step whose accepted events match (``_routing``: the
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

In process a run keeps the live Python objects next to their JSON
(:class:`LiveRun`): events, results and state values keep their identity and
type (a tuple stays a tuple, an LLM client need not serialize), and a step
waiting in ``wait_for_event`` stays suspended, so its work before the wait is
never repeated. On Temporal, or after ``Context.from_dict``, the waiting step
runs again from the top when its event arrives, replaying a journal: what it
read comes back the same, what it sent, streamed and wrote before the wait
is not done twice, and ``ctx.idempotency_key`` is the same as on the first
run, for side effects of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from temporal_workflows._engine.driver import STEP_ATTEMPTS, STEP_ELAPSED
from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import (
    EXECUTOR_STATE_PREFIX,
    REQUEST_TIMED_OUT_TYPE,
    Delivery,
    PendingRequest,
    StateWrite,
    StepResult,
    is_shared_key,
    shared_part,
)
from temporal_workflows._engine.serde import Envelope, decode, encode, json_schema, register_type, type_key
from temporal_workflows._errors import NotSerializableError, WorkflowError, class_path
from temporal_workflows._events import WorkflowEvent
from temporal_workflows._live import LiveEvent
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows.llama._routing import Wait, route_event, unhandled, waits_of_records
from temporal_workflows.llama.errors import WorkflowRuntimeError
from temporal_workflows.llama.events import (
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    StepFailedEvent,
    StepState,
    StepStateChanged,
    StopEvent,
    summarize_event,
)
from temporal_workflows.llama.retry_policy import RetryInfo, decide_retry
from temporal_workflows.temporal._protocol import STEP_ERROR_CLASS

if TYPE_CHECKING:
    from temporal_workflows._graph.context import WorkflowContext
    from temporal_workflows.llama._compile import Compiled, StepInfo

__all__ = [
    "UNSERIALIZABLE",
    "LiveRun",
    "LlamaFailedStreamEvent",
    "LlamaStreamEvent",
    "TaskRun",
    "WaitRequest",
    "waits_of_requests",
    "live_run",
    "run_task",
]

UNSERIALIZABLE = "temporal_workflows.llama:unserializable"
"""Type key of a value kept only as a live object (in process): it has no JSON form."""

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


@dataclass
class Parked:
    """An invocation suspended in ``wait_for_event`` (in process)."""

    invocation: Invocation
    future: asyncio.Future[Any]
    task: asyncio.Task[Any]


@dataclass
class LiveRun:
    """The live objects of one in-process run, by the envelopes that carry them."""

    values: dict[int, tuple[Envelope, Any]] = field(default_factory=dict)
    parked: dict[str, Parked] = field(default_factory=dict)
    publish: Callable[[Event], None] | None = None
    waiter_events: dict[str, Event] = field(default_factory=dict)
    """Waiter events to publish once their wait is committed, by request id."""
    """Hands a streamed event to the caller at once (the very object written), as LlamaIndex streams."""

    def put(self, env: Envelope, value: Any) -> None:
        self.values[id(env)] = (env, value)

    def get(self, env: Envelope) -> tuple[bool, Any]:
        found = self.values.get(id(env))
        if found is not None and found[0] is env:
            return True, found[1]
        return False, None

    def cancel_parked(self) -> None:
        for parked in self.parked.values():
            parked.task.cancel()
        self.parked.clear()


_LIVE: dict[str, LiveRun] = {}
"""In-process runs by run id (the in-process host registers its run here for the run's duration)."""


def live_run(run_id: str) -> LiveRun | None:
    return _LIVE.get(run_id)


def register_live(run_id: str, live: LiveRun) -> None:
    _LIVE[run_id] = live


def unregister_live(run_id: str) -> None:
    live = _LIVE.pop(run_id, None)
    if live is not None:
        live.cancel_parked()


def encode_value(value: Any, live: LiveRun | None, what: str) -> Envelope:
    """``value`` as an envelope; in process an unserializable value is kept as a live object only."""
    try:
        env = encode(value, what=what)
    except NotSerializableError:
        if live is None:
            raise
        env = Envelope(UNSERIALIZABLE, {"type": f"{type(value).__module__}.{type(value).__qualname__}"})
    if live is not None:
        live.put(env, value)
    return env


def decode_value(env: Envelope, live: LiveRun | None) -> Any:
    """The value an envelope carries: the live object in process if there is one."""
    if live is not None:
        found, value = live.get(env)
        if found:
            return value
    if env.type == UNSERIALIZABLE:
        from temporal_workflows.llama.errors import ContextSerdeError

        raise ContextSerdeError(
            f"a value of type {env.data.get('type') if isinstance(env.data, dict) else '?'} was kept only as a "
            "live object in the process that ran the step (it has no JSON form), and that object is gone"
        )
    return decode(env)


def event_json(event: Event, live: LiveRun | None, what: str) -> dict[str, Any]:
    return encode_value(event, live, what).to_json()


# -- a step task -------------------------------------------------------------------------------------------------

_current: contextvars.ContextVar[Invocation] = contextvars.ContextVar("temporal_workflows.llama.invocation")


def current_invocation() -> Invocation | None:
    return _current.get(None)


class _Park(BaseException):
    """Unwinds an invocation that waits for an event (when it cannot stay suspended): a BaseException, so a
    step's ``except Exception`` does not swallow it."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


class TaskRun:
    """One step task: its state overlay (shared by its invocations) and its result.

    Args:
        compiled: The workflow.
        info: The step.
        wctx: The engine's context of the task (its ``StepResult`` is what the task returns).
        state: Committed state at the boundary the task started from.
        live: The in-process run's live objects, or ``None`` (on Temporal).
    """

    def __init__(
        self,
        compiled: Compiled,
        info: StepInfo,
        wctx: WorkflowContext[Any, Any],
        state: Mapping[str, Envelope],
        live: LiveRun | None,
    ) -> None:
        self.compiled = compiled
        self.info = info
        self.wctx = wctx
        self.result = wctx._result  # the engine's StepResult this task fills (run_step returns it)
        self.committed = state
        self.live = live
        self.overlay: dict[str, Envelope | None] = {}
        self.lock = asyncio.Lock()
        self.private = f"{EXECUTOR_STATE_PREFIX}{info.name}/"
        self.stream_tasks: list[asyncio.Task[None]] = []
        self.written: list[dict[str, Any]] = []
        """Every stream write of this task (its ``{"type", "data"}``), in order (published live if the task fails:
        ``run_task``)."""
        self.loop = asyncio.get_running_loop()
        self._waits: list[Wait] | None = None

    # -- state ---------------------------------------------------------------------------------------------

    def read(self, key: str) -> Envelope | None:
        if key in self.overlay:
            return self.overlay[key]
        return self.committed.get(key)

    def write(self, key: str, value: Any) -> Envelope:
        env = encode_value(value, self.live, f"state key {key!r} written by step {self.info.name!r}")
        self.overlay[key] = env
        return env

    def write_env(self, key: str, env: Envelope | None) -> None:
        self.overlay[key] = env

    def state_keys(self) -> list[str]:
        keys = list(shared_part(self.committed))
        for k, v in shared_part(self.overlay).items():
            if v is None:
                if k in keys:
                    keys.remove(k)
            elif k not in keys:
                keys.append(k)
        return keys

    def value(self, env: Envelope) -> Any:
        return decode_value(env, self.live)

    def waits(self) -> list[Wait]:
        """The ``wait_for_event`` calls committed at the boundary this task started from."""
        waits = self._waits
        if waits is None:
            waits = self._waits = waits_of_records(waiter_records(self.committed))
        return waits

    # -- output ----------------------------------------------------------------------------------------------

    def finish(self) -> None:
        """Write the state overlay into the task's result."""
        for key, env in self.overlay.items():
            self.result.writes.append(StateWrite(key, env))


@dataclass
class Journal:
    """What a waiting invocation did before its wait, for a re-run to replay instead of redo."""

    reads: dict[str, Envelope | None] = field(default_factory=dict)
    waits: dict[str, Envelope] = field(default_factory=dict)
    collects: list[list[dict[str, Any]] | None] = field(default_factory=list)
    read_bytes: int = 0
    reads_complete: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "reads": {k: (None if v is None else v.to_json()) for k, v in self.reads.items()},
            "waits": {k: v.to_json() for k, v in self.waits.items()},
            "collects": self.collects,
            "reads_complete": self.reads_complete,
        }

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Journal:
        def env(d: Any) -> Envelope | None:
            return None if d is None else Envelope.from_json(d)

        waits = {k: env(v) for k, v in (raw.get("waits") or {}).items()}
        return Journal(
            reads={k: env(v) for k, v in (raw.get("reads") or {}).items()},
            waits={k: v for k, v in waits.items() if v is not None},
            collects=list(raw.get("collects") or []),
            reads_complete=bool(raw.get("reads_complete", True)),
        )


class Invocation:
    """One event handled by a step: its attempts, its effects, and (if it waits) its re-runs.

    Effects are buffered here and flushed into the task that is current when
    the invocation finishes or parks, so a failed attempt's messages and
    outputs are dropped, and a task's effects are written in event order.
    """

    def __init__(self, task: TaskRun, trigger: Event, index: int, key: str, worker: int) -> None:
        self.task = task
        self.trigger = trigger
        self.index = index
        self.key = key
        self.worker = worker
        self.sends: list[tuple[Envelope, tuple[str, ...], Event]] = []
        self.answers: list[tuple[str, Envelope]] = []
        self.output: Envelope | None = None
        self.stop_event: StopEvent | None = None
        self.requests: list[tuple[PendingRequest, dict[str, Any]]] = []
        self.waits_done = 0
        self.journal = Journal()
        self.replay: Journal | None = None
        self.replay_overlay: dict[str, Envelope | None] = {}
        self.resume: tuple[str, Envelope] | None = None
        self.collect_calls = 0
        self.attempt = 1
        self.first_attempt_at = time.time()
        self.last_exception: Exception | None = None
        self.last_failed_at: float | None = None
        self.waiting: tuple[str, asyncio.Future[Any]] | None = None
        self.parked_signal: asyncio.Future[None] | None = None
        self.done_lines: list[str] = []

    # -- replay (a re-run after wait_for_event) ---------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        return self.replay is not None

    def end_replay(self) -> None:
        self.replay = None
        self.replay_overlay = {}

    # -- state ---------------------------------------------------------------------------------------------

    def read(self, key: str) -> Envelope | None:
        replay = self.replay
        if replay is not None:
            if key in self.replay_overlay:
                return self.replay_overlay[key]
            if replay.reads_complete and key in replay.reads:
                return replay.reads[key]
        env = self.task.read(key)
        journal = self.journal
        if key not in journal.reads and journal.reads_complete:
            size = json_size(env.data) if env is not None else 0
            if journal.read_bytes + size > _JOURNAL_READS_MAX or (env is not None and env.type == UNSERIALIZABLE):
                journal.reads_complete = False
            else:
                journal.read_bytes += size
                journal.reads[key] = env
        return env

    def write(self, key: str, value: Any) -> None:
        if self.replay is not None:
            self.replay_overlay[key] = encode_value(value, self.task.live, f"state key {key!r}")
            return
        self.task.write(key, value)

    def delete(self, key: str) -> None:
        if self.replay is not None:
            self.replay_overlay[key] = None
            return
        self.task.write_env(key, None)

    def state_keys(self) -> list[str]:
        keys = self.task.state_keys()
        if self.replay is not None:
            for k, v in self.replay_overlay.items():
                if v is None and k in keys:
                    keys.remove(k)
                elif v is not None and k not in keys:
                    keys.append(k)
        return keys

    # -- events ----------------------------------------------------------------------------------------------

    def emit(self, event: Event, step: str | None) -> None:
        """Route ``event`` (sent or returned) at this invocation's end, as LlamaIndex does (``_routing``).

        It first answers every committed ``wait_for_event`` it matches, then
        goes to each step that accepts it (only ``step`` if given) and was not
        waiting for it; an event nothing takes is published as an
        ``UnhandledEvent`` (the step is still running: the run is not idle).
        """
        task = self.task
        compiled = task.compiled
        if step is not None:
            compiled.check_target(step, event)
        if self.replay is not None:
            return  # sent by the first run already
        route = route_event(compiled, event, task.waits(), step)
        if isinstance(event, StopEvent) and step is None and not route.handled:
            return  # LlamaIndex: a StopEvent sent (not returned) reaches no step
        if not route.handled:
            notice = unhandled(event, step, idle=False)
            if notice is not None:
                self.stream(notice)
            return
        env = encode_value(event, task.live, f"event {type(event).__name__} sent by step {task.info.name!r}")
        for rid in route.answers:
            self.answers.append((rid, env))
        if route.targets:
            self.sends.append((env, route.targets, event))

    def stream(
        self, event: Event | _StepStateJSON, *, waiter_of: str | None = None, even_replaying: bool = False
    ) -> None:
        """``write_event_to_stream``: a custom event of the task (at once; a failed attempt's stay).

        A waiter event (``waiter_of``: its request id) reaches an in-process
        caller only once the wait is committed (the host publishes it then), so
        that a ``to_dict()`` taken when the caller sees it already holds the
        wait, and an answer sent at once finds it. A re-run's own events
        (``even_replaying``: its ``StepStateChanged`` running) are new, not replayed.
        """
        if self.replay is not None and not even_replaying:
            return
        task = self.task
        try:
            in_loop = asyncio.get_running_loop() is task.loop
        except RuntimeError:
            in_loop = False
        if not in_loop:  # a plain ``def`` step runs in a thread: hand the event to the run's loop
            task.loop.call_soon_threadsafe(self.stream, event)
            return
        live = task.live
        if isinstance(event, _StepStateJSON):  # made by this runtime: its JSON is known, no need to encode it
            inner = {"type": _STEP_STATE_KEY, "data": event.data}
            if live is not None and live.publish is not None:
                live.publish(StepStateChanged(**event.data))
            task.written.append(inner)
            # What encode(wrapped) gives (tests/test_llama_step_state.py), in the order of the step's other writes:
            # at once when they have all joined the result (their tasks run in order), else after them.
            env = Envelope(_STREAM_KEY, {"type": "llama", "event": inner})
            if not task.stream_tasks or task.stream_tasks[-1].done():
                task.wctx._add_encoded_event(env)
            else:
                task.stream_tasks.append(asyncio.ensure_future(_add_later(task.wctx, env)))
            return
        wrapped = LlamaStreamEvent(event=event_json(event, live, f"event {type(event).__name__} written to the stream"))
        task.written.append(wrapped.event)
        if live is not None and waiter_of is not None:
            live.waiter_events[waiter_of] = event
        elif live is not None and live.publish is not None:
            live.publish(event)  # in process the caller gets it now; the run's record gets it below
        # add_event is the engine's live-event path; scheduled like LlamaIndex's own background write.
        task.stream_tasks.append(asyncio.ensure_future(task.wctx.add_event(wrapped)))

    def stop(self, event: StopEvent) -> None:
        if self.output is None:
            what = f"StopEvent returned by step {self.task.info.name!r}"
            self.output = encode_value(event, self.task.live, what)
            self.stop_event = event

    def discard_attempt(self) -> None:
        self.sends = []
        self.answers = []
        self.output = None
        self.stop_event = None

    # -- flushing into the current task --------------------------------------------------------------------

    def flush(self) -> None:
        task = self.task
        result = task.result
        name = task.info.name
        for env, targets, _ in self.sends:
            for target in targets:
                result.sent.append(Delivery.one(target, env, name))
        self.sends = []
        if self.output is not None:
            if not result.halt:
                result.outputs.append(self.output)
                result.halt = True
            self.output = None
        for req, record in self.requests:
            result.requests.append(req)
            task.write_env(f"{task.private}{WAIT_PREFIX}{req.request_id}", Envelope(None, record))
        self.requests = []
        result.answers.extend(self.answers)
        self.answers = []

    # -- retry info ------------------------------------------------------------------------------------------

    def retry_info(self) -> RetryInfo:
        retry = self.attempt - 1
        return RetryInfo(
            retry_number=retry,
            elapsed_seconds=max(0.0, time.time() - self.first_attempt_at) if retry else 0.0,
            last_exception=self.last_exception,
            last_failed_at=datetime.fromtimestamp(self.last_failed_at, tz=UTC) if self.last_failed_at else None,
        )

    # -- waits -----------------------------------------------------------------------------------------------

    async def wait_for(
        self,
        event_type: type[Event],
        waiter_event: Event | None,
        waiter_id: str | None,
        requirements: dict[str, Any] | None,
        timeout: float | None,
    ) -> Any:
        task = self.task
        requirements = dict(requirements or {})
        self.waits_done += 1
        waiter_key = waiter_id or f"{type_key(event_type)}:{_stable(requirements)}:{self.waits_done}"
        rid = hashlib.sha256(f"{self.key}/{waiter_key}".encode()).hexdigest()[:20]
        replay = self.replay
        if replay is not None:
            earlier = replay.waits.get(waiter_key)
            if earlier is not None:
                return self._resolved(earlier, event_type)
            if self.resume is not None and self.resume[0] == rid:
                response = self.resume[1]
                self.resume = None
                self.end_replay()
                self.journal.waits[waiter_key] = response
                return self._resolved(response, event_type)
            self.end_replay()  # the re-run took another path: from here on it runs for real
        if timeout is not None and not timeout > 0:
            raise WorkflowRuntimeError(f"wait_for_event timeout must be positive, got {timeout!r}")
        register_type(event_type)
        live = task.live
        ask = None
        # LlamaIndex ends the step's attempt at a wait (it runs again when the event comes): not_running first.
        self.stream(_step_state(self, StepState.NOT_RUNNING))
        if waiter_event is not None:
            ask = event_json(waiter_event, live, "waiter_event")
            self.stream(waiter_event, waiter_of=rid)
        request = WaitRequest(
            event_type=type_key(event_type), requirements=requirements, waiter_id=waiter_key, waiter_event=ask
        )
        req = PendingRequest(
            request_id=rid,
            executor_id=task.info.name,
            data=encode(request, what="wait_for_event request"),
            response_type=type_key(event_type),
            response_schema=_wait_schema(event_type, requirements),
            superstep=task.wctx.superstep,
            timeout=timeout,
            on_timeout="respond",
        )
        record = {
            "trigger": event_json(self.trigger, live, "the waiting step's trigger event"),
            "key": self.key,
            "waiter_key": waiter_key,
            "journal": self.journal.to_json(),
            "event_type": type_key(event_type),
            "requirements": requirements,
            "step": task.info.name,
        }
        self.requests.append((req, record))
        if live is None:
            raise _Park(rid)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting = (rid, future)
        signal = self.parked_signal
        if signal is not None and not signal.done():
            signal.set_result(None)  # tell the task running us that we are parked
        response = await future
        self.journal.waits[waiter_key] = response if isinstance(response, Envelope) else Envelope(None, None)
        if isinstance(response, BaseException):
            raise response
        return self._resolved(response, event_type)

    def _resolved(self, response: Envelope, event_type: type[Event]) -> Any:
        if response.type == REQUEST_TIMED_OUT_TYPE:
            raise TimeoutError(f"Timed out waiting for {event_type.__name__}")
        return decode_value(response, self.task.live)

    # -- collect_events ----------------------------------------------------------------------------------------

    def collect(self, event: Event, expected: list[type[Event]], buffer_id: str | None) -> list[Event] | None:
        if not expected:
            return []
        task = self.task
        call = self.collect_calls
        self.collect_calls += 1
        replay = self.replay
        if replay is not None and call < len(replay.collects):
            got = replay.collects[call]
            return None if got is None else [decode(Envelope.from_json(d)) for d in got]
        key = f"{task.private}{COLLECT_PREFIX}{buffer_id or 'default'}"
        env = self.read(key)
        buffered: list[Event] = list(task.value(env)) if env is not None else []
        remaining = list(expected)
        for e in buffered:
            if type(e) in remaining:
                remaining.remove(type(e))
        if remaining != [type(event)]:
            if type(event) in remaining:
                self.write(key, [*buffered, event])
            self.journal.collects.append(None)
            return None
        pool = [*buffered, event]
        out: list[Event] = []
        for tp in expected:
            for i, e in enumerate(pool):
                if type(e) is tp:
                    out.append(pool.pop(i))
                    break
        self.delete(key)
        self.journal.collects.append([event_json(e, None, "collected event") for e in out])
        return out


def _stable(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    except Exception:
        return repr(value)


# -- running a task ----------------------------------------------------------------------------------------------


def _as_event(info: StepInfo, value: Any) -> Event:
    """A trigger as an event: plain JSON from outside (a CLI start) validates as the step's one event type."""
    if isinstance(value, Event):
        return value
    candidates = [t for t in info.config.accepted_events if isinstance(t, type) and issubclass(t, Event)]
    errors: list[str] = []
    for tp in candidates:
        try:
            return tp.model_validate(value)
        except Exception as e:
            errors.append(f"{tp.__name__}: {e}")
    raise WorkflowRuntimeError(
        f"step {info.name!r} got a {type(value).__name__} it cannot read as one of "
        f"{[t.__name__ for t in candidates]}: {'; '.join(errors)}"
    )


async def run_task(
    compiled: Compiled,
    info: StepInfo,
    wctx: WorkflowContext[Any, Any],
    state: Mapping[str, Envelope],
    triggers: Sequence[Any],
    resume: tuple[PendingRequest, Envelope] | None,
    live: LiveRun | None,
) -> None:
    """Run one step task: every trigger event (or the resumption of a waiting invocation)."""
    task = TaskRun(compiled, info, wctx, state, live)
    invocations: list[Invocation] = []
    try:
        if resume is not None:
            await _resume(task, resume)
        else:
            events = [_as_event(info, t) for t in triggers]
            base = wctx.idempotency_key
            keys = [base] if len(events) == 1 else [f"{base}/{i}" for i in range(len(events))]
            invocations = [Invocation(task, ev, i, keys[i], 0) for i, ev in enumerate(events)]
            await _run_all(task, invocations)
    except Exception:
        if task.written:
            # The failed step has no result to carry its writes, so they go out live, before the failure: on
            # Temporal to every reader; in process (``live`` gave each to the caller at once) to the run's
            # record only (``LocalRun.run_one``), so both hosts' records show them alike.
            if task.stream_tasks:
                await asyncio.gather(*task.stream_tasks, return_exceptions=True)
            for event in task.written:
                wctx._publish_live(LlamaFailedStreamEvent(event=event))
        raise
    finally:
        if task.stream_tasks:
            await asyncio.gather(*task.stream_tasks)
    _order_events_first(task.result)
    task.finish()


def _order_events_first(result: StepResult) -> None:
    """A step's stream writes read before what it sent, returned or asked (``StepResult.emitted``).

    LlamaIndex publishes a stream write as it happens, while a step's events
    are flushed when it ends (and a re-run replays its writes from a journal),
    so on every host a step's events come first, then its sends, its
    ``StopEvent`` and its waits, each in the order it made them.
    """
    sends = ["s1"] * len(result.sent)  # one delivery per send, as the step flushed them
    result.emitted = ["e"] * len(result.events) + sends + ["o"] * len(result.outputs) + ["r"] * len(result.requests)


async def _run_all(task: TaskRun, invocations: list[Invocation]) -> None:
    """Run a task's invocations, ``num_workers`` at a time; flush their effects in the order they finished.

    As in LlamaIndex, what happened decides: events reach the next steps (a
    ``collect_events`` among them) in the order the invocations emitted them,
    and the first invocation to return a ``StopEvent`` ends the step's race:
    the task's other invocations still running are cancelled (their effects
    dropped, what they streamed stays), so the run's result is the first to
    finish, and nobody waits for (or pays for) the losers. The order is the
    step's own, made where the step runs: on Temporal inside its activity,
    whose result history records, so a replay reads the same order.
    """
    workers = task.info.config.num_workers
    if len(invocations) == 1:
        await _run_one(invocations[0])
        invocations[0].flush()
        return
    free = list(range(min(workers, len(invocations))))
    slots = asyncio.Semaphore(len(free))
    finished: list[Invocation] = []
    runs: dict[int, asyncio.Task[None]] = {}

    async def run(inv: Invocation) -> None:
        if slots.locked():  # every worker is busy: LlamaIndex queues the event (``preparing``)
            inv.stream(_step_state(inv, StepState.PREPARING))
        async with slots:
            inv.worker = free.pop(0)
            try:
                await _run_one(inv)
            finally:
                free.append(inv.worker)
                free.sort()
        finished.append(inv)
        if inv.output is not None:  # the first StopEvent returned: the race is over
            for i, other in runs.items():
                if i != inv.index and not other.done():
                    other.cancel()

    runs = {inv.index: asyncio.ensure_future(run(inv)) for inv in invocations}
    outcome = await asyncio.gather(*runs.values(), return_exceptions=True)
    for o in outcome:
        if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError):
            raise o
    for inv in finished:
        inv.flush()


async def _run_one(inv: Invocation) -> None:
    """Run an invocation; in process one that waits stays suspended (parked) and this returns.

    On both hosts the invocation runs in a task of its own, so a task's
    invocations interleave alike in process and in the step's activity (the
    order their ``StepStateChanged`` events, sends and results come in).
    """
    done = asyncio.ensure_future(_in_context(inv))
    await _until_done_or_parked(inv, done)
    _print_done(inv)


async def _in_context(inv: Invocation) -> None:
    token = _current.set(inv)
    try:
        if inv.task.live is None:  # on Temporal a wait ends the attempt (the step runs again when answered)
            with contextlib.suppress(_Park):
                await _attempts(inv)
        else:
            await _attempts(inv)
    finally:
        _current.reset(token)


async def _until_done_or_parked(inv: Invocation, done: asyncio.Future[None]) -> None:
    """Wait for the invocation to finish, or to park in ``wait_for_event`` (then it lives on, suspended)."""
    loop = asyncio.get_running_loop()
    while True:
        signal: asyncio.Future[None] = loop.create_future()
        inv.parked_signal = signal
        try:
            await asyncio.wait({done, signal}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            done.cancel()  # a sibling's StopEvent ended the race: the step itself stops too
            raise
        inv.parked_signal = None
        if done.done():
            done.result()
            return
        waiting = inv.waiting
        if waiting is not None:
            live = inv.task.live
            assert live is not None
            live.parked[waiting[0]] = Parked(inv, waiting[1], done)  # type: ignore[arg-type]
            return


async def _resume(task: TaskRun, resume: tuple[PendingRequest, Envelope]) -> None:
    """A waiting invocation's event (or timeout) arrived: resume it, or re-run it from the top."""
    request, response = resume
    rid = request.request_id
    record_key = f"{task.private}{WAIT_PREFIX}{rid}"
    record_env = task.read(record_key)
    task.write_env(record_key, None)
    live = task.live
    parked = live.parked.pop(rid, None) if live is not None else None
    if parked is not None:
        inv = parked.invocation
        inv.task = task
        inv.waiting = None
        inv.stream(_step_state(inv, StepState.RUNNING))  # it runs again, as LlamaIndex re-runs a waiting step
        parked.future.set_result(response)
        await _until_done_or_parked(inv, parked.task)
        _print_done(inv)
        inv.flush()
        return
    if record_env is None or not isinstance(record_env.data, dict):
        raise WorkflowError(f"step {task.info.name!r}: the record of wait {rid!r} is missing from the run's state")
    record = record_env.data
    trigger = _as_event(task.info, decode(Envelope.from_json(record["trigger"])))
    inv = Invocation(task, trigger, 0, str(record["key"]), 0)
    inv.replay = Journal.from_json(record.get("journal") or {})
    inv.resume = (rid, response)
    await _run_one(inv)
    inv.flush()


async def _attempts(inv: Invocation) -> None:
    """Run the step function until it succeeds, or its retry policy gives up."""
    task = inv.task
    info = task.info
    compiled = task.compiled
    policy = info.config.retry_policy
    while True:
        compiled.verbose_line(f"[{info.name}:{inv.worker}] started from {type(inv.trigger).__name__}")
        inv.stream(_step_state(inv, StepState.RUNNING), even_replaying=True)
        try:
            result = await compiled.call_step(info, inv)
        except (_Park, asyncio.CancelledError):
            raise
        except Exception as e:
            inv.stream(_step_state(inv, StepState.NOT_RUNNING))
            failed_at = time.time()
            delay = None
            if policy is not None and not isinstance(e, WorkflowRuntimeError):
                delay = decide_retry(policy, failed_at - inv.first_attempt_at, inv.attempt, e)
            if delay is None:
                if await _recover(inv, e, failed_at):
                    return
                _fail(e, inv.attempt, max(0.0, failed_at - inv.first_attempt_at))
            inv.discard_attempt()
            inv.last_exception, inv.last_failed_at = e, failed_at
            inv.attempt += 1
            inv.journal = Journal()
            inv.waits_done = 0
            inv.collect_calls = 0
            await asyncio.sleep(delay or 0.0)
            continue
        _handle_result(inv, result)
        return


_STEP_STATE_KEY = type_key(StepStateChanged)
_STREAM_KEY = type_key(LlamaStreamEvent)


async def _add_later(wctx: WorkflowContext[Any, Any], env: Envelope) -> None:
    wctx._add_encoded_event(env)


@dataclass(frozen=True, slots=True)
class _StepStateJSON:
    """A ``StepStateChanged`` as the JSON of its fields (what ``event_json`` would make of it, without pydantic)."""

    data: dict[str, Any]


def _step_state(inv: Invocation, state: StepState, output: Any = None, *, returned: bool = False) -> _StepStateJSON:
    """LlamaIndex's ``StepStateChanged`` for an attempt of ``inv`` (``stream_events(expose_internal=True)``).

    Written to the step's stream like ``write_event_to_stream``, so both hosts
    carry it the same way: live to an in-process caller, and in the step's
    result (its custom events, in the order the step made them) on Temporal.
    The names are LlamaIndex's own, quirks included: ``running`` and
    ``preparing`` (no worker free: ``<enqueued>``) name the input event's
    class, ``not_running`` gives ``str()`` of the input and output classes
    (``"<class 'NoneType'>"`` for a step that returned ``None``; no output
    for a failed attempt).
    """
    named = state is not StepState.NOT_RUNNING
    return _StepStateJSON(
        {
            "name": inv.task.info.name,
            "step_state": state.value,
            "worker_id": "<enqueued>" if state is StepState.PREPARING else str(inv.worker),
            "input_event_name": type(inv.trigger).__name__ if named else str(type(inv.trigger)),
            "output_event_name": str(type(output)) if returned else None,
        }
    )


def _handle_result(inv: Invocation, result: Any) -> None:
    info = inv.task.info
    if result is None or isinstance(result, Event):
        inv.stream(_step_state(inv, StepState.NOT_RUNNING, result, returned=True))
    if result is None:
        inv.done_lines.append(f"[{info.name}:{inv.worker}] complete with no result")
        return
    if not isinstance(result, Event):
        raise WorkflowRuntimeError(
            f"Step function {info.name} returned {type(result).__name__} instead of an Event instance."
        )
    if isinstance(result, StopEvent):
        inv.done_lines.append(f"[result] {summarize_event(result)}")
        inv.stop(result)
    else:
        if isinstance(result, InputRequiredEvent):
            inv.stream(result)  # returned input requests are streamed, as in LlamaIndex
        inv.emit(result, None)
    inv.done_lines.append(f"[{info.name}:{inv.worker}] complete with {type(result).__name__}")


def _print_done(inv: Invocation) -> None:
    """Verbose lines of a finished invocation, printed by its task once it is done (LlamaIndex's order)."""
    compiled = inv.task.compiled
    for line in inv.done_lines:
        compiled.verbose_line(line)
    inv.done_lines = []


async def _recover(inv: Invocation, error: Exception, failed_at: float) -> bool:
    """Hand a failed invocation to the step's ``@catch_error`` handler, if it has one left to spend."""
    task = inv.task
    handler = task.compiled.catch_error_for(task.info.name)
    if handler is None:
        return False
    key = f"{EXECUTOR_STATE_PREFIX}{task.info.name}/{RECOVERY_PREFIX}"
    env = inv.read(key)
    used = int(env.data) if env is not None and isinstance(env.data, int) else 0
    if used >= handler.config.catch_error_max_recoveries:
        return False
    inv.write(key, used + 1)
    event = StepFailedEvent(
        step_name=task.info.name,
        input_event=inv.trigger,
        exception=error,
        attempts=inv.attempt,
        elapsed_seconds=max(0.0, failed_at - inv.first_attempt_at),
        failed_at=datetime.fromtimestamp(failed_at, tz=UTC),
    )
    inv.discard_attempt()
    inv.emit(event, handler.name)
    return True


def _fail(error: Exception, attempts: int, elapsed: float) -> None:
    """A step failed for good, after ``attempts`` attempts over ``elapsed`` seconds (what LlamaIndex's
    ``WorkflowFailedEvent`` reports): on Temporal, never retry its activity (the policy has decided)."""
    if activity.in_activity() and not isinstance(error, (ApplicationError, WorkflowError)):
        details = {"attempts": attempts, "elapsed_seconds": elapsed, STEP_ERROR_CLASS: class_path(type(error))}
        raise ApplicationError(str(error), details, type=type(error).__name__, non_retryable=True) from error
    setattr(error, STEP_ATTEMPTS, attempts)
    setattr(error, STEP_ELAPSED, elapsed)
    raise error


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
