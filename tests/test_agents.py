"""Agents as steps, in process: Agent Framework samples' behaviour, streaming, approvals, conversation state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import Agent, AgentResponse, AgentResponseUpdate, Content, Message

from temporal_workflows import WorkflowBuilder, WorkflowRunState
from temporal_workflows.agents import AgentExecutor, AgentRunUpdateEvent, conversation_key
from temporal_workflows.errors import ExecutorFailedError
from temporal_workflows.events import LiveCommittedEvent, RequestInfoEvent, WorkflowWarningEvent
from tests.agent_support import MODEL_CALLS, TOOL_CALLS, ScriptedChatClient
from tests.integration.agent_graphs import GRAPHS, PYDANTIC_AI


def _ticket() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


async def test_a_maf_sample_runs_with_only_its_workflow_imports_swapped() -> None:
    """Agent Framework's "agents in a workflow" sample, agents passed straight to the builder."""
    import agent_framework as maf

    def build(builder: Any) -> Any:
        writer = Agent(client=ScriptedChatClient(lambda ms: "Charge Ahead"), instructions="write", name="writer")
        reviewer = Agent(client=ScriptedChatClient(lambda ms: "Be bolder"), instructions="review", name="reviewer")
        return builder(start_executor=writer).add_edge(writer, reviewer).build()

    seen: dict[str, Any] = {}
    for name, builder in (("maf", maf.WorkflowBuilder), ("ours", WorkflowBuilder)):
        result = await build(builder).run("Create a slogan for an electric SUV.")
        outputs = result.get_outputs()
        assert all(isinstance(o, AgentResponse) for o in outputs)
        streamed: list[tuple[str | None, str]] = []
        async for event in build(builder).run("Create a slogan for an electric SUV.", stream=True):
            if event.type == "output" and isinstance(event.data, AgentResponseUpdate):
                streamed.append((event.data.author_name, event.data.text))
        seen[name] = (
            [(o.messages[0].author_name, o.text) for o in outputs],
            str(result.get_final_state()).rsplit(".", 1)[-1],
            streamed,
        )
    assert seen["ours"] == seen["maf"]
    assert seen["ours"][0] == [("writer", "Charge Ahead"), ("reviewer", "Be bolder")]


async def test_agent_updates_stream_live_and_the_response_is_committed() -> None:
    events = [e async for e in GRAPHS["chain"].run("Write a slogan", stream=True)]
    updates = [e for e in events if isinstance(e, AgentRunUpdateEvent)]
    assert [(u.executor_id, u.data.text) for u in updates] == [
        ("writer", "Charge "),
        ("writer", "Ahead: "),
        ("writer", "affordable "),
        ("writer", "fun"),
        ("reviewer", "Make "),
        ("reviewer", "it "),
        ("reviewer", "more "),
        ("reviewer", "playful."),
    ]
    assert [u.seq for u in updates if u.executor_id == "writer"] == [1, 2, 3, 4]
    types = [e.type for e in events]
    first_writer_update = next(i for i, e in enumerate(events) if isinstance(e, AgentRunUpdateEvent))
    writer_done = next(
        i for i, e in enumerate(events) if e.type == "executor_completed" and getattr(e, "executor_id", "") == "writer"
    )
    # Live while the writer runs: before its committed events (invoked ... completed) at the commit.
    assert first_writer_update < types.index("executor_invoked") < writer_done
    markers = [e for e in events if isinstance(e, LiveCommittedEvent)]
    assert [(m.executor_id, m.items) for m in markers] == [("writer", 4), ("reviewer", 4)]


async def test_the_conversation_lives_in_state_and_each_turn_writes_only_its_new_messages() -> None:
    wf = GRAPHS["conversation"]
    ticket = _ticket()
    result = await wf.run(ticket)
    assert result.get_outputs() == ["read document 3"]
    conversation = wf.state[conversation_key("assistant")]
    roles = [m.role for m in conversation]
    # Per turn: the question, the tool call, the tool's result, the answer.
    assert roles == ["user", "assistant", "tool", "assistant"] * 3
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["fetch"] * 3
    # Each model call saw the whole conversation so far (read from state, not from the step's input).
    calls = MODEL_CALLS[ticket]
    assert [len(c) for c in calls] == [1, 3, 5, 7, 9, 11]


