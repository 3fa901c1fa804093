# Workflows ported from LlamaIndex's own test suite: run-llama/workflows-py,
# packages/llama-index-workflows/tests/ (conftest.py, test_streaming.py, test_workflow.py,
# test_workflow_typed_state.py, test_catch_error.py, context/test_context.py, test_resources.py), at commit
# 0b2098b7.
# The workflows are kept as written there; only what the tests asserted on is now an observation
# (programs.observe) that the two runtimes must share, and closures over test-local dicts became results.
#
# The MIT License
#
# Copyright (c) 2026 LlamaIndex Inc.
#
# Permission is hereby granted, free of charge, to any person obtaining a copy
# of this software and associated documentation files (the "Software"), to deal
# in the Software without restriction, including without limitation the rights
# to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
# copies of the Software, and to permit persons to whom the Software is
# furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in
# all copies or substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
# IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
# FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
# AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
# LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
# THE SOFTWARE.
"""LlamaIndex's test-suite workflows, each with how a test drives it and what it observes.

Module level on purpose: a separate worker could import every class (events included).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import decimal
import json
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from llama_index_instrumentation.dispatcher import active_instrument_tags, instrument_tags
from pydantic import BaseModel, Field
from workflows import Context, Workflow, catch_error, step
from workflows.events import (
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    StartEvent,
    StepFailedEvent,
    StopEvent,
    WorkflowFailedEvent,
)
from workflows.resource import Resource, ResourceConfig
from workflows.retry_policy import retry_always, retry_policy, stop_after_attempt, wait_fixed

VOLATILE = frozenset({"failed_at", "elapsed_seconds", "last_failed_at", "first_attempt_at", "timestamp"})
"""Fields that carry wall-clock times: left out of what the two runtimes must agree on."""


def _retry(attempts: int) -> Any:
    return retry_policy(retry=retry_always(), wait=wait_fixed(0), stop=stop_after_attempt(attempts))


# -- conftest.py --------------------------------------------------------------------------------------
class OneTestEvent(Event):
    test_param: str = Field(default="test")


class AnotherTestEvent(Event):
    another_test_param: str = Field(default="another_test")


class LastEvent(Event):
    pass


class DummyWorkflow(Workflow):
    @step
    async def start_step(self, ev: StartEvent) -> OneTestEvent:
        return OneTestEvent()

    @step
    async def middle_step(self, ev: OneTestEvent) -> LastEvent:
        return LastEvent()

    @step
    async def end_step(self, ev: LastEvent) -> StopEvent:
        return StopEvent(result="Workflow completed")


# -- test_streaming.py --------------------------------------------------------------------------------
class StreamingWorkflow(Workflow):
    @step
    async def chat(self, ctx: Context, ev: StartEvent) -> StopEvent:
        async def stream_messages() -> Any:
            resp = "Paul Graham is a British-American computer scientist, entrepreneur, vc, and writer."
            for word in resp.split():
                yield word

        async for w in stream_messages():
            ctx.write_event_to_stream(Event(msg=w))

        return StopEvent(result=None)


# -- test_workflow_typed_state.py ---------------------------------------------------------------------
class MyState(BaseModel):
    name: str = Field(default="Jane")
    age: int = Field(default=25)


class TypedStateWorkflow(Workflow):
    @step
    async def step(self, ctx: Context[MyState], ev: StartEvent) -> StopEvent:
        await ctx.store.set("name", "John")
        await ctx.store.set("age", 30)
        state = await ctx.store.get_state()
        state.age += 1
        await ctx.store.set_state(state)
        return StopEvent()


class SomeState(BaseModel):
    val: int = Field(default=0)


class WorkerEvent(Event):
    pass


class ResultEvent(Event):
    pass


class GatherEvent(Event):
    pass


class ParallelWorkflow(Workflow):
    @step
    async def init(self, ctx: Context[SomeState], ev: StartEvent) -> WorkerEvent | GatherEvent:
        for _ in range(10):
            ctx.send_event(WorkerEvent())
        return GatherEvent()

    @step
    async def worker(self, ctx: Context[SomeState], ev: WorkerEvent) -> ResultEvent:
        async with ctx.store.edit_state() as state:
            state.val += 1
            await asyncio.sleep(0.01)
            if state.val % 2 == 0:
                state.val -= 1
        return ResultEvent()

    @step
    async def gather(self, ctx: Context[SomeState], ev: GatherEvent | ResultEvent) -> StopEvent | None:
        results = ctx.collect_events(ev, [ResultEvent] * 10)
        if not results:
            return None
        state = await ctx.store.get_state()
        return StopEvent(result=state.val)


# -- context/test_context.py --------------------------------------------------------------------------
class CollectTwoWorkflow(Workflow):
    @step
    async def step1(self, _: StartEvent) -> OneTestEvent:
        return OneTestEvent()

    @step
    async def step2(self, _: StartEvent) -> AnotherTestEvent:
        return AnotherTestEvent()

    @step
    async def step3(self, ctx: Context, ev: OneTestEvent | AnotherTestEvent) -> StopEvent | None:
        events = ctx.collect_events(ev, [OneTestEvent, AnotherTestEvent])
        if events is None:
            return None
        return StopEvent(result=events)


class CollectNothingWorkflow(Workflow):
    @step
    async def start_step(self, ctx: Context, ev: StartEvent) -> StopEvent:
        events = ctx.collect_events(ev, [])
        return StopEvent(result=events)


class CollectWithExtraTypeWorkflow(Workflow):
    @step
    async def start_step(self, ctx: Context, ev: StartEvent) -> OneTestEvent | AnotherTestEvent | LastEvent:
        await ctx.store.set("num_to_collect", 2)
        await ctx.store.set("calls", 0)
        ctx.send_event(LastEvent())
        ctx.send_event(OneTestEvent(test_param="first"))
        ctx.send_event(AnotherTestEvent(another_test_param="second"))
        return None  # type: ignore[return-value]

    @step
    async def collector(self, ctx: Context, ev: OneTestEvent | AnotherTestEvent | LastEvent) -> StopEvent | None:
        calls = await ctx.store.get("calls")
        await ctx.store.set("calls", calls + 1)
        events = ctx.collect_events(ev, [OneTestEvent, AnotherTestEvent])
        if events is None:
            return None
        assert len(events) == 2
        assert isinstance(events[0], OneTestEvent)
        assert isinstance(events[1], AnotherTestEvent)
        return StopEvent(result="collected")


class WaitForEventWorkflow(Workflow):
    @step
    async def step1(self, ctx: Context, ev: StartEvent) -> StopEvent:
        result = await ctx.wait_for_event(Event, waiter_event=Event(msg="foo"), waiter_id="test_id")
        return StopEvent(result=result.msg)


class Waiter1(Event):
    msg: str


class Waiter2(Event):
    msg: str


class WaiterResult(Event):
    result: str


class WaitingWorkflow(Workflow):
    @step
    async def spawn_waiters(self, ctx: Context, ev: StartEvent) -> Waiter1 | Waiter2:
        ctx.send_event(Waiter1(msg="foo"))
        ctx.send_event(Waiter2(msg="bar"))
        return None  # type: ignore[return-value]

    @step
    async def waiter_one(self, ctx: Context, ev: Waiter1) -> WaiterResult:
        ctx.write_event_to_stream(InputRequiredEvent(prefix="waiter_one"))  # type: ignore[call-arg]
        new_ev: HumanResponseEvent = await ctx.wait_for_event(
            HumanResponseEvent, requirements={"waiter_id": "waiter_one"}
        )
        return WaiterResult(result=new_ev.response)

    @step
    async def waiter_two(self, ctx: Context, ev: Waiter2) -> WaiterResult:
        ctx.write_event_to_stream(InputRequiredEvent(prefix="waiter_two"))  # type: ignore[call-arg]
        new_ev: HumanResponseEvent = await ctx.wait_for_event(
            HumanResponseEvent, requirements={"waiter_id": "waiter_two"}
        )
        return WaiterResult(result=new_ev.response)

    @step
    async def collect_waiters(self, ctx: Context, ev: WaiterResult) -> StopEvent:
        events: list[WaiterResult] | None = ctx.collect_events(ev, [WaiterResult, WaiterResult])  # type: ignore[assignment]
        if events is None:
            return None  # type: ignore[return-value]
        return StopEvent(result=[e.result for e in events])


# -- test_workflow.py ---------------------------------------------------------------------------------
class StepSendEventToNoneWorkflow(Workflow):
    @step
    async def step1(self, ctx: Context, ev: StartEvent) -> OneTestEvent:
        ctx.send_event(OneTestEvent(), step=None)
        return  # type: ignore[return-value]

    @step
    async def step2(self, ev: OneTestEvent) -> StopEvent:
        return StopEvent(result="step2")


class ReturnsBogusWorkflow(Workflow):
    @step
    async def step1(self, ctx: Context, ev: StartEvent) -> StopEvent:
        return "foo"  # type: ignore[return-value]


class HumanInTheLoopWorkflow(Workflow):
    @step
    async def step1(self, ctx: Context, ev: StartEvent) -> InputRequiredEvent:
        cur_runs = await ctx.store.get("step1_runs", default=0)
        await ctx.store.set("step1_runs", cur_runs + 1)
        return InputRequiredEvent(prefix="Enter a number: ")  # type: ignore[call-arg]

    @step
    async def step2(self, ctx: Context, ev: HumanResponseEvent) -> StopEvent:
        cur_runs = await ctx.store.get("step2_runs", default=0)
        await ctx.store.set("step2_runs", cur_runs + 1)
        return StopEvent(result=ev.response)


# -- test_catch_error.py ------------------------------------------------------------------------------
class InputStart(StartEvent):
    query: str = "hello"


class CatchReturnsStop(Workflow):
    @step(retry_policy=_retry(1))
    async def flaky(self, ev: StartEvent) -> StopEvent:
        raise RuntimeError("transient")

    @catch_error
    async def handler(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result={"recovered_from": ev.step_name})


class CatchRaises(Workflow):
    @step(retry_policy=_retry(1))
    async def flaky(self, ev: StartEvent) -> StopEvent:
        raise RuntimeError("primary")

    @catch_error
    async def handler(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        raise ValueError("handler-failed")


class CatchNotOnRecoverableRetry(Workflow):
    attempts = 0

    @step(retry_policy=_retry(3))
    async def flaky(self, ev: StartEvent) -> StopEvent:
        self.attempts += 1
        if self.attempts < 2:
            raise ValueError("transient")
        return StopEvent(result="recovered")

    @catch_error
    async def handler(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result="caught")


class StepFailedEventFields(Workflow):
    @step(retry_policy=_retry(2))
    async def flaky(self, ev: InputStart) -> StopEvent:
        raise RuntimeError(f"bad:{ev.query}")

    @catch_error
    async def handler(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(
            result={
                "step_name": ev.step_name,
                "input": [type(ev.input_event).__name__, getattr(ev.input_event, "query", None)],
                "exception": [type(ev.exception).__name__, str(ev.exception)],
                "attempts": ev.attempts,
                "aware": ev.failed_at.tzinfo is not None,
            }
        )


class CatchNotOnTimeout(Workflow):
    @step
    async def slow(self, ev: StartEvent) -> StopEvent:
        await asyncio.sleep(5)
        return StopEvent(result="unreachable")

    @catch_error
    async def handler(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result="caught")


class NoCatchFails(Workflow):
    @step(retry_policy=_retry(1))
    async def flaky(self, ev: StartEvent) -> StopEvent:
        raise ValueError("boom")


class CatchReadsState(Workflow):
    @step(retry_policy=_retry(1))
    async def flaky(self, ctx: Context, ev: StartEvent) -> StopEvent:
        await ctx.store.set("progress", "halfway")
        raise RuntimeError("boom")

    @catch_error
    async def handler(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        progress = await ctx.store.get("progress", default="unset")
        return StopEvent(result={"progress": progress, "step": ev.step_name})


class BEvent(Event):
    pass


class ScopedCatchesListed(Workflow):
    @step(retry_policy=_retry(1))
    async def a(self, ev: StartEvent) -> BEvent:
        raise RuntimeError("a failed")

    @step
    async def b(self, ev: BEvent) -> StopEvent:
        return StopEvent(result="b-ran")

    @catch_error(for_steps=["a"])
    async def handle_a(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result={"caught": ev.step_name})


class ScopedSkipsOther(Workflow):
    @step(retry_policy=_retry(1))
    async def a(self, ev: StartEvent) -> BEvent:
        return BEvent()

    @step(retry_policy=_retry(1))
    async def b(self, ev: BEvent) -> StopEvent:
        raise ValueError("b failed")

    @catch_error(for_steps=["a"])
    async def handle_a(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result="caught")


class AFailedMarker(Event):
    pass


class MultipleScopedHandlers(Workflow):
    @step(retry_policy=_retry(1))
    async def a(self, ev: StartEvent) -> BEvent:
        raise RuntimeError("a")

    @step(retry_policy=_retry(1))
    async def b(self, ev: BEvent) -> StopEvent:
        raise RuntimeError("b")

    @catch_error(for_steps=["a"])
    async def handle_a(self, ctx: Context, ev: StepFailedEvent) -> AFailedMarker:
        return AFailedMarker()

    @catch_error(for_steps=["b"])
    async def handle_b(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result={"recovered": ev.step_name})

    @step
    async def finish_a(self, ev: AFailedMarker) -> BEvent:
        return BEvent()


class ScopedAndWildcard(Workflow):
    @step(retry_policy=_retry(1))
    async def a(self, ev: StartEvent) -> BEvent:
        raise RuntimeError("a-fail")

    @step(retry_policy=_retry(1))
    async def b(self, ev: BEvent) -> StopEvent:
        raise RuntimeError("b-fail")

    @catch_error(for_steps=["a"])
    async def handle_a(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result={"via": "scoped", "step": ev.step_name})

    @catch_error
    async def wildcard(self, ctx: Context, ev: StepFailedEvent) -> StopEvent:
        return StopEvent(result={"via": "wildcard", "step": ev.step_name})


# -- test_resources.py --------------------------------------------------------------------------------
class CycleA:
    pass


class CycleB:
    pass


def cyclic_factory_a(b: Annotated[CycleB, "placeholder"]) -> CycleA:
    return CycleA()


def cyclic_factory_b(a: Annotated[CycleA, "placeholder"]) -> CycleB:
    return CycleB()


cyclic_res_a = Resource(cyclic_factory_a)
cyclic_res_b = Resource(cyclic_factory_b)
# The cycle is made by editing the annotations after the resources exist, as the test does.
cyclic_factory_a.__annotations__["b"] = Annotated[CycleB, cyclic_res_b]
cyclic_factory_b.__annotations__["a"] = Annotated[CycleA, cyclic_res_a]


class CircularResourceWorkflow(Workflow):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(disable_validation=True, **kwargs)  # as the test builds it

    @step
    def start_step(self, ev: StartEvent, a: Annotated[CycleA, cyclic_res_a]) -> StopEvent:
        return StopEvent()


class FileData(BaseModel):
    file: str
    permission_mode: str


class MissingResourceConfigWorkflow(Workflow):
    # test_resource_config_deferred_in_workflow, with a config file that never exists.
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(disable_validation=True, **kwargs)  # as the test builds it

    @step
    def start_step(
        self,
        ev: StartEvent,
        config: Annotated[FileData, ResourceConfig(config_file="llama-runtime-suite-no-such-config.json")],
    ) -> StopEvent:
        return StopEvent(result=config.file)


# -- context/test_context.py: test_get_step_context_supports_wait_for_event ----------------------------
def _local_waiting_workflow() -> tuple[type[Workflow], type[Event]]:
    """The test's classes, defined inside a function as there (they cannot be imported by name)."""

    class ResumeEvent(Event):
        value: str = "resumed"

    class GetStepContextWorkflow(Workflow):
        @step
        async def waiting_step(self, ev: StartEvent) -> StopEvent:
            ctx = Context.get_step_context()
            result = await ctx.wait_for_event(ResumeEvent, waiter_event=InputRequiredEvent())
            return StopEvent(result=result.value)

    return GetStepContextWorkflow, ResumeEvent


