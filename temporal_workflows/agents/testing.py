"""A deterministic Agent Framework chat client: try and test agent graphs with no model and no key.

    from agent_framework import Agent
    from temporal_workflows.agents.testing import ScriptedChatClient, ToolCall

    client = ScriptedChatClient([ToolCall("publish", {"title": "Bikes"}), "Published it."])
    reviewer = Agent(client=client, name="reviewer", tools=[publish])

Agent Framework 1.23 ships no test model (Pydantic AI has ``TestModel`` and
``FunctionModel``, which :class:`~temporal_workflows.agents.AgentExecutor`
runs as they are: docs/agents.md). The reply to a model call depends only on
the messages that call is given, never on how many calls this object served
before: a step that runs in another worker process, or again after a retry
or a replay, gets the same answer, as a durable run needs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
    UsageDetails,
)
from agent_framework.observability import ChatTelemetryLayer

__all__ = ["Reply", "Script", "ScriptedChatClient", "ToolCall", "model_turn"]


@dataclass(frozen=True)
class ToolCall:
    """A reply that calls the tool ``name`` with ``arguments`` (Agent Framework then runs it, or asks to)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


Reply: TypeAlias = str | ToolCall | Sequence[ToolCall] | BaseException
"""Text (streamed word by word), one tool call, several in one response, or an error the model call raises."""

Script: TypeAlias = Sequence[Reply] | Callable[[list[Message]], Reply]
"""Replies in order, one per model call of a turn (see :func:`model_turn`), or a function of the messages."""


def model_turn(messages: Sequence[Message]) -> int:
    """How many model calls this turn has made before: the tool-calling responses since the last user message.

    A turn starts with a user message (or another agent's text); each round of
    tool calls adds one assistant message with calls, and the tool results
    after it, before the model is called again.
    """
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    later = messages[last_user + 1 :]
    return sum(1 for m in later if m.role == "assistant" and any(c.type == "function_call" for c in m.contents))


class ScriptedChatClient(  # type: ignore[misc]
    FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient
):
    """An Agent Framework chat client that answers from a script: streaming, tool calls, errors.

    ``script`` is a list of replies, the n-th answering the n-th model call of
    a turn (the last one repeats), or a function from the call's messages to
    a reply. ``delay`` seconds pass before each streamed piece, so a reader
    sees text arrive while the step runs. Text streams word by word; with
    ``stream_words=False`` each text reply is one piece, as a model that
    answers in one block sends it (the same response either way; only what
    a streamed run's reader sees differs). ``calls`` keeps the messages of
    every model call this object served (in this process), for assertions.

    Like Agent Framework's own clients it is instrumented (its
    ``ChatTelemetryLayer``): each model call is a ``chat <model>`` span with
    OpenTelemetry's GenAI attributes, and records ``gen_ai.client.token.usage``.
    Its response says which ``model`` answered, why it stopped
    (``tool_calls`` or ``stop``) and what it used: tokens counted as words
    (whitespace-separated pieces of the messages' text, tool arguments and
    results), a deterministic stand-in for a tokenizer.
    """

    OTEL_PROVIDER_NAME = "temporal_workflows.scripted"

    def __init__(
        self, script: Script, *, delay: float = 0.0, stream_words: bool = True, model: str = "scripted"
    ) -> None:
        super().__init__(middleware=[])
        if not callable(script) and not script:
            raise ValueError("ScriptedChatClient needs at least one reply")
        self.script = script
        self.delay = delay
        self.stream_words = stream_words
        self.model = model
        self.calls: list[list[Message]] = []

    def reply_to(self, messages: list[Message]) -> Reply:
        """The scripted reply to a model call given ``messages``."""
        if callable(self.script):
            return self.script(messages)
        replies = list(self.script)
        return replies[min(model_turn(messages), len(replies) - 1)]

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        given = list(messages)
        self.calls.append(given)
        reply = self.reply_to(given)
        delay = self.delay
        if isinstance(reply, BaseException):
            error = reply

            async def fail_stream() -> AsyncIterable[ChatResponseUpdate]:
                raise error
                yield  # pragma: no cover

            async def fail() -> ChatResponse:
                raise error

            return ResponseStream(fail_stream(), finalizer=ChatResponse.from_updates) if stream else fail()
        updates = _updates(reply, call_prefix=f"call-{len(given)}", by_word=self.stream_words)
        usage = UsageDetails(input_token_count=_words(given), output_token_count=_reply_words(reply))
        finish_reason = "stop" if isinstance(reply, str) else "tool_calls"
        model = self.model

        def final(pieces: Sequence[ChatResponseUpdate]) -> ChatResponse:
            response = ChatResponse.from_updates(pieces)
            response.usage_details = usage
            response.finish_reason = finish_reason  # type: ignore[assignment]
            response.model = model
            return response

        async def gen() -> AsyncIterable[ChatResponseUpdate]:
            for update in updates:
                if delay:
                    await asyncio.sleep(delay)
                yield update

        async def whole() -> ChatResponse:
            return final(updates)

        return ResponseStream(gen(), finalizer=final) if stream else whole()


def _words(messages: Sequence[Message]) -> int:
    """The scripted client's token count of a model call's input: words of its texts, tool arguments and results."""
    count = 0
    for m in messages:
        for c in m.contents:
            if c.type == "text":
                count += len((c.text or "").split())
            elif c.type == "function_call":
                count += 1 + len(str(c.arguments or "").split())
            elif c.type == "function_result":
                count += len(str(c.result).split())
    return count


def _reply_words(reply: str | ToolCall | Sequence[ToolCall]) -> int:
    if isinstance(reply, str):
        return len(reply.split())
    calls = [reply] if isinstance(reply, ToolCall) else list(reply)
    return sum(1 + len(json.dumps(dict(c.arguments)).split()) for c in calls)


def _updates(reply: str | ToolCall | Sequence[ToolCall], call_prefix: str, by_word: bool) -> list[ChatResponseUpdate]:
    if isinstance(reply, str) and not by_word:
        return [ChatResponseUpdate(contents=[Content.from_text(reply)], role="assistant")] if reply else []
    if isinstance(reply, str):
        words = reply.split(" ")
        pieces = [w + " " for w in words[:-1]] + words[-1:]
        return [ChatResponseUpdate(contents=[Content.from_text(p)], role="assistant") for p in pieces if p]
    calls = [reply] if isinstance(reply, ToolCall) else list(reply)
    contents = [
        # The call id is derived from the conversation, so a retried step asks for the same call.
        Content.from_function_call(call_id=f"{call_prefix}-{i}", name=c.name, arguments=json.dumps(dict(c.arguments)))
        for i, c in enumerate(calls)
    ]
    return [ChatResponseUpdate(contents=contents, role="assistant")]
