"""Graphs hosted by the integration-test worker: the examples plus failure cases."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    HistoryCheckpointStorage,
    InMemoryCheckpointStorage,
    RequestTimedOut,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.errors import CheckpointStorageError

FAST_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=3)

# -- state conflict: two parallel steps write one key without a reducer ------------


@executor(id="split")
async def split(msg: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(msg)


class Writer(Executor):
    @handler
    async def write(self, msg: str, ctx: WorkflowContext) -> None:
        ctx.set_state("owner", self.id)


conflict = (
    WorkflowBuilder(start_executor=split, name="it_conflict")
    .add_fan_out_edges(split, [Writer("left"), Writer("right")])
    .build()
)

# -- superstep limit: a loop with no exit ------------------------------------------


@executor(id="spin")
async def spin(n: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(n + 1)


endless = WorkflowBuilder(start_executor=spin, name="it_endless", max_iterations=5).add_edge(spin, spin).build()

# -- undeliverable: the target does not accept what is sent ---------------------------


@executor(id="talker", options=ExecutorOptions(retry_policy=FAST_RETRY))
async def talker(msg: str, ctx: WorkflowContext) -> None:
    await ctx.send_message(len(msg))  # an int; "listener" only takes str


@executor(id="listener")
async def listener(msg: str, ctx: WorkflowContext) -> None:
    await ctx.yield_output(msg)


undeliverable = WorkflowBuilder(start_executor=talker, name="it_undeliverable").add_edge(talker, listener).build()

# -- a handler's non-retryable error ---------------------------------------------------


@executor(id="refuse")
async def refuse(msg: str, ctx: WorkflowContext) -> None:
    raise ApplicationError(f"cannot process {msg!r}", type="Refused", non_retryable=True)


fatal = WorkflowBuilder(start_executor=refuse, name="it_fatal").build()

# -- a flaky step: fails on its first attempt, records its idempotency key -------------

SIDE_EFFECTS: dict[str, list[tuple[int, str]]] = {}


@executor(id="flaky", options=ExecutorOptions(retry_policy=FAST_RETRY))
async def flaky(run: str, ctx: WorkflowContext[None, str]) -> None:
    SIDE_EFFECTS.setdefault(run, []).append((ctx.attempt, ctx.idempotency_key))
    if ctx.attempt == 1:
        raise RuntimeError("transient failure")
    await ctx.yield_output(ctx.idempotency_key)


flaky_graph = WorkflowBuilder(start_executor=flaky, name="it_flaky").build()

# -- big state: 1 MB written once, read by every later step ---------------------------


class Blob(BaseModel):
    size: int
    steps: int


@executor(id="fill")
async def fill(b: Blob, ctx: WorkflowContext[Blob]) -> None:
    ctx.set_state("blob", "x" * b.size)
    await ctx.send_message(b)


@executor(id="read")
async def read(b: Blob, ctx: WorkflowContext[Blob, int]) -> None:
    seen = len(ctx.get_state("blob"))
    count = ctx.get_state("reads", 0) + 1
    ctx.set_state("reads", count)
    if count < b.steps:
        await ctx.send_message(b)
    else:
        await ctx.yield_output(seen)


big_state = WorkflowBuilder(start_executor=fill, name="it_big_state").add_edge(fill, read).add_edge(read, read).build()


# -- human input: two requests at once, answered independently -------------------


class Question(BaseModel):
    asker: str
    text: str


class Answer(BaseModel):
    text: str


@executor(id="fan")
async def fan(topic: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(topic)


class Asker(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(asker=self.id, text=f"{self.id}: what about {topic}?"), Answer)

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"{self.id}={a.text}")


@executor(id="join")
async def join(answers: list[str], ctx: WorkflowContext[None, list[str]]) -> None:
    await ctx.yield_output(answers)


askers = [Asker("alice"), Asker("bob")]
two_questions = (
    WorkflowBuilder(start_executor=fan, name="it_two_questions")
    .add_fan_out_edges(fan, askers)
    .add_fan_in_edges(askers, join)
    .build()
)

# -- human input with deadlines ------------------------------------------------


class Approval(BaseModel):
    approved: bool


class Deadline(BaseModel):
    seconds: float
    on_timeout: str = "respond"


class Gate(Executor):
    @handler
    async def ask(self, d: Deadline, ctx: WorkflowContext) -> None:
        await ctx.request_info(
            Question(asker=self.id, text="approve?"), Approval, timeout=d.seconds, on_timeout=d.on_timeout
        )  # type: ignore[arg-type]

    @response_handler
    async def decided(self, q: Question, a: Approval | RequestTimedOut, ctx: WorkflowContext[None, str]) -> None:
        if isinstance(a, RequestTimedOut):
            await ctx.yield_output(f"timed out after {a.timeout:g}s")
        else:
            await ctx.yield_output("approved" if a.approved else "rejected")


timed = WorkflowBuilder(start_executor=Gate("gate"), name="it_timed").build()

# -- keep-alive conversation --------------------------------------------------


@executor(id="chat")
async def chat(text: str, ctx: WorkflowContext[None, str]) -> None:
    turns = ctx.get_state("turns", 0) + 1
    ctx.set_state("turns", turns)
    await ctx.add_event(Note(text=f"turn {turns}"))
    await ctx.yield_output(f"#{turns}: {text.upper()}")


class Note(WorkflowEvent):
    type: str = "note"
    text: str


conversation = WorkflowBuilder(start_executor=chat, name="it_chat").build()


# -- checkpoints, reset, fork and long runs --------------------------------------------


class Count(BaseModel):
    n: int
    upto: int


@dataclass
class Hold:
    """Holds the step of ``round`` until ``release`` is set (the test drives it; no sleeps)."""

    round: int
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


HOLDS: dict[str, Hold] = {}
"""Workflow id → the round whose step waits for the test."""
EFFECTS: dict[str, list[str]] = defaultdict(list)
"""Workflow id → idempotency keys of every step that completed (a side-effect log)."""


@executor(id="tick")
async def tick(c: Count, ctx: WorkflowContext[Count, dict[str, int]]) -> None:
    hold = HOLDS.get(ctx.run_id)
    if hold is not None and c.n == hold.round:
        hold.reached.set()
        await hold.release.wait()
    EFFECTS[ctx.run_id].append(ctx.idempotency_key)
    ctx.set_state("total", c.n)
    ctx.set_state("count", 1)
    if c.n >= c.upto:
        await ctx.yield_output({"rounds": c.n})
    else:
        await ctx.send_message(Count(n=c.n + 1, upto=c.upto))


def _ticker(name: str, **kwargs: Any) -> Workflow:
    return (
        WorkflowBuilder(start_executor=tick, name=name, max_iterations=5000, **kwargs)
        .add_edge(tick, tick)
        .add_state_reducer("total", "sum")
        .add_state_reducer("count", "sum")
        .build()
    )


ticker = _ticker("it_ticker")
"""A loop of ``upto`` supersteps; checkpoints go to the worker's default (SQLite) store."""