GetStepContextWorkflow, LocalResumeEvent = _local_waiting_workflow()


def _local_answer_class() -> type[HumanResponseEvent]:
    class LocalAnswer(HumanResponseEvent):
        """An answer class no step declares (the waiter waits for its base), defined in a function."""

    return LocalAnswer


LocalAnswer = _local_answer_class()


class WaitsForAnyAnswer(Workflow):
    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> StopEvent:
        answer = await ctx.wait_for_event(HumanResponseEvent, waiter_event=InputRequiredEvent(prefix="?"))  # type: ignore[call-arg]
        return StopEvent(result=[type(answer).__name__, answer.response])


def _answer_with_local_class(ev: Event) -> Event | None:
    return LocalAnswer(response="yes") if isinstance(ev, InputRequiredEvent) else None  # type: ignore[call-arg]


# -- test_workflow.py: num_concurrent_runs, instrument tags, ctx.to_dict() while a run goes --------------
class ConcurrentRunsWorkflow(Workflow):
    # DummyWorkflowForConcurrentRunsTest (test_workflow_run_num_concurrent), with num_concurrent_runs=1.
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(num_concurrent_runs=1, **kwargs)
        self._lock = threading.Lock()  # the test's asyncio.Lock: the steps may run on another thread's loop
        self.num_active_runs = 0
        self.num_active_runs_history: list[int] = []

    @step
    async def step_one(self, ev: StartEvent) -> StopEvent:
        run_num = ev.get("run_num")
        with self._lock:
            self.num_active_runs += 1
            self.num_active_runs_history.append(self.num_active_runs)
        await asyncio.sleep(0.01)
        with self._lock:
            self.num_active_runs -= 1
        return StopEvent(result=f"Run {run_num}: Done")


