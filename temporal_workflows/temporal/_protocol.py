"""The data that crosses between client, workflow and activities.

Kept in one small module with no user code, so the Temporal workflow sandbox
and the activity worker agree on it, and so the wire contract is documented
in one place (see ``docs/temporal.md``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_serializer, model_validator
from pydantic_core import PydanticCustomError, to_json
from temporalio.contrib.workflow_streams import WorkflowStreamState

from temporal_workflows._checkpoints.base import WorkflowCheckpoint
from temporal_workflows._engine.ids import bounded_id
from temporal_workflows._engine.limits import MAX_ANSWERS_PER_UPDATE, too_large
from temporal_workflows._engine.machine import PendingRequest, StepTask, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._graph.shape import GraphShape

__all__ = [
    "SIGNAL_DELIVER",
    "UPDATE_CONFIRM",
    "UPDATE_INLINE_BYTES",
    "ConfirmInput",
    "Delivery",
    "DeliveryOutcome",
    "ACTIVITY_LOAD_CHECKPOINT",
    "ACTIVITY_REDUCE",
    "ACTIVITY_SAVE_CHECKPOINT",
    "ACTIVITY_PIN",
    "ACTIVITY_TOPOLOGY",
    "ACTIVITY_VALIDATE",
    "EVENTS_TOPIC",
    "LIVE_BATCH_TYPE",
    "MAX_STREAM_POLLS",
    "STREAM_POLL",
    "STREAM_POLLS_FULL",
    "LEGACY_FAILURE_TYPES",
    "STEP_ERROR_ARGS",
    "STEP_ERROR_CLASS",
    "FAILURE_CHECKPOINT_BASE_MISSING",
    "FAILURE_STALE_STATE",
    "FAILURE_SIGNATURE_MISMATCH",
    "FAILURE_CHECKPOINT_STORAGE",
    "FAILURE_CHECKPOINT_NOT_FOUND",
    "FAILURE_UNKNOWN_GRAPH",
    "FAILURE_INVALID_RUN_INPUT",
    "FAILURE_UNDELIVERABLE",
    "FAILURE_INVALID_RESPONSE",
    "FAILURE_UNKNOWN_REQUEST",
    "FAILURE_ALREADY_ANSWERED",
    "FAILURE_RUN_CLOSED",
    "FAILURE_RUN_BUSY",
    "FAILURE_RUN_IN_PROGRESS",
    "FAILURE_INPUT_TOO_LONG",
    "FAILURE_UNKNOWN_DELIVERY",
    "FAILURE_DELIVERY_FORGOTTEN",
    "QUERY_CHECKPOINT",
    "QUERY_CHECKPOINTS",
    "QUERY_COMMITTED_STATE",
    "QUERY_COMMITTED_STATE_PAGE",
    "QUERY_OUTSIDE_INPUT",
    "QUERY_TURNS",
    "MAX_TURN_KEYS",
    "TrackedInput",
    "VALIDATE_INLINE_BYTES",
    "SIGNATURE_WAIT",
    "SIGNATURE_WAIT_TEXT",
    "SIGNATURE_RETRY_DELAYS",
    "QUERY_PENDING_REQUESTS",
    "QUERY_STATE",
    "QUERY_STATUS",
    "QUERY_TOPOLOGY",
    "SIGNAL_CHECKPOINT",
    "SIGNAL_CLOSE",
    "SIGNAL_RESET",
    "SIGNAL_RESPOND",
    "SIGNAL_SEND",
    "STATUS_SEARCH_ATTRIBUTE",
    "UPDATE_CHECKPOINT",
    "UPDATE_RESET",
    "UPDATE_PACE",
    "READER_TOPIC_PREFIX",
    "READER_LAPSE",
    "PaceInput",
    "UPDATE_RESPOND",
    "UPDATE_RESPOND_ALL",
    "MAX_RESPONSES_PER_UPDATE",
    "RespondAllInput",
    "UPDATE_SEND",
    "Carried",
    "CarriedInput",
    "CarriedStatus",
    "CarriedCheckpoints",
    "CarriedInbox",
    "CheckpointRequest",
    "CheckpointSetup",
    "ForkSource",
    "LoadCheckpointInput",
    "PinInput",
    "Pinned",
    "ReduceInput",
    "ResetRequest",
    "RespondInput",
    "RunInput",
    "SaveCheckpointInput",
    "SendInput",
    "StateSnapshot",
    "StatePage",
    "state_page_text",
    "state_from_text",
    "StepInput",
    "SubWorkflowInput",
    "ValidateInput",
    "Validated",
    "DEFAULT_MAX_HISTORY_EVENTS",
    "MAX_STEPS_IN_FLIGHT",
    "TASK_BUDGET_BYTES",
    "POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES",
    "POSTPONE_CONTINUE_AS_NEW_HISTORY_EVENTS",
    "step_activity_name",
]

SIGNAL_RESPOND = "respond"
"""Signal ``{"request_id": ..., "response": ...}``: answer a pending request (bad input → warning)."""
UPDATE_RESPOND = "submit_response"
"""Update with the same argument: returns once the response is accepted, rejects bad input."""
UPDATE_RESPOND_ALL = "submit_responses"
"""Update ``{"responses": [{"request_id": ..., "response": ...}, ...]}``: several answers given together
(``run(responses={...})``), checked all before any is accepted (one refused: none is) and handed to the
engine at one boundary; returns once all are accepted."""
MAX_RESPONSES_PER_UPDATE = MAX_ANSWERS_PER_UPDATE
"""Most answers one ``submit_responses`` update carries (a run rarely has more requests pending)."""
SIGNAL_SEND = "send"
"""Signal ``{"executor_id": ..., "message": ...}``: a message from outside for the next superstep."""
UPDATE_SEND = "send_message"
"""Update with the same argument: returns once the message is accepted, rejects bad input."""
SIGNAL_CLOSE = "close"
"""Signal (no argument): a keep-alive run completes once it is idle."""
SIGNAL_CHECKPOINT = "checkpoint"
"""Signal ``{}`` or ``{"label": ...}``: take a checkpoint at the next superstep boundary."""
UPDATE_CHECKPOINT = "take_checkpoint"
"""Update with the same argument: returns the checkpoint's id and superstep once it is saved."""
SIGNAL_RESET = "reset"
"""Signal ``{}`` (clean start), ``{"message": ...}`` (start again with new input) or
``{"checkpoint_id": ...}`` (back to a checkpoint); the run continues as new."""
UPDATE_RESET = "reset_run"
"""Update with the same argument: returns once the reset is accepted, rejects an unknown checkpoint."""
UPDATE_PACE = "pace"
"""Update ``{"reader": ..., "action": "follow" | "release" | "stop"}`` (:class:`PaceInput`): a streamed caller of
the durable twin says the run should go no further than it has read (``follow``), that it stopped following
(``release``: the run goes on) or that it left the stream (``stop``: the run stays where its reader left it,
and the caller cancels it there). Returns ``{"run_id", "paced"}``."""
READER_TOPIC_PREFIX = "reader:"
"""A topic (never published to) a paced reader adds to its stream polls, ``reader:<token>``: how the run tells its
paced reader's polls (and the offset it has read to) from any other reader's."""
READER_LAPSE = timedelta(seconds=30)
"""A paced run waits no longer than this for a reader that has stopped polling: a caller that crashed (or was
killed) leaves its run going on, as an unread stream of it would; the default step heartbeat timeout."""
SIGNAL_DELIVER = "deliver"
"""Signal ``{"id": ..., "send": {...}}`` or ``{"id": ..., "respond": {...}}``: large input a client
waits for. The run checks it as the update would and keeps the outcome for ``confirm_delivery``."""
UPDATE_CONFIRM = "confirm_delivery"
"""Update ``{"id": ...}``: waits for a ``deliver`` signal's outcome; returns what ``send_message`` or
``submit_response`` would have, or fails with the same refusal."""
QUERY_CHECKPOINTS = "checkpoints"
"""Query: the run's checkpoints (id, superstep, label, created time, parent id), oldest first."""
QUERY_CHECKPOINT = "get_checkpoint"
"""Query (checkpoint id): one checkpoint whole; how history-only checkpoints are read."""
QUERY_STATUS = "status"
QUERY_PENDING_REQUESTS = "pending_requests"
QUERY_STATE = "state"
QUERY_TOPOLOGY = "topology"
"""Query: the run's graph as pinned (name, start executor, executors, sub-workflows) and its picture as data
(``shape``, a :class:`~temporal_workflows._graph.shape.GraphShape`, or ``None`` with a ``note`` saying why)."""
EVENTS_TOPIC = "events"
"""``temporalio.contrib.workflow_streams`` topic carrying the run's events as envelopes."""
LIVE_BATCH_TYPE = "temporal_workflows:live_batch"
"""Envelope type of one item of the events topic that holds a batch of a step's live events (its data: their
envelopes, in order). A step publishes its live events so, one item per signal: what the stream stores, and
what every poll of it walks, grows with batches, not with events (100,000 events make about 100 items)."""
STREAM_POLL = "__temporal_workflow_stream_poll"
"""The update (a long poll) and query (an answer at once) ``temporalio.contrib.workflow_streams`` reads a
run's stream with."""
MAX_STREAM_POLLS = 4
"""Stream polls by update a run holds in flight at most: of the 10 updates Temporal lets an execution hold
(``history.maxInFlightUpdates``), 6 stay for input (answers, messages, checkpoints, resets)."""
STREAM_POLLS_FULL = "stream-polls-full"
"""The detail of a stream poll the run refused because it holds :data:`MAX_STREAM_POLLS` already (its type
is the stream's "draining"): the reader reads by query meanwhile."""
STATUS_SEARCH_ATTRIBUTE = "GraphRunStatus"
"""Keyword search attribute holding the run status (running, waiting_for_input, idle, ...)."""

