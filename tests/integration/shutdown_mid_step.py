"""A worker shut down while a step runs, in a process of its own (tests/integration/test_newcomer.py).

    python -m tests.integration.shutdown_mid_step ADDRESS TASK_QUEUE WORKFLOW_ID

Hosts a graph whose step takes a minute, starts a run, shuts the worker down
as soon as the step has started, lets the garbage collector take everything
the worker held, prints ``collected`` and exits. A run left in the worker's
cache mid-superstep used to be closed by the collector in a foreign context,
and OpenTelemetry logged "Failed to detach context" once per open span.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from datetime import timedelta

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import WorkflowBuilder, WorkflowContext, executor
from temporal_workflows.temporal import TemporalWorkflowsPlugin, configure_tracing, start_run

started = asyncio.Event()


@executor(id="slow")
async def slow(text: str, ctx: WorkflowContext[None, str]) -> None:
    started.set()
    await asyncio.sleep(60)
    await ctx.yield_output(text)


graph = WorkflowBuilder(start_executor=slow, name="nc_slow_step").build()


async def serve_and_stop(address: str, task_queue: str, workflow_id: str) -> None:
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin([graph])])
    worker = Worker(client, task_queue=task_queue, graceful_shutdown_timeout=timedelta(milliseconds=100))
    async with worker:
        await start_run(client, graph, "hi", id=workflow_id, task_queue=task_queue)
        await asyncio.wait_for(started.wait(), 60)


def main() -> None:
    address, task_queue, workflow_id = sys.argv[1:4]
    configure_tracing(InMemorySpanExporter(), batch=False)  # spans on, as in the test session
    asyncio.run(serve_and_stop(address, task_queue, workflow_id))
    gc.collect()
    print("collected", flush=True)
    sys.stderr.flush()
    os._exit(0)  # the SDK's runtime threads can abort finalization; everything is said


if __name__ == "__main__":
    main()