class TagReadingWorkflow(Workflow):
    # test_inner_step_can_access_run_id_and_others_from_instrument_tags
    @step
    async def read_tags(self, ctx: Context, ev: StartEvent) -> StopEvent:
        tags = active_instrument_tags.get()
        return StopEvent(result=[tags.get("llamaindex.run_id"), tags.get("foo")])


class EventWithName(Event):
    name: str


class StallableWorkflow(Workflow):
    # test_workflow_context_to_dict; the test's asyncio.Events are threading ones here (steps may run on
    # another thread's loop), and its run counter a class attribute.
    ready = threading.Event()
    proceed = threading.Event()
    runs = 0

    @step
    async def step1(self, ev: StartEvent) -> EventWithName:
        StallableWorkflow.runs += 1
        if StallableWorkflow.runs > 1:
            raise ValueError("Start ran more than once")
        return EventWithName(name="test")

    @step
    async def step2(self, ev: EventWithName) -> StopEvent:
        StallableWorkflow.ready.set()
        while not StallableWorkflow.proceed.is_set():
            await asyncio.sleep(0.01)
        return StopEvent(result="Done")


class ResumeStartEvent(StartEvent):
    topic: str


class CustomHumanWorkflow(Workflow):
    # test_human_in_the_loop_resume_custom_start_event_inactive_ctx
    @step
    async def ask(self, ctx: Context, ev: ResumeStartEvent) -> InputRequiredEvent:
        runs = await ctx.store.get("ask_runs", default=0)
        await ctx.store.set("ask_runs", runs + 1)
        return InputRequiredEvent(prefix=ev.topic)  # type: ignore[call-arg]

    @step
    async def complete(self, ctx: Context, ev: HumanResponseEvent) -> StopEvent:
        runs = await ctx.store.get("complete_runs", default=0)
        await ctx.store.set("complete_runs", runs + 1)
        return StopEvent(result=ev.response)


