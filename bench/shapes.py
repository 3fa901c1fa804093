"""The benchmark shapes as graphs of this project (hosted on Temporal and run in process).

Every step does the trivial work its hand-written twin in :mod:`bench.baseline`
does (pass an ``int`` on, or a 1 KB string into state), so what differs
between the two is only what the integration adds: the engine, the envelopes,
the pinned topology and the per-step bookkeeping.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from datetime import timedelta

from temporal_workflows import Executor, ExecutorOptions, Workflow, WorkflowBuilder, WorkflowContext, handler

FANOUT_WIDTH = 10
"""Parallel steps per round of the fan-out shape."""
FANOUT_ROUNDS = 5
"""Rounds of the fan-out shape: start → ``FANOUT_WIDTH`` parallel steps → fan-in join, looped."""
FANOUT_STEPS = FANOUT_ROUNDS * (FANOUT_WIDTH + 2)
CHAIN_LENGTH = 20
GROWTH_SUPERSTEPS = 30
GROWTH_ITEM_BYTES = 1024
LOCAL_FANLOOP_WIDTH = 50
LOCAL_FANLOOP_ROUNDS = 20
LOCAL_FANLOOP_STEPS = LOCAL_FANLOOP_ROUNDS * (LOCAL_FANLOOP_WIDTH + 2)
LOCAL_CHAIN_LENGTH = 200


def growth_item(n: int) -> str:
    """The ``GROWTH_ITEM_BYTES``-character string step ``n`` appends (distinct per step, so nothing dedupes)."""
    head = f"item {n}: "
    return head + "x" * (GROWTH_ITEM_BYTES - len(head))


# -- fan-out / fan-in loop ---------------------------------------------------------


class Start(Executor):
    """Starts a round: its one message goes to every parallel step (fan-out edges)."""

    @handler
    async def start(self, round_: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(round_)


class Work(Executor):
    """One of the parallel steps: passes the round on to the join."""

    @handler
    async def work(self, round_: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(round_)


class Join(Executor):
    """The fan-in: starts the next round, or ends the run with the number of rounds done."""

    def __init__(self, id: str, rounds: int) -> None:
        super().__init__(id)
        self.rounds = rounds

    @handler
    async def join(self, rounds: list[int], ctx: WorkflowContext[int, int]) -> None:
        done = rounds[0] + 1
        if done < self.rounds:
            await ctx.send_message(done)
        else:
            await ctx.yield_output(done)


def fanout_loop(name: str, width: int, rounds: int) -> Workflow:
    """``start → width parallel steps → join``, with the join looping back to start ``rounds`` times."""
    start, join = Start("start"), Join("join", rounds)
    workers = [Work(f"w{i}") for i in range(width)]
    return (
        WorkflowBuilder(start_executor=start, name=name, max_iterations=3 * rounds + 1)
        .add_fan_out_edges(start, workers)
        .add_fan_in_edges(workers, join)
        .add_edge(join, start)
        .build()
    )


# -- chain -------------------------------------------------------------------------


class Link(Executor):
    """A chain link: passes the count on; the last link outputs it.

    With ``stateful`` it also commits a state write; without, it matches the
    hand-written chain (no state) for the Temporal comparison.
    """

    def __init__(self, id: str, last: bool, stateful: bool) -> None:
        super().__init__(id)
        self.last = last
        self.stateful = stateful

    @handler
    async def link(self, n: int, ctx: WorkflowContext[int, int]) -> None:
        if self.stateful:
            ctx.set_state("count", n + 1)
        if self.last:
            await ctx.yield_output(n + 1)
        else:
            await ctx.send_message(n + 1)


def chain(name: str, length: int, *, stateful: bool = False) -> Workflow:
    """``length`` executors in a line; with ``stateful`` each also commits a state write."""
    links: Sequence[Executor] = [Link(f"c{i}", last=i == length - 1, stateful=stateful) for i in range(length)]
    return WorkflowBuilder(start_executor=links[0], name=name, max_iterations=length + 1).add_chain(links).build()


# -- growth: state that grows by 1 KB per superstep -----------------------------------


class Grow(Executor):
    """Appends one 1 KB item to the ``items`` state list per superstep (an ``append`` reducer)."""

    def __init__(self, id: str, supersteps: int) -> None:
        super().__init__(id)
        self.supersteps = supersteps

    @handler
    async def grow(self, n: int, ctx: WorkflowContext[int, int]) -> None:
        ctx.set_state("items", [growth_item(n)])
        if n + 1 < self.supersteps:
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(n + 1)


def growth(name: str, supersteps: int) -> Workflow:
    grow = Grow("grow", supersteps)
    return (
        WorkflowBuilder(start_executor=grow, name=name, max_iterations=supersteps + 1)
        .add_edge(grow, grow)
        .add_state_reducer("items", "append")
        .build()
    )


# -- wide: one superstep of N parallel steps ---------------------------------------------


class Spread(Executor):
    """Sends ``n`` messages to one executor: ``n`` parallel steps in the next superstep."""

    @handler
    async def spread(self, n: int, ctx: WorkflowContext[int]) -> None:
        for i in range(n):
            await ctx.send_message(i)


class Leaf(Executor):
    """One of the N parallel steps: adds its index to ``total`` and 1 to ``count`` (``sum`` reducers)."""

    @handler
    async def leaf(self, i: int, ctx: WorkflowContext) -> None:
        ctx.set_state("total", i)
        ctx.set_state("count", 1)


def wide(name: str) -> Workflow:
    """``spread → N x leaf``: the width is the start message, so one graph serves 1,000 and 5,000.

    ``leaf`` takes its N messages side by side (``ExecutorOptions(concurrent=True)``); by default one
    sender's messages to one executor run one after another, in the order sent, as Agent Framework runs them.
    """
    spread, leaf = Spread("spread"), Leaf("leaf", options=ExecutorOptions(concurrent=True))
    return (
        WorkflowBuilder(start_executor=spread, name=name)
        .add_edge(spread, leaf)
        .add_state_reducer("total", "sum")
        .add_state_reducer("count", "sum")
        .build()
    )


# -- kill -9 recovery: one step that a worker about to be killed holds ------------------------

HOLD_ENV = "BENCH_HOLD_FIRST_ATTEMPTS"
"""Set to ``"1"`` in a worker process about to be killed: there, first attempts of held steps do not return."""
HOLD_SECONDS = 900.0
"""How long a held first attempt sleeps (its worker is killed long before)."""
SCALED_DOWN_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
"""``--quick``'s stand-in for the default heartbeat timeout (the full run uses the default itself)."""