ACTIVITY_VALIDATE = "temporal_workflows.validate"
"""Local activity checking a response or sent message against the graph's types (user code)."""

ACTIVITY_SAVE_CHECKPOINT = "temporal_workflows.save_checkpoint"
"""Local activity writing a checkpoint (sent as a delta of the last one) to the worker's storage."""

ACTIVITY_LOAD_CHECKPOINT = "temporal_workflows.load_checkpoint"
"""Local activity reading a checkpoint for a reset or fork (from storage, or by query)."""

ACTIVITY_TOPOLOGY = "temporal_workflows.topology"
"""Local activity that returns a graph's topology; its result pins the graph for the run (a run whose start
input names no graph signature: the first worker's graph)."""

ACTIVITY_PIN = "temporal_workflows.pin"
"""Activity returning the topology of the graph signature a run's start input names (:class:`PinInput`):
first as a local activity on the worker that took the run's first workflow task, and when that worker hosts
another signature, as a regular activity that only a worker hosting the run's signature completes."""

ACTIVITY_REDUCE = "temporal_workflows.reduce"
"""Activity running callable state reducers (user code) for a commit."""

QUERY_COMMITTED_STATE = "temporal_workflows.committed_state"
"""Query serving the committed state to step activities whose worker has not cached it (in one answer: workers
before ``QUERY_COMMITTED_STATE_PAGE`` use it; it fails when the state does not fit in one payload)."""

