"""The graphs of the host-conformance suite (hosted by the test worker: see ``all_workflows``).

Each graph is small and exercises one rule of the engine: how a chain, a fan-out
and a fan-in deliver, what a failing step, reducer, commit or checkpoint does to
the run, how requests are answered, time out and survive a resume. Every graph
has its own ``cf_`` name, so the test worker hosts all of them next to the
integration graphs. Steps that fail do so on their first attempt on Temporal
(``maximum_attempts=1``), so the suite stays fast.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel
from temporalio.common import RetryPolicy

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    InMemoryCheckpointStorage,
    RequestTimedOut,
    Workflow,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    WorkflowEvent,
    executor,
    handler,
    response_handler,
)
from temporal_workflows._live import MAX_LIVE_EVENT_BYTES
from temporal_workflows.events import StepProgressEvent

ONE_ATTEMPT = ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1))
"""Fail a step at its first error on Temporal too (in process there are no retries)."""


# -- a linear chain: three steps, state, a custom event, a typed output ---------------------


class Progress(WorkflowEvent):
    """A custom event, streamed by both graph hosts as this class."""

    type: str = "cf_progress"
    step: str
    length: int


class Shout(BaseModel):
    text: str
    hops: int


@executor(id="upper")
async def upper(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("path", ["upper"])
    await ctx.send_message(text.upper())


@executor(id="exclaim")
async def exclaim(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("path", [*ctx.get_state("path", []), "exclaim"])
    await ctx.add_event(Progress(step="exclaim", length=len(text)))
    await ctx.send_message(text + "!")


@executor(id="deliver")
async def deliver(text: str, ctx: WorkflowContext[None, Shout]) -> None:
    path = [*ctx.get_state("path", []), "deliver"]
    ctx.set_state("path", path)
    ctx.set_state("length", len(text))
    await ctx.yield_output(Shout(text=text, hops=len(path)))


chain = WorkflowBuilder(start_executor=upper, name="cf_chain").add_chain([upper, exclaim, deliver]).build()


# -- fan-out / fan-in with built-in reducers -----------------------------------------------


@executor(id="scatter")
async def scatter(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.set_state("log", ["scatter"])
    await ctx.send_message(n)


class Multiplier(Executor):
    """Multiplies by the digit its id ends with."""

    @handler
    async def multiply(self, n: int, ctx: WorkflowContext[int]) -> None:
        factor = int(self.id[-1])
        ctx.set_state("total", n * factor)  # "sum" reducer
        ctx.set_state("log", [self.id])  # "append" reducer
        await ctx.send_message(n * factor)


@executor(id="gather")
async def gather(products: list[int], ctx: WorkflowContext[None, dict[str, Any]]) -> None:
    await ctx.yield_output({"products": products, "total": ctx.get_state("total")})


multipliers = [Multiplier("times2"), Multiplier("times3"), Multiplier("times5")]
fan = (
    WorkflowBuilder(start_executor=scatter, name="cf_fan")
    .add_fan_out_edges(scatter, multipliers)
    .add_fan_in_edges(multipliers, gather)
    .add_state_reducer("total", "sum")
    .add_state_reducer("log", "append")
    .build()
)


# -- a step that raises --------------------------------------------------------------------


@executor(id="prepare")
async def prepare(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("prepared", text)
    await ctx.send_message(text)


@executor(id="explode", options=ONE_ATTEMPT)
async def explode(text: str, ctx: WorkflowContext[None, str]) -> None:
    ctx.set_state("exploded", True)  # discarded with the superstep
    raise ValueError(f"cannot handle {text!r}")


raises = WorkflowBuilder(start_executor=prepare, name="cf_raises").add_edge(prepare, explode).build()


class QuotaExceeded(Exception):
    """A program's own error class."""


@executor(id="call_model", options=ONE_ATTEMPT)
async def call_model(text: str, ctx: WorkflowContext[None, str]) -> None:
    raise QuotaExceeded(f"quota exceeded for {text!r}")


