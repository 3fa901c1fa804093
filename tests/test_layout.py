"""The installed distribution claims only ``temporal_workflows``, and the public import paths hold.

Temporal's samples keep an application's activities in ``activities.py``; a
package that installed its own top-level ``activities`` broke the plugin and
the CLI of every such application ("No module named 'activities.steps'").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
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
        "import sys; import temporal_workflows.temporal._workflow; "
        "print([m for m in ('temporal_workflows.temporal._client', 'temporal_workflows.temporal._codec_server', "
        "'temporal_workflows.temporal._devserver') if m in sys.modules])"
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
        parts = ("_workflow", "_inbox", "_checkpointing", "_status", "_supersteps", "_options", "_failures", "_wire")
        workflow_code = "\n".join((PACKAGE / "temporal" / f"{name}.py").read_text() for name in parts)
        assert "max_payload_bytes(" not in workflow_code.replace("pinned.max_payload_bytes", "")
    assert not {m for m in _imports(path) if m.split(".")[0] in forbidden}


def test_agent_framework_event_and_checkpoint_names_are_public() -> None:
    import temporal_workflows
    import temporal_workflows.events as events

    for name in ("WorkflowErrorDetails", "WorkflowEventSource"):
        assert name in temporal_workflows.__all__ and getattr(temporal_workflows, name)
    assert "WorkflowIntermediateEvent" in events.__all__ and events.WorkflowIntermediateEvent
