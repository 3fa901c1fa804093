"""LlamaIndex-style workflows the test worker hosts (see ``tests/conftest.py::hosted_workflows``).

Module-level, so the worker (this process, in the session fixtures) runs
their steps; effects are counted in ``EFFECTS`` by run, so a test can check
how often a side effect happened on Temporal.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from pydantic import BaseModel

from temporal_workflows._graph.hosting import as_graph_workflow
from temporal_workflows._graph.workflow import Workflow as GraphWorkflow
from temporal_workflows.llama import (
    Context,
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    StartEvent,
    StopEvent,
    Workflow,
    catch_error,
    step,
)
from temporal_workflows.llama.events import StepFailedEvent
from temporal_workflows.llama.retry_policy import retry_policy, stop_after_attempt, wait_fixed

EFFECTS: Counter[str] = Counter()
"""Side effects by ``"<run tag>:<what>"`` (the worker runs in the test process)."""

KEYS: dict[str, list[str]] = {}
"""Idempotency keys a step saw, by run tag."""


class Joke(Event):
    joke: str


class Progress(Event):
    msg: str


class LlamaJoke(Workflow):
    @step
    async def generate(self, ctx: Context, ev: StartEvent) -> Joke:
        ctx.write_event_to_stream(Progress(msg=f"thinking about {ev.topic}"))
        await ctx.store.set("topic", ev.topic)
        return Joke(joke=f"a joke about {ev.topic}")

    @step
    async def critique(self, ctx: Context, ev: Joke) -> StopEvent:
        return StopEvent(result=f"critique of {ev.joke} ({await ctx.store.get('topic')})")


class LlamaHITL(Workflow):
    @step
    async def step1(self, ev: StartEvent) -> InputRequiredEvent:
        return InputRequiredEvent(prefix="Enter a number: ")

    @step
    async def step2(self, ev: HumanResponseEvent) -> StopEvent:
        return StopEvent(result=ev.response)


class LlamaWaiter(Workflow):
    """Works, streams, writes and sends before it waits: what happens how often on a re-run."""

    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> Joke | StopEvent:
        tag = ev.tag
        EFFECTS[f"{tag}:before"] += 1
        KEYS.setdefault(tag, []).append(ctx.idempotency_key)
        n = await ctx.store.get("n", default=0)
        await ctx.store.set("n", n + 1)
        ctx.write_event_to_stream(Progress(msg="asking"))
        ctx.send_event(Joke(joke=tag))
        reply = await ctx.wait_for_event(
            HumanResponseEvent,
            waiter_event=InputRequiredEvent(prefix="name?"),
            requirements={"kind": "name"},
            timeout=600,
        )
        EFFECTS[f"{tag}:after"] += 1
        return StopEvent(result={"reply": reply.response, "n_read": n, "n_now": await ctx.store.get("n")})

    @step
    async def count_jokes(self, ctx: Context, ev: Joke) -> None:
        EFFECTS[f"{ev.joke}:jokes"] += 1


class Finding(Event):
    n: int


class LlamaFanOut(Workflow):
    @step
    async def plan(self, ctx: Context, ev: StartEvent) -> Finding | None:
        for i in range(ev.width):
            ctx.send_event(Finding(n=i))
        return None

    @step(num_workers=2)
    async def work(self, ev: Finding) -> Joke:
        await asyncio.sleep(0)
        return Joke(joke=str(ev.n * 10))

    @step
    async def gather(self, ctx: Context, ev: Joke) -> StopEvent | None:
        got = ctx.collect_events(ev, [Joke] * 3)
        return None if got is None else StopEvent(result=[j.joke for j in got])


class Verdict(BaseModel):
    score: int
    notes: list[str]


class Graded(StopEvent):
    verdict: Verdict


class LlamaCustomStop(Workflow):
    @step
    async def grade(self, ev: StartEvent) -> Graded:
        return Graded(verdict=Verdict(score=len(ev.text), notes=["short"]))


class LlamaBoom(Workflow):
    @step
    async def explode(self, ev: StartEvent) -> StopEvent:
        raise ValueError(f"cannot handle {ev.what!r}")


class LlamaWroteThenBroke(Workflow):
    """Writes two events to the stream, then fails (LlamaIndex's reader sees both, then the failure)."""

    @step
    async def go(self, ctx: Context, ev: StartEvent) -> StopEvent:
        ctx.write_event_to_stream(Progress(msg="first"))
        ctx.write_event_to_stream(Progress(msg="second"))
        raise ValueError("broke after writing")


class LlamaWroteThenRetried(Workflow):
    """Writes an event on every attempt; the first two attempts fail after it, the third succeeds."""

    @step(retry_policy=retry_policy(wait=wait_fixed(0.1), stop=stop_after_attempt(3)))
    async def go(self, ctx: Context, ev: StartEvent) -> StopEvent:
        attempt = ctx.retry_info().retry_number
        ctx.write_event_to_stream(Progress(msg=f"attempt {attempt}"))
        if attempt < 2:
            raise ConnectionError(f"attempt {attempt} failed")
        return StopEvent(result="done")


class LlamaFlaky(Workflow):
    @step(retry_policy=retry_policy(wait=wait_fixed(0.1), stop=stop_after_attempt(3)))
    async def flaky(self, ctx: Context, ev: StartEvent) -> StopEvent:
        EFFECTS[f"{ev.tag}:attempts"] += 1
        info = ctx.retry_info()
        if info.retry_number < 2:
            raise ConnectionError(f"attempt {info.retry_number} failed")
        return StopEvent(result={"retries": info.retry_number, "last": str(info.last_exception)})


class LlamaRescued(Workflow):
    @step(retry_policy=retry_policy(wait=wait_fixed(0), stop=stop_after_attempt(2)))
    async def fetch(self, ev: StartEvent) -> StopEvent:
        EFFECTS[f"{ev.tag}:attempts"] += 1
        raise ConnectionError("down")

    @catch_error
    async def on_failure(self, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result={"failed": ev.step_name, "error": str(ev.exception), "attempts": ev.attempts})


class Tally(BaseModel):
    count: int = 0


class Tick(Event):
    n: int


class LlamaCounter(Workflow):
    """Loops ``ev.n`` times, counting in typed state: long enough to continue as new on a short history."""

    @step
    async def tick(self, ctx: Context[Tally], ev: StartEvent | Tick) -> Tick | StopEvent:
        left = ev.n if isinstance(ev, Tick) else ev.get("n")
        async with ctx.store.edit_state() as tally:
            tally.count += 1
        if left <= 1:
            return StopEvent(result=(await ctx.store.get_state()).count)
        return Tick(n=left - 1)


class LlamaSlow(Workflow):
    @step
    async def slow(self, ev: StartEvent) -> StopEvent:
        await asyncio.sleep(60)
        return StopEvent(result="late")


SLOW = LlamaSlow(timeout=3)


class Reply(Event):
    text: str


class WaitsAfterWork(Workflow):
    """Works a while, then waits for a ``Reply``: one sent while it works is answered at the boundary."""

    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> StopEvent:
        ctx.write_event_to_stream(Progress(msg="working"))
        await asyncio.sleep(1.5)  # not synchronisation: work that is still going on when the Reply is sent
        reply = await ctx.wait_for_event(Reply, timeout=60)
        return StopEvent(result=reply.text)


WORKFLOWS: list[Any] = [
    LlamaJoke(),
    LlamaHITL(),
    LlamaWaiter(timeout=None),
    LlamaFanOut(),
    LlamaCustomStop(),
    LlamaBoom(),
    LlamaWroteThenBroke(),
    LlamaWroteThenRetried(),
    LlamaFlaky(),
    LlamaRescued(),
    LlamaCounter(timeout=300),
    SLOW,
    WaitsAfterWork(timeout=120),
]


def all_workflows() -> list[GraphWorkflow]:
    """The graphs the test worker hosts for these (and for the documented examples and conformance scenarios)."""
    from examples import llama_demo
    from tests import test_llama, test_llama_docs
    from tests.conformance import scenarios

    docs = [
        test_llama_docs.ReadmeWorkflow(),
        test_llama_docs.ConcurrentFlow(timeout=30),
        test_llama_docs.StreamingWorkflow(timeout=30),
        test_llama_docs.HumanInTheLoopWorkflow(timeout=None),
        test_llama_docs.WaitWorkflow(timeout=None),
        test_llama_docs.JokeFlow(timeout=60),
        test_llama.InternalWait(),
        *llama_demo.WORKFLOWS,
    ]
    llama = [*WORKFLOWS, *docs, *getattr(scenarios, "llama_workflows", list)()]
    return [as_graph_workflow(w) for w in llama]
