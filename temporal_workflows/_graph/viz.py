"""Drawing a graph: Mermaid and Graphviz DOT text, files rendered by Graphviz, and notebook display.

The text exports need nothing installed. Rendering to SVG, PNG or PDF goes
through the ``graphviz`` Python package (the ``viz`` extra) and Graphviz's
``dot`` program, as Agent Framework's ``WorkflowViz.export`` does, with its
signatures, return values and errors: ``export`` returns the path written, a
temporary file when no ``filename`` is given, and raises ``ImportError`` saying
what to install when the package or the ``dot`` program is missing. A built
``Workflow`` shows itself in a notebook as SVG when Graphviz can draw it, and
as Mermaid text otherwise.
"""

from __future__ import annotations

import functools
import hashlib
import html
import re
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Collection
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from temporal_workflows._graph.shape import EdgeShape, GraphShape, graph_shape

if TYPE_CHECKING:
    from temporal_workflows._graph.graph import Graph

__all__ = [
    "RANKDIRS",
    "WorkflowViz",
    "dot_program",
    "mermaid_node_ids",
    "mimebundle",
    "render_svg",
    "to_dot",
    "to_html",
    "to_mermaid",
]

RankDir = Literal["TD", "TB", "LR", "BT", "RL"]
RANKDIRS: tuple[RankDir, ...] = ("TD", "TB", "LR", "BT", "RL")
"""Layout directions: ``TD`` (top down, Agent Framework's and the default) or Graphviz's values (``TB`` is also
top to bottom; ``LR`` left to right, ...); Mermaid takes the same directions."""

ExportFormat = Literal["svg", "png", "pdf", "dot"]
_FORMATS = ("svg", "png", "pdf", "dot")

MISSING_PACKAGE = (
    "viz extra is required for export. Install it with: pip install 'temporal-workflows[viz]' "
    "(or pip install graphviz>=0.20.0). "
    "You also need to install graphviz separately. E.g., sudo apt-get install graphviz on Debian/Ubuntu "
    "or brew install graphviz on macOS. See https://graphviz.org/download/ for details."
)
"""The ``ImportError`` message when the ``graphviz`` package is missing (Agent Framework's, naming our extra)."""

MISSING_EXECUTABLE = (
    "The graphviz executables are not found. The graphviz Python package is installed, but the "
    "graphviz executables (dot, neato, etc.) are not available on your system's PATH. "
    "Install graphviz executables: sudo apt-get install graphviz on Debian/Ubuntu, "
    "brew install graphviz on macOS, or download from https://graphviz.org/download/ for other platforms."
)
"""The ``ImportError`` message when the package is installed but Graphviz's ``dot`` is not (Agent Framework's)."""


