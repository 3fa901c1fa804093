"""More of LlamaIndex Workflows' documented examples, ported: each written once against a namespace.

Source: ``run-llama/workflows-py`` (MIT licence), ``docs/src/content/docs/llamaagents/workflows/``
(the page each example comes from is named above it). ``m`` holds what the example imports:
``workflows`` and its ``events``, ``resource`` and ``retry_policy`` modules (LlamaIndex 2.26.1),
or ``temporal_workflows.llama`` and the same modules of it. Where an example calls a model
(``llama_index.llms.openai``) a fixed fake stands for it; where it waits seconds, it waits
(almost) nothing. ``tests/test_llama_samples.py`` runs each on LlamaIndex and here and compares
what they print.

Annotations are evaluated where they are written (no ``from __future__ import annotations``):
the classes are local to each example, so a string annotation could not be resolved.
"""

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Annotated, Any

from pydantic import BaseModel


def namespace(package: str) -> SimpleNamespace:
    """What the examples import, from ``workflows`` or ``temporal_workflows.llama``."""
    import importlib

    names: dict[str, Any] = {}
    for sub in ("", ".events", ".resource", ".retry_policy"):
        module: ModuleType = importlib.import_module(package + sub)
        names.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
    names["__name__"] = package
    return SimpleNamespace(**names)


class FakeLLM:
    """Stands for ``OpenAI(model=...)``: ``acomplete`` answers from the prompt alone."""

    async def acomplete(self, prompt: str) -> "Completion":
        return Completion(text=f"<{prompt.split(':')[-1].strip()[:40]}>")


class Completion(BaseModel):
    text: str

    def __str__(self) -> str:
        return self.text


# -- concurrent_execution.md: the first StopEvent ends the run ----------------------------------------------


async def parallel_flow(m: Any) -> None:
    delays = {"Query 1": 0.6, "Query 2": 0.0, "Query 3": 0.3}  # the example's random.randint(0, 5), fixed

    class StepTwoEvent(m.Event):  # type: ignore[misc,name-defined]
        query: str

    class ParallelFlow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def start(self, ctx: m.Context, ev: m.StartEvent) -> StepTwoEvent | None:  # type: ignore[name-defined]
            ctx.send_event(StepTwoEvent(query="Query 1"))
            ctx.send_event(StepTwoEvent(query="Query 2"))
            ctx.send_event(StepTwoEvent(query="Query 3"))
            return None

        @m.step(num_workers=4)  # type: ignore[misc]
        async def step_two(self, ev: StepTwoEvent) -> m.StopEvent:  # type: ignore[name-defined]
            print("Running slow query ", ev.query)
            await asyncio.sleep(delays[ev.query])
            return m.StopEvent(result=ev.query)

    print(await ParallelFlow(timeout=10).run())


# -- concurrent_execution.md: collecting events of several types -------------------------------------------


async def collect_several_types(m: Any) -> None:
    class StepAEvent(m.Event):  # type: ignore[misc,name-defined]
        query: str

    class StepBEvent(m.Event):  # type: ignore[misc,name-defined]
        query: str

    class StepCEvent(m.Event):  # type: ignore[misc,name-defined]
        query: str

    class StepACompleteEvent(m.Event):  # type: ignore[misc,name-defined]
        result: str

    class StepBCompleteEvent(m.Event):  # type: ignore[misc,name-defined]
        result: str

    class StepCCompleteEvent(m.Event):  # type: ignore[misc,name-defined]
        result: str

    class ConcurrentFlow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def start(self, ctx: m.Context, ev: m.StartEvent) -> StepAEvent | StepBEvent | StepCEvent | None:  # type: ignore[name-defined]
            ctx.send_event(StepAEvent(query="Query 1"))
            ctx.send_event(StepBEvent(query="Query 2"))
            ctx.send_event(StepCEvent(query="Query 3"))
            return None

        @m.step  # type: ignore[misc]
        async def step_a(self, ctx: m.Context, ev: StepAEvent) -> StepACompleteEvent:  # type: ignore[name-defined]
            print("Doing something A-ish")
            return StepACompleteEvent(result=ev.query)

        @m.step  # type: ignore[misc]
        async def step_b(self, ctx: m.Context, ev: StepBEvent) -> StepBCompleteEvent:  # type: ignore[name-defined]
            print("Doing something B-ish")
            return StepBCompleteEvent(result=ev.query)

        @m.step  # type: ignore[misc]
        async def step_c(self, ctx: m.Context, ev: StepCEvent) -> StepCCompleteEvent:  # type: ignore[name-defined]
            print("Doing something C-ish")
            return StepCCompleteEvent(result=ev.query)

        @m.step  # type: ignore[misc]
        async def step_three(
            self,
            ctx: m.Context,  # type: ignore[name-defined]
            ev: StepACompleteEvent | StepBCompleteEvent | StepCCompleteEvent,
        ) -> m.StopEvent:  # type: ignore[name-defined]
            print("Received event ", ev.result)
            collected = ctx.collect_events(ev, [StepCCompleteEvent, StepACompleteEvent, StepBCompleteEvent])
            if collected is None:
                return None
            print([type(e).__name__ for e in collected])  # "in the order they are passed to collect_events"
            return m.StopEvent(result="Done")

    print(await ConcurrentFlow(timeout=10).run())


