"""Durable, graph-shaped agent workflows on Temporal.

Define a graph of executors joined by edges (Agent Framework's API), run it in
process for tests and notebooks, and host the same graph durably on Temporal.

The public surface, one module per subject (the full list: ``docs/api.md``):
this module holds the graph API an Agent Framework user imports (builder,
executors, context, run result, checkpoints); ``temporal_workflows.events``
the event classes; ``temporal_workflows.errors`` the named errors;
``temporal_workflows.temporal`` the plugin and the client;
``temporal_workflows.llama`` LlamaIndex programs on Temporal
(``TemporalRuntime``); ``temporal_workflows.agents`` agents as steps. Names
that left this module in 0.x are still importable from it for one release,
with a ``DeprecationWarning`` naming their new place.
"""

import warnings
from typing import TYPE_CHECKING, Any

from temporal_workflows import errors as _errors
from temporal_workflows import events as _events
from temporal_workflows._checkpoints.base import CheckpointStorage, WorkflowCheckpoint
from temporal_workflows._checkpoints.file import FileCheckpointStorage
from temporal_workflows._checkpoints.memory import HistoryCheckpointStorage, InMemoryCheckpointStorage
from temporal_workflows._checkpoints.sqlite import SqliteCheckpointStorage
from temporal_workflows._engine.registry import register_checkpoint_type
from temporal_workflows._engine.serde import register_type
from temporal_workflows._events import (
    WorkflowErrorDetails,
    WorkflowEvent,
    WorkflowEventSource,
    WorkflowRunResult,
    WorkflowRunState,
)
from temporal_workflows._graph.builder import WorkflowBuilder
from temporal_workflows._graph.context import WorkflowContext
from temporal_workflows._graph.edges import Case, Default
from temporal_workflows._graph.executor import (
    Executor,
    ExecutorOptions,
    FunctionExecutor,
    executor,
    handler,
    response_handler,
)
from temporal_workflows._graph.subworkflow import WorkflowExecutor
from temporal_workflows._graph.viz import WorkflowViz
from temporal_workflows._graph.workflow import Workflow, load_workflow
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows._subworkflow import SubWorkflowRequestMessage, SubWorkflowResponseMessage
from temporal_workflows._version import __version__ as __version__

if TYPE_CHECKING:
    from temporal_workflows.agents import AgentExecutor as AgentExecutor
    from temporal_workflows.agents import AgentExecutorRequest as AgentExecutorRequest
    from temporal_workflows.agents import AgentExecutorResponse as AgentExecutorResponse

_AGENT_NAMES = ("AgentExecutor", "AgentExecutorRequest", "AgentExecutorResponse")
"""Agent Framework users import these from where ``WorkflowBuilder`` comes from; they need the ``agents`` extra,
so they are imported on first use (importing the graph API never imports Agent Framework). They are
``temporal_workflows.agents``'s names, so they stay out of this module's ``__all__`` (a star import must not
need the extra)."""

_MOVED: dict[str, str] = {
    **{name: "temporal_workflows.errors" for name in _errors.__all__},
    **{name: "temporal_workflows.events" for name in _events.__all__ if name != "WorkflowEvent"},
}
"""Names this module exported before the surface was split by subject: still importable here for one release,
with a ``DeprecationWarning`` naming where they live now."""

_RETIRED: dict[str, str] = {
    "CheckpointId": "checkpoint ids are opaque strings: annotate them as `str`",
    "StateView": "it is the type of `WorkflowContext.state`; annotate with `WorkflowContext` instead",
}
"""Names that leave the public surface without a new place (internal types), with what to use instead."""


def _retired_value(name: str) -> Any:
    if name == "CheckpointId":
        from temporal_workflows._checkpoints.base import CheckpointId

        return CheckpointId
    from temporal_workflows._graph.context import StateView

    return StateView


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        new = _MOVED[name]
        warnings.warn(
            f"importing {name} from temporal_workflows is deprecated: import it from {new} "
            f"(`from {new} import {name}`); the old import goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        module = _errors if new == "temporal_workflows.errors" else _events
        return getattr(module, name)
    if name in _RETIRED:
        warnings.warn(
            f"temporal_workflows.{name} is deprecated and leaves the public API in the next release: {_RETIRED[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return _retired_value(name)
    if name not in _AGENT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from temporal_workflows import agents
    except ImportError as e:
        raise ImportError(
            f"temporal_workflows.{name} needs Agent Framework, which the 'agents' extra installs: "
            "pip install 'temporal-workflows[agents]' (agent-framework-core)",
            name=__name__,
        ) from e
    value = getattr(agents, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *_AGENT_NAMES, "__version__"})


__all__ = [
    # building a graph (Agent Framework's names)
    "Case",
    "Default",
    "Executor",
    "ExecutorOptions",
    "FunctionExecutor",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowContext",
    "WorkflowExecutor",
    "SubWorkflowRequestMessage",
    "SubWorkflowResponseMessage",
    "WorkflowViz",
    "executor",
    "handler",
    "response_handler",
    "RequestTimedOut",
    "load_workflow",
    "register_type",
    # running it
    "WorkflowErrorDetails",
    "WorkflowEvent",
    "WorkflowEventSource",
    "WorkflowRunResult",
    "WorkflowRunState",
    # checkpoints
    "CheckpointStorage",
    "FileCheckpointStorage",
    "HistoryCheckpointStorage",
    "InMemoryCheckpointStorage",
    "SqliteCheckpointStorage",
    "WorkflowCheckpoint",
    "register_checkpoint_type",
]
