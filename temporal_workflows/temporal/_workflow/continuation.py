"""Continue-as-new for ``GraphWorkflow``: when a run's history is long, or a reset starts it again.

A part of the workflow that carries itself, as the inbox and checkpoints do:
it is given the parts it settles and reads (stream, status board, inbox,
checkpoints, task budget, patches) when the workflow is built, owns what it
alone decides on (when this execution's history counts as long), and asks the
workflow for what the run is at the moment it continues (:class:`RunCarry`,
read after the handlers settled, so a reset or close accepted meanwhile wins).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

from temporal_workflows._checkpoints.base import checkpoint_of
from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._engine.limits import GUIDANCE, json_size
from temporal_workflows._engine.machine import Engine, EngineSnapshot
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import RunTooLargeError
from temporal_workflows._events import WorkflowEvent, WorkflowResetEvent
from temporal_workflows.temporal._protocol import (
    POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES,
    POSTPONE_CONTINUE_AS_NEW_HISTORY_EVENTS,
    Carried,
    CarriedCheckpoints,
    RunInput,
    SubWorkflowInput,
    quote,
)
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.checkpointing import Checkpoints, ResetPlan
from temporal_workflows.temporal._workflow.inbox import Inbox
from temporal_workflows.temporal._workflow.patches import (
    PATCH_CARRY_LATER,
    PATCH_RELEASE_OUTPUTS,
    PATCH_STATE_PAGES,
    PATCH_STATUS_ON_CONTINUE_AS_NEW,
    PATCH_VALIDATE_IN_ACTIVITY,
    RunPatches,
)
from temporal_workflows.temporal._workflow.status import StatusBoard

__all__ = ["MIN_SEGMENT_EVENTS", "STREAM_EVENTS_CARRIED", "Continuation", "RunCarry"]

STREAM_EVENTS_CARRIED = 1000
"""Most recent events a run carries across continue-as-new (older offsets are then gone)."""

MIN_SEGMENT_EVENTS = 20
"""History events a run adds before it may continue as new again."""
_CARRIED_BESIDE_STATE = 64 * 1024
"""Room a continue-as-new input keeps beside the engine snapshot (checkpoint list, warnings, start message)."""


@dataclass
class RunCarry:
    """What the run is when it continues as new, beyond what its parts carry themselves.

    Attributes:
        reset: The reset to continue from, or ``None`` (history was long).
        start: The run's start message (a clean reset starts again from it).
        epoch: Resets so far.
        closing: The run was asked to close.
        segment: This execution's number in the run.
        lineage: The run and checkpoint a fork started from.
        input: This execution's start input (its options are carried on).
        keep_alive: The run waits for input when idle instead of finishing.
        stream: Steps stream their events (``run(stream=True)``).
        invocation_kwargs: The run's invocation kwargs.
        subrun: A sub-workflow child's carried input, or ``None``.
    """

    reset: ResetPlan | None
    start: Envelope | None
    epoch: int
    closing: bool
    segment: int
    lineage: dict[str, Any] | None
    input: RunInput
    keep_alive: bool
    stream: bool | None
    invocation_kwargs: dict[str, Any] | None
    subrun: SubWorkflowInput | None


class Continuation:
    """Decides when a long history continues as new, settles the run's handlers, and continues it."""

    def __init__(
        self,
        *,
        stream: WorkflowStream,
        board: StatusBoard,
        inbox: Inbox,
        checkpoints: Checkpoints,
        budget: TaskBudget,
        patches: RunPatches,
        publish: Callable[[WorkflowEvent | Envelope], None],
        payload_limit: Callable[[], int],
        max_events: int,
    ) -> None:
        self._stream = stream
        self._board = board
        self._inbox = inbox
        self._checkpoints = checkpoints
        self._budget = budget
        self.patches = patches
        self._publish = publish
        self._payload_limit = payload_limit
        self.max_events = max_events
        """History events after which this execution continues as new (the run's ``max_history_events``)."""
        self.updates_since_task = False
        """An update completed since the last workflow task (its completion must be sent before continuing)."""
        self._segment_start: int | None = None
        self._told_state_too_large = False

    def history_is_long(self) -> bool:
        info = workflow.info()
        length = info.get_current_history_length()
        if self._segment_start is None:
            self._segment_start = length
        # A new run must make some progress first, or a tiny limit would continue as new for ever.
        if length < self._segment_start + MIN_SEGMENT_EVENTS:
            return False
        return info.is_continue_as_new_suggested() or length >= self.max_events

    def carry_later(self, engine: Engine) -> bool:
        """Whether a long history continues as new at a later boundary: the engine holds outside input that
        arrived since the last one (large messages or responses), too large to carry, and this superstep
        takes it. History still has room, so the run processes it first rather than fail."""
        snap = engine.snapshot()
        size = json_size(snap)
        if size <= self._payload_limit():
            return False
        unprocessed = json_size(snap.pending) + json_size(snap.responses)
        info = workflow.info()
        room = (
            info.get_current_history_size() < POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES
            and info.get_current_history_length() < POSTPONE_CONTINUE_AS_NEW_HISTORY_EVENTS
        )
        if not room:
            return False
        if size - unprocessed <= self._payload_limit() and self.patches.get(PATCH_CARRY_LATER):
            return True
        return self.patches.get(PATCH_STATE_PAGES) and self._state_too_large_to_carry(snap, size)

    def _state_too_large_to_carry(self, snap: EngineSnapshot, size: int) -> bool:
        """Whether the committed state alone keeps the run from continuing as new (it may take up to
        ``STATE_PAYLOADS`` payloads, a continue-as-new carries one): the run then goes on in this execution
        while history has room, and the status says so once per execution."""
        if size - json_size(snap.outputs) <= self._payload_limit() - _CARRIED_BESIDE_STATE:
            return False  # outputs, not state: the oldest are released when the run continues as new
        state = json_size(snap.state)
        if not self._told_state_too_large:
            self._told_state_too_large = True
            self._board.note(
                f"the committed state ({state:,} bytes as JSON) is too large for a continue-as-new to carry "
                f"(one payload: {self._payload_limit():,} bytes); the run goes on in this execution while its "
                f"history has room (up to {POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES:,} bytes, "
                f"{POSTPONE_CONTINUE_AS_NEW_HISTORY_EVENTS:,} events), then fails with RunTooLargeError unless "
                f"the state shrinks; {GUIDANCE}"
            )
        return True

    def inbox_takes_first(self) -> bool:
        """Whether a long history continues as new only after the next boundary takes the inbox's input.

        Validated in regular activities (``PATCH_VALIDATE_IN_ACTIVITY``), an
        update's input reaches the inbox when its activity returns, also while
        the run settles its handlers to continue as new. Too large to carry, it
        is taken into the engine first, while history has room; runs recorded
        before decided without it.
        """
        if not self._inbox or not self.patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            return False
        info = workflow.info()
        return (
            json_size([i.value.data for i in self._inbox.items]) > self._payload_limit() // 2
            and info.get_current_history_size() < POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES
            and info.get_current_history_length() < POSTPONE_CONTINUE_AS_NEW_HISTORY_EVENTS
        )

    async def settle(self, engine: Engine, *, continuing: bool = False) -> None:
        """Let every handler finish before the run closes or continues as new.

        Checkpoint requests that arrive meanwhile are served here (this is a
        boundary), or their updates would wait for ever. Before continuing as
        new, the updates' completions are first sent in a workflow task of
        their own: completed in the same task as the continue-as-new, an
        update is sometimes delivered again to the new run
        (temporalio/temporal#6375), which would apply a message twice.
        """
        self._stream.detach_pollers()
        cps = self._checkpoints
        while True:
            await workflow.wait_condition(lambda: workflow.all_handlers_finished() or bool(cps.asks))
            if cps.asks:
                await cps.serve(engine, self._board.warn)
                continue
            if not continuing or not self.updates_since_task:
                return
            self.updates_since_task = False
            await workflow.sleep(timedelta(milliseconds=1), summary="flush update completions")

    def _stream_state(self, keep: int = STREAM_EVENTS_CARRIED) -> WorkflowStreamState:
        state = self._stream.get_state()
        extra = len(state.log) - keep
        if extra > 0:
            state = dataclasses.replace(state, log=state.log[extra:], base_offset=state.base_offset + extra)
        return state

    async def continue_as_new(
        self,
        engine: Engine,
        run: Callable[[], RunCarry],
        *,
        may_postpone: bool = False,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Continue as new at this boundary, for a reset or because history is long.

        The engine snapshot (or the reset's starting point) is the new run's
        input; each part carries itself. Nothing is lost: handlers finish first.
        Returns (``may_postpone``) when the handlers that finished left input
        too large to carry in the inbox: the next boundary takes it first.
        ``run`` says what the run is once its handlers settled; ``before`` is
        called just before the run continues (its telemetry closes the segment).
        """
        await self.settle(engine, continuing=True)
        # Its input (up to a payload) waits for the next workflow task if this one has recorded much.
        while await self._budget.room(self._payload_limit()):
            await self.settle(engine, continuing=True)
        if may_postpone and self.inbox_takes_first():
            return
        info = workflow.info()
        cps = self._checkpoints
        now = run()  # after settling: a reset (or close) accepted meanwhile wins
        plan = now.reset
        if plan is None:
            carried = Carried(
                reason="history",
                snapshot=checkpoint_of(
                    engine,
                    checkpoint_id="",
                    run_id=info.workflow_id,
                    previous_checkpoint_id=cps.last_id,
                    timestamp=workflow.now(),
                ),
                start=now.start,
                epoch=now.epoch,
                inbox=self._inbox.carry(),
                checkpoints=cps.carry(),
                status=self._board.carry(),
                closing=now.closing,
            )
            workflow.logger.info("continuing as new after %s history events", info.get_current_history_length())
        else:
            cp = plan.checkpoint
            own = cp is not None and cp.run_id == info.workflow_id
            chain = cps.carry()
            carried = Carried(
                reason="reset",
                snapshot=cp,
                # A clean reset later starts again from the run's start message, however many resets came
                # before; a reset with a new message makes that the start message.
                start=plan.start if cp is None else now.start,
                epoch=now.epoch + 1,
                checkpoints=CarriedCheckpoints(
                    last_id=cp.checkpoint_id if cp is not None else None,
                    base_id=cp.checkpoint_id if cp is not None and own and not cps.history_only else None,
                    listed=chain.listed,
                    kept=chain.kept,
                ),
            )
            # Results of steps still running, queued input, requests and outputs go with the old run.
            self._publish(
                WorkflowResetEvent(
                    checkpoint_id=plan.requested_checkpoint_id,
                    superstep=cp.superstep if cp is not None else 0,
                    resets=now.epoch + 1,
                )
            )
        carried.segment = now.segment + 1
        carried.lineage = now.lineage
        carried.stream = self._stream_state()
        arg = RunInput(
            keep_alive=now.keep_alive,
            stream=now.stream,
            invocation_kwargs=now.invocation_kwargs,
            checkpoint_every=now.input.checkpoint_every,
            max_history_events=now.input.max_history_events,
            max_steps_in_flight=now.input.max_steps_in_flight,
            concurrent_input=now.input.concurrent_input,
            carried=carried,
            subrun=now.subrun,
        )
        size = json_size(arg)
        if size > self._payload_limit():
            # The stream's recent events are a convenience for late subscribers: shed them first.
            carried.stream = self._stream_state(keep=0)
            size = json_size(arg)
            if size > self._payload_limit() and self.patches.get(PATCH_RELEASE_OUTPUTS):
                # Then the oldest outputs: each was an ``output`` event when committed (Engine.release_outputs).
                size = self._release_outputs(arg, size)
            if size > self._payload_limit():
                raise self._too_large_to_continue(arg, size, engine.superstep)
        if self._board.attribute is not None and self.patches.get(PATCH_STATUS_ON_CONTINUE_AS_NEW):
            # This segment closes: it is no longer running or waiting; its successor says where the run is.
            self._board.set(RunStatus.CONTINUED_AS_NEW, "continued as new")
        if before is not None:
            before()
        workflow.continue_as_new(args=[arg])
        raise AssertionError("unreachable")  # continue_as_new raises

    def _release_outputs(self, arg: RunInput, size: int) -> int:
        """Release the oldest outputs the continue-as-new input carries until it fits; its size then."""
        carried = arg.carried
        assert carried is not None and carried.snapshot is not None
        snap = carried.snapshot
        over, release = size - self._payload_limit(), 0
        while over > 0 and release < len(snap.outputs):
            over -= json_size(snap.outputs[release].value.data) + 1
            release += 1
        if release:
            carried.snapshot = snap.model_copy(
                update={"outputs": snap.outputs[release:], "outputs_released": snap.outputs_released + release}
            )
        return json_size(arg)

    def _too_large_to_continue(self, arg: RunInput, size: int, superstep: int) -> RunTooLargeError:
        """Name what really makes the continue-as-new input large: parts and state keys, largest first."""
        carried = arg.carried
        assert carried is not None
        parts: list[tuple[int, str]] = []
        snapshot = carried.snapshot
        if snapshot is not None:
            parts += [(json_size(v.data), f"state key {quote(k)}") for k, v in snapshot.state.items()]
            parts.append((json_size([o.value.data for o in snapshot.outputs]), "outputs"))
            parts.append((json_size(snapshot.messages), "pending messages"))
            parts.append((json_size(list(snapshot.pending_requests.values())), "pending requests"))
        checkpoints = carried.checkpoints
        for label, part in (
            ("outside input not yet delivered", carried.inbox),
            ("checkpoint list", checkpoints.listed if checkpoints else None),
            ("checkpoints kept in the run (history-only storage)", checkpoints.kept if checkpoints else None),
            ("warnings", carried.status),
            ("start message", carried.start),
            ("lineage", carried.lineage),
            ("event stream", carried.stream),
        ):
            if part:
                parts.append((json_size(part), label))
        largest = sorted(parts, reverse=True)[:3]
        return RunTooLargeError(
            f"the run cannot continue as new: what it carries is {size:,} bytes as JSON, over the payload limit of "
            f"{self._payload_limit():,} bytes; largest: {', '.join(f'{what} ({n:,} bytes)' for n, what in largest)}; "
            f"{GUIDANCE}",
            superstep=superstep,
        )