async def test_a_tool_needing_approval_becomes_a_request_and_nothing_completed_runs_again() -> None:
    wf = GRAPHS["approval"]
    ticket = _ticket()
    result = await wf.run(f"{ticket} email bob")
    requests = result.get_request_info_events()
    assert [r.data.function_call.name for r in requests] == ["send_email", "archive"]
    assert all(isinstance(r.data, Content) and r.data.type == "function_approval_request" for r in requests)
    assert wf.run_state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["lookup"]
    calls_before = len(MODEL_CALLS[ticket])

    # The two approvals are independent: one now, the other in a later call.
    first, second = requests
    result = await wf.run(responses={first.request_id: first.data.to_function_approval_response(approved=True)})
    assert not result.get_outputs() and [t for t, _ in TOOL_CALLS[ticket]] == ["lookup"]
    result = await wf.run(responses={second.request_id: second.data.to_function_approval_response(approved=True)})
    assert result.get_outputs()[-1] == "mailer: Emailed bob (3 tool results)."
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["lookup", "send_email", "archive"]
    assert len(MODEL_CALLS[ticket]) == calls_before + 1  # only the call after the approvals


async def test_approvals_answered_together_resume_the_turn_once() -> None:
    wf = GRAPHS["approval"]
    ticket = _ticket()
    result = await wf.run(f"{ticket} email bob")
    requests = result.get_request_info_events()
    responses = {r.request_id: r.data.to_function_approval_response(approved=True) for r in requests}
    result = await wf.run(responses=responses)
    assert result.get_outputs()[-1] == "mailer: Emailed bob (3 tool results)."
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["lookup", "send_email", "archive"]
    assert len(MODEL_CALLS[ticket]) == 3
    assert wf.run_state is WorkflowRunState.IDLE


async def test_a_denied_tool_does_not_run() -> None:
    wf = GRAPHS["approval"]
    ticket = _ticket()
    requests = (await wf.run(f"{ticket} email bob")).get_request_info_events()
    responses = {
        r.request_id: r.data.to_function_approval_response(approved=r.data.function_call.name != "send_email")
        for r in requests
    }
    await wf.run(responses=responses)
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["lookup", "archive"]


async def test_sibling_agents_approvals_are_independent() -> None:
    wf = GRAPHS["siblings"]
    ticket = _ticket()
    requests = (await wf.run(f"{ticket} tidy up")).get_request_info_events()
    by_agent = {r.source_executor_id: r for r in requests}
    assert sorted(by_agent) == ["left", "right"]
    result = await wf.run(
        responses={by_agent["right"].request_id: by_agent["right"].data.to_function_approval_response(approved=True)}
    )
    assert [o.text for o in result.get_outputs()] == ["right done"]
    assert [a["folder"] for _, a in TOOL_CALLS[ticket]] == ["right"]
    result = await wf.run(
        responses={by_agent["left"].request_id: by_agent["left"].data.to_function_approval_response(approved=True)}
    )
    assert [o.text for o in result.get_outputs()] == ["left done"]
    assert [a["folder"] for _, a in TOOL_CALLS[ticket]] == ["right", "left"]


async def test_an_answer_of_the_wrong_kind_is_a_warning_and_the_request_is_asked_again() -> None:
    wf = GRAPHS["siblings"]
    ticket = _ticket()
    requests = (await wf.run(f"{ticket} tidy up")).get_request_info_events()
    req = next(r for r in requests if r.source_executor_id == "left")
    result = await wf.run(responses={req.request_id: Content.from_text("yes please")})
    warnings = [e for e in result if isinstance(e, WorkflowWarningEvent)]
    assert warnings and "function_approval_response" in warnings[0].message
    again = [e for e in result if isinstance(e, RequestInfoEvent)]
    assert len(again) == 1 and again[0].data.function_call.name == "archive"
    await wf.run(responses={again[0].request_id: again[0].data.to_function_approval_response(approved=True)})
    assert [a["folder"] for _, a in TOOL_CALLS[ticket]] == ["left"]