own_error = WorkflowBuilder(start_executor=call_model, name="cf_own_error").build()


@executor(id="look_up", options=ONE_ATTEMPT)
async def look_up(key: str, ctx: WorkflowContext[None, str]) -> None:
    raise KeyError(key)  # str() quotes it: 'missing-key'


missing_key = WorkflowBuilder(start_executor=look_up, name="cf_missing_key").build()


class Gatekeeper(Executor):
    """Asks, then fails with the program's own class when answered: the failure follows a response."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id, options=ONE_ATTEMPT)

    @handler
    async def ask(self, text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.request_info(f"may {text} pass?", str)

    @response_handler
    async def answered(self, asked: str, answer: str, ctx: WorkflowContext[str]) -> None:
        raise QuotaExceeded(f"quota exceeded for {answer!r}")


answer_fails = WorkflowBuilder(start_executor=Gatekeeper("gatekeeper"), name="cf_answer_fails").build()


# -- two steps of one superstep fail ---------------------------------------------------------

SLOW_FAILURE_SECONDS = 0.3
"""How long ``first`` takes before failing: it is first in task order but fails last in time."""


@executor(id="spread")
async def spread(text: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(text)


class Refuser(Executor):
    """Fails; ``first`` takes a moment, so completion order differs from task order."""

    def __init__(self, id: str, delay: float = 0.0) -> None:
        super().__init__(id=id, options=ONE_ATTEMPT)
        self.delay = delay

    @handler
    async def refuse(self, text: str, ctx: WorkflowContext[str]) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)  # not synchronisation: it makes the later task fail first
        ctx.set_state(f"{self.id}_ran", True)
        raise ValueError(f"{self.id} refuses {text!r}")


class Steady(Executor):
    @handler
    async def go(self, text: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("steady_ran", True)
        await ctx.send_message(text)


@executor(id="after")
async def after(texts: list[str], ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output("never")


two_failing = [Refuser("first", delay=SLOW_FAILURE_SECONDS), Steady("steady"), Refuser("second")]
two_fail = (
    WorkflowBuilder(start_executor=spread, name="cf_two_fail")
    .add_fan_out_edges(spread, two_failing)
    .add_fan_in_edges(two_failing, after)
    .build()
)


# -- a callable reducer that raises ------------------------------------------------------------


@executor(id="open")
async def open_(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("opened", text)
    await ctx.send_message(text)


class Contributor(Executor):
    @handler
    async def contribute(self, text: str, ctx: WorkflowContext) -> None:
        ctx.set_state("merged", {self.id: text})


def strict_merge(committed: Any, writes: list[Any]) -> Any:
    raise ValueError(f"refusing to merge {len(writes)} writes")


contributors = [Contributor("alpha"), Contributor("beta")]
bad_reducer = (
    WorkflowBuilder(start_executor=open_, name="cf_bad_reducer")
    .add_fan_out_edges(open_, contributors)
    .add_state_reducer("merged", strict_merge)
    .build()
)


# -- a state conflict: two parallel steps write one key without a reducer ---------------------


@executor(id="claim")
async def claim(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("claimed_by", [])
    await ctx.send_message(text)


class Claimer(Executor):
    @handler
    async def take(self, text: str, ctx: WorkflowContext) -> None:
        ctx.set_state("owner", self.id)


conflict = (
    WorkflowBuilder(start_executor=claim, name="cf_conflict")
    .add_fan_out_edges(claim, [Claimer("left"), Claimer("right")])
    .build()
)


# -- the superstep limit -------------------------------------------------------------------------


@executor(id="spin")
async def spin(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.set_state("laps", ctx.get_state("laps", 0) + 1)
    await ctx.send_message(n + 1)


LIMIT = 4
endless = WorkflowBuilder(start_executor=spin, name="cf_endless", max_iterations=LIMIT).add_edge(spin, spin).build()


# -- human input: one request, answered --------------------------------------------------------


class Question(BaseModel):
    topic: str
    text: str


class Answer(BaseModel):
    text: str


class Asker(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        ctx.set_state("asked", topic)
        await ctx.request_info(Question(topic=topic, text=f"what about {topic}?"), Answer)

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("answer", a.text)
        await ctx.send_message(f"{q.topic}: {a.text}")


@executor(id="archive")
async def archive(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"archived {text}")


asker = Asker("asker")
human = WorkflowBuilder(start_executor=asker, name="cf_human").add_edge(asker, archive).build()


def answer_question(executor_id: str, request: Any) -> Answer:
    """How the tests answer ``cf_human`` (and ``cf_resume``): from the request's JSON."""
    return Answer(text=f"{executor_id} heard {request['text']!r}")


