"""LlamaIndex Workflows' API on the engine, in process: what a LlamaIndex program relies on, and where it differs.

Concurrency is forced with ``asyncio.Event`` (never with sleeps) and every
wait is bounded, so a broken guarantee fails fast instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from temporal_workflows.errors import StateConflictError
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
from temporal_workflows.llama.context import DictState
from temporal_workflows.llama.errors import (
    ContextSerdeError,
    ContextStateError,
    WorkflowCancelledByUser,
    WorkflowConfigurationError,
    WorkflowRuntimeError,
    WorkflowTimeoutError,
    WorkflowValidationError,
)
from temporal_workflows.llama.events import (
    StepFailedEvent,
    WorkflowCancelledEvent,
    WorkflowFailedEvent,
    WorkflowTimedOutEvent,
)
from temporal_workflows.llama.resource import Resource
from temporal_workflows.llama.retry_policy import retry_policy, stop_after_attempt, wait_fixed

LIMIT = 10.0
"""Seconds any one run here may take (a hang is a failure)."""


async def run(wf: Workflow, **kwargs: Any) -> Any:
    return await asyncio.wait_for(wf.run(**kwargs), LIMIT)


async def stream(handler: Any) -> list[Event]:
    async def read() -> list[Event]:
        return [ev async for ev in handler.stream_events()]

    return await asyncio.wait_for(read(), LIMIT)


# -- events ----------------------------------------------------------------------------------------------------


class Joke(Event):
    joke: str


class Out(StopEvent):
    output: str


def test_events_keep_undeclared_keys_read_and_print_as_in_llamaindex() -> None:
    ev = StartEvent(topic="pirates", n=2)
    assert ev.topic == "pirates" and ev["n"] == 2 and ev.get("missing", 5) == 5 and "topic" in ev
    assert repr(ev) == "StartEvent()" and str(ev) == "" and ev.model_dump() == {"_data": {"topic": "pirates", "n": 2}}
    assert repr(StopEvent(result={"a": 1}, extra=2)) == "StopEvent(extra=2, result={'a': 1})"
    assert str(StopEvent(result=3)) == "3" and repr(Out(output="x")) == "Out(output='x')"
    with pytest.raises(AttributeError):
        _ = ev.nope


def test_events_json_puts_undeclared_keys_beside_fields_and_keeps_a_results_type() -> None:
    from temporal_workflows._engine.serde import decode, encode

    env = encode(StartEvent(topic="pirates"))
    assert env.data == {"topic": "pirates"}  # what a CLI user types
    assert decode(env).topic == "pirates"
    assert StartEvent.model_validate({"_data": {"topic": "x"}}).topic == "x"  # LlamaIndex's own form reads too

    class Score(BaseModel):
        value: int

    stop = decode(encode(StopEvent(result=Score(value=3))))
    assert stop.result == Score(value=3)


# -- routing, branches, loops, custom start/stop events ------------------------------------------------------


class InputEvent(StartEvent):
    input: str | int


class OutputEvent(StopEvent):
    output: str | int


class AddText(Event):
    text: str


class AddNumber(Event):
    number: int


class Add10(Workflow):
    @step
    async def route(self, ev: InputEvent) -> AddText | AddNumber | OutputEvent:
        if isinstance(ev.input, str):
            return AddText(text=ev.input) if "!" * 10 not in ev.input else OutputEvent(output=ev.input)
        return AddNumber(number=ev.input) if ev.input < 10 else OutputEvent(output=ev.input)

    @step
    async def add_text(self, ev: AddText) -> InputEvent:
        return InputEvent(input=ev.text + "!")

    @step
    async def add_number(self, ev: AddNumber) -> InputEvent:
        return InputEvent(input=ev.number + 1)


async def test_branches_and_loops_route_by_event_type_and_a_custom_stop_event_is_the_result() -> None:
    result = await run(Add10(), input="hello")
    assert isinstance(result, OutputEvent) and result.output == "hello" + "!" * 10
    assert (await run(Add10(), input=2)).output == 10
    assert (await run(Add10(), start_event=InputEvent(input=9))).output == 10
    with pytest.raises(WorkflowRuntimeError, match="Failed creating a start event of type 'InputEvent'"):
        Add10().run(input=[1])


class JokeFlow(Workflow):
    @step
    async def generate(self, ev: StartEvent) -> Joke:
        return Joke(joke=f"about {ev.topic}")

    @step
    async def critique(self, ev: Joke) -> StopEvent:
        return StopEvent(result=f"critique of a joke {ev.joke}")


async def test_kwargs_become_the_start_events_keys_and_the_result_is_the_stop_events_result() -> None:
    assert await run(JokeFlow(), topic="pirates") == "critique of a joke about pirates"


async def test_verbose_prints_what_llamaindex_prints(capsys: pytest.CaptureFixture[str]) -> None:
    await run(JokeFlow(verbose=True), topic="pirates")
    assert capsys.readouterr().out.splitlines() == [
        "[tick] add: StartEvent(topic='pirates')",
        "[generate:0] started from StartEvent",
        "[generate:0] complete with Joke",
        "[tick] add: Joke(joke='about pirates')",
        "[critique:0] started from Joke",
        "[result] StopEvent(result='critique of a joke about pirates')",
        "[critique:0] complete with StopEvent",
    ]


# -- validation at build time ---------------------------------------------------------------------------------


def test_a_workflow_without_a_start_or_stop_step_fails_when_made() -> None:
    class NoStart(Workflow):
        @step
        async def s(self, ev: Joke) -> StopEvent:
            return StopEvent()

    with pytest.raises(WorkflowConfigurationError, match="no @step that accepts StartEvent"):
        NoStart()


def test_produced_and_consumed_events_are_checked_before_a_run() -> None:
    class Unconsumed(Workflow):
        @step
        async def s(self, ev: StartEvent) -> Joke | StopEvent:
            return StopEvent()

    class Unproduced(Workflow):
        @step
        async def s(self, ev: StartEvent) -> StopEvent:
            return StopEvent()

        @step
        async def t(self, ev: Joke) -> StopEvent:
            return StopEvent()

    with pytest.raises(WorkflowValidationError, match="produced but never consumed: Joke"):
        Unconsumed().run()
    with pytest.raises(WorkflowValidationError, match="consumed but never produced: Joke"):
        Unproduced().run()


def test_step_signatures_are_checked_when_decorated() -> None:
    with pytest.raises(WorkflowValidationError, match="at least one parameter annotated as type Event"):

        @step
        async def no_event(self: Any, x: int) -> StopEvent:
            return StopEvent()

    with pytest.raises(WorkflowValidationError, match="must be annotated"):

        class NoReturn(Workflow):
            @step
            async def s(self, ev: StartEvent):  # type: ignore[no-untyped-def]
                return StopEvent()

    with pytest.raises(WorkflowValidationError, match="num_workers must be an integer greater than 0"):

        class NoWorkers(Workflow):
            @step(num_workers=0)
            async def s(self, ev: StartEvent) -> StopEvent:
                return StopEvent()


async def test_a_step_returning_something_else_than_an_event_fails_the_run() -> None:
    class Wrong(Workflow):
        @step
        async def s(self, ev: StartEvent) -> StopEvent:
            return "hello"  # type: ignore[return-value]

    with pytest.raises(WorkflowRuntimeError, match="returned str instead of an Event instance"):
        await run(Wrong())


# -- state ----------------------------------------------------------------------------------------------------


class Counter(BaseModel):
    count: int = Field(default=0)
    names: list[str] = Field(default_factory=list)


class Again(Event):
    pass


class Stateful(Workflow):
    @step
    async def first(self, ctx: Context[Counter], ev: StartEvent) -> Again:
        async with ctx.store.edit_state() as state:
            state.count += 1
        return Again()

    @step
    async def second(self, ctx: Context[Counter], ev: Again) -> StopEvent:
        async with ctx.store.edit_state() as state:
            state.count += 1
            state.names.append("second")
        return StopEvent(result=state.count)


async def test_typed_state_persists_across_runs_with_the_same_context_and_through_to_dict() -> None:
    wf = Stateful()
    assert await run(wf) == 2
    assert await run(wf) == 2  # every run gets a new context by default
    ctx: Context[Counter] = Context(wf)
    assert await run(wf, ctx=ctx) == 2
    assert await run(wf, ctx=ctx) == 4
    data = json.loads(json.dumps(ctx.to_dict()))
    restored: Context[Counter] = Context.from_dict(wf, data)
    assert await run(wf, ctx=restored) == 6
    state = await restored.store.get_state()
    assert isinstance(state, Counter) and state.count == 6 and state.names == ["second"] * 3


class DictFlow(Workflow):
    @step
    async def count(self, ctx: Context, ev: StartEvent) -> StopEvent:
        n = await ctx.store.get("count", default=0)
        await ctx.store.set("count", n + 1)
        await ctx.store.set("deep.a.b", n)
        async with ctx.store.edit_state() as state:
            state["total"] = state.get("total", 0) + 10
        return StopEvent(result=(n + 1, await ctx.store.get("total"), await ctx.store.get("deep.a.b")))


async def test_untyped_state_get_set_paths_and_edit_state() -> None:
    wf = DictFlow()
    ctx = Context(wf)
    assert await run(wf, ctx=ctx) == (1, 10, 0)  # in process the tuple stays a tuple
    assert await run(wf, ctx=ctx) == (2, 20, 1)
    assert isinstance(await ctx.store.get_state(), DictState)
    with pytest.raises(ValueError, match="Path 'missing' not found in state"):
        await ctx.store.get("missing")


class Left(Event):
    pass


class Right(Event):
    pass


class TwoWriters(Workflow):
    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Left | Right | None:
        ctx.send_event(Left())
        ctx.send_event(Right())
        return None

    @step
    async def left(self, ctx: Context, ev: Left) -> StopEvent:
        await ctx.store.set("owner", "left")
        await ctx.store.set("left_only", 1)
        return StopEvent(result="left")

    @step
    async def right(self, ctx: Context, ev: Right) -> StopEvent:
        await ctx.store.set("owner", "right")
        return StopEvent(result="right")


async def test_two_steps_writing_one_key_in_a_superstep_is_an_error_naming_both_not_last_writer_wins() -> None:
    with pytest.raises(StateConflictError, match="state key 'owner' was written by both 'left' and 'right'"):
        await run(TwoWriters())


class Fields(BaseModel):
    a: int = 0
    b: int = 0


class FieldWriters(Workflow):
    @step
    async def start(self, ctx: Context[Fields], ev: StartEvent) -> Left | Right | None:
        ctx.send_event(Left())
        ctx.send_event(Right())
        return None

    @step
    async def left(self, ctx: Context[Fields], ev: Left) -> Again:
        async with ctx.store.edit_state() as state:
            state.a = 1
        return Again()

    @step
    async def right(self, ctx: Context[Fields], ev: Right) -> Again:
        async with ctx.store.edit_state() as state:
            state.b = 2
        return Again()

    @step
    async def join(self, ctx: Context[Fields], ev: Again) -> StopEvent | None:
        if ctx.collect_events(ev, [Again, Again]) is None:
            return None
        return StopEvent(result=(await ctx.store.get_state()).model_dump())


async def test_steps_editing_different_fields_of_typed_state_in_one_superstep_merge() -> None:
    assert await run(FieldWriters()) == {"a": 1, "b": 2}


# -- concurrency and collect_events ----------------------------------------------------------------------------


class Query(Event):
    query: str


class Done(Event):
    result: str


class Concurrent(Workflow):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.most = 0
        self.all_started = asyncio.Event()

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Query | None:
        for i in range(ev.n):
            ctx.send_event(Query(query=f"q{i}"))
        return None

    @step(num_workers=3)
    async def work(self, ev: Query) -> Done:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.most == 3:
            self.all_started.set()
        await asyncio.wait_for(self.all_started.wait(), LIMIT)
        self.in_flight -= 1
        return Done(result=ev.query)

    @step(num_workers=1)
    async def gather(self, ctx: Context, ev: Done) -> StopEvent | None:
        got = ctx.collect_events(ev, [Done] * 5)
        if got is None:
            return None
        return StopEvent(result=[d.result for d in got])


async def test_num_workers_bounds_a_steps_concurrency_and_collect_events_releases_in_order() -> None:
    wf = Concurrent()
    assert await run(wf, n=5) == ["q0", "q1", "q2", "q3", "q4"]
    assert wf.most == 3


class CA(Event):
    v: str


class CB(Event):
    v: str


class TwoKinds(Workflow):
    @step
    async def start(self, ctx: Context, ev: StartEvent) -> CA | CB | None:
        ctx.send_event(CA(v="a"))
        ctx.send_event(CB(v="b"))
        return None

    @step
    async def join(self, ctx: Context, ev: CA | CB) -> StopEvent | None:
        got = ctx.collect_events(ev, [CB, CA])
        return None if got is None else StopEvent(result=[e.v for e in got])


async def test_collect_events_of_several_types_returns_them_in_the_order_asked() -> None:
    assert await run(TwoKinds()) == ["b", "a"]


async def test_send_event_to_a_named_step_is_checked() -> None:
    class Targeted(Workflow):
        @step
        async def start(self, ctx: Context, ev: StartEvent) -> Joke | None:
            with pytest.raises(WorkflowRuntimeError, match="Step nope does not exist"):
                ctx.send_event(Joke(joke="x"), step="nope")
            with pytest.raises(WorkflowRuntimeError, match="Step start does not accept event of type"):
                ctx.send_event(Joke(joke="x"), step="start")
            ctx.send_event(Joke(joke="x"), step="second")
            return None

        @step
        async def second(self, ev: Joke) -> StopEvent:
            return StopEvent(result=ev.joke)

    assert await run(Targeted()) == "x"


async def test_a_stop_event_ends_the_run_and_drops_what_other_branches_still_had_queued() -> None:
    seen: list[str] = []

    class Race(Workflow):
        @step
        async def start(self, ctx: Context, ev: StartEvent) -> Left | Right | None:
            ctx.send_event(Left())
            ctx.send_event(Right())
            return None

        @step
        async def left(self, ev: Left) -> StopEvent:
            return StopEvent(result="left wins")

        @step
        async def right(self, ev: Right) -> Again:
            return Again()

        @step
        async def again(self, ev: Again) -> StopEvent:
            seen.append("again ran")
            return StopEvent(result="too late")

    assert await run(Race()) == "left wins"
    assert seen == []


# -- streaming ------------------------------------------------------------------------------------------------


class Progress(Event):
    msg: str


class Streaming(Workflow):
    @step
    async def one(self, ctx: Context, ev: StartEvent) -> Joke:
        ctx.write_event_to_stream(Progress(msg="one"))
        return Joke(joke="j")

    @step
    async def two(self, ctx: Context, ev: Joke) -> StopEvent:
        for word in ("a", "b", "c"):
            ctx.write_event_to_stream(Progress(msg=word))
        return StopEvent(result="done")


async def test_stream_events_yields_written_events_in_order_then_the_stop_event_once() -> None:
    handler = Streaming().run()
    events = await stream(handler)
    assert [e.msg if isinstance(e, Progress) else type(e).__name__ for e in events] == [
        "one",
        "a",
        "b",
        "c",
        "StopEvent",
    ]
    assert await handler == "done"
    with pytest.raises(WorkflowRuntimeError, match="already been consumed"):
        await stream(handler)


async def test_streamed_events_are_the_objects_the_steps_wrote() -> None:
    written: list[Event] = []

    class Same(Workflow):
        @step
        async def s(self, ctx: Context, ev: StartEvent) -> StopEvent:
            ev2 = Progress(msg="x")
            written.append(ev2)
            ctx.write_event_to_stream(ev2)
            return StopEvent()

    events = await stream(Same().run())
    assert events[0] is written[0]


# -- human in the loop ------------------------------------------------------------------------------------------


class HITL(Workflow):
    @step
    async def step1(self, ev: StartEvent) -> InputRequiredEvent:
        return InputRequiredEvent(prefix="Enter a number: ")

    @step
    async def step2(self, ev: HumanResponseEvent) -> StopEvent:
        return StopEvent(result=ev.response)


async def test_input_required_is_streamed_and_a_human_response_sent_in_continues_the_run() -> None:
    handler = HITL().run()

    async def answer() -> list[str]:
        seen: list[str] = []
        async for ev in handler.stream_events():
            seen.append(type(ev).__name__)
            if isinstance(ev, InputRequiredEvent):
                assert ev.prefix == "Enter a number: "
                handler.ctx.send_event(HumanResponseEvent(response="42"))
        return seen

    assert await asyncio.wait_for(answer(), LIMIT) == ["InputRequiredEvent", "StopEvent"]
    assert await handler == "42"


async def test_a_run_paused_for_input_resumes_from_to_dict_in_a_new_handler() -> None:
    wf = HITL()
    handler = wf.run()
    data: dict[str, Any] = {}
    async for ev in handler.stream_events():
        if isinstance(ev, InputRequiredEvent):
            data = json.loads(json.dumps(handler.ctx.to_dict()))
            await handler.cancel_run()
            break
    with pytest.raises(WorkflowCancelledByUser):
        await handler
    resumed = wf.run(ctx=Context.from_dict(wf, data))
    resumed.ctx.send_event(HumanResponseEvent(response="7"))
    assert await asyncio.wait_for(resumed, LIMIT) == "7"


class SideEffects:
    def __init__(self) -> None:
        self.before = 0
        self.keys: list[str] = []


class Asker(Workflow):
    """A step that does work, streams, writes state and sends before it waits."""

    def __init__(self, effects: SideEffects, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.effects = effects

    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> Joke | StopEvent:
        self.effects.before += 1
        self.effects.keys.append(ctx.idempotency_key)
        n = await ctx.store.get("n", default=0)
        await ctx.store.set("n", n + 1)
        ctx.write_event_to_stream(Progress(msg="asking"))
        ctx.send_event(Joke(joke="sent before the wait"))
        reply = await ctx.wait_for_event(
            HumanResponseEvent, waiter_event=InputRequiredEvent(prefix="name?"), requirements={"kind": "name"}
        )
        return StopEvent(result=(reply.response, n, await ctx.store.get("n")))

    @step
    async def count_jokes(self, ctx: Context, ev: Joke) -> None:
        await ctx.store.set("jokes", await ctx.store.get("jokes", default=0) + 1)


async def test_wait_for_event_in_process_does_not_repeat_the_work_before_the_wait() -> None:
    effects = SideEffects()
    handler = Asker(effects).run()
    names: list[str] = []
    async for ev in handler.stream_events():
        names.append(type(ev).__name__)
        if isinstance(ev, InputRequiredEvent):
            handler.ctx.send_event(HumanResponseEvent(response="wrong kind", kind="other"))  # no requirement match
            handler.ctx.send_event(HumanResponseEvent(response="Ann", kind="name"))
    assert await handler == ("Ann", 0, 1)
    assert await handler.ctx.store.get("jokes") == 1
    assert names == ["Progress", "InputRequiredEvent", "StopEvent"]
    assert effects.before == 1  # LlamaIndex runs it twice


async def test_wait_for_event_re_run_after_from_dict_replays_instead_of_redoing() -> None:
    effects = SideEffects()
    wf = Asker(effects)
    handler = wf.run()
    data: dict[str, Any] = {}
    async for ev in handler.stream_events():
        if isinstance(ev, InputRequiredEvent):
            data = json.loads(json.dumps(handler.ctx.to_dict()))
            await handler.cancel_run()
            break
    resumed = wf.run(ctx=Context.from_dict(wf, data))
    resumed.ctx.send_event(HumanResponseEvent(response="Ann", kind="name"))
    events = await stream(resumed)
    # The step ran again from the top (its process is gone), but what it read comes back the same, and what it
    # streamed, wrote and sent before the wait is not done again: n is 1, one joke counted, nothing re-streamed.
    assert await resumed == ("Ann", 0, 1)
    assert await resumed.ctx.store.get("jokes") == 1
    assert [type(e).__name__ for e in events] == ["StopEvent"]
    assert effects.before == 2 and effects.keys[0] == effects.keys[1]  # same idempotency key on the re-run


async def test_wait_for_event_times_out_with_timeout_error_in_the_step() -> None:
    class Impatient(Workflow):
        @step
        async def s(self, ctx: Context, ev: StartEvent) -> StopEvent:
            try:
                await ctx.wait_for_event(HumanResponseEvent, timeout=0.05)
            except TimeoutError as e:
                return StopEvent(result=str(e))
            return StopEvent(result="answered")

    assert await run(Impatient()) == "Timed out waiting for HumanResponseEvent"


# -- failures, retries, timeouts, cancellation --------------------------------------------------------------


async def test_a_failing_step_raises_its_own_exception_after_a_failure_event() -> None:
    class Boom(Workflow):
        @step
        async def s(self, ev: StartEvent) -> StopEvent:
            raise ValueError("bad input")

    handler = Boom().run()
    events = await stream(handler)
    assert isinstance(events[-1], WorkflowFailedEvent) and events[-1].step_name == "s"
    with pytest.raises(ValueError, match="bad input"):
        await handler


async def test_retry_policy_runs_the_step_again_and_retry_info_says_which_attempt() -> None:
    seen: list[tuple[int, str]] = []
    jokes: list[str] = []

    class Flaky(Workflow):
        @step(retry_policy=retry_policy(wait=wait_fixed(0), stop=stop_after_attempt(3)))
        async def s(self, ctx: Context, ev: StartEvent) -> Joke | Again:
            info = ctx.retry_info()
            seen.append((info.retry_number, repr(info.last_exception)))
            ctx.send_event(Joke(joke=f"attempt {info.retry_number}"))  # a failed attempt's sends are dropped
            if info.retry_number < 2:
                raise ConnectionError(f"fail {info.retry_number}")
            return Again()

        @step
        async def count(self, ev: Joke) -> None:
            jokes.append(ev.joke)

        @step
        async def finish(self, ev: Again) -> Done:
            return Done(result="ok")

        @step
        async def end(self, ev: Done) -> StopEvent:
            return StopEvent(result=ev.result)

    assert await run(Flaky()) == "ok"
    assert seen == [(0, "None"), (1, "ConnectionError('fail 0')"), (2, "ConnectionError('fail 1')")]
    assert jokes == ["attempt 2"]


async def test_catch_error_gets_a_step_failed_event_when_retries_are_exhausted() -> None:
    class Pipeline(Workflow):
        @step(retry_policy=retry_policy(wait=wait_fixed(0), stop=stop_after_attempt(2)))
        async def fetch(self, ev: StartEvent) -> StopEvent:
            raise ConnectionError("down")

        @catch_error
        async def on_failure(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
            return StopEvent(result=(ev.step_name, str(ev.exception), ev.attempts))

    assert await run(Pipeline()) == ("fetch", "down", 2)


async def test_timeout_fails_the_run_naming_the_running_steps() -> None:
    class Slow(Workflow):
        @step
        async def slow(self, ev: StartEvent) -> StopEvent:
            await asyncio.sleep(LIMIT)
            return StopEvent()

    handler = Slow(timeout=0.1).run()
    events = await stream(handler)
    assert isinstance(events[-1], WorkflowTimedOutEvent) and events[-1].active_steps == ["slow"]
    with pytest.raises(WorkflowTimeoutError, match=r"timed out after 0\.1 seconds\. Currently active steps: slow"):
        await handler


async def test_an_idle_run_without_a_stop_event_waits_until_its_timeout_as_in_llamaindex() -> None:
    class Idle(Workflow):
        @step
        async def s(self, ev: StartEvent) -> StopEvent | None:
            return None

    with pytest.raises(WorkflowTimeoutError, match="No steps active"):
        await run(Idle(timeout=0.1))


async def test_cancel_run_ends_the_stream_with_a_cancelled_event() -> None:
    handler = HITL().run()
    await handler.cancel_run()
    events = await stream(handler)
    assert isinstance(events[-1], WorkflowCancelledEvent)
    with pytest.raises(WorkflowCancelledByUser):
        await handler


async def test_context_faces_refuse_calls_from_the_wrong_place() -> None:
    wf = JokeFlow()
    ctx = Context(wf)
    with pytest.raises(ContextStateError, match="send_event\\(\\) called before workflow started"):
        ctx.send_event(Joke(joke="x"))
    with pytest.raises(ContextStateError):
        ctx.write_event_to_stream(Joke(joke="x"))


# -- resources, sync steps, free functions, live values ---------------------------------------------------------


made: list[str] = []


def get_memory() -> list[str]:
    made.append("memory")
    return []


class WithMemory(Workflow):
    @step
    async def first(self, ev: StartEvent, memory: Annotated[list[str], Resource(get_memory)]) -> Joke:
        memory.append("first")
        return Joke(joke="x")

    @step
    async def second(self, ev: Joke, memory: Annotated[list[str], Resource(get_memory)]) -> StopEvent:
        memory.append("second")
        return StopEvent(result=list(memory))


async def test_resources_are_made_once_per_workflow_and_shared_by_its_steps() -> None:
    made.clear()
    wf = WithMemory()
    assert await run(wf) == ["first", "second"]
    assert await run(wf) == ["first", "second", "first", "second"]
    assert made == ["memory"]


class SyncAndFree(Workflow):
    @step
    def sync_step(self, ev: StartEvent) -> Joke:
        return Joke(joke=f"sync {ev.what}")


@step(workflow=SyncAndFree)
async def free_step(ev: Joke) -> StopEvent:
    return StopEvent(result=ev.joke + " and free")


async def test_plain_def_steps_and_free_function_steps_run() -> None:
    assert await run(SyncAndFree(), what="data") == "sync data and free"


class Client:
    """Not serializable (it holds a lock, as a real client holds connections): LlamaIndex passes it by
    reference in process, and so does this engine. (A plain class with no such attribute would have a JSON
    form: its attributes.)"""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class LiveValues(Workflow):
    @step
    async def s(self, ctx: Context, ev: StartEvent) -> StopEvent:
        await ctx.store.set("client", ev.client)
        return StopEvent(result=(ev.client, await ctx.store.get("client")))


async def test_in_process_values_keep_their_identity_but_to_dict_refuses_what_has_no_json_form() -> None:
    client = Client()
    ctx = Context(wf := LiveValues())
    result = await run(wf, ctx=ctx, client=client)
    assert result[0] is client and result[1] is client
    with pytest.raises(ContextSerdeError, match="no JSON form"):
        ctx.to_dict()


# -- retry policy building blocks -------------------------------------------------------------------------------


def test_retry_policies_compose_as_in_llamaindex() -> None:
    from temporal_workflows.llama.retry_policy import (
        retry_if_exception_message,
        retry_if_exception_type,
        stop_after_delay,
        wait_chain,
        wait_exponential,
    )

    policy = retry_policy(
        retry=retry_if_exception_type(TimeoutError) | retry_if_exception_message(match="rate limit"),
        wait=wait_fixed(1) + wait_exponential(multiplier=1, exp_base=2, max=4),
        stop=stop_after_attempt(4) | stop_after_delay(100),
    )
    assert [policy.next(0.0, n, TimeoutError()) for n in (1, 2, 3, 4)] == [2.0, 3.0, 5.0, None]
    assert policy.next(0.0, 1, ValueError("hit a rate limit")) == 2.0
    assert policy.next(0.0, 1, ValueError("nope")) is None
    assert policy.next(200.0, 1, TimeoutError()) is None
    chain = retry_policy(wait=wait_chain(wait_fixed(1), wait_fixed(5)), stop=stop_after_attempt(10))
    assert [chain.next(0, n, Exception()) for n in (1, 2, 3)] == [1.0, 5.0, 5.0]
    assert retry_policy().next(0, 1, Exception()) == 5.0  # any error, 5 s apart, at most 3 attempts
    assert retry_policy().next(0, 3, Exception()) is None


class Answer(Event):
    text: str


class Later(Event):
    hops: int


class InternalWait(Workflow):
    """A step waits for an event another step sends (not one from outside): it resolves the wait."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Joke | Later | None:
        ctx.send_event(Joke(joke="ask"))
        ctx.send_event(Later(hops=0))
        return None

    @step
    async def asker(self, ctx: Context, ev: Joke) -> StopEvent:
        got = await ctx.wait_for_event(Answer, requirements={"text": "42"})
        return StopEvent(result=f"asker got {got.text}")

    @step(skip_graph_checks=["dead_end"])  # it ends nowhere by its annotations: its Answer goes to a wait
    async def later(self, ctx: Context, ev: Later) -> Later | None:
        if ev.hops < 1:
            return Later(hops=ev.hops + 1)  # by now the asker's wait is committed
        ctx.send_event(Answer(text="41"))  # not what it requires: resolves nothing
        ctx.send_event(Answer(text="42"))
        return None


async def test_an_event_sent_by_a_step_answers_a_matching_wait_of_another() -> None:
    assert await run(InternalWait()) == "asker got 42"


async def test_a_plain_def_step_can_stream_and_find_its_context() -> None:
    class SyncStreams(Workflow):
        @step
        def s(self, ctx: Context, ev: StartEvent) -> StopEvent:
            ctx.write_event_to_stream(Progress(msg="from a thread"))
            return StopEvent(result=Context.get_step_context().idempotency_key == ctx.idempotency_key)

    handler = SyncStreams().run()
    events = await stream(handler)
    assert [e.msg for e in events if isinstance(e, Progress)] == ["from a thread"]
    assert await handler is True
