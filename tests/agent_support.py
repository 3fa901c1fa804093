"""Deterministic agents for tests: a scripted Agent Framework chat client and Pydantic AI function models.

Replies depend only on the messages a model call is given (never on how many
calls came before), so a graph gives the same answers in process, on
Temporal, and on a retried attempt; every call is recorded, so a test can
check that no completed model call or tool ran again.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
)

Call = tuple[str, dict[str, Any]]
Reply = str | list[Call] | BaseException
"""Text (streamed in the pieces ``|`` separates), function calls ``[(name, args), ...]``, or an error to raise."""

MODEL_CALLS: defaultdict[str, list[list[str]]] = defaultdict(list)
"""Per conversation tag (the first user message's first word): each model call's message roles and texts."""

TOOL_CALLS: defaultdict[str, list[Call]] = defaultdict(list)
"""Per conversation tag: every tool that ran, with its arguments."""


def tag_of(messages: Sequence[Message]) -> str:
    for m in messages:
        if m.role == "user" and m.text:
            return m.text.split()[0]
    return "?"


def count(messages: Sequence[Message], kind: str) -> int:
    """Contents of ``kind`` (``function_result``, ``text``...) in ``messages``."""
    return sum(1 for m in messages for c in m.contents if c.type == kind)


class ScriptedChatClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    """An Agent Framework chat client whose reply is ``script(messages)``."""

    def __init__(self, script: Callable[[list[Message]], Reply], *, delay: float = 0.0) -> None:
        super().__init__(middleware=[])
        self.script = script
        self.delay = delay

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        given = list(messages)
        MODEL_CALLS[tag_of(given)].append([f"{m.role}:{m.text}" for m in given])
        reply = self.script(given)
        if isinstance(reply, BaseException):
            error = reply

            async def fail() -> ChatResponse:
                raise error

            if stream:

                async def fail_stream() -> AsyncIterable[ChatResponseUpdate]:
                    raise error
                    yield  # pragma: no cover

                return ResponseStream(fail_stream(), finalizer=ChatResponse.from_updates)
            return fail()
        if isinstance(reply, str):
            updates = [ChatResponseUpdate(contents=[Content.from_text(p)], role="assistant") for p in reply.split("|")]
        else:
            calls = [
                Content.from_function_call(call_id=f"call-{len(given)}-{i}", name=name, arguments=json.dumps(args))
                for i, (name, args) in enumerate(reply)
            ]
            updates = [ChatResponseUpdate(contents=calls, role="assistant")]
        delay = self.delay

        if stream:

            async def gen() -> AsyncIterable[ChatResponseUpdate]:
                for u in updates:
                    if delay:
                        await asyncio.sleep(delay)
                    yield u

            return ResponseStream(gen(), finalizer=ChatResponse.from_updates)

        async def get() -> ChatResponse:
            return ChatResponse.from_updates(updates)

        return get()