# -- resources.md: a resource shared by steps, and one made per step ---------------------------------------


class Memory:
    """Stands for llama-index's ``Memory``: a list of messages."""

    made = 0

    def __init__(self) -> None:
        Memory.made += 1
        self.messages: list[str] = []

    async def aput(self, message: str) -> None:
        self.messages.append(message)

    def __repr__(self) -> str:
        return f"Memory({self.messages})"


def get_memory(*args: Any, **kwargs: Any) -> Memory:
    return Memory()


async def resources(m: Any) -> None:
    class SecondEvent(m.Event):  # type: ignore[misc,name-defined]
        msg: str

    def build(cache: bool) -> Any:
        class WorkflowWithResource(m.Workflow):  # type: ignore[misc,name-defined]
            @m.step  # type: ignore[misc]
            async def first_step(
                self,
                ev: m.StartEvent,  # type: ignore[name-defined]
                memory: Annotated[Memory, m.Resource(get_memory, cache=cache)],
            ) -> SecondEvent:
                print("Memory before step 1", memory)
                await memory.aput("This is the first step")
                print("Memory after step 1", memory)
                return SecondEvent(msg="This is an input for step 2")

            @m.step  # type: ignore[misc]
            async def second_step(
                self, ev: SecondEvent, memory: Annotated[Memory, m.Resource(get_memory, cache=cache)]
            ) -> m.StopEvent:  # type: ignore[name-defined]
                print("Memory before step 2", memory)
                await memory.aput(ev.msg)
                print("Memory after step 2", memory)
                return m.StopEvent(result="Messages put into memory")

        return WorkflowWithResource()

    for cache in (True, False):
        Memory.made = 0
        print(await build(cache).run(), "- memories made:", Memory.made)


# -- resources.md: config-backed resources, nested values, chained resources --------------------------------


class ClassifierConfig(BaseModel):
    categories: list[str]
    threshold: float


class LLMConfig(BaseModel):
    model: str
    temperature: float
    max_tokens: int


class ConfiguredLLM:
    def __init__(self, model: str, temperature: float, max_tokens: int) -> None:
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens

    async def acomplete(self, prompt: str) -> Completion:
        return Completion(text=f"{self.model}@{self.temperature}/{self.max_tokens}: {prompt}")


async def resource_configs(m: Any, directory: Path) -> None:
    classifier = directory / "classifier.json"
    classifier.write_text(json.dumps({"categories": ["invoice", "letter"], "threshold": 0.8}))
    config = directory / "config.json"
    config.write_text(json.dumps({"classifier": {"categories": ["memo"], "threshold": 0.5}, "other": {}}))
    llm_json = directory / "llm.json"
    llm_json.write_text(json.dumps({"model": "claude", "temperature": 0.2, "max_tokens": 64}))

    class DocumentClassifier(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def classify(
            self,
            ev: m.StartEvent,  # type: ignore[name-defined]
            config: Annotated[ClassifierConfig, m.ResourceConfig(config_file=str(classifier))],
        ) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result=f"Using threshold: {config.threshold} for {config.categories}")

    class NestedClassifier(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def classify(
            self,
            ev: m.StartEvent,  # type: ignore[name-defined]
            config: Annotated[
                ClassifierConfig,
                m.ResourceConfig(config_file=str(config), path_selector="classifier", label="Document Classifier"),
            ],
        ) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result=f"Using threshold: {config.threshold} for {config.categories}")

    def get_llm(config: Annotated[LLMConfig, m.ResourceConfig(config_file=str(llm_json))]) -> ConfiguredLLM:
        return ConfiguredLLM(model=config.model, temperature=config.temperature, max_tokens=config.max_tokens)

    class MyWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def generate(self, ev: m.StartEvent, llm: Annotated[ConfiguredLLM, m.Resource(get_llm)]) -> m.StopEvent:  # type: ignore[name-defined]
            response = await llm.acomplete(ev.input)
            return m.StopEvent(result=response.text)

    print(await DocumentClassifier().run())
    print(await NestedClassifier().run())
    print(await MyWorkflow().run(input="Say hi"))


