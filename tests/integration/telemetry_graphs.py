"""Graphs the telemetry tests run on worker processes: an agent graph with a tool call, a human request and a
step that waits to be released (so a worker can be killed while it runs it).

    writer (agent: calls ``lookup``) -> publisher (agent: ``publish`` needs approval) -> archive (waits)

``archive`` writes ``<attempt>-<pid>`` into the directory ``TW_OTEL_MARKERS``
names when an attempt starts, then waits until the file ``TW_OTEL_RELEASE``
names exists (heartbeating, every 0.5 s with a 2 s timeout, so a killed
worker's attempt is retried quickly). The graph is the same in every process;
only those two variables differ.

``looping`` counts to ``n`` one superstep at a time and continues as new
when its history grows (``max_history_events`` on start): a run of several
segments.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from agent_framework import Agent, Message, tool
from pydantic import BaseModel
from temporalio.common import RetryPolicy

from temporal_workflows import Executor, ExecutorOptions, WorkflowBuilder, WorkflowContext, executor, handler
from temporal_workflows.agents import AgentExecutor, AgentExecutorResponse
from temporal_workflows.agents.testing import Reply, ScriptedChatClient, ToolCall

__all__ = ["ENV_MARKERS", "ENV_RELEASE", "Count", "looping", "workflow"]

ENV_MARKERS = "TW_OTEL_MARKERS"
ENV_RELEASE = "TW_OTEL_RELEASE"


@tool(approval_mode="never_require")
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: three sources agree"


@tool(approval_mode="always_require")
def publish(title: str) -> str:
    """Publish a post (a person approves it)."""
    return f"published {title}"


writer = AgentExecutor(
    Agent(
        client=ScriptedChatClient([ToolCall("lookup", {"topic": "bikes"}), "Draft: bikes are back."]),
        name="writer",
        tools=[lookup],
    )
)


def _publisher_script(messages: list[Message]) -> Reply:
    """Ask to publish, once; then say it is done (the writer's tool call in the conversation is not ours)."""
    asked = any(c.type == "function_call" and c.name == "publish" for m in messages for c in m.contents)
    return "Published it." if asked else ToolCall("publish", {"title": "Bikes"})


publisher = AgentExecutor(Agent(client=ScriptedChatClient(_publisher_script), name="publisher", tools=[publish]))


class Archive(Executor):
    """Waits to be released; says where each attempt ran."""

    @handler
    async def archive(self, response: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
        markers = os.environ.get(ENV_MARKERS)
        if markers:
            (Path(markers) / f"{ctx.attempt}-{os.getpid()}").write_text("")
        release = os.environ.get(ENV_RELEASE)
        while release and not Path(release).exists():
            await asyncio.sleep(0.05)
        await ctx.yield_output(f"archived: {response.agent_response.text}")


archive = Archive(
    "archive",
    options=ExecutorOptions(
        heartbeat_timeout=timedelta(seconds=2),
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
    ),
)

workflow = (
    WorkflowBuilder(start_executor=writer, name="otel_agents").add_edge(writer, publisher).add_edge(publisher, archive)
).build()


class Count(BaseModel):
    n: int
    upto: int


@executor(id="counter")
async def counter(count: Count, ctx: WorkflowContext[Count, int]) -> None:
    if count.n >= count.upto:
        await ctx.yield_output(count.n)
        return
    await ctx.send_message(Count(n=count.n + 1, upto=count.upto))


looping = WorkflowBuilder(start_executor=counter, name="otel_looping").add_edge(counter, counter).build()
