"""A LlamaIndex ``Context``'s JSON form (``to_dict`` / ``from_dict``): the state, and mid-run the checkpoint to resume.

Apart from the in-process run (``_local.py``), so ``Context`` reads and writes
it without importing the run that uses it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from temporal_workflows._checkpoints.base import WorkflowCheckpoint
from temporal_workflows._engine.machine import EngineSnapshot, shared_part
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.llama._runtime import UNSERIALIZABLE
from temporal_workflows.llama.errors import ContextSerdeError

if TYPE_CHECKING:
    from temporal_workflows.llama.context import _Pre
    from temporal_workflows.llama.workflow import Workflow

__all__ = ["FORMAT", "pre_snapshot", "read_snapshot", "snapshot_dict"]

FORMAT = "temporal_workflows.llama/1"
"""The ``format`` of a context's JSON, checked when it is read back."""


def _env_json(env: Envelope, where: str) -> dict[str, Any]:
    if env.type == UNSERIALIZABLE:
        kind = env.data.get("type") if isinstance(env.data, dict) else "?"
        raise ContextSerdeError(f"{where} holds a {kind}, which has no JSON form; the context cannot be serialized")
    return env.to_json()


def snapshot_dict(workflow: Workflow, snap: EngineSnapshot, *, is_running: bool) -> dict[str, Any]:
    """A context's JSON: the state, and (mid-run) the engine checkpoint to resume from."""
    compiled = workflow._compiled()
    topology = compiled.graph.topology
    state = {k: _env_json(v, f"state key {k!r}") for k, v in shared_part(snap.state).items()}
    data: dict[str, Any] = {
        "format": FORMAT,
        "workflow": topology.name,
        "graph_signature_hash": topology.signature_hash,
        "is_running": is_running,
        "state": state,
    }
    if is_running:
        cp = WorkflowCheckpoint.from_snapshot(
            snap,
            checkpoint_id="context",
            workflow_name=topology.name,
            run_id="",
            graph_signature_hash=topology.signature_hash,
            previous_checkpoint_id=None,
            timestamp=datetime.now(UTC),
        )
        raw = cp.model_dump(mode="json")
        if UNSERIALIZABLE in str(raw):
            raise ContextSerdeError(
                "the run holds an event or value with no JSON form (kept only as a Python object in this process); "
                "the context cannot be serialized mid-run"
            )
        data["snapshot"] = raw
    return data


def pre_snapshot(workflow: Workflow, pre: _Pre) -> dict[str, Any]:
    compiled = workflow._compiled()
    topology = compiled.graph.topology
    data: dict[str, Any] = dict(pre.snapshot) if pre.snapshot is not None else {"is_running": False}
    data.update(
        format=FORMAT,
        workflow=topology.name,
        graph_signature_hash=topology.signature_hash,
        state={k: _env_json(v, f"state key {k!r}") for k, v in pre.backend.state.items()},
    )
    return data


def read_snapshot(workflow: Workflow, data: dict[str, Any]) -> dict[str, Any]:
    """Check a ``to_dict()`` payload against ``workflow`` (the same steps) before a run resumes from it."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ContextSerdeError(
            "Error creating a Context instance: the payload is not a Context.to_dict() of temporal_workflows.llama "
            f"(format {FORMAT!r})"
        )
    topology = workflow._compiled().graph.topology
    if data.get("is_running") and data.get("graph_signature_hash") != topology.signature_hash:
        raise ContextSerdeError(
            f"the context was saved by a run of another version of the workflow (signature "
            f"{str(data.get('graph_signature_hash'))[:12]}…, this one {topology.signature_hash[:12]}…): "
            "its steps changed"
        )
    if data.get("is_running") and not isinstance(data.get("snapshot"), dict):
        raise ContextSerdeError("a running context's payload has no 'snapshot'")
    if not isinstance(data.get("state", {}), dict):
        raise ContextSerdeError("the payload's 'state' is not an object")
    return data
