"""The in-process shapes of :mod:`bench.shapes` written for Agent Framework 1.23's own runner.

Same graphs, same trivial work per step (pass an ``int`` on; the chain also
writes one state key), built with ``agent_framework``'s ``WorkflowBuilder`` and
run by its in-process runner, so :mod:`bench.local` can put the two side by
side. Importing this module needs ``agent-framework-core`` (the ``agents``
extra); :data:`AVAILABLE` says whether it is installed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AVAILABLE", "chain", "fanout_loop"]

try:
    from agent_framework import Executor, WorkflowBuilder, WorkflowContext, handler
except ImportError:  # pragma: no cover - the agents extra is not installed
    AVAILABLE = False
else:
    AVAILABLE = True

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

    class Link(Executor):
        """A chain link: writes state, passes the count on; the last link outputs it."""

        def __init__(self, id: str, last: bool) -> None:
            super().__init__(id)
            self.last = last

        @handler
        async def link(self, n: int, ctx: WorkflowContext[int, int]) -> None:
            ctx.set_state("count", n + 1)
            if self.last:
                await ctx.yield_output(n + 1)
            else:
                await ctx.send_message(n + 1)


def fanout_loop(name: str, width: int, rounds: int) -> Any:
    """Agent Framework's ``start → width parallel steps → join`` looped ``rounds`` times (as ``shapes.fanout_loop``)."""
    start, join = Start("start"), Join("join", rounds)
    workers = [Work(f"w{i}") for i in range(width)]
    return (
        WorkflowBuilder(start_executor=start, name=name, max_iterations=3 * rounds + 1)
        .add_fan_out_edges(start, workers)
        .add_fan_in_edges(workers, join)
        .add_edge(join, start)
        .build()
    )


def chain(name: str, length: int) -> Any:
    """Agent Framework's ``length`` links in a line, each writing state (as ``shapes.chain(stateful=True)``)."""
    links = [Link(f"c{i}", last=i == length - 1) for i in range(length)]
    return WorkflowBuilder(start_executor=links[0], name=name, max_iterations=length + 1).add_chain(links).build()
