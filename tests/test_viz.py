"""Graph export: Mermaid and Graphviz DOT text, with labels and the fan-in junction."""

from __future__ import annotations

import re

from temporal_workflows import (
    Case,
    Default,
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowViz,
    executor,
)


def relay(eid: str) -> Executor:
    @executor(id=eid)
    async def run(msg: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(msg)

    return run


@executor(id="join")
async def join(msgs: list[int], ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(sum(msgs))


def is_large(n: int) -> bool:
    return n > 100


def graph() -> Workflow:
    """start ─fan-out→ left, right ─fan-in→ join ─switch→ big | "odd one" (default); start ─cond→ audit."""
    start, left, right, big, odd, audit = (relay(x) for x in ("start", "left", "right", "big", 'odd "one"', "audit"))
    return (
        WorkflowBuilder(start_executor=start, name="viz")
        .add_fan_out_edges(start, [left, right])
        .add_fan_in_edges([left, right], join)
        .add_switch_case_edge_group(join, [Case(condition=is_large, target=big), Default(target=odd)])
        .add_edge(start, audit, condition=lambda n: n < 0)
        .add_edge(big, big, condition=is_large)
        .build()
    )


def mermaid_edges(text: str) -> set[tuple[str, str, str | None, bool]]:
    """(source label, target label, edge label, dashed) for every Mermaid edge."""
    names = {m[0]: m[1] for m in re.findall(r'^\s+(n\d+)(?:\["|\(\(")(.+?)(?:"\]|"\)\))$', text, re.M)}
    edges = set()
    for src, arrow, label, dst in re.findall(r'^\s+(n\d+) (-->|-\.->)(?:\|"(.+?)"\|)? (n\d+)$', text, re.M):
        edges.add((names[src], names[dst], label or None, arrow == "-.->"))
    return edges


def dot_edges(text: str) -> set[tuple[str, str, str | None, bool]]:
    names = {m[0]: m[1] for m in re.findall(r'^\s+(n\d+) \[label="(.+?)"', text, re.M)}
    edges = set()
    for src, dst, attrs in re.findall(r"^\s+(n\d+) -> (n\d+)(?: \[(.+)\])?;$", text, re.M):
        label = re.search(r'label="(.+?)"', attrs)
        edges.add((names[src], names[dst], label.group(1) if label else None, "style=dashed" in attrs))
    return edges


EXPECTED = {
    ("start (start)", "left", None, False),
    ("start (start)", "right", None, False),
    ("left", "fan-in", None, False),
    ("right", "fan-in", None, False),
    ("fan-in", "join", None, False),
    ("join", "big", "is_large", False),
    ("join", "odd 'one'", "default", True),
    ("start (start)", "audit", "condition", True),
    ("big", "big", "is_large", True),
}


def test_mermaid_shows_every_edge_with_labels_and_the_fan_in_junction() -> None:
    text = graph().to_mermaid()
    assert text.startswith("flowchart TD\n")
    assert text.count('(("fan-in"))') == 1
    assert mermaid_edges(text) == EXPECTED


def test_dot_shows_the_same_graph() -> None:
    text = graph().to_dot()
    assert text.startswith('digraph "viz" {') and text.rstrip().endswith("}")
    assert re.search(r'label="fan-in", shape=circle', text)
    assert re.search(r'label="start", penwidth=2', text)  # the start executor stands out
    expected = {(s.replace(" (start)", ""), t, label, dashed) for s, t, label, dashed in EXPECTED}
    assert dot_edges(text) == expected


def test_workflow_viz_is_the_agent_framework_spelling_of_the_same_exports() -> None:
    wf = graph()
    viz = WorkflowViz(wf)
    assert viz.to_mermaid() == wf.to_mermaid()
    assert viz.to_digraph() == wf.to_dot()


def test_multi_selection_edges_are_dashed_and_labelled_with_the_selector() -> None:
    src, a, b = relay("src"), relay("a"), relay("b")

    def pick_some(msg: int, targets: list[str]) -> list[str]:
        return targets[:1]

    wf = WorkflowBuilder(start_executor=src).add_multi_selection_edge_group(src, [a, b], pick_some).build()
    assert mermaid_edges(wf.to_mermaid()) == {
        ("src (start)", "a", "pick_some", True),
        ("src (start)", "b", "pick_some", True),
    }
