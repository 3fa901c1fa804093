# ruff: noqa: E501 - the recorded output lines below are verbatim
"""LlamaIndex's documented examples (llama-index-workflows 2.26 docs and README), as LlamaIndex writes them.

Each example is the program LlamaIndex documents, with LlamaIndex's own imports (``from workflows
import ...``), and :data:`LLAMAINDEX_PRINTED` what it printed under llama-index-workflows 2.26.1's
default runtime. ``tests/integration/test_llama_runtime_docs.py`` runs each under ``TemporalRuntime``
and compares.
"""

from __future__ import annotations

import asyncio
import random

from pydantic import BaseModel, Field
from workflows import Context, Workflow, step
from workflows.events import Event, HumanResponseEvent, InputRequiredEvent, StartEvent, StopEvent
from workflows.retry_policy import retry_policy, stop_after_attempt, wait_fixed


# -- README quick start --------------------------------------------------------------------------
class MyEvent(Event):
    msg: list[str]


class RunState(BaseModel):
    num_runs: int = Field(default=0)


class ReadmeWorkflow(Workflow):
    @step
    async def start(self, ctx: Context[RunState], ev: StartEvent) -> MyEvent:
        async with ctx.store.edit_state() as state:
            state.num_runs += 1

            return MyEvent(msg=[ev.input_msg] * state.num_runs)

    @step
    async def process(self, ctx: Context[RunState], ev: MyEvent) -> StopEvent:
        data_length = len("".join(ev.msg))
        new_msg = f"Processed {len(ev.msg)} times, data length: {data_length}"
        return StopEvent(result=new_msg)


async def readme() -> None:
    workflow = ReadmeWorkflow()
    ctx = Context(workflow)
    result = await workflow.run(input_msg="Hello, world!", ctx=ctx)
    print("Workflow result:", result)
    result = await workflow.run(input_msg="Hello, world!", ctx=ctx)
    print("Workflow result:", result)


# -- branches and loops --------------------------------------------------------------------------
class LoopEvent(Event):
    num_loops: int


class LoopingWorkflow(Workflow):
    @step
    async def prepare_input(self, ev: StartEvent) -> LoopEvent:
        num_loops = random.randint(0, 10)
        return LoopEvent(num_loops=num_loops)

    @step
    async def loop_step(self, ev: LoopEvent) -> LoopEvent | StopEvent:
        if ev.num_loops <= 0:
            return StopEvent(result="Done looping!")

        return LoopEvent(num_loops=ev.num_loops - 1)


class BranchA1Event(Event):
    payload: str


class BranchA2Event(Event):
    payload: str


class BranchB1Event(Event):
    payload: str


class BranchB2Event(Event):
    payload: str


class BranchWorkflow(Workflow):
    @step
    async def start(self, ev: StartEvent) -> BranchA1Event | BranchB1Event:
        if random.randint(0, 1) == 0:
            print("Go to branch A")
            return BranchA1Event(payload="Branch A")
        else:
            print("Go to branch B")
            return BranchB1Event(payload="Branch B")

    @step
    async def step_a1(self, ev: BranchA1Event) -> BranchA2Event:
        print(ev.payload)
        return BranchA2Event(payload=ev.payload)

    @step
    async def step_b1(self, ev: BranchB1Event) -> BranchB2Event:
        print(ev.payload)
        return BranchB2Event(payload=ev.payload)

    @step
    async def step_a2(self, ev: BranchA2Event) -> StopEvent:
        print(ev.payload)
        return StopEvent(result="Branch A complete.")

    @step
    async def step_b2(self, ev: BranchB2Event) -> StopEvent:
        print(ev.payload)
        return StopEvent(result="Branch B complete.")


async def branches_and_loops() -> None:
    random.seed(7)
    print(await LoopingWorkflow().run())
    for seed in (1, 2):
        random.seed(seed)
        print(await BranchWorkflow().run())


# -- concurrency: collect_events -----------------------------------------------------------------
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

    @step(num_workers=4)
    async def step_two(self, ctx: Context, ev: StepTwoEvent) -> StepThreeEvent:
        print("Running query ", ev.query)
        await asyncio.sleep(0)
        return StepThreeEvent(result=ev.query)

    @step
    async def step_three(self, ctx: Context, ev: StepThreeEvent) -> StopEvent | None:
        # wait until we receive 3 events
        result = ctx.collect_events(ev, [StepThreeEvent] * 3)
        if result is None:
            return None

        # do something with all 3 results together
        print(result)
        return StopEvent(result="Done")


