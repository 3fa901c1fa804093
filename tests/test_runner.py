"""The in-process runner: supersteps, isolation, commit rules, routing, failures, streaming.

Completion orders are forced with ``asyncio.Event`` (never with sleeps), and
every wait has a timeout so a broken guarantee fails fast instead of hanging.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from temporal_workflows import (
    Case,
    Default,
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    WorkflowRunState,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.errors import (
    ExecutorFailedError,
    StateConflictError,
    SuperstepLimitError,
    UndeliverableMessageError,
    WorkflowError,
)
from temporal_workflows.events import (
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    SuperStepStartedEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowStatusEvent,
)

TIMEOUT = 5.0  # a guarantee that is broken fails in this many seconds, never hangs


class Topic(BaseModel):
    topic: str
    depth: int = 1


class Summary(BaseModel):
    text: str


async def wait(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), TIMEOUT)


@executor(id="start")
async def start(msg: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(msg)


def recorder(eid: str, seen: list[tuple[str, int, Any]], *, forward: bool = False) -> Executor:
    """An executor that records (id, superstep, message) and forwards or yields the message."""

    @executor(id=eid)
    async def record(msg: str, ctx: WorkflowContext[str, str]) -> None:
        seen.append((eid, ctx.superstep, msg))
        if forward:
            await ctx.send_message(f"{msg}>{eid}")
        else:
            await ctx.yield_output(f"{eid}:{msg}")

    return record


def invoked(result: list[WorkflowEvent]) -> list[tuple[int, str]]:
    return [(e.superstep, e.executor_id) for e in result if isinstance(e, ExecutorInvokedEvent)]


# -- supersteps ---------------------------------------------------------------------------


async def test_a_message_sent_in_superstep_k_is_handled_in_superstep_k_plus_1() -> None:
    seen: list[tuple[str, int, Any]] = []
    a, b, c = recorder("a", seen, forward=True), recorder("b", seen, forward=True), recorder("c", seen)
    wf = WorkflowBuilder(start_executor=a).add_chain([a, b, c]).build()
    result = await wf.run("m")
    assert seen == [("a", 1, "m"), ("b", 2, "m>a"), ("c", 3, "m>a>b")]
    assert result.get_outputs() == ["c:m>a>b"]
    assert [e.executor_ids for e in result if isinstance(e, SuperStepStartedEvent)] == [["a"], ["b"], ["c"]]
    assert result.get_final_state() is WorkflowRunState.IDLE


async def test_deliveries_of_one_superstep_run_concurrently() -> None:
    """Each step waits for the other's event: run one after the other, they would deadlock."""
    ready = {"left": asyncio.Event(), "right": asyncio.Event()}

    def waiter(me: str, other: str) -> Executor:
        @executor(id=me)
        async def run(msg: str, ctx: WorkflowContext[None, str]) -> None:
            ready[me].set()
            await wait(ready[other])
            await ctx.yield_output(me)

        return run

    left, right = waiter("left", "right"), waiter("right", "left")
    wf = WorkflowBuilder(start_executor=start).add_fan_out_edges(start, [left, right]).build()
    result = await wf.run("go")
    assert result.get_outputs() == ["left", "right"]  # in task order, whoever finished first
    assert invoked(result) == [(1, "start"), (2, "left"), (2, "right")]


async def test_one_handler_invocation_per_delivered_message() -> None:
    seen: list[tuple[str, int, Any]] = []

    @executor(id="burst")
    async def burst(msg: str, ctx: WorkflowContext[str]) -> None:
        for i in range(3):
            await ctx.send_message(f"{msg}{i}")

    sink = recorder("sink", seen)
    wf = WorkflowBuilder(start_executor=burst).add_edge(burst, sink).build()
    result = await wf.run("m")
    assert seen == [("sink", 2, "m0"), ("sink", 2, "m1"), ("sink", 2, "m2")]
    assert invoked(result) == [(1, "burst"), (2, "sink"), (2, "sink"), (2, "sink")]
    assert result.get_outputs() == ["sink:m0", "sink:m1", "sink:m2"]


