"""The in-process host: the superstep driver with asyncio, for tests and notebooks.

Everything that decides what a run does is in ``_engine/driver.py``; this adapter
supplies only what differs in process: steps are coroutines run
concurrently with ``asyncio.gather``, callable reducers are plain calls, the
clock is ``time.time()``, checkpoints go to the ``CheckpointStorage`` given,
outside input arrives as the arguments of ``run()`` (and is refused by
raising, before anything changes), and an idle run returns to its caller.
Checkpoint and reset requests are calls on an idle workflow (a running one
refuses them): a checkpoint asked for is taken as the driver takes one at a
boundary (``driver.serve_checkpoint_asks``); nothing is queued while a run goes.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from temporal_workflows._checkpoints.base import CheckpointStorage, WorkflowCheckpoint, check_signature, checkpoint_of
from temporal_workflows._engine.driver import (
    DriverEvent,
    DriverHost,
    ReducerFailed,
    StepFailure,
    StepOutcome,
    StepsInterrupted,
    SuperstepDriver,
    serve_checkpoint_asks,
)
from temporal_workflows._engine.inbound import (
    DEFAULT_CONCURRENT_INPUT,
    BoundaryAsks,
    CheckpointAsk,
    ConcurrentInput,
    Inbound,
    Unanswerable,
    apply,
    arrival,
    check_policy,
    open_request,
    stronger,
)
from temporal_workflows._engine.limits import max_payload_bytes
from temporal_workflows._engine.machine import Engine, Reduction, StepTask
from temporal_workflows._engine.order import predecessors
from temporal_workflows._engine.serde import Envelope, encode
from temporal_workflows._engine.subworkflows import SubWorkflowSuperstep
from temporal_workflows._errors import (
    RequestTimeoutError,
    RunClosedError,
    RunInProgressError,
    UndeliverableMessageError,
    WorkflowError,
    WorkflowRunError,
    describe,
    peer_error,
    storage_failure,
)
from temporal_workflows._events import (
    WorkflowEvent,
    WorkflowRunState,
    WorkflowStartedEvent,
)
from temporal_workflows._graph.context import run_step
from temporal_workflows._graph.graph import Graph
from temporal_workflows._graph.runs import MISSING, Reservation, RunStream, check_run_arguments, materialize
from temporal_workflows._local.live import LiveQueue, with_live
from temporal_workflows._local.ordering import in_order
from temporal_workflows._local.subworkflows import run_with_sub_workflows

__all__ = ["GraphLocalRunner"]

_UUID4_BITS = (0x4 << 76) | (0x8 << 60)
"""A random UUID's version (4) and variant (RFC 4122) bits."""
_UUID4_KEPT = ~((0xF << 76) | (0xC << 60)) & ((1 << 128) - 1)
_IDS_DRAWN = 64
_RANDOM_IDS: list[str] = []
"""Random UUIDs as text, made ``_IDS_DRAWN`` at a time from one ``os.urandom`` call."""
os.register_at_fork(after_in_child=_RANDOM_IDS.clear)  # a forked child draws its own


def _checkpoint_uuid() -> str:
    """A random UUID (version 4) as its canonical text, as ``str(uuid.uuid4())`` gives one.

    A checkpoint per superstep made ``uuid4`` (a system call and a ``UUID``
    object per id) a visible part of a step's cost in process; this draws
    the same random bits in batches, and formats a batch in one go (between
    two supersteps' other work, one id at a time took twice as long).
    """
    if not _RANDOM_IDS:
        raw = os.urandom(16 * _IDS_DRAWN)
        for i in range(0, len(raw), 16):
            h = "%032x" % (int.from_bytes(raw[i : i + 16]) & _UUID4_KEPT | _UUID4_BITS)
            _RANDOM_IDS.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return _RANDOM_IDS.pop()