class Par(Event):
    id: int


class ParDone(Event):
    id: int


class ParallelResumeWorkflow(Workflow):
    # test_workflow_parallel_resume; threading events and a class counter, as above.
    resume = threading.Event()
    started = threading.Event()
    count = 0
    lock = threading.Lock()

    @step
    async def step1(self, ev: StartEvent, ctx: Context) -> Par | None:
        for i in range(4):
            ctx.send_event(Par(id=i))
        return None

    @step(num_workers=4)
    async def par(self, ev: Par) -> ParDone:
        cls = ParallelResumeWorkflow
        with cls.lock:
            cls.count += 1
            if cls.count >= 4:
                cls.started.set()
        if ev.id == 0:
            return ParDone(id=ev.id)
        while not cls.resume.is_set():
            await asyncio.sleep(0.01)
        return ParDone(id=ev.id)

    @step
    async def step3(self, ev: ParDone, ctx: Context) -> StopEvent | None:
        events = ctx.collect_events(ev, [ParDone] * 4)
        if events is None:
            return None
        return StopEvent(result=sorted(e.id for e in events))  # type: ignore[attr-defined]


class CodedError(Exception):
    """An exception whose constructor takes other arguments than it passes on, with an attribute."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(f"{code}: {msg}")
        self.code = code


class RaisesCodedError(Workflow):
    @step
    async def go(self, ev: StartEvent) -> StopEvent:
        raise CodedError(42, "bad thing")


class RaisesKeyError(Workflow):
    @step
    async def go(self, ev: StartEvent) -> StopEvent:
        missing: dict[str, Any] = {}
        return StopEvent(result=missing["missing"])


def _local_error_workflow() -> type[Workflow]:
    class LocalError(Exception):
        pass

    class RaisesLocalError(Workflow):
        @step
        async def go(self, ev: StartEvent) -> StopEvent:
            raise LocalError("from a class defined in a function")

    return RaisesLocalError


RaisesLocalError = _local_error_workflow()


async def drive_exception(wf: Workflow) -> dict[str, Any]:
    """What ``await handler`` raises (the class, ``str()``, ``args`` and attributes, as the step raised it), and
    what the stream's ``WorkflowFailedEvent`` shows of it (``f"{type(e).__name__}: {e}"``, as LlamaIndex's docs
    print it)."""
    handler = wf.run()
    shown: list[str] = []
    with contextlib.suppress(Exception):
        async for ev in handler.stream_events():
            if isinstance(ev, WorkflowFailedEvent):
                shown.append(f"{type(ev.exception).__name__}: {ev.exception}")
    try:
        await handler
    except Exception as e:
        return {
            "type": type(e).__qualname__,
            "str": str(e),
            "args": list(e.args),
            "code": getattr(e, "code", None),
            "stream": shown,
        }
    return {"type": None, "stream": shown}


class RaisesKeyErrorDirectly(Workflow):
    """The issue's case: ``raise KeyError("missing-key")`` (``str()`` is ``"'missing-key'"``, with the quotes)."""

    @step
    async def go(self, ev: StartEvent) -> StopEvent:
        raise KeyError("missing-key")