# -- several requests answered together (issue #25.4) ------------------------------------------------


class Quiz(Executor):
    """Asks one question per word, in one step; every answer is handled in the same superstep."""

    @handler
    async def ask(self, topics: str, ctx: WorkflowContext) -> None:
        for topic in topics.split():
            await ctx.request_info(Question(topic=topic, text=f"what about {topic}?"), Answer)

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"{q.topic}: {a.text}")


@executor(id="minutes")
async def minutes(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"noted {text}")


quiz = Quiz("quiz")
two_questions = WorkflowBuilder(start_executor=quiz, name="cf_two_questions").add_edge(quiz, minutes).build()


# -- requests with a deadline -----------------------------------------------------------------------

DEADLINE_SECONDS = 1.5


class Approval(BaseModel):
    approved: bool


class Deadline(BaseModel):
    on_timeout: Literal["respond", "fail"]
    seconds: float = DEADLINE_SECONDS


class Gate(Executor):
    @handler
    async def ask(self, d: Deadline, ctx: WorkflowContext) -> None:
        await ctx.request_info(
            Question(topic="gate", text=f"approve? ({d.on_timeout} after {d.seconds:g}s)"),
            Approval,
            timeout=d.seconds,
            on_timeout=d.on_timeout,
        )

    @response_handler
    async def decided(self, q: Question, a: Approval | RequestTimedOut, ctx: WorkflowContext[None, str]) -> None:
        if isinstance(a, RequestTimedOut):
            ctx.set_state("decision", "timed out")
            await ctx.yield_output(f"timed out after {a.timeout:g}s")
        else:
            ctx.set_state("decision", "approved" if a.approved else "rejected")
            await ctx.yield_output("approved" if a.approved else "rejected")


deadline = WorkflowBuilder(start_executor=Gate("gate"), name="cf_deadline").build()


# -- a checkpoint that cannot be saved ---------------------------------------------------------------


class BrokenStorage(InMemoryCheckpointStorage):
    """A store whose disk fills up once the run has started: every save after the first superstep raises."""

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        if checkpoint.superstep >= 1:
            raise OSError("disk full")
        return await super().save(checkpoint)