QUERY_COMMITTED_STATE_PAGE = "temporal_workflows.committed_state_page"
"""Query serving the committed state in pages (:class:`StatePage`), so a state larger than one query answer
still reaches a step: the argument is the offset of the page in the state's JSON text."""

QUERY_TURNS = "temporal_workflows.turns"
"""Query (a list of input keys: ``"delivery:<id>"`` for a ``deliver`` signal's message, ``"request:<id>"`` for an
answer): where the run is with each, ``{"taken": bool, "done_at": offset | None, "interrupted": bool}`` or
``None`` when it does not know the key. ``done_at`` is the offset in the run's event stream at which the turn
that took the input ended (it rested, or a message sent while it was busy interrupted it): a client that gave
the input and follows the stream knows which rest is its own (``_workflow/turns.py``)."""

MAX_TURN_KEYS = 128
"""Keys one ``QUERY_TURNS`` query may ask about."""

QUERY_OUTSIDE_INPUT = "temporal_workflows.outside_input"
"""Query serving the ``validate`` activity a large input it checks by reference (``ValidateInput.ref``)."""

SIGNATURE_WAIT = timedelta(hours=24)
"""How long a step refused by workers of another graph signature (a deploy without Worker Versioning)
is scheduled again, waiting for a worker hosting the run's graph, before the run fails."""

SIGNATURE_WAIT_TEXT = f"{SIGNATURE_WAIT.total_seconds() / 3600:g} hours"
""":data:`SIGNATURE_WAIT` as messages say it."""

SIGNATURE_RETRY_DELAYS = (timedelta(seconds=1), timedelta(minutes=5))
"""First and longest wait before such a step is scheduled again (doubling)."""

VALIDATE_INLINE_BYTES = 16 * 1024
"""Largest input the ``validate`` activity gets inside its own input; larger input it reads by query.

History records an activity's input: a large value it already holds (in its
update or signal) is not recorded a second time."""

# -- failure types ------------------------------------------------------------------
# The ``type`` of every ApplicationError the workflow or an activity raises. The
# library's own errors travel under their class name, so the client turns a failed
# update or run back into the exception a run in process raises (``_failures``).

FAILURE_RUN_CLOSED = "RunClosedError"
FAILURE_RUN_IN_PROGRESS = "RunInProgressError"
"""Update refused: the run is busy and the message's concurrent-input policy is ``reject`` (not retried)."""
FAILURE_RUN_BUSY = "RunBusyError"
"""An update refused for now (the run's own local activity in flight): retryable, the client retries it."""
"""Update refused: the run has completed, failed, or is closing."""
FAILURE_ALREADY_ANSWERED = "AlreadyAnsweredError"
"""Update refused: the request was answered already."""
FAILURE_UNKNOWN_REQUEST = "UnknownRequestError"
"""Update refused: no pending request has this id."""
FAILURE_INVALID_RESPONSE = "InvalidResponseError"
"""Update refused: the response does not validate against the request's response type."""
FAILURE_UNDELIVERABLE = "UndeliverableMessageError"
"""Update refused (or step failed): no handler of the target takes the message."""
FAILURE_INVALID_RUN_INPUT = "InvalidRunInputError"
"""Run failed at once: its start input is malformed."""
FAILURE_UNKNOWN_GRAPH = "UnknownGraphError"
"""Run failed: no worker on the task queue hosts a graph of this name."""
FAILURE_CHECKPOINT_NOT_FOUND = "CheckpointNotFoundError"
FAILURE_CHECKPOINT_STORAGE = "CheckpointStorageError"
FAILURE_SIGNATURE_MISMATCH = "GraphSignatureMismatchError"
FAILURE_STALE_STATE = "StaleStateError"
"""Step attempt refused (retryable): the committed state it expected has moved on."""
FAILURE_CHECKPOINT_BASE_MISSING = "CheckpointBaseMissingError"
"""Checkpoint save refused: the delta's base is gone (the workflow sends it whole)."""
FAILURE_INPUT_TOO_LONG = "InputTooLongError"
"""Update refused (a signal: warned about): an id, label or type name over its limit (``MAX_*_CHARS``)."""
FAILURE_UNKNOWN_DELIVERY = "UnknownDeliveryError"
"""``confirm_delivery`` refused: no ``deliver`` signal of this id reached the run."""
FAILURE_DELIVERY_FORGOTTEN = "DeliveryForgottenError"
"""``confirm_delivery`` of a delivery the run took, whose outcome is older than those it keeps."""
STEP_ERROR_CLASS = "error_class"
"""Key, in a failed step activity's failure details, of the user's error class by its qualified name
(``module.QualName``): the failure's type is the class's bare name, as the SDK names it."""
STEP_ERROR_ARGS = "error_args"
"""Key beside it: the error's ``args`` as JSON, where its message alone does not make it again
(``KeyError('k')`` reads ``'k'``, quoted); absent otherwise (``_errors.error_args_of``)."""
LEGACY_FAILURE_TYPES = {
    "RunClosed": FAILURE_RUN_CLOSED,
    "InvalidRunInput": FAILURE_INVALID_RUN_INPUT,
    "UnknownGraph": FAILURE_UNKNOWN_GRAPH,
    "StaleState": FAILURE_STALE_STATE,
    "CheckpointBaseMissing": FAILURE_CHECKPOINT_BASE_MISSING,
}
"""Failure types as runs and workers before version 0.2 named them: still understood."""


