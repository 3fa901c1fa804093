"""One event handled by a LlamaIndex step: its attempts, its effects, and the journal a re-run replays."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import (
    REQUEST_TIMED_OUT_TYPE,
    PendingRequest,
    RoutedMessage,
)
from temporal_workflows._engine.serde import Envelope, decode, encode, register_type, type_key
from temporal_workflows.llama._routing import route_event, unhandled
from temporal_workflows.llama._run_objects import decode_value, encode_value, event_json
from temporal_workflows.llama._runtime import (
    _JOURNAL_READS_MAX,
    COLLECT_PREFIX,
    UNSERIALIZABLE,
    WAIT_PREFIX,
    LlamaStreamEvent,
    WaitRequest,
    _wait_schema,
)
from temporal_workflows.llama._tasks import TaskRun
from temporal_workflows.llama.errors import WorkflowRuntimeError
from temporal_workflows.llama.events import (
    Event,
    StepState,
    StepStateChanged,
    StopEvent,
)
from temporal_workflows.llama.retry_policy import RetryInfo

if TYPE_CHECKING:
    from temporal_workflows._graph.context import WorkflowContext

    pass

__all__ = ["Invocation", "Journal", "current_invocation"]


_current: contextvars.ContextVar[Invocation] = contextvars.ContextVar("temporal_workflows.llama.invocation")


def current_invocation() -> Invocation | None:
    return _current.get(None)


class _Park(BaseException):
    """Unwinds an invocation that waits for an event (when it cannot stay suspended): a BaseException, so a
    step's ``except Exception`` does not swallow it."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


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
            self.replay_overlay[key] = encode_value(value, self.task.objects, f"state key {key!r}")
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
        env = encode_value(event, task.objects, f"event {type(event).__name__} sent by step {task.info.name!r}")
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
        objects = task.objects
        if isinstance(event, _StepStateJSON):  # made by this runtime: its JSON is known, no need to encode it
            inner = {"type": _STEP_STATE_KEY, "data": event.data}
            if objects is not None and objects.publish is not None:
                objects.publish(StepStateChanged(**event.data))
            task.written.append(inner)
            # What encode(wrapped) gives (tests/test_llama_step_state.py), in the order of the step's other writes:
            # at once when they have all joined the result (their tasks run in order), else after them.
            env = Envelope(_STREAM_KEY, {"type": "llama", "event": inner})
            if not task.stream_tasks or task.stream_tasks[-1].done():
                task.wctx._add_encoded_event(env)
            else:
                task.stream_tasks.append(asyncio.ensure_future(_add_later(task.wctx, env)))
            return
        wrapped = LlamaStreamEvent(
            event=event_json(event, objects, f"event {type(event).__name__} written to the stream")
        )
        task.written.append(wrapped.event)
        if objects is not None and waiter_of is not None:
            objects.waiter_events[waiter_of] = event
        elif objects is not None and objects.publish is not None:
            objects.publish(event)  # in process the caller gets it now; the run's record gets it below
        # add_event is the engine's live-event path; scheduled like LlamaIndex's own background write.
        task.stream_tasks.append(asyncio.ensure_future(task.wctx.add_event(wrapped)))

    def stop(self, event: StopEvent) -> None:
        if self.output is None:
            what = f"StopEvent returned by step {self.task.info.name!r}"
            self.output = encode_value(event, self.task.objects, what)
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
                result.sent.append(RoutedMessage.one(target, env, name))
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
        objects = task.objects
        ask = None
        # LlamaIndex ends the step's attempt at a wait (it runs again when the event comes): not_running first.
        self.stream(_step_state(self, StepState.NOT_RUNNING))
        if waiter_event is not None:
            ask = event_json(waiter_event, objects, "waiter_event")
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
            "trigger": event_json(self.trigger, objects, "the waiting step's trigger event"),
            "key": self.key,
            "waiter_key": waiter_key,
            "journal": self.journal.to_json(),
            "event_type": type_key(event_type),
            "requirements": requirements,
            "step": task.info.name,
        }
        self.requests.append((req, record))
        if objects is None:
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
        return decode_value(response, self.task.objects)

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