@executor(id="note")
async def note(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("noted", text)
    await ctx.send_message(text)


@executor(id="publish")
async def publish(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"published {text}")


unsaved = (
    WorkflowBuilder(start_executor=note, name="cf_unsaved", checkpoint_storage=BrokenStorage(), checkpoint_every=1)
    .add_edge(note, publish)
    .build()
)


# -- an undeliverable message --------------------------------------------------------------------------


@executor(id="talker", options=ONE_ATTEMPT)
async def talker(text: str, ctx: WorkflowContext[Any]) -> None:  # Any: the builder would refuse the edge
    await ctx.send_message(len(text))  # an int; "listener" takes only str


@executor(id="listener")
async def listener(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(text)


undeliverable = WorkflowBuilder(start_executor=talker, name="cf_undeliverable").add_edge(talker, listener).build()


# -- resume from a checkpoint: count to 3, then ask; go back to superstep 2 ------------------------


class Count(BaseModel):
    n: int
    upto: int


class Total(BaseModel):
    ticks: int


@executor(id="count")
async def count(c: Count, ctx: WorkflowContext[Count | Total]) -> None:
    ticks = ctx.get_state("ticks", 0) + 1
    ctx.set_state("ticks", ticks)
    if c.n < c.upto:
        await ctx.send_message(Count(n=c.n + 1, upto=c.upto))
    else:
        await ctx.send_message(Total(ticks=ticks))


class Confirmer(Executor):
    @handler
    async def confirm(self, t: Total, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(topic="total", text=f"confirm {t.ticks} ticks?"), Answer)

    @response_handler
    async def confirmed(self, q: Question, a: Answer, ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("confirmation", a.text)
        await ctx.yield_output(f"{q.text} -> {a.text}")


RESUME_FROM_SUPERSTEP = 2
resume_store = InMemoryCheckpointStorage()
confirmer = Confirmer("confirmer")
resumable = (
    WorkflowBuilder(start_executor=count, name="cf_resume", checkpoint_storage=resume_store, checkpoint_every=1)
    .add_edge(count, count)
    .add_edge(count, confirmer)
    .build()
)


# -- a paused run resumed from the checkpoint of its request, then answered (issue #39) ------------------------

paused_store = InMemoryCheckpointStorage()
paused_asker = Asker("asker")
paused = (
    WorkflowBuilder(start_executor=paused_asker, name="cf_paused", checkpoint_storage=paused_store, checkpoint_every=1)
    .add_edge(paused_asker, archive)
    .build()
)


# -- one sender's messages to one executor: handled in the order sent (issue #39) -------------------------


@executor(id="dispatch")
async def dispatch(n: int, ctx: WorkflowContext[int]) -> None:
    for i in range(1, n + 1):
        await ctx.send_message(i)


class Collector(Executor):
    """Collects what it receives in its attributes, as Agent Framework's ``sub_workflow_basics`` does.

    Earlier messages take longer: run side by side, the steps would finish (and collect) in reverse order.
    """

    def __init__(self, id: str, *, options: ExecutorOptions | None = None) -> None:
        super().__init__(id, options=options)
        self.seen: dict[str, list[int]] = {}

    @handler
    async def take(self, i: int, ctx: WorkflowContext[None, list[int]]) -> None:
        await asyncio.sleep(0.05 * (4 - i))
        seen = self.seen.setdefault(ctx.run_id, [])
        seen.append(i)
        await ctx.yield_output(list(seen))


in_order_collector = Collector("collector")
in_send_order = (
    WorkflowBuilder(start_executor=dispatch, name="cf_in_send_order").add_edge(dispatch, in_order_collector).build()
)


# -- each step's events in the order it produced them (Agent Framework's order) -----------------


@executor(id="kickoff")
async def kickoff(text: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(text)


class Talky(Executor):
    """Outputs, a custom event and sends, interleaved; one send goes nowhere (its condition is false)."""

    @handler
    async def talk(self, text: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(f"{text}-1")
        await ctx.add_event(Progress(step="talky", length=len(text)))
        await ctx.send_message("drop")
        await ctx.send_message("keep")
        await ctx.yield_output(f"{text}-2")


class Quiet(Executor):
    """Sends and yields nothing: its executor_completed event carries no data."""

    @handler
    async def hush(self, text: str, ctx: WorkflowContext) -> None:
        ctx.set_state("quiet", True)


class Curious(Executor):
    """Yields, asks, then reports an event after asking."""

    @handler
    async def wonder(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output("curious")
        await ctx.request_info(Question(topic="order", text=f"why {text}?"), Answer)
        await ctx.add_event(Progress(step="asked", length=1))

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{q.text} {a.text}")


@executor(id="sink")
async def sink(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"sink {text}")


talky = Talky("talky")
ordered = (
    WorkflowBuilder(start_executor=kickoff, name="cf_ordered")
    .add_fan_out_edges(kickoff, [talky, Quiet("quiet"), Curious("curious")])
    .add_edge(talky, sink, condition=lambda m: m != "drop")
    .build()
)


# -- an executor that keeps state in its attributes, with checkpoint hooks -------------------------


class Tally(BaseModel):
    remaining: list[int]


class Factorizer(Executor):
    """Agent Framework's checkpoint sample: state in attributes, saved and restored by the hooks.

    ``steps`` counts the steps this instance ran for the run: after a time
    travel it is right only if the hook brought the instance back.
    """

    def __init__(self, id: str) -> None:
        super().__init__(id=id)
        self.pairs: dict[str, list[list[int]]] = {}
        self.steps = 0

    @handler
    async def compute(self, task: Tally, ctx: WorkflowContext[Tally | Total]) -> None:
        n, *rest = task.remaining
        self.pairs[str(n)] = [[i, n // i] for i in range(1, n) if n % i == 0]
        self.steps += 1
        if rest:
            await ctx.send_message(Tally(remaining=rest))
        else:
            await ctx.send_message(Total(ticks=self.steps))

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "steps": self.steps}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.pairs = {k: [list(p) for p in v] for k, v in state.get("pairs", {}).items()}
        self.steps = state.get("steps", 0)


@executor(id="numbers")
async def numbers(upto: int, ctx: WorkflowContext[Tally]) -> None:
    await ctx.send_message(Tally(remaining=list(range(1, upto + 1))))


class Reporter(Executor):
    @handler
    async def confirm(self, t: Total, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(topic="steps", text=f"confirm {t.ticks} steps?"), Answer)

    @response_handler
    async def confirmed(self, q: Question, a: Answer, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{q.text} -> {a.text}")


factorizer = Factorizer("factorizer")
hooks_store = InMemoryCheckpointStorage()
hooked = (
    WorkflowBuilder(start_executor=numbers, name="cf_hooks", checkpoint_storage=hooks_store)
    .add_edge(numbers, factorizer)
    .add_edge(factorizer, factorizer)
    .add_edge(factorizer, Reporter("reporter"))
    .build()
)


# -- which executors' yields are outputs --------------------------------------------------------


@executor(id="planner")
async def planner(prompt: str, ctx: WorkflowContext[str, str]) -> None:
    await ctx.yield_output(f"plan: {prompt}")
    await ctx.send_message(prompt)


@executor(id="researcher")
async def researcher(prompt: str, ctx: WorkflowContext[str, str]) -> None:
    await ctx.yield_output(f"notes: {prompt}")  # named in neither list: hidden
    await ctx.send_message(prompt)


@executor(id="answerer")
async def answerer(prompt: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"answer: {prompt}")


designated = (
    WorkflowBuilder(
        start_executor=planner,
        name="cf_designated",
        output_from=[answerer],
        intermediate_output_from=[planner],
    )
    .add_chain([planner, researcher, answerer])
    .build()
)


# -- the checkpoint before the first superstep: back to the start ----------------------------------


@executor(id="note_topic")
async def note_topic(topic: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("notes", [*ctx.get_state("notes", []), topic])
    await ctx.send_message(topic)


restart_store = InMemoryCheckpointStorage()
restartable = (
    WorkflowBuilder(start_executor=note_topic, name="cf_restart", checkpoint_storage=restart_store)
    .add_edge(note_topic, restart_asker := Asker("restart_asker"))
    .add_edge(restart_asker, archive)
    .build()
)


# -- typed messages and outputs mixed in one step's data (printed as Agent Framework prints them) ----


class Part(BaseModel):
    n: int


@executor(id="split")
async def split(text: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(text.upper())


@executor(id="left")
async def left(text: str, ctx: WorkflowContext[Part, str]) -> None:
    await ctx.yield_output(f"left:{text}")
    await ctx.add_event(Progress(step="left", length=len(text)))
    await ctx.send_message(Part(n=1))


@executor(id="right")
async def right(text: str, ctx: WorkflowContext[Part, str]) -> None:
    await ctx.send_message(Part(n=2))
    await ctx.yield_output(f"right:{text}")


@executor(id="join_parts")
async def join_parts(parts: list[Part], ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output("joined:" + ",".join(str(p.n) for p in parts))


typed_fan = (
    WorkflowBuilder(start_executor=split, name="cf_typed_fan")
    .add_fan_out_edges(split, [left, right])
    .add_fan_in_edges([left, right], join_parts)
    .build()
)


# -- ordinary Python values: enums, tuples, int-keyed dicts, datetimes, a plain class -----------------


class Tone(enum.Enum):
    WARM = "warm"
    COOL = "cool"


class Grade(enum.IntEnum):
    A = 1
    B = 2


class Coin:
    """A plain class: stored as its attributes, rebuilt by calling it with them."""

    def __init__(self, cents: int, currency: str = "EUR") -> None:
        self.cents = cents
        self.currency = currency


@dataclasses.dataclass
class Parcel:
    tones: dict[int, Tone]
    route: list[tuple[str, int]]
    sent: datetime
    coin: Coin
    grades: frozenset[Grade]


SENT = datetime(2025, 1, 2, 3, 4, 5, 678, tzinfo=UTC)


def types_of(value: Any) -> str:
    """The exact types inside ``value``, as text: what the step saw after decoding (``tuple[str, int]``, ...)."""
    if isinstance(value, dict):
        return f"{type(value).__name__}[{', '.join(f'{types_of(k)}: {types_of(v)}' for k, v in value.items())}]"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}[{', '.join(sorted(types_of(v) for v in value))}]"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{', '.join(types_of(v) for v in value)}]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = (f"{f.name}={types_of(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({', '.join(fields)})"
    if isinstance(value, Coin):
        return f"Coin({types_of(value.cents)}, {types_of(value.currency)})"
    if isinstance(value, datetime):
        return f"datetime({value.tzinfo})"
    return type(value).__name__


@executor(id="pack")
async def pack(start: tuple[str, int], ctx: WorkflowContext[Parcel]) -> None:
    name, n = start
    ctx.set_state("start_types", types_of(start))
    ctx.set_state("by_grade", {Grade.A: (name, n), Grade.B: (name, n + 1)})
    ctx.set_state("sent", SENT)
    ctx.set_state("coin", Coin(n * 100))
    await ctx.send_message(Parcel({1: Tone.WARM, 2: Tone.COOL}, [(name, n)], SENT, Coin(n * 100), frozenset({Grade.A})))


class Inspector(Executor):
    """Asks about the parcel it got, then reports every type it saw, after a checkpoint and a resume."""

    @handler
    async def inspect(self, parcel: Parcel, ctx: WorkflowContext) -> None:
        ctx.set_state("parcel_types", types_of(parcel))
        await ctx.request_info((parcel.coin, Tone.COOL), Tone)

    @response_handler
    async def answered(self, request: tuple[Coin, Tone], answer: Tone, ctx: WorkflowContext[None, Any]) -> None:
        seen = {k: ctx.get_state(k) for k in ("by_grade", "sent", "coin")}
        await ctx.yield_output((answer, request[1], seen["by_grade"], seen["sent"]))
        await ctx.yield_output(types_of({"request": request, "answer": answer, **seen}))


def answer_tone(executor_id: str, request: Any) -> str:
    """How the tests answer ``cf_values``: plain JSON, as from the ``temporal`` CLI."""
    return "warm"


values_store = InMemoryCheckpointStorage()
values = (
    WorkflowBuilder(start_executor=pack, name="cf_values", checkpoint_storage=values_store, checkpoint_every=1)
    .add_edge(pack, Inspector("inspector"))
    .build()
)
# -- plain classes with no __init__ that takes their attributes (issue #25.3) ------------------------


class SplitCompleted:
    """A marker message with no fields, as Agent Framework samples send them."""


class WordCount:
    """Computes an attribute its ``__init__`` does not take: rebuilt without calling it, as ``copy`` does."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.count = len(words)


@executor(id="split_words")
async def split_words(text: str, ctx: WorkflowContext[SplitCompleted]) -> None:
    ctx.set_state("counted", WordCount(text.split()))
    await ctx.send_message(SplitCompleted())


@executor(id="split_done")
async def split_done(done: SplitCompleted, ctx: WorkflowContext[None, str]) -> None:
    counted = ctx.get_state("counted")
    await ctx.yield_output(f"{type(done).__name__}: {type(counted).__name__}({counted.words}, {counted.count})")


markers = (
    WorkflowBuilder(start_executor=split_words, name="cf_markers", checkpoint_storage=InMemoryCheckpointStorage())
    .add_edge(split_words, split_done)
    .register_types(WordCount)
    .build()
)


# -- live events: a step that streams progress while it runs ---------------------------------------


@executor(id="narrate", options=ONE_ATTEMPT)
async def narrate(text: str, ctx: WorkflowContext[str]) -> None:
    for i, word in enumerate(text.split(), 1):
        await ctx.add_event(StepProgressEvent(message=word, progress=i / len(text.split())))
    await ctx.add_event(Progress(step="narrate", length=len(text)))  # committed, as ever
    await ctx.send_message(text.upper())


@executor(id="echo")
async def echo(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(text)


live = WorkflowBuilder(start_executor=narrate, name="cf_live").add_edge(narrate, echo).build()


@executor(id="oversharer", options=ONE_ATTEMPT)
async def oversharer(text: str, ctx: WorkflowContext[None, str]) -> None:
    """Streams a small item, one over the per-event limit (a note stands in for it on both graph hosts), another."""
    await ctx.add_event(StepProgressEvent(message="before"))
    await ctx.add_event(StepProgressEvent(message="huge", data=text * (MAX_LIVE_EVENT_BYTES // len(text) + 1)))
    await ctx.add_event(StepProgressEvent(message="after"))
    await ctx.yield_output("shared")


live_too_large = WorkflowBuilder(start_executor=oversharer, name="cf_live_too_large").build()


# -- a message while the run is busy (concurrent_input) --------------------------------------------------

GATES: dict[str, asyncio.Event] = {}
"""Per message: set by the test to let ``busy_answer`` finish (the test worker runs in the test process)."""
STARTED: dict[str, asyncio.Event] = {}
"""Per message: set when ``busy_answer`` begins waiting (so the test sends while it runs)."""


def busy_gate(table: dict[str, asyncio.Event], text: str) -> asyncio.Event:
    return table.setdefault(text, asyncio.Event())


@executor(id="busy_note")
async def busy_note(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("seen", [*ctx.get_state("seen", []), text])
    await ctx.send_message(text)


@executor(id="busy_answer")
async def busy_answer(text: str, ctx: WorkflowContext[None, str]) -> None:
    busy_gate(STARTED, text).set()
    await busy_gate(GATES, text).wait()
    await ctx.yield_output(f"answered {text}")


busy = WorkflowBuilder(start_executor=busy_note, name="cf_busy").add_edge(busy_note, busy_answer).build()


def all_workflows() -> list[Workflow]:
    """Every graph of this suite, for the test worker (the examples it already hosts)."""
    return [
        chain,
        fan,
        raises,
        own_error,
        missing_key,
        paused,
        in_send_order,
        answer_fails,
        two_fail,
        bad_reducer,
        conflict,
        endless,
        human,
        deadline,
        unsaved,
        undeliverable,
        resumable,
        live,
        live_too_large,
        ordered,
        hooked,
        designated,
        restartable,
        typed_fan,
        values,
        markers,
        two_questions,
        busy,
    ]
