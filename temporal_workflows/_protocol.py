"""The data that crosses between client, workflow and activities.

Kept in one small module with no user code, so the Temporal workflow sandbox
and the activity worker agree on it, and so the wire contract is documented
in one place (see ``docs/temporal.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._engine import PendingRequest, StepTask, Topology
from ._serde import Envelope

__all__ = [
    "ACTIVITY_REDUCE",
    "ACTIVITY_TOPOLOGY",
    "ACTIVITY_VALIDATE",
    "EVENTS_TOPIC",
    "QUERY_COMMITTED_STATE",
    "QUERY_PENDING_REQUESTS",
    "QUERY_STATE",
    "QUERY_STATUS",
    "SIGNAL_CLOSE",
    "SIGNAL_RESPOND",
    "SIGNAL_SEND",
    "STATUS_SEARCH_ATTRIBUTE",
    "UPDATE_RESPOND",
    "UPDATE_SEND",
    "Pinned",
    "ReduceInput",
    "RespondInput",
    "RunInput",
    "SendInput",
    "StateSnapshot",
    "StepInput",
    "ValidateInput",
    "Validated",
    "step_activity_name",
]

SIGNAL_RESPOND = "respond"
"""Signal ``{"request_id": ..., "response": ...}``: answer a pending request (bad input → warning)."""
UPDATE_RESPOND = "submit_response"
"""Update with the same argument: returns once the response is accepted, rejects bad input."""
SIGNAL_SEND = "send"
"""Signal ``{"executor_id": ..., "message": ...}``: a message from outside for the next superstep."""
UPDATE_SEND = "send_message"
"""Update with the same argument: returns once the message is accepted, rejects bad input."""
SIGNAL_CLOSE = "close"
"""Signal (no argument): a keep-alive run completes once it is idle."""
QUERY_STATUS = "status"
QUERY_PENDING_REQUESTS = "pending_requests"
QUERY_STATE = "state"
EVENTS_TOPIC = "events"
"""``temporalio.contrib.workflow_streams`` topic carrying the run's events as envelopes."""
STATUS_SEARCH_ATTRIBUTE = "TemporalWorkflowsStatus"
"""Keyword search attribute holding the run status (running, waiting_for_input, idle, ...)."""

ACTIVITY_VALIDATE = "temporal_workflows.validate"
"""Local activity checking a response or sent message against the graph's types (user code)."""

ACTIVITY_TOPOLOGY = "temporal_workflows.topology"
"""Local activity that returns a graph's topology; its result pins the graph for the run."""

ACTIVITY_REDUCE = "temporal_workflows.reduce"
"""Activity running callable state reducers (user code) for a commit."""

QUERY_COMMITTED_STATE = "temporal_workflows.committed_state"
"""Query serving the committed state to step activities whose worker has not cached it."""


def step_activity_name(graph_name: str, executor_id: str) -> str:
    """Activity type of an executor's steps: readable in the Web UI and metrics."""
    return f"{graph_name}.{executor_id}"


@dataclass
class RunInput:
    """Workflow input. ``client.start_workflow(name, {"message": ...})`` is the whole contract.

    Attributes:
        message: The start message as JSON (validated against the start
            executor's handler types by the first step).
        message_type: ``"module:QualName"`` when the caller sent a typed model
            and wants that exact type restored; usually omitted.
    """

    message: Any = None
    message_type: str | None = None
    keep_alive: bool = False
    """Stay open when idle, for more ``send`` messages (a conversation); end with ``close``.
    A keep-alive run started without a ``message`` starts idle."""


@dataclass
class Pinned:
    """What the first local activity records in history for the whole run."""

    topology: Topology
    status_attribute: str | None = None
    """The status search attribute, if the namespace has it registered."""


@dataclass
class RespondInput:
    request_id: str
    response: Any = None


@dataclass
class SendInput:
    executor_id: str
    message: Any = None
    message_type: str | None = None


@dataclass
class ValidateInput:
    """A response (``request`` set) or a sent message to check against the graph's types."""

    graph: str
    executor_id: str
    value: Envelope
    request: PendingRequest | None = None


@dataclass
class Validated:
    """The value typed as its handler expects it, or why it cannot be delivered."""

    value: Envelope | None = None
    error: str | None = None


@dataclass
class StateSnapshot:
    """Committed state at a boundary, as served to step activities."""

    version: str
    state: dict[str, Envelope]


@dataclass
class StepInput:
    """Activity input of one step.

    ``state`` is inlined only while the committed state is small; otherwise
    the activity reads it from its worker's cache (or by query), so history
    carries each state value once, in the diff that wrote it, however many
    steps read it.
    """

    graph: str
    task: StepTask
    run_id: str
    state_version: str
    state: dict[str, Envelope] | None = None


@dataclass
class ReduceInput:
    graph: str
    key: str
    committed: Envelope | None
    writes: list[Envelope] = field(default_factory=list)
