"""The data that crosses between client, workflow and activities.

Kept in one small module with no user code, so the Temporal workflow sandbox
and the activity worker agree on it, and so the wire contract is documented
in one place (see ``docs/temporal.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._engine import StepTask
from ._serde import Envelope

__all__ = [
    "ACTIVITY_REDUCE",
    "ACTIVITY_TOPOLOGY",
    "QUERY_COMMITTED_STATE",
    "ReduceInput",
    "RunInput",
    "StateSnapshot",
    "StepInput",
    "step_activity_name",
]

ACTIVITY_TOPOLOGY = "temporal_workflows.topology"
"""Local activity that returns a graph's topology; its result pins the graph for the run."""

ACTIVITY_REDUCE = "temporal_workflows.reduce"
"""Activity running callable state reducers (user code) for a commit."""

QUERY_COMMITTED_STATE = "temporal_workflows.committed_state"
"""Query serving the committed state to step activities whose worker has not cached it."""


def step_activity_name(graph_name: str, executor_id: str) -> str:
    """Activity type of an executor's steps: readable in the Web UI and metrics."""
    return f"{graph_name}.{executor_id}"


@dataclass
class RunInput:
    """Workflow input. ``client.start_workflow(name, {"message": ...})`` is the whole contract.

    Attributes:
        message: The start message as JSON (validated against the start
            executor's handler types by the first step).
        message_type: ``"module:QualName"`` when the caller sent a typed model
            and wants that exact type restored; usually omitted.
    """

    message: Any = None
    message_type: str | None = None


@dataclass
class StateSnapshot:
    """Committed state at a boundary, as served to step activities."""

    version: str
    state: dict[str, Envelope]


@dataclass
class StepInput:
    """Activity input of one step.

    ``state`` is inlined only while the committed state is small; otherwise
    the activity reads it from its worker's cache (or by query), so history
    carries each state value once, in the diff that wrote it, however many
    steps read it.
    """

    graph: str
    task: StepTask
    run_id: str
    state_version: str
    state: dict[str, Envelope] | None = None


@dataclass
class ReduceInput:
    graph: str
    key: str
    committed: Envelope | None
    writes: list[Envelope] = field(default_factory=list)
