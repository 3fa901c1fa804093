"""A LlamaIndex run in process: the superstep driver, hosted the way LlamaIndex runs live.

The graph API's in-process runner returns to its caller when a run goes
idle (Agent Framework's model: the caller answers with another ``run()``).
A LlamaIndex run instead lives until a step returns a ``StopEvent`` (or it
times out, fails or is cancelled), and takes events from outside while it
runs (``handler.ctx.send_event``). This host gives the same driver and
engine that lifecycle: it waits for outside events when idle, delivers them
at the next superstep boundary (answering matching ``wait_for_event`` requests
first), and enforces ``Workflow(timeout=...)``. Every semantic rule (delivery,
commit, requests, halting) stays in the engine and driver, as on Temporal.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from temporal_workflows._checkpoints.base import WorkflowCheckpoint
from temporal_workflows._engine.driver import DriverHost, StepFailure, StepOutcome, SuperstepDriver
from temporal_workflows._engine.inbound import Inbound, Route, apply
from temporal_workflows._engine.limits import check_step_result, max_payload_bytes
from temporal_workflows._engine.machine import (
    CommitPlan,
    Engine,
    EngineSnapshot,
    Reduction,
    StepResult,
    StepTask,
    is_shared_key,
    shared_part,
)
from temporal_workflows._engine.serde import Envelope, type_key
from temporal_workflows._errors import ExecutorFailedError, WorkflowRunError
from temporal_workflows._events import WorkflowEvent, WorkflowStartedEvent
from temporal_workflows._graph.context import WorkflowContext
from temporal_workflows.llama._compile import StartDispatcher
from temporal_workflows.llama._routing import route_event, unhandled
from temporal_workflows.llama._run_objects import (
    RunObjects,
    decode_value,
    encode_value,
    event_json,
    register_run_objects,
    unregister_run_objects,
)
from temporal_workflows.llama._runtime import LlamaFailedStreamEvent, LlamaStreamEvent, waits_of_requests
from temporal_workflows.llama._scheduling import run_task
from temporal_workflows.llama._snapshots import snapshot_dict
from temporal_workflows.llama.context import DictBackend
from temporal_workflows.llama.errors import (
    WorkflowCancelledByUser,
    WorkflowRuntimeError,
    WorkflowTimeoutError,
)
from temporal_workflows.llama.events import (
    Event,
    StopEvent,
    WorkflowCancelledEvent,
    WorkflowFailedEvent,
    WorkflowIdleEvent,
    WorkflowTimedOutEvent,
    summarize_event,
)

if TYPE_CHECKING:
    from temporal_workflows.llama.context import Context
    from temporal_workflows.llama.workflow import Workflow

__all__ = ["LlamaLocalRun"]

"""``Context.to_dict()`` format tag: the engine's checkpoint of the run, plus the store as JSON."""

_END: Any = object()
_FAILED_STREAM = type_key(LlamaFailedStreamEvent)


class _RunBackend(DictBackend):
    """``handler.ctx.store``: the run's committed state; writes reach the run at its next boundary."""

    def __init__(self, run: LlamaLocalRun) -> None:
        super().__init__({}, run.objects)
        self.run = run

    def read(self, key: str) -> Envelope | None:
        if key in self.run.outside_writes:
            return self.run.outside_writes[key]
        return self.run.engine.state.get(key)

    def stored_keys(self) -> list[str]:
        keys = list(shared_part(self.run.engine.state))
        for k, v in self.run.outside_writes.items():
            if v is None and k in keys:
                keys.remove(k)
            elif v is not None and k not in keys:
                keys.append(k)
        return keys

    def write(self, key: str, value: Any) -> None:
        self.run.outside_writes[key] = encode_value(value, self.objects, f"state key {key!r}")
        self.run.wake()

    def delete(self, key: str) -> None:
        self.run.outside_writes[key] = None
        self.run.wake()


