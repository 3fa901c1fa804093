"""A worker process for the fault-injection tests: hosts ``fault_graphs`` on one task queue.

    python -m tests.integration.fault_worker --address HOST:PORT --task-queue Q \\
        --log EFFECTS.sqlite --checkpoint-db CHECKPOINTS.sqlite [--hold]

Prints ``ready <pid>`` once it polls, then serves until SIGTERM/SIGINT (or a
SIGKILL from the test). ``--hold`` makes first attempts of ``work`` steps hang
after their effect (heartbeating), so a kill is sure to land mid-step; see
``fault_graphs``. Run from the repository root so ``tests`` is importable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import SqliteCheckpointStorage
from temporal_workflows.temporal import TemporalWorkflowsPlugin
from tests.integration import fault_graphs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--address", required=True, help="host:port of the Temporal frontend")
    p.add_argument("--task-queue", required=True)
    p.add_argument("--log", required=True, help="the SQLite side-effect log (created if missing)")
    p.add_argument("--checkpoint-db", required=True, help="this worker's default checkpoint store")
    p.add_argument("--hold", action="store_true", help="hold first attempts of work steps (a worker to be killed)")
    p.add_argument(
        "--sticky-timeout",
        type=float,
        default=3.0,
        help="seconds a run's next workflow task waits for this worker before any worker may take it "
        "(the SDK's default is 10; shorter makes runs move on quickly from a killed worker)",
    )
    return p.parse_args(argv)


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ[fault_graphs.ENV_LOG] = args.log
    if args.hold:
        os.environ[fault_graphs.ENV_HOLD] = "1"
    else:
        os.environ.pop(fault_graphs.ENV_HOLD, None)
    fault_graphs.EffectLog(args.log).create()
    plugin = TemporalWorkflowsPlugin(
        fault_graphs.all_workflows(),
        tracing=False,
        encryption=None,
        checkpoint_storage=SqliteCheckpointStorage(args.checkpoint_db),
    )
    client = await Client.connect(args.address, plugins=[plugin])
    worker = Worker(
        client,
        task_queue=args.task_queue,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=args.sticky_timeout),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(f"ready {os.getpid()}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