# -- LlamaIndex's concurrent-execution docs (docs/.../workflows/concurrent_execution.md), with the sleeps fixed
# so that both runtimes see the same timing: "Collecting events", step_three printing what it receives as the
# "Multiple event types" example's step_three does.
_printed: list[str] = []
_QUERY_SLEEP = {"Query 1": 0.3, "Query 2": 0.9, "Query 3": 1.5}


class StepTwoEvent(Event):
    query: str


class StepThreeEvent(Event):
    result: str


class ConcurrentFlow(Workflow):
    @step
    async def start(self, ctx: Context, ev: StartEvent) -> StepTwoEvent | None:
        ctx.send_event(StepTwoEvent(query="Query 1"))
        ctx.send_event(StepTwoEvent(query="Query 2"))
        ctx.send_event(StepTwoEvent(query="Query 3"))
        return None

    @step(num_workers=4)
    async def step_two(self, ctx: Context, ev: StepTwoEvent) -> StepThreeEvent:
        _printed.append(f"Running query  {ev.query}")
        await asyncio.sleep(_QUERY_SLEEP[ev.query])
        return StepThreeEvent(result=ev.query)

    @step
    async def step_three(self, ctx: Context, ev: StepThreeEvent) -> StopEvent | None:
        _printed.append(f"Received event  {ev.result}")
        result = ctx.collect_events(ev, [StepThreeEvent] * 3)
        if result is None:
            return None
        _printed.append(repr(result))
        return StopEvent(result="Done")


async def drive_printed(wf: Workflow) -> dict[str, Any]:
    """What the program prints (each line once: which lines, and how many times), and its result."""
    _printed.clear()
    result = await wf.run()
    return {"printed": sorted(_printed), "last": _printed[-1:], "result": result}


_busy = {"now": 0, "most": 0}
_busy_lock = threading.Lock()


class WorkItem(Event):
    i: int


class ItemDone(Event):
    i: int


class CappedWorkers(Workflow):
    """``@step(num_workers=2)`` handed eight events: at most two invocations at once, under any runtime."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> WorkItem | None:
        for i in range(8):
            ctx.send_event(WorkItem(i=i))
        return None

    @step(num_workers=2)
    async def work(self, ev: WorkItem) -> ItemDone:
        with _busy_lock:
            _busy["now"] += 1
            _busy["most"] = max(_busy["most"], _busy["now"])
        await asyncio.sleep(0.25)
        with _busy_lock:
            _busy["now"] -= 1
        return ItemDone(i=ev.i)

    @step
    async def join(self, ctx: Context, ev: ItemDone) -> StopEvent | None:
        got = ctx.collect_events(ev, [ItemDone] * 8)
        return None if got is None else StopEvent(result=sorted(d.i for d in got))


async def drive_capped(wf: Workflow) -> dict[str, Any]:
    _busy.update(now=0, most=0)
    result = await wf.run()
    return {"most_at_once": _busy["most"], "result": result}


class StoreMid(Event):
    pass


class StoresTypedValues(Workflow):
    """``ctx.store`` values JSON would change: the next step reads them back with their types, as in process."""

    @step
    async def one(self, ctx: Context, ev: StartEvent) -> StoreMid:
        await ctx.store.set("dt", datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC))
        await ctx.store.set("naive", datetime.datetime(2024, 5, 6, 7, 8, 9))
        await ctx.store.set("date", datetime.date(2024, 1, 1))
        await ctx.store.set("td", datetime.timedelta(seconds=90))
        await ctx.store.set("d", decimal.Decimal("1.10"))
        await ctx.store.set("u", uuid.UUID("12345678-1234-5678-1234-567812345678"))
        await ctx.store.set("nan", float("nan"))
        await ctx.store.set("inf", float("-inf"))
        await ctx.store.set("nested", {"when": [datetime.date(2024, 2, 2)], "amount": decimal.Decimal("2.5")})
        return StoreMid()

    @step
    async def two(self, ctx: Context, ev: StoreMid) -> StopEvent:
        out = []
        for key in ("dt", "naive", "date", "td", "d", "u", "nan", "inf", "nested"):
            value = await ctx.store.get(key)
            out.append(f"{key}: {type(value).__name__} {value!r}")
        return StopEvent(result=out)


class DBConnection:
    """examples/feature_walkthrough.ipynb's fake database connection: an object JSON cannot carry."""


