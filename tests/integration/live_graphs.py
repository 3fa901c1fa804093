"""Graphs whose steps stream live events, hosted by the integration-test worker (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import timedelta

from temporalio.common import RetryPolicy

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.events import StepProgressEvent

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


@executor(id="flood")
async def flood(count: int, ctx: WorkflowContext[None, int]) -> None:
    """Publishes ``count`` small progress items in a tight loop (no other await)."""
    for i in range(count):
        await ctx.add_event(StepProgressEvent(message=str(i)))
    await ctx.yield_output(count)


flooded = WorkflowBuilder(start_executor=flood, name="it_live_flood").build()

BIG = 1_200_000
"""Characters of the live events over the per-event limit in ``mixed``."""


@executor(id="mixed")
async def mixed(count: int, ctx: WorkflowContext[None, int]) -> None:
    """Small items, with every 1,000th one over the batch size (300 KB) and every 2,500th over the limit."""
    for i in range(count):
        size = BIG if i % 2500 == 1 else 300_000 if i % 1000 == 2 else 0
        await ctx.add_event(StepProgressEvent(message=str(i), data="x" * size if size else None))
    await ctx.yield_output(count)


mixed_sizes = WorkflowBuilder(start_executor=mixed, name="it_live_mixed").build()


class Chatter(Executor):
    """Publishes ``count`` progress items in a tight loop (a few batches of live events), then asks before it
    answers: a twin's second call must read on from where the first stopped."""

    @handler
    async def chat(self, count: int, ctx: WorkflowContext) -> None:
        for i in range(count):
            await ctx.add_event(StepProgressEvent(message=str(i)))
        await ctx.request_info(f"say something after {count} items", str)

    @response_handler
    async def answered(self, asked: str, answer: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"heard {answer}")


chatty = WorkflowBuilder(start_executor=Chatter(id="chatter"), name="it_live_chatty").build()


def all_workflows() -> list[Workflow]:
    return [gated, retried, flooded, mixed_sizes, chatty]
