"""Graphs with sub-workflows, run in process (tests/test_subworkflows.py), on Temporal
(tests/integration/test_subworkflows.py) and by the conformance suite on both.

The test worker hosts :func:`all_workflows` (and with each parent, its child
graphs, which the plugin registers itself). Executors keep nothing in
attributes: on Temporal a step may run in any worker process.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.common import RetryPolicy

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    InMemoryCheckpointStorage,
    RequestTimedOut,
    SubWorkflowRequestMessage,
    SubWorkflowResponseMessage,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowExecutor,
    executor,
    handler,
    response_handler,
)

# -- several children in one superstep: count the words of each text --------------------------


class Count(BaseModel):
    text: str
    words: int


@executor(id="count")
async def count(text: str, ctx: WorkflowContext[None, Count]) -> None:
    ctx.set_state("counted", text)  # the child's own state: no other child sees it
    await ctx.yield_output(Count(text=text, words=len(text.split())))


def build_counting() -> Workflow:
    return WorkflowBuilder(start_executor=count).build()  # unnamed, as in Agent Framework's samples


@executor(id="split")
async def split(texts: list[str], ctx: WorkflowContext[str]) -> None:
    for text in texts:
        await ctx.send_message(text)


@executor(id="tally")
async def tally(c: Count, ctx: WorkflowContext[None, str]) -> None:
    ctx.set_state("tallied", [c.text])
    await ctx.yield_output(f"{c.text!r}: {c.words} words")


def build_basic() -> Workflow:
    counter = WorkflowExecutor(build_counting(), id="counter")
    return (
        WorkflowBuilder(start_executor=split, name="sw_basic")
        .add_edge(split, counter)
        .add_edge(counter, tally)
        .add_state_reducer("tallied", "append")
        .build()
    )


# -- children that finish out of order: results still arrive in the order the children started ------


@executor(id="count_slowly")
async def count_slowly(text: str, ctx: WorkflowContext[None, Count]) -> None:
    # The first text takes longest: the children finish in the reverse of the order they started.
    await asyncio.sleep(0.2 * len(text.split()))
    await ctx.yield_output(Count(text=text, words=len(text.split())))


@executor(id="collect")
async def collect(c: Count, ctx: WorkflowContext[None, str]) -> None:
    ctx.set_state("collected", [c.text])
    await ctx.yield_output(f"collected {c.text!r}")


def build_out_of_order() -> Workflow:
    # Concurrent: the three children run side by side (by default one sender's messages to one executor run
    # one after another, in send order, as Agent Framework delivers them), so they can finish out of order.
    counter = WorkflowExecutor(
        WorkflowBuilder(start_executor=count_slowly).build(),
        id="slow_counter",
        options=ExecutorOptions(concurrent=True),
    )
    return (
        WorkflowBuilder(start_executor=split, name="sw_out_of_order")
        .add_edge(split, counter)
        .add_edge(counter, collect)
        .add_state_reducer("collected", "append")
        .build()
    )


out_of_order = build_out_of_order()


# -- a child that asks a human; its request reaches whoever runs the parent ---------------------


class Question(BaseModel):
    topic: str
    text: str


class Answer(BaseModel):
    text: str


class Asker(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        ctx.set_state("topic", topic)
        await ctx.request_info(Question(topic=topic, text=f"what about {topic}?"), Answer)

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{ctx.get_state('topic')}: {a.text}")


def build_asking() -> Workflow:
    return WorkflowBuilder(start_executor=Asker("asker")).build()


@executor(id="begin")
async def begin(topic: str, ctx: WorkflowContext[str]) -> None:
    ctx.set_state("began", topic)
    await ctx.send_message(topic)


@executor(id="finish")
async def finish(text: str, ctx: WorkflowContext[None, str]) -> None:
    ctx.set_state("finished", text)
    await ctx.yield_output(f"parent got {text!r}")


store = InMemoryCheckpointStorage()
"""Where the propagating parent's checkpoints go (in process, and on Temporal through the test worker)."""


def build_propagating() -> Workflow:
    interview = WorkflowExecutor(build_asking(), id="interview", propagate_request=True)
    return (
        WorkflowBuilder(start_executor=begin, name="sw_propagate", checkpoint_storage=store, checkpoint_every=1)
        .add_edge(begin, interview)
        .add_edge(interview, finish)
        .build()
    )


def answer(executor_id: str, request: Any) -> Answer:
    """How the tests answer an ``Asker``'s question, from its JSON."""
    return Answer(text=f"{executor_id} heard {request['text']!r}")


def build_unintercepted() -> Workflow:
    """No parent executor takes the child's request: it reaches whoever runs the parent all the same."""
    interview = WorkflowExecutor(build_asking(), id="interview")
    return (
        WorkflowBuilder(start_executor=begin, name="sw_unintercepted")
        .add_edge(begin, interview)
        .add_edge(interview, finish)
        .build()
    )