async def concurrency() -> None:
    print(await ConcurrentFlow(timeout=10).run())


# -- streaming -----------------------------------------------------------------------------------
class FirstEvent(Event):
    first_output: str


class SecondEvent(Event):
    second_output: str
    response: str


class ProgressEvent(Event):
    msg: str


class StreamingWorkflow(Workflow):
    @step
    async def step_one(self, ctx: Context, ev: StartEvent) -> FirstEvent:
        ctx.write_event_to_stream(ProgressEvent(msg="Step one is happening"))
        return FirstEvent(first_output="First step complete.")

    @step
    async def step_two(self, ctx: Context, ev: FirstEvent) -> SecondEvent:
        full_resp = ""
        for delta in ("It was ", "the best ", "of times"):
            ctx.write_event_to_stream(ProgressEvent(msg=delta))
            full_resp += delta

        return SecondEvent(
            second_output="Second step complete, full response attached",
            response=full_resp,
        )

    @step
    async def step_three(self, ctx: Context, ev: SecondEvent) -> StopEvent:
        ctx.write_event_to_stream(ProgressEvent(msg="Step three is happening"))
        return StopEvent(result="Workflow complete.")


async def streaming() -> None:
    w = StreamingWorkflow(timeout=30, verbose=True)
    handler = w.run(first_input="Start the workflow.")

    async for ev in handler.stream_events():
        if isinstance(ev, ProgressEvent):
            print(ev.msg)

    final_result = await handler
    print("Final result", final_result)


# -- human in the loop ---------------------------------------------------------------------------
class HumanInTheLoopWorkflow(Workflow):
    @step
    async def step1(self, ev: StartEvent) -> InputRequiredEvent:
        return InputRequiredEvent(prefix="Enter a number: ")

    @step
    async def step2(self, ev: HumanResponseEvent) -> StopEvent:
        return StopEvent(result=ev.response)


class WaitWorkflow(Workflow):
    @step
    async def ask_user(self, ctx: Context, ev: StartEvent) -> StopEvent:
        response = await ctx.wait_for_event(
            HumanResponseEvent,
            waiter_event=InputRequiredEvent(prefix="Enter a number: "),
            waiter_id="get_number",
        )
        return StopEvent(result=response.response)


async def human_in_the_loop() -> None:
    workflow = HumanInTheLoopWorkflow()
    handler = workflow.run()
    async for event in handler.stream_events():
        if isinstance(event, InputRequiredEvent):
            response = "42"
            print(event.prefix + response)
            handler.ctx.send_event(HumanResponseEvent(response=response))
    print(await handler)

    handler = workflow.run()
    async for event in handler.stream_events():
        if isinstance(event, InputRequiredEvent):
            ctx_dict = handler.ctx.to_dict()
            await handler.cancel_run()
            break
    restored_ctx = Context.from_dict(workflow, ctx_dict)
    handler = workflow.run(ctx=restored_ctx)
    handler.ctx.send_event(HumanResponseEvent(response="43"))
    async for event in handler.stream_events():  # noqa: B007 - as the documentation writes it
        continue
    print(await handler)

    w = WaitWorkflow()
    handler = w.run()
    async for event in handler.stream_events():
        if isinstance(event, InputRequiredEvent):
            handler.ctx.send_event(HumanResponseEvent(response="44"))
    print(await handler)


# -- state -------------------------------------------------------------------------------------------
class CounterState(BaseModel):
    count: int = Field(default=0)


class StateWorkflow(Workflow):
    @step
    async def start(self, ctx: Context[CounterState], ev: StartEvent) -> StopEvent:
        # Allows for atomic state updates
        async with ctx.store.edit_state() as ctx_state:
            ctx_state.count += 1

        return StopEvent(result="Done!")