MAX_STEPS_IN_FLIGHT = 1000
"""Steps of one superstep scheduled at once unless the run sets fewer; the rest start as these finish.

Temporal refuses a workflow task that would leave more than 2,000 activities
pending (``PENDING_ACTIVITIES_LIMIT_EXCEEDED``), so a wide fan-out is
windowed, leaving headroom for reducer and other activities. Which steps run
first changes nothing: results commit in task order either way.
"""

TASK_BUDGET_BYTES = 3 * 1024 * 1024
"""Most bytes one workflow task may record: step inputs it schedules, local-activity results,
update results, a continue-as-new input. The server terminates a run whose workflow task
completion passes gRPC's 4 MiB (``GrpcMessageTooLarge``); what would not fit waits for the
next task. One payload (under 2 MiB) always fits, so nothing is ever refused for it."""

POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES = 40 * 1024 * 1024
POSTPONE_CONTINUE_AS_NEW_HISTORY_EVENTS = 40_000
"""While history is below both (Temporal terminates a run at 50 MiB or 51,200 events), a run whose
engine holds outside input too large to carry continues as new once it has processed it, not before."""

DEFAULT_MAX_HISTORY_EVENTS = 8_000
"""Continue-as-new threshold when the run sets none: under Temporal's 10,240-event
warning, with room for a wide superstep."""


# -- limits on the strings outside input names ----------------------------------------------
# A run keeps what clients send it: ids in its inbox, labels in its checkpoint list, and both
# in warnings, all carried across continue-as-new (one payload, 2 MiB) and served by queries
# (one gRPC message, 4 MiB). Every such string is bounded here, once: longer ones are refused
# by the update validators and the client, and a signal naming one is ignored with a warning.

MAX_ID_CHARS = 256
"""Longest request, executor or checkpoint id outside input may name (the library's own are 32-64)."""
MAX_LABEL_CHARS = 1_000
"""Longest checkpoint label."""
MAX_TYPE_NAME_CHARS = 1_000
"""Longest ``message_type`` (a ``"module:QualName"`` type key, or ``list[...]`` / ``dict[...]`` of one)."""
QUOTE_LIMIT = 80
"""Characters of an outside string (a request id, a label) a message quotes."""


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``repr`` of an outside string, cut to a prefix: whatever a client sends, messages stay small."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


def too_long(what: str, value: str | None, limit: int) -> str | None:
    """Why ``value`` is refused if it is longer than ``limit`` characters (quoting a prefix), else ``None``."""
    if value is None or len(value) <= limit:
        return None
    return f"{what} {quote(value)} is longer than the limit of {limit:,} characters"


UPDATE_INLINE_BYTES = 256 * 1024
"""Largest input a client sends inside an update; larger input goes by the ``deliver`` signal.

The SDK repeats every update's input, accepted or refused, in the completion of
the workflow task that delivers it, before any workflow code runs, and gRPC
takes at most 4 MiB per completion (temporalio/temporal#7777). The server lets
one execution have at most 10 updates in flight, so 10 inputs of this size
always fit in one task; a signal's input is recorded by the server, not repeated.
"""

SIGNATURE_PREFIX = 16
"""Hex characters of the graph signature a step input carries (64 bits: no accidental match)."""


def step_activity_name(graph_name: str, executor_id: str) -> str:
    """Activity type of an executor's steps: readable in the Web UI and metrics, within Temporal's id limit."""
    return bounded_id(f"{graph_name}.{executor_id}")


@dataclass
class ForkSource:
    """Where a forked run starts: a checkpoint of another run."""

    workflow_id: str
    checkpoint_id: str
    allow_signature_mismatch: bool = False


@dataclass
class CarriedInput:
    """Outside input accepted but not yet delivered when the run continued as new."""

    kind: str
    key: str
    value: Envelope
    validated: bool = False
    tag: str | None = None
    """The key a client follows it by (``QUERY_TURNS``), if any."""


@dataclass
class TrackedInput:
    """Where the run is with one piece of outside input a client follows (``QUERY_TURNS``)."""

    key: str
    taken: bool = False
    """The run took it (at a boundary): the turn that processes it has begun."""
    done_at: int | None = None
    """The event stream offset at which that turn ended: ``None`` while it goes on (or before it was taken)."""
    interrupted: bool = False
    """The turn ended because a message sent while it was busy interrupted it (``concurrent_input``)."""


