"""The live event an agent step streams: one update of the agent's response."""

from __future__ import annotations

import copy
from typing import Literal

from agent_framework import AgentResponseUpdate, Content

from temporal_workflows._engine.serde import register_type
from temporal_workflows._live import LiveEvent
from temporal_workflows.agents._maf_types import install_maf_types

install_maf_types()  # before the model below builds its schema

__all__ = ["AgentRunUpdateEvent"]

_MERGEABLE = ("text", "text_reasoning")


class AgentRunUpdateEvent(LiveEvent):
    """One streamed update of an agent's response, published while its step runs.

    ``data`` is Agent Framework's ``AgentResponseUpdate`` (text deltas, tool
    calls and results, reasoning), whatever framework the agent is built
    with. Its ``type`` is ``"output"``, as the updates Agent Framework's own
    ``AgentExecutor`` streams are, so a sample's
    ``if event.type == "output" and isinstance(event.data, AgentResponseUpdate)``
    loop reads it unchanged; it is a :class:`~temporal_workflows.events.LiveEvent`,
    never one of the run's outputs (``get_outputs()`` and the run's result
    hold the committed ``AgentResponse``).

    On Temporal, text deltas of one message that wait for the same batch
    arrive merged into one update (the same text, fewer events).
    """

    type: Literal["output"] = "output"  # type: ignore[assignment]
    data: AgentResponseUpdate

    def merge(self, later: LiveEvent) -> LiveEvent | None:
        if not isinstance(later, AgentRunUpdateEvent):
            return None
        a, b = self.data, later.data
        if (a.role, a.author_name, a.agent_id, a.response_id, a.message_id) != (
            b.role,
            b.author_name,
            b.agent_id,
            b.response_id,
            b.message_id,
        ):
            return None
        if len(a.contents) != 1 or len(b.contents) != 1:
            return None
        ca, cb = a.contents[0], b.contents[0]
        if ca.type != cb.type or ca.type not in _MERGEABLE or ca.annotations or cb.annotations:
            return None
        if ca.additional_properties or cb.additional_properties:
            return None
        text = (ca.text or "") + (cb.text or "")
        merged = copy.copy(a)
        merged.contents = [Content.from_text(text) if ca.type == "text" else Content.from_text_reasoning(text=text)]
        return self.model_copy(update={"data": merged, "seq": later.seq})


register_type(AgentRunUpdateEvent)