history_ticker = _ticker("it_history_ticker", checkpoint_storage=HistoryCheckpointStorage(keep=2), checkpoint_every=0)
"""The same loop with checkpoints kept in the run itself."""


class FailingStorage(InMemoryCheckpointStorage):
    """A store whose disk is full."""

    async def save(self, checkpoint: Any) -> str:
        raise CheckpointStorageError(f"disk full while writing {checkpoint.checkpoint_id}")


@executor(id="collect")
async def collect(text: str, ctx: WorkflowContext[None, str]) -> None:
    ctx.set_state("received", [text])
    ctx.set_state("count", 1)
    await ctx.yield_output(text.upper())


collector = (
    WorkflowBuilder(start_executor=collect, name="it_collector")
    .add_state_reducer("received", "append")
    .add_state_reducer("count", "sum")
    .build()
)
"""Takes any number of messages per superstep (a burst runs as parallel tasks)."""

failing_ticker = _ticker("it_failing_ticker", checkpoint_storage=FailingStorage(), checkpoint_every=0)

shared_store = InMemoryCheckpointStorage()
"""Lets a test plant a checkpoint (e.g. one taken under another graph version)."""
planted_ticker = _ticker("it_planted_ticker", checkpoint_storage=shared_store, checkpoint_every=0)


