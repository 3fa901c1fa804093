"""Checkpoints kept in memory, or (on Temporal) in the run's own history."""

from __future__ import annotations

from temporal_workflows._checkpoints.base import CheckpointId, WorkflowCheckpoint, _DerivedQueries, _matches, _order
from temporal_workflows._errors import CheckpointNotFoundError

__all__ = ["HistoryCheckpointStorage", "InMemoryCheckpointStorage"]


class InMemoryCheckpointStorage(_DerivedQueries):
    """Checkpoints in a dict: for tests and notebooks. Saving is O(1)."""

    def __init__(self) -> None:
        self._items: dict[str, WorkflowCheckpoint] = {}

    async def save(self, checkpoint: WorkflowCheckpoint) -> CheckpointId:
        self._items[checkpoint.checkpoint_id] = checkpoint
        return checkpoint.checkpoint_id

    async def load(self, checkpoint_id: CheckpointId) -> WorkflowCheckpoint:
        try:
            return self._items[checkpoint_id]
        except KeyError:
            raise CheckpointNotFoundError(checkpoint_id) from None

    async def list_checkpoints(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> list[WorkflowCheckpoint]:
        return _order([c for c in self._items.values() if _matches(c, workflow_name, run_id)])

    async def delete(self, checkpoint_id: CheckpointId) -> bool:
        return self._items.pop(checkpoint_id, None) is not None


class HistoryCheckpointStorage(InMemoryCheckpointStorage):
    """Checkpoints kept in the run itself: no external store to run or back up.

    On Temporal a checkpoint is then just a marker in the workflow: its body
    is rebuilt from history on replay and served by the ``get_checkpoint``
    query, so it costs no history bytes at all. Across continue-as-new the
    run carries the ``keep`` most recent ones (their bodies then ride in the
    next run's input); older ones can no longer be restored. Forks read the
    source run's checkpoint by query, so they work from any worker. In
    process it behaves like :class:`InMemoryCheckpointStorage`.
    """

    def __init__(self, keep: int = 3) -> None:
        super().__init__()
        self.keep = keep
