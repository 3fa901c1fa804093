"""Activities that save and load checkpoints for runs hosted on Temporal.

Workflow code never touches storage: it hands a checkpoint to the
``save_checkpoint`` local activity and reads one back through
``load_checkpoint``. Both are local activities, so their inputs are not
written to history (only their small results are) and a checkpoint costs
history bytes only for its id.

The workflow sends each checkpoint as a delta of the previous one (the state
keys written since), so serializing it costs what changed, not the whole
state. This worker keeps the last full checkpoint of each run to apply the
delta to, and falls back to loading it from the storage on another worker.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from temporal_workflows._checkpoints.base import CheckpointStorage, WorkflowCheckpoint
from temporal_workflows._checkpoints.memory import HistoryCheckpointStorage
from temporal_workflows._engine.limits import json_size, max_payload_bytes
from temporal_workflows._errors import CheckpointNotFoundError, storage_failure
from temporal_workflows.temporal._protocol import (
    ACTIVITY_LOAD_CHECKPOINT,
    ACTIVITY_SAVE_CHECKPOINT,
    FAILURE_CHECKPOINT_BASE_MISSING,
    FAILURE_CHECKPOINT_STORAGE,
    QUERY_CHECKPOINT,
    LoadCheckpointInput,
    SaveCheckpointInput,
)

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["build_checkpoint_activities"]


class _LastSaved:
    """The last checkpoint this worker saved per workflow id: the base of the next delta."""

    def __init__(self, max_runs: int = 256) -> None:
        self._max = max_runs
        self._items: OrderedDict[str, WorkflowCheckpoint] = OrderedDict()

    def get(self, workflow_id: str, checkpoint_id: str) -> WorkflowCheckpoint | None:
        cp = self._items.get(workflow_id)
        return cp if cp is not None and cp.checkpoint_id == checkpoint_id else None

    def put(self, cp: WorkflowCheckpoint) -> None:
        self._items[cp.run_id] = cp
        self._items.move_to_end(cp.run_id)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


def _refused(message: str, type: str = "CheckpointNotFoundError") -> ApplicationError:
    """A checkpoint error no retry can fix: the workflow reports it to whoever asked."""
    return ApplicationError(message, type=type, non_retryable=True)


def build_checkpoint_activities(
    hosted: Callable[[str], Workflow], storage_for: Callable[[Workflow], CheckpointStorage]
) -> list[Callable[..., Any]]:
    """The two checkpoint activities; ``storage_for`` picks a graph's storage."""
    last = _LastSaved()

    @activity.defn(name=ACTIVITY_SAVE_CHECKPOINT)
    async def save_checkpoint(inp: SaveCheckpointInput) -> str:
        storage = storage_for(hosted(inp.graph))
        cp = inp.checkpoint
        if inp.base_id is not None:
            base = last.get(cp.run_id, inp.base_id)
            if base is None:
                try:
                    base = await storage.load(inp.base_id)
                except CheckpointNotFoundError:
                    raise _refused(
                        f"checkpoint {inp.base_id!r}, the base of the delta, is not in the storage",
                        FAILURE_CHECKPOINT_BASE_MISSING,
                    ) from None
            state = dict(base.state)
            for key in inp.removed:
                state.pop(key, None)
            state.update(cp.state)
            cp = cp.model_copy(update={"state": state})
        try:
            saved = await storage.save(cp)
        except Exception as e:
            # Not retried: the caller hears about it (update error, warning or the run's failure) and may ask
            # again. The message is the one the in-process host gives for the same storage error.
            raise _refused(str(storage_failure(e)), FAILURE_CHECKPOINT_STORAGE) from e
        last.put(cp)
        return saved

    @activity.defn(name=ACTIVITY_LOAD_CHECKPOINT)
    async def load_checkpoint(inp: LoadCheckpointInput) -> WorkflowCheckpoint:
        wf = hosted(inp.graph)
        storage = storage_for(wf)
        if inp.history_only or isinstance(storage, HistoryCheckpointStorage):
            # The checkpoint lives in the source run: read it by query (replays it if closed).
            handle = activity.client().get_workflow_handle(inp.workflow_id)
            try:
                found: WorkflowCheckpoint | None = await handle.query(
                    QUERY_CHECKPOINT,
                    inp.checkpoint_id,
                    result_type=WorkflowCheckpoint | None,  # type: ignore[arg-type]
                )
            except Exception as e:
                raise _refused(
                    f"cannot read checkpoint {inp.checkpoint_id!r} from workflow {inp.workflow_id!r}: {e}"
                ) from e
            if found is None:
                raise _refused(
                    f"workflow {inp.workflow_id!r} has no checkpoint {inp.checkpoint_id!r} "
                    "(history-only checkpoints older than the last continue-as-new are not kept)"
                )
            cp = found
        else:
            try:
                cp = await storage.load(inp.checkpoint_id)
            except CheckpointNotFoundError:
                raise _refused(f"no checkpoint {inp.checkpoint_id!r} in {type(storage).__name__}") from None
        if cp.run_id != inp.workflow_id or cp.workflow_name != wf.name:
            # Checkpoints are scoped by workflow id: an id from another run is refused, not restored.
            raise _refused(
                f"checkpoint {inp.checkpoint_id!r} belongs to workflow {cp.run_id!r} "
                f"(graph {cp.workflow_name!r}), not {inp.workflow_id!r} (graph {wf.name!r})"
            )
        size, limit = json_size(cp), max_payload_bytes()
        if size > limit:
            # Its state may take several payloads (STATE_PAYLOADS), but this result, and the continue-as-new
            # that restores it, are one payload each: refused here, the reset or fork is refused, not the run
            # left with a workflow task that fails for ever.
            raise _refused(
                f"checkpoint {inp.checkpoint_id!r} is {size:,} bytes as JSON, over the payload limit of "
                f"{limit:,} bytes, so a run cannot restore it (its committed state is larger than one payload)"
            )
        return cp

    return [save_checkpoint, load_checkpoint]
