"""``temporal-workflows worker`` hosts plain LlamaIndex ``workflows`` programs under ``TemporalRuntime``,
and ``temporal-workflows run`` starts one (docs/llama-runtime.md, "Connecting, and where the worker runs")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

pytest.importorskip("workflows")

from temporal_workflows.llama import TemporalRuntime
from temporal_workflows.temporal import ConnectionConfig
from tests.integration import llama_runtime_workflows as lw

ROOT = Path(__file__).parents[2]

APP = textwrap.dedent(
    """
    from workflows import Context, Workflow, step
    from workflows.events import StartEvent, StopEvent


    class Greet(Workflow):
        @step
        async def greet(self, ctx: Context, ev: StartEvent) -> StopEvent:
            await ctx.store.set("greeted", ev.name)
            return StopEvent(result=f"hello {ev.name}")


    workflow = Greet(timeout=30)  # an instance: the worker keeps its timeout
    """
)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "llama_cli_app.py").write_text(APP)
    yield tmp_path


def _env(app: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(app), str(ROOT)])}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "temporal_workflows", *args]


async def _wait_for_line(proc: subprocess.Popen[str], needle: str) -> str:
    assert proc.stdout is not None
    seen: list[str] = []
    while True:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        if not line:
            raise AssertionError(f"worker exited before saying {needle!r}: {''.join(seen)}")
        seen.append(line)
        if needle in line:
            return line


@contextlib.asynccontextmanager
async def _worker(app: Path, *args: str) -> AsyncIterator[subprocess.Popen[str]]:
    """``temporal-workflows worker *args`` in ``app``, stopped with SIGTERM at the end (it must exit 0)."""
    worker = subprocess.Popen(
        _cli("worker", *args),
        cwd=app,
        env=_env(app),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield worker
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(worker.wait, 60)
        finally:
            if worker.poll() is None:
                worker.kill()
    assert worker.returncode == 0


async def _run_command(app: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``temporal-workflows run *args`` in ``app``: it must exit 0."""
    ran = await asyncio.to_thread(
        subprocess.run, _cli("run", *args), cwd=app, env=_env(app), capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    return ran


async def test_the_worker_command_hosts_plain_llamaindex_workflows_and_run_starts_one(
    app: Path, temporal_address: str
) -> None:
    """A class (built with its defaults) and a module-level instance, hosted by one ``worker``: a client's
    ``TemporalRuntime`` on the same queue runs them unchanged, and ``run`` starts one and prints its result."""
    queue = f"llama-cli-{uuid.uuid4().hex[:8]}"
    hosted = ("--workflow", "tests.integration.llama_runtime_workflows:Chain", "--workflow", "llama_cli_app:workflow")
    async with _worker(app, *hosted, "--task-queue", queue, "--address", temporal_address) as worker:
        line = await _wait_for_line(worker, "hosting LlamaIndex workflows")
        assert "tests.integration.llama_runtime_workflows.Chain" in line and "LlamaIndexRun" in line, line
        assert repr(queue) in line, line

        rt = TemporalRuntime(task_queue=queue, connection=ConnectionConfig(address=temporal_address))
        handler = lw.Chain(timeout=30, runtime=rt).run(x=1)
        events = [type(ev).__name__ for ev in [ev async for ev in handler.stream_events()]]
        assert await asyncio.wait_for(handler, 60) == "done 2"
        assert events.count("Progress") == 2, events
        await rt.destroy()

        start = ("llama_cli_app:workflow", "--input", json.dumps({"name": "Ann"}))
        ran = await _run_command(app, *start, "--task-queue", queue, "--address", temporal_address)
        lines = ran.stdout.splitlines()
        assert lines[0].startswith("started "), ran.stdout
        assert json.loads("\n".join(lines[1:])) == "hello Ann"


async def test_a_versioned_worker_command_makes_its_version_current_and_runs_start_on_it(
    app: Path, temporal_address: str
) -> None:
    """``worker --deployment-name D`` hosting a LlamaIndex workflow: its version (``--build-id``) becomes D's
    current one as it starts, so ``run`` starts a run, and the run is pinned to that version."""
    queue = f"llama-cli-versioned-{uuid.uuid4().hex[:8]}"
    deployment = f"llama-cli-{uuid.uuid4().hex[:8]}"
    where = ("--task-queue", queue, "--address", temporal_address)
    versioned = ("--deployment-name", deployment, "--build-id", "greet-1")
    async with _worker(app, "--workflow", "llama_cli_app:workflow", *where, *versioned) as worker:
        line = await _wait_for_line(worker, "hosting LlamaIndex workflows")
        assert f"version 'greet-1' of deployment {deployment!r}" in line, line
        ran = await _run_command(app, "llama_cli_app:workflow", "--input", json.dumps({"name": "Bo"}), *where)
        lines = ran.stdout.splitlines()
        assert json.loads("\n".join(lines[1:])) == "hello Bo"
        client = await TemporalRuntime(task_queue=queue, connection=ConnectionConfig(address=temporal_address)).client()
        described = await client.get_workflow_handle(lines[0].split()[1]).describe()
        pinned = described.raw_description.workflow_execution_info.versioning_info.deployment_version
        assert pinned.build_id == "greet-1"
