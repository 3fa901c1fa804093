"""The superstep driver: the one loop both graph hosts run over the engine.

The engine (``_engine``) is the pure superstep machine; this module is the
loop around it, written once: carry out an accepted reset, take outside input,
expire due requests, serve requested checkpoints, decide (finish, go idle, or
run a superstep), run the superstep's steps, commit their results (with
reducers), publish events, checkpoint by policy, fail loudly. The in-process runner and the Temporal
workflow are thin adapters that supply only what differs between them through
:class:`DriverHost`: how steps and callable reducers run, the clock, where
checkpoints go, how outside input arrives and what "idle" means.

So every semantic rule (event order, failure types and texts, the checkpoint
policy, the limits on what a superstep may carry) holds in process and on Temporal by
construction, and the conformance suite (tests/conformance) checks it event
for event. Like LlamaIndex Workflows' control loop with its runtime adapters,
but the loop here is deterministic: it reads no clock and draws no random
number except through the host, so on Temporal it is workflow code.

Events come out of :meth:`SuperstepDriver.run` as an async iterator, in the
order they happen. An event is a :class:`WorkflowEvent` whose ``data`` is
still JSON (``data_type`` names its type), or an :class:`Envelope` holding a
step's custom event; the host decides how they leave (decoded for an
in-process caller, as payloads on a Temporal stream). What each event says is
``reporting.py``'s (Agent Framework's vocabulary); this module says when.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

from temporal_workflows._engine.inbound import BoundaryAsks, CheckpointAsk
from temporal_workflows._engine.limits import CommitRefused, RunLimits
from temporal_workflows._engine.machine import (
    CommitPlan,
    Engine,
    EngineSnapshot,
    Reduction,
    StepResult,
    StepTask,
)
from temporal_workflows._engine.reporting import DriverEvent, RunReport, StepFailure, StepOutcome
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import (
    CheckpointStorageError,
    ReducerError,
    WorkflowError,
    WorkflowRunError,
)
from temporal_workflows._events import (
    WorkflowEvent,
    WorkflowInterruptedEvent,
    WorkflowRunState,
    superstep_completed_event,
    superstep_started_event,
)

# DriverEvent, StepFailure and StepOutcome are reporting.py's, named here too: a host's DriverHost speaks them.
__all__ = [
    "DriverEvent",
    "DriverHost",
    "RunStatus",
    "StepFailure",
    "StepOutcome",
    "StepsInterrupted",
    "SuperstepDriver",
    "checkpoint_due",
    "serve_checkpoint_asks",
]


class RunStatus(enum.StrEnum):
    """Where a run is, as a host shows it: the one status vocabulary.

    Temporal's ``status`` query, the ``GraphRunStatus`` search attribute, the
    run's result, the console's filter and the CLI all use these values (a
    ``str``, so they read and compare as the plain strings they are on the
    wire). The run's events keep Agent Framework's :class:`WorkflowRunState`,
    which a MAF user knows; :meth:`of` is the one map from it.
    """

    STARTING = "starting"
    """Temporal: the run has not reached its first boundary yet (its graph is being pinned)."""
    RUNNING = "running"
    IDLE = "idle"
    """No work and nothing asked: a keep-alive run waits for a message or ``close``."""
    WAITING_FOR_INPUT = "waiting_for_input"
    COMPLETED = "completed"
    FAILED = "failed"
    CONTINUED_AS_NEW = "continued_as_new"
    """Temporal: this segment of the run closed; its successor (same workflow id) says where the run is."""

    @property
    def closed(self) -> bool:
        """The run ended here: it takes no more input."""
        return self in (RunStatus.COMPLETED, RunStatus.FAILED)

    @classmethod
    def of(cls, state: WorkflowRunState, *, finished: bool = False) -> RunStatus:
        """The status a run in event state ``state`` shows; ``finished``: it ends at this boundary."""
        if state in (WorkflowRunState.FAILED, WorkflowRunState.CANCELLED):
            return cls.FAILED
        if finished:
            return cls.COMPLETED
        if state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS:
            return cls.WAITING_FOR_INPUT
        if state is WorkflowRunState.IDLE:
            return cls.IDLE
        if state is WorkflowRunState.STARTED:
            return cls.STARTING
        return cls.RUNNING


class StepsInterrupted(Exception):
    """The host stopped a running superstep (a reset on Temporal): nothing of it commits."""


_NO_SCOPE: AbstractContextManager[Any] = nullcontext()
"""The default superstep scope (one, reused: a ``nullcontext`` holds nothing)."""


class DriverHost:
    """What a host supplies to :class:`SuperstepDriver`; the defaults suit a host with no outside input.

    Every method is called at a superstep boundary or for the running
    superstep, never concurrently with another of them.

    Attributes:
        boundary_asks: The host's queue of checkpoint and reset requests, served by
            the driver at its fixed points of each boundary (``None``: the
            host takes none while the driver runs; in process they are calls
            on an idle run).
    """

    boundary_asks: BoundaryAsks[Any] | None = None

    def now(self) -> float:
        """The host's clock, epoch seconds (on Temporal: ``workflow.now()``)."""
        raise NotImplementedError

    async def carry_out_reset(self, engine: Engine) -> None:
        """Carry out the reset in ``boundary_asks`` (first at a boundary, before any input).

        On Temporal the run continues as new from the reset's starting point,
        so this never returns; what was queued with it stays with the old run.
        """
        raise NotImplementedError

    async def take_input(self, engine: Engine) -> None:
        """Hand outside input that arrived since the last boundary to the engine."""

    def warn(self, text: str) -> None:
        """Report a warning of the run's (a checkpoint asked for by a signal that failed)."""

    def may_finish(self, engine: Engine) -> bool:
        """With no work left: may the run end now (or must it wait for input)?"""
        return True

    async def before_superstep(self, engine: Engine) -> None:
        """Last look before a superstep or an idle wait (Temporal: continue as new if history is long)."""

    async def reader_caught_up(self) -> None:
        """Before work a stream's reader would hold back (steps, a checkpoint), once the events so far are out.

        In process the stream itself holds the run (its reader asks for the next batch, or leaves). On
        Temporal a streamed caller of the durable twin paces the run: this waits until it has read them
        (``temporal/_workflow/pacing.py``).
        """

    async def wait_for_input(self, engine: Engine) -> None:
        """Idle with nothing to do: return when input may have arrived or a request deadline passed."""
        raise NotImplementedError

    def on_status(self, status: RunStatus, details: str) -> None:
        """The run's status changed (:class:`RunStatus`), with a line for humans."""

    def superstep_scope(self, superstep: int, executor_ids: Sequence[str]) -> AbstractContextManager[Any]:
        """Context around a superstep's steps and commit (Temporal: its tracing span)."""
        return _NO_SCOPE

    async def run_steps(self, tasks: Sequence[StepTask], engine: Engine) -> Sequence[StepOutcome]:
        """Run every task against ``engine.state``; one outcome per task, in task order.

        Raises:
            StepsInterrupted: the superstep was abandoned (its steps cancelled).
        """
        raise NotImplementedError

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:
        """Run a callable reducer (user code).

        Raises:
            ReducerFailed: it raised (its error's type and message).
        """
        raise NotImplementedError

    def committed(self, plan: CommitPlan, engine: Engine) -> None:
        """A superstep's commit was applied (host bookkeeping: state size, dirty keys)."""

    def interrupted(self, engine: Engine, policy: str, changed_keys: Sequence[str]) -> None:
        """The turn was interrupted (``policy`` ``"interrupt"`` or ``"rollback"``): the engine's superstep, and for
        a rollback its state (``changed_keys``) and requests, changed outside a commit (host bookkeeping: the
        state steps read, checkpoint deltas, answered requests)."""

    async def save_checkpoint(self, engine: Engine, trigger: str, label: str | None = None) -> str | None:
        """Store a checkpoint of ``engine`` (a boundary); return its id (``None``: none was taken).

        ``trigger``: ``"entry"``, ``"auto"`` (the policy's) or ``"requested"``
        (a :class:`CheckpointAsk`, with its ``label``; never ``None``).

        Raises:
            CheckpointStorageError: it was not saved.
        """
        raise NotImplementedError


