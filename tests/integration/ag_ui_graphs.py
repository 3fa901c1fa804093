"""Graphs the AG-UI tests drive: an agent step with a tool that needs approval, then a person's review.

Importable by ``temporal-workflows worker --workflow`` and ``console --workflow``
(``tests.integration.ag_ui_graphs:publishing``), as a user would name them.
The chat client is the project's scripted one: the same answer to the same
messages in every process, on every attempt.
"""

from __future__ import annotations

import os
from datetime import timedelta

from agent_framework import Agent, tool
from pydantic import BaseModel, Field
from temporalio.common import RetryPolicy

from temporal_workflows import (
    Executor,
    ExecutorOptions,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowExecutor,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.agents import AgentExecutor, AgentExecutorResponse
from temporal_workflows.agents.testing import ScriptedChatClient, ToolCall

DELAY = float(os.environ.get("TW_AG_UI_DELAY", "0.02"))


class Review(BaseModel):
    """What the reviewer is asked to look at."""

    draft: str


class Verdict(BaseModel):
    """The reviewer's answer."""

    approved: bool
    note: str = Field(min_length=3, description="Why (at least three characters).")


@tool(approval_mode="always_require")
def publish(title: str) -> str:
    """Publish a piece."""
    return f"published {title!r}"


def _writer_script(messages: list) -> object:  # type: ignore[type-arg]
    from temporal_workflows.agents.testing import model_turn

    topic = next((m.text for m in messages if m.role == "user" and m.text), "something")
    if model_turn(messages) == 0:
        return ToolCall("publish", {"title": topic.title()})
    return f"I published {topic.title()} for you. It reads well and it is short."


class Reviewer(Executor):
    """Asks a person to review what the writer said, then outputs the verdict."""

    @handler
    async def review(self, r: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(
            Review(draft=r.agent_response.text), Verdict, timeout=timedelta(hours=1), on_timeout="fail"
        )

    @response_handler
    async def reviewed(self, original: Review, verdict: Verdict, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"review: {'approved' if verdict.approved else 'rejected'} ({verdict.note})")


writer = AgentExecutor(
    Agent(client=ScriptedChatClient(_writer_script, delay=DELAY), name="writer", tools=[publish]),
    output_response=False,
)
publishing = (
    WorkflowBuilder(start_executor=writer, name="ag_ui_publishing").add_edge(writer, Reviewer("reviewer")).build()
)
"""An agent step whose tool needs approval, then a person's review: two human requests over three turns."""

devui_writer = AgentExecutor(
    Agent(client=ScriptedChatClient(_writer_script, delay=DELAY), name="writer", tools=[publish]),
    output_response=False,
)
devui = (
    WorkflowBuilder(start_executor=devui_writer, name="ag_ui_devui")
    .add_edge(devui_writer, Reviewer("reviewer"))
    .build()
)
"""The same graph under another name: DevUI's page, whose session list starts empty for it."""

STORY_WORDS = int(os.environ.get("TW_AG_UI_STORY_WORDS", "40"))
STORY_DELAY = float(os.environ.get("TW_AG_UI_STORY_DELAY", "0.15"))


def _story(messages: list) -> object:  # type: ignore[type-arg]
    topic = next((m.text for m in messages if m.role == "user" and m.text), "x").split()[0]
    return " ".join(f"{topic}{i}" for i in range(STORY_WORDS))


teller = AgentExecutor(
    Agent(client=ScriptedChatClient(_story, delay=STORY_DELAY), name="teller"),
    output_response=False,
    # A killed worker's attempt is given up after 3 s without a heartbeat (30 s by default), so the test is short.
    options=ExecutorOptions(heartbeat_timeout=timedelta(seconds=3)),
)
story = WorkflowBuilder(start_executor=teller, name="ag_ui_story").build()
"""An agent that streams a long answer slowly (a worker can be killed while it streams)."""


@executor(id="shout")
async def shout(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(text.upper())


inner = WorkflowBuilder(start_executor=shout, name="ag_ui_inner").build()
nested = WorkflowBuilder(
    start_executor=WorkflowExecutor(inner, id="inner", allow_direct_output=True), name="ag_ui_nested"
).build()
"""A graph whose step is a sub-workflow: a sub-agent to AG-UI."""


@executor(id="broken", options=ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1)))
async def broken(text: str, ctx: WorkflowContext[None, str]) -> None:
    raise ValueError(f"cannot handle {text!r}")


failing = WorkflowBuilder(start_executor=broken, name="ag_ui_failing").build()
"""A graph whose only step fails: the run fails, the turn ends with RUN_ERROR."""


def all_workflows() -> list:  # type: ignore[type-arg]
    return [publishing, story, nested, failing, devui]
