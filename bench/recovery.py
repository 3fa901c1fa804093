"""kill -9 of the only worker while runs are mid-step: seconds until every run has completed.

Both sides use their default options. A worker process (this module, run as
``python -m bench.recovery``) hosts this project's one-step graph
(:data:`bench.shapes.KILL9`, default ``ExecutorOptions``, a step that never
calls ``ctx.heartbeat()``) and its hand-written twin
(:class:`bench.baseline.Kill9Baseline`, one activity with the same timeout
and retry policy, no heartbeats), on a task queue of its own. It holds every
first attempt (``bench.shapes.HOLD_ENV``). Once every run's step is running
there, the harness kills that process with SIGKILL and starts a new worker
process at once; the figure is the time from the kill until the last run of a
side has returned its result. Steps of this project are noticed dead after
their heartbeat timeout (30 s by default), the hand-written activities after
their start-to-close timeout (5 minutes), so a full run of this stage takes
about five minutes. ``--quick`` scales it down (2 s heartbeat timeout, 4 s
start-to-close timeout, 2 runs a side) to check that it runs.

    [BENCH_HOLD_FIRST_ATTEMPTS=1] python -m bench.recovery --address HOST:PORT --task-queue Q
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from temporal_workflows._graph.executor import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_START_TO_CLOSE_TIMEOUT
from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run

from . import baseline, shapes

__all__ = ["Kill9Outcome", "kill9_recovery"]

OURS = "ours"
BASE = "base"
ROOT = Path(__file__).resolve().parents[1]
SCALED_DOWN_START_TO_CLOSE = timedelta(seconds=4)
"""``--quick``'s stand-in for the hand-written side's 5-minute start-to-close timeout."""
READY_TIMEOUT = 60.0
"""Longest a worker process may take to start polling."""


@dataclass
class Kill9Outcome:
    """Seconds from the kill until each side's last run completed, and what noticed the dead worker."""

    runs: int
    scaled_down: bool
    heartbeat_timeout_s: float
    start_to_close_timeout_s: float
    seconds: dict[str, float] = field(default_factory=dict)
    """Per side: from the kill to the last run's result (NaN if not every run completed)."""
    per_run_seconds: dict[str, list[float]] = field(default_factory=dict)
    noticed_by: dict[str, list[str]] = field(default_factory=dict)
    """Per side: the timeout that failed the killed attempts (``HEARTBEAT``, ``START_TO_CLOSE``)."""
    failures: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.failures.values()) and all(len(v) == self.runs for v in self.per_run_seconds.values())


class _WorkerProcess:
    """One ``python -m bench.recovery`` worker; its output is drained so it never blocks on a full pipe."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._drain: asyncio.Task[bytes] | None = None

    @classmethod
    async def start(cls, address: str, task_queue: str, *, hold: bool) -> _WorkerProcess:
        env = dict(os.environ)
        env.pop(shapes.HOLD_ENV, None)
        if hold:
            env[shapes.HOLD_ENV] = "1"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.recovery",
            *("--address", address, "--task-queue", task_queue),
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        worker = cls(proc)
        assert proc.stdout is not None
        seen: list[bytes] = []
        try:
            async with asyncio.timeout(READY_TIMEOUT):
                while not (line := await proc.stdout.readline()).startswith(b"ready "):
                    if not line:
                        raise RuntimeError(f"worker process exited: {b''.join(seen)[-2000:].decode(errors='replace')}")
                    seen.append(line)
        except BaseException:
            await worker.kill()
            raise
        worker._drain = asyncio.create_task(proc.stdout.read())
        return worker

    async def kill(self) -> None:
        """SIGKILL: no graceful shutdown, no completions reported."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        if self._drain is not None:
            with contextlib.suppress(BaseException):
                await self._drain


async def _mid_step(handles: list[WorkflowHandle[Any, Any]], timeout: float) -> None:
    """Wait until every run's step is running (a started pending activity)."""

    async def running(handle: WorkflowHandle[Any, Any]) -> bool:
        desc = await handle.describe()
        return any(
            a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            for a in desc.raw_description.pending_activities
        )

    async with asyncio.timeout(timeout):
        while not all(await asyncio.gather(*(running(h) for h in handles))):
            await asyncio.sleep(0.1)  # poll interval