async def _first_halt_wins(running: list[asyncio.Future[StepOutcome]], order: list[int]) -> list[StepOutcome]:
    """Every step's outcome; once one ends the run (a ``StopEvent``) before any failed, the others still
    running are cancelled and count for nothing (``None``), as LlamaIndex cancels them; those that had
    finished by then commit with it. The Temporal host does the same in the order history records
    (``temporal/_workflow/supersteps.StepRunner.run``); here it is the order they finished in, which ``order`` receives
    (the steps that never finished after them, in task order: they send nothing)."""
    failed: list[int] = []
    halted: list[int] = []
    done: list[int] = []
    wake = asyncio.Event()

    def finished(i: int, f: asyncio.Future[StepOutcome]) -> None:
        if halted or f.cancelled():
            return
        done.append(i)
        outcome = f.result()
        if isinstance(outcome, StepFailure):
            failed.append(i)
        elif isinstance(outcome, StepResult) and outcome.halt and not failed:
            halted.append(i)
        if halted or len(done) == len(running):
            wake.set()

    for i, f in enumerate(running):
        f.add_done_callback(functools.partial(finished, i))
    kept: set[int] | None = None
    try:
        await wake.wait()
    finally:
        if halted or not wake.is_set():  # a step ended the run, or the run itself is cancelled
            kept = {i for i, f in enumerate(running) if f.done() and not f.cancelled()}
            for f in running:
                f.cancel()
            await asyncio.gather(*running, return_exceptions=True)
    order.extend(done)
    seen = set(done)
    order.extend(i for i in range(len(running)) if i not in seen)
    if kept is None:
        return [f.result() for f in running]
    return [running[i].result() if i in kept else None for i in range(len(running))]


class _LlamaLocalHost(DriverHost):
    def __init__(self, run: LlamaLocalRun) -> None:
        self.run = run
        self._finished: list[int] = []

    def now(self) -> float:
        return time.time()

    async def take_input(self, engine: Engine) -> None:
        self.run.drain(engine)

    def may_finish(self, engine: Engine) -> bool:
        return False  # a LlamaIndex run ends with its StopEvent (the engine halts it), not when idle

    async def before_superstep(self, engine: Engine) -> None:
        self.run.boundary = engine.snapshot()

    async def wait_for_input(self, engine: Engine) -> None:
        run = self.run
        run.boundary = engine.snapshot()
        if engine.pending_requests:
            run.publish(WorkflowIdleEvent())
        deadline = engine.next_deadline()
        run.wakeup.clear()
        if run.inbox or run.outside_writes:
            return
        timeout = max(0.0, deadline - time.time()) if deadline is not None else None
        # On timeout a request's deadline came: the driver expires it at the boundary.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.wakeup.wait(), timeout)

    async def run_steps(self, tasks: Sequence[StepTask], engine: Engine) -> Sequence[StepOutcome]:
        state = engine.state
        run = self.run
        run.running = [t.executor_id for t in tasks]  # kept if the run times out meanwhile: the error names them
        self._finished = []
        if len(tasks) == 1:
            outcomes: list[StepOutcome] = [await run.run_one(tasks[0], state)]
        else:
            running: list[asyncio.Future[StepOutcome]] = [asyncio.ensure_future(run.run_one(t, state)) for t in tasks]
            outcomes = await _first_halt_wins(running, self._finished)
        run.running = []
        return outcomes

    def finish_order(self) -> Sequence[int] | None:
        return self._finished or None

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:  # pragma: no cover - no reducers
        raise AssertionError("LlamaIndex workflows declare no callable reducers")

    def committed(self, plan: CommitPlan, engine: Engine) -> None:
        run = self.run
        for req in plan.requests:
            waiter_event = run.objects.waiter_events.pop(req.request_id, None)
            if waiter_event is not None:
                run.publish(waiter_event)
        if not run.compiled.workflow._verbose:
            return
        seen: set[int] = set()
        for d in plan.sent:
            env = d.messages[0]
            if id(env) in seen:
                continue
            seen.add(id(env))
            event = decode_value(env, run.objects)
            if isinstance(event, Event):
                print(f"[tick] add: {summarize_event(event)}")

    async def save_checkpoint(  # pragma: no cover - never due
        self, engine: Engine, trigger: str, label: str | None = None
    ) -> str | None:
        return None