async def get_db_connection(**kwargs: Any) -> DBConnection:
    return DBConnection()


class ResourceAsResult(Workflow):
    # examples/feature_walkthrough.ipynb ("Resources"): the step returns the resource as the run's result.
    @step
    async def step1(
        self, ev: StartEvent, db_connection: Annotated[DBConnection, Resource(get_db_connection)]
    ) -> StopEvent:
        return StopEvent(result=db_connection)


class UncachedResourceAsResult(Workflow):
    @step
    async def step1(
        self, ev: StartEvent, db_connection: Annotated[DBConnection, Resource(get_db_connection, cache=False)]
    ) -> StopEvent:
        return StopEvent(result=db_connection)


async def drive_resource_result(wf: Workflow) -> dict[str, Any]:
    """Two runs: the caller gets the connection object itself, the same one both times when cached."""
    first, second = await wf.run(), await wf.run()
    return {"type": type(first).__name__, "same_object": first is second}


class Item(Event):
    n: int


class AppendsInPlace(Workflow):
    """A list read from the store, changed in place and set back, step after step (chat histories are kept
    so): each step's append must reach the next."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Item:
        await ctx.store.set("seen", [])
        return Item(n=0)

    @step
    async def add(self, ctx: Context, ev: Item) -> Item | StopEvent:
        seen = await ctx.store.get("seen")
        seen.append(ev.n)
        await ctx.store.set("seen", seen)
        if ev.n < 3:
            return Item(n=ev.n + 1)
        return StopEvent(result=await ctx.store.get("seen"))


class Items(BaseModel):
    items: list[int] = Field(default_factory=list)


class TypedAppendsInPlace(Workflow):
    @step
    async def start(self, ctx: Context[Items], ev: StartEvent) -> Item:
        return Item(n=0)

    @step
    async def add(self, ctx: Context[Items], ev: Item) -> Item | StopEvent:
        state = await ctx.store.get_state()
        state.items.append(ev.n)
        await ctx.store.set_state(state)
        if ev.n < 3:
            return Item(n=ev.n + 1)
        return StopEvent(result=(await ctx.store.get_state()).items)


def _a_function() -> None:
    pass


class StoresAFunction(Workflow):
    """test_workflow_pickle: a step puts a function in ``ctx.store``. The default runtime keeps it in
    process; on Temporal the store travels as JSON, so the step fails, saying why (a difference by design,
    docs/llama-runtime.md)."""

    @step
    async def step(self, ctx: Context, ev: StartEvent) -> StopEvent:
        cur_step = await ctx.store.get("step", default=0)
        await ctx.store.set("step", cur_step + 1)
        await ctx.store.set("test_fn", _a_function)
        return StopEvent(result="Done")


async def _wait_for(flag: threading.Event) -> None:
    while not flag.is_set():
        await asyncio.sleep(0.01)


async def drive_concurrent_runs(wf: Workflow) -> dict[str, Any]:
    assert isinstance(wf, ConcurrentRunsWorkflow)
    results = await asyncio.gather(*[wf.run(run_num=ix) for ix in range(1, 5)])
    return {"max_concurrent": max(wf.num_active_runs_history), "results": results}


async def drive_tags(wf: Workflow) -> dict[str, Any]:
    with instrument_tags({"foo": "bar"}):
        handler = wf.run()
    result: Any = await handler
    run_id, foo = result
    return {"run_id_tag_is_the_run_id": run_id == handler.run_id, "foo": foo}


async def drive_to_dict_mid_run(wf: Workflow) -> dict[str, Any]:
    """``ctx.to_dict()`` while step2 runs, cancel, resume from it: step1 must not run again."""
    StallableWorkflow.runs = 0
    StallableWorkflow.ready.clear()
    StallableWorkflow.proceed.clear()
    handler = wf.run()
    await _wait_for(StallableWorkflow.ready)
    assert handler.ctx is not None
    data = handler.ctx.to_dict()
    await handler.cancel_run()
    try:
        await handler
        first: Any = "completed"
    except Exception as e:
        first = describe(e)
    handler2 = wf.run(ctx=Context.from_dict(wf, data))
    StallableWorkflow.proceed.set()
    return {"saved_is_running": data["is_running"], "first": first, "result": await handler2}


async def drive_resume_after_cancel(wf: Workflow) -> dict[str, Any]:
    """test_human_in_the_loop_resume_custom_start_event_inactive_ctx: cancel at the human input, save the
    context, resume it with the answer (no start event: the saved run is still running)."""
    handler = wf.run(topic="pizza")
    stream = []
    async for event in handler.stream_events():
        stream.append(describe(event))
        if isinstance(event, InputRequiredEvent):
            break
    await handler.cancel_run()
    assert handler.ctx is not None
    ctx_dict = handler.ctx.to_dict()
    resumed = wf.run(ctx=Context.from_dict(wf, ctx_dict))
    assert resumed.ctx is not None
    resumed.ctx.send_event(HumanResponseEvent(response="42"))  # type: ignore[call-arg]
    resumed_stream = [describe(e) async for e in resumed.stream_events()]
    result = await resumed
    final = resumed.ctx.to_dict()["state"]["state_data"]["_data"]
    return {
        "stream": stream,
        "saved_is_running": ctx_dict["is_running"],
        "resumed_stream": resumed_stream,
        "result": result,
        "runs": {k: json.loads(final[k]) for k in ("ask_runs", "complete_runs")},
    }


async def drive_parallel_resume(wf: Workflow) -> dict[str, Any]:
    """test_workflow_parallel_resume: save while three of four workers wait, cancel, resume: the three
    run again (not the one that finished, nor the step that sent them)."""
    cls = ParallelResumeWorkflow
    cls.count = 0
    cls.started.clear()
    cls.resume.clear()
    handler = wf.run()
    await _wait_for(cls.started)
    await asyncio.sleep(1.0)  # the finished worker's result is taken by then, on either runtime
    assert handler.ctx is not None
    saved = handler.ctx.to_dict()
    running = await handler.ctx.running_steps()
    await handler.cancel_run()
    with contextlib.suppress(Exception):
        await handler
    with cls.lock:
        cls.count = 0
    resumed = wf.run(ctx=Context.from_dict(wf, saved))
    cls.resume.set()
    result = await resumed
    return {"running_steps": running, "result": result, "par_runs_on_resume": cls.count}


async def drive_add_step(wf: Workflow) -> dict[str, Any]:
    """test_validation_cache_invalidated_on_add_step: a step added to the class after a run
    (``@step(workflow=...)``) takes part in the next run. The class is made here, each time: adding a
    step changes the class for good."""

    class AddStepCacheWorkflow(Workflow):
        @step
        async def entry(self, ev: StartEvent) -> StopEvent:
            return StopEvent(result="done")

    built = AddStepCacheWorkflow(timeout=30, runtime=wf.runtime)
    first = await built.run()

    @step(workflow=AddStepCacheWorkflow)
    async def extra_step(ev: StartEvent) -> StopEvent:
        return StopEvent(result="extra")

    second = await built.run()  # entry and extra_step both take the StartEvent: either may finish first
    return {"first": first, "second_finished": second in ("done", "extra")}


def _answer_local_resume(ev: Event) -> Event | None:
    return LocalResumeEvent(value="hello") if isinstance(ev, InputRequiredEvent) else None  # type: ignore[call-arg]


# -- how each is driven, and what is compared -----------------------------------------------------------
def describe(value: Any) -> Any:
    """A value as plain data: events as (type name, fields without wall-clock times), exceptions by class
    and message."""
    if isinstance(value, BaseException):
        return ["exception", type(value).__name__, str(value)]
    if isinstance(value, BaseModel):
        try:
            data: Any = value.model_dump(mode="json")
        except Exception:
            data = str(value)
        if isinstance(value, BaseModel) and isinstance(data, dict):
            data = {k: describe(v) for k, v in data.items() if k not in VOLATILE}
        return [type(value).__name__, data]
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list | tuple):
        return [describe(v) for v in value]
    return value


Answer = Callable[[Event], Event | None]


async def observe(
    wf: Workflow,
    *,
    answer: Answer | None = None,
    store_keys: tuple[str, ...] = (),
    typed_state: bool = False,
    sort_result: bool = False,
    unordered: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run ``wf`` as the ported test did: its stream (answering what ``answer`` answers), its result or
    error, and the store values the test read afterwards.

    ``unordered``: concurrent steps write to the stream, so only which events came is compared, not their
    order (the final ``StopEvent`` is left to ``sort_result``), as the original test did."""
    handler = wf.run(**kwargs)
    stream: list[Any] = []
    try:
        async for ev in handler.stream_events():
            stream.append(describe(ev))
            reply = answer(ev) if answer is not None else None
            if reply is not None:
                assert handler.ctx is not None
                handler.ctx.send_event(reply)
    except Exception as e:
        stream.append(["stream ended with", describe(e)])
    if unordered:
        stream = sorted(json.dumps(x, sort_keys=True) for x in stream if not (x and x[0] == "StopEvent"))
    out: dict[str, Any] = {"stream": stream}
    try:
        result = await handler
        out["result"] = describe(sorted(result) if sort_result else result)
    except Exception as e:
        out["error"] = describe(e)
    if handler.ctx is not None:
        for key in store_keys:
            out[f"store.{key}"] = await handler.ctx.store.get(key, default=None)
        if typed_state:
            out["state"] = describe(await handler.ctx.store.get_state())
    return out


