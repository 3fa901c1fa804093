"""The AG-UI side of a turn: open and close text messages, tool calls, reasoning and steps as the protocol wants.

AG-UI checks its streams (``verifyEvents`` in ``@ag-ui/client``): a message
or tool call is started before its content and ended before the run ends,
a step is finished by whoever started it, step names are unique while
active. :class:`Emitter` keeps that bookkeeping for every kind of run, and
the messages this turn made, so text a failed attempt streamed can be taken
back with a ``MESSAGES_SNAPSHOT`` (the client's messages less that text).

Who a piece of text belongs to is its *owner*: a step's attempt
``(superstep, index, attempt)``, or an output. Message ids derive from the
turn's ``runId`` and the owner, so a reconnect makes the same ids again.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from temporal_workflows.ag_ui._kinds import TurnContext

__all__ = ["Emitter", "Owner", "to_json"]

Owner = Hashable
"""Who text belongs to: a step attempt, or an output."""


def to_json(value: Any) -> Any:
    """``value`` as plain JSON (models and Agent Framework contents by their own dumps, else ``str``)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            return to_json(to_dict())
        except Exception:
            pass
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", fallback=lambda v: to_json(v))
        except Exception:
            pass
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return str(value)


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(to_json(value), ensure_ascii=False)


class Emitter:
    """Events of one turn, made valid AG-UI as they go: each with whether it is counted (has an SSE id)."""

    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self._out: list[tuple[bool, BaseEvent]] = []
        self._messages: dict[str, dict[str, Any]] = {}
        self._owner_of: dict[str, Owner] = {}
        self._text: dict[Owner, str] = {}
        self._reasoning: dict[Owner, str] = {}
        self._assistant: dict[Owner, str] = {}
        self._tools: dict[str, Owner] = {}
        self._seq: dict[Owner, int] = {}
        self._steps: dict[Hashable, str] = {}

    # -- output ----------------------------------------------------------------------------------

    def emit(self, event: BaseEvent, *, counted: bool = True) -> None:
        self._out.append((counted, event))

    def take(self) -> list[tuple[bool, BaseEvent]]:
        out, self._out = self._out, []
        return out

    def custom(self, name: str, value: Any) -> None:
        self.emit(CustomEvent(name=name, value=to_json(value)))

    # -- ids -------------------------------------------------------------------------------------

    def _new_id(self, owner: Owner, kind: str) -> str:
        n = self._seq.get(owner, 0) + 1
        self._seq[owner] = n
        where = ".".join(str(p) for p in owner) if isinstance(owner, tuple) else str(owner)
        return f"{self.ctx.run_id}/{where}/{kind}{n}"

    # -- text ------------------------------------------------------------------------------------

    def _end_reasoning(self, owner: Owner) -> None:
        rid = self._reasoning.pop(owner, None)
        if rid is not None:
            self.emit(ReasoningMessageEndEvent(message_id=rid))
            self.emit(ReasoningEndEvent(message_id=rid))

    def _end_text(self, owner: Owner) -> None:
        mid = self._text.pop(owner, None)
        if mid is not None:
            self.emit(TextMessageEndEvent(message_id=mid))

    def _end_tools(self, owner: Owner) -> None:
        for call_id in [c for c, o in self._tools.items() if o == owner]:
            del self._tools[call_id]
            self.emit(ToolCallEndEvent(tool_call_id=call_id))

    def text(
        self, owner: Owner, delta: str, *, name: str | None = None, metadata: dict[str, Any] | None = None
    ) -> None:
        """A piece of an assistant message of ``owner`` (started when its first piece comes, with ``metadata``)."""
        self._end_reasoning(owner)
        self._end_tools(owner)
        mid = self._text.get(owner)
        if mid is None:
            mid = self._new_id(owner, "m")
            self._text[owner] = mid
            self._assistant[owner] = mid
            self._owner_of[mid] = owner
            self._messages[mid] = {"id": mid, "role": "assistant", "content": "", **({"name": name} if name else {})}
            self.emit(TextMessageStartEvent(message_id=mid, role="assistant", name=name, metadata=metadata))
        self._messages[mid]["content"] = self._messages[mid].get("content", "") + delta
        self.emit(TextMessageContentEvent(message_id=mid, delta=delta))

    def reasoning(self, owner: Owner, delta: str) -> None:
        self._end_text(owner)
        self._end_tools(owner)
        rid = self._reasoning.get(owner)
        if rid is None:
            rid = self._new_id(owner, "r")
            self._reasoning[owner] = rid
            self._owner_of[rid] = owner
            self._messages[rid] = {"id": rid, "role": "reasoning", "content": ""}
            self.emit(ReasoningStartEvent(message_id=rid))
            self.emit(ReasoningMessageStartEvent(message_id=rid))
        self._messages[rid]["content"] += delta
        self.emit(ReasoningMessageContentEvent(message_id=rid, delta=delta))

    def message(
        self, owner: Owner, text: str, *, name: str | None = None, metadata: dict[str, Any] | None = None
    ) -> None:
        """A whole assistant message (an output)."""
        self.text(owner, text, name=name, metadata=metadata)
        self._end_text(owner)

    # -- tool calls ------------------------------------------------------------------------------

    def tool_call(self, owner: Owner, call_id: str, name: str, arguments: str) -> None:
        """A tool call of ``owner``'s assistant message (started once; later pieces add arguments)."""
        self._end_reasoning(owner)
        if call_id not in self._tools:
            self._end_text(owner)
            for other in [c for c, o in self._tools.items() if o == owner]:
                del self._tools[other]
                self.emit(ToolCallEndEvent(tool_call_id=other))
            parent = self._assistant.get(owner)
            if parent is None:
                parent = self._new_id(owner, "m")
                self._assistant[owner] = parent
                self._owner_of[parent] = owner
                self._messages[parent] = {"id": parent, "role": "assistant"}
            self._tools[call_id] = owner
            message = self._messages[parent]
            message.setdefault("toolCalls", []).append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            )
            self.emit(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent))
        if arguments:
            for message in self._messages.values():
                for call in message.get("toolCalls", ()):
                    if call["id"] == call_id:
                        call["function"]["arguments"] += arguments
            self.emit(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))

    def tool_result(self, owner: Owner, call_id: str, content: Any) -> None:
        if call_id in self._tools:
            del self._tools[call_id]
            self.emit(ToolCallEndEvent(tool_call_id=call_id))
        self._end_text(owner)
        self._end_reasoning(owner)
        self._assistant.pop(owner, None)  # text after a tool's result is a new assistant message
        mid = self._new_id(owner, "t")
        self._owner_of[mid] = owner
        text = _text_of(content)
        self._messages[mid] = {"id": mid, "role": "tool", "toolCallId": call_id, "content": text}
        self.emit(ToolCallResultEvent(message_id=mid, tool_call_id=call_id, content=text, role="tool"))

    # -- owners ----------------------------------------------------------------------------------

    def end(self, owner: Owner) -> None:
        """End whatever ``owner`` has open (its step ended or was retried)."""
        self._end_reasoning(owner)
        self._end_text(owner)
        self._end_tools(owner)
        self._assistant.pop(owner, None)

    def void(self, owners: Iterable[Owner]) -> None:
        """Take back what ``owners`` (attempts a retry superseded) said: a ``MESSAGES_SNAPSHOT`` without it."""
        gone = list(dict.fromkeys(owners))  # in the order given: the events must be the same on every replay
        for owner in gone:
            self.end(owner)
        dropped = [mid for mid, o in self._owner_of.items() if o in gone]
        if not dropped:
            return
        for mid in dropped:
            self._messages.pop(mid, None)
            del self._owner_of[mid]
        kept = [m.model_dump(mode="json", by_alias=True) for m in self.ctx.input_messages]
        self.emit(MessagesSnapshotEvent(messages=[*kept, *self._messages.values()]))  # type: ignore[list-item]

    # -- steps -----------------------------------------------------------------------------------

    def step_started(self, key: Hashable, name: str) -> None:
        if key in self._steps:
            return
        taken = set(self._steps.values())
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name} ({n})"
        self._steps[key] = unique
        self.emit(StepStartedEvent(step_name=unique))

    def step_active(self, key: Hashable) -> bool:
        return key in self._steps

    def step_finished(self, key: Hashable) -> None:
        name = self._steps.pop(key, None)
        if name is not None:
            self.emit(StepFinishedEvent(step_name=name))

    def close(self) -> None:
        """End every open message, tool call and step (before the turn's last event)."""
        for owner in dict.fromkeys([*self._text, *self._reasoning, *self._tools.values()]):
            self.end(owner)
        for key in list(self._steps):
            self.step_finished(key)