# -- an answer that arrives while another branch's step runs ------------------------------------------


class Draft(BaseModel):
    text: str


@executor(id="split")
async def split(topic: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(topic)


class Reviewer(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(asker=self.id, text=f"review {topic}?"), Answer)

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"review={a.text}")


@executor(id="drafter")
async def drafter(topic: str, ctx: WorkflowContext[Draft]) -> None:
    await ctx.send_message(Draft(text=f"draft of {topic}"))


@executor(id="polisher")
async def polisher(d: Draft, ctx: WorkflowContext[str]) -> None:
    hold = HOLDS.get(ctx.run_id)
    if hold is not None:
        hold.reached.set()
        await hold.release.wait()
    ctx.set_state("polished", d.text)
    await ctx.send_message(f"polished {d.text}")


@executor(id="publish")
async def publish(parts: list[str], ctx: WorkflowContext[None, list[str]]) -> None:
    await ctx.yield_output(sorted(parts))


reviewer, polishing = Reviewer("reviewer"), polisher
answer_mid_step = (
    WorkflowBuilder(start_executor=split, name="it_answer_mid_step")
    .add_fan_out_edges(split, [reviewer, drafter])
    .add_edge(drafter, polishing)
    .add_fan_in_edges([reviewer, polishing], publish)
    .build()
)
"""A request asked in superstep 2 while the other branch's step runs in superstep 3 (held by ``HOLDS``): an
answer that arrives during it is taken at the boundary after it."""


def all_workflows() -> list[Workflow]:
    from examples import approval, counter_loop, research

    graphs: list[Any] = [research.workflow, approval.workflow, counter_loop.workflow]
    return [
        *graphs,
        conflict,
        endless,
        undeliverable,
        fatal,
        flaky_graph,
        big_state,
        two_questions,
        answer_mid_step,
        timed,
        conversation,
        ticker,
        collector,
        history_ticker,
        failing_ticker,
        planted_ticker,
        sizes,
        big_fan_in,
        big_outputs,
        laps,
        measurer,
        big_answers,
        big_fan_out,
    ]


# -- bad input (docs/bad-input.md) ------------------------------------------------------


class Sizes(BaseModel):
    """What ``hoard`` produces, so a test can make any one part of a step's result too large."""

    state: int = 0
    """Characters written to state key ``report`` (and ``report1``, ... with ``keys``)."""
    keys: int = 1
    message: int = 0
    """Characters sent to ``archive``."""
    output: int = 0
    """Characters yielded as a workflow output."""
    unserializable_key: str | None = None
    """A state key to write a lock to, which cannot round-trip through JSON."""


@executor(id="intake")
async def intake(s: Sizes, ctx: WorkflowContext[Sizes]) -> None:
    ctx.set_state("asked", s.model_dump())
    await ctx.send_message(s)


@executor(id="hoard", options=ExecutorOptions(retry_policy=FAST_RETRY))
async def hoard(s: Sizes, ctx: WorkflowContext[str, str]) -> None:
    for i in range(s.keys if s.state else 0):
        ctx.set_state(f"report{i or ''}", "r" * s.state)
    if s.unserializable_key is not None:
        ctx.set_state(s.unserializable_key, threading.Lock())
    if s.message:
        await ctx.send_message("m" * s.message)
    if s.output:
        await ctx.yield_output("o" * s.output)


@executor(id="archive")
async def archive(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"archived {len(text)}")


def sizes_graph(name: str = "it_sizes") -> Workflow:
    """intake → hoard → archive; a fresh instance per call, so in-process tests run the same graph."""
    return WorkflowBuilder(start_executor=intake, name=name).add_edge(intake, hoard).add_edge(hoard, archive).build()


sizes = sizes_graph()