@dataclass
class CarriedInbox:
    """The inbox's part of a continue-as-new: input not yet delivered, request ids answered."""

    items: list[CarriedInput] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    """Recently answered request ids, to say "already answered" to a late second answer."""
    outcomes: list[DeliveryOutcome] = field(default_factory=list)
    """Recent deliveries' outcomes, for a ``confirm_delivery`` that reaches the next execution."""
    forgotten: list[str] = field(default_factory=list)
    """Short digests of delivery ids whose outcomes are no longer kept (to answer "too old", not "never")."""
    forgotten_count: int = 0
    """How many outcomes were let go in all (more than ``forgotten`` holds: some ids are not remembered)."""
    tracked: list[TrackedInput] = field(default_factory=list)
    """Input clients follow, and where the run is with it (``QUERY_TURNS``)."""


@dataclass
class CarriedCheckpoints:
    """The checkpoint keeper's part: the chain of checkpoints and what the next delta is based on."""

    last_id: str | None = None
    base_id: str | None = None
    dirty_keys: list[str] = field(default_factory=list)
    listed: list[dict[str, Any]] = field(default_factory=list)
    kept: list[WorkflowCheckpoint] = field(default_factory=list)


@dataclass
class CarriedStatus:
    """The status board's part: recent warnings."""

    warnings: list[dict[str, Any]] = field(default_factory=list)


class Carried(BaseModel):
    """What a run hands to its next execution when it continues as new (or resets).

    Each part of the workflow carries itself (``inbox``, ``checkpoints``,
    ``status``, and the event ``stream``); the engine snapshot is the only
    part that grows with the run's data. Snapshots in the flat form of
    earlier versions still decode (recorded histories replay).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reason: str
    """``"history"`` (history was long) or ``"reset"``."""
    snapshot: WorkflowCheckpoint | None = None
    start: Envelope | None = None
    """The run's original start message: what a clean reset starts again with, however many resets came before."""
    epoch: int = 0
    """Resets so far: part of every idempotency key, so re-run steps are new work."""
    segment: int = 0
    lineage: dict[str, Any] | None = None
    closing: bool = False
    inbox: CarriedInbox | None = None
    checkpoints: CarriedCheckpoints | None = None
    status: CarriedStatus | None = None
    stream: WorkflowStreamState | None = None
    reader: str | None = None
    """The reader pacing the run (:attr:`RunInput.reader`), if any: it goes on pacing the next execution."""

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        """Read the flat snapshot of runs recorded before the workflow was in parts."""
        if not isinstance(data, dict) or (not isinstance(data.get("inbox", {}), list) and "delivered" not in data):
            return data
        data = dict(data)
        flat_checkpoints = data.pop("checkpoints", None)
        if isinstance(data.get("inbox"), list) or "delivered" in data:
            data["inbox"] = {"items": data.pop("inbox", None) or [], "delivered": data.pop("delivered", None) or []}
        if isinstance(flat_checkpoints, list) or "last_checkpoint_id" in data:
            data["checkpoints"] = {
                "last_id": data.pop("last_checkpoint_id", None),
                "base_id": data.pop("checkpoint_base_id", None),
                "dirty_keys": data.pop("dirty_keys", None) or [],
                "listed": flat_checkpoints or [],
                "kept": data.pop("kept", None) or [],
            }
        if "warnings" in data:
            data["status"] = {"warnings": data.pop("warnings") or []}
        data.pop("since_checkpoint", None)
        return data


@dataclass
class SubWorkflowInput:
    """What makes a run one activation of a sub-workflow's child (set by the parent's step, never by callers).

    The child runs to rest (idle, or waiting for responses) and completes
    with what it produced and, while it waits, its snapshot, which the parent
    keeps in its committed state (``_engine/subworkflows.py``). So no child runs
    while it waits, however long, and the parent's checkpoints hold it.

    Attributes:
        parent_id: The parent run's workflow id.
        executor_id: The ``WorkflowExecutor`` (in the parent) this child belongs to.
        snapshot: The waiting child to resume (a ``WorkflowCheckpoint`` as
            JSON); ``None``: a new child, started with ``RunInput.message``.
        responses: ``(request_id, response)`` to deliver to the resumed child;
            each is validated against its request (user code: a local activity).
        known: Requests the child waited for when the activation began, set
            when an activation continues as new (else read from ``snapshot``).
        intermediate: The intermediate outputs the activation published
            before it continued as new (they go to the parent with the rest).
    """

    parent_id: str
    executor_id: str
    snapshot: dict[str, Any] | None = None
    responses: list[tuple[str, Envelope]] = field(default_factory=list)
    known: list[str] | None = None
    intermediate: list[Envelope] | None = None


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
    checkpoint_every: int | None = None
    """Take a checkpoint every N supersteps (0: only when asked); default: the graph's policy."""
    max_history_events: int | None = None
    """Continue as new at the first boundary after history reaches this many events
    (default :data:`DEFAULT_MAX_HISTORY_EVENTS`), or earlier when Temporal suggests it."""
    max_steps_in_flight: int | None = None
    """Steps of one superstep running at once (default and most: 1,000, under
    Temporal's 2,000 pending activities); lower it to go easy on a rate-limited API."""
    fork_from: ForkSource | None = None
    """Start from another run's checkpoint instead of ``message``."""
    carried: Carried | None = None
    """Set by the run itself when it continues as new; never by callers."""
    subrun: SubWorkflowInput | None = None
    stream: bool | None = None
    """How the run is read, as Agent Framework's ``run(stream=...)``: ``True`` streamed, ``False`` awaited
    (the durable twin's ``run()``), ``None`` not said (``start_run``). Steps read it as
    ``ctx.is_streaming()``; ``AgentExecutor`` calls its model and yields outputs accordingly. A
    ``submit_responses`` update may change it for the supersteps that follow."""
    reader: str | None = None
    """A streamed caller's token (the durable twin's ``run(..., stream=True)``): the run goes no further than
    this reader has read, as an in-process stream goes no further than its reader (``UPDATE_PACE``)."""
    concurrent_input: str | None = None
    """What a message that arrives while the run is busy does by default: ``"enqueue"`` (``None``), ``"reject"``,
    ``"interrupt"`` or ``"rollback"`` (``_engine.inbound.ConcurrentInput``); a ``send`` may say otherwise."""
    invocation_kwargs: dict[str, Any] | None = None
    """Agent Framework's ``run(function_invocation_kwargs=..., client_kwargs=...)``, as plain JSON
    (``{"client_kwargs": {...}, ...}``): every step gets them (``ctx.invocation_kwargs``); ``AgentExecutor``
    passes them to its agent. Carried across continue-as-new; a ``submit_responses`` update may replace them."""
    """Set when a ``WorkflowExecutor`` of a parent run starts this run as its child; never by callers."""
    graph_signature: str | None = None
    """The graph signature the run must execute (its first :data:`SIGNATURE_PREFIX` hex characters): set by
    every client that has the graph (``start_run``, the CLI's ``run module:attr``, the console), carried
    across continue-as-new and resets, and given to sub-workflows' children. The run pins that graph, on
    whichever worker hosts it, and waits (saying so in its status) while none does. ``None`` (``temporal
    workflow start``): the graph of the first worker that takes the run."""

    @property
    def envelope(self) -> Envelope:
        """The start message as the engine takes it (its JSON keeps the two plain fields the CLI writes)."""
        return Envelope(self.message_type, self.message)


