"""The graphs the fleet benchmark (:mod:`bench.fleet`) runs on worker processes of its own.

Hosted as users host graphs: ``temporal-workflows worker --workflow bench.fleet_graphs:fanout ...``. Every
step awaits ``delay`` seconds (I/O-bound work: a model or API call) and does what makes a wrong or doubled
effect visible in the run's result:

* ``fanout``: ``start → WIDTH parallel work steps → join``; each work step appends its id to the
  ``done`` state key (``append`` reducer), the join yields the committed list: a step's effect counted
  twice shows as a duplicate, a lost one as a gap.
* ``human``: a step asks a person (``request_info``), the answer comes back to its response handler,
  which appends it to state and yields it with the state.
* ``stream``: one step publishes ``LIVE_ITEMS`` live progress events while it runs (a reader follows
  them), then yields how many it published.
* ``versioned_v1`` / ``versioned_v2``: one graph name, two shapes (v2 adds a step), for a versioned
  rollout: each yields which version ran it.

Their executors heartbeat every third of ``HEARTBEAT`` (``ExecutorOptions.heartbeat_timeout``), so a
worker killed mid-step is noticed within it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)
from temporal_workflows._live import StepProgressEvent

__all__ = [
    "FANOUT_WIDTH",
    "HEARTBEAT",
    "LIVE_ITEMS",
    "Answer",
    "Job",
    "fanout",
    "human",
    "stream",
    "versioned_v1",
    "versioned_v2",
    "wide",
    "wide_quick",
]

HEARTBEAT = timedelta(seconds=5)
"""Every step's heartbeat timeout: how soon a step on a killed worker is retried elsewhere."""
FANOUT_WIDTH = 10
"""Parallel work steps of one ``fanout`` run."""
WIDE_WIDTH = 200
"""Parallel steps of the ``wide`` graph (the spread measurement); ``wide_quick`` has ``WIDE_QUICK_WIDTH``."""
WIDE_QUICK_WIDTH = 40
LIVE_ITEMS = 20
"""Live events one ``stream`` step publishes."""

_OPTIONS = ExecutorOptions(heartbeat_timeout=HEARTBEAT)


class Job(BaseModel):
    """A run's input: its id (echoed in its result) and how long each step awaits."""

    id: str
    delay: float = 0.5


class Start(Executor):
    @handler
    async def start(self, job: Job, ctx: WorkflowContext[Job]) -> None:
        await asyncio.sleep(job.delay)
        await ctx.send_message(job)


class Work(Executor):
    @handler
    async def work(self, job: Job, ctx: WorkflowContext[Job]) -> None:
        await asyncio.sleep(job.delay)
        ctx.set_state("done", [self.id])  # "append": the superstep's writes are combined at its commit
        await ctx.send_message(job)


class Join(Executor):
    @handler
    async def join(self, jobs: list[Job], ctx: WorkflowContext[Job, dict[str, object]]) -> None:
        await asyncio.sleep(jobs[0].delay)
        await ctx.yield_output({"id": jobs[0].id, "done": sorted(ctx.get_state("done", []))})


def _fanout(name: str, width: int) -> Workflow:
    start, join = Start("start", options=_OPTIONS), Join("join", options=_OPTIONS)
    workers = [Work(f"w{i}", options=_OPTIONS) for i in range(width)]
    return (
        WorkflowBuilder(start_executor=start, name=name)
        .add_fan_out_edges(start, workers)
        .add_fan_in_edges(workers, join)
        .add_state_reducer("done", "append")
        .build()
    )


fanout = _fanout("fleet_fanout", FANOUT_WIDTH)
wide = _fanout("fleet_wide", WIDE_WIDTH)
wide_quick = _fanout("fleet_wide_quick", WIDE_QUICK_WIDTH)


class Question(BaseModel):
    id: str


class Answer(BaseModel):
    text: str


class Ask(Executor):
    @handler
    async def ask(self, job: Job, ctx: WorkflowContext[Job]) -> None:
        await asyncio.sleep(job.delay)
        await ctx.request_info(Question(id=job.id), Answer)

    @response_handler
    async def answered(self, question: Question, answer: Answer, ctx: WorkflowContext[Job, dict[str, object]]) -> None:
        ctx.set_state("answers", [answer.text])
        await ctx.yield_output({"id": question.id, "answer": answer.text, "answers": ctx.get_state("answers", [])})


human = (
    WorkflowBuilder(start_executor=Ask("ask", options=_OPTIONS), name="fleet_human")
    .add_state_reducer("answers", "append")
    .build()
)


class Streamer(Executor):
    @handler
    async def stream(self, job: Job, ctx: WorkflowContext[Job, dict[str, object]]) -> None:
        for i in range(1, LIVE_ITEMS + 1):
            await ctx.add_event(StepProgressEvent(message=f"{job.id} part {i}", progress=i / LIVE_ITEMS))
            await asyncio.sleep(job.delay / 4)
        await ctx.yield_output({"id": job.id, "parts": LIVE_ITEMS})


stream = WorkflowBuilder(start_executor=Streamer("streamer", options=_OPTIONS), name="fleet_stream").build()


class Version(Executor):
    def __init__(self, id: str, version: str) -> None:
        super().__init__(id, options=_OPTIONS)
        self.version = version

    @handler
    async def ask(self, job: Job, ctx: WorkflowContext[Job]) -> None:
        await ctx.request_info(Question(id=job.id), Answer)

    @response_handler
    async def answered(self, question: Question, answer: Answer, ctx: WorkflowContext[Job, dict[str, object]]) -> None:
        await ctx.send_message(Job(id=question.id))


class Report(Executor):
    def __init__(self, id: str, version: str) -> None:
        super().__init__(id, options=_OPTIONS)
        self.version = version

    @handler
    async def report(self, job: Job, ctx: WorkflowContext[Job, dict[str, object]]) -> None:
        await ctx.yield_output({"id": job.id, "version": self.version})


def _versioned(version: str) -> Workflow:
    ask, report = Version("ask", version), Report("report", version)
    builder = WorkflowBuilder(start_executor=ask, name="fleet_versioned")
    if version == "v1":
        return builder.add_edge(ask, report).build()
    check = Report("check", version)  # v2 adds a step: another shape, another signature
    return builder.add_edge(ask, check).add_edge(ask, report).build()


versioned_v1 = _versioned("v1")
versioned_v2 = _versioned("v2")