async def serve_checkpoint_asks(
    engine: Engine,
    asks: list[CheckpointAsk],
    save: Callable[[str | None], Awaitable[str | None]],
    warn: Callable[[str], None],
) -> None:
    """Take the checkpoints asked for, oldest first, at a boundary; tell each asker how it went.

    The one way a requested checkpoint is taken: by the driver at its point
    of every boundary (after input and expiry), by a Temporal run settling
    its handlers before it closes or continues as new, and by an idle in-process workflow's
    ``create_checkpoint()``. ``save`` stores one (with its label) and
    returns its id; a storage failure is the asker's (``failure``, and
    ``error`` says which boundary), and a warning when the asker does not wait.
    """
    while asks:
        ask = asks.pop(0)
        try:
            ask.checkpoint_id = await save(ask.label)
            ask.superstep = engine.superstep
        except CheckpointStorageError as e:
            ask.failure = e
            ask.error = f"checkpoint after superstep {engine.superstep} was not saved: {e}"
            if ask.warn:
                warn(ask.error)
        ask.done = True


def _overrides(host: DriverHost, hook: str) -> bool:
    """Whether ``host`` has its own ``hook`` (its class's, or set on it), not :class:`DriverHost`'s default."""
    return hook in getattr(host, "__dict__", {}) or getattr(type(host), hook) is not getattr(DriverHost, hook)


