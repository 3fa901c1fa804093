"""Agent Framework samples, parametrised by the workflow module (``agent_framework`` or ``temporal_workflows``).

Annotations here are evaluated where they are written (no ``from __future__ import
annotations``): Agent Framework reads a handler's ``WorkflowContext[...]`` from the live
annotation, so ``mod.WorkflowContext[str]`` must be an object, not a string.
"""

from dataclasses import dataclass
from typing import Any, Never

from agent_framework import Agent, AgentExecutorResponse, Message, tool

from temporal_workflows.agents.testing import Reply, ScriptedChatClient, ToolCall


@dataclass
class Email:
    sender: str
    body: str


def email_approvals(mod: Any, ran: list[str], calls: list[int]) -> Any:
    """MAF's "agents with approval requests" sample: an email writer whose reads and sends need approval."""

    @tool(approval_mode="never_require")
    def get_current_date() -> str:
        """Today."""
        ran.append("date")
        return "2025-11-07"

    @tool(approval_mode="always_require")
    async def read_historical_email_data(email_address: str, start_date: str, end_date: str) -> list[str]:
        """Read mail."""
        ran.append(f"read {email_address}")
        return [f"mail from {email_address}"]

    @tool(approval_mode="always_require")
    async def send_email(to: str, subject: str, body: str) -> str:
        """Send mail."""
        ran.append(f"send {to}")
        return "Email successfully sent."

    window = {"start_date": "2025-10-31", "end_date": "2025-11-07"}
    send = [ToolCall("send_email", {"to": "mike@contoso.com", "subject": "Status", "body": "All good"})]

    def script(messages: list[Message]) -> Reply:
        calls.append(len(messages))
        results = sum(1 for m in messages for c in m.contents if c.type == "function_result")
        if results == 0:
            return [ToolCall("get_current_date", {})]
        if results == 1:
            return [
                ToolCall("read_historical_email_data", {"email_address": "alice@contoso.com", **window}),
                ToolCall("read_historical_email_data", {"email_address": "bob@contoso.com", **window}),
            ]
        if results == 3:
            return send
        return "I've sent the status update to Mike."

    class EmailPreprocessor(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(id="email_preprocessor")

        @mod.handler  # type: ignore[misc]
        async def preprocess(self, email: Email, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            await ctx.send_message(f"Incoming email from {email.sender}: {email.body}")

    @mod.executor(id="conclude_workflow_executor")  # type: ignore[misc]
    async def conclude(response: AgentExecutorResponse, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        await ctx.yield_output(response.agent_response.text)

    agent = Agent(
        client=ScriptedChatClient(script),
        name="EmailWriter",
        instructions="Reply to email.",
        tools=[read_historical_email_data, send_email, get_current_date],
    )
    pre = EmailPreprocessor()
    extra = {"output_from": [conclude]} if mod.__name__ == "agent_framework" else {}
    return mod.WorkflowBuilder(start_executor=pre, **extra).add_edge(pre, agent).add_edge(agent, conclude).build()
