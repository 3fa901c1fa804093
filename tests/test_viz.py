"""Graph export: Mermaid and Graphviz DOT text, files rendered by Graphviz, and notebook display.

The text exports always run. Rendering needs the ``graphviz`` package (the
``viz`` extra) and Graphviz's ``dot`` program: those tests skip, saying which
is missing, when they are absent; what happens *because* one is absent is
tested by hiding it.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_core import to_json

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
from temporal_workflows._graph.shape import GraphShape, bounded_shape, graph_shape
from temporal_workflows._graph.viz import mermaid_node_ids, to_dot, to_mermaid


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
    """(source label, target label, edge label, dashed) for every Mermaid edge, entities decoded."""
    names = {
        m[0]: m[1].replace("#quot;", '"')
        for m in re.findall(r'^\s+(\w+)(?:\["(.+?)"\];|\(\((fan-in)\)\))$', text, re.M)
        for m in [(m[0], m[1] or m[2])]
    }
    edges = set()
    for src, arrow, dst in re.findall(r"^\s+(\w+) (-->|-\. conditional \.->) (\w+);$", text, re.M):
        dashed = arrow != "-->"
        edges.add((names[src], names[dst], "conditional" if dashed else None, dashed))
    return edges


DOT_STRING = r'"((?:[^"\\]|\\.)*)"'
"""A DOT quoted string, with its backslash escapes."""


def dot_unquote(text: str) -> str:
    """What a DOT string says: ``\\n`` is a line break, any other escaped character stands for itself."""
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], text)


def dot_edges(text: str) -> set[tuple[str, str, str | None, bool]]:
    names = {
        dot_unquote(m[0]): dot_unquote(m[1])
        for m in re.findall(rf"^\s+{DOT_STRING} \[.*label={DOT_STRING}", text, re.M)
    }
    edges = set()
    for src, dst, attrs in re.findall(rf"^\s+{DOT_STRING} -> {DOT_STRING}(?: \[(.+)\])?;$", text, re.M):
        label = re.search(rf"label={DOT_STRING}", attrs)
        edges.add(
            (
                names[dot_unquote(src)],
                names[dot_unquote(dst)],
                dot_unquote(label.group(1)) if label else None,
                "style=dashed" in attrs,
            )
        )
    return edges


EXPECTED = {
    ("start (Start)", "left", None, False),
    ("start (Start)", "right", None, False),
    ("left", "fan-in", None, False),
    ("right", "fan-in", None, False),
    ("fan-in", "join", None, False),
    ("join", "big", None, False),  # switch-case edges are drawn plain, as Agent Framework draws them
    ("join", 'odd "one"', None, False),
    ("start (Start)", "audit", "conditional", True),
    ("big", "big", "conditional", True),
}


def test_mermaid_shows_every_edge_and_the_fan_in_junction() -> None:
    text = graph().to_mermaid()
    assert text.startswith("flowchart TD\n") and not text.endswith("\n")  # print() adds the line end, as in MAF
    assert re.findall(r"^  (fan_in__join__[0-9a-f]{8})\(\(fan-in\)\)$", text, re.M)
    assert mermaid_edges(text) == EXPECTED


def test_dot_shows_the_same_graph() -> None:
    text = graph().to_dot()
    assert text.startswith("digraph Workflow {\n") and text.endswith("\n}")
    assert re.search(
        r'^  "fan_in::join::[0-9a-f]{8}" \[shape=ellipse, fillcolor=lightgoldenrod, label="fan-in"\];$', text, re.M
    )
    assert '  "start" [fillcolor=lightgreen, label="start\\n(Start)"];' in text  # the start executor stands out
    expected = {(s.replace(" (Start)", "\n(Start)"), t, label, dashed) for s, t, label, dashed in EXPECTED}
    assert dot_edges(text) == expected


def test_workflow_viz_is_the_agent_framework_spelling_of_the_same_exports() -> None:
    wf = graph()
    viz = WorkflowViz(wf)
    assert viz.to_mermaid() == wf.to_mermaid()
    assert viz.to_digraph() == wf.to_dot()
    # Agent Framework's keyword adds its internal edge into each executor (see the comparison below).
    assert "  internal_start --> start;" in viz.to_mermaid(include_internal_executors=True)
    assert '  "internal:start" -> "start";' in viz.to_digraph(include_internal_executors=True)


def test_multi_selection_edges_are_plain_edges_to_every_candidate() -> None:
    src, a, b = relay("src"), relay("a"), relay("b")

    def pick_some(msg: int, targets: list[str]) -> list[str]:
        return targets[:1]

    wf = WorkflowBuilder(start_executor=src).add_multi_selection_edge_group(src, [a, b], pick_some).build()
    assert mermaid_edges(wf.to_mermaid()) == {("src (Start)", "a", None, False), ("src (Start)", "b", None, False)}


# -- the same text as Agent Framework's WorkflowViz, edge kind by edge kind --------------------------------


def _each_edge_kind(mod: Any, kind: str) -> Any:
    """The same graph built with ``mod`` (Agent Framework or this library), one per edge kind."""

    def relay(eid: str) -> Any:
        async def run(msg: Any, ctx: Any) -> None:
            await ctx.send_message(msg)

        # Real annotations (this module's are strings) naming ``mod``'s own context type.
        run.__annotations__ = {"msg": int, "ctx": mod.WorkflowContext[int], "return": None}
        return mod.executor(id=eid)(run)

    async def join_all(msgs: Any, ctx: Any) -> None:
        await ctx.send_message(sum(msgs))

    join_all.__annotations__ = {"msgs": list[int], "ctx": mod.WorkflowContext[int], "return": None}
    join = mod.executor(id="join")(join_all)

    def pick(msg: int, targets: list[str]) -> list[str]:
        return targets[:1]

    a, b, c, d = (relay(x) for x in ("a", "b", "c", "d"))
    builder = mod.WorkflowBuilder(start_executor=a)
    if kind == "direct":
        return builder.add_edge(a, b).add_edge(b, c).add_edge(c, a).build()
    if kind == "conditional":
        return builder.add_edge(a, b, condition=lambda n: n > 0).add_edge(a, c).build()
    if kind == "fan-out":
        return builder.add_fan_out_edges(a, [c, b, d]).build()
    if kind == "fan-in":
        return builder.add_fan_out_edges(a, [c, b]).add_fan_in_edges([c, b], join).add_edge(join, d).build()
    if kind == "switch-case":
        cases = [mod.Case(condition=lambda n: n > 1, target=c), mod.Case(condition=lambda n: n > 5, target=c)]
        return builder.add_switch_case_edge_group(a, [*cases, mod.Default(target=b)]).build()
    if kind == "multi-selection":
        return builder.add_multi_selection_edge_group(a, [b, c], pick).add_edge(b, d).build()
    assert kind == "sub-workflow"
    inner_start, inner_end = relay("in-1"), relay("in 2")
    inner = mod.WorkflowBuilder(start_executor=inner_start).add_edge(inner_start, inner_end).build()
    nested = mod.WorkflowExecutor(inner, id="b")  # its nodes are named after it: "b/in-1", "b__in_1"
    return builder.add_edge(a, nested).add_edge(nested, relay("b__in_1")).build()


EDGE_KINDS = ("direct", "conditional", "fan-out", "fan-in", "switch-case", "multi-selection", "sub-workflow")


@pytest.mark.parametrize("kind", EDGE_KINDS)
def test_the_text_is_agent_frameworks_for_each_edge_kind(kind: str) -> None:
    """A ported program that prints its diagram prints what it printed on Agent Framework."""
    agent_framework = pytest.importorskip("agent_framework")
    import temporal_workflows

    theirs = agent_framework.WorkflowViz(_each_edge_kind(agent_framework, kind))
    ours = WorkflowViz(_each_edge_kind(temporal_workflows, kind))
    for internal in (False, True):
        assert ours.to_mermaid(include_internal_executors=internal) == theirs.to_mermaid(internal)
        assert ours.to_digraph(include_internal_executors=internal) == theirs.to_digraph(internal)


@pytest.mark.parametrize("kind", [*EDGE_KINDS, "viz"])
def test_a_graphs_shape_kept_as_json_draws_the_same_picture(kind: str) -> None:
    """What a run keeps of its graph (its shape, as JSON in history) draws what the built graph draws: the
    console pictures a run of a graph it was never given from that alone."""
    import temporal_workflows

    built = graph() if kind == "viz" else _each_edge_kind(temporal_workflows, kind)
    shape = graph_shape(built.graph)
    kept = TypeAdapter(GraphShape).validate_json(to_json(shape))
    assert kept == shape
    for internal in (False, True):
        assert to_mermaid(kept, include_internal_executors=internal) == to_mermaid(
            built.graph, include_internal_executors=internal
        )
        assert to_dot(kept, include_internal_executors=internal) == to_dot(
            built.graph, include_internal_executors=internal
        )
    assert mermaid_node_ids(kept) == mermaid_node_ids(built.graph)


def test_a_shape_names_conditions_for_people_and_nests_sub_workflows() -> None:
    import temporal_workflows

    shape = graph_shape(graph().graph)
    switch = next(g for g in shape.groups if g.kind == "switch_case")
    assert switch.targets == ("big", 'odd "one"') and switch.labels == ("is_large", "default")
    conditional = [g for g in shape.groups if g.conditional]
    assert [g.labels for g in conditional] == [("condition",), ("is_large",)]
    nested = graph_shape(_each_edge_kind(temporal_workflows, "sub-workflow").graph)
    assert nested.subworkflows["b"].executors == ("in-1", "in 2")


def test_a_graph_too_large_to_keep_a_picture_of_says_so() -> None:
    shape, note = bounded_shape(graph().graph)
    assert shape is not None and note is None
    shape, note = bounded_shape(graph().graph, max_bytes=100)
    assert shape is None and note is not None and "larger than a run keeps (100 bytes)" in note


# -- what Graphviz reads: escaping and a valid rankdir ---------------------------------------------------


def odd_ids_graph() -> Workflow:
    """Executor ids that break naive quoting: quotes, a backslash at the end, a newline, brackets."""
    first, second, third = relay('say "hi"'), relay("C:\\temp\\"), relay("two\nlines [x]")
    return WorkflowBuilder(start_executor=first, name='a "named" graph').add_chain([first, second, third]).build()


def test_ids_with_quotes_backslashes_and_newlines_stay_inside_their_labels() -> None:
    wf = odd_ids_graph()
    dot = wf.to_dot()
    assert dot_edges(dot) == {
        ('say "hi"\n(Start)', "C:\\temp\\", None, False),
        ("C:\\temp\\", "two\nlines [x]", None, False),
    }
    assert mermaid_edges(wf.to_mermaid()) == {
        ('say "hi" (Start)', "C:\\temp\\", None, False),
        ("C:\\temp\\", "two lines [x]", None, False),
    }


def test_rankdir_is_agent_frameworks_td_by_default_and_can_be_chosen() -> None:
    wf = graph()
    assert re.search(r"^  rankdir=TD;$", wf.to_dot(), re.M)  # as Agent Framework writes it; Graphviz reads TB
    for rankdir in ("TD", "TB", "LR", "BT", "RL"):
        viz = WorkflowViz(wf, rankdir=rankdir)
        assert f"  rankdir={rankdir};" in viz.to_digraph()
        assert viz.to_mermaid().startswith(f"flowchart {rankdir}\n")
    for bad in ("td", "lr", "", "LR;"):
        with pytest.raises(ValueError, match="rankdir must be one of TD, TB, LR, BT, RL"):
            WorkflowViz(wf, rankdir=bad)


# -- export: Agent Framework's signatures, return values and errors -------------------------------------


def test_export_dot_needs_nothing_installed_and_returns_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # as if the package were not installed
    viz = WorkflowViz(graph())
    target = tmp_path / "graph.dot"
    assert viz.export(format="dot", filename=str(target)) == str(target)
    assert target.read_text() == viz.to_digraph()
    temp = Path(viz.export(format="dot"))
    try:
        assert temp.suffix == ".dot" and temp.read_text() == viz.to_digraph()
    finally:
        temp.unlink()


def test_export_refuses_an_unknown_format_first() -> None:
    with pytest.raises(ValueError, match=re.escape("Unsupported format: gif. Supported formats: svg, png, pdf, dot")):
        WorkflowViz(graph()).export(format="gif")  # type: ignore[arg-type]


def test_without_the_graphviz_package_export_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)
    viz = WorkflowViz(graph())
    calls = [
        lambda: viz.export(),
        lambda: viz.export(format="png", filename=str(tmp_path / "g.png")),
        lambda: viz.save_svg(str(tmp_path / "g.svg")),
        lambda: viz.save_png(str(tmp_path / "g.png")),
        lambda: viz.save_pdf(str(tmp_path / "g.pdf")),
    ]
    for call in calls:
        with pytest.raises(ImportError) as info:
            call()
        message = str(info.value)
        assert message.startswith("viz extra is required for export.")
        assert "pip install 'temporal-workflows[viz]'" in message and "apt-get install graphviz" in message
    assert list(tmp_path.iterdir()) == []


def _skip_unless_graphviz() -> None:
    pytest.importorskip("graphviz", reason="the graphviz package (the 'viz' extra) is not installed")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed (apt-get install graphviz)")


def test_without_the_dot_program_export_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("graphviz", reason="the graphviz package (the 'viz' extra) is not installed")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    with pytest.raises(ImportError, match=r"^The graphviz executables are not found"):
        WorkflowViz(graph()).export(format="svg", filename=str(tmp_path / "g.svg"))


MAGIC = {"svg": b"<?xml", "png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def test_export_renders_svg_png_and_pdf_and_returns_the_file_written(tmp_path: Path) -> None:
    _skip_unless_graphviz()
    viz = WorkflowViz(graph())
    for fmt, magic in MAGIC.items():
        named = tmp_path / f"named.{fmt}"
        assert viz.export(format=fmt, filename=str(named)) == str(named)  # type: ignore[arg-type]
        assert named.read_bytes().startswith(magic)
        bare = viz.export(format=fmt, filename=str(tmp_path / f"bare-{fmt}"))  # type: ignore[arg-type]
        assert bare == str(tmp_path / f"bare-{fmt}.{fmt}") and Path(bare).read_bytes().startswith(magic)
        temp = Path(viz.export(format=fmt))  # type: ignore[arg-type]
        try:
            assert temp.suffix == f".{fmt}" and temp.read_bytes().startswith(magic)
        finally:
            temp.unlink()
    saved = [
        viz.save_svg(str(tmp_path / "s.svg")),
        viz.save_png(str(tmp_path / "s.png")),
        viz.save_pdf(str(tmp_path / "s.pdf")),
    ]
    assert saved == [str(tmp_path / f"s.{f}") for f in ("svg", "png", "pdf")]
    assert b"odd &quot;one&quot;" in (tmp_path / "s.svg").read_bytes()  # the label Graphviz drew
    # Only the rendered files are left (cleanup=True removes the DOT source next to them).
    assert sorted(p.suffix for p in tmp_path.iterdir()) == sorted([".svg", ".png", ".pdf"] * 3)
    with pytest.raises(ValueError, match=re.escape("File extension .png doesn't match format svg")):
        viz.export(format="svg", filename=str(tmp_path / "wrong.png"))


def _positions(viz: WorkflowViz) -> dict[str, tuple[float, float]]:
    """Where Graphviz put each executor, from its ``plain`` output (y grows upwards)."""
    import graphviz

    plain = graphviz.Source(viz.to_digraph()).pipe(format="plain", encoding="utf-8")
    out = {}
    for line in plain.splitlines():
        parts = line.split()
        if parts[:1] == ["node"]:
            out[parts[1]] = (float(parts[2]), float(parts[3]))
    return out


def test_graphviz_lays_the_graph_out_in_the_chosen_direction() -> None:
    _skip_unless_graphviz()
    a, b = relay("a"), relay("b")
    wf = WorkflowBuilder(start_executor=a).add_edge(a, b).build()
    (ax, ay), (bx, by) = _positions(WorkflowViz(wf, rankdir="TB")).values()
    assert ay > by and ax == bx  # top to bottom
    assert _positions(WorkflowViz(wf)) == _positions(WorkflowViz(wf, rankdir="TB"))  # TD, MAF's default, is TB
    (ax, ay), (bx, by) = _positions(WorkflowViz(wf, rankdir="BT")).values()
    assert ay < by
    (ax, ay), (bx, by) = _positions(WorkflowViz(wf, rankdir="LR")).values()
    assert ax < bx and ay == by
    (ax, ay), (bx, by) = _positions(WorkflowViz(wf, rankdir="RL")).values()
    assert ax > bx


# -- notebooks -------------------------------------------------------------------------------------------


def test_a_notebook_shows_mermaid_when_graphviz_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)
    wf = graph()
    assert wf._repr_svg_() is None
    bundle = wf._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/markdown", "text/vnd.mermaid"}
    assert bundle["text/plain"] == repr(wf)
    assert bundle["text/vnd.mermaid"] == wf.to_mermaid()
    assert bundle["text/markdown"] == f"```mermaid\n{wf.to_mermaid()}\n```\n"


def test_a_notebook_shows_mermaid_when_the_dot_program_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("graphviz", reason="the graphviz package (the 'viz' extra) is not installed")
    monkeypatch.setenv("PATH", str(tmp_path))
    bundle = graph()._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and bundle["text/vnd.mermaid"].startswith("flowchart TD\n")


def test_a_notebook_shows_svg_when_graphviz_can_draw_it() -> None:
    _skip_unless_graphviz()
    wf = graph()
    svg = wf._repr_svg_()
    assert svg is not None and "<svg" in svg and ">audit<" in svg and ">join<" in svg
    bundle = wf._repr_mimebundle_()
    assert bundle == {"text/plain": repr(wf), "image/svg+xml": svg}
    assert wf._repr_svg_() is svg  # drawn once per workflow, however often the notebook asks
    assert "image/svg+xml" not in wf._repr_mimebundle_(exclude={"image/svg+xml"})
    assert "text/vnd.mermaid" in wf._repr_mimebundle_(include={"text/plain", "text/vnd.mermaid"})


def test_graphviz_draws_ids_with_quotes_and_backslashes_as_written() -> None:
    _skip_unless_graphviz()
    svg = odd_ids_graph()._repr_svg_()
    assert svg is not None
    assert ">say &quot;hi&quot;<" in svg and ">C:\\temp\\<" in svg and ">two<" in svg and ">lines [x]<" in svg