def _check_rankdir(rankdir: str) -> RankDir:
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)} (Graphviz's values; TD is TB), not {rankdir!r}")
    return rankdir  # type: ignore[return-value]  # checked just above


# The text is Agent Framework 1.23's (``agent_framework._workflows._viz``), line for line, so a ported program
# that prints its diagram prints the same: executor ids as node ids, the start executor first and marked
# "(Start)", fan-in junctions named ``fan_in::<target>::<sha8>`` (DOT) / ``fan_in__<target>__<sha8>`` (Mermaid)
# with their sources sorted, fan-in edges before the others, other edges in the order their groups were added
# (switch-case and multi-selection edges drawn plain, one per distinct target; only a conditional single edge
# is dashed and labelled "conditional"), and sub-workflows as nested clusters / subgraphs. What this picture
# adds applies only where Agent Framework's text would be broken (quotes, backslashes, newlines in ids are
# escaped) or where it has no equivalent (``rankdir``).


# Everything below draws from a ``GraphShape`` (``shape.py``), the graph's picture as data: a built graph is
# drawn through its shape, and a run's kept shape (the console's picture of a run) is drawn by the same code.


def _shape(graph: Graph | GraphShape) -> GraphShape:
    return graph if isinstance(graph, GraphShape) else graph_shape(graph)


def _fan_ins(graph: GraphShape) -> list[tuple[str, list[str], str]]:
    """(``fan_in::<target>::<sha8>``, sorted sources, target) per fan-in group, as Agent Framework names them."""
    out: list[tuple[str, list[str], str]] = []
    for g in graph.groups:
        if g.kind == "fan_in":
            target, sources = g.targets[0], sorted(g.sources)
            digest = hashlib.sha256((target + "|" + "|".join(sources)).encode("utf-8")).hexdigest()[:8]
            out.append((f"fan_in::{target}::{digest}", sources, target))
    return out


def _normal_edges(graph: GraphShape, internal: bool = False) -> list[tuple[str, str, bool, bool]]:
    """(source, target, conditional, internal) for every edge outside fan-ins, in the order the groups were added.

    With ``internal``, also Agent Framework's internal edge into each executor (``internal:<id>`` -> ``<id>``),
    where its builder adds it: just before the first group that names the executor.
    """
    out: list[tuple[str, str, bool, bool]] = []
    seen: set[str] = set()
    executors = set(graph.executors)

    def register(names: list[str]) -> None:
        for n in names:
            if n in executors and n not in seen:
                seen.add(n)
                if internal:
                    out.append((f"internal:{n}", n, False, True))

    register([graph.start])
    for g in graph.groups:
        register(_group_executors(g))
        if g.kind == "fan_in":
            continue
        # A switch-case group has one edge per distinct target, as in Agent Framework.
        for t in dict.fromkeys(g.targets):
            out.append((g.sources[0], t, g.conditional, False))
    register(list(graph.executors))
    return out


def _group_executors(g: EdgeShape) -> list[str]:
    """The executors a group names, in the order Agent Framework's builder registers them."""
    return [*g.sources, *g.targets]


def _executor_order(graph: GraphShape) -> list[str]:
    """Executor ids in the order Agent Framework's builder registers them: the start, then as edges name them."""
    order = dict.fromkeys([graph.start])
    executors = set(graph.executors)
    for g in graph.groups:
        order.update(dict.fromkeys(n for n in _group_executors(g) if n in executors))
    order.update(dict.fromkeys(graph.executors))
    return list(order)


def _mermaid_id(value: str) -> str:
    sanitized = re.sub(r"[^0-9A-Za-z_]", "_", value)
    return sanitized if sanitized and sanitized[0].isalpha() else f"n_{sanitized}"


def _mermaid_node_ids(graph: GraphShape, internal: bool = False) -> dict[tuple[str, ...], str]:
    """Mermaid node ids for every node of the graph and its sub-workflows (Agent Framework's allocation)."""
    candidates: dict[tuple[str, ...], str] = {}

    def collect(g: GraphShape, ns: tuple[str, ...] = ()) -> None:
        prefix = f"{_mermaid_id(ns[-1])}__" if ns else ""
        for executor_id in _executor_order(g):
            candidates[("executor", *ns, executor_id)] = prefix + _mermaid_id(executor_id)
            sub = g.subworkflows.get(executor_id)
            if sub is not None:
                if ns:
                    candidates[("subgraph", *ns, executor_id)] = _mermaid_id(executor_id)
                collect(sub, (*ns, executor_id))
        for source, target, _, is_internal in _normal_edges(g, internal):
            candidates[("internal" if is_internal else "executor", *ns, source)] = prefix + _mermaid_id(source)
            candidates[("executor", *ns, target)] = prefix + _mermaid_id(target)
        for dot_id, _, target in _fan_ins(g):
            digest = dot_id.split("::")[-1]
            candidates[("fan-in", *ns, dot_id)] = f"fan_in__{prefix}{_mermaid_id(f'{target}__{digest}')}"

    collect(graph)
    reserved = set(candidates.values())
    used: set[str] = set()
    ids: dict[tuple[str, ...], str] = {}
    # Unchanged executor ids first, then the rest in a fixed order; a clash takes the next free ``_<n>``.
    for key in sorted(candidates, key=lambda key: (candidates[key] != key[-1], key)):
        alias = candidate = candidates[key]
        if alias in used:
            suffix = 2
            alias = f"{candidate}_{suffix}"
            while alias in reserved or alias in used:
                suffix += 1
                alias = f"{candidate}_{suffix}"
        used.add(alias)
        ids[key] = alias
    return ids


def mermaid_node_ids(graph: Graph | GraphShape) -> dict[str, str]:
    """The Mermaid node id of each top-level executor (the console colours nodes by them)."""
    shape = _shape(graph)
    ids = _mermaid_node_ids(shape)
    return {ex: ids[("executor", ex)] for ex in shape.executors}


def _mermaid_text(text: str) -> str:
    """Text inside a Mermaid ``"..."`` label: quotes as an entity, one line."""
    return " ".join(text.replace('"', "#quot;").splitlines())


def _dot_text(text: str) -> str:
    """Text inside a DOT ``"..."`` string: backslashes and quotes escaped, newlines as DOT's ``\\n``."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r\n", "\\n").replace("\n", "\\n")


def _emit_mermaid(
    graph: GraphShape,
    lines: list[str],
    indent: str,
    ids: dict[tuple[str, ...], str],
    ns: tuple[str, ...] = (),
    internal: bool = False,
) -> None:
    def node(x: str) -> str:
        return ids[("executor", *ns, x)]

    start = graph.start
    lines.append(f'{indent}{node(start)}["{_mermaid_text(start)} (Start)"];')
    for ex in _executor_order(graph):
        if ex != start:
            lines.append(f'{indent}{node(ex)}["{_mermaid_text(ex)}"];')
    fan_ins = [(ids[("fan-in", *ns, dot_id)], sources, target) for dot_id, sources, target in _fan_ins(graph)]
    for fan_id, _, _ in fan_ins:
        lines.append(f"{indent}{fan_id}((fan-in))")
    for fan_id, sources, target in fan_ins:
        for s in sources:
            lines.append(f"{indent}{node(s)} --> {fan_id};")
        lines.append(f"{indent}{fan_id} --> {node(target)};")
    for s, t, conditional, is_internal in _normal_edges(graph, internal):
        arrow = "-. conditional .->" if conditional else "-->"
        source = ids[("internal", *ns, s)] if is_internal else node(s)
        lines.append(f"{indent}{source} {arrow} {node(t)};")
    for ex in _executor_order(graph):
        sub = graph.subworkflows.get(ex)
        if sub is None:
            continue
        lines.append(f"{indent}subgraph {ids[('subgraph', *ns, ex)] if ns else ids[('executor', ex)]}")
        _emit_mermaid(sub, lines, indent + "  ", ids, (*ns, ex), internal)
        lines.append(f"{indent}end")


def to_mermaid(graph: Graph | GraphShape, *, rankdir: str = "TD", include_internal_executors: bool = False) -> str:
    """Mermaid ``flowchart`` text of ``graph`` (built, or its shape): Agent Framework's text for the same graph
    (no final newline)."""
    direction = _check_rankdir(rankdir)
    shape = _shape(graph)
    lines = [f"flowchart {direction}"]
    internal = include_internal_executors
    _emit_mermaid(shape, lines, "  ", _mermaid_node_ids(shape, internal), internal=internal)
    return "\n".join(lines)


def _emit_dot(graph: GraphShape, lines: list[str], indent: str, ns: str | None = None, internal: bool = False) -> None:
    def node(x: str) -> str:
        return f'"{_dot_text(f"{ns}/{x}" if ns else x)}"'

    start = graph.start
    lines.append(f'{indent}{node(start)} [fillcolor=lightgreen, label="{_dot_text(start)}\\n(Start)"];')
    for ex in _executor_order(graph):
        if ex != start:
            lines.append(f'{indent}{node(ex)} [label="{_dot_text(ex)}"];')
    fan_ins = _fan_ins(graph)
    if fan_ins:
        lines.append("")
        for fan_id, _, _ in fan_ins:
            lines.append(f'{indent}{node(fan_id)} [shape=ellipse, fillcolor=lightgoldenrod, label="fan-in"];')
    for fan_id, sources, target in fan_ins:
        for s in sources:
            lines.append(f"{indent}{node(s)} -> {node(fan_id)};")
        lines.append(f"{indent}{node(fan_id)} -> {node(target)};")
    for s, t, conditional, _ in _normal_edges(graph, internal):
        attrs = ' [style=dashed, label="conditional"]' if conditional else ""
        lines.append(f"{indent}{node(s)} -> {node(t)}{attrs};")


def _emit_dot_subs(graph: GraphShape, lines: list[str], indent: str, internal: bool = False) -> None:
    for ex in _executor_order(graph):
        sub = graph.subworkflows.get(ex)
        if sub is None:
            continue
        lines.append(f"{indent}subgraph cluster_{uuid.uuid5(uuid.NAMESPACE_OID, ex).hex[:8]} {{")
        lines.append(f'{indent}  label="sub-workflow: {_dot_text(ex)}";')
        lines.append(f"{indent}  style=dashed;")
        _emit_dot(sub, lines, indent + "  ", ns=ex, internal=internal)
        _emit_dot_subs(sub, lines, indent + "  ", internal)
        lines.append(f"{indent}}}")


def to_dot(graph: Graph | GraphShape, *, rankdir: str = "TD", include_internal_executors: bool = False) -> str:
    """Graphviz DOT text of ``graph``: Agent Framework's text for the same graph (no final newline).

    ``TD`` (Agent Framework's value, the default) is not one Graphviz knows: it lays the graph out top to
    bottom, as ``TB`` does.
    """
    direction = _check_rankdir(rankdir)
    lines = [
        "digraph Workflow {",
        f"  rankdir={direction};",
        "  node [shape=box, style=filled, fillcolor=lightblue];",
        "  edge [color=black, arrowhead=vee];",
        "",
    ]
    shape = _shape(graph)
    _emit_dot(shape, lines, "  ", internal=include_internal_executors)
    _emit_dot_subs(shape, lines, "  ", include_internal_executors)
    lines.append("}")
    return "\n".join(lines)


DOT_INSTALL = (
    "Debian/Ubuntu: sudo apt-get install graphviz; Fedora: sudo dnf install graphviz; macOS: brew install graphviz; "
    "Windows: winget install graphviz (then open a new shell)"
)
"""How to install Graphviz's ``dot`` program, per platform (it is not a Python package)."""


def dot_program() -> str | None:
    """The path of Graphviz's ``dot`` on ``PATH``, or ``None``."""
    return shutil.which("dot")


def _graphviz() -> Any:
    """The ``graphviz`` package, or Agent Framework's ``ImportError`` saying how to install it."""
    try:
        import graphviz  # type: ignore[import-not-found, import-untyped, unused-ignore]  # the optional "viz" extra
    except ImportError as e:
        raise ImportError(MISSING_PACKAGE) from e
    return graphviz


class WorkflowViz:
    """Agent Framework's visualiser: ``WorkflowViz(workflow).to_mermaid()``, ``.export(format="svg")``, ...

    Args:
        workflow: A built ``Workflow``.
        rankdir: Layout direction: ``"TD"`` (top down, the default, written
            as Agent Framework writes it) or one of Graphviz's values ``"TB"``
            (also top to bottom), ``"LR"``, ``"BT"``, ``"RL"``; the Mermaid
            export follows it too. (An addition to Agent Framework's API.)

    Raises:
        ValueError: ``rankdir`` is not one of those.
    """

    def __init__(self, workflow: object, *, rankdir: str = "TD") -> None:
        self._graph: Graph = workflow.graph  # type: ignore[attr-defined]
        self._rankdir = _check_rankdir(rankdir)

    def to_mermaid(self, include_internal_executors: bool = False) -> str:
        """Mermaid flowchart text, Agent Framework's for the same graph. ``include_internal_executors``
        also draws the internal edge Agent Framework gives each executor (``internal_<id> --> <id>``):
        this library has no such edges, but the text is the one a ported program printed."""
        return to_mermaid(self._graph, rankdir=self._rankdir, include_internal_executors=include_internal_executors)

    def to_digraph(self, include_internal_executors: bool = False) -> str:
        """Graphviz DOT text, Agent Framework's for the same graph (``include_internal_executors``: as in
        :meth:`to_mermaid`)."""
        return to_dot(self._graph, rankdir=self._rankdir, include_internal_executors=include_internal_executors)

    def to_html(self) -> str:
        """A self-contained page drawing the graph in a browser with Mermaid (an addition to Agent Framework's
        API: a picture with nothing installed)."""
        return to_html(self._graph, rankdir=self._rankdir)

    def export(
        self,
        format: ExportFormat = "svg",
        filename: str | None = None,
        include_internal_executors: bool = False,
    ) -> str:
        """Write the graph to a file and return its path.

        Args:
            format: ``"svg"``, ``"png"``, ``"pdf"`` (drawn by Graphviz) or
                ``"dot"`` (the DOT text, which needs nothing installed).
            filename: Where to write. Its extension, if it has one, must match
                ``format``; without one, ``.<format>`` is added. ``None``: a
                new temporary file (not deleted for you).
            include_internal_executors: Draw Agent Framework's internal
                edge into each executor too (see :meth:`to_mermaid`).

        Returns:
            The path of the file written.

        Raises:
            ValueError: An unsupported format, or an extension that does not match it.
            ImportError: The ``graphviz`` package (the ``viz`` extra) or
                Graphviz's ``dot`` program is missing; the message says how
                to install it.
        """
        if format not in _FORMATS:
            raise ValueError(f"Unsupported format: {format}. Supported formats: svg, png, pdf, dot")
        dot = self.to_digraph(include_internal_executors=include_internal_executors)
        if format == "dot":
            if filename:
                Path(filename).write_text(dot, encoding="utf-8")
                return filename
            with tempfile.NamedTemporaryFile(mode="w", suffix=".dot", delete=False, encoding="utf-8") as f:
                f.write(dot)
                return f.name
        graphviz = _graphviz()
        if filename:
            path = Path(filename)
            if path.suffix and path.suffix[1:] != format:
                raise ValueError(f"File extension {path.suffix} doesn't match format {format}")
            target = path if path.suffix else path.with_suffix(f".{format}")
        else:
            target = None
        # Drawn in memory (``pipe``), then written: a missing or failing ``dot`` leaves no file behind, where
        # ``render`` writes the DOT source next to the target first and keeps it when drawing fails.
        try:
            drawn = graphviz.Source(dot).pipe(format=format)
        except graphviz.ExecutableNotFound as e:
            raise ImportError(MISSING_EXECUTABLE) from e
        if target is None:
            with tempfile.NamedTemporaryFile(suffix=f".{format}", delete=False) as f:
                f.write(drawn)
                return f.name
        target.write_bytes(drawn)
        return str(target)

    def save_svg(self, filename: str, include_internal_executors: bool = False) -> str:
        """Write an SVG file; returns its path (see :meth:`export`)."""
        return self.export(format="svg", filename=filename, include_internal_executors=include_internal_executors)

    def save_png(self, filename: str, include_internal_executors: bool = False) -> str:
        """Write a PNG file; returns its path (see :meth:`export`)."""
        return self.export(format="png", filename=filename, include_internal_executors=include_internal_executors)

    def save_pdf(self, filename: str, include_internal_executors: bool = False) -> str:
        """Write a PDF file; returns its path (see :meth:`export`)."""
        return self.export(format="pdf", filename=filename, include_internal_executors=include_internal_executors)


_HTML = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title></head>
<body>
<h1>{title}</h1>
<pre class="mermaid">
{mermaid}</pre>
<!-- Mermaid (MIT License, https://github.com/mermaid-js/mermaid), inlined: the page draws with no network. -->
<script>
{script}
</script>
<script>
  mermaid.initialize({{ startOnLoad: true }});
</script>
</body>
</html>
"""


@functools.lru_cache(maxsize=1)
def _mermaid_script() -> str:
    """The Mermaid library the console serves (``_console/static/mermaid.min.js``), fit to inline in a page."""
    text = (resources.files("temporal_workflows") / "_console" / "static" / "mermaid.min.js").read_text("utf-8")
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)  # never ends the <script> early


def to_html(graph: Graph, *, title: str | None = None, rankdir: str = "TD") -> str:
    """A page that draws the graph in a browser with Mermaid, inlined (about 5.5 MB): no Graphviz, no network."""
    name = title or getattr(graph, "name", None) or "workflow"
    return _HTML.format(
        title=html.escape(str(name)),
        mermaid=html.escape(to_mermaid(graph, rankdir=rankdir) + "\n"),
        script=_mermaid_script(),
    )


_SVG: weakref.WeakKeyDictionary[Graph, str | None] = weakref.WeakKeyDictionary()


def render_svg(graph: Graph) -> str | None:
    """The graph drawn as SVG by Graphviz, or ``None`` when the package or ``dot`` is missing (or fails).

    Drawn once per graph (a built graph never changes): a notebook asks for
    each display, and may ask twice (``_repr_mimebundle_``, ``_repr_svg_``).
    """
    if graph in _SVG:
        return _SVG[graph]
    svg: str | None = None
    try:
        graphviz = _graphviz()
        svg = str(graphviz.Source(to_dot(graph)).pipe(format="svg", encoding="utf-8"))
    except Exception:  # no package, no dot on PATH, or dot failed: the notebook shows Mermaid instead
        svg = None
    _SVG[graph] = svg
    return svg


def mimebundle(
    graph: Graph, text: str, *, include: Collection[str] | None = None, exclude: Collection[str] | None = None
) -> dict[str, str]:
    """What a notebook displays for a workflow: SVG when Graphviz can draw it, else Mermaid.

    The Mermaid form is offered as Markdown with a ``mermaid`` code block
    (rendered by JupyterLab 4.1+, VS Code with a Mermaid extension, GitHub)
    and as ``text/vnd.mermaid``; ``text/plain`` is the workflow's repr.
    """
    bundle = {"text/plain": text}
    svg_wanted = (include is None or "image/svg+xml" in include) and not (exclude and "image/svg+xml" in exclude)
    svg = render_svg(graph) if svg_wanted else None
    if svg is not None:
        bundle["image/svg+xml"] = svg
    else:
        mermaid = to_mermaid(graph)
        bundle["text/markdown"] = f"```mermaid\n{mermaid}\n```\n"
        bundle["text/vnd.mermaid"] = mermaid
    return bundle
