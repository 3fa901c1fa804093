"""The signal and update handlers of ``GraphWorkflow`` that control a run: close, checkpoint, reset, pace.

Checkpoint and reset requests are checked here and queued in the run's
``BoundaryAsks`` (``Checkpoints.asked``, the engine's ``inbound.BoundaryAsks``), which
the driver serves at its fixed points of the next boundary, as on every host:
a checkpoint after that boundary's input and expiry; a reset first, planned
when asked (its checkpoint loaded and checked), the run then continuing as new
from it.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._engine.inbound import CheckpointAsk
from temporal_workflows._engine.limits import json_size
from temporal_workflows._errors import CheckpointStorageError
from temporal_workflows.temporal._failures import refuse, to_failure
from temporal_workflows.temporal._protocol import (
    FAILURE_INPUT_TOO_LONG,
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    MAX_TYPE_NAME_CHARS,
    SIGNAL_CHECKPOINT,
    SIGNAL_CLOSE,
    SIGNAL_RESET,
    UPDATE_CHECKPOINT,
    UPDATE_PACE,
    UPDATE_RESET,
    CheckpointRequest,
    PaceInput,
    ResetRequest,
    too_long,
)
from temporal_workflows.temporal._workflow.checkpointing import ResetPlan
from temporal_workflows.temporal._workflow.handler_base import _NO_ARGUMENT, HandlerBase
from temporal_workflows.temporal._workflow.patches import PATCH_CLOSE_WAITS

__all__ = ["ControlHandlers"]


def _reset_error(req: ResetRequest) -> str | None:
    """Why a reset request is refused before anything is looked up: an id or type name over its limit."""
    return too_long("checkpoint id", req.checkpoint_id, MAX_ID_CHARS) or too_long(
        "message type", req.message_type, MAX_TYPE_NAME_CHARS
    )


def _label_error(req: CheckpointRequest | None) -> str | None:
    return too_long("label", req.label if req else None, MAX_LABEL_CHARS)


class ControlHandlers(HandlerBase):
    """Close, checkpoint and reset (a mixin of ``GraphWorkflow``)."""

    @workflow.signal(name=SIGNAL_CLOSE)
    def close(self) -> None:
        """Let a keep-alive run complete once it is idle: no work, and no request waiting for an answer.

        From now on new messages are refused (``RunClosedError``, "the run is closing"); the work the run
        has (the running superstep, messages already queued) is done, and answers to its pending requests
        are still taken. A request is never dropped: the run completes when the last one is answered (or
        times out, by its own ``on_timeout``). Runs recorded before ``PATCH_CLOSE_WAITS`` completed at once,
        listing pending requests in the result's ``unanswered_requests``.
        """
        if not self.parts.closing:
            self.parts.close_waits = self.patches.get(PATCH_CLOSE_WAITS)
        self.parts.closing = True

    @workflow.signal(name=SIGNAL_CHECKPOINT)
    def checkpoint_signal(self, raw: RawValue = _NO_ARGUMENT) -> None:
        """Take a checkpoint at the next boundary; a failure becomes a warning."""
        req, ok = self._signal_arg(SIGNAL_CHECKPOINT, raw, CheckpointRequest)
        if not ok or self._sub_workflow_ignores(SIGNAL_CHECKPOINT):
            return
        error = _label_error(req)
        if error is not None:
            # Never stored: the checkpoint list is carried across continue-as-new and served by query.
            self.parts.board.warn(f"signal 'checkpoint' ignored: {error}")
            return
        if not self.parts.board.closed:
            self.parts.checkpoints.asks.append(CheckpointAsk(req.label if req else None, warn=True))

    @workflow.update(name=UPDATE_CHECKPOINT)
    async def take_checkpoint(self, req: CheckpointRequest | None = None) -> dict[str, Any]:
        """Take a checkpoint at the next boundary (now, if idle); returns its id once saved."""
        self.parts.continuation.updates_since_task = True
        ask = CheckpointAsk(req.label if req else None)
        self.parts.checkpoints.asks.append(ask)
        await workflow.wait_condition(lambda: ask.done)
        if ask.error is not None or ask.checkpoint_id is None:
            raise to_failure(CheckpointStorageError(ask.error or "checkpoint failed"))
        return {"checkpoint_id": ask.checkpoint_id, "superstep": ask.superstep, "label": ask.label}

    @take_checkpoint.validator
    def _validate_take_checkpoint(self, req: CheckpointRequest | None = None) -> None:
        self._check_open()
        self._check_not_busy()
        error = _label_error(req)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)

    @workflow.signal(name=SIGNAL_RESET)
    async def reset_signal(self, raw: RawValue = _NO_ARGUMENT) -> None:
        """Reset at the next boundary; an unusable request becomes a warning."""
        req, ok = self._signal_arg(SIGNAL_RESET, raw, ResetRequest)
        if not ok:
            return
        error = _reset_error(req) if req is not None else None
        if error is not None:
            self.parts.board.warn(f"reset refused: {error}")
            return
        await self._quiet()
        try:
            self.parts.checkpoints.asked.reset = await self._plan_reset(req or ResetRequest())
        except ApplicationError as e:
            self.parts.board.warn(f"reset refused: {e.message}")

    @workflow.update(name=UPDATE_RESET)
    async def reset_run(self, req: ResetRequest | None = None) -> dict[str, Any]:
        """Reset at the next boundary (now, if idle); returns once the reset is accepted."""
        self.parts.continuation.updates_since_task = True
        self.parts.budget.charge(json_size(req))  # the SDK repeats the accepted update's input in this task
        plan = await self._plan_reset(req or ResetRequest())
        self.parts.checkpoints.asked.reset = plan
        return {
            "accepted": True,
            "checkpoint_id": plan.requested_checkpoint_id,
            "superstep": plan.checkpoint.superstep if plan.checkpoint is not None else 0,
        }

    @reset_run.validator
    def _validate_reset_run(self, req: ResetRequest | None = None) -> None:
        self._check_open()
        self._check_not_busy()
        error = _reset_error(req) if req is not None else None
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        cid = req.checkpoint_id if req else None
        cps = self.parts.checkpoints
        if cid is not None and cps.history_only and cid not in cps.kept:
            raise cps.unknown(cid)
        self.parts.admission.check_room(req)

    @workflow.update(name=UPDATE_PACE)
    def pace(self, inp: PaceInput) -> dict[str, Any]:
        """A streamed caller of the durable twin follows the run, stops following, or left it (``pacing.py``)."""
        paced = self.parts.pace.act(inp.reader, inp.action)
        return {"run_id": workflow.info().run_id, "paced": paced}

    @pace.validator
    def _validate_pace(self, inp: PaceInput) -> None:
        self._check_open()
        self._check_not_busy()
        error = too_long("reader", inp.reader, MAX_ID_CHARS)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)

    async def _plan_reset(self, req: ResetRequest) -> ResetPlan:
        self._check_open()
        await workflow.wait_condition(lambda: self.parts.topology is not None)
        assert self.parts.topology is not None
        plan = await self.parts.checkpoints.plan_reset(
            req,
            self.parts.topology,
            self.parts.admission.validate,
            start=self.parts.start_env,
            lineage=self.parts.lineage,
        )
        if plan.checkpoint is not None:
            # Loaded by a local activity, whose marker records it in this workflow task.
            self.parts.budget.charge(json_size(plan.checkpoint))
        return plan
