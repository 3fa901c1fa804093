"""What the endpoint needs of a kind of durable run: give it input, read it, answer what it asks.

A turn (``_turn.py``) is the same for every kind of run; a kind (a graph run,
``_graph.py``; a LlamaIndex workflow run by ``TemporalRuntime``) supplies only
what differs: how a message and answers enter the run, what the run is
waiting for, its state, its event stream, and how its events read as AG-UI
events (its :class:`Translator`).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ag_ui.core import BaseEvent, Interrupt, ResumeEntry
from temporalio.client import Client

__all__ = [
    "APPROVAL_SCHEMA",
    "Ask",
    "Phase",
    "Refusal",
    "RunKind",
    "Translator",
    "TurnContext",
]

Phase = Literal["working", "resting", "closed"]
"""Where a run is: taking up work, at rest (idle or waiting for input), or ended."""


class Refusal(Exception):
    """Input the endpoint or the run refused: the turn ends with ``RUN_ERROR`` (``code``, the message)."""

    def __init__(self, message: str, code: str = "InvalidInput") -> None:
        super().__init__(message)
        self.code = code


APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Whether the tool call may run."},
        "reason": {"type": "string", "description": "Why not (shown to the model when it is denied)."},
    },
    "required": ["approved"],
}
"""The answer to a tool approval (``reason: tool_call``), as Pydantic AI's and Agent Framework's adapters take it."""


@dataclass(frozen=True)
class Ask:
    """Something a run waits for, as an AG-UI interrupt describes it, and how an answer to it is made.

    Attributes:
        id: The run's request id (the interrupt's id, answered by ``resume[].interruptId``).
        reason: ``tool_call`` (an agent's tool approval) or ``input_required``.
        message: A line a person can read.
        response_schema: JSON Schema of the answer (``resume[].payload``).
        expires_at: When the run stops waiting for it.
        tool_call_id: The tool call an approval is about.
        metadata: What else a front end may show (the request's data, who asks).
        answer: Makes the run's response from a resume entry; raises :class:`Refusal`.
    """

    id: str
    reason: str
    message: str
    response_schema: dict[str, Any] | None
    answer: Callable[[ResumeEntry], Any]
    expires_at: datetime | None = None
    tool_call_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def interrupt(self) -> Interrupt:
        expires = None
        if self.expires_at is not None:
            expires = self.expires_at.isoformat().replace("+00:00", "Z")
        return Interrupt(
            id=self.id,
            reason=self.reason,
            message=self.message,
            tool_call_id=self.tool_call_id,
            response_schema=self.response_schema,
            expires_at=expires,
            metadata=self.metadata or None,
        )


@dataclass(frozen=True)
class TurnContext:
    """What every part of one turn knows: the thread, the turn, the run, and the client's messages."""

    thread_id: str
    run_id: str
    workflow_id: str
    input_messages: tuple[Any, ...]
    """The client's messages as it sent them (JSON), kept in a ``MESSAGES_SNAPSHOT`` that replaces void text."""


class Translator(abc.ABC):
    """Turns one run's events into AG-UI events, item by item of its stream; knows when the turn ends.

    ``feed`` must make the same counted events from the same items every
    time (a reconnect makes them again to find where the client stopped);
    events that depend on a query (state) are not counted and carry no id.
    """

    ended: Literal["idle", "waiting", "failed", "closed"] | None = None
    error: tuple[str, str] | None = None
    """``(message, code)`` of a run that failed."""
    outputs: list[Any]

    @abc.abstractmethod
    async def feed(self, offset: int, events: list[Any], *, live: bool) -> list[tuple[bool, BaseEvent]]:
        """AG-UI events for one stream item, each with whether it is counted (carries an SSE id).

        ``live``: the client has not seen these yet (state is queried only then).
        """

    @abc.abstractmethod
    async def snapshot(self) -> list[BaseEvent]:
        """The run's state now (``STATE_SNAPSHOT``), which later deltas are made against; never counted."""

    @abc.abstractmethod
    def close(self) -> list[BaseEvent]:
        """Ends what is open (text, tool calls, steps, sub-agents) before the turn's last event."""


class RunKind(abc.ABC):
    """One kind of durable run behind an AG-UI endpoint, named ``name`` (the ``{name}`` of its route)."""

    name: str

    @abc.abstractmethod
    def message_input(self, text: str) -> Any:
        """The run's input for a user message's text (text, or JSON for a typed start); raises :class:`Refusal`."""

    @abc.abstractmethod
    async def phase(self, client: Client, workflow_id: str) -> Phase | None:
        """Where the run is; ``None``: there is none."""

    @abc.abstractmethod
    async def head(self, client: Client, workflow_id: str) -> int:
        """The offset the run's event stream will give its next item at."""

    @abc.abstractmethod
    async def deliver(self, client: Client, workflow_id: str, value: Any, delivery_id: str, *, task_queue: str) -> bool:
        """Give the run a message, starting the run if there is none (in the same call); whether it took it now.

        A message the run took before (the same ``delivery_id``) is not taken
        again (``False``). Raises :class:`Refusal` with the run's own words
        when it refuses it.
        """

    @abc.abstractmethod
    async def asks(self, client: Client, workflow_id: str) -> list[Ask]:
        """What the run waits for, oldest first."""

    @abc.abstractmethod
    async def respond(self, client: Client, workflow_id: str, answers: dict[str, Any]) -> None:
        """Answer requests together; the run checks every answer before it takes any (raises :class:`Refusal`)."""

    @abc.abstractmethod
    async def state(self, client: Client, workflow_id: str) -> dict[str, Any]:
        """The run's committed shared state (JSON)."""

    @abc.abstractmethod
    def read(self, client: Client, workflow_id: str, from_offset: int) -> AsyncIterator[tuple[int, list[Any]]]:
        """The run's stream from ``from_offset``: each item's offset and its events; ends when the run closes."""

    @abc.abstractmethod
    async def translator(self, client: Client, ctx: TurnContext, mode: str) -> Translator:
        """A translator for one turn (``mode``: how it ends, ``_ids.TurnMode``)."""

    @abc.abstractmethod
    async def closed_outcome(self, client: Client, workflow_id: str) -> tuple[str, str] | None:
        """For a run that has ended: ``None`` if it completed, else ``(message, code)``."""