# -- nested: a child that runs a child of its own; the innermost request goes all the way out ---


@executor(id="relay")
async def relay(topic: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(topic.upper())


@executor(id="wrap")
async def wrap(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"[{text}]")


def build_middle() -> Workflow:
    inner = WorkflowExecutor(build_asking(), id="inner", propagate_request=True)
    return WorkflowBuilder(start_executor=relay).add_edge(relay, inner).add_edge(inner, wrap).build()


def build_nested() -> Workflow:
    middle = WorkflowExecutor(build_middle(), id="middle", propagate_request=True)
    return (
        WorkflowBuilder(start_executor=begin, name="sw_nested").add_edge(begin, middle).add_edge(middle, finish).build()
    )


# -- intermediate outputs bubble up through every level, as in Agent Framework -------------------


@executor(id="plan")
async def plan(text: str, ctx: WorkflowContext[str, str]) -> None:
    await ctx.yield_output(f"planned {text!r}")  # an intermediate output of the innermost graph
    await ctx.send_message(text)


@executor(id="solve")
async def solve(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"solved {text!r}")


@executor(id="note")
async def note(text: str, ctx: WorkflowContext[str, Count]) -> None:
    await ctx.yield_output(Count(text=text, words=len(text.split())))  # a typed one, in the middle graph
    await ctx.send_message(text)


@executor(id="told")
async def told(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"parent got {text!r}")


def build_progress() -> Workflow:
    """split → progress (a child: note → steps, a child of its own: plan → solve) → told.

    ``plan`` and ``note`` yield intermediate outputs; each level's ``WorkflowExecutor`` publishes its
    child's as ``intermediate`` events of its own, and the innermost's travel out through ``steps``.
    """
    steps = WorkflowExecutor(
        WorkflowBuilder(start_executor=plan, output_from=[solve], intermediate_output_from=[plan])
        .add_edge(plan, solve)
        .build(),
        id="steps",
        allow_direct_output=True,
    )
    middle = (
        WorkflowBuilder(start_executor=note, output_from=[steps], intermediate_output_from=[note])
        .add_edge(note, steps)
        .build()
    )
    progress = WorkflowExecutor(middle, id="progress")
    return (
        WorkflowBuilder(start_executor=split, name="sw_progress")
        .add_edge(split, progress)
        .add_edge(progress, told)
        .build()
    )


# -- interception: a parent executor answers the child's request itself -------------------------


class Domain(BaseModel):
    name: str


class Validator(Executor):
    """The child: asks whether an address's domain is allowed."""

    @handler
    async def check(self, email: str, ctx: WorkflowContext) -> None:
        ctx.set_state("email", email)
        await ctx.request_info(Domain(name=email.split("@")[-1]), bool)

    @response_handler
    async def decided(self, d: Domain, ok: bool, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{ctx.get_state('email')} {'accepted' if ok else 'refused'}")


ALLOWED = ("example.com",)


class Gatekeeper(Executor):
    """The parent: sends addresses to the child and answers its domain questions itself."""

    @handler
    async def start(self, emails: list[str], ctx: WorkflowContext[str]) -> None:
        for email in emails:
            await ctx.send_message(email)

    @handler
    async def intercept(
        self, request: SubWorkflowRequestMessage, ctx: WorkflowContext[SubWorkflowResponseMessage]
    ) -> None:
        domain = request.source_event.data
        assert isinstance(domain, Domain), type(domain)  # typed again after its trip through JSON
        await ctx.send_message(request.create_response(domain.name in ALLOWED), target_id=request.executor_id)

    @handler
    async def verdict(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(text)


def build_intercepting() -> Workflow:
    gate = Gatekeeper("gate")
    validation = WorkflowExecutor(WorkflowBuilder(start_executor=Validator("validator")).build(), id="validation")
    return (
        WorkflowBuilder(start_executor=gate, name="sw_intercept")
        .add_edge(gate, validation)
        .add_edge(validation, gate)
        .build()
    )


# -- interception with a human: the parent asks in the child's stead, and answers it later ------


class Reviewer(Executor):
    """The parent: forwards the child's question as its own request, keeping the child's in executor state."""

    @handler
    async def start(self, topics: list[str], ctx: WorkflowContext[str]) -> None:
        for topic in topics:
            await ctx.send_message(topic)

    @handler
    async def forward(self, request: SubWorkflowRequestMessage, ctx: WorkflowContext) -> None:
        question = request.source_event.data
        assert isinstance(question, Question)
        await ctx.request_info(question, Answer)
        ctx.set_executor_state(f"asked:{question.topic}", request)

    @response_handler
    async def reply(self, q: Question, a: Answer, ctx: WorkflowContext[SubWorkflowResponseMessage]) -> None:
        request: SubWorkflowRequestMessage = ctx.get_executor_state(f"asked:{q.topic}")
        ctx.executor_state.delete(f"asked:{q.topic}")
        await ctx.send_message(request.create_response(Answer(text=f"reviewed: {a.text}")))

    @handler
    async def done(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(text)


review_store = InMemoryCheckpointStorage()


def build_reviewing() -> Workflow:
    reviewer = Reviewer("reviewer")
    interview = WorkflowExecutor(build_asking(), id="interview")
    return (
        WorkflowBuilder(start_executor=reviewer, name="sw_review", checkpoint_storage=review_store, checkpoint_every=1)
        .add_edge(reviewer, interview)
        .add_edge(interview, reviewer)
        .build()
    )


# -- a child that fails ----------------------------------------------------------------------------

ONE_ATTEMPT = ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1))


@executor(id="explode", options=ONE_ATTEMPT)
async def explode(text: str, ctx: WorkflowContext[None, str]) -> None:
    raise ValueError(f"cannot handle {text!r}")


def build_failing() -> Workflow:
    broken = WorkflowExecutor(WorkflowBuilder(start_executor=explode).build(), id="broken")
    return (
        WorkflowBuilder(start_executor=begin, name="sw_fails").add_edge(begin, broken).add_edge(broken, finish).build()
    )


# -- a propagated request with a deadline -------------------------------------------------------

DEADLINE_SECONDS = 1.5


class Patient(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(topic=topic, text="approve?"), Answer, timeout=DEADLINE_SECONDS)

    @response_handler
    async def answered(self, q: Question, a: Answer | RequestTimedOut, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output("timed out" if isinstance(a, RequestTimedOut) else a.text)


def build_deadline() -> Workflow:
    waiting = WorkflowExecutor(WorkflowBuilder(start_executor=Patient("patient")).build(), "waiting", True, True)
    return WorkflowBuilder(start_executor=begin, name="sw_deadline").add_edge(begin, waiting).build()


# -- a child whose step takes long (to cancel it mid-way) -------------------------------------------


@executor(
    id="dawdle",
    options=ExecutorOptions(heartbeat_timeout=timedelta(seconds=2), retry_policy=RetryPolicy(maximum_attempts=1)),
)
async def dawdle(text: str, ctx: WorkflowContext[None, str]) -> None:
    await asyncio.sleep(60)  # not synchronisation: a step that is still running when its run is cancelled
    await ctx.yield_output(text)


def build_slow() -> Workflow:
    dawdling = WorkflowExecutor(WorkflowBuilder(start_executor=dawdle).build(), "dawdling")
    return (
        WorkflowBuilder(start_executor=begin, name="sw_slow")
        .add_edge(begin, dawdling)
        .add_edge(dawdling, finish)
        .build()
    )


# -- an answer that arrives before its deadline, taken at a boundary after it ---------------------------

RACE_DEADLINE_SECONDS = 1.0
RACE_BUSY_SECONDS = 3.0
"""How long the superstep after the request runs: the boundary that takes the answer is past the deadline."""


@executor(id="ticker")
async def ticker(topic: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(topic)


@executor(id="slowpoke")
async def slowpoke(topic: str, ctx: WorkflowContext) -> None:
    if topic == "busy":  # on Temporal: a superstep that outlasts the deadline (in process the clock is moved)
        await asyncio.sleep(RACE_BUSY_SECONDS)


class Hasty(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(Question(topic=topic, text="approve?"), Answer, timeout=RACE_DEADLINE_SECONDS)

    @response_handler
    async def answered(self, q: Question, a: Answer | RequestTimedOut, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output("timed out" if isinstance(a, RequestTimedOut) else a.text)


def build_race(*, child: bool) -> Workflow:
    """``begin`` → the asker (a child asking, when ``child``) and ``ticker`` → ``slowpoke``, which keeps the
    superstep after the request running past its deadline."""
    if child:
        asker: Executor = WorkflowExecutor(WorkflowBuilder(start_executor=Hasty("hasty")).build(), "asking", True, True)
    else:
        asker = Hasty("hasty")
    return (
        WorkflowBuilder(start_executor=begin, name="sw_race_child" if child else "race_top")
        .add_fan_out_edges(begin, [asker, ticker])
        .add_edge(ticker, slowpoke)
        .build()
    )


basic = build_basic()
propagating = build_propagating()
unintercepted = build_unintercepted()
nested = build_nested()
intercepting = build_intercepting()
reviewing = build_reviewing()
failing = build_failing()
deadline = build_deadline()
slow = build_slow()
progress = build_progress()
race_top = build_race(child=False)
race_child = build_race(child=True)


def all_workflows() -> list[Workflow]:
    """The parents the test worker hosts (the plugin adds their children)."""
    return [
        basic,
        propagating,
        nested,
        intercepting,
        reviewing,
        failing,
        deadline,
        slow,
        unintercepted,
        race_top,
        race_child,
        out_of_order,
        progress,
    ]
