"""A fleet of real worker processes for tests: ``python -m temporal_workflows worker ...``, one per version
directory, killed or stopped by pid, and the v1/v2 versions of one graph module (``ops_report``: v2 adds an
executor) that a mixed fleet runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.cli import cli_env

OPS_REPORT = textwrap.dedent(
    """
    import asyncio

    from temporal_workflows import Executor, WorkflowBuilder, WorkflowContext, handler

    SOURCES = {sources!r}


    class Start(Executor):
        @handler
        async def start(self, topic: str, ctx: WorkflowContext[str]) -> None:
            await ctx.send_message(topic)


    class Source(Executor):
        @handler
        async def fetch(self, topic: str, ctx: WorkflowContext[str]) -> None:
            await asyncio.sleep({delay})
            await ctx.send_message(f"{{self.id}}:{{topic}}")


    class Report(Executor):
        @handler
        async def report(self, found: list[str], ctx: WorkflowContext[str, list[str]]) -> None:
            await ctx.yield_output(sorted(found))


    start, report = Start("start"), Report("report")
    sources = [Source(s) for s in SOURCES]
    workflow = (
        WorkflowBuilder(start_executor=start, name="ops_report")
        .add_fan_out_edges(start, sources)
        .add_fan_in_edges(sources, report)
        .build()
    )
    """
)

VERSIONS = {"v1": ["news", "blogs"], "v2": ["news", "blogs", "forums"]}
"""The sources each version's graph fans out to: v2 adds an executor (``forums``), as a deploy does."""

STARTER = textwrap.dedent(
    """
    import asyncio, sys

    from temporal_workflows.temporal import ConnectionConfig, TemporalWorkflowsPlugin, start_run
    import ops_report


    async def main(queue: str, *ids: str) -> None:
        # Connected as the CLI connects (TEMPORAL_ADDRESS), which also ends the process cleanly at exit.
        client = await ConnectionConfig.from_env().connect(plugins=[TemporalWorkflowsPlugin()])
        for id in ids:
            await start_run(client, ops_report.workflow, "x", id=id, task_queue=queue)


    asyncio.run(main(sys.argv[1], *sys.argv[2:]))
    """
)


def expected(version: str, topic: str = "x") -> list[list[str]]:
    """The outputs of a run of ``version``'s graph."""
    return [sorted(f"{s}:{topic}" for s in VERSIONS[version])]


def write_versions(root: Path, delay: float = 0.0) -> dict[str, Path]:
    """``root/v1/ops_report.py`` and ``root/v2/ops_report.py`` (and a ``start_runs.py`` beside each)."""
    dirs = {}
    for version, sources in VERSIONS.items():
        d = root / version
        d.mkdir(parents=True, exist_ok=True)
        (d / "ops_report.py").write_text(OPS_REPORT.format(sources=sources, delay=delay))
        (d / "start_runs.py").write_text(STARTER)
        dirs[version] = d
    return dirs


class Fleet:
    """Worker processes on one server, each started as a user does and stopped (or killed) by pid."""

    def __init__(self, address: str, logs: Path) -> None:
        self.address = address
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self._n = 0

    def start(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """``python -m temporal_workflows worker *args`` in ``cwd`` (its module importable), logging to a file."""
        self._n += 1
        log = self.logs / f"worker-{self._n}.log"
        extra = {"PYTHONPATH": os.pathsep.join([str(cwd), cli_env()["PYTHONPATH"]]), **(env or {})}
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "temporal_workflows", "worker", *args],
                cwd=cwd,
                env=cli_env(self.address, extra),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        proc.log = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    @staticmethod
    def log_of(proc: subprocess.Popen[bytes]) -> str:
        return Path(proc.log).read_text(errors="replace")  # type: ignore[attr-defined]

    async def ready(
        self, proc: subprocess.Popen[bytes], needle: str = "worker on task queue", timeout: float = 90
    ) -> str:
        """Wait until the worker's log says ``needle`` (it polls from then on); its log so far."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_of(proc)
            if needle in text:
                return text
            if proc.poll() is not None:
                raise AssertionError(f"worker {proc.pid} exited ({proc.returncode}) before {needle!r}:\n{text}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {proc.pid} did not say {needle!r} within {timeout} s:\n{text}")
            await asyncio.sleep(0.1)  # polling its log file, with a deadline

    async def stop(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Send ``sig`` to ``proc`` (by pid) and wait for it to end; its exit code."""
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        try:
            return await asyncio.to_thread(proc.wait, timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return await asyncio.to_thread(proc.wait)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def fleet(address: str, logs: Path) -> Iterator[Fleet]:
    f = Fleet(address, logs)
    try:
        yield f
    finally:
        f.close()


async def run_cli_in(cwd: Path, address: str, *args: str, timeout: float = 120) -> str:
    """``python -m temporal_workflows *args`` in ``cwd`` (its modules importable); its stdout (exit 0)."""
    env = {"PYTHONPATH": os.pathsep.join([str(cwd), cli_env()["PYTHONPATH"]])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        *args,
        cwd=cwd,
        env=cli_env(address, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, (args, err.decode())
    return out.decode()


async def start_runs_in(cwd: Path, address: str, queue: str, *ids: str, timeout: float = 120) -> None:
    """``start_run`` of ``cwd``'s ``ops_report`` graph, one run per id, from a process of its own."""
    env = {"PYTHONPATH": os.pathsep.join([str(cwd), cli_env()["PYTHONPATH"]])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "start_runs.py",
        queue,
        *ids,
        cwd=cwd,
        env=cli_env(address, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, err.decode()