class Chunker(Executor):
    @handler
    async def chunk(self, size: int, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(self.id[-1] * size)


@executor(id="scatter")
async def scatter(size: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(size)


@executor(id="gather")
async def gather_chunks(chunks: list[str], ctx: WorkflowContext[None, int]) -> None:
    await ctx.yield_output(sum(len(c) for c in chunks))


chunkers = [Chunker("chunk1"), Chunker("chunk2"), Chunker("chunk3")]
big_fan_in = (
    WorkflowBuilder(start_executor=scatter, name="it_big_fan_in")
    .add_fan_out_edges(scatter, chunkers)
    .add_fan_in_edges(chunkers, gather_chunks)
    .build()
)
"""Each chunk fits in a payload; the fan-in target's input (all of them) may not."""


class Emit(BaseModel):
    n: int
    upto: int
    size: int


@executor(id="emit")
async def emit(e: Emit, ctx: WorkflowContext[Emit, str]) -> None:
    await ctx.yield_output(str(e.n) * e.size)
    if e.n < e.upto:
        await ctx.send_message(Emit(n=e.n + 1, upto=e.upto, size=e.size))


big_outputs = WorkflowBuilder(start_executor=emit, name="it_big_outputs").add_edge(emit, emit).build()
"""One output per superstep: each fits in a payload; the run's result (all of them) may not."""


@executor(id="lap")
async def lap(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.set_state("laps", ctx.get_state("laps", 0) + 1)
    await ctx.send_message(n + 1)


def laps_graph(name: str = "it_laps") -> Workflow:
    """A cycle with no exit that counts its laps in state; ``max_iterations=5`` ends it."""
    return WorkflowBuilder(start_executor=lap, name=name, max_iterations=5).add_edge(lap, lap).build()


laps = laps_graph()


# -- what one workflow task records (docs/bad-input.md, tests/integration/test_task_budget.py) ---------


class Doc(BaseModel):
    """A large text with a default field: a plain ``{"text": ...}`` sent for it is changed by validation."""

    text: str
    words: int = 0


class Pause(BaseModel):
    """Holds its step until the test sets ``PAUSES[workflow id]``: input sent meanwhile waits for one boundary."""

    hold: bool = True


PAUSES: dict[str, asyncio.Event] = defaultdict(asyncio.Event)


class Measure(Executor):
    """Takes a large message and yields something small (its length): outputs add up against the limit too."""

    @handler
    async def text(self, text: str, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(len(text))

    @handler
    async def doc(self, doc: Doc, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(len(doc.text) + doc.words)

    @handler
    async def pause(self, pause: Pause, ctx: WorkflowContext[None, int]) -> None:
        await PAUSES[ctx.run_id].wait()
        await ctx.yield_output(0)


measurer = WorkflowBuilder(start_executor=Measure("measure"), name="it_measure").build()
"""A keep-alive conversation of large messages (or one run of a large start message)."""


class BigAsker(Executor):
    """Asks for a (large) text and yields its length."""

    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(asker=self.id, text=f"{self.id}: a long text about {topic}?"), str)

    @response_handler
    async def answered(self, q: Question, text: str, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(len(text))


@executor(id="topics")
async def topics(topic: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(topic)


big_answers = (
    WorkflowBuilder(start_executor=topics, name="it_big_answers")
    .add_fan_out_edges(topics, [BigAsker("ann"), BigAsker("ben"), BigAsker("cy")])
    .build()
)
"""Three requests pending at once, each answered with a large text."""


class Producer(Executor):
    @handler
    async def produce(self, size: int, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(self.id[-1] * size)


@executor(id="spread")
async def spread(size: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(size)


producers = [Producer("producer1"), Producer("producer2"), Producer("producer3")]
tally = Measure("tally")
big_fan_out = (
    WorkflowBuilder(start_executor=spread, name="it_big_fan_out")
    .add_fan_out_edges(spread, producers)
    .add_edge(producers[0], tally)
    .add_edge(producers[1], tally)
    .add_edge(producers[2], tally)
    .build()
)
"""Three large messages for one executor in one superstep: three steps whose inputs add up past 4 MiB."""
