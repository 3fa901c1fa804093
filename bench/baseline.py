"""Hand-written Temporal workflows running the same shapes with the same trivial activities.

Idiomatic Temporal Python: one ``@activity.defn`` per kind of step,
``workflow.execute_activity`` with the same timeout and retry policy the
integration uses by default, ``asyncio.gather`` for parallel steps and a
sliding window (``asyncio.Semaphore``) to stay under Temporal's limit of 2,000
pending activities per execution. They run on the same worker, client and
pydantic data converter as the graphs, so the comparison isolates what the
integration adds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from bench.shapes import HOLD_SECONDS, growth_item, holding

# The integration's default timeout and retry policy (ExecutorOptions, DEFAULT_RETRY_POLICY), so both sides ask
# Temporal for the same thing. Not its heartbeat timeout: the integration's step activity heartbeats by itself,
# idiomatic hand-written activities do not (and a heartbeat timeout without heartbeats fails every longer one).
_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3),
}

WIDE_WINDOW = 1000
"""Activities in flight at once in the wide shape: well under Temporal's 2,000 pending-activity limit."""


@activity.defn(name="bench_base.start")
async def start_step(round_: int) -> int:
    return round_


@activity.defn(name="bench_base.work")
async def work_step(round_: int) -> int:
    return round_


@activity.defn(name="bench_base.join")
async def join_step(rounds: list[int]) -> int:
    return rounds[0] + 1


@activity.defn(name="bench_base.link")
async def link_step(n: int) -> int:
    return n + 1


@activity.defn(name="bench_base.grow")
async def grow_step(n: int) -> str:
    return growth_item(n)


@activity.defn(name="bench_base.leaf")
async def leaf_step(i: int) -> int:
    return i


@activity.defn(name="bench_base.hold")
async def hold_step(n: int) -> int:
    """Returns ``n``; in a worker about to be killed, its first attempt sleeps instead (it does not heartbeat)."""
    if activity.info().attempt == 1 and holding():
        await asyncio.sleep(HOLD_SECONDS)
    return n


@workflow.defn(name="bench_base_fanout")
class FanoutBaseline:
    """``start → width parallel steps → join``, ``rounds`` times."""

    @workflow.run
    async def run(self, width: int, rounds: int) -> int:
        done = 0
        while done < rounds:
            r = await workflow.execute_activity(start_step, done, **_OPTIONS)
            parts = await asyncio.gather(*(workflow.execute_activity(work_step, r, **_OPTIONS) for _ in range(width)))
            done = await workflow.execute_activity(join_step, list(parts), **_OPTIONS)
        return done


@workflow.defn(name="bench_base_chain")
class ChainBaseline:
    """``length`` activities one after another, each passing a count on."""

    @workflow.run
    async def run(self, length: int) -> int:
        n = 0
        for _ in range(length):
            n = await workflow.execute_activity(link_step, n, **_OPTIONS)
        return n


@workflow.defn(name="bench_base_growth")
class GrowthBaseline:
    """Keeps a list in workflow memory and appends each activity's 1 KB item to it."""

    @workflow.run
    async def run(self, supersteps: int) -> int:
        items: list[str] = []
        for n in range(supersteps):
            items.append(await workflow.execute_activity(grow_step, n, **_OPTIONS))
        return len(items)


@workflow.defn(name="bench_base_wide")
class WideBaseline:
    """``n`` parallel activities, at most ``window_size`` in flight; returns the sum of their results."""

    @workflow.run
    async def run(self, n: int, window_size: int = WIDE_WINDOW) -> int:
        window = asyncio.Semaphore(window_size)

        async def one(i: int) -> int:
            async with window:
                result: int = await workflow.execute_activity(leaf_step, i, **_OPTIONS)
                return result

        return sum(await asyncio.gather(*(one(i) for i in range(n))))


@workflow.defn(name="bench_base_kill9")
class Kill9Baseline:
    """One activity with the same options as every other here (``start_to_close_seconds`` scales it down)."""

    @workflow.run
    async def run(self, n: int, start_to_close_seconds: float | None = None) -> int:
        options = dict(_OPTIONS)
        if start_to_close_seconds is not None:
            options["start_to_close_timeout"] = timedelta(seconds=start_to_close_seconds)
        result: int = await workflow.execute_activity(hold_step, n, **options)
        return result


WORKFLOWS: list[type] = [FanoutBaseline, ChainBaseline, GrowthBaseline, WideBaseline]
ACTIVITIES: list[Callable[..., Any]] = [start_step, work_step, join_step, link_step, grow_step, leaf_step]
RECOVERY_WORKFLOWS: list[type] = [Kill9Baseline]
"""Hosted only by the kill -9 stage's own worker processes (``bench.recovery``)."""
RECOVERY_ACTIVITIES: list[Callable[..., Any]] = [hold_step]
