"""temporal_workflows.agents.testing: a scripted Agent Framework chat client, for trying agents with no model."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Agent, AgentResponse, AgentResponseUpdate, Content, Message, tool

from temporal_workflows import WorkflowBuilder
from temporal_workflows.agents.testing import ScriptedChatClient, ToolCall, model_turn
from temporal_workflows.events import RequestInfoEvent

CALLED: list[dict[str, Any]] = []


@tool
def lookup(city: str) -> str:
    """A tool that runs without approval."""
    CALLED.append({"city": city})
    return f"{city}: sunny"


@tool(approval_mode="always_require")
def publish(title: str) -> str:
    """A tool a person approves."""
    return f"published {title!r}"


async def test_text_streams_word_by_word_as_output_events() -> None:
    agent = Agent(client=ScriptedChatClient(["one two three"]), name="talker")
    workflow = WorkflowBuilder(start_executor=agent, name="scripted_text").build()
    pieces = [
        e.data.text
        async for e in workflow.run("hi", stream=True)
        if e.type == "output" and isinstance(e.data, AgentResponseUpdate)
    ]
    assert pieces == ["one ", "two ", "three"]


async def test_text_streams_as_one_piece_when_asked_and_the_response_is_the_same() -> None:
    agent = Agent(client=ScriptedChatClient(["one two three"], stream_words=False), name="talker")
    workflow = WorkflowBuilder(start_executor=agent, name="scripted_whole_text").build()
    pieces = [
        e.data.text
        async for e in workflow.run("hi", stream=True)
        if e.type == "output" and isinstance(e.data, AgentResponseUpdate)
    ]
    assert pieces == ["one two three"]
    [response] = (await workflow.run("hi")).get_outputs()
    assert isinstance(response, AgentResponse) and response.text == "one two three"


async def test_a_tool_call_runs_the_tool_and_the_next_reply_follows_it() -> None:
    CALLED.clear()
    client = ScriptedChatClient([ToolCall("lookup", {"city": "Oslo"}), "It is sunny in Oslo."])
    agent = Agent(client=client, name="weather", tools=[lookup])
    result = await WorkflowBuilder(start_executor=agent, name="scripted_tool").build().run("Weather in Oslo?")
    [response] = result.get_outputs()
    assert isinstance(response, AgentResponse) and response.text == "It is sunny in Oslo."
    assert CALLED == [{"city": "Oslo"}]
    assert len(client.calls) == 2  # one model call per reply: the tool call, then the answer


async def test_an_approval_required_tool_call_is_a_pending_request_answered_as_in_agent_framework() -> None:
    client = ScriptedChatClient([ToolCall("publish", {"title": "Bikes"}), "Published."])
    workflow = WorkflowBuilder(
        start_executor=Agent(client=client, name="ed", tools=[publish]), name="scripted_ok"
    ).build()
    first = await workflow.run("publish it")
    [request] = first.get_request_info_events()
    assert isinstance(request, RequestInfoEvent) and request.data.function_call.name == "publish"
    done = await workflow.run(responses={request.request_id: request.data.to_function_approval_response(approved=True)})
    assert [o.text for o in done.get_outputs() if isinstance(o, AgentResponse)] == ["Published."]


def test_the_reply_depends_on_the_conversation_not_on_earlier_calls() -> None:
    client = ScriptedChatClient(["first", "second"])
    fresh = [Message("user", ["hi"])]
    assert model_turn(fresh) == 0
    assert client.reply_to(fresh) == client.reply_to(fresh) == "first"  # a retry gets the same reply
    call = Content.from_function_call(call_id="c1", name="lookup", arguments="{}")
    after_tool = [
        *fresh,
        Message("assistant", [call]),
        Message("tool", [Content.from_function_result(call_id="c1", result="ok")]),
    ]
    assert model_turn(after_tool) == 1 and client.reply_to(after_tool) == "second"
    assert client.reply_to([*after_tool, Message("assistant", [call])]) == "second"  # the last reply repeats
    with pytest.raises(ValueError, match="at least one reply"):
        ScriptedChatClient([])