def holding() -> bool:
    """Whether this process holds first attempts (``HOLD_ENV``)."""
    return os.environ.get(HOLD_ENV) == "1"


class Hold(Executor):
    """One step that outputs its message; in a worker about to be killed, its first attempt sleeps instead.

    It never calls ``ctx.heartbeat()``: with default options, what notices that
    its worker died is the step activity's own heartbeats.
    """

    @handler
    async def hold(self, n: int, ctx: WorkflowContext[None, int]) -> None:
        if ctx.attempt == 1 and holding():
            await asyncio.sleep(HOLD_SECONDS)
        await ctx.yield_output(n)


def held(name: str, options: ExecutorOptions) -> Workflow:
    return WorkflowBuilder(start_executor=Hold("hold", options=options), name=name).build()


# -- the graphs the benchmark worker hosts ------------------------------------------------

FANOUT = fanout_loop("bench_fanout", FANOUT_WIDTH, FANOUT_ROUNDS)
CHAIN = chain("bench_chain", CHAIN_LENGTH)
GROWTH = growth("bench_growth", GROWTH_SUPERSTEPS)
WIDE = wide("bench_wide")
HOSTED: tuple[Workflow, ...] = (FANOUT, CHAIN, GROWTH, WIDE)
KILL9 = held("bench_kill9", ExecutorOptions())
"""Hosted by the kill -9 stage's own worker processes (``bench.recovery``), with default options."""
KILL9_SCALED_DOWN = held("bench_kill9_quick", ExecutorOptions(heartbeat_timeout=SCALED_DOWN_HEARTBEAT_TIMEOUT))
"""``--quick``'s version: the same, with a 2 s heartbeat timeout."""
