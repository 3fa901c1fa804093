"""LlamaIndex programs run side by side: here on this library (hosted by the test worker), and the very same
source on llama-index-workflows 2.26.1 itself (:func:`on_llamaindex`: the imports swapped, nothing else).

Each program is what a user's existing LlamaIndex code does; a test runs it on
LlamaIndex, in process and on Temporal, and compares what each prints.
"""

import asyncio
import sys
import types
from pathlib import Path

# -- imports (swapped for LlamaIndex's own by on_llamaindex) --
from temporal_workflows.llama import (
    Context,
    Event,
    InputRequiredEvent,
    StartEvent,
    StopEvent,
    Workflow,
    step,
)
from temporal_workflows.llama.retry_policy import retry_policy, stop_after_attempt, wait_fixed

# -- end of imports --

PEER_IMPORTS = """
from workflows import Context, Workflow, step
from workflows.events import Event, InputRequiredEvent, StartEvent, StopEvent
from workflows.retry_policy import retry_policy, stop_after_attempt, wait_fixed
"""


class Ping(Event):
    text: str


class Stray(Event):
    n: int


class UnhandledProbe(Workflow):
    """Waits for a ``Ping``; the test first sends a ``Stray`` nothing takes."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> StopEvent:
        ping = await ctx.wait_for_event(Ping, waiter_event=InputRequiredEvent(prefix="ping?"))
        return StopEvent(result=f"pong {ping.text}")


class FailsAfterRetries(Workflow):
    """A step that fails twice (its retry policy allows two attempts)."""

    @step(retry_policy=retry_policy(wait=wait_fixed(0.01), stop=stop_after_attempt(2)))
    async def explode(self, ev: StartEvent) -> StopEvent:
        raise ValueError(f"cannot handle {ev.what!r}")


class QuotaExceeded(Exception):
    """A program's own error class, which its caller catches by name."""


class Rejected(Exception):
    """An error class whose constructor does not take its message: it cannot be made again from one."""

    def __init__(self, code: int) -> None:
        super().__init__(f"rejected with code {code}")
        self.code = code


class OwnError(Workflow):
    """A step that raises the program's own exception class (``QuotaExceeded``, or ``Rejected`` if asked)."""

    @step
    async def call_model(self, ev: StartEvent) -> StopEvent:
        if ev.get("code") is not None:
            raise Rejected(int(ev.code))
        raise QuotaExceeded(f"quota exceeded for {ev.who!r}")


class StillRunning(Workflow):
    """A step that outlives the workflow's timeout."""

    @step
    async def crawl(self, ev: StartEvent) -> StopEvent:
        await asyncio.sleep(float(ev.seconds))
        return StopEvent(result="late")


FINISHED: list[str] = []
"""Queries whose step ran to its end (a cancelled loser never gets here)."""
CANCELLED: list[str] = []
"""Steps cancelled mid-way (a loser of a race)."""


class Query(Event):
    name: str
    delay: float


class Answer(Event):
    name: str


class FirstToFinish(Workflow):
    """N queries raced by one ``num_workers`` step; the first ``StopEvent`` returned is the result."""

    @step
    async def scatter(self, ctx: Context, ev: StartEvent) -> Query | None:
        for name, delay in ev.queries:
            ctx.send_event(Query(name=name, delay=delay))
        return None

    @step(num_workers=4)
    async def ask(self, ev: Query) -> StopEvent:
        await asyncio.sleep(ev.delay)  # a model call that takes this long
        FINISHED.append(ev.name)
        return StopEvent(result=ev.name)


class CollectInOrder(Workflow):
    """N answers of different durations collected by ``collect_events``: in the order they came."""

    @step
    async def scatter(self, ctx: Context, ev: StartEvent) -> Query | None:
        for name, delay in ev.queries:
            ctx.send_event(Query(name=name, delay=delay))
        return None

    @step(num_workers=4)
    async def work(self, ev: Query) -> Answer:
        await asyncio.sleep(ev.delay)
        return Answer(name=ev.name)

    @step
    async def join(self, ctx: Context, ev: Answer) -> StopEvent | None:
        got = ctx.collect_events(ev, [Answer] * 3)
        if got is None:
            return None
        return StopEvent(result=[a.name for a in got])


class AskSlow(Event):
    name: str
    delay: float


class AskFast(Event):
    name: str
    delay: float


class CollectAcrossSteps(Workflow):
    """Two different steps answer (the first started takes longer); ``collect_events`` gets the answers in the
    order they came, the fast one first."""

    @step
    async def scatter(self, ctx: Context, ev: StartEvent) -> AskSlow | AskFast | None:
        (slow_name, slow_delay), (fast_name, fast_delay) = ev.queries
        ctx.send_event(AskSlow(name=slow_name, delay=slow_delay))
        ctx.send_event(AskFast(name=fast_name, delay=fast_delay))
        return None

    @step
    async def slow(self, ev: AskSlow) -> Answer:
        await asyncio.sleep(ev.delay)
        return Answer(name=ev.name)

    @step
    async def fast(self, ev: AskFast) -> Answer:
        await asyncio.sleep(ev.delay)
        return Answer(name=ev.name)

    @step
    async def join(self, ctx: Context, ev: Answer) -> StopEvent | None:
        got = ctx.collect_events(ev, [Answer] * 2)
        if got is None:
            return None
        return StopEvent(result=[a.name for a in got])


class Tortoise(Event):
    tag: str


class Hare(Event):
    tag: str


class RaceOfSteps(Workflow):
    """Two steps racing in one superstep; the one started first finishes last."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Tortoise | Hare | None:
        ctx.send_event(Tortoise(tag=ev.tag))
        ctx.send_event(Hare(tag=ev.tag))
        return None

    @step
    async def tortoise(self, ev: Tortoise) -> StopEvent:
        try:
            await asyncio.sleep(30.0)  # a long model call
        except asyncio.CancelledError:
            CANCELLED.append(f"{ev.tag}-tortoise")
            raise
        FINISHED.append(f"{ev.tag}-tortoise")
        return StopEvent(result="tortoise")

    @step
    async def hare(self, ev: Hare) -> StopEvent:
        await asyncio.sleep(0.2)
        FINISHED.append(f"{ev.tag}-hare")
        return StopEvent(result="hare")


def all_workflows() -> list:  # type: ignore[type-arg]
    """The graphs the test worker hosts for these programs."""
    from temporal_workflows._graph.hosting import as_graph_workflow

    return [
        as_graph_workflow(w)
        for w in (
            UnhandledProbe(),
            FailsAfterRetries(),
            OwnError(),
            StillRunning(timeout=2),
            FirstToFinish(),
            CollectInOrder(),
            CollectAcrossSteps(),
            RaceOfSteps(),
        )
    ]


def on_llamaindex() -> types.ModuleType:
    """This module's programs on llama-index-workflows itself: the same source, LlamaIndex's imports."""
    name = f"{__name__}__llamaindex"
    found = sys.modules.get(name)
    if found is not None:
        return found
    source = Path(__file__).read_text()
    head, rest = source.split("# -- imports (swapped for LlamaIndex's own by on_llamaindex) --", 1)
    _, tail = rest.split("# -- end of imports --", 1)
    module = types.ModuleType(name)
    module.__file__ = __file__
    sys.modules[name] = module
    exec(compile(head + PEER_IMPORTS + tail, __file__, "exec"), module.__dict__)
    return module
