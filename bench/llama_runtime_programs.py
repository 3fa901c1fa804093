# mypy: disable-error-code="untyped-decorator,no-any-return"
"""The programs ``bench.llama_runtime`` measures, each written twice: for LlamaIndex (``workflows``), and as
hand-written Temporal code running the same steps with the same concurrency limits.

* chain: ``start`` then ``tick`` one after another, :data:`CHAIN_LENGTH` step invocations in all.
* fan-out: ``scatter`` sends :data:`FAN_WIDTH` items; ``work`` (``num_workers=8``) handles each; ``join``
  (LlamaIndex's default ``num_workers``, 4) takes each result and ``collect_events`` fans them in.

The hand-written versions call one activity per step invocation: ``scatter`` once, ``work`` for each item
(at most 8 at once), ``join`` for each result (at most 4 at once), ``start`` and ``tick`` one after another;
with ``local=True`` each as a local activity instead (what ``TemporalRuntime`` does for steps it has seen to
be short).
LlamaIndex's loop may also rerun a ``join`` whose buffer went stale (its own semantics, on every runtime);
hand-written code has no such buffer, so it never does: the bench reports the join's invocations on each.

Every step invocation records itself (:func:`ran`): a key that names the work (the run, the step, the item),
so an invocation run twice in a run with no failure is counted, on every runtime, by the steps themselves.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent

__all__ = [
    "CHAIN_LENGTH",
    "FAN_JOIN_WORKERS",
    "FAN_WIDTH",
    "FAN_WORK_WORKERS",
    "HAND_ACTIVITIES",
    "HAND_WORKFLOWS",
    "Chain",
    "Fan",
    "counts",
    "ran",
    "reset_counts",
]

CHAIN_LENGTH = 20
FAN_WIDTH = 50
FAN_WORK_WORKERS = 8
FAN_JOIN_WORKERS = 4
"""LlamaIndex's default ``num_workers`` (the bench's join does not set it)."""

_lock = threading.Lock()
_ran: collections.Counter[tuple[str, ...]] = collections.Counter()


def ran(*key: str) -> None:
    """Record one step invocation doing the work ``key`` names."""
    with _lock:
        _ran[key] += 1


def reset_counts() -> None:
    with _lock:
        _ran.clear()


def counts() -> collections.Counter[tuple[str, ...]]:
    with _lock:
        return collections.Counter(_ran)


# -- LlamaIndex ---------------------------------------------------------------------------------------------


class Tick(Event):
    n: int
    run: str


class Item(Event):
    n: int
    run: str


class Done(Event):
    n: int
    run: str


class Chain(Workflow):
    """``start`` then ``tick`` until :data:`CHAIN_LENGTH` invocations ran."""

    @step
    async def start(self, ev: StartEvent) -> Tick:
        ran(ev.run, "start")
        return Tick(n=1, run=ev.run)

    @step
    async def tick(self, ev: Tick) -> Tick | StopEvent:
        ran(ev.run, "tick", str(ev.n))
        if ev.n >= CHAIN_LENGTH - 1:
            return StopEvent(result=ev.n + 1)
        return Tick(n=ev.n + 1, run=ev.run)


class Fan(Workflow):
    """``scatter`` sends :data:`FAN_WIDTH` items, ``work`` handles them 8 at a time, ``collect_events`` joins."""

    @step
    async def scatter(self, ctx: Context, ev: StartEvent) -> Item | None:
        ran(ev.run, "scatter")
        for n in range(FAN_WIDTH):
            ctx.send_event(Item(n=n, run=ev.run))
        return None

    @step(num_workers=FAN_WORK_WORKERS)
    async def work(self, ev: Item) -> Done:
        ran(ev.run, "work", str(ev.n))
        return Done(n=ev.n, run=ev.run)

    @step
    async def join(self, ctx: Context, ev: Done) -> StopEvent | None:
        ran(ev.run, "join-invocation")  # a rerun of a stale collect_events is LlamaIndex's own: counted apart
        got = ctx.collect_events(ev, [Done] * FAN_WIDTH)
        if got is None:
            return None
        return StopEvent(result=len(got))


# -- hand-written Temporal ----------------------------------------------------------------------------------

_OPTIONS: dict[str, Any] = {
    # What TemporalRuntime asks for its step activities (StepOptions' defaults), without the heartbeat
    # timeout: idiomatic hand-written activities do not heartbeat.
    "start_to_close_timeout": timedelta(hours=1),
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1)),
}


@activity.defn(name="bench_llama_hand.start")
async def hand_start(run: str) -> int:
    ran(run, "start")
    return 1


@activity.defn(name="bench_llama_hand.tick")
async def hand_tick(run: str, n: int) -> int:
    ran(run, "tick", str(n))
    return n + 1


@activity.defn(name="bench_llama_hand.scatter")
async def hand_scatter(run: str) -> list[int]:
    ran(run, "scatter")
    return list(range(FAN_WIDTH))


@activity.defn(name="bench_llama_hand.work")
async def hand_work(run: str, n: int) -> int:
    ran(run, "work", str(n))
    return n


@activity.defn(name="bench_llama_hand.join")
async def hand_join(run: str, n: int, collected: int) -> int | None:
    ran(run, "join-invocation")
    return collected if collected >= FAN_WIDTH else None


async def _call(local: bool, fn: Any, *args: Any) -> Any:
    """One step as an activity, or (``local``) as a local activity, with the runtime's options."""
    if local:
        return await workflow.execute_local_activity(fn, args=list(args), **_OPTIONS)
    return await workflow.execute_activity(fn, args=list(args), **_OPTIONS)


@workflow.defn(name="bench_llama_hand_chain")
class HandChain:
    """The chain: ``start``, then ``tick`` one after another."""

    @workflow.run
    async def run(self, run: str, local: bool = False) -> int:
        n: int = await _call(local, hand_start, run)
        while True:
            n = await _call(local, hand_tick, run, n)
            if n >= CHAIN_LENGTH:
                return n


@workflow.defn(name="bench_llama_hand_fan")
class HandFan:
    """The fan-out: ``scatter``; ``work`` for each item, 8 at once; ``join`` for each result, 4 at once."""

    @workflow.run
    async def run(self, run: str, local: bool = False) -> int:
        items: list[int] = await _call(local, hand_scatter, run)
        workers = asyncio.Semaphore(FAN_WORK_WORKERS)
        joiners = asyncio.Semaphore(FAN_JOIN_WORKERS)
        collected: list[int] = []
        result: list[int] = []

        async def one(n: int) -> None:
            async with workers:
                done: int = await _call(local, hand_work, run, n)
            async with joiners:
                collected.append(done)
                out = await _call(local, hand_join, run, done, len(collected))
            if out is not None:
                result.append(out)

        await asyncio.gather(*(one(n) for n in items))
        return result[0]


HAND_WORKFLOWS: list[type] = [HandChain, HandFan]
HAND_ACTIVITIES: list[Any] = [hand_start, hand_tick, hand_scatter, hand_work, hand_join]
