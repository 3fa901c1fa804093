"""Checkpoints, resets and forks of a run on Temporal.

Workflow code never touches storage: a checkpoint goes to the
``save_checkpoint`` local activity (as a delta of the last one saved, so its
cost is what changed), and comes back through ``load_checkpoint``. With
history-only storage the run keeps its last few checkpoints itself and serves
them by query. Ids come from ``workflow.uuid4()``, so they are the same on
every replay.

Checkpoint and reset requests wait in :attr:`Checkpoints.asked` (the engine's
``inbound.BoundaryAsks``), which the driver serves at its fixed points of a
boundary, as it does on every host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from temporal_workflows._checkpoints.base import WorkflowCheckpoint, check_signature, checkpoint_of
from temporal_workflows._engine.driver import serve_checkpoint_asks
from temporal_workflows._engine.inbound import BoundaryAsks, CheckpointAsk
from temporal_workflows._engine.machine import Engine, Topology, check_snapshot
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import CheckpointStorageError, GraphSignatureMismatchError, WorkflowError
from temporal_workflows.temporal._failures import innermost, refuse, to_failure
from temporal_workflows.temporal._protocol import (
    ACTIVITY_LOAD_CHECKPOINT,
    ACTIVITY_SAVE_CHECKPOINT,
    FAILURE_CHECKPOINT_BASE_MISSING,
    FAILURE_CHECKPOINT_NOT_FOUND,
    FAILURE_INVALID_RUN_INPUT,
    FAILURE_UNDELIVERABLE,
    LEGACY_FAILURE_TYPES,
    CarriedCheckpoints,
    CheckpointSetup,
    LoadCheckpointInput,
    ResetRequest,
    SaveCheckpointInput,
    quote,
)
from temporal_workflows.temporal._workflow.admission import Validate
from temporal_workflows.temporal._workflow.locals import execute_local_activity

__all__ = ["CHECKPOINTS_LISTED", "Checkpoints", "ResetPlan"]

CHECKPOINTS_LISTED = 1000
"""Checkpoint entries the ``checkpoints`` query keeps (newest last)."""

_NOT_RETRYABLE = [
    "CheckpointStorageError",
    FAILURE_CHECKPOINT_BASE_MISSING,
    *(old for old, new in LEGACY_FAILURE_TYPES.items() if new == FAILURE_CHECKPOINT_BASE_MISSING),
]


def _message(e: BaseException) -> str:
    cause = innermost(e)
    return cause.message if isinstance(cause, ApplicationError) else str(cause)


@dataclass
class ResetPlan:
    """An accepted reset: start again from ``checkpoint``, or from ``start`` (None: idle)."""

    checkpoint: WorkflowCheckpoint | None
    start: Envelope | None
    requested_checkpoint_id: str | None


class Checkpoints:
    """This run's checkpoints: taking, saving, listing, and loading them for a reset or a fork."""

    def __init__(self, carried: CarriedCheckpoints | None) -> None:
        carried = carried or CarriedCheckpoints()
        self.setup = CheckpointSetup()
        self.last_id: str | None = carried.last_id
        self._base_id: str | None = carried.base_id
        self._dirty: set[str] = set(carried.dirty_keys)
        self.listed: list[dict[str, Any]] = list(carried.listed)
        self.kept: dict[str, WorkflowCheckpoint] = {c.checkpoint_id: c for c in carried.kept}
        self.asked: BoundaryAsks[ResetPlan] = BoundaryAsks()
        """Checkpoint and reset requests waiting for a boundary (the driver serves them there)."""
        self.metadata: dict[str, Any] = {}
        """Said of every checkpoint this execution takes (resets so far, lineage of a fork)."""

    @property
    def asks(self) -> list[CheckpointAsk]:
        """The checkpoints asked for, oldest first."""
        return self.asked.checkpoints

    @property
    def history_only(self) -> bool:
        return self.setup.store == "history"

    def written(self, keys: list[str]) -> None:
        """State keys a commit wrote: the next delta carries them."""
        self._dirty.update(keys)

    def restored(self, checkpoint_id: str | None, *, base: bool) -> None:
        """The run now continues from ``checkpoint_id`` (a fork or reset); with ``base``, deltas build on it."""
        self.last_id = checkpoint_id
        if base:
            self._base_id = checkpoint_id

    # -- taking ---------------------------------------------------------------------------

    async def serve(self, engine: Engine, warn: Callable[[str], None]) -> None:
        """Take the checkpoints asked for at a boundary where the driver does not (the run settling its handlers)."""
        await serve_checkpoint_asks(engine, self.asks, lambda label: self.take(engine, label, "requested"), warn)

    async def take(self, engine: Engine, label: str | None, trigger: str) -> str:
        """Snapshot the engine at this boundary and store it.

        Raises:
            CheckpointStorageError: it could not be saved.
        """
        info = workflow.info()
        cp_id = workflow.uuid4().hex
        full = checkpoint_of(
            engine,
            checkpoint_id=cp_id,
            run_id=info.workflow_id,
            previous_checkpoint_id=self.last_id,
            timestamp=workflow.now(),
            metadata={"label": label, "trigger": trigger, "temporal_run_id": info.run_id, **self.metadata},
        )
        if self.history_only:
            self.kept[cp_id] = full
        else:
            await self._save(full, label)
        self.listed.append(
            {
                "checkpoint_id": cp_id,
                "superstep": full.superstep,
                "label": label,
                "created_at": full.timestamp,
                "parent_id": self.last_id,
                "trigger": trigger,
                "temporal_run_id": info.run_id,
            }
        )
        del self.listed[:-CHECKPOINTS_LISTED]
        self.last_id = cp_id
        return cp_id

    async def _save(self, full: WorkflowCheckpoint, label: str | None) -> None:
        """Save through the local activity, as a delta of the last saved checkpoint when there is one."""
        name = workflow.info().workflow_type
        base = self._base_id
        for i, base_id in enumerate([base, None] if base is not None else [None]):
            if base_id is not None:
                dirty = sorted(self._dirty)
                body = full.model_copy(update={"state": {k: full.state[k] for k in dirty if k in full.state}})
                inp = SaveCheckpointInput(name, body, base_id, [k for k in dirty if k not in full.state])
            else:
                inp = SaveCheckpointInput(name, full)
            try:
                await execute_local_activity(
                    ACTIVITY_SAVE_CHECKPOINT,
                    inp,
                    result_type=str,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=_NOT_RETRYABLE),
                    summary=f"checkpoint{' ' + quote(label) if label else ''} · superstep {full.superstep}",
                )
            except (ActivityError, ApplicationError) as e:
                cause = innermost(e)
                kind = LEGACY_FAILURE_TYPES.get(getattr(cause, "type", None) or "", getattr(cause, "type", None))
                if kind == FAILURE_CHECKPOINT_BASE_MISSING and i == 0:
                    continue  # the delta's base is gone: send it whole
                raise CheckpointStorageError(_message(e)) from None
            self._base_id = full.checkpoint_id
            self._dirty.clear()
            return

    # -- finding and loading --------------------------------------------------------------

    def unknown(self, checkpoint_id: str) -> ApplicationError:
        known = [c["checkpoint_id"] for c in self.listed[-10:]]
        if self.history_only:
            known = [k for k in known if k in self.kept]
        return refuse(
            FAILURE_CHECKPOINT_NOT_FOUND,
            f"no checkpoint {quote(checkpoint_id)} in workflow {workflow.info().workflow_id!r}; "
            f"latest: {known or 'none'}",
            checkpoint_id=checkpoint_id,
        )

    async def find(self, workflow_id: str, checkpoint_id: str) -> WorkflowCheckpoint:
        if self.history_only and workflow_id == workflow.info().workflow_id:
            cp = self.kept.get(checkpoint_id)
            if cp is None:
                raise self.unknown(checkpoint_id)
            return cp
        return await self.load(workflow_id, checkpoint_id)

    async def load(self, workflow_id: str, checkpoint_id: str) -> WorkflowCheckpoint:
        """Read a checkpoint through the load activity; a refusal names what is wrong."""
        try:
            cp: WorkflowCheckpoint = await execute_local_activity(
                ACTIVITY_LOAD_CHECKPOINT,
                LoadCheckpointInput(workflow.info().workflow_type, workflow_id, checkpoint_id, self.history_only),
                result_type=WorkflowCheckpoint,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=[FAILURE_CHECKPOINT_NOT_FOUND]),
                summary=f"load checkpoint {quote(checkpoint_id)}",
            )
        except (ActivityError, ApplicationError) as e:
            raise refuse(FAILURE_CHECKPOINT_NOT_FOUND, _message(e), checkpoint_id=checkpoint_id) from None
        return cp

    @staticmethod
    def check_signature(cp: WorkflowCheckpoint, topology: Topology, allow: bool) -> None:
        try:
            check_signature(cp, topology, allow_mismatch=allow)
        except GraphSignatureMismatchError as e:
            raise to_failure(e) from None

    # -- resets ---------------------------------------------------------------------------

    async def plan_reset(
        self,
        req: ResetRequest,
        topology: Topology,
        validate: Validate,
        *,
        start: Envelope | None,
        lineage: dict[str, Any] | None,
    ) -> ResetPlan:
        """Check a reset request and fetch what it restores; raises a refusal if it is unusable."""
        if req.checkpoint_id is not None:
            cp = await self.find(workflow.info().workflow_id, req.checkpoint_id)
            self.check_signature(cp, topology, req.allow_signature_mismatch)
            try:
                # The run continues as new from it: refuse now what the new run could not start from.
                check_snapshot(topology, cp.to_snapshot())
            except WorkflowError as e:
                raise refuse(
                    FAILURE_INVALID_RUN_INPUT,
                    f"checkpoint {quote(req.checkpoint_id)} cannot be restored: {e}",
                    checkpoint_id=req.checkpoint_id,
                ) from None
            return ResetPlan(cp, None, req.checkpoint_id)
        if req.has_message:
            start_id = topology.start_executor_id
            checked = await validate(start_id, req.envelope, None)
            if checked.value is None:
                raise refuse(
                    checked.error_type or FAILURE_UNDELIVERABLE,
                    checked.error or f"start executor {start_id!r} cannot take the reset message",
                )
            return ResetPlan(None, checked.value, None)
        if start is None and lineage is not None:
            # A forked run starts again where it was forked from.
            cp = await self.load(lineage["workflow_id"], lineage["checkpoint_id"])
            return ResetPlan(cp, None, None)
        return ResetPlan(None, start, None)

    def carry(self, keep_kept: int | None = None) -> CarriedCheckpoints:
        keep = self.setup.keep if keep_kept is None else keep_kept
        return CarriedCheckpoints(
            last_id=self.last_id,
            base_id=self._base_id,
            dirty_keys=sorted(self._dirty),
            listed=list(self.listed),
            kept=list(self.kept.values())[-keep:] if keep else [],
        )
