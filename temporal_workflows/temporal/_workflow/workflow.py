"""The Temporal workflow: the superstep driver as deterministic workflow code.

One dynamic workflow class serves every graph: the workflow type is the
graph's name, and the first thing a run does is a local activity that returns
the graph's topology, which records it in history. Replays read it from there,
so deploying a changed graph never changes a running execution.

This module runs no user code: steps, callable reducers, routing and the
validation of outside input all run in activities. The loop is
``_engine.driver.SuperstepDriver``, the same one the in-process runner drives; this
class is its host on Temporal. Its state lives in parts that each carry
themselves across continue-as-new:

* ``inbox.Inbox``: outside input (responses, messages) until a boundary, checked,
  accepted and taken there by ``admission.Admission`` (the validate activities too);
* ``checkpointing.Checkpoints``: checkpoints, resets and forks;
* ``status.StatusBoard``: the status query, search attribute and warnings;
* ``supersteps.StepRunner``: steps and reducers as activities;
* ``continuation.Continuation``: continue-as-new, when history is long or a reset asks.

Where a run starts (five starting points) is ``startup.start_engine``. The
driver's host (``_TemporalHost``) is given these parts and the run's ``RunHooks``.

This module is the run loop. The signal, update and query handlers are
declared in mixins the SDK collects from ``GraphWorkflow``'s bases, one file
per subject: ``queries.py`` (what a client reads), ``handlers.py`` (outside
input: responses, messages, deliveries), ``controls.py`` (close,
checkpoint, reset), over ``handler_base.py`` (the parts they read and the
checks they share). The names and argument types are in ``_protocol``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError, FailureError

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._engine.driver import DriverHost, RunStatus, StepOutcome, SuperstepDriver
from temporal_workflows._engine.inbound import CONCURRENT_INPUT, BoundaryAsks
from temporal_workflows._engine.limits import DEFAULT_MAX_PAYLOAD_BYTES
from temporal_workflows._engine.machine import (
    CommitPlan,
    Engine,
    Reduction,
    StepTask,
    Topology,
)
from temporal_workflows._engine.registry import resolve as resolve_type
from temporal_workflows._engine.reporting import failed_run_events
from temporal_workflows._engine.serde import Envelope, encode
from temporal_workflows._errors import (
    CheckpointStorageError,
    InvalidRunInputError,
    WorkflowError,
    WorkflowRunError,
)
from temporal_workflows._events import WorkflowEvent, WorkflowStartedEvent
from temporal_workflows.temporal._failures import short_message, to_failure
from temporal_workflows.temporal._protocol import (
    DEFAULT_MAX_HISTORY_EVENTS,
    EVENTS_TOPIC,
    MAX_ID_CHARS,
    MAX_STEPS_IN_FLIGHT,
    MAX_TYPE_NAME_CHARS,
    CheckpointSetup,
    Pinned,
    RunInput,
    too_long,
)
from temporal_workflows.temporal._workflow.admission import Admission
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.checkpointing import Checkpoints, ResetPlan
from temporal_workflows.temporal._workflow.children import (
    carry_sub_workflow,
    child_result,
    deliver_to_child,
)
from temporal_workflows.temporal._workflow.continuation import Continuation, RunCarry
from temporal_workflows.temporal._workflow.controls import ControlHandlers
from temporal_workflows.temporal._workflow.handler_base import RunParts
from temporal_workflows.temporal._workflow.handlers import InputHandlers
from temporal_workflows.temporal._workflow.inbox import Inbox
from temporal_workflows.temporal._workflow.locals import LocalActivities
from temporal_workflows.temporal._workflow.pacing import ReaderPace, stream_offset
from temporal_workflows.temporal._workflow.patches import (
    PATCH_CARRY_LATER,
    PATCH_CHECKPOINT_FAILURE_FAILS_RUN,
    PATCH_CLOSE_WAITS,
    PATCH_ENTRY_CHECKPOINT,
    PATCH_PIN_SIGNATURE,
    PATCH_RELEASE_OUTPUTS,
    PATCH_RESTORE_SUPERSTEP,
    PATCH_STATE_LIMIT,
    PATCH_STATE_PAGES,
    PATCH_STATUS_ON_CONTINUE_AS_NEW,
    PATCH_STATUS_ON_EVERY_FAILURE,
    RunPatches,
)
from temporal_workflows.temporal._workflow.pinning import pin_topology
from temporal_workflows.temporal._workflow.queries import QueryHandlers, _request_json
from temporal_workflows.temporal._workflow.readers import admit_stream_polls
from temporal_workflows.temporal._workflow.startup import start_engine
from temporal_workflows.temporal._workflow.status import StatusBoard
from temporal_workflows.temporal._workflow.supersteps import StepRunner
from temporal_workflows.temporal._workflow.telemetry import RunTelemetry
from temporal_workflows.temporal._workflow.turns import Turns

__all__ = [
    "GraphWorkflow",
    "PATCH_CARRY_LATER",
    "PATCH_CHECKPOINT_FAILURE_FAILS_RUN",
    "PATCH_ENTRY_CHECKPOINT",
    "PATCH_STATUS_ON_EVERY_FAILURE",
    "PATCH_STATUS_ON_CONTINUE_AS_NEW",
]


_JSON_PLAIN = {"encoding": b"json/plain"}


def _is_event_type(key: str | None) -> bool:
    """Whether ``key`` names a WorkflowEvent class (looked up, nothing built: a step's own events are left as sent)."""
    if key is None:
        return False
    try:
        return issubclass(resolve_type(key), WorkflowEvent)
    except Exception:
        return False


def _payload(env: Envelope) -> Payload:
    return Payload(metadata=_JSON_PLAIN, data=to_json(env))


def _failure_message(e: BaseException) -> str:
    """What failed the run, for ``status``: the activity's own error rather than "Activity task failed"."""
    while isinstance(e, FailureError) and not isinstance(e, ApplicationError) and e.cause is not None:
        e = e.cause
    return short_message(e, 1000) if not isinstance(e, FailureError) else " ".join(e.message.split())[:1000]


def _failure_type(e: BaseException) -> str:
    """The failure's type as the client reads it back (``InvalidRunInputError``, ``UnknownGraphError``, ...)."""
    while isinstance(e, FailureError) and not isinstance(e, ApplicationError) and e.cause is not None:
        e = e.cause
    return (e.type if isinstance(e, ApplicationError) else None) or type(e).__name__


def _pinned(raw: RawValue) -> Pinned:
    """The pinned topology and step options, also from runs recorded by earlier versions."""
    converter = workflow.payload_converter()
    try:
        pinned: Pinned = converter.from_payload(raw.payload, Pinned)
    except Exception:
        pinned = Pinned(converter.from_payload(raw.payload, Topology), None)
    if pinned.step_options is None:
        # Earlier versions kept executor options inside the topology.
        legacy: dict[str, Any] = converter.from_payload(raw.payload, dict)
        topology = legacy.get("topology", legacy)
        options = topology.get("executor_options") if isinstance(topology, dict) else None
        pinned = dataclasses.replace(pinned, step_options=options if isinstance(options, dict) else {})
    return pinned


def _check_input(inp: RunInput) -> None:
    """Refuse a malformed start input, naming the field (it would otherwise fail later, or for ever)."""
    if inp.checkpoint_every is not None and inp.checkpoint_every < 0:
        raise InvalidRunInputError(f"checkpoint_every must be 0 or more, not {inp.checkpoint_every}")
    if inp.max_history_events is not None and inp.max_history_events < 1:
        raise InvalidRunInputError(f"max_history_events must be positive, not {inp.max_history_events}")
    if inp.max_steps_in_flight is not None and not 1 <= inp.max_steps_in_flight <= MAX_STEPS_IN_FLIGHT:
        raise InvalidRunInputError(
            f"max_steps_in_flight must be 1 to {MAX_STEPS_IN_FLIGHT}, not {inp.max_steps_in_flight}"
        )
    if inp.concurrent_input is not None and inp.concurrent_input not in CONCURRENT_INPUT:
        raise InvalidRunInputError(
            f"concurrent_input must be one of {', '.join(CONCURRENT_INPUT)}, not {str(inp.concurrent_input)[:80]!r}"
        )
    if inp.message_type is not None and not isinstance(inp.message_type, str):
        raise InvalidRunInputError("message_type must be a type name (a string)")
    error = too_long("message_type", inp.message_type, MAX_TYPE_NAME_CHARS)
    if inp.fork_from is not None:
        error = error or too_long("fork_from.checkpoint_id", inp.fork_from.checkpoint_id, MAX_ID_CHARS)
    if error is not None:
        raise InvalidRunInputError(error)


@workflow.defn(dynamic=True, sandboxed=False)
class GraphWorkflow(QueryHandlers, InputHandlers, ControlHandlers):
    """Runs one graph execution: pins the topology, then drives supersteps, waiting durably when idle.

    Runs outside Temporal's sandbox: it calls no user code (handlers run in
    activities), and the sandbox's work around each workflow task cost more
    than the task itself. Determinism is checked instead by replaying every
    run of the test session inside the sandbox with its default restrictions
    (tests/integration/test_replay.py).
    """

    @workflow.init
    def __init__(self, args: Sequence[RawValue]) -> None:
        self.parts = RunParts()
        inp = RunInput()
        # A start input that is not a RunInput fails the run (in run()), rather than
        # the workflow task, which Temporal would retry for ever.
        self.parts.input_error = None
        if args:
            try:
                decoded = workflow.payload_converter().from_payload(args[0].payload, RunInput)
                if not isinstance(decoded, RunInput):
                    raise TypeError(f"got {type(decoded).__name__}")
                inp = decoded
            except Exception as e:
                self.parts.input_error = f'the start input is not {{"message": ...}} (a RunInput): {short_message(e)}'
        self.parts.input = inp
        carried = inp.carried if self.parts.input_error is None else None
        self.parts.carried = carried
        # Must be built here, in __init__: the stream registers its signal,
        # update and query handlers before the first event is delivered.
        self._stream = WorkflowStream(prior_state=carried.stream if carried else None)
        self._events = self._stream.topic(EVENTS_TOPIC, type=Envelope)
        self.parts.board = StatusBoard(self._publish, carried.status if carried else None)
        self._telemetry = RunTelemetry()
        self.parts.board.observe = self._telemetry.status
        self.patches = RunPatches()
        self.parts.budget = TaskBudget()
        self.locals = LocalActivities()  # read by locals.execute_local_activity
        # The reader a streamed call of the durable twin paces the run by (pacing.py).
        self.parts.pace = ReaderPace(carried.reader if carried else inp.reader, self.parts.board.warn)
        # The stream's polls: at most a few in flight, so input keeps its room, and none while a local
        # activity is in flight (readers.py); accepted ones tell how far a pacing reader has read.
        self._stream_polls = admit_stream_polls(
            self._stream, self.locals, self.parts.pace.polled, self.parts.pace.paces
        )
        carried_inbox = carried.inbox if carried else None
        inbox = Inbox(
            self.parts.board,
            carried_inbox,
            # (the stream's offset now: what the next event published gets; the SDK has no public reader of it)
            turns=Turns(self._stream._on_offset, carried_inbox.tracked if carried_inbox else ()),
        )
        self.parts.admission = Admission(
            inbox,
            self.parts.board,
            budget=self.parts.budget,
            patches=self.patches,
            locals=self.locals,
            payload_limit=lambda: self.parts.payload_limit,
            signature=self._signature,
        )
        self.parts.checkpoints = Checkpoints(carried.checkpoints if carried else None)
        self.parts.engine = None
        self.parts.topology = None
        self.parts.signature_from = None
        self.parts.shape = None
        self.parts.shape_note = None
        self.parts.steps = None
        self.parts.keep_alive = inp.keep_alive
        self.parts.closing = carried.closing if carried else False
        self.parts.close_waits = False  # asked when the close comes, or at the start of a closing execution
        self.parts.epoch = carried.epoch if carried else 0
        self.parts.segment = carried.segment if carried else 0
        self.parts.start_env = carried.start if carried else None
        self.parts.lineage = carried.lineage if carried else None
        # A sub-workflow's child: runs to rest, refuses outside input (children.py).
        self.parts.sub_workflow = inp.subrun if self.parts.input_error is None else None
        self._sub_workflow_known: set[str] = set(inp.subrun.known or []) if inp.subrun and carried else set()
        self._sub_workflow_ignored: list[str] = []
        # A child's intermediate outputs go to its parent with its outcome (those before a continue-as-new too).
        self._sub_workflow_intermediate: list[Envelope] = (
            list(inp.subrun.intermediate or []) if inp.subrun and carried else []
        )
        self.parts.payload_limit = DEFAULT_MAX_PAYLOAD_BYTES
        self.parts.continuation = Continuation(
            stream=self._stream,
            board=self.parts.board,
            inbox=inbox,
            checkpoints=self.parts.checkpoints,
            budget=self.parts.budget,
            patches=self.patches,
            publish=self._publish,
            payload_limit=lambda: self.parts.payload_limit,
            max_events=DEFAULT_MAX_HISTORY_EVENTS,
        )
        self.parts.state_text = None  # committed_state_page's text, and its version

    @workflow.dynamic_config
    def dynamic_config(self) -> workflow.DynamicWorkflowConfig:
        # An engine error is a bug in the graph: fail the run, never retry the task for ever.
        return workflow.DynamicWorkflowConfig(failure_exception_types=[WorkflowError])

    # -- events ------------------------------------------------------------------

    def _publish(self, event: WorkflowEvent | Envelope) -> None:
        # A ready-made payload skips the stream's per-item converter lookup (a fifth
        # of a run's workflow CPU when measured); the bytes are what the converter
        # would make of the envelope, and the codec still applies when they are served.
        env = event if isinstance(event, Envelope) else encode(event)
        if isinstance(env.data, dict) and "timestamp" not in env.data and _is_event_type(env.type):
            # Stamped with workflow time (the same on every replay; publishing is no command), so a closed
            # run's events read back say when each happened. Added to the JSON: the event is not decoded here.
            env = Envelope(env.type, {**env.data, "timestamp": workflow.now().isoformat()})
        self._events.publish(_payload(env))

    # -- the run -----------------------------------------------------------------

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> dict[str, Any]:
        # A new run (not the next segment of one) is counted started; each segment has its workflow.run span.
        with self._telemetry.run(
            workflow.info().workflow_type, new_run=self.parts.carried is None, segment=self.parts.segment
        ):
            return await self._run_reported()

    async def _run_reported(self) -> dict[str, Any]:
        try:
            return await self._run()
        except (FailureError, WorkflowError) as e:
            # Whatever fails the run (its input, an activity of its own), ``status`` must not say otherwise.
            if not self.parts.board.closed:
                message = _failure_message(e)
                upsert = self.parts.board.attribute is not None and self.patches.get(PATCH_STATUS_ON_EVERY_FAILURE)
                self.parts.board.fail(message, upsert=upsert)
                # Like every failed run's, its event stream ends with the failure (publishing is no command).
                superstep = self.parts.engine.superstep if self.parts.engine is not None else 0
                for event in failed_run_events(_failure_type(e), message, superstep):
                    self._publish(event)
            if self.parts.engine is not None:
                self._telemetry.requests(self.parts.engine, ended="unanswered")
            raise

    async def _run(self) -> dict[str, Any]:
        self.patches.ask_at_start()  # first, before any activity (see patches.py)
        if self.parts.closing:  # carried across continue-as-new: this execution closes as the last one did
            self.parts.close_waits = self.patches.get(PATCH_CLOSE_WAITS)
        name = workflow.info().workflow_type
        inp = self.parts.input
        if self.parts.input_error is not None:
            raise to_failure(InvalidRunInputError(self.parts.input_error))
        try:
            _check_input(inp)
        except InvalidRunInputError as e:
            raise to_failure(e) from None
        # The graph its starter built (its signature in the input), else the first worker's (pinning.py).
        signature = inp.graph_signature if inp.graph_signature and self.patches.get(PATCH_PIN_SIGNATURE) else None
        self.parts.signature_from = "starter" if signature else "first worker"
        first_segment = self.parts.carried is None and self.parts.sub_workflow is None
        raw = await pin_topology(name, signature, self.parts.board, first_segment=first_segment)
        pinned = _pinned(raw)
        topology = pinned.topology
        self.parts.topology = topology
        self.parts.shape = pinned.shape
        self.parts.shape_note = pinned.shape_note
        self.parts.board.attribute = pinned.status_attribute
        cps = self.parts.checkpoints
        cps.setup = pinned.checkpoints or CheckpointSetup()
        self.parts.payload_limit = pinned.max_payload_bytes or DEFAULT_MAX_PAYLOAD_BYTES
        self.parts.budget.stored_over = pinned.stored_over
        self.parts.continuation.max_events = inp.max_history_events or DEFAULT_MAX_HISTORY_EVENTS
        self.parts.continuation.explicit_max_events = inp.max_history_events is not None
        steps = self.parts.steps = StepRunner(
            topology,
            pinned.step_options or {},
            epoch=self.parts.epoch,
            budget=self.parts.budget,
            notice=self.parts.board.note,
            settled=self.parts.board.unnote,
        )
        steps.child_signatures = pinned.subworkflow_signatures or {}
        steps.max_in_flight = inp.max_steps_in_flight or MAX_STEPS_IN_FLIGHT
        steps.streaming = inp.stream
        steps.invocation_kwargs = inp.invocation_kwargs
        engine = Engine(topology)
        point = await start_engine(
            engine, inp, self.parts.carried, self.parts.sub_workflow, checkpoints=cps, budget=self.parts.budget
        )
        if point.start is not None:
            self.parts.start_env = point.start
        if point.lineage is not None:
            self.parts.lineage = point.lineage
        self.parts.engine = engine
        self._telemetry.requests(engine)  # requests a restored or continued run waits on
        steps.restored(engine)
        if self.parts.epoch:
            cps.metadata["resets"] = self.parts.epoch
        if self.parts.lineage is not None:
            cps.metadata["lineage"] = self.parts.lineage
        every = inp.checkpoint_every if inp.checkpoint_every is not None else cps.setup.every
        if self.parts.sub_workflow is not None:
            every = 0  # a child's checkpoints are its parent's: they hold it
        driver = SuperstepDriver(
            engine,
            _TemporalHost(
                telemetry=self._telemetry,
                steps=steps,
                admission=self.parts.admission,
                checkpoints=cps,
                board=self.parts.board,
                continuation=self.parts.continuation,
                patches=self.patches,
                pace=self.parts.pace,
                stream=self._stream,
                run=RunHooks(
                    closing=self._closing_now,
                    may_finish=self._may_finish,
                    continue_as_new=lambda engine, may_postpone: self._continue_as_new(
                        engine, may_postpone=may_postpone
                    ),
                ),
            ),
            checkpoint_every=every,
            payload_limit=lambda: self.parts.payload_limit,
            # New input (not a restored snapshot) is checkpointed before its first superstep.
            entry_checkpoint=point.new_input,
            limit_state=self.patches.get(PATCH_STATE_LIMIT),
            # Runs recorded before steps read the state in pages kept it within one payload.
            state_limit=None if self.patches.get(PATCH_STATE_PAGES) else (lambda: self.parts.payload_limit),
            release_outputs=lambda: self.patches.get(PATCH_RELEASE_OUTPUTS),
            intermediate=self._sub_workflow_intermediate if self.parts.sub_workflow is not None else None,
            restored=point.restored and self.patches.get(PATCH_RESTORE_SUPERSTEP),
        )
        carried = self.parts.carried
        if carried is None or carried.reason != "history":
            self._publish(WorkflowStartedEvent(run_id=workflow.info().run_id))
            # A run restored from a checkpoint says again what it is waiting for.
            for event in driver.announce_pending():
                self._publish(event)
        try:
            if self.parts.sub_workflow is not None and carried is None:
                now = workflow.now().timestamp()
                delivered = await deliver_to_child(
                    engine, self.parts.sub_workflow, now=now, validate=self.parts.admission.validate
                )
                self._sub_workflow_known, self._sub_workflow_ignored = delivered
            async for event in driver.run():
                self._publish(event)
        except WorkflowRunError as e:
            self.parts.board.error = str(e)
            raise to_failure(e) from None
        # Let in-flight handlers finish (and stream pollers see the end) before closing.
        await self.parts.continuation.settle(engine)
        self._telemetry.requests(engine, ended="unanswered")
        if self.parts.sub_workflow is not None:
            try:
                return child_result(
                    engine,
                    self._sub_workflow_known,
                    self._sub_workflow_ignored,
                    run_id=workflow.info().workflow_id,
                    timestamp=workflow.now(),
                    limit=self.parts.payload_limit,
                    intermediate=self._sub_workflow_intermediate,
                )
            except WorkflowRunError as e:
                self.parts.board.error = str(e)
                raise to_failure(e) from None
        return {
            "outputs": [o.value.data for o in engine.outputs],
            "output_types": [o.value.type for o in engine.outputs],
            "superstep": engine.superstep,
            "status": RunStatus.COMPLETED,
            "unanswered_requests": [_request_json(r) for r in engine.pending_requests.values()],
            **({"outputs_released": engine.outputs_released} if engine.outputs_released else {}),
        }

    def _may_finish(self, engine: Engine) -> bool:
        """Whether the run ends when it has no work (otherwise it waits for input)."""
        # A sub-workflow's child ends each activation at rest; its parent keeps it while it waits.
        if self.parts.sub_workflow is not None:
            return True
        if self.parts.closing:
            # Closed, a keep-alive run ends as a run without keep-alive does: once no request waits for an answer.
            return not (self.parts.close_waits and engine.pending_requests)
        return not self.parts.keep_alive and not engine.pending_requests

    def _closing_now(self) -> bool:
        """A close that ends the run at its next boundary with no work (not one that waits for answers)."""
        engine = self.parts.engine
        return self.parts.closing and not (self.parts.close_waits and engine is not None and engine.pending_requests)

    # -- continue-as-new (continuation.py) --------------------------------------------

    def _run_carry(self) -> RunCarry:
        """What the run is now, for a continue-as-new (its parts carry themselves)."""
        steps = self.parts.steps
        return RunCarry(
            reset=self.parts.checkpoints.asked.reset,
            start=self.parts.start_env,
            epoch=self.parts.epoch,
            closing=self.parts.closing,
            segment=self.parts.segment,
            lineage=self.parts.lineage,
            input=self.parts.input,
            keep_alive=self.parts.keep_alive,
            stream=steps.streaming if steps is not None else self.parts.input.stream,
            invocation_kwargs=steps.invocation_kwargs if steps is not None else self.parts.input.invocation_kwargs,
            subrun=carry_sub_workflow(
                self.parts.sub_workflow, self._sub_workflow_known, self._sub_workflow_intermediate
            ),
            reader=self.parts.pace.reader,
        )

    async def _continue_as_new(self, engine: Engine, *, may_postpone: bool = False) -> None:
        """Continue as new at this boundary (a reset, or a long history): steps in flight go with this run."""
        if self.parts.steps is not None:
            self.parts.steps.in_flight = []

        def closing_segment() -> None:
            self._telemetry.requests(engine, ended="continued_as_new")
            self._telemetry.status(RunStatus.CONTINUED_AS_NEW)

        await self.parts.continuation.continue_as_new(
            engine, self._run_carry, may_postpone=may_postpone, before=closing_segment
        )


@dataclass(frozen=True)
class RunHooks:
    """What the driver's host asks of the run itself, beyond its parts: whether a close ends it at its next
    boundary with no work, whether it may finish when idle, and continuing as new (``GraphWorkflow`` supplies
    them)."""

    closing: Callable[[], bool]
    may_finish: Callable[[Engine], bool]
    continue_as_new: Callable[[Engine, bool], Awaitable[None]]


class _TemporalHost(DriverHost):
    """The driver's host on Temporal: the workflow's parts, at boundaries and in supersteps.

    It is given each collaborator it uses (no reaching into the workflow): the
    parts that carry themselves, and the run's :class:`RunHooks`. Its
    checkpoint and reset requests are the checkpoints' ``asked`` queue.
    """

    boundary_asks: BoundaryAsks[ResetPlan]

    def __init__(
        self,
        *,
        telemetry: RunTelemetry,
        steps: StepRunner,
        admission: Admission,
        checkpoints: Checkpoints,
        board: StatusBoard,
        continuation: Continuation,
        patches: RunPatches,
        pace: ReaderPace,
        stream: WorkflowStream,
        run: RunHooks,
    ) -> None:
        self.telemetry = telemetry
        self.steps = steps
        self.pace = pace
        self.stream = stream
        self.admission = admission
        self.inbox = admission.inbox
        self.checkpoints = checkpoints
        self.board = board
        self.continuation = continuation
        self.patches = patches
        self.run = run
        self.boundary_asks = checkpoints.asked

    def now(self) -> float:
        return workflow.now().timestamp()

    async def carry_out_reset(self, engine: Engine) -> None:
        await self.run.continue_as_new(engine, False)

    async def take_input(self, engine: Engine) -> None:
        asks = self.boundary_asks
        await self.admission.take(engine, lambda: asks.interrupt is not None)
        self.telemetry.requests(engine)

    def warn(self, text: str) -> None:
        self.board.warn(text)

    def may_finish(self, engine: Engine) -> bool:
        return self.run.may_finish(engine)

    async def before_superstep(self, engine: Engine) -> None:
        later = self.continuation
        if (
            later.history_is_long()
            and later.worth_continuing(engine)
            and not later.carry_later(engine)
            and not later.inbox_takes_first()
        ):
            await self.run.continue_as_new(engine, True)

    async def reader_caught_up(self) -> None:
        asks, run = self.boundary_asks, self.run
        await self.pace.caught_up(stream_offset(self.stream), lambda: asks.reset is not None or run.closing())

    async def wait_for_input(self, engine: Engine) -> None:
        self.pace.idle()  # the call that paced the run has read on to here, and returned
        inbox, asks, run = self.inbox, self.boundary_asks, self.run
        deadline = engine.next_deadline()
        timeout = max(0.0, deadline - workflow.now().timestamp()) if deadline is not None else None
        # On timeout a request's deadline has come: the driver expires it at the next boundary.
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: bool(inbox or asks) or run.closing(),
                timeout=timeout,
                timeout_summary="request deadline",
            )

    def on_status(self, status: RunStatus, details: str) -> None:
        if status in (RunStatus.IDLE, RunStatus.WAITING_FOR_INPUT):
            self.inbox.turns.ended()  # the driver decided to wait: the turn of what it took ends at this rest
        self.board.set(status, details)

    def superstep_scope(self, superstep: int, executor_ids: Sequence[str]) -> AbstractContextManager[Any]:
        # Steps started inside this span are its children (the context rides in
        # the activity headers), so a trace reads run → superstep → step.
        workflow.set_current_details(f"superstep {superstep}: running {', '.join(executor_ids)}")
        return self.telemetry.superstep(superstep, executor_ids)

    async def run_steps(self, tasks: Sequence[StepTask], engine: Engine) -> Sequence[StepOutcome]:
        asks = self.boundary_asks
        # A reset, or a message that interrupts the turn (concurrent_input), abandons the superstep.
        outcomes = await self.steps.run(tasks, engine, lambda: asks.abandons)
        self.telemetry.steps_finished(tasks, outcomes)
        return outcomes

    def interrupted(self, engine: Engine, policy: str, changed_keys: Sequence[str]) -> None:
        self.inbox.turns.ended(interrupted=True)  # before the interrupting message is taken: its turn begins
        steps = self.steps
        # Steps read the state of this boundary, not one a worker cached before the interruption.
        steps.state_version = f"{workflow.info().run_id}:{engine.superstep}:{policy}"
        steps.restored(engine)
        steps.in_flight = []
        if changed_keys:
            self.checkpoints.written(list(changed_keys))
        if policy == "rollback":
            self.inbox.reopened(engine.pending_requests)

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:
        return await self.steps.reduce(superstep, reduction)

    def committed(self, plan: CommitPlan, engine: Engine) -> None:
        self.steps.committed(plan, engine)
        self.checkpoints.written(plan.keys_written)
        self.telemetry.requests(engine)

    async def save_checkpoint(self, engine: Engine, trigger: str, label: str | None = None) -> str | None:
        if trigger == "requested":
            return await self.checkpoints.take(engine, label, trigger)  # its failure is its asker's
        if trigger == "entry" and not self.patches.get(PATCH_ENTRY_CHECKPOINT):
            return None
        try:
            return await self.checkpoints.take(engine, None, trigger)
        except CheckpointStorageError as e:
            if self.patches.get(PATCH_CHECKPOINT_FAILURE_FAILS_RUN):
                raise
            self.board.warn(str(e))
            return None
