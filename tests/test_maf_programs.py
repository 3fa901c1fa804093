"""Agent Framework programs run side by side with Agent Framework itself (issue #25, items 1-10).

Each test runs one program, written once against a module (``agent_framework`` or
``temporal_workflows``), on both, and checks that ours prints what Agent Framework
1.23 prints. Annotations are evaluated where written (no ``from __future__ import
annotations``): Agent Framework reads ``mod.WorkflowContext[...]`` from the live annotation.
"""

import gc
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Never

import agent_framework
import pytest
from agent_framework import (
    Agent,
    AgentExecutorRequest,
    AgentExecutorResponse,
    AgentResponse,
    AgentResponseUpdate,
    AgentSession,
    InMemoryHistoryProvider,
    Message,
)
from pydantic import BaseModel

import temporal_workflows
from temporal_workflows.agents.testing import ScriptedChatClient

MODULES = [agent_framework, temporal_workflows]
ids = ["maf", "ours"]


# -- 3. plain classes as messages -------------------------------------------------------------------------


class SplitCompleted:
    """A marker class with no fields, as MAF's map-reduce sample sends."""


class Counted:
    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.count = len(items)


def marker_program(mod: Any) -> Any:
    class Splitter(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def go(self, text: str, ctx: mod.WorkflowContext[SplitCompleted]) -> None:  # type: ignore[name-defined]
            ctx.set_state("counted", Counted(text.split()))
            await ctx.send_message(SplitCompleted())

    class Done(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def go(self, m: SplitCompleted, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
            c = ctx.get_state("counted")
            await ctx.yield_output(f"{type(m).__name__} {type(c).__name__} {c.items} {c.count}")

    s, d = Splitter(id="split"), Done(id="done")
    storage = mod.InMemoryCheckpointStorage()
    return mod.WorkflowBuilder(start_executor=s, checkpoint_storage=storage).add_edge(s, d).build(), storage


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_a_marker_class_message_and_a_plain_state_value_work_as_in_agent_framework(mod: Any) -> None:
    workflow, storage = marker_program(mod)
    result = await workflow.run("a b c")
    assert result.get_outputs() == ["SplitCompleted Counted ['a', 'b', 'c'] 3"]
    assert await storage.list_checkpoints(workflow_name=workflow.name)  # checkpointed, on both


# -- 10. imports --------------------------------------------------------------------------------------------


def test_agent_executor_types_import_from_where_workflow_builder_comes_from() -> None:
    from temporal_workflows import AgentExecutor, AgentExecutorRequest, AgentExecutorResponse, WorkflowBuilder
    from temporal_workflows.agents import AgentExecutor as FromAgents

    assert AgentExecutor is FromAgents and WorkflowBuilder is temporal_workflows.WorkflowBuilder
    assert AgentExecutorRequest is agent_framework.AgentExecutorRequest
    assert AgentExecutorResponse is agent_framework.AgentExecutorResponse
    assert "AgentExecutor" in dir(temporal_workflows)
    with pytest.raises(AttributeError):
        temporal_workflows.NoSuchName  # noqa: B018


def test_importing_the_graph_api_does_not_import_agent_framework_and_its_absence_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['agent_framework'] = None  # as if the agents extra were not installed\n"
        "import temporal_workflows\n"
        "assert 'temporal_workflows.agents' not in sys.modules\n"
        "from temporal_workflows import WorkflowBuilder, executor\n"
        "try:\n"
        "    from temporal_workflows import AgentExecutor\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "'agents' extra" in run.stdout and "pip install 'temporal-workflows[agents]'" in run.stdout


# -- 2. checkpoint numbering -----------------------------------------------------------------------------


@dataclass
class Ask:
    q: str


def asking_program(mod: Any) -> tuple[Any, Any]:
    class Asker(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def h(self, text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            await ctx.request_info(Ask(q=text), str)

        @mod.response_handler
        async def on(self, req: Ask, resp: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            await ctx.send_message(f"{req.q}->{resp}")

    class Sink(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def h(self, t: str, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
            await ctx.yield_output(t)

    a, s = Asker(id="asker"), Sink(id="sink")
    storage = mod.InMemoryCheckpointStorage()
    return mod.WorkflowBuilder(start_executor=a, checkpoint_storage=storage).add_edge(a, s).build(), storage


async def checkpoint_chain(storage: Any, name: str) -> list[tuple[int, int]]:
    """``(iteration_count, pending requests)`` per checkpoint, following the parent links from the first."""
    cps = {c.checkpoint_id: c for c in await storage.list_checkpoints(workflow_name=name)}
    (first,) = [c for c in cps.values() if c.previous_checkpoint_id is None]
    children = {c.previous_checkpoint_id: c for c in cps.values()}
    chain, cp = [], first
    while cp is not None:
        chain.append((cp.iteration_count, len(cp.pending_request_info_events)))
        cp = children.get(cp.checkpoint_id)
    assert len(chain) == len(cps)
    return chain


@pytest.mark.parametrize("stream", [False, True])
async def test_a_run_paused_for_input_and_answered_is_checkpointed_and_numbered_as_agent_framework_does(
    stream: bool,
) -> None:
    """Entry (0), superstep 1 with the request pending (1), the answer's entry (1, as MAF's response-entry
    checkpoint: no superstep ran since), then supersteps 2 and 3: the same chain on both."""
    chains = []
    for mod in MODULES:
        workflow, storage = asking_program(mod)
        if stream:
            asked = [e async for e in workflow.run("q", stream=True) if e.type == "request_info"]
            outputs = [
                e.data
                async for e in workflow.run(responses={asked[0].request_id: "a"}, stream=True)
                if e.type == "output"
            ]
        else:
            asked = (await workflow.run("q")).get_request_info_events()
            outputs = (await workflow.run(responses={asked[0].request_id: "a"})).get_outputs()
        assert outputs == ["q->a"]
        chains.append(await checkpoint_chain(storage, workflow.name))
    assert chains[1] == chains[0] == [(0, 0), (1, 1), (1, 0), (2, 0), (3, 0)]


# -- 1. leaving a stream ends the in-process run there ---------------------------------------------


def chain_program(mod: Any, ran: list[str]) -> tuple[Any, Any]:
    @mod.executor(id="a")
    async def a(t: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
        ran.append("a")
        await ctx.send_message(t + "a")

    @mod.executor(id="b")
    async def b(t: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
        ran.append("b")
        await ctx.send_message(t + "b")

    @mod.executor(id="c")
    async def c(t: str, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
        ran.append("c")
        await ctx.yield_output(t + "c")

    storage = mod.InMemoryCheckpointStorage()
    return mod.WorkflowBuilder(start_executor=a, checkpoint_storage=storage).add_chain([a, b, c]).build(), storage


@pytest.mark.parametrize("mod", MODULES, ids=ids)
@pytest.mark.parametrize("how", ["break", "close"])
async def test_leaving_a_stream_after_a_superstep_stops_the_run_there_and_it_resumes_from_the_latest_checkpoint(
    mod: Any, how: str
) -> None:
    """The interruption program: stop reading after superstep 1, resume from ``get_latest`` in a new object."""
    ran: list[str] = []
    workflow, storage = chain_program(mod, ran)
    stream = workflow.run("x", stream=True)
    async for event in stream:
        if event.type == "superstep_completed":
            break
    if how == "close":
        await stream.close()
    del stream
    gc.collect()
    latest = await storage.get_latest(workflow_name=workflow.name)
    assert latest is not None and latest.iteration_count == 1
    resumed, _ = chain_program(mod, ran)
    result = await resumed.run(checkpoint_id=latest.checkpoint_id, checkpoint_storage=storage)
    # The abandoned run went no further, while the resumed one ran (the loop was free to run it meanwhile).
    assert result.get_outputs() == ["xabc"]
    assert ran == ["a", "b", "c"]
    assert sorted(c.iteration_count for c in await storage.list_checkpoints(workflow_name=workflow.name)) == [0, 1]


# -- 4. several answers in one run(responses=...) call --------------------------------------------------


def quiz_program(mod: Any) -> Any:
    class Quiz(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def ask(self, topics: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            for topic in topics.split():
                await ctx.request_info(Ask(q=topic), str)

        @mod.response_handler
        async def on(self, req: Ask, resp: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            await ctx.send_message(f"{req.q}: {resp}")

    class Minutes(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def h(self, t: str, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
            await ctx.yield_output(f"noted {t}")

    q, m = Quiz(id="quiz"), Minutes(id="minutes")
    return mod.WorkflowBuilder(start_executor=q).add_edge(q, m).build()


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_answers_given_in_one_call_are_handled_in_one_superstep(mod: Any) -> None:
    workflow = quiz_program(mod)
    asked = (await workflow.run("bees owls")).get_request_info_events()
    invoked: dict[int, list[str]] = {}
    superstep = 0
    async for event in workflow.run(responses={r.request_id: "yes" for r in asked}, stream=True):
        if event.type == "superstep_started":
            superstep += 1
        elif event.type == "executor_invoked":
            invoked.setdefault(superstep, []).append(event.executor_id)
    assert invoked == {1: ["quiz", "quiz"], 2: ["minutes", "minutes"]}


# -- 9. structured output -----------------------------------------------------------------------------


class Verdict(BaseModel):
    ok: bool
    reason: str


def judging_program(mod: Any) -> Any:
    agent = Agent(
        client=ScriptedChatClient(lambda m: json.dumps({"ok": True, "reason": "fine"})),
        name="judge",
        default_options={"response_format": Verdict},
    )
    judge = mod.AgentExecutor(agent)

    @mod.executor(id="read")
    async def read(r: AgentExecutorResponse, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
        await ctx.yield_output(f"{type(r.agent_response.value).__name__} {r.agent_response.value!r}")

    return mod.WorkflowBuilder(start_executor=judge).add_edge(judge, read).build()


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_an_agents_structured_output_reaches_the_next_executor_parsed_into_its_model(mod: Any) -> None:
    result = await judging_program(mod).run("judge this")
    response, read = result.get_outputs()
    assert isinstance(response, AgentResponse) and response.value == Verdict(ok=True, reason="fine")
    assert read == "Verdict Verdict(ok=True, reason='fine')"


# -- 8. AgentExecutor(agent, session=...) ----------------------------------------------------------------


def session_program(mod: Any, session: AgentSession) -> Any:
    a = Agent(client=ScriptedChatClient(lambda ms: f"A saw {len(ms)}"), name="a", instructions="be a")
    b = Agent(client=ScriptedChatClient(lambda ms: f"B saw {len(ms)}"), name="b", instructions="be b")
    ea, eb = mod.AgentExecutor(a, session=session), mod.AgentExecutor(b, session=session)
    return mod.WorkflowBuilder(start_executor=ea).add_edge(ea, eb).build()


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_agents_sharing_a_session_see_one_history_readable_from_the_session_after_the_run(mod: Any) -> None:
    session = AgentSession()
    result = await session_program(mod, session).run("hello")
    assert [o.text for o in result.get_outputs()] == ["A saw 1", "B saw 4"]
    history = session.state[InMemoryHistoryProvider.DEFAULT_SOURCE_ID]["messages"]
    assert [f"{m.role}:{m.text}" for m in history] == ["user:hello", "assistant:A saw 1", "assistant:B saw 4"]


def test_a_session_is_refused_for_an_agent_that_keeps_none_and_must_be_an_agent_session() -> None:
    agent = Agent(client=ScriptedChatClient(lambda ms: "x"), name="x")
    with pytest.raises(TypeError, match="AgentSession"):
        temporal_workflows.AgentExecutor(agent, session={"messages": []})


# -- 7. streaming only when the run is streamed ------------------------------------------------------------


class RecordingClient(ScriptedChatClient):
    """Records whether each model call streams."""

    def __init__(self, reply: str, streams: list[bool]) -> None:
        super().__init__(lambda ms: reply)
        self.streams = streams

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        self.streams.append(stream)
        return super()._inner_get_response(messages=messages, stream=stream, options=options, **kwargs)


def writing_program(mod: Any, calls: list[bool]) -> Any:
    writer = mod.AgentExecutor(Agent(client=RecordingClient("Charge ahead", calls), name="writer"))
    return mod.WorkflowBuilder(start_executor=writer).build()


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_the_model_streams_and_updates_are_the_outputs_only_when_the_run_is_streamed(mod: Any) -> None:
    calls: list[bool] = []
    result = await writing_program(mod, calls).run("write")
    assert calls == [False]  # one non-streaming model call
    assert [type(o).__name__ for o in result.get_outputs()] == ["AgentResponse"]
    assert [e.type for e in result if isinstance(e.data, AgentResponseUpdate)] == []
    calls.clear()
    outputs = [e.data async for e in writing_program(mod, calls).run("write", stream=True) if e.type == "output"]
    assert calls == [True]
    assert [(type(o).__name__, o.text) for o in outputs] == [
        ("AgentResponseUpdate", "Charge "),
        ("AgentResponseUpdate", "ahead"),
    ]


# -- MAF's checkpoint_with_resume sample (items 1 and 2): interrupted after supersteps, resumed from get_latest --


@dataclass
class ComputeTask:
    remaining_numbers: list[int]


async def checkpoint_with_resume(
    mod: Any, interrupt: list[bool], durable: Callable[[Any], Any] = lambda wf: wf
) -> list[str]:
    """The sample, with its random interruptions replaced by a fixed pattern; returns what it prints.

    ``durable`` turns each workflow the sample builds into what it calls ``run`` on (the durable
    twin, in ``tests/integration/test_maf_programs_temporal.py``).
    """
    printed: list[str] = []
    pattern = iter(interrupt)

    class StartExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def start(self, upper_limit: int, ctx: mod.WorkflowContext[ComputeTask]) -> None:  # type: ignore[name-defined]
            printed.append(f"StartExecutor: Starting factor pair computation up to {upper_limit}")
            await ctx.send_message(ComputeTask(remaining_numbers=list(range(1, upper_limit + 1))))

    class WorkerExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str) -> None:
            super().__init__(id=id)
            self._pairs: dict[int, list[tuple[int, int]]] = {}

        @mod.handler
        async def compute(
            self,
            task: ComputeTask,
            ctx: mod.WorkflowContext[ComputeTask, dict[int, list[tuple[int, int]]]],  # type: ignore[name-defined]
        ) -> None:
            next_number = task.remaining_numbers.pop(0)
            printed.append(f"WorkerExecutor: Computing factor pairs for {next_number}")
            self._pairs[next_number] = [(i, next_number // i) for i in range(1, next_number) if next_number % i == 0]
            if not task.remaining_numbers:
                await ctx.yield_output(self._pairs)
            else:
                await ctx.send_message(task)

        async def on_checkpoint_save(self) -> dict[str, Any]:
            return {"composite_number_pairs": self._pairs}

        async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
            self._pairs = state.get("composite_number_pairs", {})

    storage = mod.InMemoryCheckpointStorage()
    start, worker = StartExecutor(id="start"), WorkerExecutor(id="worker")
    builder = (
        mod.WorkflowBuilder(start_executor=start, checkpoint_storage=storage, name="cp_with_resume")
        .add_edge(start, worker)
        .add_edge(worker, worker)
    )
    latest = None
    for _ in range(20):
        workflow = durable(builder.build())
        events = (
            workflow.run(message=5, stream=True)
            if latest is None
            else workflow.run(checkpoint_id=latest.checkpoint_id, stream=True)
        )
        output = None
        async for event in events:
            if event.type == "output":
                output = event.data
                break
            if event.type == "superstep_completed" and next(pattern, False):
                printed.append("** Simulating workflow interruption. Stopping execution. **")
                break
        latest = await storage.get_latest(workflow_name=workflow.name)
        printed.append(f"Checkpoint iter={latest.iteration_count}")
        if output is not None:
            printed.append(f"Workflow completed successfully with output: {output}")
            return printed
    raise AssertionError("the sample never finished: " + "\n".join(printed[-5:]))


@pytest.mark.parametrize("interrupt", [[True, False, True], [False, True, True, True, False, True]])
async def test_the_checkpoint_with_resume_sample_prints_what_agent_framework_prints(interrupt: list[bool]) -> None:
    maf, ours = [await checkpoint_with_resume(mod, interrupt) for mod in MODULES]
    assert ours == maf
    assert maf[-1] == (
        "Workflow completed successfully with output: "
        "{1: [], 2: [(1, 2)], 3: [(1, 3)], 4: [(1, 4), (2, 2)], 5: [(1, 5)]}"
    )


# -- MAF's agents_with_shared_session sample (item 8) --------------------------------------------------------


async def shared_session_sample(mod: Any) -> list[str]:
    @mod.executor(id="intercept_agent_response")
    async def intercept_agent_response(
        agent_response: AgentExecutorResponse,
        ctx: mod.WorkflowContext[AgentExecutorRequest],  # type: ignore[name-defined]
    ) -> None:
        await ctx.send_message(AgentExecutorRequest(messages=[]))

    def client(reply: str) -> ScriptedChatClient:
        return ScriptedChatClient(lambda ms: f"{reply} ({len(ms)} messages)")

    writer = Agent(
        client=client("Ride more, spend less"),
        instructions="You are a concise copywriter.",
        name="writer",
        context_providers=[InMemoryHistoryProvider()],
    )
    reviewer = Agent(
        client=client("Punchy; add the price"),
        instructions="You are a thoughtful reviewer.",
        name="reviewer",
        context_providers=[InMemoryHistoryProvider()],
    )
    shared_session = writer.create_session()
    writer_executor = mod.AgentExecutor(writer, session=shared_session)
    reviewer_executor = mod.AgentExecutor(reviewer, session=shared_session)
    workflow = (
        mod.WorkflowBuilder(start_executor=writer_executor)
        .add_chain([writer_executor, intercept_agent_response, reviewer_executor])
        .build()
    )
    result = await workflow.run("Write a tagline for a budget-friendly eBike.", client_kwargs={"store": False})
    printed = [str(result.get_final_state()).rsplit(".", 1)[-1]]
    memory_state = shared_session.state.get(InMemoryHistoryProvider.DEFAULT_SOURCE_ID, {})
    printed += [f"{m.author_name or m.role}: {m.text}" for m in memory_state.get("messages", [])]
    return printed


async def test_the_shared_session_sample_prints_what_agent_framework_prints() -> None:
    maf, ours = [await shared_session_sample(mod) for mod in MODULES]
    assert ours == maf
    assert maf == [
        "IDLE",
        "user: Write a tagline for a budget-friendly eBike.",
        "writer: Ride more, spend less (1 messages)",
        "reviewer: Punchy; add the price (2 messages)",
    ]


# -- MAF's edge_condition sample (structured output routes the graph; item 9) -------------------------------


class DetectionResult(BaseModel):
    is_spam: bool
    reason: str
    email_content: str


class EmailResponse(BaseModel):
    response: str


async def edge_condition_sample(mod: Any, email: str) -> list[str]:
    def get_condition(expected_result: bool) -> Any:
        def condition(message: Any) -> bool:
            if not isinstance(message, AgentExecutorResponse):
                return True
            try:
                detection = DetectionResult.model_validate_json(message.agent_response.text)
                return detection.is_spam == expected_result
            except Exception:
                return False

        return condition

    @mod.executor(id="send_email")
    async def handle_email_response(response: AgentExecutorResponse, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        email_response = EmailResponse.model_validate_json(response.agent_response.text)
        assert response.agent_response.value == email_response  # parsed, as in MAF
        await ctx.yield_output(f"Email sent:\n{email_response.response}")

    @mod.executor(id="handle_spam")
    async def handle_spam_classifier_response(
        response: AgentExecutorResponse,
        ctx: mod.WorkflowContext[Never, str],  # type: ignore[name-defined]
    ) -> None:
        detection = DetectionResult.model_validate_json(response.agent_response.text)
        await ctx.yield_output(f"Email marked as spam: {detection.reason}")

    @mod.executor(id="to_email_assistant_request")
    async def to_email_assistant_request(
        response: AgentExecutorResponse,
        ctx: mod.WorkflowContext[AgentExecutorRequest],  # type: ignore[name-defined]
    ) -> None:
        detection = response.agent_response.value
        assert isinstance(detection, DetectionResult)
        await ctx.send_message(AgentExecutorRequest(messages=[Message("user", [detection.email_content])]))

    def detect(ms: list[Message]) -> str:
        text = ms[-1].text
        return DetectionResult(is_spam="WIN" in text, reason="prize bait", email_content=text).model_dump_json()

    spam = mod.AgentExecutor(
        Agent(
            client=ScriptedChatClient(detect),
            name="spam_detection_agent",
            default_options={"response_format": DetectionResult},  # OpenAIChatOptions(...) is this dict
        )
    )
    assistant = mod.AgentExecutor(
        Agent(
            client=ScriptedChatClient(lambda ms: EmailResponse(response=f"Re: {ms[-1].text}").model_dump_json()),
            name="email_assistant_agent",
            default_options={"response_format": EmailResponse},
        )
    )
    workflow = (
        mod.WorkflowBuilder(start_executor=spam)
        .add_edge(spam, to_email_assistant_request, condition=get_condition(False))
        .add_edge(to_email_assistant_request, assistant)
        .add_edge(assistant, handle_email_response)
        .add_edge(spam, handle_spam_classifier_response, condition=get_condition(True))
        .build()
    )
    result = await workflow.run(AgentExecutorRequest(messages=[Message("user", [email])], should_respond=True))
    return [f"{type(o).__name__}: {o.value if isinstance(o, AgentResponse) else o}" for o in result.get_outputs()]


@pytest.mark.parametrize("email", ["Meeting notes: update the timeline", "WIN a free eBike now"])
async def test_the_edge_condition_sample_routes_on_structured_output_as_agent_framework_does(email: str) -> None:
    maf, ours = [await edge_condition_sample(mod, email) for mod in MODULES]
    assert ours == maf
    assert maf[-1] in (f"str: Email sent:\nRe: {email}", "str: Email marked as spam: prize bait")


# -- run(client_kwargs=..., function_invocation_kwargs=...) (the shared-session sample passes client_kwargs) --


class KwargsClient(ScriptedChatClient):
    """Records the keyword arguments each chat client call gets."""

    def __init__(self, seen: list[dict[str, Any]]) -> None:
        super().__init__(lambda ms: "ok")
        self.seen = seen

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        self.seen.append(dict(kwargs))
        return super()._inner_get_response(messages=messages, stream=stream, options=options, **kwargs)


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_client_kwargs_reach_every_agent_or_the_one_they_name_as_in_agent_framework(mod: Any) -> None:
    seen: list[dict[str, Any]] = []
    a = mod.AgentExecutor(Agent(client=KwargsClient(seen), name="a"))
    b = mod.AgentExecutor(Agent(client=KwargsClient(seen), name="b"))
    workflow = mod.WorkflowBuilder(start_executor=a).add_edge(a, b).build()
    await workflow.run("hi", client_kwargs={"store": False})
    await workflow.run("hi", client_kwargs={"b": {"store": True}})
    assert seen == [{"store": False}, {"store": False}, {}, {"store": True}]


def test_invocation_kwargs_must_be_plain_json() -> None:
    from temporal_workflows.errors import NotSerializableError

    workflow = writing_program(temporal_workflows, [])
    with pytest.raises(NotSerializableError, match="client_kwargs"):
        workflow.run("hi", client_kwargs={"when": object()})


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_a_step_reads_whether_the_run_is_streamed_as_in_agent_framework(mod: Any) -> None:
    @mod.executor(id="mode")
    async def mode(text: str, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
        await ctx.yield_output(f"{text}: {ctx.is_streaming()}")

    workflow = mod.WorkflowBuilder(start_executor=mode).build()
    assert (await workflow.run("awaited")).get_outputs() == ["awaited: False"]
    assert [e.data async for e in workflow.run("streamed", stream=True) if e.type == "output"] == ["streamed: True"]


# -- a step's own exception -----------------------------------------------------------------------------


class QuotaError(Exception):
    """A program's own error class, raised by a step."""


def failing_program(mod: Any) -> tuple[Any, Any]:
    class Ask(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def go(self, text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            if text == "ask":
                await ctx.request_info("more?", str)
            else:
                raise QuotaError("quota exceeded for " + text)

        @mod.response_handler
        async def on(self, asked: str, answer: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            raise QuotaError("quota exceeded for " + answer)

    storage = mod.InMemoryCheckpointStorage()
    return mod.WorkflowBuilder(start_executor=Ask(id="ask"), checkpoint_storage=storage).build(), storage


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_a_steps_own_exception_is_what_the_run_raises_awaited_streamed_answered_and_resumed(mod: Any) -> None:
    workflow, storage = failing_program(mod)
    with pytest.raises(QuotaError) as awaited:
        await workflow.run("ann")
    assert str(awaited.value) == "quota exceeded for ann" and awaited.value.__cause__ is None

    workflow, storage = failing_program(mod)
    seen: list[str] = []
    with pytest.raises(QuotaError) as streamed:
        async for event in workflow.run("bob", stream=True):
            seen.append(event.type)
    assert str(streamed.value) == "quota exceeded for bob"
    assert seen[-5:] == ["superstep_started", "executor_invoked", "executor_failed", "failed", "status"]

    workflow, storage = failing_program(mod)
    (asked,) = (await workflow.run("ask")).get_request_info_events()
    with pytest.raises(QuotaError) as answered:
        async for _ in workflow.run(stream=True, responses={asked.request_id: "cid"}):
            pass
    assert str(answered.value) == "quota exceeded for cid"
    waiting = [c for c in await storage.list_checkpoints(workflow_name=workflow.name) if c.pending_request_info_events]
    resumed, _ = failing_program(mod)
    again = await resumed.run(checkpoint_id=waiting[-1].checkpoint_id, checkpoint_storage=storage)
    (asked,) = again.get_request_info_events()
    with pytest.raises(QuotaError) as after_resume:
        await resumed.run(responses={asked.request_id: "dee"})
    assert str(after_resume.value) == "quota exceeded for dee"


async def test_the_steps_own_exception_is_also_executor_failed_error_naming_the_executor_and_superstep() -> None:
    import pickle
    import traceback

    from temporal_workflows.errors import ExecutorFailedError

    workflow, _ = failing_program(temporal_workflows)
    with pytest.raises(ExecutorFailedError) as info:  # what callers of this library caught before: still caught
        await workflow.run("ann")
    error = info.value
    assert isinstance(error, QuotaError) and type(error).__name__ == "QuotaError" and type(error) is not QuotaError
    assert repr(error) == "QuotaError('quota exceeded for ann')"
    assert (error.executor_id, error.superstep, error.error_type) == ("ask", 1, "QuotaError")
    assert error.error_class == f"{__name__}.QuotaError" and type(error.original) is QuotaError
    assert error.summary == "executor 'ask' failed in superstep 1: QuotaError: quota exceeded for ann"
    assert error.result is not None and error.result[-1].type == "failed"
    assert (
        error.result[-1].details is not None and error.result[-1].details.message == error.summary
    )  # the events say what they said before
    printed = "".join(traceback.format_exception(error))
    assert "QuotaError: quota exceeded for ann\nexecutor 'ask' failed in superstep 1\n" in printed
    assert "raise QuotaError" in printed  # the step's own frames
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and again.args == error.args and again.summary == error.summary


class Answered(Exception):
    """A program's class with a read-only ``result`` of its own."""

    @property
    def result(self) -> str:
        return "the program's own result"


async def test_a_steps_class_with_a_read_only_attribute_named_like_ours_keeps_its_own() -> None:
    @temporal_workflows.executor(id="answer")
    async def answer(text: str, ctx: temporal_workflows.WorkflowContext[str]) -> None:
        raise Answered(text)

    workflow = temporal_workflows.WorkflowBuilder(start_executor=answer).build()
    with pytest.raises(Answered) as info:
        await workflow.run("x")
    assert info.value.result == "the program's own result" and str(info.value) == "x"
