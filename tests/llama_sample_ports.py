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


EXAMPLES = [parallel_flow, collect_several_types, resources, unbound_functions, joke_flow, retry_steps]
"""The examples that take only ``m``; ``resource_configs`` and ``async_workflows`` take a directory too."""