class LlamaLocalRun:
    """One in-process run of a LlamaIndex workflow: the driver loop in a task, its stream and its result."""

    def __init__(self, workflow: Workflow, ctx: Context[Any], start_event: Event | None, run_id: str) -> None:
        self.workflow = workflow
        self.compiled = workflow._compiled()
        self.graph = self.compiled.graph.graph
        self.run_id = run_id
        self.objects = RunObjects()
        self.objects.publish = self.publish
        self.record: Callable[[WorkflowEvent | Envelope], None] | None = None
        """Sees every event of the run's record (the conformance suite compares it with a Temporal run's)."""
        self.inbox: list[tuple[Event, str | None]] = []
        self.outside_writes: dict[str, Envelope | None] = {}
        self.wakeup = asyncio.Event()
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.running: list[str] = []
        self.boundary: EngineSnapshot | None = None
        self.finished = False
        self.stop_event: StopEvent | None = None
        self.error: BaseException | None = None
        self.engine = self._engine(ctx, start_event)
        ctx._run, ctx._pre = self, None
        self.result: asyncio.Future[StopEvent] = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._main(), name=f"llama run {run_id}")
        self.task.add_done_callback(self._on_task_done)

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        # A run cancelled before its task started never ran _main: settle it here.
        if not self.result.done():
            self.publish(WorkflowCancelledEvent())
            self._fail(WorkflowCancelledByUser())
            self.finished = True
            unregister_run_objects(self.run_id)
            self.queue.put_nowait(_END)

    # -- the engine it starts from ---------------------------------------------------------------------------------

    def _engine(self, ctx: Context[Any], start_event: Event | None) -> Engine:
        topology = self.graph.topology
        state: dict[str, Envelope] = {}
        previous = ctx._run
        if previous is not None:
            if previous.is_running:
                from temporal_workflows.llama.errors import ContextStateError

                raise ContextStateError(
                    "Cannot start a new run while context is already running. Wait for completion or use a new Context."
                )
            state = shared_part(previous.engine.state)
            self.objects.values.update(previous.objects.values)
        elif ctx._pre is not None:
            pre = ctx._pre
            state = dict(pre.backend.state)
            self.objects.values.update(pre.backend.objects.values if pre.backend.objects else {})
            if pre.snapshot is not None and pre.is_running:
                cp = WorkflowCheckpoint.model_validate(pre.snapshot["snapshot"])
                snap = cp.to_snapshot()
                private = {k: v for k, v in snap.state.items() if not is_shared_key(k)}
                engine = Engine(topology, snap)
                engine.state = {**private, **state}
                return engine
        engine = Engine(topology)
        engine.state = state
        if start_event is None:
            raise WorkflowRuntimeError("a run that does not resume a running context needs a start event")
        env = encode_value(start_event, self.objects, "start event")
        engine.start(env)
        if self.workflow._verbose:
            print(f"[tick] add: {summarize_event(start_event)}")
        return engine

    # -- the loop ----------------------------------------------------------------------------------------------------

    async def _main(self) -> None:
        register_run_objects(self.run_id, self.objects)
        self._on_driver_event(WorkflowStartedEvent(run_id=self.run_id))  # as a Temporal run's stream begins
        driver = SuperstepDriver(
            self.engine, _LlamaLocalHost(self), checkpoint_every=0, payload_limit=max_payload_bytes
        )
        timeout = self.workflow._timeout
        try:
            try:
                async with asyncio.timeout(timeout):
                    async for event in driver.run():
                        self._on_driver_event(event)
            except TimeoutError:
                active = list(self.running)
                info = "Currently active steps: " + ", ".join(active) if active else "No steps active"
                assert timeout is not None
                self.publish(WorkflowTimedOutEvent(timeout=float(timeout), active_steps=active))
                self._fail(WorkflowTimeoutError(f"Operation timed out after {float(timeout)} seconds. {info}"))
                return
            outputs = self.engine.outputs
            stop = decode_value(outputs[0].value, self.objects) if outputs else None
            if not isinstance(stop, StopEvent):  # pragma: no cover - the driver ends a run only when halted
                self._fail(WorkflowRuntimeError("the run ended without a StopEvent"))
                return
            self.stop_event = stop
            self.publish(stop)
            self.result.set_result(stop)
        except WorkflowRunError as e:
            error: BaseException = e
            if isinstance(e, ExecutorFailedError) and e.original is not None:
                error = e.original  # LlamaIndex raises the step's own exception
            self.publish(
                WorkflowFailedEvent(
                    step_name=e.executor_id or "",
                    exception=error if isinstance(error, Exception) else e,
                    attempts=e.attempts if isinstance(e, ExecutorFailedError) else None,
                    elapsed_seconds=e.elapsed_seconds if isinstance(e, ExecutorFailedError) else None,
                )
            )
            self._fail(error)
        except asyncio.CancelledError:
            self.publish(WorkflowCancelledEvent())
            self._fail(WorkflowCancelledByUser())
        except BaseException as e:  # pragma: no cover - a bug: never leave the caller waiting
            self._fail(e)
            raise
        finally:
            self.finished = True
            unregister_run_objects(self.run_id)
            self.queue.put_nowait(_END)

    def _fail(self, error: BaseException) -> None:
        self.error = error
        if not self.result.done():
            self.result.set_exception(error)
            self.result.exception()  # marked retrieved: awaiting the handler raises it

    def _on_driver_event(self, event: WorkflowEvent | Envelope) -> None:
        """The run's record of events (what a Temporal run streams); steps' events reached the caller live."""
        if self.record is not None:
            self.record(event)

    def publish(self, event: Event) -> None:
        self.queue.put_nowait(event)

    # -- steps --------------------------------------------------------------------------------------------------------

    async def run_one(self, task: StepTask, state: Any) -> StepOutcome:
        executor = self.graph.executors[task.executor_id]
        wctx: WorkflowContext[Any, Any] = WorkflowContext(graph=self.graph, task=task, state=state, run_id=self.run_id)
        try:
            if isinstance(executor, StartDispatcher):
                await executor._invoke(executor.handlers[0], None, wctx)
            else:
                info = self.compiled.steps[task.executor_id]
                if task.kind == "response":
                    assert task.request is not None
                    await run_task(self.compiled, info, wctx, state, (), (task.request, task.messages[0]), self.objects)
                else:
                    triggers = [decode_value(env, self.objects) for env in task.messages]
                    await run_task(self.compiled, info, wctx, state, triggers, None, self.objects)
            return check_step_result(wctx._result, executor_id=task.executor_id)
        except Exception as e:
            for env in wctx._result.events:  # what the failed step wrote, as a Temporal run streams it live
                if env.type == _FAILED_STREAM:
                    self._on_driver_event(env)
            return StepFailure.of(e)

    # -- outside input -------------------------------------------------------------------------------------------------

    def wake(self) -> None:
        self.wakeup.set()

    def send_event(self, event: Event, step: str | None) -> None:
        if not isinstance(event, Event):
            raise WorkflowRuntimeError(f"send_event takes an Event, not {type(event).__name__}")
        if step is not None:
            self.compiled.check_target(step, event)
        self.inbox.append((event, step))
        self.wake()

    def drain(self, engine: Engine) -> None:
        """Hand outside events and state writes to the engine (at a boundary)."""
        if self.outside_writes:
            state = dict(engine.state)
            for key, env in self.outside_writes.items():
                if env is None:
                    state.pop(key, None)
                else:
                    state[key] = env
            engine.state = state
            self.outside_writes = {}
        inbox, self.inbox = self.inbox, []
        verbose = self.workflow._verbose
        for event, step in inbox:
            env = encode_value(event, self.objects, f"event {type(event).__name__} sent into the run")
            if verbose:
                print(f"[tick] add: {summarize_event(event)}{f' -> {step}' if step else ''}")
            route = route_event(self.compiled, event, waits_of_requests(engine.pending_requests.values()), step)
            applied = apply(
                engine, Inbound("event", step or "", env, checked=True), Route(route.answers, route.targets)
            )
            if applied.unhandled:
                notice = unhandled(event, step, idle=not engine.has_work())
                if notice is not None:
                    self.notice(notice)

    def notice(self, event: Event) -> None:
        """An event the run publishes at a boundary (``UnhandledEvent``): to the caller, and to the run's
        record as a Temporal run streams it."""
        self.publish(event)
        self._on_driver_event(LlamaStreamEvent(event=event_json(event, None, "notice")))

    # -- around the run ----------------------------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return not self.finished

    def running_steps(self) -> list[str]:
        return sorted(set(self.running))

    def backend(self) -> _RunBackend:
        return _RunBackend(self)

    async def stream(self) -> AsyncGenerator[Event, None]:
        while True:
            item = await self.queue.get()
            if item is _END:
                self.queue.put_nowait(_END)  # later readers end too
                return
            yield item

    def result_now(self) -> Any:
        if self.stop_event is None:
            raise WorkflowRuntimeError(f"Workflow run with run_id {self.run_id} is not complete")
        return self.stop_event.result if type(self.stop_event) is StopEvent else self.stop_event

    def cancel(self) -> None:
        if not self.task.done():
            self.task.cancel()

    def to_dict(self) -> dict[str, Any]:
        if self.finished:
            snap = self.engine.snapshot()
        else:
            snap = self.boundary if self.boundary is not None else self.engine.snapshot()
        return snapshot_dict(self.workflow, snap, is_running=not self.finished)