@dataclass
class PinInput:
    """Argument of :data:`ACTIVITY_PIN`: the graph a run runs, and the signature it must have."""

    graph: str
    signature: str


@dataclass
class CheckpointSetup:
    """How the worker keeps this graph's checkpoints (pinned for the run)."""

    store: str = "external"
    """``"external"`` (a storage written by activities) or ``"history"`` (kept in the run)."""
    every: int = 0
    """Automatic checkpoint every N supersteps; 0 means only on request."""
    keep: int = 3
    """History-only storage: checkpoints carried across continue-as-new."""


@dataclass
class Pinned:
    """What the first local activity records in history for the whole run."""

    topology: Topology
    status_attribute: str | None = None
    """The status search attribute, if the namespace has it registered."""
    checkpoints: CheckpointSetup | None = None
    """Absent in runs recorded before checkpoints on Temporal existed."""
    max_payload_bytes: int | None = None
    """The worker's payload limit (``_limits.max_payload_bytes``), which workflow code
    may not read from the environment; absent in older runs (then the default)."""
    step_options: dict[str, dict[str, Any]] | None = None
    """Per executor, how its steps run as activities (only what differs from the
    defaults, see ``temporal/_workflow/options.py``); in older runs it was part of the topology."""
    shape: GraphShape | None = None
    """The graph's picture as data (``_graph.shape``), made by the worker from the built graph, answered by the
    ``topology`` query so any reader (the console) can draw the run; absent in runs recorded before it was kept,
    and when the graph is too large to keep one (then ``shape_note`` says so)."""
    shape_note: str | None = None
    """Why the run keeps no shape, when the worker chose not to keep one."""
    stored_over: int | None = None
    """With a store for large values (``LargeValues``): payloads of at least this many bytes are kept there, and
    history records a reference in their place (what the run's task budget counts); absent: none."""
    subworkflow_signatures: dict[str, str] | None = None
    """Child graph name → its signature (:data:`SIGNATURE_PREFIX` characters), for the sub-workflows' children
    the run starts (``RunInput.graph_signature``); absent in runs recorded before it."""


class CheckpointRequest(BaseModel):
    """Argument of the ``checkpoint`` signal and update."""

    # A misspelled field is refused, not ignored (these are outside input).
    model_config = ConfigDict(extra="forbid")

    label: str | None = None


class ResetRequest(BaseModel):
    """Argument of the ``reset`` signal and update.

    ``{}`` starts the run again from its start message, ``{"message": ...}``
    from a new one, ``{"checkpoint_id": ...}`` from a checkpoint of this run.
    """

    # Refused, not ignored: {"checkpoint": ...} read as {} would wipe the run with a clean reset.
    model_config = ConfigDict(extra="forbid")

    checkpoint_id: str | None = None
    message: Any = None
    message_type: str | None = None
    allow_signature_mismatch: bool = False

    @property
    def has_message(self) -> bool:
        return "message" in self.model_fields_set

    @property
    def envelope(self) -> Envelope:
        """The new start message as the engine takes it (its JSON keeps the two plain fields the CLI writes)."""
        return Envelope(self.message_type, self.message)


@dataclass
class SaveCheckpointInput:
    """A checkpoint to save; while ``base_id`` is set, ``checkpoint.state`` holds only
    the keys written since that checkpoint (and ``removed`` those deleted)."""

    graph: str
    checkpoint: WorkflowCheckpoint
    base_id: str | None = None
    removed: list[str] = field(default_factory=list)


