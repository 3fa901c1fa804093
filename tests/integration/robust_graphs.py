"""Graphs of the second adversarial round (issue 23) that no other module holds, for both graph hosts.

- Step errors whose cause chain loops (``raise e from e``, contexts that point
  at each other) or runs thousands of links deep: the run must report the
  step's own error type and message, in process and on Temporal alike.
- Sub-workflows nested ``DEPTH`` levels deep under executor ids of
  ``LONG_ID`` characters, their children unnamed (named after their place, as
  Agent Framework ports are): every child workflow id stays within Temporal's
  limit.
- Committed state adding up past one payload: three steps writing 0.9 MB
  each, or three children waiting with 1.3 MB of state each (kept in the
  parent's state): the superstep that would commit it fails naming the keys.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Never

from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowExecutor,
    executor,
    handler,
    response_handler,
)

ONCE = ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1))

DEEP_CHAIN = 5_000
"""Links of the deepest cause chain raised: far past what the SDK's recursive failure conversion survives."""


def looping_error(kind: str) -> BaseException:
    """A step error whose cause chain loops (``"cause"``, ``"context"``) or is ``DEEP_CHAIN`` links deep."""
    if kind == "cause":
        e = ValueError("its own cause")
        e.__cause__ = e  # what `raise e from e` leaves
        return e
    if kind == "context":
        # The SDK follows an ApplicationError's context, and a plain error's cause.
        a, b = ApplicationError("a looping context"), ValueError("b")
        a.__context__, b.__cause__ = b, a
        return a
    top: BaseException = RuntimeError("the top of a deep chain")
    node = top
    for i in range(DEEP_CHAIN):
        cause = OSError(f"link {i}")
        node.__cause__ = cause
        node = cause
    return top


@executor(id="looping", options=ONCE)
async def looping(kind: str, ctx: WorkflowContext[Never, str]) -> None:
    raise looping_error(kind)


cause_cycles = WorkflowBuilder(start_executor=looping, name="robust_cause_cycles").build()


# -- sub-workflows nested deep under long executor ids -----------------------------------------

DEPTH = 5
LONG_ID = 250


@executor(id="leaf")
async def leaf(text: str, ctx: WorkflowContext[Never, str]) -> None:
    await ctx.yield_output(f"leaf:{text}")


@executor(id="lift")
async def lift(text: str, ctx: WorkflowContext[Never, str]) -> None:
    await ctx.yield_output(text)


def nesting_id(level: int) -> str:
    """The id of the sub-workflow executor at ``level`` (1: the root's), ``LONG_ID`` characters."""
    return f"level{level}-".ljust(LONG_ID, "x")


def build_deep() -> Workflow:
    """``DEPTH`` levels of sub-workflows; each level's output is its child's, and the innermost step's text."""
    graph = WorkflowBuilder(start_executor=leaf).build()
    for level in range(DEPTH, 0, -1):
        sub = WorkflowExecutor(graph, id=nesting_id(level))
        builder = WorkflowBuilder(start_executor=sub, name="robust_deep" if level == 1 else None)
        graph = builder.add_edge(sub, lift).build()
    return graph


def build_one_level() -> Workflow:
    """One sub-workflow: started under a workflow id long enough that its child's plain id would be too long."""
    sub = WorkflowExecutor(WorkflowBuilder(start_executor=leaf).build(), id="child")
    return WorkflowBuilder(start_executor=sub, name="robust_one_level").add_edge(sub, lift).build()


@executor(
    id="dozing",
    options=ExecutorOptions(heartbeat_timeout=timedelta(seconds=2), retry_policy=RetryPolicy(maximum_attempts=1)),
)
async def dozing(text: str, ctx: WorkflowContext[Never, str]) -> None:
    await asyncio.sleep(120)  # not synchronisation: a grandchild's step still running when the root is terminated
    await ctx.yield_output(text)


def build_dozing() -> Workflow:
    """A root whose child runs a grandchild whose step takes minutes: to terminate the root mid-way."""
    inner = WorkflowExecutor(WorkflowBuilder(start_executor=dozing).build(), id="inner")
    outer = WorkflowExecutor(WorkflowBuilder(start_executor=inner).add_edge(inner, lift).build(), id="outer")
    return WorkflowBuilder(start_executor=outer, name="robust_dozing").add_edge(outer, lift).build()


# -- committed state adding up past one payload (item 3) -----------------------------------------

LARGE = 900_000
"""Characters of each large open request: three of them add up past the payload limit, two do not."""

LARGE_STATE = 1_800_000
"""Characters of each large state value: each fits in one payload, five add up past the committed state's
limit (``STATE_PAYLOADS`` payloads), four do not."""

STATE_KEYS = "abcde"


def _writer(key: str, *, last: bool = False) -> Any:
    @executor(id=f"write_{key}")
    async def write(n: int, ctx: WorkflowContext[int, str]) -> None:
        ctx.set_state(key, key * (LARGE_STATE if STATE_KEYS.index(key) < n else 10))
        if last:
            await ctx.yield_output(f"wrote {sorted(k for k in STATE_KEYS if ctx.get_state(k) is not None)}")
        else:
            await ctx.send_message(n)

    return write


def build_large_state() -> Workflow:
    """Five steps in a row each write a state value: the first ``n`` (the message) ``LARGE_STATE``, the
    others small."""
    writers = [_writer(k, last=k == STATE_KEYS[-1]) for k in STATE_KEYS]
    return WorkflowBuilder(start_executor=writers[0], name="robust_large_state").add_chain(writers).build()


class Hoarder(Executor):
    """A child that keeps a large value in its own state, then waits for a human."""

    @handler
    async def hoard(self, n: int, ctx: WorkflowContext) -> None:
        ctx.set_state("hoard", "h" * 1_300_000)
        await ctx.request_info(f"keep hoarding #{n}?", str)

    @response_handler
    async def answered(self, question: str, answer: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(answer)


@executor(id="fan")
async def fan(n: int, ctx: WorkflowContext[int]) -> None:
    for i in range(n):
        await ctx.send_message(i)


def build_hoarding_children() -> Workflow:
    """``n`` children that each wait for a human with 1.3 MB of state: the parent keeps each in its state
    (seven add up past the committed state's limit, six do not)."""
    hoarders = WorkflowExecutor(WorkflowBuilder(start_executor=Hoarder("hoarder")).build(), id="hoarders")
    return (
        WorkflowBuilder(start_executor=fan, name="robust_hoarding")
        .add_edge(fan, hoarders)
        .add_edge(hoarders, lift)
        .build()
    )


class Asker(Executor):
    """Asks a human about a large document (each request fits in a payload; three together do not)."""

    @handler
    async def ask(self, n: int, ctx: WorkflowContext) -> None:
        await ctx.request_info({"n": n, "document": "d" * LARGE}, str)

    @response_handler
    async def answered(self, question: dict[str, Any], answer: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{question['n']}: {answer}")


def build_large_requests() -> Workflow:
    """``n`` open requests of ``LARGE`` characters each at once."""
    askers = Asker("asker")
    return WorkflowBuilder(start_executor=fan, name="robust_large_requests").add_edge(fan, askers).build()


deep = build_deep()
one_level = build_one_level()
dozing_tree = build_dozing()
large_state = build_large_state()
hoarding = build_hoarding_children()
large_requests = build_large_requests()


def all_workflows() -> list[Workflow]:
    return [cause_cycles, deep, one_level, dozing_tree, large_state, hoarding, large_requests]
