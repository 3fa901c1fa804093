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

import html
import shutil
import tempfile
import weakref
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from temporal_workflows._graph.graph import Graph

__all__ = ["RANKDIRS", "WorkflowViz", "dot_program", "mimebundle", "render_svg", "to_dot", "to_html", "to_mermaid"]

RankDir = Literal["TB", "LR", "BT", "RL"]
RANKDIRS: tuple[RankDir, ...] = ("TB", "LR", "BT", "RL")
"""Graphviz's ``rankdir`` values (top to bottom, left to right, ...); Mermaid takes the same directions."""

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
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)} (Graphviz's values), not {rankdir!r}")
    return rankdir  # type: ignore[return-value]  # checked just above


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
    """Node ids that are safe in both languages whatever the executor ids contain."""
    names = list(graph.executors)
    names += [f"fanin::{g.id}" for g in graph.groups if g.kind == "fan_in"]
    return {n: f"n{i}" for i, n in enumerate(names)}


def _mermaid_text(text: str) -> str:
    """Text inside a Mermaid ``"..."`` label: quotes as an entity, one line."""
    return " ".join(text.replace('"', "#quot;").splitlines())


def _dot_text(text: str) -> str:
    """Text inside a DOT ``"..."`` string: backslashes and quotes escaped, newlines as DOT's ``\\n``."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r\n", "\\n").replace("\n", "\\n")


def to_mermaid(graph: Graph, *, rankdir: str = "TB") -> str:
    """Mermaid ``flowchart`` text of ``graph`` (the start executor is marked, conditional edges dashed)."""
    direction = _check_rankdir(rankdir)
    ids = _ids(graph)
    start = graph.topology.start_executor_id
    lines = [f"flowchart {'TD' if direction == 'TB' else direction}"]
    for ex in graph.executors:
        text = f"{ex} (start)" if ex == start else ex
        lines.append(f'  {ids[ex]}["{_mermaid_text(text)}"]')
    for g in graph.groups:
        if g.kind == "fan_in":
            lines.append(f'  {ids["fanin::" + g.id]}(("fan-in"))')
    for s, t, label, dashed in _edges(graph):
        arrow = "-.->" if dashed else "-->"
        if label:
            lines.append(f'  {ids[s]} {arrow}|"{_mermaid_text(label)}"| {ids[t]}')
        else:
            lines.append(f"  {ids[s]} {arrow} {ids[t]}")
    return "\n".join(lines) + "\n"


def to_dot(graph: Graph, *, rankdir: str = "TB") -> str:
    """Graphviz DOT text of ``graph`` (the start executor drawn bold, conditional edges dashed)."""
    direction = _check_rankdir(rankdir)
    ids = _ids(graph)
    start = graph.topology.start_executor_id
    name = _dot_text(graph.name or "workflow")
    lines = [f'digraph "{name}" {{', f"  rankdir={direction};", "  node [shape=box, style=rounded];"]
    for ex in graph.executors:
        extra = ", penwidth=2" if ex == start else ""
        lines.append(f'  {ids[ex]} [label="{_dot_text(ex)}"{extra}];')
    for g in graph.groups:
        if g.kind == "fan_in":
            lines.append(f'  {ids["fanin::" + g.id]} [label="fan-in", shape=circle];')
    for s, t, label, dashed in _edges(graph):
        attrs = []
        if label:
            attrs.append(f'label="{_dot_text(label)}"')
        if dashed:
            attrs.append("style=dashed")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {ids[s]} -> {ids[t]}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


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
        rankdir: Layout direction, one of Graphviz's values ``"TB"`` (top to
            bottom, the default), ``"LR"``, ``"BT"``, ``"RL"``; the Mermaid
            export follows it too. (An addition to Agent Framework's API.)

    Raises:
        ValueError: ``rankdir`` is not one of those.
    """

    def __init__(self, workflow: object, *, rankdir: str = "TB") -> None:
        self._graph: Graph = workflow.graph  # type: ignore[attr-defined]
        self._rankdir = _check_rankdir(rankdir)

    def to_mermaid(self, include_internal_executors: bool = False) -> str:
        """Mermaid flowchart text. ``include_internal_executors`` is accepted for Agent Framework
        compatibility; this library adds no internal executors to a graph, so it changes nothing."""
        return to_mermaid(self._graph, rankdir=self._rankdir)

    def to_digraph(self, include_internal_executors: bool = False) -> str:
        """Graphviz DOT text (``include_internal_executors``: as in :meth:`to_mermaid`)."""
        return to_dot(self._graph, rankdir=self._rankdir)

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
            include_internal_executors: Accepted for Agent Framework
                compatibility; changes nothing here.

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
<script type="module">
  // Mermaid draws the graph in the browser: nothing to install (the text above stays if it cannot load).
  import mermaid from "https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs";
  mermaid.initialize({{ startOnLoad: true }});
</script>
</body>
</html>
"""


def to_html(graph: Graph, *, title: str | None = None, rankdir: str = "TB") -> str:
    """A page that draws the graph in a browser with Mermaid (loaded from a CDN): no Graphviz needed."""
    name = title or getattr(graph, "name", None) or "workflow"
    return _HTML.format(title=html.escape(str(name)), mermaid=html.escape(to_mermaid(graph, rankdir=rankdir)))


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
        bundle["text/markdown"] = f"```mermaid\n{mermaid}```\n"
        bundle["text/vnd.mermaid"] = mermaid
    return bundle
