"""Graphs for the newcomer tests (tests/integration/test_newcomer.py), hosted by the session worker."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from temporal_workflows import ExecutorOptions, Workflow, WorkflowBuilder, WorkflowContext, executor

SLOW_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=1.0, maximum_attempts=3)
"""Long enough between attempts for a watcher polling once a second to see the retry scheduled."""


@executor(id="shaky", options=ExecutorOptions(retry_policy=SLOW_RETRY))
async def shaky(text: str, ctx: WorkflowContext[None, str]) -> None:
    if ctx.attempt == 1:
        raise ConnectionError("the model API timed out")
    await ctx.yield_output(f"{text} (attempt {ctx.attempt})")


retry_once = WorkflowBuilder(start_executor=shaky, name="nc_retry_once").build()


@executor(id="broken", options=ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1)))
async def broken(text: str, ctx: WorkflowContext[None, str]) -> None:
    raise ValueError("no such city")


fails = WorkflowBuilder(start_executor=broken, name="nc_fails").build()


def all_workflows() -> list[Workflow]:
    return [retry_once, fails]