class DictStateWorkflow(Workflow):
    @step
    async def my_step(self, ctx: Context, ev: StartEvent) -> StopEvent:
        current_count = await ctx.store.get("count", default=0)
        current_count += 1
        await ctx.store.set("count", current_count)
        async with ctx.store.edit_state() as ctx_state:
            if "total" not in ctx_state:
                ctx_state["total"] = 0
            ctx_state["total"] += 1
        return StopEvent(result=current_count)


async def state() -> None:
    workflow = StateWorkflow()
    ctx = Context(workflow)
    print(await workflow.run(ctx=ctx))
    print(await workflow.run(ctx=ctx))
    ctx = Context.from_dict(workflow, ctx.to_dict())
    print(await workflow.run(ctx=ctx))
    print((await ctx.store.get_state()).count)
    w = DictStateWorkflow()
    ctx = Context(w)
    print(await w.run(ctx=ctx), await w.run(ctx=ctx), await ctx.store.get("total"))


# -- retries ---------------------------------------------------------------------------------------
attempts: list[int] = []


class RetryWorkflow(Workflow):
    @step(
        retry_policy=retry_policy(
            wait=wait_fixed(0),
            stop=stop_after_attempt(10),
        )
    )
    async def flaky_step(self, ctx: Context, ev: StartEvent) -> StopEvent:
        attempts.append(ctx.retry_info().retry_number)
        if len(attempts) < 3:
            raise ConnectionError("flaky")
        return StopEvent(result=f"ok after {len(attempts)} attempts")


async def retries() -> None:
    attempts.clear()
    print(await RetryWorkflow().run(), attempts)


# -- custom start and stop events ----------------------------------------------------------------
class MyCustomStartEvent(StartEvent):
    a_string_field: str


class JokeEvent(Event):
    joke: str


class MyStopEvent(StopEvent):
    critique: str


class JokeFlow(Workflow):
    @step
    async def generate_joke_from_index(self, ev: MyCustomStartEvent) -> JokeEvent:
        return JokeEvent(joke=f"a joke about {ev.a_string_field}")

    @step
    async def critique_joke(self, ev: JokeEvent) -> MyStopEvent:
        return MyStopEvent(critique=f"critique of {ev.joke}")


async def custom_events() -> None:
    w = JokeFlow(timeout=60, verbose=False)
    result = await w.run(start_event=MyCustomStartEvent(a_string_field="pirates"))
    print(type(result).__name__, result.critique)


EXAMPLES = [readme, branches_and_loops, concurrency, streaming, human_in_the_loop, state, retries, custom_events]


LLAMAINDEX_PRINTED = {
    "readme": [
        "Workflow result: Processed 1 times, data length: 13",
        "Workflow result: Processed 2 times, data length: 26",
    ],
    "branches_and_loops": [
        "Done looping!",
        "Go to branch A",
        "Branch A",
        "Branch A",
        "Branch A complete.",
        "Go to branch A",
        "Branch A",
        "Branch A",
        "Branch A complete.",
    ],
    "concurrency": [
        "Running query  Query 1",
        "Running query  Query 2",
        "Running query  Query 3",
        "[StepThreeEvent(result='Query 1'), StepThreeEvent(result='Query 2'), StepThreeEvent(result='Query 3')]",
        "Done",
    ],
    "streaming": [
        "[tick] add: StartEvent(first_input='Start the workflow.')",
        "[step_one:0] started from StartEvent",
        "Step one is happening",
        "[step_one:0] complete with FirstEvent",
        "[tick] add: FirstEvent(first_output='First step complete.')",
        "[step_two:0] started from FirstEvent",
        "It was ",
        "the best ",
        "of times",
        "[step_two:0] complete with SecondEvent",
        "[tick] add: SecondEvent(second_output='Second step complete, full response attached', response='It was the best of times')",
        "[step_three:0] started from SecondEvent",
        "Step three is happening",
        "[result] StopEvent(result='Workflow complete.')",
        "[step_three:0] complete with StopEvent",
        "Final result Workflow complete.",
    ],
    "human_in_the_loop": ["Enter a number: 42", "42", "43", "44"],
    "state": ["Done!", "Done!", "Done!", "3", "1 2 2"],
    "retries": ["ok after 3 attempts [0, 1, 2]"],
    "custom_events": ["MyStopEvent critique of a joke about pirates"],
}
"""What each example printed under llama-index-workflows 2.26.1 (``from workflows import ...``)."""