class _GraphLocalHost(DriverHost):
    def __init__(
        self,
        runner: GraphLocalRunner,
        storage: CheckpointStorage | None,
        *,
        streaming: bool = False,
        invocation_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.runner = runner
        self.storage = storage
        self.streaming = streaming
        self.invocation_kwargs = invocation_kwargs
        self.live: LiveQueue[DriverEvent] = LiveQueue()
        # Messages sent into the run while it goes (``GraphLocalRunner.send``), taken at the next boundary.
        self.inbox: list[Inbound] = []
        self.boundary_asks: BoundaryAsks[Any] = BoundaryAsks()
        self.engine: Engine | None = None
        self.closed = False
        self._steps_task: asyncio.Task[Any] | None = None  # the task running a superstep's steps (to cancel them)
        self._cancelling = False

    def busy(self) -> bool:
        """Whether the run is in a turn: a superstep running, work queued, or input waiting for the boundary."""
        engine = self.engine
        return self._steps_task is not None or bool(self.inbox) or (engine is not None and engine.has_work())

    def interrupt_steps(self) -> None:
        """Cancel the running superstep's steps: ``run_steps`` then raises ``StepsInterrupted``."""
        if self._steps_task is not None and not self._cancelling:
            self._cancelling = True  # once per superstep: a second message that interrupts waits with the first
            self._steps_task.cancel()

    async def take_input(self, engine: Engine) -> None:
        while self.inbox:
            apply(engine, self.inbox.pop(0))

    def may_finish(self, engine: Engine) -> bool:
        # Input sent after this boundary took its input keeps the run going; otherwise it ends here, and
        # nothing more is accepted (``closed``), so nothing sent is left behind untaken.
        if self.inbox or self.boundary_asks.interrupt is not None:
            return False
        self.closed = True
        return True

    async def wait_for_input(self, engine: Engine) -> None:
        return  # (only reached with input waiting: ``may_finish``)

    def interrupted(self, engine: Engine, policy: str, changed_keys: Sequence[str]) -> None:
        pass  # (nothing kept beside the engine: its storage gets whole checkpoints)

    def for_sub_workflow(self, graph: Graph, run_id: str) -> _GraphLocalHost:
        """The host of a sub-workflow's child run: no checkpoints, read as its parent is (streamed or not)."""
        runner = GraphLocalRunner(graph, checkpoint_every=0)
        runner.run_id = run_id
        return _GraphLocalHost(runner, None, streaming=self.streaming)

    def now(self) -> float:
        return time.time()

    def _step(self, task: StepTask, state: Mapping[str, Envelope]) -> Coroutine[Any, Any, StepOutcome]:
        return run_step(
            self.runner.graph,
            task,
            state,
            run_id=self.runner.run_id or "",
            live=self.live,
            streaming=self.streaming,
            invocation_kwargs=self.invocation_kwargs,
        )

    async def _run_task(self, task: StepTask, state: Mapping[str, Envelope]) -> StepOutcome:
        try:
            return await self._step(task, state)
        except Exception as e:
            return StepFailure.of(e)

    async def run_steps(self, tasks: Sequence[StepTask], engine: Engine) -> Sequence[StepOutcome]:
        # A message sent with policy interrupt or rollback cancels this task where it awaits the steps
        # (``interrupt_steps``): nothing is added to a superstep that no such message reaches.
        self._steps_task = asyncio.current_task()
        try:
            after = predecessors(engine.topology, tasks, self.runner.graph.concurrent)
            if SubWorkflowSuperstep.any_in(engine.topology, tasks):
                return await run_with_sub_workflows(self, tasks, engine, after)
            state = engine.state
            if len(tasks) == 1:  # (most supersteps of a chain: no gather, and no coroutine around the step's own)
                try:
                    return [await self._step(tasks[0], state)]
                except Exception as e:
                    return [StepFailure.of(e)]
            if after is not None:  # a sender's messages to one executor: one after another (_engine/order.py)
                return await in_order(tasks, after, lambda t: self._run_task(t, state))
            return list(await asyncio.gather(*(self._run_task(t, state) for t in tasks)))
        except asyncio.CancelledError:
            task = self._steps_task
            if self.boundary_asks.interrupt is None or task is None or task.uncancel() > 0:
                raise  # (a cancellation of the run itself, too: it wins)
            raise StepsInterrupted() from None
        finally:
            self._steps_task = None
            self._cancelling = False

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:
        try:
            return self.runner.graph.reduce(reduction.key, reduction.committed, list(reduction.writes))
        except Exception as e:
            raise ReducerFailed(type(e).__name__, str(e)) from e

    async def save_checkpoint(self, engine: Engine, trigger: str, label: str | None = None) -> str:
        runner, storage = self.runner, self.storage
        assert storage is not None
        cp = checkpoint_of(
            engine,
            checkpoint_id=_checkpoint_uuid(),  # a UUID, as Agent Framework's checkpoint ids are
            run_id=runner.run_id or "",
            previous_checkpoint_id=runner.last_checkpoint_id,
            timestamp=datetime.now(UTC),
        )
        try:
            cp_id = await storage.save(cp)
        except Exception as e:
            raise storage_failure(e) from e
        runner.last_checkpoint_id = cp_id
        return cp_id


class GraphLocalRunner:
    """One in-process run of a graph (kept between ``run()`` calls, like Agent Framework's)."""

    def __init__(self, graph: Graph, *, checkpoint_every: int = 1) -> None:
        self.graph = graph
        self.checkpoint_every = checkpoint_every
        self.engine: Engine | None = None
        self.run_id: str | None = None
        self.failed: WorkflowRunError | None = None
        self.last_checkpoint_id: str | None = None
        self.reservation = Reservation()
        self.invocation_kwargs: dict[str, Any] = {}
        """The run's ``function_invocation_kwargs`` / ``client_kwargs`` (Agent Framework's ``run()`` arguments)."""
        self.concurrent_input: ConcurrentInput = DEFAULT_CONCURRENT_INPUT
        """The run's policy for a message sent while it is busy (``run(..., concurrent_input=...)``)."""
        self.host: _GraphLocalHost | None = None
        """The host of the ``run()`` in progress (what :meth:`send` reaches)."""

    @property
    def running(self) -> bool:
        """Whether a ``run()`` holds the workflow (its stream is alive and not finished)."""
        return self.reservation.running

    def _idle_engine(self) -> Engine | None:
        """The kept engine, at a boundary (a stream dropped mid-superstep left that superstep uncommitted)."""
        if self.engine is not None:
            self.engine.abort_superstep()
        return self.engine

    # -- reset and explicit checkpoints ------------------------------------------------

    def reset(self) -> None:
        """Forget the current run: state, messages, requests, outputs, failure and checkpoint lineage."""
        self.reservation.check("reset it")
        self.engine = None
        self.run_id = None
        self.failed = None
        self.last_checkpoint_id = None

    async def reset_executors(self) -> None:
        """Call every executor's ``reset()`` hook, each once, all of them even if one fails.

        Raises:
            WorkflowError: naming the executors whose hook raised (the first one's error as cause).
        """
        failures: list[tuple[str, BaseException]] = []
        for eid, ex in self.graph.executors.items():
            try:
                await ex.reset()
            except Exception as e:
                failures.append((eid, e))
        if failures:
            names = ", ".join(repr(eid) for eid, _ in failures)
            first = failures[0][1]
            raise WorkflowError(
                f"reset() of executor{'s' * (len(failures) > 1)} {names} failed: {type(first).__name__}: {first}"
            ) from first

    async def create_checkpoint(self, storage: CheckpointStorage | None) -> str:
        """Checkpoint the workflow as it is now, idle: its run, or its initial state if it has none yet.

        Raises:
            WorkflowError: it is running, or there is no storage.
            CheckpointStorageError: the storage did not save it.
        """
        self.reservation.check("create a checkpoint")
        if storage is None:
            raise WorkflowError(
                "create_checkpoint() needs a checkpoint storage: pass checkpoint_storage= to it or to WorkflowBuilder"
            )
        engine = self._idle_engine() or Engine(self.graph.topology)
        if self.run_id is None and self.engine is None:
            self.run_id = uuid.uuid4().hex  # the run this workflow will start from its initial state
        # Idle, this is a boundary: the ask is served there as the driver serves one (no driver runs now).
        host, ask = _GraphLocalHost(self, storage), CheckpointAsk()
        await serve_checkpoint_asks(
            engine, [ask], lambda label: host.save_checkpoint(engine, "requested", label), host.warn
        )
        if ask.failure is not None:
            raise ask.failure  # the storage's error, as it said it
        assert ask.checkpoint_id is not None
        return ask.checkpoint_id

    # -- input while a run goes ---------------------------------------------------------

    def send(
        self, message: Any, *, executor_id: str | None = None, policy: ConcurrentInput | None = None
    ) -> dict[str, Any]:
        """A message into the ``run()`` in progress, taken at its next boundary by the concurrent-input rule.

        ``policy`` (default: the run's ``concurrent_input``) decides what a
        message does when the run is busy (``_engine.inbound.ConcurrentInput``):
        queued (``enqueue``), refused (``reject``), or taken after the turn is
        interrupted (``interrupt``) or rolled back (``rollback``). A run that
        is not busy takes it at its next boundary whatever the policy.

        Raises:
            RunClosedError: no ``run()`` is in progress (start one with ``run(message)``).
            RunInProgressError: the run is busy and the policy is ``reject``.
            UndeliverableMessageError: no handler of the executor takes it.
            ValueError: an unknown policy.
        """
        chosen = check_policy(policy if policy is not None else self.concurrent_input, "policy")
        host = self.host
        if host is None or host.closed or not self.running:
            raise RunClosedError(
                "no run of this workflow is in progress to send to; start one with run(message) "
                "(a message sent while a run() goes is taken at its next superstep boundary)"
            )
        target = executor_id if executor_id is not None else self.graph.topology.start_executor_id
        env = self.graph.validate_message(target, encode(message, what=f"message for executor {target!r}"))
        action = arrival(chosen, busy=host.busy())
        if action == "refuse":
            raise RunInProgressError(
                f"the run is busy (superstep {host.engine.superstep if host.engine else 0} of its current turn) "
                "and the message's concurrent-input policy is 'reject'; send it again once the run is idle, or "
                "with policy 'enqueue', 'interrupt' or 'rollback'"
            )
        host.inbox.append(Inbound("send", target, env, checked=True))
        if action in ("interrupt", "rollback"):
            host.boundary_asks.interrupt = stronger(host.boundary_asks.interrupt, action)
            host.interrupt_steps()
        return {"executor_id": target, "accepted": True, "policy": chosen, "interrupts": action != "take"}

    # -- state -------------------------------------------------------------------------

    @property
    def state(self) -> WorkflowRunState:
        if self.failed is not None:
            return WorkflowRunState.FAILED
        if self.engine is None:
            return WorkflowRunState.IDLE
        return self.engine.run_state()

    def _validate_responses(self, engine: Engine, responses: Mapping[str, Any]) -> dict[str, Envelope]:
        """Check every response before accepting any, so a bad one changes nothing."""
        accepted: dict[str, Envelope] = {}
        for rid, value in responses.items():
            req = open_request(engine, rid)
            if isinstance(req, Unanswerable):
                raise req.error()
            accepted[rid] = self.graph.validate_response(req, value)
        return accepted

    async def _restore(
        self, checkpoint_id: str, storage: CheckpointStorage | None
    ) -> tuple[Engine, WorkflowCheckpoint]:
        if storage is None:
            raise WorkflowError(
                "resuming from a checkpoint needs a checkpoint storage: pass checkpoint_storage= to run() "
                "or to WorkflowBuilder"
            )
        cp = await storage.load(checkpoint_id)
        check_signature(cp, self.graph.topology)
        return Engine(self.graph.topology, cp.to_snapshot()), cp

    def _start_engine(self, message: Any) -> Engine:
        start = self.graph.executors[self.graph.topology.start_executor_id]
        env = encode(message, what="start message")
        if (start.coerce(message) if env.type is None else start.find_handler(message)) is None:
            raise UndeliverableMessageError(
                f"start executor {start.id!r} has no handler for {describe(message)}",
                source_id="<input>",
                type_name=describe(message),
                targets=[start.id],
            )
        engine = Engine(self.graph.topology)
        engine.start(env)
        return engine

    def events(
        self,
        message: Any = MISSING,
        *,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
        stream: bool = False,
        invocation_kwargs: Mapping[str, Any] | None = None,
        concurrent_input: ConcurrentInput | None = None,
    ) -> RunStream:
        """Reserve the workflow (now) and return the stream that runs it until the graph is idle.

        ``concurrent_input``: the run's policy for messages :meth:`send` brings
        while it is busy (``None``: a new run has ``"enqueue"``, a continued one keeps its own).

        ``stream``: the call is ``run(..., stream=True)`` (steps read it as ``ctx.is_streaming()``).
        ``invocation_kwargs``: the call's ``function_invocation_kwargs`` / ``client_kwargs``
        (``None``: a new run has none, a continued one keeps its own).

        Raises:
            WorkflowError: it is already running, or the arguments cannot start anything.
        """
        check_run_arguments(message, responses, checkpoint_id)
        policy = check_policy(concurrent_input) if concurrent_input is not None else None
        arrived = time.time()  # when the input arrived: the stream may be read later
        return self.reservation.take_batches(
            self._batches(
                message, responses, checkpoint_id, checkpoint_storage, arrived, stream, invocation_kwargs, policy
            )
        )

    async def _batches(
        self,
        message: Any,
        responses: Mapping[str, Any] | None,
        checkpoint_id: str | None,
        storage: CheckpointStorage | None,
        arrived: float,
        stream: bool = False,
        invocation_kwargs: Mapping[str, Any] | None = None,
        concurrent_input: ConcurrentInput | None = None,
    ) -> AsyncIterator[list[WorkflowEvent]]:
        """The events of one ``run()`` call, in the batches the driver makes them (see ``with_live``)."""
        # Nothing about the current run changes until the new input (responses included) is accepted.
        run_id, last_checkpoint_id = self.run_id, self.last_checkpoint_id
        started = restored = False
        if checkpoint_id is not None:
            engine, cp = await self._restore(checkpoint_id, storage)
            run_id, last_checkpoint_id, restored = cp.run_id or uuid.uuid4().hex, cp.checkpoint_id, True
        elif message is not MISSING:
            engine = self._start_engine(message)
            run_id, last_checkpoint_id, started = uuid.uuid4().hex, None, True
        else:
            if self.failed is not None:
                raise WorkflowError(f"the run failed ({self.failed}); start a new run or resume from a checkpoint")
            kept = self._idle_engine()
            if kept is None:
                raise WorkflowError("no run to send responses to; start one with run(message)")
            # Work on a copy, adopted only once the new input is accepted: a
            # refused response must leave the run exactly as it was.
            engine = Engine(self.graph.topology, kept.snapshot())
        every = self.checkpoint_every if storage is not None else 0
        kwargs = self.invocation_kwargs  # a continued run keeps its own
        if invocation_kwargs is not None or started or restored:
            kwargs = dict(invocation_kwargs or {})
        host = _GraphLocalHost(self, storage, streaming=stream, invocation_kwargs=kwargs)
        # A continued run's turn begins before the responses this call brings (a rollback goes back there).
        turn_start = engine.snapshot() if not (started or restored) and not engine.has_work() else None
        driver = SuperstepDriver(
            engine,
            host,
            checkpoint_every=every,
            payload_limit=max_payload_bytes,
            # New input (a start message, responses) is checkpointed before it is processed; a restore is not.
            entry_checkpoint=started or responses is not None,
            restored=restored,
            reader_stops=stream,  # an awaited run() reads every event: no hand-over until it ends
            turn_start=turn_start,
        )
        if not stream:
            host.live.deliver_to(driver.live_event)
        if not started:
            # Timers do not run between calls: requests whose deadline passed before
            # this input arrived time out first (on Temporal the idle run's timer made
            # that boundary at the deadline), so a late answer finds no request;
            # ``run(responses={})`` delivers just these. Then, as at every boundary,
            # input before deadlines: an answer given before its deadline wins, even
            # if the stream is read after it.
            try:
                driver.expire(arrived)
            except RequestTimeoutError as e:
                self.engine, self.run_id, self.last_checkpoint_id = engine, run_id, last_checkpoint_id
                self.failed = e
                yield [materialize(event) for event in driver.failure_events(e)]
                raise
        if responses:
            for rid, env in self._validate_responses(engine, responses).items():
                apply(engine, Inbound("respond", rid, env, checked=True))
        self.failed = None  # (a failed run took no responses above)
        self.engine, self.run_id, self.last_checkpoint_id = engine, run_id, last_checkpoint_id
        self.invocation_kwargs = kwargs
        if concurrent_input is not None or started or restored:
            self.concurrent_input = concurrent_input or DEFAULT_CONCURRENT_INPUT
        host.engine = engine
        self.host = host  # from here on, send() reaches this run
        if started or restored:
            # A run restored from a checkpoint starts again there (as a reset or fork does on Temporal).
            yield [WorkflowStartedEvent(run_id=run_id or "")]
        if restored:
            announced = driver.announce_pending()
            if announced:
                yield [materialize(event) for event in announced]
        failure: WorkflowRunError | None = None
        try:
            async for batch in with_live(driver.batches(), host.live, materialize, live_while_running=stream):
                yield batch
        except WorkflowRunError as e:
            self.failed = e
            failure = peer_error(e)
            if failure is e:
                raise
        if failure is not None:
            # A step's own exception, as Agent Framework raises it (also an ExecutorFailedError), raised
            # outside the handler so that its context is the step's, not the library's failure.
            raise failure