class ReducerFailed(Exception):
    """A host's report that a callable reducer raised (type and message of the user's error)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


def checkpoint_due(superstep: int, every: int) -> bool:
    """The automatic checkpoint policy: after every ``every``-th superstep (0: never)."""
    return every > 0 and superstep % every == 0


class SuperstepDriver:
    """Runs supersteps over one engine until the host says the run may end.

    Args:
        engine: The run's engine, at a boundary.
        host: What differs between hosts.
        checkpoint_every: Automatic checkpoint after every N-th superstep (0: none).
        payload_limit: Most bytes one step input or the run's outputs may take
            as JSON; called only when a value is big enough to need it (in
            process it reads the environment, which may be invalid).
        entry_checkpoint: The engine holds new input (a start message,
            responses): with automatic checkpoints on, take a checkpoint
            before its first superstep. The driver notices input that wakes
            an idle run by itself.
        limit_state: Fail a superstep whose commit would take the committed
            state as a whole past ``state_limit`` (``StateSizes``); off only
            for Temporal runs recorded before the limit.
        state_limit: Most bytes the committed state may take as a whole;
            by default :data:`STATE_PAYLOADS` times ``payload_limit`` (one
            payload for Temporal runs recorded before steps read it in pages).
        release_outputs: Whether outputs adding up past ``payload_limit``
            release the oldest (otherwise they fail the run); asked only then.
        intermediate: Where to collect the run's intermediate outputs as it
            publishes them (its own executors' and those its sub-workflows
            bubbled up), in order: a sub-workflow's child hands them to its
            parent, as Agent Framework's ``WorkflowExecutor`` does. ``None``
            (a top-level run): not collected, they are events only.
        restored: The engine was just restored from a checkpoint (a resume, a
            reset to a checkpoint, a fork): its first superstep runs even with
            nothing to deliver, as Agent Framework's does, so the superstep
            count and the automatic checkpoints go on from the checkpoint's as
            there (a restored run waiting for answers: ``superstep_started``,
            ``superstep_completed`` and a checkpoint one superstep on).
        reader_stops: Whether the reader of :meth:`batches` may stop the run
            between two batches (a stream: it stops where it stopped reading,
            before the next checkpoint or superstep). ``False`` (an in-process
            run awaited for its result, read to its end): the driver hands
            its events over only when the run ends or waits, and the host
            gives it the live events its steps publish (:meth:`live_event`),
            instead of three hand-overs per superstep; the events and their
            order are the same.
    """

    def __init__(
        self,
        engine: Engine,
        host: DriverHost,
        *,
        checkpoint_every: int,
        payload_limit: Callable[[], int],
        entry_checkpoint: bool = False,
        limit_state: bool = True,
        state_limit: Callable[[], int] | None = None,
        release_outputs: Callable[[], bool] = lambda: True,
        intermediate: list[Envelope] | None = None,
        restored: bool = False,
        reader_stops: bool = True,
        turn_start: EngineSnapshot | None = None,
    ) -> None:
        self.engine = engine
        self._restore_due = restored
        self._pauses = reader_stops
        self.host = host
        self.checkpoint_every = checkpoint_every
        self._limits = RunLimits(
            engine, payload_limit, limit_state=limit_state, state_limit=state_limit, release_outputs=release_outputs
        )
        self._entry_due = entry_checkpoint
        # Where the current turn began (a rollback goes back there): given by the host, else the engine as it is
        # if it has no work yet (its input comes next), a fresh run before its start message, or where the run
        # was restored to (a checkpoint, a continue-as-new) in the middle of a turn.
        self._turn_start: EngineSnapshot | None = turn_start
        self._turn_given = turn_start is not None
        self._cancelled: list[str] = []
        self._report = RunReport(engine, intermediate)
        # Hooks the host left at DriverHost's defaults do nothing: not called at every boundary or commit
        # (in process, a run with no outside input). Asked once: a host does not change its methods during a run.
        self._takes_input = _overrides(host, "take_input")
        self._asks = host.boundary_asks
        self._looks_before = _overrides(host, "before_superstep")
        self._paced = _overrides(host, "reader_caught_up")
        self._shows_status = _overrides(host, "on_status")
        self._tracks_commits = _overrides(host, "committed")

    # -- events ----------------------------------------------------------------------

    def live_event(self, event: WorkflowEvent) -> None:
        """A live event a running step published, among the driver's events where it happened.

        For a host whose reader does not stop the run (``reader_stops=False``):
        it comes after what the driver made before the steps ran and before
        their results, where a stream shows it.
        """
        self._report.out.append(event)

    def announce_pending(self) -> list[DriverEvent]:
        """A restored run says again what it is waiting for (in progress, its requests, pending requests)."""
        return self._report.announce_pending()

    def failure_events(self, error: WorkflowRunError) -> list[DriverEvent]:
        """How every failed run ends its event stream (the events not handed over yet, then its ending)."""
        self.host.on_status(RunStatus.FAILED, f"failed in superstep {error.superstep}: {error}")
        return self._report.run_failed(type(error).__name__, str(error), error.superstep, error.executor_id)

    # -- the loop ----------------------------------------------------------------------

    def expire(self, now: float | None = None) -> None:
        """Time out requests due at ``now`` (default: the host's clock).

        At a boundary the driver takes outside input first, then expires: an
        answer that arrived before its request's deadline wins, however late
        the boundary that takes it (every host, and a sub-workflow's child,
        ``subworkflows.deliver_responses``, keep this order).

        Raises:
            RequestTimeoutError: a due request was made with ``on_timeout="fail"``.
        """
        if not self.engine.pending_requests:
            return  # nothing can be due (most boundaries): no clock read
        self.engine.expire_due(self.host.now() if now is None else now)

    async def run(self) -> AsyncIterator[DriverEvent]:
        """Drive the run; events as they happen. A failed run's events end with its failure, then it raises.

        Raises:
            WorkflowRunError: the run failed (after its failure events).
        """
        async for batch in self.batches():
            for event in batch:
                yield event

    async def batches(self) -> AsyncIterator[list[DriverEvent]]:
        """:meth:`run`'s events in the batches the driver makes them: all that happen between two host calls.

        The driver does nothing between the events of one batch, so a reader
        that waits for its consumer only after each batch (the in-process
        stream) stops the run at the same point as one that waits after each
        event, for one task switch per batch instead of one per event.

        Raises:
            WorkflowRunError: the run failed (after its failure events).
        """
        try:
            async for batch in self._loop():
                yield batch
        except WorkflowRunError as e:
            yield self.failure_events(e)
            raise

    def turn_start(self) -> EngineSnapshot:
        """Where the current turn began: what a rollback returns the run to."""
        if self._turn_start is None:
            engine = self.engine
            fresh = self._entry_due and engine.superstep == 0 and not engine.state and not engine.outputs
            self._turn_start = Engine(engine.topology).snapshot() if fresh else engine.snapshot()
        return self._turn_start

    def _interrupt(self, asks: BoundaryAsks[Any]) -> None:
        """Carry out a waiting interruption at this boundary, before input is taken (``concurrent_input``)."""
        policy, asks.interrupt = asks.interrupt, None
        engine = self.engine
        cancelled, self._cancelled = self._cancelled, []
        superstep = engine.superstep + 1 if cancelled else engine.superstep
        rolled_back_to: int | None = None
        changed: list[str] = []
        if policy == "rollback":
            start = self.turn_start()
            rolled_back_to = start.superstep
            before = engine.state
            engine.roll_back(start, superstep_used=bool(cancelled))
            after = engine.state
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) is not after.get(k))
        else:
            policy = "interrupt"
            engine.interrupt(superstep_used=bool(cancelled))
        self._limits.restart(engine)
        self.host.interrupted(engine, policy, changed)
        self._report.emit(
            WorkflowInterruptedEvent(
                policy=policy,  # type: ignore[arg-type]
                superstep=superstep,
                cancelled=cancelled,
                rolled_back_to=rolled_back_to,
            )
        )

    async def _loop(self) -> AsyncIterator[list[DriverEvent]]:
        engine, host, asks = self.engine, self.host, self._asks
        self.turn_start()
        while True:
            had_work = engine.has_work()
            idle = None if had_work else engine.run_state()
            # The order at a boundary (docs/architecture.md): an accepted reset first (it wins over
            # what was queued with it), then an interruption (a message sent while busy), input, expiry,
            # requested checkpoints, the decision.
            if asks is not None and asks.reset is not None:
                await host.carry_out_reset(engine)
            if asks is not None and asks.interrupt is not None:
                self._interrupt(asks)
            if idle is not None and not self._turn_given:
                self._turn_start = engine.snapshot()  # at rest: the input that wakes the run begins a new turn
            self._turn_given = False
            if self._takes_input:
                await host.take_input(engine)
            self.expire()
            if idle is not None and engine.has_work():
                self._entry_due = True  # outside input (or a timeout) woke an idle run
                if self._report.shown is not None:
                    # The run was idle at this boundary whether the input came before it or after (a
                    # client answering at once, or a minute later): say so either way, on every host.
                    self._report.show_state(idle)
            if asks is not None and asks.checkpoints:
                await serve_checkpoint_asks(
                    engine,
                    asks.checkpoints,
                    lambda label: host.save_checkpoint(engine, "requested", label),
                    host.warn,
                )
            if self._report.out and self._pauses:
                yield self._report.flush()
            if self._restore_due:
                # A restored run's first superstep runs whatever it has to deliver (Agent Framework's).
                self._restore_due = False
                if not engine.has_work():
                    self._report.activate()
                    async for batch in self._superstep():
                        yield batch
                    continue
            if not engine.has_work() and host.may_finish(engine):
                self._report.show_state()
                host.on_status(RunStatus.COMPLETED, f"completed after {engine.superstep} supersteps")
                if self._report.out:
                    yield self._report.flush()
                return
            if engine.has_work() and self._entry_due:
                if self._paced and self.checkpoint_every > 0:
                    await host.reader_caught_up()
                await self._entry_checkpoint()
            if self._looks_before:
                await host.before_superstep(engine)
            if engine.has_work():
                if self._shows_status:
                    host.on_status(RunStatus.RUNNING, f"superstep {engine.superstep + 1}")
                self._report.activate()
                async for batch in self._superstep():
                    yield batch
                continue
            self._report.show_state()
            status = RunStatus.of(engine.run_state())
            if status is RunStatus.WAITING_FOR_INPUT:
                who = sorted({r.executor_id for r in engine.pending_requests.values()})
                n = len(engine.pending_requests)
                host.on_status(status, f"waiting for input: {n} request{'s' * (n != 1)} from {', '.join(who)}")
            else:
                host.on_status(status, f"idle after superstep {engine.superstep}; send a message or close")
            if self._report.out:
                yield self._report.flush()
            await host.wait_for_input(engine)

    async def _entry_checkpoint(self) -> None:
        """The checkpoint of an activation's input, before its first superstep (Agent Framework's "iteration 0").

        Taken when automatic checkpoints are on and new input (the start
        message, responses, a message sent to an idle run) is about to be
        processed, so a restore can replay that input from the start.
        """
        self._entry_due = False
        if self.checkpoint_every <= 0:
            return
        step = self.engine.superstep
        try:
            await self.host.save_checkpoint(self.engine, "entry")
        except CheckpointStorageError as e:
            raise CheckpointStorageError(
                f"checkpoint before superstep {step + 1} could not be saved: {e}", superstep=step
            ) from e

    async def _superstep(self) -> AsyncIterator[list[DriverEvent]]:
        engine, host = self.engine, self.host
        tasks = engine.begin_superstep()
        step = tasks[0].superstep if tasks else engine.superstep + 1  # none: a restored run's first (see restored)
        executor_ids = [t.executor_id for t in tasks]  # (the event's own list; the scope only reads it)
        with host.superstep_scope(step, executor_ids):
            self._report.emit(superstep_started_event(step, executor_ids))
            refused = self._limits.oversized_inputs(tasks)
            if refused:
                engine.abort_superstep()
                raise self._report.inputs_refused(refused, step)
            if self._report.out and self._pauses:
                yield self._report.flush()
            if self._paced and tasks:
                await host.reader_caught_up()
            try:
                outcomes = await host.run_steps(tasks, engine) if tasks else []
            except StepsInterrupted:
                engine.abort_superstep()
                self._cancelled = executor_ids
                return
            # One look at each outcome: failed steps, unfinished steps (most supersteps: none of them).
            failed: list[tuple[StepTask, StepFailure]] = []
            unfinished = False
            plain = True  # every outcome is a StepResult itself (then they are the results as they are)
            for t, o in zip(tasks, outcomes, strict=True):
                if type(o) is StepResult:
                    continue
                plain = False
                if o is None:
                    unfinished = True
                elif isinstance(o, StepFailure):
                    failed.append((t, o))
            if failed or unfinished:
                engine.abort_superstep()
                self._report.steps_uncommitted(tasks, outcomes)
                if not failed:
                    raise WorkflowError(f"superstep {step} was abandoned before its steps finished")
                first_task, first = failed[0]
                raise first.error(first_task.executor_id, step)
            results = (
                cast("list[StepResult]", outcomes)  # (``plain``: each one is a StepResult)
                if plain and type(outcomes) is list
                else [o if isinstance(o, StepResult) else StepResult() for o in outcomes]
            )
            try:
                plan = engine.prepare_commit(results)
            except WorkflowRunError:
                engine.abort_superstep()
                self._report.steps_uncommitted(tasks, outcomes)
                raise
            reduced: dict[str, Envelope] = {}
            for reduction in plan.reductions:
                try:
                    reduced[reduction.key] = await host.reduce(step, reduction)
                except ReducerFailed as e:
                    engine.abort_superstep()
                    self._report.steps_uncommitted(tasks, outcomes)
                    raise ReducerError(reduction.key, step, e.error_type, e.message) from None
            limits = self._limits
            updates = (
                ({**plan.state_updates, **reduced} if reduced else plan.state_updates) if limits.limit_state else {}
            )
            new_sizes = limits.commit_sizes(engine.state, tasks, results, updates) if updates else {}
            if isinstance(new_sizes, CommitRefused):
                engine.abort_superstep()
                raise self._report.commit_refused(tasks, results, new_sizes.blamed, new_sizes.error, step)
            # The clock stamps new requests only (a superstep that made none reads none).
            engine.apply_commit(plan, reduced, now=host.now() if plan.requests else None)
            if updates:
                limits.committed(new_sizes, engine.state)
            if self._tracks_commits:
                host.committed(plan, engine)
            for t, o in zip(tasks, outcomes, strict=True):
                self._report.step_events(t, o, committed=True)  # a cancelled step: invoked, nothing more
            limits.outputs_committed(engine, plan.outputs, step)
            checkpoint_id = None
            if checkpoint_due(engine.superstep, self.checkpoint_every):
                if self._report.out and self._pauses:
                    yield self._report.flush()
                if self._paced:
                    await host.reader_caught_up()
                try:
                    checkpoint_id = await host.save_checkpoint(engine, "auto")
                except CheckpointStorageError as e:
                    raise CheckpointStorageError(
                        f"checkpoint after superstep {step} could not be saved: {e}", superstep=step
                    ) from e
            # (``keys_written`` is made for this commit; hosts only read it)
            self._report.emit(superstep_completed_event(step, plan.keys_written, checkpoint_id))
            if self._report.out and self._pauses:
                yield self._report.flush()
