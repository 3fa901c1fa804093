"""A graph's picture as pure data: what the drawer (``viz``) reads, and what a run keeps to be drawn later.

``viz`` draws Mermaid and DOT text from a :class:`GraphShape`, never from the
built graph itself, so a shape made where the graph is built (the worker, when
a run pins its topology) draws the same picture anywhere else: the console draws
a run of a graph it was not given from the shape the run keeps (the ``topology``
query), with the same text ``graph --format mermaid`` prints.

A shape holds names only (executor ids, edge kinds, the names of conditions),
no callables and no types, so it is small and JSON-safe; :func:`graph_shape`
makes one from a built graph, with its sub-workflows' shapes nested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporal_workflows._graph.edges import EdgeGroup
    from temporal_workflows._graph.graph import Graph

__all__ = ["EdgeShape", "GraphShape", "graph_shape"]

MAX_LABEL_CHARS = 100
"""A condition's name is cut to this many characters (it is for people; the picture does not need more)."""


@dataclass(frozen=True)
class EdgeShape:
    """One edge group, as drawn.

    Attributes:
        kind: The routing rule: ``single``, ``fan_out``, ``fan_in``,
            ``switch_case`` or ``multi_selection``.
        sources: Executor ids the group leaves.
        targets: Executor ids it reaches; for ``switch_case``, each case's
            target in case order (a target may repeat; the default is last).
        conditional: A ``single`` edge with a condition (drawn dashed).
        labels: For people: the condition's name (``single``), each case's
            (``switch_case``, ``"default"`` for the default), or the selection
            function's (``multi_selection``).
    """

    kind: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    conditional: bool = False
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class GraphShape:
    """A graph's picture as data.

    Attributes:
        name: The graph's name.
        start: The start executor's id.
        executors: Every executor's id, in the order they were added.
        groups: Every edge group, in the order they were added.
        subworkflows: For each ``WorkflowExecutor``, the shape of the graph it runs.
    """

    name: str | None
    start: str
    executors: tuple[str, ...]
    groups: tuple[EdgeShape, ...] = ()
    subworkflows: dict[str, GraphShape] = field(default_factory=dict)


def _label(fn: Callable[..., Any] | None) -> str:
    from temporal_workflows._graph.edges import label_of

    return label_of(fn) or ""


def _edge_shape(g: EdgeGroup) -> EdgeShape:
    labels: list[str] = []
    if g.kind == "switch_case":
        targets = [t for _, t in g.cases]
        labels = [_label(c) if c is not None else "default" for c, _ in g.cases]
    else:
        targets = list(g.targets)
        if g.kind == "single" and g.condition is not None:
            labels = [_label(g.condition)]
        elif g.kind == "multi_selection" and g.selection is not None:
            labels = [_label(g.selection)]
    return EdgeShape(
        kind=g.kind,
        sources=tuple(g.sources),
        targets=tuple(targets),
        conditional=g.kind == "single" and g.condition is not None,
        labels=tuple(label[:MAX_LABEL_CHARS] for label in labels),
    )


def graph_shape(graph: Graph) -> GraphShape:
    """The shape of a built graph, its sub-workflows' nested (a ``WorkflowExecutor``'s graph is its ``workflow``'s)."""
    from temporal_workflows._graph.subworkflow import WorkflowExecutor

    subs: dict[str, GraphShape] = {}
    for executor_id, ex in graph.executors.items():
        if isinstance(ex, WorkflowExecutor):
            sub: Graph | None = getattr(getattr(ex, "workflow", None), "graph", None)
            if sub is not None:
                subs[executor_id] = graph_shape(sub)
    return GraphShape(
        name=graph.topology.name,
        start=graph.topology.start_executor_id,
        executors=tuple(graph.executors),
        groups=tuple(_edge_shape(g) for g in graph.groups),
        subworkflows=subs,
    )


MAX_SHAPE_BYTES = 64 * 1024
"""The largest shape a run keeps (as JSON): it is recorded once in each run's history (with the pinned topology,
again after a continue-as-new), so it is bounded; a larger graph's runs have no picture, with a note saying why."""


def bounded_shape(graph: Graph, max_bytes: int = MAX_SHAPE_BYTES) -> tuple[GraphShape | None, str | None]:
    """The graph's shape if its JSON fits in ``max_bytes``; else ``None`` and a note saying why (for the reader)."""
    from pydantic_core import to_json

    shape = graph_shape(graph)
    size = len(to_json(shape))
    if size > max_bytes:
        return None, (
            f"the graph's picture ({size:,} bytes as JSON) is larger than a run keeps ({max_bytes:,} bytes): "
            "draw it with `temporal-workflows graph`, or give it to the console with --workflow"
        )
    return shape, None
