"""What a host needs of a workflow object: the graph :class:`Workflow` it is.

Hosts, the plugin and the sub-workflow executor take "a workflow" (a built
graph) and need the graph. They ask through :data:`GRAPH_HOOK` rather than by
``isinstance(obj, Workflow)``, so they need not import ``_graph/workflow.py``,
which itself imports the hosts it runs on (in process, and ``on_temporal``):
no import cycle between the graph API and its hosts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["GRAPH_HOOK", "as_graph_workflow", "is_graph_workflow"]

GRAPH_HOOK = "__temporal_workflows_graph__"
"""Name of the method a workflow object has to return the graph :class:`Workflow` it is (a graph returns itself)."""


def is_graph_workflow(obj: Any) -> bool:
    """Whether ``obj`` is a built graph :class:`Workflow` (the one object that is its own graph)."""
    hook = getattr(type(obj), GRAPH_HOOK, None)
    return hook is not None and hook(obj) is obj


def as_graph_workflow(obj: Any) -> Workflow:
    """The graph :class:`Workflow` for ``obj``: itself, found through :data:`GRAPH_HOOK`.

    Raises:
        TypeError: ``obj`` is neither.
    """
    hook = getattr(type(obj), GRAPH_HOOK, None)
    if hook is not None:
        graph = hook(obj)
        if is_graph_workflow(graph):
            found: Workflow = graph
            return found
    raise TypeError(f"{type(obj).__name__} is not a workflow: expected a built graph (WorkflowBuilder.build())")
