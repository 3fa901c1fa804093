"""Hand-written Temporal twin of :data:`bench.fleet_graphs.fanout`, and its worker process.

Idiomatic Temporal Python: a ``start`` activity, ``FANOUT_WIDTH`` parallel ``work`` activities
(``asyncio.gather``), a ``join`` activity; each awaits the run's delay. The same timeouts, retry policy
and heartbeat timeout as the graph's steps (an activity that heartbeats while it awaits, as the graph's
step activity does by itself), on a worker with the same converter, interceptor and slots, so the fleet
benchmark compares what the integration adds at each number of worker processes.

    python -m bench.fleet_baseline --address HOST:PORT --task-queue Q [--max-concurrent-activities N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from bench.fleet_graphs import FANOUT_WIDTH, HEARTBEAT

__all__ = ["FleetFanoutBaseline", "main"]

_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "heartbeat_timeout": HEARTBEAT,
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3),
}


async def _await(delay: float) -> None:
    """Await ``delay`` seconds, heartbeating every third of the heartbeat timeout."""
    every = HEARTBEAT.total_seconds() / 3
    left = delay
    while left > 0:
        await asyncio.sleep(min(left, every))
        left -= every
        if left > 0:
            activity.heartbeat()


@activity.defn(name="fleet_base.start")
async def start_step(delay: float) -> None:
    await _await(delay)


@activity.defn(name="fleet_base.work")
async def work_step(name: str, delay: float) -> str:
    await _await(delay)
    return name


@activity.defn(name="fleet_base.join")
async def join_step(done: list[str], delay: float) -> list[str]:
    await _await(delay)
    return sorted(done)


@workflow.defn(name="fleet_base_fanout")
class FleetFanoutBaseline:
    @workflow.run
    async def run(self, id: str, delay: float) -> dict[str, Any]:
        await workflow.execute_activity(start_step, delay, **_OPTIONS)
        done = await asyncio.gather(
            *(workflow.execute_activity(work_step, args=[f"w{i}", delay], **_OPTIONS) for i in range(FANOUT_WIDTH))
        )
        joined = await workflow.execute_activity(join_step, args=[list(done), delay], **_OPTIONS)
        return {"id": id, "done": joined}


async def _serve(address: str, task_queue: str, slots: int | None) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from temporal_workflows.temporal import TemporalWorkflowsPlugin

    # The client the graphs' workers use (pydantic converter, tracing interceptor), hosting no graph.
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin()])
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[FleetFanoutBaseline],
        activities=[start_step, work_step, join_step],
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules("bench")
        ),
        max_concurrent_activities=slots,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(f"worker on task queue {task_queue!r} (hand-written) pid {os.getpid()}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet_baseline", description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--max-concurrent-activities", type=int, default=None)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.address, args.task_queue, args.max_concurrent_activities))


if __name__ == "__main__":
    main()