async def test_fan_in_target_gets_one_list_once_every_source_has_sent_and_not_before() -> None:
    calls: list[tuple[int, list[str]]] = []

    @executor(id="fast")
    async def fast(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message("fast")

    @executor(id="slow1")
    async def slow1(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(msg)

    @executor(id="slow2")
    async def slow2(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message("slow")

    @executor(id="join")
    async def join(msgs: list[str], ctx: WorkflowContext[None, list[str]]) -> None:
        calls.append((ctx.superstep, msgs))
        await ctx.yield_output(msgs)

    wf = (
        WorkflowBuilder(start_executor=start)
        .add_fan_out_edges(start, [fast, slow1])
        .add_edge(slow1, slow2)
        .add_fan_in_edges([slow2, fast], join)
        .build()
    )
    result = await wf.run("go")
    # fast sent in superstep 2, slow2 only in superstep 3: join runs once, in 4, in source order.
    assert calls == [(4, ["slow", "fast"])]
    assert result.get_outputs() == [["slow", "fast"]]


# -- snapshot isolation -------------------------------------------------------------------


async def test_a_step_reads_committed_state_plus_its_own_writes_never_a_peers_uncommitted_write() -> None:
    written = asyncio.Event()
    reads: dict[str, Any] = {}

    @executor(id="seed")
    async def seed(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("k", "committed")
        ctx.set_state("items", [1])
        await ctx.send_message(msg)

    @executor(id="writer")
    async def writer(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("k", "uncommitted")
        reads["writer_own"] = ctx.get_state("k")
        written.set()

    @executor(id="reader")
    async def reader(msg: str, ctx: WorkflowContext[str]) -> None:
        await wait(written)  # the writer has written (but not committed) by now
        reads["reader_same_step"] = ctx.get_state("k")
        ctx.get_state("items").append(2)  # mutating a read value does not write state
        reads["reader_items"] = ctx.get_state("items")
        await ctx.send_message("next")

    @executor(id="after")
    async def after(msg: str, ctx: WorkflowContext) -> None:
        reads["next_step"] = ctx.get_state("k")

    wf = WorkflowBuilder(start_executor=seed).add_fan_out_edges(seed, [writer, reader]).add_edge(reader, after).build()
    result = await wf.run("go")
    assert reads == {
        "writer_own": "uncommitted",
        "reader_same_step": "committed",
        "reader_items": [1],
        "next_step": "uncommitted",
    }
    assert result.state == {"k": "uncommitted", "items": [1]}


async def test_own_writes_are_read_through_reducers_and_deletes() -> None:
    reads: dict[str, Any] = {}

    @executor(id="seed")
    async def seed(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("log", ["a"])
        ctx.set_state("gone", 1)
        await ctx.send_message(msg)

    @executor(id="step")
    async def step(msg: str, ctx: WorkflowContext) -> None:
        ctx.set_state("log", ["b"])
        reads["log"] = ctx.get_state("log")
        ctx.state.delete("gone")
        reads["gone"] = (ctx.state.has("gone"), ctx.get_state("gone", "default"), "gone" in ctx.state)

    wf = WorkflowBuilder(start_executor=seed).add_edge(seed, step).add_state_reducer("log", "append").build()
    result = await wf.run("go")
    assert reads == {"log": ["a", "b"], "gone": (False, "default", False)}
    assert result.state == {"log": ["a", "b"]}


# -- deterministic commit -------------------------------------------------------------------


class Owner(Executor):
    @handler
    async def claim(self, msg: str, ctx: WorkflowContext) -> None:
        ctx.set_state("owner", self.id)
        ctx.set_state(f"mine_{self.id}", True)


async def test_two_steps_writing_one_key_raise_state_conflict_and_commit_nothing() -> None:
    @executor(id="seed")
    async def seed(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("owner", "seed")
        await ctx.send_message(msg)

    wf = WorkflowBuilder(start_executor=seed).add_fan_out_edges(seed, [Owner("left"), Owner("right")]).build()
    with pytest.raises(StateConflictError) as info:
        await wf.run("go")
    err = info.value
    assert err.key == "owner" and err.executor_ids == ("left", "right") and err.superstep == 2
    assert "'owner'" in str(err) and "'left'" in str(err) and "'right'" in str(err)
    assert wf.run_state is WorkflowRunState.FAILED
    assert wf.state == {"owner": "seed"}  # neither step's writes (not even the non-conflicting ones)
    assert err.result is not None and err.result.get_final_state() is WorkflowRunState.FAILED
    failed = [e for e in err.result if isinstance(e, WorkflowFailedEvent)]
    assert [(e.error_type, e.superstep) for e in failed] == [("StateConflictError", 2)]


REDUCER_CASES: dict[str, tuple[Any, Callable[[str], Any], Any]] = {
    # reducer: (reducer spec, write of worker id, expected committed value for workers w0, w1, w2)
    "append": ("append", lambda w: [w], ["w0", "w1", "w2"]),
    "sum": ("sum", lambda w: int(w[1:]) + 1, 6),
    "merge": ("merge", lambda w: {"last": w, w: True}, {"last": "w2", "w0": True, "w1": True, "w2": True}),
    "callable": (lambda cur, writes: [*(cur or []), "+".join(writes)], lambda w: w, ["w0+w1+w2"]),
}


def reducer_graph(
    reducer: Any, value_of: Callable[[str], Any], gates: dict[str, asyncio.Event], finished: list[str]
) -> Workflow:
    """Workers w0..w2 run in one superstep and all write key "k"; gates force reverse completion order."""

    class Worker(Executor):
        @handler
        async def work(self, msg: str, ctx: WorkflowContext) -> None:
            ctx.set_state("k", value_of(self.id))
            nxt = f"w{int(self.id[1:]) + 1}"
            if nxt in gates:
                await wait(gates[nxt])  # finish only after the next worker finished
            finished.append(self.id)
            gates[self.id].set()

    workers = [Worker(f"w{i}") for i in range(3)]
    return (
        WorkflowBuilder(start_executor=start).add_fan_out_edges(start, workers).add_state_reducer("k", reducer).build()
    )


@pytest.mark.parametrize("name", list(REDUCER_CASES))
async def test_reducer_combines_in_declaration_order_even_when_completion_is_reversed(name: str) -> None:
    reducer, value_of, expected = REDUCER_CASES[name]
    gates = {f"w{i}": asyncio.Event() for i in range(3)}
    finished: list[str] = []
    result = await reducer_graph(reducer, value_of, gates, finished).run("go")
    assert finished == ["w2", "w1", "w0"]
    assert result.state == {"k": expected}


@settings(max_examples=25, deadline=None)
@given(
    delays=st.lists(st.floats(min_value=0, max_value=0.002), min_size=4, max_size=4),
    name=st.sampled_from(list(REDUCER_CASES)),
)
def test_reducer_result_does_not_depend_on_completion_timing(delays: list[float], name: str) -> None:
    reducer, value_of, expected = REDUCER_CASES[name]
    finished: list[str] = []

    class Worker(Executor):
        @handler
        async def work(self, msg: str, ctx: WorkflowContext) -> None:
            await asyncio.sleep(delays[int(self.id[1:])])  # shuffles the completion order, nothing else
            ctx.set_state("k", value_of(self.id))
            finished.append(self.id)

    workers = [Worker(f"w{i}") for i in range(3)]
    wf = WorkflowBuilder(start_executor=start).add_fan_out_edges(start, workers).add_state_reducer("k", reducer).build()
    loop = asyncio.new_event_loop()  # hypothesis drives a sync test; give each example its own loop
    try:
        result = loop.run_until_complete(wf.run("go"))
    finally:
        loop.close()
    assert sorted(finished) == ["w0", "w1", "w2"]
    assert result.state == {"k": expected}


# -- routing by type ------------------------------------------------------------------------------


@executor(id="ints")
async def ints(msg: int, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"int:{msg!r}")


@executor(id="strs")
async def strs(msg: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"str:{msg!r}")


@executor(id="topics")
async def topics(msg: Topic, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"topic:{msg.topic}")


@executor(id="scalars")
async def scalars(msg: int | str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"scalar:{msg!r}")


def typed_fan_out() -> Workflow:
    @executor(id="src")
    async def src(msg: Any, ctx: WorkflowContext[int | str | Topic]) -> None:
        await ctx.send_message(msg["value"])

    return WorkflowBuilder(start_executor=src).add_fan_out_edges(src, [ints, strs, topics, scalars]).build()


@pytest.mark.parametrize(
    ("value", "outputs"),
    [
        (7, ["int:7", "scalar:7"]),
        ("7", ["str:'7'", "scalar:'7'"]),  # a str is never coerced into the int handler
        (Topic(topic="t"), ["topic:t"]),
    ],
)
async def test_a_message_goes_to_every_connected_target_whose_handler_accepts_its_type(
    value: Any, outputs: list[str]
) -> None:
    result = await typed_fan_out().run({"value": value})
    assert result.get_outputs() == outputs


async def test_a_message_no_target_accepts_fails_naming_sender_type_and_targets() -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await typed_fan_out().run({"value": [1.5]})
    cause = info.value.__cause__
    assert isinstance(cause, UndeliverableMessageError)
    assert (
        cause.source_id == "src"
        and cause.type_name == "list"
        and cause.targets == ["ints", "strs", "topics", "scalars"]
    )
    assert "'src'" in str(cause) and "list" in str(cause) and "'ints'" in str(cause)
    assert info.value.executor_id == "src" and info.value.superstep == 1


async def test_sending_from_an_executor_without_edges_is_undeliverable() -> None:
    @executor(id="lonely")
    async def lonely(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message("hello?")

    with pytest.raises(ExecutorFailedError) as info:
        await WorkflowBuilder(start_executor=lonely).build().run("go")
    assert isinstance(info.value.__cause__, UndeliverableMessageError)
    assert "no outgoing edges" in str(info.value.__cause__)


async def test_send_message_with_target_id_reaches_only_that_target() -> None:
    seen: list[tuple[str, int, Any]] = []

    @executor(id="router")
    async def router(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(msg, target_id=msg)

    wf = (
        WorkflowBuilder(start_executor=router)
        .add_fan_out_edges(router, [recorder("x", seen), recorder("y", seen)])
        .build()
    )
    assert (await wf.run("y")).get_outputs() == ["y:y"]
    assert seen == [("y", 2, "y")]
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run("z")
    assert isinstance(info.value.__cause__, UndeliverableMessageError)
    assert "'z'" in str(info.value.__cause__) and info.value.__cause__.targets == ["x", "y"]


# -- edge kinds ---------------------------------------------------------------------------------


def number_source() -> Executor:
    @executor(id="n")
    async def n(msg: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(msg)

    return n


def sink(name: str) -> Executor:
    @executor(id=name)
    async def run(msg: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{name}:{msg}")

    return run


def sinks(*names: str) -> list[Executor]:
    return [sink(name) for name in names]


def is_big(n: int) -> bool:
    return n > 10


async def test_conditional_edges_route_by_condition() -> None:
    n, (big, small) = number_source(), sinks("big", "small")
    wf = (
        WorkflowBuilder(start_executor=n)
        .add_edge(n, big, condition=is_big)
        .add_edge(n, small, condition=lambda x: not is_big(x))
        .build()
    )
    assert (await wf.run(11)).get_outputs() == ["big:11"]
    assert (await wf.run(3)).get_outputs() == ["small:3"]


async def test_a_message_whose_conditions_are_all_false_goes_nowhere_without_error() -> None:
    n, (big,) = number_source(), sinks("big")
    wf = WorkflowBuilder(start_executor=n).add_edge(n, big, condition=is_big).build()
    result = await wf.run(1)
    assert result.get_outputs() == [] and result.get_final_state() is WorkflowRunState.IDLE


async def test_switch_case_takes_the_first_matching_case_else_the_default() -> None:
    n, (huge, big, other) = number_source(), sinks("huge", "big", "other")
    wf = (
        WorkflowBuilder(start_executor=n)
        .add_switch_case_edge_group(
            n,
            [Case(condition=lambda x: x > 100, target=huge), Case(condition=is_big, target=big), Default(target=other)],
        )
        .build()
    )
    assert [(await wf.run(v)).get_outputs() for v in (500, 50, 5)] == [["huge:500"], ["big:50"], ["other:5"]]


async def test_multi_selection_sends_to_the_chosen_targets() -> None:
    n, (a, b, c) = number_source(), sinks("a", "b", "c")
    calls: list[tuple[int, list[str]]] = []

    def choose(msg: int, targets: list[str]) -> list[str]:
        calls.append((msg, list(targets)))
        return [t for i, t in enumerate(targets) if msg & (1 << i)]

    wf = WorkflowBuilder(start_executor=n).add_multi_selection_edge_group(n, [a, b, c], selection_func=choose).build()
    assert sorted((await wf.run(0b101)).get_outputs()) == ["a:5", "c:5"]
    assert (await wf.run(0b010)).get_outputs() == ["b:2"]
    assert calls == [(5, ["a", "b", "c"]), (2, ["a", "b", "c"])]


async def test_multi_selection_choosing_an_unknown_target_fails_the_sender() -> None:
    n, (a,) = number_source(), sinks("a")
    wf = (
        WorkflowBuilder(start_executor=n)
        .add_multi_selection_edge_group(n, [a], selection_func=lambda m, t: ["zz"])
        .build()
    )
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run(1)
    assert info.value.executor_id == "n" and "'zz'" in str(info.value.__cause__)


async def test_add_chain_links_each_executor_to_the_next() -> None:
    seen: list[tuple[str, int, Any]] = []
    chain = [recorder(x, seen, forward=True) for x in "pqr"] + [recorder("s", seen)]
    result = await WorkflowBuilder(start_executor=chain[0]).add_chain(chain).build().run("m")
    assert [(e, step) for e, step, _ in seen] == [("p", 1), ("q", 2), ("r", 3), ("s", 4)]
    assert result.get_outputs() == ["s:m>p>q>r"]


# -- the superstep limit ------------------------------------------------------------------------


def counting_loop(limit: int, stop_at: int) -> Workflow:
    @executor(id="loop")
    async def loop(n: int, ctx: WorkflowContext[int, int]) -> None:
        if n >= stop_at:
            await ctx.yield_output(n)
        else:
            await ctx.send_message(n + 1)

    return WorkflowBuilder(start_executor=loop, max_iterations=limit).add_edge(loop, loop).build()


async def test_a_loop_may_use_exactly_max_iterations_supersteps() -> None:
    result = await counting_loop(limit=5, stop_at=4).run(0)  # supersteps run n = 0..4
    assert result.get_outputs() == [4]


async def test_exceeding_max_iterations_fails_the_run_naming_the_limit() -> None:
    wf = counting_loop(limit=5, stop_at=5)
    with pytest.raises(SuperstepLimitError) as info:
        await wf.run(0)
    assert info.value.limit == 5 and "max_iterations=5" in str(info.value) and "'loop'" in str(info.value)
    assert info.value.superstep == 6
    assert wf.run_state is WorkflowRunState.FAILED


# -- failures ------------------------------------------------------------------------------


class Boom(RuntimeError):
    pass


def failing_graph(fail: dict[str, bool]) -> Workflow:
    @executor(id="seed")
    async def seed(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("seeded", True)
        await ctx.send_message(msg)

    @executor(id="ok")
    async def ok(msg: str, ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("ok_wrote", True)
        await ctx.yield_output("ok output")

    @executor(id="bad")
    async def bad(msg: str, ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("bad_wrote", True)
        if fail["bad"]:
            raise Boom(f"cannot handle {msg}")
        await ctx.yield_output("bad output")

    return WorkflowBuilder(start_executor=seed, name="failing").add_fan_out_edges(seed, [ok, bad]).build()


async def test_a_failing_handler_fails_the_run_and_discards_the_supersteps_writes() -> None:
    wf = failing_graph({"bad": True})
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run("order-7")
    err = info.value
    assert err.executor_id == "bad" and err.superstep == 2
    # The step's own exception, as Agent Framework raises it, that is also the library's ExecutorFailedError.
    assert isinstance(err, Boom) and isinstance(err.original, Boom) and str(err) == "cannot handle order-7"
    assert err.summary == "executor 'bad' failed in superstep 2: Boom: cannot handle order-7"
    assert wf.run_state is WorkflowRunState.FAILED
    assert wf.state == {"seeded": True}  # "ok" succeeded in the failed superstep; its write is gone too
    assert err.result is not None
    assert err.result.get_outputs() == []  # "ok"'s output was never committed
    assert err.result.state == {"seeded": True} and err.result.get_final_state() is WorkflowRunState.FAILED
    assert [(e.executor_id, e.error_type) for e in err.result if isinstance(e, ExecutorFailedEvent)] == [
        ("bad", "Boom")
    ]
    assert err.result[-1].type == "failed"  # status events are in the timeline, not the list (as in MAF)
    assert err.result.status_timeline()[-1].state is WorkflowRunState.FAILED
    with pytest.raises(WorkflowError, match="failed"):
        await wf.run(responses={"x": 1})  # a failed run takes no responses


async def test_a_failed_workflow_instance_can_start_a_fresh_run() -> None:
    fail = {"bad": True}
    wf = failing_graph(fail)
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run("first")
    assert info.value.result is not None
    failed_run = info.value.result.run_id
    fail["bad"] = False
    result = await wf.run("second")
    assert result.get_final_state() is WorkflowRunState.IDLE
    assert sorted(result.get_outputs()) == ["bad output", "ok output"]
    assert result.run_id != failed_run
    assert result.state == {"seeded": True, "ok_wrote": True, "bad_wrote": True}


async def test_reset_returns_a_workflow_to_a_clean_slate() -> None:
    @executor(id="ask")
    async def ask(msg: str, ctx: WorkflowContext[str, str]) -> None:
        ctx.set_state("asked", msg)
        await ctx.yield_output("asked")
        await ctx.send_message(msg)

    @executor(id="again")
    async def again(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(msg)

    wf = WorkflowBuilder(start_executor=ask, max_iterations=3).add_edge(ask, again).add_edge(again, again).build()
    with pytest.raises(SuperstepLimitError):
        await wf.run("x")
    assert wf.state == {"asked": "x"} and wf.run_state is WorkflowRunState.FAILED
    wf.reset()
    assert wf.state == {} and wf.pending_requests == [] and wf.run_state is WorkflowRunState.IDLE
    with pytest.raises(WorkflowError, match="no run"):
        await wf.run(responses={"r": 1})


async def test_run_rejects_overlapping_calls_and_missing_input() -> None:
    started, gate = asyncio.Event(), asyncio.Event()

    @executor(id="slow")
    async def slow(msg: str, ctx: WorkflowContext) -> None:
        started.set()
        await wait(gate)

    wf = WorkflowBuilder(start_executor=slow).build()
    first = asyncio.ensure_future(wf.run("a"))
    await wait(started)
    with pytest.raises(WorkflowError, match="already running"):
        await wf.run("b")
    gate.set()
    await asyncio.wait_for(first, TIMEOUT)
    with pytest.raises(WorkflowError, match="needs a start message"):
        await wf.run()


# -- streaming and events -------------------------------------------------------------------


class Progress(WorkflowEvent):
    step: str
    percent: int


async def test_streaming_yields_events_in_superstep_order() -> None:
    @executor(id="first")
    async def first(msg: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.add_event(Progress(step="first", percent=50))
        await ctx.yield_output("half")
        await ctx.send_message(msg)

    class Asker(Executor):
        @handler
        async def ask(self, msg: str, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output("asking")
            await ctx.request_info(Topic(topic=msg), str)

        @response_handler
        async def on(self, request: Topic, answer: str, ctx: WorkflowContext) -> None:
            pass

    wf = WorkflowBuilder(start_executor=first).add_edge(first, Asker("asker")).build()
    events = [ev async for ev in wf.run("go", stream=True)]
    assert [e.type for e in events] == [
        "started",
        "status",
        "superstep_started",
        "executor_invoked",  # each step's events in the order it produced them
        "custom",
        "output",
        "executor_completed",
        "superstep_completed",
        "superstep_started",
        "executor_invoked",
        "output",
        "request_info",
        "status",  # IN_PROGRESS_PENDING_REQUESTS, right after the first request (as MAF emits it)
        "executor_completed",
        "superstep_completed",
        "status",
    ]
    progress = events[4]
    assert isinstance(progress, Progress) and progress.step == "first" and progress.percent == 50
    assert [e.data for e in events if isinstance(e, WorkflowOutputEvent)] == ["half", "asking"]
    statuses = [e.state for e in events if isinstance(e, WorkflowStatusEvent)]
    assert statuses == [
        WorkflowRunState.IN_PROGRESS,
        WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS,
        WorkflowRunState.IDLE_WITH_PENDING_REQUESTS,
    ]
    assert [e.superstep for e in events if isinstance(e, SuperStepStartedEvent)] == [1, 2]
    assert wf.run_state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS


async def test_add_event_takes_only_workflow_events() -> None:
    @executor(id="noisy")
    async def noisy(msg: str, ctx: WorkflowContext) -> None:
        await ctx.add_event({"not": "an event"})  # type: ignore[arg-type]

    with pytest.raises(ExecutorFailedError) as info:
        await WorkflowBuilder(start_executor=noisy).build().run("go")
    assert "WorkflowEvent" in str(info.value.__cause__)


async def test_a_failing_stream_yields_the_failure_events_then_raises() -> None:
    wf = failing_graph({"bad": True})
    seen: list[str] = []
    with pytest.raises(ExecutorFailedError):
        async for ev in wf.run("x", stream=True):
            seen.append(ev.type)
    assert seen[-3:] == ["executor_failed", "failed", "status"]


# -- executor-private state, executors, start messages ----------------------------------------


async def test_executor_state_persists_across_supersteps_and_stays_private() -> None:
    other_saw: list[Any] = []

    class Counter(Executor):
        @handler
        async def tick(self, n: int, ctx: WorkflowContext[int, dict[str, int]]) -> None:
            count = ctx.get_executor_state("count", 0) + 1
            ctx.set_executor_state("count", count)
            if n < 3:
                await ctx.send_message(n + 1)
            else:
                await ctx.yield_output({self.id: count})

    class Other(Executor):
        @handler
        async def look(self, n: int, ctx: WorkflowContext[int]) -> None:
            other_saw.append(ctx.get_executor_state("count"))  # its own key of the same name
            ctx.set_executor_state("count", -1)
            await ctx.send_message(n)

    counter, other = Counter("counter"), Other("other")
    wf = WorkflowBuilder(start_executor=counter).add_edge(counter, other).add_edge(other, counter).build()
    result = await wf.run(0)
    assert result.get_outputs() == [{"counter": 4}]  # counter ran for n = 0, 1, 2, 3
    assert other_saw == [None, -1, -1]  # never the counter's value
    assert result.state == {}  # private keys are not shared state


async def test_executor_state_of_another_executor_cannot_be_written() -> None:
    @executor(id="sneaky")
    async def sneaky(msg: str, ctx: WorkflowContext) -> None:
        ctx.set_state("@victim/count", 1)

    with pytest.raises(ExecutorFailedError) as info:
        await WorkflowBuilder(start_executor=sneaky).build().run("go")
    assert "reserved" in str(info.value.__cause__)


class Assistant(Executor):
    """Several handlers: the message type picks the handler."""

    @handler
    async def on_topic(self, msg: Topic, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"topic {msg.topic} depth {msg.depth}")

    @handler
    async def on_summary(self, msg: Summary, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"summary {msg.text}")

    @handler
    async def on_text(self, msg: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"text {msg}")


@pytest.mark.parametrize(
    ("message", "output"),
    [
        (Topic(topic="x", depth=2), "topic x depth 2"),
        (Summary(text="s"), "summary s"),
        ("hello", "text hello"),
        ({"topic": "json"}, "topic json depth 1"),  # plain JSON coerced into the model handler
        ({"text": "from json"}, "summary from json"),
    ],
)
async def test_class_executor_dispatches_by_message_type(message: Any, output: str) -> None:
    wf = WorkflowBuilder(start_executor=Assistant("assistant")).build()
    assert (await wf.run(message)).get_outputs() == [output]


async def test_a_start_message_no_handler_accepts_is_rejected_before_the_run_starts() -> None:
    wf = WorkflowBuilder(start_executor=Assistant("assistant")).build()
    for bad in ({"unrelated": 1}, 42):
        with pytest.raises(UndeliverableMessageError, match="'assistant'"):
            await wf.run(bad)
    assert wf.run_state is WorkflowRunState.IDLE


async def test_function_executor_ids_default_to_the_function_name_and_can_be_called_directly() -> None:
    out: list[str] = []

    @executor
    async def shout(msg: str, ctx: WorkflowContext[None, str]) -> None:
        out.append(msg.upper())
        await ctx.yield_output(msg.upper())

    assert shout.id == "shout"
    assert (await WorkflowBuilder(start_executor=shout).build().run("hi")).get_outputs() == ["HI"]

    class FakeCtx:
        async def yield_output(self, value: str) -> None:
            out.append(f"fake:{value}")

    await shout("unit", FakeCtx())
    assert out == ["HI", "UNIT", "fake:UNIT"]


async def test_heartbeat_is_a_no_op_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long step heartbeats for Temporal; in process the same graph runs and nothing is sent anywhere."""
    from temporalio import activity

    def outside_an_activity(*details: Any) -> None:
        raise AssertionError(f"heartbeat sent in process: {details}")

    monkeypatch.setattr(activity, "heartbeat", outside_an_activity)
    beats: list[int] = []

    @executor(id="long")
    async def long(n: int, ctx: WorkflowContext[None, int]) -> None:
        for i in range(n):
            ctx.heartbeat(i, {"done": i})
            beats.append(i)
        await ctx.yield_output(n)

    result = await asyncio.wait_for(WorkflowBuilder(start_executor=long).build().run(3), TIMEOUT)
    assert result.get_outputs() == [3]
    assert beats == [0, 1, 2]
