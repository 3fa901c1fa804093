"""Graphs whose steps stream live events, hosted by the integration-test worker (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import timedelta

from temporalio.common import RetryPolicy

from temporal_workflows import (
    ExecutorOptions,
    StepProgressEvent,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)

GATES: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
"""Per workflow id: set by a test to let the gated step finish (the worker runs in the test process)."""


@executor(id="narrator")
async def narrator(pieces: int, ctx: WorkflowContext[None, str]) -> None:
    """Streams ``pieces`` progress items, then waits for its test to open the gate."""
    for i in range(pieces):
        await ctx.add_event(StepProgressEvent(message=f"piece {i}", data={"at": time.time()}))
    await asyncio.wait_for(GATES[ctx.run_id].wait(), 60)
    await ctx.yield_output("told")


gated = WorkflowBuilder(start_executor=narrator, name="it_live_gated").build()


@executor(
    id="stutter",
    options=ExecutorOptions(retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3)),
)
async def stutter(text: str, ctx: WorkflowContext[None, str]) -> None:
    """Streams the words of ``text``; its first attempt fails after two of them."""
    for n, word in enumerate(text.split(), 1):
        await ctx.add_event(StepProgressEvent(message=f"{word} (attempt {ctx.attempt})"))
        if ctx.attempt == 1 and n == 2:
            raise RuntimeError("the model connection dropped")
    await ctx.yield_output(text)


retried = WorkflowBuilder(start_executor=stutter, name="it_live_retried").build()


def all_workflows() -> list[Workflow]:
    return [gated, retried]
