"""What the agent tests add to the public ``temporal_workflows.agents.testing`` helpers: process-wide records.

The scripted chat client itself is the public one (replies depend only on
the messages a model call is given, so a graph gives the same answers in
process, on Temporal, and on a retried attempt). The tests also need to see
every model call and every tool run of a conversation wherever the client
object was built (a worker builds its own graph), so calls are recorded
per conversation tag in module-level tables: not something a user's test
wants from the public helper, whose ``calls`` list belongs to one client.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agent_framework import Message

from temporal_workflows.agents import testing
from temporal_workflows.agents.testing import Reply, ToolCall

__all__ = ["MODEL_CALLS", "TOOL_CALLS", "Reply", "ScriptedChatClient", "ToolCall", "count", "tag_of"]

MODEL_CALLS: defaultdict[str, list[list[str]]] = defaultdict(list)
"""Per conversation tag (the first user message's first word): each model call's message roles and texts."""

TOOL_CALLS: defaultdict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
"""Per conversation tag: every tool that ran, with its arguments (the tools append here themselves)."""


def tag_of(messages: Sequence[Message]) -> str:
    for m in messages:
        if m.role == "user" and m.text:
            return m.text.split()[0]
    return "?"


def count(messages: Sequence[Message], kind: str) -> int:
    """Contents of ``kind`` (``function_result``, ``text``...) in ``messages``."""
    return sum(1 for m in messages for c in m.contents if c.type == kind)


class ScriptedChatClient(testing.ScriptedChatClient):
    """The public scripted client, also recording each model call in :data:`MODEL_CALLS`."""

    def reply_to(self, messages: list[Message]) -> Reply:
        MODEL_CALLS[tag_of(messages)].append([f"{m.role}:{m.text}" for m in messages])
        return super().reply_to(messages)