async def test_a_model_refusal_fails_the_step_at_once_with_a_clear_error() -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await GRAPHS["refused"].run("hello")
    error = info.value
    assert error.executor_id == "censored"
    assert "AgentModelError" in str(error) and "filtered" in str(error)


def test_agent_executor_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(TypeError, match="Agent Framework agent"):
        AgentExecutor(object(), id="x")
    with pytest.raises(ValueError, match="no name"):
        AgentExecutor(Agent(client=ScriptedChatClient(lambda ms: "hi")))


async def test_should_respond_false_keeps_messages_for_the_next_turn() -> None:
    from temporal_workflows.agents import AgentExecutorRequest

    seen: list[list[Message]] = []

    def script(messages: list[Message]) -> str:
        seen.append(messages)
        return "ok"

    agent = AgentExecutor(Agent(client=ScriptedChatClient(script), name="keeper"))
    wf = WorkflowBuilder(start_executor=agent).build()
    await wf.run(AgentExecutorRequest(messages=[Message("user", ["first"])], should_respond=False))
    assert not seen
    # A new run starts with fresh state: the cache belongs to the run.
    await wf.run(AgentExecutorRequest(messages=[Message("user", ["second"])], should_respond=True))
    assert [m.text for m in seen[0]] == ["second"]


@pytest.mark.skipif(not PYDANTIC_AI, reason="pydantic-ai-slim is not installed")
async def test_a_pydantic_ai_agent_streams_and_its_deferred_tool_is_an_approval_request() -> None:
    wf = GRAPHS["pydantic"]
    ticket = _ticket()
    result = await wf.run(f"{ticket} book a trip")
    (request,) = result.get_request_info_events()
    assert request.data.type == "function_approval_request" and request.data.function_call.name == "book"
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["model", "weather"]
    result = await wf.run(responses={request.request_id: request.data.to_function_approval_response(approved=True)})
    (response,) = result.get_outputs()
    assert response.text == "Booked Oslo; it is sunny."
    # The tool that ran before the approval, and the model call that asked for both, did not run again.
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["model", "weather", "book", "model"]
    # An awaited run() calls the model without streaming, as Agent Framework does: no live updates.
    assert not [e for e in result if isinstance(e, AgentRunUpdateEvent)]
    stored = wf.state[conversation_key("travel")]
    assert [m["kind"] for m in stored] == ["request", "response", "request", "request", "response"]


# -- the example ------------------------------------------------------------------------------------


async def test_the_agents_example_streams_both_agents_and_publishes_once_approved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from examples import agents

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agents.PUBLISHED.clear()
    out = io.StringIO()
    responses = await agents.run(out=out, scripted=True)
    assert [r.messages[-1].author_name for r in responses] == ["writer", "reviewer"]
    assert agents.PUBLISHED == [{"title": "Why bicycles are efficient", "body": agents.WRITER_TEXT}]
    printed = out.getvalue().splitlines()
    assert printed == [
        f"writer: {agents.WRITER_TEXT}",
        "approval needed: publish(title='Why bicycles are efficient')",
        "reviewer: Clear and accurate; I published it as 'Why bicycles are efficient'.",
    ]


async def test_the_agents_example_does_not_publish_what_the_human_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from examples import agents

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    agents.PUBLISHED.clear()
    responses = await agents.run(interactive=True, out=io.StringIO(), scripted=True)
    assert agents.PUBLISHED == []
    assert responses[-1].text == "The piece was not approved for publishing, so I left it unpublished."


