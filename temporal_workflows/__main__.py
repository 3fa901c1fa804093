"""Command line: start graph runs on Temporal and look at them.

    python -m temporal_workflows run examples.research:workflow --input '{"topic": "bees"}' [--id ID]
    python -m temporal_workflows status ID

A worker hosting the graph must be running (``python worker.py --workflow ...``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from ._client import RunHandle, start_run
from ._plugin import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin
from ._tracing import flush_tracing
from ._workflow import load_workflow


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m temporal_workflows", description=__doc__.split("\n")[0])
    p.add_argument("--address", default=os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"))
    p.add_argument("--namespace", default=os.environ.get("TEMPORAL_NAMESPACE", "default"))
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start a run and print its progress per superstep")
    run.add_argument("workflow", help="module:attribute of a built Workflow, or a graph name")
    run.add_argument("--input", required=True, help="start message as JSON")
    run.add_argument("--id", default=None, help="workflow id (default: <name>-<random>)")
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    run.add_argument("--no-wait", action="store_true", help="print the id and return at once")
    status = sub.add_parser("status", help="print a run's status")
    status.add_argument("id")
    return p


async def follow(handle: RunHandle, out: Any = sys.stdout, interval: float = 0.25) -> dict[str, Any]:
    """Print a line per superstep until the run closes; return its result."""
    seen = -1
    result_task = asyncio.ensure_future(handle.result())
    while not result_task.done():
        try:
            st = await handle.status()
        except Exception:  # not yet started by a worker, or closed between checks
            st = None
        if st and st["superstep"] != seen:
            seen = st["superstep"]
            running = f" running {', '.join(st['in_flight'])}" if st["in_flight"] else ""
            print(f"superstep {seen}: {st['status']}{running}", file=out, flush=True)
        await asyncio.wait({result_task}, timeout=interval)
    result: dict[str, Any] = result_task.result()
    print(f"{result['status']} after {result['superstep']} supersteps", file=out, flush=True)
    return result


async def _main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    client = await Client.connect(args.address, namespace=args.namespace, plugins=[TemporalWorkflowsPlugin()])
    if args.command == "run":
        try:
            message = json.loads(args.input)
        except json.JSONDecodeError as e:
            print(f"--input is not valid JSON: {e}", file=sys.stderr)
            return 2
        target: Any = load_workflow(args.workflow) if ":" in args.workflow else args.workflow
        handle = await start_run(client, target, message, id=args.id, task_queue=args.task_queue)
        print(f"started {handle.id}", flush=True)
        if args.no_wait:
            return 0
        try:
            result = await follow(handle)
        except Exception as e:
            cause = getattr(e, "cause", None)
            print(f"run {handle.id} failed: {cause or e}", file=sys.stderr)
            return 1
        print(json.dumps(result["outputs"], indent=2))
        return 0
    handle = RunHandle(client.get_workflow_handle(args.id))
    desc = await handle.describe()
    info: dict[str, Any] = {
        "id": args.id,
        "workflow": desc.workflow_type,
        "temporal_status": desc.status.name if desc.status else None,
    }
    if desc.status == WorkflowExecutionStatus.RUNNING or desc.status == WorkflowExecutionStatus.COMPLETED:
        info.update(await handle.status())
    print(json.dumps(info, indent=2, default=str))
    return 0


def hard_exit(code: int) -> None:
    """Exit without interpreter finalization.

    The SDK's Rust runtime threads can abort finalization of a short-lived
    process (``PyGILState_Release`` fatal error, exit code -6) after all work
    is done; everything is flushed first, so skipping finalization loses nothing.
    """
    flush_tracing()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    hard_exit(asyncio.run(_main()))


if __name__ == "__main__":
    main()