@dataclass
class LoadCheckpointInput:
    """Which checkpoint to read, and whose it must be."""

    graph: str
    workflow_id: str
    checkpoint_id: str
    history_only: bool = False


@dataclass
class RespondInput:
    """Argument of the ``respond`` signal and ``submit_response`` update."""

    __pydantic_config__ = ConfigDict(extra="forbid")
    request_id: str
    response: Any = None


@dataclass
class RespondAllInput:
    """Argument of the ``submit_responses`` update: answers applied together, all or none."""

    __pydantic_config__ = ConfigDict(extra="forbid")
    responses: list[RespondInput]
    stream: bool | None = None
    """How the call that gives them reads the run from here on (:attr:`RunInput.stream`); ``None``: unchanged."""
    invocation_kwargs: dict[str, Any] | None = None
    """The call's invocation kwargs (:attr:`RunInput.invocation_kwargs`); ``None``: unchanged."""


@dataclass
class PaceInput:
    """Argument of the ``pace`` update (:data:`UPDATE_PACE`)."""

    __pydantic_config__ = ConfigDict(extra="forbid")
    reader: str
    action: Literal["follow", "release", "stop"] = "follow"


class SendInput(BaseModel):
    """Argument of the ``send`` signal and ``send_message`` update: a message for one executor.

    In memory the message is the :class:`Envelope` the engine takes. As JSON
    it is ``{"executor_id", "message", "message_type"?}``, the form the
    ``temporal`` CLI writes by hand and every recorded history holds, so the
    one form is read and written here and nowhere else.
    """

    # A misspelled field is refused, not ignored (these are outside input).
    model_config = ConfigDict(extra="forbid", frozen=True)

    executor_id: str
    message: Envelope = Envelope(None, None)
    policy: str | None = None
    """What the message does if the run is busy (``_engine.inbound.ConcurrentInput``); ``None``: the run's own."""

    @model_validator(mode="before")
    @classmethod
    def _from_json(cls, raw: Any) -> Any:
        # JSON never holds an ``Envelope``: a ``message`` that is one was given in Python.
        if not isinstance(raw, dict) or isinstance(raw.get("message"), Envelope):
            return raw
        out = {k: v for k, v in raw.items() if k not in ("message", "message_type")}
        typ = raw.get("message_type")
        if typ is not None and not isinstance(typ, str):
            raise PydanticCustomError(
                "string_type", "message_type: Input should be a valid string (a type name) or null"
            )
        out["message"] = Envelope(typ, raw.get("message"))
        return out

    @model_serializer(mode="plain")
    def _to_json(self) -> dict[str, Any]:
        out = {"executor_id": self.executor_id, "message": self.message.data, "message_type": self.message.type}
        if self.policy is not None:
            out["policy"] = self.policy
        return out


@dataclass
class Delivery:
    """Argument of the ``deliver`` signal: one ``send`` or ``respond`` input, and an id to confirm it by."""

    __pydantic_config__ = ConfigDict(extra="forbid")
    id: str
    send: SendInput | None = None
    respond: RespondInput | None = None


@dataclass
class ConfirmInput:
    """Argument of the ``confirm_delivery`` update."""

    __pydantic_config__ = ConfigDict(extra="forbid")
    id: str


@dataclass
class DeliveryOutcome:
    """What became of a delivery: the accepted result, or the refusal (type, message, details)."""

    id: str
    result: dict[str, Any] | None = None
    error_type: str | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    digest: str | None = None
    """A short digest of what was delivered: the same id again with other content is a warning."""


@dataclass
class ValidateInput:
    """A response (``request`` set) or a sent message to check against the graph's types."""

    graph: str
    executor_id: str
    value: Envelope
    request: PendingRequest | None = None
    ref: str | None = None
    """Set for large input: ``value`` holds its type only, and the activity reads the value from the run
    with the ``QUERY_OUTSIDE_INPUT`` query (history holds it once already)."""
    signature: str | None = None
    """The run's graph signature: a worker hosting another refuses the activity (retryably)."""


