"""Graph export as Mermaid and Graphviz DOT text (no rendering dependencies)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from temporal_workflows._graph.graph import Graph

__all__ = ["WorkflowViz", "to_dot", "to_mermaid"]


def _edges(graph: Graph) -> list[tuple[str, str, str | None, bool]]:
    """(source, target, label, dashed) for every drawn edge; fan-ins go through a junction node."""
    out: list[tuple[str, str, str | None, bool]] = []
    for g in graph.groups:
        d = g.describe()
        if g.kind == "fan_in":
            j = f"fanin::{g.id}"
            for s in g.sources:
                out.append((s, j, None, False))
            out.append((j, g.targets[0], None, False))
        elif g.kind == "switch_case":
            for (cond, target), label in zip(g.cases, d["labels"], strict=True):
                out.append((g.sources[0], target, label, cond is None))
        elif g.kind == "multi_selection":
            for t in g.targets:
                out.append((g.sources[0], t, d.get("label"), True))
        else:
            for t in g.targets:
                out.append((g.sources[0], t, d.get("label"), g.condition is not None))
    return out


def _ids(graph: Graph) -> dict[str, str]:
    names = list(graph.executors)
    names += [f"fanin::{g.id}" for g in graph.groups if g.kind == "fan_in"]
    return {n: f"n{i}" for i, n in enumerate(names)}


def _q(text: str) -> str:
    return text.replace('"', "'")


def to_mermaid(graph: Graph) -> str:
    ids = _ids(graph)
    start = graph.topology.start_executor_id
    lines = ["flowchart TD"]
    for ex in graph.executors:
        text = f"{ex} (start)" if ex == start else ex
        lines.append(f'  {ids[ex]}["{_q(text)}"]')
    for g in graph.groups:
        if g.kind == "fan_in":
            lines.append(f'  {ids["fanin::" + g.id]}(("fan-in"))')
    for s, t, label, dashed in _edges(graph):
        arrow = "-.->" if dashed else "-->"
        lines.append(f'  {ids[s]} {arrow}|"{_q(label)}"| {ids[t]}' if label else f"  {ids[s]} {arrow} {ids[t]}")
    return "\n".join(lines) + "\n"


def to_dot(graph: Graph) -> str:
    ids = _ids(graph)
    start = graph.topology.start_executor_id
    name = _q(graph.name or "workflow")
    lines = [f'digraph "{name}" {{', "  rankdir=TD;", "  node [shape=box, style=rounded];"]
    for ex in graph.executors:
        extra = ", penwidth=2" if ex == start else ""
        lines.append(f'  {ids[ex]} [label="{_q(ex)}"{extra}];')
    for g in graph.groups:
        if g.kind == "fan_in":
            lines.append(f'  {ids["fanin::" + g.id]} [label="fan-in", shape=circle];')
    for s, t, label, dashed in _edges(graph):
        attrs = []
        if label:
            attrs.append(f'label="{_q(label)}"')
        if dashed:
            attrs.append("style=dashed")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {ids[s]} -> {ids[t]}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


class WorkflowViz:
    """Agent Framework's visualiser name: ``WorkflowViz(workflow).to_mermaid()``."""

    def __init__(self, workflow: object) -> None:
        self._graph: Graph = workflow.graph  # type: ignore[attr-defined]

    def to_mermaid(self) -> str:
        return to_mermaid(self._graph)

    def to_digraph(self) -> str:
        return to_dot(self._graph)
