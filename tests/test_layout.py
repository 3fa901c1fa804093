"""The installed distribution claims only ``temporal_workflows``, and the public import paths hold.

Temporal's samples keep an application's activities in ``activities.py``; a
package that installed its own top-level ``activities`` broke the plugin and
the CLI of every such application ("No module named 'activities.steps'").
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent


def test_the_distribution_installs_only_the_temporal_workflows_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(where=str(ROOT), include=include)
    assert packages and all(p == "temporal_workflows" or p.startswith("temporal_workflows.") for p in packages)
    assert "temporal_workflows.temporal._activities" in packages


APP = """
    from temporal_workflows import WorkflowBuilder, WorkflowContext, executor
    from temporal_workflows.temporal import TemporalWorkflowsPlugin
    from temporal_workflows.temporal._activities.steps import build_activities

    import activities  # the application's own module, as in Temporal's samples

    @executor(id="echo")
    async def echo(text: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(activities.shout(text))

    wf = WorkflowBuilder(start_executor=echo, name="app_echo").build()
    plugin = TemporalWorkflowsPlugin([wf])
    names = sorted(getattr(a, "__temporal_activity_definition").name for a in build_activities([wf]))
    print(activities.__file__)
    print(names)
"""


@pytest.mark.parametrize("layout", ["module", "package"])
def test_an_applications_own_activities_module_works_beside_the_plugin_and_the_cli(tmp_path: Path, layout: str) -> None:
    own = "def shout(text: str) -> str:\n    return text.upper()\n"
    if layout == "module":
        (tmp_path / "activities.py").write_text(own)
    else:
        (tmp_path / "activities").mkdir()
        (tmp_path / "activities" / "__init__.py").write_text(own)
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.splitlines()[-2:]
    assert first.startswith(str(tmp_path))  # the application's module, not one of ours
    assert "app_echo.echo" in second and "temporal_workflows.topology" in second
    cli = subprocess.run(
        [sys.executable, "-m", "temporal_workflows", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert "usage" in cli.stdout.lower()


def test_public_import_paths_keep_working_and_internals_left_the_public_surface() -> None:
    import temporal_workflows
    import temporal_workflows.errors as errors
    import temporal_workflows.temporal as temporal
    import temporal_workflows.temporal.integration as integration

    for name in ("WorkflowBuilder", "Workflow", "ExecutorOptions"):
        assert name in temporal_workflows.__all__ and getattr(temporal_workflows, name)
    for name in ("ReducerError", "AlreadyAnsweredError"):
        assert name in errors.__all__ and getattr(errors, name)
    for name in ("TemporalWorkflowsPlugin", "start_run", "RunHandle", "ConnectionConfig"):
        assert name in temporal.__all__ and getattr(temporal, name)
    for name in ("GraphWorkflow", "RunInput"):
        assert name in integration.__all__ and getattr(integration, name)
    for internal in ("free_port", "temporal_cli_path", "StepInput"):
        assert internal not in temporal.__all__
        with pytest.raises(AttributeError):
            getattr(temporal, internal)


def test_importing_the_workflow_module_pulls_in_no_client_code() -> None:
    code = (
        "import sys; import temporal_workflows.temporal._workflow.workflow; "
        "print([m for m in ('temporal_workflows.temporal._client.client', "
        "'temporal_workflows.temporal._client.codec_server', 'temporal_workflows.temporal._client.devserver') "
        "if m in sys.modules])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def _imports(path: Path) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


PACKAGE = ROOT / "temporal_workflows"


@pytest.mark.parametrize(
    "path",
    [
        *sorted((PACKAGE / "_engine").glob("*.py")),
        *sorted((PACKAGE / "_local").glob("*.py")),
        *sorted((PACKAGE / "_checkpoints").glob("*.py")),
        PACKAGE / "_graph" / "context.py",
    ],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_only_the_temporal_host_imports_temporalio(path: Path) -> None:
    """The engine, the in-process host, the storages and the handler context run without Temporal."""
    assert not {m for m in _imports(path) if m.split(".")[0] == "temporalio"}


@pytest.mark.parametrize("path", sorted((PACKAGE / "_engine").glob("*.py")), ids=lambda p: p.name)
def test_the_engine_reads_no_clock_draws_no_random_number_and_does_no_io(path: Path) -> None:
    """It is workflow code on Temporal: the host supplies the clock; nothing else may vary on replay."""
    forbidden = {"time", "random", "uuid", "os", "socket", "asyncio", "threading", "subprocess", "sqlite3", "pathlib"}
    if path.name == "limits.py":
        # max_payload_bytes() reads the environment for hosts and clients; the workflow never calls it
        # (it uses the limit pinned with the topology), which the next assertion keeps true.
        forbidden.discard("os")
        temporal = PACKAGE / "temporal"
        parts = [*sorted((temporal / "_workflow").glob("*.py")), temporal / "_failures.py", temporal / "_wire.py"]
        workflow_code = "\n".join(path.read_text() for path in parts)
        assert "max_payload_bytes(" not in workflow_code.replace("pinned.max_payload_bytes", "")
    assert not {m for m in _imports(path) if m.split(".")[0] in forbidden}


def test_agent_framework_event_and_checkpoint_names_are_public() -> None:
    import temporal_workflows
    import temporal_workflows.events as events

    for name in ("WorkflowErrorDetails", "WorkflowEventSource"):
        assert name in temporal_workflows.__all__ and getattr(temporal_workflows, name)
    assert "WorkflowIntermediateEvent" in events.__all__ and events.WorkflowIntermediateEvent


# -- the import graph: no cycles, no upward imports, an engine without I/O -------------------------------

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # Lowest first; a module may import its own layer and the ones before it, never a later one.
    # An entry names a top-level module or folder of the package, or a module inside one ("temporal._codec").
    ("engine", ("_engine", "_errors", "_events", "_requests", "_subworkflow", "_live", "_version")),
    # The checkpoint stores stand on the engine (its checkpoint form is _engine/checkpoint.py), never under it.
    ("checkpoint stores", ("_checkpoints",)),
    ("graph", ("_graph", "_telemetry")),
    (
        "hosts",
        # _http: the HTTP pieces the console and temporal's codec server share (its README.md).
        # _llama_runtime hosts LlamaIndex's own loop on Temporal beside temporal/ (its README.md).
        ("_local", "temporal", "_llama_runtime", "testing", "_http"),
    ),
    # "": the package's __init__, Agent Framework's public API; errors, events: its named errors and events
    ("front ends", ("llama", "agents", "ag_ui", "", "errors", "events")),
    ("CLI", ("_cli", "_console", "__main__")),
]
"""engine ← checkpoint stores ← graph ← hosts ← front ends ← CLI (docs/architecture.md, "Layers")."""

ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    # (importer, imported): why; each only inside the function that needs it, never at import time.
    ("_graph.workflow", "_local.runner"): "a Workflow runs in process (Agent Framework's contract): its runner",
    ("_graph.workflow", "temporal._client.durable"): "Workflow.on_temporal, the one-line durable twin",
    ("_graph.workflow", "temporal._worker.plugin"): "Workflow.on_temporal's default task queue",
    ("_graph.builder", "agents"): "WorkflowBuilder takes an Agent Framework agent where an executor goes, as there",
}

IO_MODULES = frozenset(
    {"io", "os", "pathlib", "tempfile", "shutil", "glob", "socket", "ssl", "select", "selectors", "subprocess"}
    | {"sqlite3", "urllib", "http", "asyncio", "threading", "multiprocessing", "mmap", "fcntl", "time", "random"}
)


@dataclass(frozen=True)
class _Import:
    target: str  # a module of the package (relative name, "" for __init__), or a top-level module outside it
    line: int
    local: bool  # inside a function: runs when called, not when the module is imported
    outside: bool = False  # outside the package (``ag_ui``: ag-ui-protocol's, not ``temporal_workflows.ag_ui``)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _inside(name: str) -> str | None:
    """``temporal_workflows.x.y`` as ``x.y`` (the nearest module of the package), or ``None`` if outside it."""
    if name != "temporal_workflows" and not name.startswith("temporal_workflows."):
        return None
    rel = name.removeprefix("temporal_workflows").removeprefix(".")
    while rel not in MODULES and rel:
        rel = rel.rpartition(".")[0]
    return rel


def _graph_imports(module: str) -> list[_Import]:
    """Every import a module makes, also inside functions, except under ``if TYPE_CHECKING:`` (never run)."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[_Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit_one(other, local)
            else:
                visit_one(child, local)

    def visit_one(node: ast.AST, local: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                inner = _inside(alias.name)
                target = alias.name.split(".")[0] if inner is None else inner
                found.append(_Import(target, node.lineno, local, inner is None))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = [p for p in package[: len(package) - node.level + 1] if p]
                name = ".".join(["temporal_workflows", *base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            package_init = _inside(name)
            if package_init is not None and package_init != module and MODULES[package_init].name == "__init__.py":
                # "from pkg import x" runs pkg's __init__ first: a cycle through it is a cycle.
                found.append(_Import(package_init, node.lineno, local))
            for alias in node.names:
                inner = _inside(f"{name}.{alias.name}")  # "from pkg import module" imports the module
                target = name.split(".")[0] if inner is None else inner
                found.append(_Import(target, node.lineno, local, inner is None))
        else:
            visit(node, local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text()), False)
    return found


GRAPH = {m: [i for i in _graph_imports(m) if not i.outside and i.target in MODULES and i.target != m] for m in MODULES}


def _layer(module: str) -> int:
    best: tuple[int, int] | None = None  # (length of the entry that matched, layer)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            matches = module == entry or module.startswith(entry + ".") or (entry == "" and module == "")
            if matches and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    assert best is not None, f"{module!r} is in no layer: add it to LAYERS (and to docs/architecture.md)"
    return best[1]


def _ancestors(module: str) -> list[str]:
    """The packages whose ``__init__`` Python runs before ``module`` (the package's own root aside: it is
    running already when any of its modules is imported)."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) in MODULES]


def _cycle_edges(v: str) -> set[str]:
    """What importing ``v`` runs: each module it imports, and the ``__init__`` of every package above one that
    is not above ``v`` too (``from temporal_workflows.temporal._codec import x`` runs ``temporal/__init__``
    first, lazy lookups in it included)."""
    mine = set(_ancestors(v))
    edges: set[str] = set()
    for i in GRAPH[v]:
        edges.add(i.target)
        edges.update(a for a in _ancestors(i.target) if a not in mine and a != v)
    return edges


def test_the_package_has_no_import_cycle() -> None:
    """Not even through imports inside functions, which only hide a cycle until the call that closes it, nor
    through a package's ``__init__`` that importing one of its modules runs first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(_cycle_edges(v)):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            connect(module)
    assert not cycles, "import cycles: " + "; ".join(" ↔ ".join(c) for c in cycles)


def test_no_module_imports_a_later_layer() -> None:
    upward = []
    for module, imports in GRAPH.items():
        for i in imports:
            if _layer(i.target) > _layer(module):
                if i.local and (module, i.target) in ALLOWED_UPWARD:
                    continue
                where = "inside a function" if i.local else "at import time"
                upward.append(f"{module}:{i.line} imports {i.target or 'temporal_workflows'} ({where})")
    assert not upward, "imports of a later layer: " + "; ".join(upward)
    for importer, imported in ALLOWED_UPWARD:
        assert any(i.target == imported for i in GRAPH[importer]), f"stale allowance {importer} -> {imported}"


def test_the_console_stands_on_the_shared_http_pieces_and_nothing_below_it_imports_the_console() -> None:
    """``_console/`` is the CLI's: ``_http/`` (which the codec server uses) and the hosts never import it,
    not even inside a function, so the codec server is the same without the console."""
    hosts = LAYERS[[name for name, _ in LAYERS].index("hosts")][1]
    below = [m for m in GRAPH if m == "_http" or m.startswith("_http.") or _layer(m) <= _layer(hosts[0])]
    assert "_http.gate" in below and "temporal._client.codec_server" in below
    reaching = [
        f"{module}:{i.line} imports {i.target}"
        for module in below
        for i in GRAPH[module]
        if i.target == "_console" or i.target.startswith("_console.")
    ]
    assert not reaching, reaching
    shared = ("body", "codec", "gate", "guard", "server")
    assert not [m for m in MODULES if m.startswith("_console.") and m.split(".")[1] in shared]  # no twin left behind


def test_the_engine_and_what_it_imports_do_no_io() -> None:
    """``_engine`` is workflow code on Temporal: no files, sockets, threads, clock or randomness; nor what it imports.

    ``os`` is read for one thing: ``_engine/limits.py``'s payload limit comes from the environment.
    """
    reached: set[str] = set()
    todo = [m for m in MODULES if m.startswith("_engine.")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(i.target for i in GRAPH[module])
    # Nothing of the checkpoint stores, not even their contract: the engine owns the checkpoint's form.
    assert not {m for m in reached if m == "_checkpoints" or m.startswith("_checkpoints.")}
    offenders = []
    for module in sorted(reached):
        for i in _graph_imports(module):
            if i.target in IO_MODULES and not (module == "_engine.limits" and i.target == "os"):
                offenders.append(f"{module}:{i.line} imports {i.target}")
    assert not offenders, offenders
    tree = ast.parse(MODULES["_engine.limits"].read_text())
    uses = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and getattr(n.value, "id", None) == "os"}
    assert uses == {"environ"}


def test_workflow_side_code_imports_nothing_of_the_client_or_worker_side() -> None:
    """``temporal/_workflow/`` runs in the workflow: it reaches activities by name, never by import."""
    sides = ("temporal._client", "temporal._worker", "temporal._activities")
    crossing = [
        f"{module}:{i.line} imports {i.target}"
        for module, imports in GRAPH.items()
        if module.startswith("temporal._workflow")
        for i in imports
        if i.target.startswith(sides)
    ]
    assert not crossing, crossing


def test_hosts_tell_a_graph_workflow_apart_through_its_hook_as_they_did_by_isinstance() -> None:
    """``_graph/hosting.py`` replaced ``isinstance(obj, Workflow)`` in the hosts: the same objects pass and fail."""
    from temporal_workflows import WorkflowBuilder, WorkflowContext, WorkflowExecutor, executor
    from temporal_workflows._graph.hosting import as_graph_workflow, is_graph_workflow

    @executor(id="echo")
    async def echo(text: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(text)

    graph = WorkflowBuilder(start_executor=echo, name="hook_echo").build()
    assert is_graph_workflow(graph) and as_graph_workflow(graph) is graph
    for other in (object(), "hook_echo", echo, WorkflowBuilder):
        assert not is_graph_workflow(other)
        with pytest.raises(TypeError, match="is not a workflow"):
            as_graph_workflow(other)
    with pytest.raises(TypeError, match="WorkflowExecutor wraps a built Workflow"):
        WorkflowExecutor(object(), id="sub")  # type: ignore[arg-type]
    assert WorkflowExecutor(graph, id="sub").workflow is graph


# -- each folder of the package says what lives there and who may import it -------------------------------

FOLDERS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _top(module: str) -> str:
    """The package's entry a module belongs to: its folder, a top-level module, or ``temporal_workflows``."""
    return module.split(".")[0] if module else "temporal_workflows"


def _readme_list(text: str, label: str) -> set[str] | None:
    """The backticked names of a README's ``- <label>:`` item (it may wrap); ``None`` for "anything"."""
    lines = text.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith(f"- {label}:")), None)
    assert start is not None, f"no '- {label}:' line"
    item = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        item.append(line)
    said = " ".join(item)
    if "anything in the package" in said:
        return None
    return set(re.findall(r"`([^`]+)`", said))


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_folder_has_a_readme_whose_import_rules_the_code_keeps(folder: str) -> None:
    """A README.md says what lives in the folder and who may import it; the import graph keeps what it says."""
    readme = PACKAGE / folder / "README.md"
    assert readme.exists(), f"{folder}/ has no README.md saying what lives there and who may import it"
    text = readme.read_text()
    assert "## Who may import what" in text, f"{folder}/README.md has no 'Who may import what' section"
    layer = LAYERS[_layer(folder)][0]
    assert f"Layer: **{layer}**" in text, f"{folder}/README.md should name its layer, {layer!r}"
    imports = {
        _top(i.target) for m, found in GRAPH.items() if _top(m) == folder for i in found if _top(i.target) != folder
    }
    importers = {
        _top(m) for m, found in GRAPH.items() if _top(m) != folder and any(_top(i.target) == folder for i in found)
    }
    may_import = _readme_list(text, "May import")
    may_be_imported_by = _readme_list(text, "May be imported by")
    if may_import is not None:
        assert imports <= may_import, (
            f"{folder}/ imports {sorted(imports - may_import)}, which its README.md does not allow"
        )
    if may_be_imported_by is not None:
        unlisted = importers - may_be_imported_by
        assert not unlisted, f"{sorted(unlisted)} import {folder}/, which its README.md does not allow"