@dataclass
class Validated:
    """The value typed as its handler expects it, or why it cannot be delivered.

    This is the ``validate`` local activity's result, which its marker records
    in history. The value itself came from outside (a signal or an update that
    history records already), so the result does not repeat it: when
    validation left its JSON as it was (``same``), only the type key comes
    back; when validation changed it (a plain object typed as a model gains
    its defaults), only what changed (``patch``), or the whole value if that
    is smaller. :meth:`resolved` rebuilds the value from the input the
    workflow holds. Results recorded before carry the whole ``value``, and are
    read as they are.
    """

    value: Envelope | None = None
    error: str | None = None
    error_type: str | None = None
    """The library error ``error`` stands for (``UndeliverableMessageError``, ``InvalidResponseError``, ...)."""
    value_type: str | None = None
    """The validated value's type key, when ``value`` is left out (``same`` or ``patch``)."""
    same: bool = False
    """Validation left the input's JSON as it was: the value is the input's data with ``value_type``."""
    patch: Any = None
    """What validation changed in the input's JSON (see :meth:`of`), when that is smaller than the value."""

    _PATCH_DEPTH = 32
    """Nesting a patch follows at most; deeper, a changed part is sent whole (keeps both sides' recursion small)."""

    @classmethod
    def of(cls, given: Envelope, validated: Envelope, *, limit: int, what: str) -> Validated:
        """The smallest result that lets the workflow rebuild ``validated`` from ``given`` (activity side).

        A value validation made larger than ``limit`` (a model's defaults) is
        refused as ``PayloadTooLargeError`` naming ``what``: no step could take it.
        """
        if validated.data is given.data:
            return cls(value_type=validated.type, same=True)
        try:
            patch = cls._diff(given.data, validated.data, 0)
        except RecursionError:
            patch = {"v": validated.data}
        if patch == 0:
            return cls(value_type=validated.type, same=True)
        exact = to_json(validated.data)
        if len(exact) > limit:
            error = too_large(what, len(exact), limit)
            return cls(error=str(error), error_type=type(error).__name__)
        if len(to_json(patch)) >= len(exact) or to_json(cls._apply(given.data, patch)) != exact:
            return cls(validated)
        return cls(value_type=validated.type, patch=patch)

    def resolved(self, given: Envelope) -> Validated:
        """This result with ``value`` filled in from ``given``, the input that was validated (workflow side)."""
        if self.value is not None or self.error is not None:
            return self
        if self.same:
            return Validated(Envelope(self.value_type, given.data))
        if self.patch is not None:
            return Validated(Envelope(self.value_type, self._apply(given.data, self.patch)))
        return self

    # A patch node is 0 (keep the input's value), {"v": value} (replace it), {"d": [[key, node], ...]}
    # (an object with these keys in this order, each from the input's value at that key) or
    # {"l": [node, ...]} (an array of the same length, element by element).

    @classmethod
    def _diff(cls, old: Any, new: Any, depth: int) -> Any:
        if isinstance(new, dict) and isinstance(old, dict) and depth < cls._PATCH_DEPTH:
            entries = [[k, cls._diff(old[k], v, depth + 1) if k in old else {"v": v}] for k, v in new.items()]
            changed = list(old) != list(new) or any(node != 0 for _, node in entries)
            return {"d": entries} if changed else 0
        if isinstance(new, list) and isinstance(old, list) and len(new) == len(old) and depth < cls._PATCH_DEPTH:
            items = [cls._diff(o, n, depth + 1) for o, n in zip(old, new, strict=True)]
            return {"l": items} if any(node != 0 for node in items) else 0
        if type(old) is type(new) and not isinstance(new, (dict, list)) and old == new:
            return 0
        return {"v": new}

    @classmethod
    def _apply(cls, old: Any, node: Any) -> Any:
        if not isinstance(node, dict):
            return old
        if "v" in node:
            return node["v"]
        if "d" in node:
            return {k: cls._apply(old.get(k) if isinstance(old, dict) else None, n) for k, n in node["d"]}
        return [cls._apply(o, n) for o, n in zip(old, node["l"], strict=True)]


@dataclass
class StateSnapshot:
    """Committed state at a boundary, as served to step activities."""

    version: str
    state: dict[str, Envelope]


@dataclass
class StatePage:
    """One page of the committed state's JSON text (:func:`state_page_text`) at a boundary.

    Attributes:
        version: The state's version; a step reading pages of two versions
            retries (the run moved on meanwhile).
        size: The length of the whole text; the page is ``text`` from the
            offset asked for.
        text: ASCII, so offsets in characters are offsets in bytes.
    """

    version: str
    size: int
    text: str


def state_page_text(state: Mapping[str, Envelope]) -> str:
    """The committed state as one ASCII JSON text, which :class:`StatePage` serves in slices."""
    return json.dumps({k: [v.type, v.data] for k, v in state.items()}, ensure_ascii=True, separators=(",", ":"))


def state_from_text(text: str) -> dict[str, Envelope]:
    """The committed state back from :func:`state_page_text`."""
    return {k: Envelope(t, data) for k, (t, data) in json.loads(text).items()}


@dataclass
class StepInput:
    """One step's activity input, decoded (``_wire`` has its JSON form).

    ``state`` is inlined only while the committed state is small; otherwise
    the activity reads version ``state_version`` from its worker's cache (or
    by query), so history carries each state value once, in the diff that
    wrote it, however many steps read it. The graph, executor and run are not
    part of it: the activity's type and its workflow id say them.
    """

    task: StepTask
    state_version: str = ""
    state: dict[str, Envelope] | None = None
    epoch: int = 0
    """Resets of the run so far (see :attr:`Carried.epoch`)."""
    signature: str = ""
    """The first :data:`SIGNATURE_PREFIX` characters of the run's pinned graph signature: a worker
    hosting another graph under the same name refuses the step (empty in steps scheduled by older runs)."""
    streaming: bool | None = None
    """How the run is read (``ctx.is_streaming()``, :attr:`RunInput.stream`); ``None``: not said."""
    invocation_kwargs: dict[str, Any] | None = None
    """The run's ``function_invocation_kwargs`` / ``client_kwargs`` (:attr:`RunInput.invocation_kwargs`)."""
    share: bool = False
    """The workflow reads a result whose long repeated strings are recorded once (``_wire._share``)."""


@dataclass
class ReduceInput:
    graph: str
    key: str
    committed: Envelope | None
    writes: list[Envelope] = field(default_factory=list)
    signature: str | None = None
    """The run's graph signature: a worker hosting another refuses the activity (retryably)."""