async def _noticed_by(handle: WorkflowHandle[Any, Any]) -> str:
    """The timeout that failed the killed attempt: the last failure its retry started with."""
    history = await handle.fetch_history()
    for e in reversed(history.events):
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            failure = e.activity_task_started_event_attributes.last_failure
            if failure.HasField("timeout_failure_info"):
                return TimeoutType.Name(failure.timeout_failure_info.timeout_type).removeprefix("TIMEOUT_TYPE_")
            return failure.message or "none"
    return "not started"


async def kill9_recovery(client: Client, address: str, *, runs: int, scaled_down: bool) -> Kill9Outcome:
    """Start ``runs`` runs a side on a worker process, kill it mid-step, start another; time every run's completion."""
    graph = shapes.KILL9_SCALED_DOWN if scaled_down else shapes.KILL9
    heartbeat = shapes.SCALED_DOWN_HEARTBEAT_TIMEOUT if scaled_down else DEFAULT_HEARTBEAT_TIMEOUT
    start_to_close = SCALED_DOWN_START_TO_CLOSE if scaled_down else DEFAULT_START_TO_CLOSE_TIMEOUT
    outcome = Kill9Outcome(runs, scaled_down, heartbeat.total_seconds(), start_to_close.total_seconds())
    # Each side has at most its own timeout plus plenty of slack to recover.
    deadline = start_to_close.total_seconds() + 120.0
    queue = f"bench-kill9-{uuid.uuid4().hex[:8]}"
    victim = await _WorkerProcess.start(address, queue, hold=True)
    rescuer: _WorkerProcess | None = None
    try:
        handles: dict[str, list[WorkflowHandle[Any, Any]]] = {OURS: [], BASE: []}
        for i in range(runs):
            run = await start_run(client, graph, i, id=f"{queue}-{OURS}-{i}", task_queue=queue)
            handles[OURS].append(run.handle)
            handles[BASE].append(
                await client.start_workflow(
                    "bench_base_kill9",
                    args=[i, start_to_close.total_seconds() if scaled_down else None],
                    id=f"{queue}-{BASE}-{i}",
                    task_queue=queue,
                )
            )
        await _mid_step([*handles[OURS], *handles[BASE]], READY_TIMEOUT)
        killed = time.perf_counter()
        await victim.kill()
        rescuer = await _WorkerProcess.start(address, queue, hold=False)

        async def completed(variant: str, i: int, handle: WorkflowHandle[Any, Any]) -> float:
            result = await handle.result()
            got = result["outputs"] if variant == OURS else result
            want: Any = [i] if variant == OURS else i
            if got != want:
                raise AssertionError(f"returned {got!r}, expected {want!r}")
            return time.perf_counter() - killed

        async def side(variant: str) -> None:
            try:
                async with asyncio.timeout(deadline):
                    results = await asyncio.gather(
                        *(completed(variant, i, h) for i, h in enumerate(handles[variant])), return_exceptions=True
                    )
            except TimeoutError:
                results = [TimeoutError(f"not every run done within {deadline:g} s after the kill")]
            times = [r for r in results if isinstance(r, float)]
            outcome.per_run_seconds[variant] = [round(t, 2) for t in times]
            outcome.failures[variant] = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
            outcome.seconds[variant] = round(max(times), 2) if len(times) == runs else float("nan")
            outcome.noticed_by[variant] = sorted({await _noticed_by(h) for h in handles[variant]})

        await asyncio.gather(side(OURS), side(BASE))
        for variant in (OURS, BASE):
            for h in handles[variant] if outcome.failures[variant] else ():
                with contextlib.suppress(Exception):  # a run that did not finish loads nothing after
                    await h.terminate("benchmark: not done in time after the kill")
    finally:
        for proc in (victim, rescuer):
            if proc is not None:
                await proc.kill()
    return outcome


# -- the worker process -------------------------------------------------------------------------


async def _serve(address: str, task_queue: str) -> None:
    plugin = TemporalWorkflowsPlugin([shapes.KILL9, shapes.KILL9_SCALED_DOWN])
    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=baseline.RECOVERY_WORKFLOWS,
        activities=baseline.RECOVERY_ACTIVITIES,
        # As in the benchmark's own worker: the hand-written workflow in the SDK's sandbox, bench passed through.
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules("bench")
        ),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(f"ready {os.getpid()}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.recovery", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.address, args.task_queue))


if __name__ == "__main__":
    main()
