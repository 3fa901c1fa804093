"""Agents as steps: Agent Framework and Pydantic AI agents in a graph, streamed live, durable on Temporal.

    from agent_framework import Agent
    from temporal_workflows import WorkflowBuilder
    from temporal_workflows.agents import AgentExecutor

    writer = AgentExecutor(Agent(client=..., name="writer", instructions="..."))
    workflow = WorkflowBuilder(start_executor=writer, name="writing").build()

Agent Framework's own objects (``Agent``, ``Message``, ``Content``,
``AgentResponse``, ``AgentResponseUpdate``, ``AgentExecutorRequest``,
``AgentExecutorResponse``) are used as they are; a Pydantic AI ``Agent`` is
accepted too. Needs the ``agents`` extra (``agent-framework-core``), and
``pydantic-ai-slim`` for Pydantic AI agents. See docs/agents.md.
"""

from __future__ import annotations

try:
    from agent_framework import AgentExecutorRequest, AgentExecutorResponse
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "temporal_workflows.agents needs Agent Framework: pip install 'temporal-workflows[agents]' "
        "(agent-framework-core)"
    ) from e

from temporal_workflows.agents._errors import AgentModelError
from temporal_workflows.agents._events import AgentRunUpdateEvent
from temporal_workflows.agents._executor import AgentExecutor, ApprovalsAnswered, conversation_key

__all__ = [
    "AgentExecutor",
    "AgentExecutorRequest",
    "AgentExecutorResponse",
    "AgentModelError",
    "AgentRunUpdateEvent",
    "ApprovalsAnswered",
    "conversation_key",
]