# -- unbound_functions.md: steps added to a workflow class from outside --------------------------------------


async def unbound_functions(m: Any) -> None:
    class TestWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        pass

    @m.step(workflow=TestWorkflow)  # type: ignore[misc]
    def some_step(ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
        return m.StopEvent(result=f"unbound step saw {ev.topic}")

    print(await TestWorkflow().run(topic="bees"))


# -- async_workflows.md: sync steps, blocking calls in a thread, a CPU pool -----------------------------------


def read_large_file(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


cpu_pool = ThreadPoolExecutor(max_workers=2)


def expensive_computation(data: str) -> str:
    result = data
    for _ in range(1000):
        result = result.strip()
    return result


async def async_workflows(m: Any, directory: Path) -> None:
    class SyncStepWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        def fetch_data(self, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result={"fetched": ev.url})  # stands for requests.get(url).json()

    class FileReaderWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def process_file(self, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            data = await asyncio.to_thread(read_large_file, ev.file_path)
            return m.StopEvent(result=data)

    class ComputeEvent(m.Event):  # type: ignore[misc,name-defined]
        data: str

    class CPUWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def start(self, ev: m.StartEvent) -> ComputeEvent:  # type: ignore[name-defined]
            return ComputeEvent(data=ev.input_data)

        @m.step  # type: ignore[misc]
        async def compute(self, ev: ComputeEvent) -> m.StopEvent:  # type: ignore[name-defined]
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(cpu_pool, expensive_computation, ev.data)
            return m.StopEvent(result=result)

    big = directory / "large.json"
    big.write_text(json.dumps({"rows": [1, 2, 3]}))
    print(await SyncStepWorkflow().run(url="https://api.example.com/data"))
    print(await FileReaderWorkflow().run(file_path=str(big)))
    print(repr(await CPUWorkflow().run(input_data="  padded  ")))


# -- index.md: the joke flow (its OpenAI model faked), with customizing_entry_exit_points.md's stop event -----


async def joke_flow(m: Any) -> None:
    class JokeEvent(m.Event):  # type: ignore[misc,name-defined]
        joke: str

    class JokeFlow(m.Workflow):  # type: ignore[misc,name-defined]
        llm = FakeLLM()

        @m.step  # type: ignore[misc]
        async def generate_joke(self, ev: m.StartEvent) -> JokeEvent:  # type: ignore[name-defined]
            topic = ev.topic
            prompt = f"Write your best joke about {topic}."
            response = await self.llm.acomplete(prompt)
            return JokeEvent(joke=str(response))

        @m.step  # type: ignore[misc]
        async def critique_joke(self, ev: JokeEvent) -> m.StopEvent:  # type: ignore[name-defined]
            joke = ev.joke
            prompt = f"Give a thorough analysis and critique of the following joke: {joke}"
            response = await self.llm.acomplete(prompt)
            return m.StopEvent(result=str(response))

    w = JokeFlow(timeout=60, verbose=False)
    result = await w.run(topic="pirates")
    print(str(result))

    class MyStopEvent(m.StopEvent):  # type: ignore[misc,name-defined]
        critique: Completion

    class TypedJokeFlow(m.Workflow):  # type: ignore[misc,name-defined]
        llm = FakeLLM()

        @m.step  # type: ignore[misc]
        async def generate_joke(self, ev: m.StartEvent) -> JokeEvent:  # type: ignore[name-defined]
            response = await self.llm.acomplete(f"Write your best joke about {ev.topic}.")
            return JokeEvent(joke=str(response))

        @m.step  # type: ignore[misc]
        async def critique_joke(self, ev: JokeEvent) -> MyStopEvent:
            prompt = f"Give a thorough analysis and critique of the following joke: {ev.joke}"
            response = await self.llm.acomplete(prompt)
            return MyStopEvent(critique=response)

    w2 = TypedJokeFlow(timeout=60, verbose=False)
    typed = await w2.run(topic="pirates")
    print(type(typed).__name__, typed.critique.text)


# -- retry_steps.md: composed retry conditions, retry_info, catch_error ---------------------------------------


async def retry_steps(m: Any) -> None:
    calls: list[str] = []
    errors = [ConnectionError("reset"), RuntimeError("rate limit exceeded"), TimeoutError("slow")]

    async def flaky_call() -> str:
        calls.append("call")
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return f"ok after {len(calls)} calls"

    class MyWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step(  # type: ignore[misc]
            retry_policy=m.retry_policy(
                retry=m.retry_if_exception_type((TimeoutError, ConnectionError))
                | m.retry_if_exception_message(match="rate limit|temporarily unavailable"),
                wait=m.wait_fixed(0) + m.wait_random(0, 0),
                stop=m.stop_after_attempt(5) | m.stop_before_delay(30),
            )
        )
        async def call_provider(self, ctx: m.Context, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            info = ctx.retry_info()
            if info.last_exception is not None:
                print(f"retry {info.retry_number} after {info.last_exception}")
            result = await flaky_call()
            return m.StopEvent(result=result)

    print(await MyWorkflow().run())

    async def call_api() -> str:
        raise ValueError("api down")

    class FetchedEvent(m.Event):  # type: ignore[misc,name-defined]
        body: str

    class Pipeline(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step(retry_policy=m.retry_policy(wait=m.wait_fixed(0), stop=m.stop_after_attempt(3)))  # type: ignore[misc]
        async def fetch(self, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result=await call_api())

        @m.catch_error  # type: ignore[misc]
        async def on_failure(self, ctx: m.Context, ev: m.StepFailedEvent) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result={"failed_step": ev.step_name, "error": str(ev.exception)})

    print(await Pipeline().run())

    class TwoHandlers(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def fetch(self, ev: m.StartEvent) -> FetchedEvent:  # type: ignore[name-defined]
            if ev.fail_fetch:
                raise ValueError("fetch failed")
            return FetchedEvent(body="<p>")

        @m.step  # type: ignore[misc]
        async def parse(self, ev: FetchedEvent) -> m.StopEvent:  # type: ignore[name-defined]
            raise ValueError(f"cannot parse {ev.body}")

        @m.catch_error(for_steps=["fetch"])  # type: ignore[misc]
        async def on_fetch_failure(self, ctx: m.Context, ev: m.StepFailedEvent) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result={"fallback": True})

        @m.catch_error  # type: ignore[misc]
        async def on_any_failure(self, ctx: m.Context, ev: m.StepFailedEvent) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result={"aborted": ev.step_name})

    print(await TwoHandlers().run(fail_fetch=True))
    print(await TwoHandlers().run(fail_fetch=False))


# -- examples/feature_walkthrough.ipynb (its first half: no model, no tracing server) -------------------------


class DBConnection:
    """The notebook's fake database connection."""

    made = 0

    def __init__(self) -> None:
        DBConnection.made += 1
        self.number = DBConnection.made

    def __repr__(self) -> str:  # the notebook prints the default repr (an address); a number reads the same
        return f"<DBConnection {self.number}>"


async def get_db_connection(**kwargs: Any) -> DBConnection:
    print("Creating a new DB connection", flush=True)
    return DBConnection()


class State(BaseModel):
    """The walkthrough's typed state (at module level: LlamaIndex finds a state class by its import path)."""

    counter: int = 0


async def feature_walkthrough(m: Any) -> None:
    class UppercaseWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def to_upper(self, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            input_text = ev.get("input_text")
            return m.StopEvent(result=input_text.upper())

    w = UppercaseWorkflow(timeout=10)
    result = await w.run(input_text="hello")
    print(result)

    class InputEvent(m.StartEvent):  # type: ignore[misc,name-defined]
        input_text: str

    class OutputEvent(m.StopEvent):  # type: ignore[misc,name-defined]
        output_text: str

    class InnerEvent(m.Event):  # type: ignore[misc,name-defined]
        text: str

    class TypedUppercaseWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def validate_input(self, ev: InputEvent) -> InnerEvent:
            if len(ev.input_text) < 1:
                raise ValueError("Input text must be at least 1 character long")
            return InnerEvent(text=ev.input_text)

        @m.step  # type: ignore[misc]
        async def to_upper(self, ev: InnerEvent) -> OutputEvent:
            return OutputEvent(output_text=ev.text.upper())

    w2 = TypedUppercaseWorkflow(timeout=10)
    typed = await w2.run(input_text="hello")
    print(typed.output_text)
    try:
        await w2.run(input_text=1234)
    except Exception as e:  # the notebook shows the traceback
        print("refused:", type(e).__name__)

    class AddInputEvent(m.StartEvent):  # type: ignore[misc,name-defined]
        input: str | int

    class AddOutputEvent(m.StopEvent):  # type: ignore[misc,name-defined]
        output: str | int

    class AddTextEvent(m.Event):  # type: ignore[misc,name-defined]
        text: str

    class AddNumberEvent(m.Event):  # type: ignore[misc,name-defined]
        number: int

    class Add10Workflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def route(self, ev: AddInputEvent) -> AddTextEvent | AddNumberEvent | AddOutputEvent:
            if isinstance(ev.input, str):
                if "!" * 10 not in ev.input:
                    return AddTextEvent(text=ev.input)
                return AddOutputEvent(output=ev.input)
            if isinstance(ev.input, int):
                if ev.input < 10:
                    return AddNumberEvent(number=ev.input)
                return AddOutputEvent(output=ev.input)
            raise ValueError("Input must be a string or int")

        @m.step  # type: ignore[misc]
        async def add_text(self, ev: AddTextEvent) -> AddInputEvent:
            return AddInputEvent(input=ev.text + "!")

        @m.step  # type: ignore[misc]
        async def add_number(self, ev: AddNumberEvent) -> AddInputEvent:
            return AddInputEvent(input=ev.number + 1)

    w3 = Add10Workflow(timeout=10)
    print((await w3.run(input="hello")).output)
    print((await w3.run(input=2)).output)

    class IncrementAgainEvent(m.Event):  # type: ignore[misc,name-defined]
        pass

    class StatefulWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def step1(self, ctx: m.Context[State], ev: m.StartEvent) -> IncrementAgainEvent:  # type: ignore[name-defined]
            async with ctx.store.edit_state() as state:
                state.counter += 1
            return IncrementAgainEvent()

        @m.step  # type: ignore[misc]
        async def step2(self, ctx: m.Context[State], ev: IncrementAgainEvent) -> m.StopEvent:  # type: ignore[name-defined]
            async with ctx.store.edit_state() as state:
                state.counter += 1
            return m.StopEvent(result=state.counter)

    w4 = StatefulWorkflow()
    print(await w4.run())
    print(await w4.run())
    ctx = m.Context(w4)
    print(await w4.run(ctx=ctx))
    print(await w4.run(ctx=ctx))
    restored_ctx = m.Context.from_dict(w4, ctx.to_dict())
    print(await w4.run(ctx=restored_ctx))

    class HITLRequiredEvent(m.InputRequiredEvent):  # type: ignore[misc,name-defined]
        prompt: str

    class ResponseEvent(m.HumanResponseEvent):  # type: ignore[misc,name-defined]
        response: str

    class HITLWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def step1(self, ev: m.StartEvent) -> HITLRequiredEvent:  # type: ignore[name-defined]
            return HITLRequiredEvent(prompt="What is your name?")

        @m.step  # type: ignore[misc]
        async def step2(self, ev: ResponseEvent) -> m.StopEvent:  # type: ignore[name-defined]
            return m.StopEvent(result=ev.response)

    w5 = HITLWorkflow()
    handler = w5.run()
    async for ev in handler.stream_events():
        if isinstance(ev, HITLRequiredEvent):
            print(ev.prompt)
            handler.ctx.send_event(ResponseEvent(response="Ada"))  # input("Enter your response: ")
    print("Workflow completed! Got result:", await handler)

    handler = w5.run()
    ctx_data = None
    async for ev in handler.stream_events():
        if isinstance(ev, HITLRequiredEvent):
            ctx_data = handler.ctx.to_dict()
            await handler.cancel_run()
            break
    handler = w5.run(ctx=m.Context.from_dict(w5, ctx_data))
    handler.ctx.send_event(ResponseEvent(response="Grace"))
    print("Workflow completed! Got result:", await handler)

    def db_workflow(cache: bool) -> Any:
        class MyWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
            @m.step  # type: ignore[misc]
            async def step1(
                self,
                ev: m.StartEvent,  # type: ignore[name-defined]
                db_connection: Annotated[DBConnection, m.Resource(get_db_connection, cache=cache)],
            ) -> m.StopEvent:  # type: ignore[name-defined]
                print("Using DB connection", db_connection, flush=True)
                return m.StopEvent(result=db_connection)

        return MyWorkflow()

    for cache in (True, False):
        DBConnection.made = 0
        w6 = db_workflow(cache)
        await w6.run()
        await w6.run()


# -- examples/streaming_internal_events.ipynb (LlamaParse and OpenAI faked) ------------------------------------


class WorkflowState(BaseModel):
    summary_prompt: str = ""


class FakeParsed:
    def __init__(self, text: str) -> None:
        self.text = text

    async def aget_markdown_documents(self) -> list["FakeParsed"]:
        return [self]


class FakeParser:
    """Stands for ``LlamaParse(...)``: "parses" a path into one markdown document."""

    async def aparse(self, path: str) -> FakeParsed:
        return FakeParsed(f"# {path}")


async def get_document_parser(*args: Any, **kwargs: Any) -> FakeParser:
    return FakeParser()


async def get_llm_summary(*args: Any, **kwargs: Any) -> FakeLLM:
    return FakeLLM()


async def streaming_internal_events(m: Any) -> None:
    class InputDocumentEvent(m.StartEvent):  # type: ignore[misc,name-defined]
        document_path: str
        summary_prompt: str

    class ParsedDocumentEvent(m.Event):  # type: ignore[misc,name-defined]
        document_content: str

    class SummaryEvent(m.StopEvent):  # type: ignore[misc,name-defined]
        document_summary: str

    class SummaryWorkflow(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[misc]
        async def get_document_content(
            self,
            ev: InputDocumentEvent,
            ctx: m.Context[WorkflowState],  # type: ignore[name-defined]
            document_parser: Annotated[FakeParser, m.Resource(get_document_parser)],
        ) -> ParsedDocumentEvent:
            async with ctx.store.edit_state() as state:
                state.summary_prompt = ev.summary_prompt
            result = await document_parser.aparse(ev.document_path)
            content = []
            if isinstance(result, list):
                for r in result:
                    content.extend(await r.aget_markdown_documents())
            else:
                content.extend(await result.aget_markdown_documents())
            text_content = ""
            for document in content:
                text_content += document.text + "\n\n---\n\n"
            ctx.write_event_to_stream(ParsedDocumentEvent(document_content=text_content))
            return ParsedDocumentEvent(document_content=text_content)

        @m.step  # type: ignore[misc]
        async def summarize_document(
            self,
            ev: ParsedDocumentEvent,
            ctx: m.Context[WorkflowState],  # type: ignore[name-defined]
            llm: Annotated[FakeLLM, m.Resource(get_llm_summary)],
        ) -> SummaryEvent:
            state = await ctx.store.get_state()
            summary_prompt = state.summary_prompt
            summary_res = await llm.acomplete(
                f"Please create a summary of the following document:\n\n'''\n{ev.document_content}\n'''\n\n"
                f"Following these instructions: {summary_prompt}"
            )
            return SummaryEvent(document_summary=summary_res.text)

    wf = SummaryWorkflow(timeout=600)
    handler = wf.run(
        start_event=InputDocumentEvent(
            document_path="qwen3_embed_paper.pdf",
            summary_prompt="keep a scientific tone",
        )
    )
    async for event in handler.stream_events(expose_internal=True):
        if isinstance(event, m.StepStateChanged):
            print("Name of current step:", event.name)
            print("State of current step:", event.step_state.value)
            print("Input event for current step:", event.input_event_name)
            print("Output event of current step:", event.output_event_name or "No output event yet")
        elif isinstance(event, ParsedDocumentEvent):
            print("Document has been successfully parsed!")
        else:
            continue
    result = await handler
    print(result.document_summary)


EXAMPLES = [
    parallel_flow,
    collect_several_types,
    resources,
    unbound_functions,
    joke_flow,
    retry_steps,
    feature_walkthrough,
    streaming_internal_events,
]
"""The examples that take only ``m``; ``resource_configs`` and ``async_workflows`` take a directory too."""
