"""Running a LlamaIndex step task: its invocations, ``num_workers`` at a time, their retries and recoveries.

An invocation that waits in ``wait_for_event`` stays suspended in process
(parked) and is resumed with its event; elsewhere it runs again from the top,
replaying its journal. Retries follow the step's ``retry_policy``, the same
on both hosts; ``@catch_error`` handlers get what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from temporal_workflows._engine.driver import STEP_ATTEMPTS, STEP_ELAPSED
from temporal_workflows._engine.machine import (
    EXECUTOR_STATE_PREFIX,
    PendingRequest,
    StepResult,
)
from temporal_workflows._engine.serde import Envelope, decode
from temporal_workflows._errors import WorkflowError, class_path
from temporal_workflows.llama._invocations import Invocation, Journal, _current, _Park, _step_state
from temporal_workflows.llama._run_objects import Parked, RunObjects
from temporal_workflows.llama._runtime import RECOVERY_PREFIX, WAIT_PREFIX, LlamaFailedStreamEvent
from temporal_workflows.llama._tasks import TaskRun
from temporal_workflows.llama.errors import WorkflowRuntimeError
from temporal_workflows.llama.events import (
    Event,
    InputRequiredEvent,
    StepFailedEvent,
    StepState,
    StopEvent,
    summarize_event,
)
from temporal_workflows.llama.retry_policy import decide_retry
from temporal_workflows.temporal._protocol import STEP_ERROR_CLASS

if TYPE_CHECKING:
    from temporal_workflows._graph.context import WorkflowContext
    from temporal_workflows.llama._compile import Compiled, StepInfo

__all__ = ["run_task"]


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
    objects: RunObjects | None,
) -> None:
    """Run one step task: every trigger event (or the resumption of a waiting invocation)."""
    task = TaskRun(compiled, info, wctx, state, objects)
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
            # record only (``LlamaLocalRun.run_one``), so both hosts' records show them alike.
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
        if inv.task.objects is None:  # on Temporal a wait ends the attempt (the step runs again when answered)
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
            objects = inv.task.objects
            assert objects is not None
            objects.parked[waiting[0]] = Parked(inv, waiting[1], done)  # type: ignore[arg-type]
            return


async def _resume(task: TaskRun, resume: tuple[PendingRequest, Envelope]) -> None:
    """A waiting invocation's event (or timeout) arrived: resume it, or re-run it from the top."""
    request, response = resume
    rid = request.request_id
    record_key = f"{task.private}{WAIT_PREFIX}{rid}"
    record_env = task.read(record_key)
    task.write_env(record_key, None)
    objects = task.objects
    parked = objects.parked.pop(rid, None) if objects is not None else None
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