async def test_maf_approval_sample_gives_the_same_requests_calls_and_answer_as_maf() -> None:
    """Agent Framework's "agents with approval requests" sample, ported by swapping its workflow imports
    (less ``output_from``, which is not supported here): the same requests, tools, model calls and answer."""
    import json

    import agent_framework as maf

    import temporal_workflows as tw
    from tests import maf_samples

    seen: dict[str, Any] = {}
    for name, mod in (("maf", maf), ("ours", tw)):
        ran: list[str] = []
        calls: list[int] = []
        wf = maf_samples.email_approvals(mod, ran, calls)
        result = await wf.run(maf_samples.Email("mike@contoso.com", "status?"))
        asked: list[tuple[str, str]] = []
        while requests := result.get_request_info_events():
            answers = {}
            for r in requests:
                assert isinstance(r.data, Content) and r.data.type == "function_approval_request"
                asked.append((r.data.function_call.name, json.dumps(r.data.function_call.parse_arguments())))
                answers[r.request_id] = r.data.to_function_approval_response(approved=True)
            result = await wf.run(responses=answers)
        answer = [o for o in result.get_outputs() if isinstance(o, str)]
        seen[name] = (asked, ran, calls, answer)
    assert seen["ours"] == seen["maf"]
    assert seen["ours"][3] == ["I've sent the status update to Mike."]
    assert len(seen["ours"][0]) == 3  # two reads asked in one model response, then the send


@pytest.mark.skipif(not PYDANTIC_AI, reason="pydantic-ai-slim is not installed")
async def test_a_pydantic_ai_call_deferred_to_the_caller_is_answered_with_its_result() -> None:
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.exceptions import CallDeferred
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: list[Any], info: Any) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("lookup_order", {"order": 42}, tool_call_id="o42")])
        return ModelResponse(parts=[TextPart(f"Order status: {returns[-1].content}")])

    agent = PydanticAgent(FunctionModel(model), name="support")

    @agent.tool_plain
    def lookup_order(order: int) -> str:
        raise CallDeferred()  # the caller's own system answers it

    wf = WorkflowBuilder(start_executor=AgentExecutor(agent)).build()
    (request,) = (await wf.run("where is order 42?")).get_request_info_events()
    assert request.data.type == "function_call" and request.data.name == "lookup_order"
    answer = Content.from_function_result(call_id=request.data.call_id, result="shipped")
    (response,) = (await wf.run(responses={request.request_id: answer})).get_outputs()
    assert response.text == "Order status: shipped"


def test_permanent_model_errors_are_told_apart_from_ones_a_retry_may_fix() -> None:
    from agent_framework.exceptions import ChatClientContentFilterException, ChatClientInvalidRequestException

    from temporal_workflows.agents._errors import is_permanent_model_error

    class ProviderError(Exception):
        def __init__(self, status_code: int) -> None:
            super().__init__(f"HTTP {status_code}")
            self.status_code = status_code

    assert is_permanent_model_error(ChatClientInvalidRequestException("bad request"))
    assert is_permanent_model_error(ChatClientContentFilterException("filtered"))
    assert is_permanent_model_error(ProviderError(400)) and is_permanent_model_error(ProviderError(401))
    assert not is_permanent_model_error(ProviderError(429)) and not is_permanent_model_error(ProviderError(503))
    assert not is_permanent_model_error(TimeoutError("slow")) and not is_permanent_model_error(ConnectionError())
    if PYDANTIC_AI:
        from pydantic_ai.exceptions import ContentFilterError, ModelHTTPError

        assert is_permanent_model_error(ModelHTTPError(400, "gpt", {"error": "bad"}))
        assert not is_permanent_model_error(ModelHTTPError(500, "gpt", {"error": "down"}))
        assert is_permanent_model_error(ContentFilterError("filtered"))


def test_a_tool_output_is_in_a_responses_json_once_and_the_response_reads_back_the_same() -> None:
    """Agent Framework's ``function_result`` holds a tool's output twice (``result`` and a text item): its JSON
    here holds it once, and reads back as the same object (issue #39: every output, event and checkpoint)."""
    from agent_framework import AgentResponse, Content, Message

    from temporal_workflows._engine.serde import decode, encode

    document = "document 7: " + "0123456789 " * 400
    result = Content.from_function_result(call_id="fetch-7", result=document)
    response = AgentResponse(messages=[Message("tool", [result]), Message("assistant", ["Noted."])])
    import json

    env = encode(response)
    assert len(json.dumps(env.data)) < len(document) + 1000
    assert decode(env).to_dict() == response.to_dict()
    # Items of their own (not the one text item of the result) are kept as they are.
    own = Content("function_result", call_id="c", result="short", items=[Content.from_text("other")])
    assert decode(encode(own)).to_dict() == own.to_dict()
    assert encode(own).data["items"] != "=result"