@dataclass(frozen=True)
class Program:
    """One ported test: the workflow, the ``run`` arguments, and what the test looked at."""

    cls: type[Workflow]
    timeout: float = 30.0
    options: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    drive: Callable[[Workflow], Awaitable[dict[str, Any]]] | None = None
    """How the test drove the workflow, when ``observe`` (run, stream, result) does not say it."""

    def build(self, runtime: Any | None) -> Workflow:
        return self.cls(timeout=self.timeout) if runtime is None else self.cls(timeout=self.timeout, runtime=runtime)

    def run(self, runtime: Any | None) -> Awaitable[dict[str, Any]]:
        if self.drive is not None:
            return self.drive(self.build(runtime))
        return observe(self.build(runtime), **self.options)


def _answer_foo(ev: Event) -> Event | None:
    return Event(msg="bar") if type(ev) is Event and getattr(ev, "msg", None) == "foo" else None


def _answer_waiters(ev: Event) -> Event | None:
    if isinstance(ev, InputRequiredEvent) and ev.get("prefix") in ("waiter_one", "waiter_two"):
        response = "foo" if ev.get("prefix") == "waiter_one" else "bar"
        return HumanResponseEvent(response=response, waiter_id=ev.get("prefix"))  # type: ignore[call-arg]
    return None


def _answer_number(ev: Event) -> Event | None:
    return HumanResponseEvent(response="42") if isinstance(ev, InputRequiredEvent) else None  # type: ignore[call-arg]


PROGRAMS: dict[str, Program] = {
    "dummy_chain": Program(DummyWorkflow, source="conftest.py"),
    "streaming": Program(StreamingWorkflow, source="test_streaming.py"),
    "typed_state": Program(TypedStateWorkflow, options={"typed_state": True}, source="test_workflow_typed_state.py"),
    "typed_state_parallel_edit_state": Program(
        ParallelWorkflow, options={"typed_state": True}, source="test_workflow_typed_state.py"
    ),
    "collect_events": Program(CollectTwoWorkflow, source="context/test_context.py"),
    "collect_events_empty": Program(CollectNothingWorkflow, source="context/test_context.py"),
    "collect_events_extra_type": Program(
        CollectWithExtraTypeWorkflow, options={"store_keys": ("calls",)}, source="context/test_context.py"
    ),
    "wait_for_event": Program(WaitForEventWorkflow, options={"answer": _answer_foo}, source="context/test_context.py"),
    "wait_for_two_waiters": Program(
        WaitingWorkflow,
        options={"answer": _answer_waiters, "sort_result": True, "unordered": True},
        source="context/test_context.py",
    ),
    "send_event_step_none": Program(StepSendEventToNoneWorkflow, source="test_workflow.py"),
    "step_returns_bogus": Program(ReturnsBogusWorkflow, source="test_workflow.py"),
    "human_in_the_loop": Program(
        HumanInTheLoopWorkflow,
        options={"answer": _answer_number, "store_keys": ("step1_runs", "step2_runs")},
        source="test_workflow.py",
    ),
    "catch_error_returns_stop": Program(CatchReturnsStop, source="test_catch_error.py"),
    "catch_error_raises": Program(CatchRaises, source="test_catch_error.py"),
    "catch_error_not_on_recoverable_retry": Program(CatchNotOnRecoverableRetry, source="test_catch_error.py"),
    "step_failed_event_fields": Program(
        StepFailedEventFields, options={"start_event": InputStart(query="hello")}, source="test_catch_error.py"
    ),
    "catch_error_not_on_timeout": Program(CatchNotOnTimeout, timeout=1.0, source="test_catch_error.py"),
    "no_catch_error_fails": Program(NoCatchFails, source="test_catch_error.py"),
    "catch_error_reads_state": Program(CatchReadsState, source="test_catch_error.py"),
    "scoped_catches_listed_step": Program(ScopedCatchesListed, source="test_catch_error.py"),
    "scoped_skips_other_step": Program(ScopedSkipsOther, source="test_catch_error.py"),
    "multiple_scoped_handlers": Program(MultipleScopedHandlers, source="test_catch_error.py"),
    "scoped_and_wildcard": Program(ScopedAndWildcard, source="test_catch_error.py"),
    "resource_cycle": Program(CircularResourceWorkflow, source="test_resources.py"),
    "resource_config_missing": Program(MissingResourceConfigWorkflow, source="test_resources.py"),
    "wait_for_event_local_type": Program(
        GetStepContextWorkflow, options={"answer": _answer_local_resume}, source="context/test_context.py"
    ),
    "wait_for_event_subclass_sent": Program(WaitsForAnyAnswer, options={"answer": _answer_with_local_class}),
    "num_concurrent_runs": Program(ConcurrentRunsWorkflow, drive=drive_concurrent_runs, source="test_workflow.py"),
    "instrument_tags": Program(TagReadingWorkflow, drive=drive_tags, source="test_workflow.py"),
    "to_dict_while_running": Program(StallableWorkflow, drive=drive_to_dict_mid_run, source="test_workflow.py"),
    "resume_after_cancel": Program(CustomHumanWorkflow, drive=drive_resume_after_cancel, source="test_workflow.py"),
    "parallel_resume": Program(ParallelResumeWorkflow, drive=drive_parallel_resume, source="test_workflow.py"),
    "add_step_after_a_run": Program(DummyWorkflow, drive=drive_add_step, source="test_workflow.py"),
    "resource_as_result": Program(ResourceAsResult, drive=drive_resource_result, source="feature_walkthrough.ipynb"),
    "uncached_resource_as_result": Program(
        UncachedResourceAsResult, drive=drive_resource_result, source="feature_walkthrough.ipynb"
    ),
    # Not from LlamaIndex's tests: a value from the store changed in place and set back.
    "store_list_changed_in_place": Program(AppendsInPlace, options={"store_keys": ("seen",)}),
    "typed_state_changed_in_place": Program(TypedAppendsInPlace, options={"typed_state": True}),
    # Not from LlamaIndex's tests: what `await handler` raises when a step raises these.
    "error_with_other_init_args": Program(RaisesCodedError, drive=drive_exception),
    "error_key_error": Program(RaisesKeyError, drive=drive_exception),
    "error_class_in_a_function": Program(RaisesLocalError, drive=drive_exception),
    "error_key_error_raised": Program(RaisesKeyErrorDirectly, drive=drive_exception),
    # LlamaIndex's docs, and the cases: each printed line once, num_workers a cap, store value types.
    "concurrent_execution_docs": Program(ConcurrentFlow, drive=drive_printed),
    "num_workers_caps_concurrency": Program(CappedWorkers, drive=drive_capped),
    "store_keeps_value_types": Program(StoresTypedValues),
}
