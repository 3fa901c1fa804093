"""Names and payload shapes shared by the client, the workflow and the step activity.

Kept in one module so the three sides cannot drift apart; every shape is a
frozen pydantic model that the project's JSON data converter writes as plain
JSON (readable with ``temporal workflow show``, sendable with ``temporal
workflow signal``).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio.contrib.workflow_streams import WorkflowStreamState

__all__ = [
    "BATCH_GRACE_MIN_SECONDS",
    "BATCH_TOO_LARGE",
    "DEFAULT_TASK_QUEUE",
    "EVENTS_TOPIC",
    "MAX_JOURNAL_CHARS",
    "PATCHES_BUNDLED",
    "PATCH_BUNDLE",
    "PATCH_COLLECT_SPECULATION",
    "LIVE_SEND_DELAY_SECONDS",
    "PATCH_LIVE_SENDS",
    "PATCH_LIVE_STREAM",
    "PATCH_RUN_AHEAD",
    "PATCH_SETTLE_STARTED",
    "PATCH_TYPED_STOP_RESULT",
    "PATCH_STEP_BATCHES",
    "PATCH_EXACT",
    "QUERY_CONTEXT",
    "QUERY_PENDING_REQUESTS",
    "QUERY_STATE",
    "QUERY_STATUS",
    "QUERY_TOPOLOGY",
    "SIGNAL_SEND_EVENT",
    "SIGNATURE_MISMATCH",
    "UPDATE_SEND_EVENT",
    "UPDATE_SEND_EVENTS",
    "EventInput",
    "EventsInput",
    "MAX_RUN_AHEAD_BROKER_CHARS",
    "MAX_RUN_AHEAD_RUNS",
    "MAX_STEP_INPUT_CHARS",
    "MAX_TICK_CHARS",
    "PROCESS_NONCE",
    "RESULT_ERROR_TYPE",
    "RUN_AHEAD_MIN_SECONDS",
    "SNAPSHOT_QUERY",
    "STATE_QUERY",
    "STEP_SEND_SIGNAL",
    "STEP_STREAM_SIGNAL",
    "STORE_PATCH_SIGNAL",
    "TICK_SIGNAL",
    "WORKFLOW_TYPE",
    "RunInput",
    "RunOutput",
    "StepBatchInput",
    "StepBatchOutput",
    "StepInput",
    "StepOutput",
    "SpeculatedStep",
    "speculation_key",
]

WORKFLOW_TYPE = "LlamaIndexRun"
"""The Temporal workflow type every LlamaIndex run executes as (its id is the LlamaIndex run id)."""

DEFAULT_TASK_QUEUE = "llama-index-workflows"
"""Task queue of a ``TemporalRuntime`` built without ``task_queue=``."""

TICK_SIGNAL = "llama_tick"
"""Signal carrying one LlamaIndex ``WorkflowTick`` (``handler.ctx.send_event``, cancel), as the
workflow serializer's JSON string: ``temporal workflow signal --name llama_tick --input '"{...}"'``."""

STORE_PATCH_SIGNAL = "llama_store_patch"
"""Signal with a JSON patch (``StateCheckpoint.diff``) of ``ctx.store``, written from the handler."""

STEP_STREAM_SIGNAL = "llama_step_stream"
"""Signal a step activity sends for each ``ctx.write_event_to_stream`` while it runs
(``{"invocation": id, "index": n, "event": serialized}``), so the run publishes it at once
(``PATCH_LIVE_STREAM``); the step's result carries the same events, and each index is published once."""

STEP_SEND_SIGNAL = "llama_step_send"
"""Signal a step activity sends with the step's ``ctx.send_event`` calls while it runs (``PATCH_LIVE_SENDS``):
``{"invocation": id, "sends": [{"index": emission index, "tick": serialized TickAddEvent}], "store_patch":
[...]}``. ``store_patch`` is what the step has written to ``ctx.store`` so far (a JSON patch from the store it
started with), so a step the sends start reads the store as it would under the default runtime. The run
delivers each emission index of an invocation once, and moves the store from the step's last view to this one;
the step's result carries its whole patch as ever, and the run applies only what no flush brought."""

QUERY_STATUS = "status"
"""Query (the name graph runs answer too): where the run is, ``{"kind": "llama_index", "status": "running" |
"waiting_for_input" | "completed" | "failed" | "cancelled", "error": ..., "warnings": [...], "in_flight": [step
names], "pending_requests": n, ...}`` (the package README lists every field)."""

QUERY_PENDING_REQUESTS = "pending_requests"
"""Query (as graph runs): each ``InputRequiredEvent`` out and not yet answered, as a ``request_info`` record
with the ``HumanResponseEvent`` type that answers it and that type's JSON schema."""

QUERY_STATE = "state"
"""Query (as graph runs): ``ctx.store`` as plain JSON (cut, with a note, where it would not fit one payload)."""

QUERY_TOPOLOGY = "topology"
"""Query (as graph runs): the run's picture, LlamaIndex's own representation of the workflow it hosts
(``_picture.py``): ``{"kind": "llama_index", "workflow": name, "representation": {...} | None, "note": ...}``."""

QUERY_CONTEXT = "llama_context"
"""Query: what ``handler.ctx.to_dict()`` returns now (``Context.from_dict`` resumes it, or forks a new run)."""

UPDATE_SEND_EVENT = "submit_event"
"""Update (as graph runs' ``submit_event``): an event from outside, ``{"event": {...}, "event_type": "Name" or
"module.Name"}``, checked against the events the workflow accepts; refused (listing them) when its name or shape
is not one of them. Nothing is imported: the class must be one the workflow declares or a waiter awaits."""

UPDATE_SEND_EVENTS = "submit_events"
"""Update: several such events together (``{"events": [{...}, ...]}``), each checked before any is taken, then
all handed to the loop at once, in order: several answers are accepted or refused together. A run on a worker
before this update refuses it as unknown; the tools then send the events one by one."""

SIGNAL_SEND_EVENT = "send_event"
"""Signal with the same argument (the ``temporal`` CLI's way): a bad one is dropped with a warning (worker log
without values; the ``status`` query's ``warnings``)."""

SIGNATURE_MISMATCH = "LlamaWorkflowSignatureMismatch"
"""Error type of a step refused (retryably) by a worker hosting another program's workflow of the run's name."""

PATCH_EXACT = "llama-runtime-exact-1"
"""Runs started since this run each step invocation the loop starts as one activity of its own, and nothing
else: no batches, no run-ahead (runs recorded before it asked :data:`PATCH_BUNDLE` or its parts, and replay as
they were made). They also check the workflow's signature, decode outside input only as classes the workflow
declares, and end CANCELED when cancelled."""

STATE_QUERY = "llama_state"
"""Query returning the run's ``ctx.store`` as ``InMemoryStateStore.to_dict`` writes it."""

SNAPSHOT_QUERY = "llama_snapshot"
"""Query: the run's broker state now (the loop's, serialized as ``ctx.to_dict()`` writes it) and its store,
``{"init_state": ..., "store": ...}``, for ``handler.ctx.to_dict()`` while the run goes."""

EVENTS_TOPIC = "llama_events"
"""``temporalio.contrib.workflow_streams`` topic with every published event, serialized."""

RESULT_ERROR_TYPE = "LlamaIndexRunError"
"""Prefix of the ``ApplicationError`` type a failed run ends with; details carry the exception."""

MAX_TICK_CHARS = 2_000_000
"""A signalled tick longer than this is dropped with a warning (Temporal's payload limit is ~2 MB)."""

MAX_STEP_INPUT_CHARS = 1_800_000
"""A step whose input (event, fan-in buffers, store) is larger fails with a clear error instead of being
scheduled (Temporal refuses payloads over ~2 MB, which would fail the workflow task for ever)."""

MAX_JOURNAL_CHARS = 512_000
"""A run returns its tick journal (for the handler's ``ctx.to_dict()``) only up to this size."""

PROCESS_NONCE = os.urandom(8).hex()
"""Identifies this process, so a run started here finds the very ``Workflow`` instance it was started
from when this process also hosts it (several instances of one class may differ in timeout etc.)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class RunInput(_Frozen):
    """What a run starts with."""

    workflow_name: str
    signature: str | None = None
    """The workflow's signature as its starter built it (``_versioning.signature``): a worker hosting another
    program's workflow of this name refuses the run (``PATCH_EXACT``)."""
    timeout: float | None = None
    timeout_set: bool = False
    """The starter's ``timeout=`` (``PATCH_EXACT`` runs use it, whatever the worker's instance was built with)."""
    instance_key: str | None = None
    start_event: str | None = None
    init_state: dict[str, Any] = Field(default_factory=dict)
    store: dict[str, Any] | None = None
    idle_release_after_ticks: int | None = None
    # Carried by continue-as-new (LlamaIndex's idle release): the stream, and ticks not yet read.
    stream: WorkflowStreamState | None = None
    mailbox: list[str] = Field(default_factory=list)
    instrument_tags: dict[str, Any] = Field(default_factory=dict)
    """The caller's LlamaIndex instrument tags around ``run()`` (plain JSON values; the run id aside), which
    the default runtime's steps see in ``active_instrument_tags()``."""
    warnings: list[dict[str, Any]] = Field(default_factory=list)
    """Carried by continue-as-new: the ``status`` query's warnings so far."""
    requests: dict[str, Any] = Field(default_factory=dict)
    """Carried by continue-as-new: the ``InputRequiredEvent``s still unanswered (``RunBoard.carried_requests``),
    so ``pending_requests`` lists them in the new run too (a worker before this field ignores it)."""
    segment: int = 0
    """How many times the run has continued as new."""


class RunOutput(_Frozen):
    """What a run ends with: the ``StopEvent`` (serialized), the final ``ctx.store`` and the tick journal."""

    stop_event: str
    store: dict[str, Any] | None = None
    ticks: list[str] = Field(default_factory=list)
    init_state: dict[str, Any] | None = None
    """The broker state ``ticks`` start from: the run's final state when ``ticks`` is empty."""
    stop_result: Any = None
    """``StopEvent.result`` through the serializer's ``serialize_value`` (events and models in it keep
    their classes), when ``stop_result_typed`` (``PATCH_TYPED_STOP_RESULT``)."""
    stop_result_typed: bool = False
    stop_result_tagged: dict[str, Any] | None = None
    """Instead of ``stop_result``: a result plain JSON would change (a tuple, a set, bytes, non-str
    keys), as the engine's tagged envelope (``_wire.encode_result``)."""


class StepInput(_Frozen):
    """One step invocation: LlamaIndex's own arguments to a step worker, as JSON."""

    workflow_name: str
    signature: str | None = None
    """``RunInput.signature``: the activity refuses the step (retryably) on a worker hosting another one."""
    instance_key: str | None = None
    run_id: str
    step_name: str
    event: str
    state: dict[str, Any]
    bound_events: dict[str, str] | None = None
    retry: dict[str, Any]
    store: dict[str, Any] | None = None
    live_stream: bool = False
    """Signal each stream write to the run as it happens (``STEP_STREAM_SIGNAL``)."""
    live_sends: bool = False
    """Signal the step's ``ctx.send_event`` calls to the run while it runs (``STEP_SEND_SIGNAL``)."""
    instrument_tags: dict[str, Any] | None = None
    """``RunInput.instrument_tags``, when there are any."""


class EventInput(_Frozen):
    """Argument of the ``submit_event`` update and the ``send_event`` signal (the graph runs' shape)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    event: Any = None
    """The event's fields, as JSON."""
    event_type: str | None = None
    """Its class: ``Name`` (when one accepted class has that name), ``module.Name`` or ``module:Name``; without
    one, the run reads it as the one accepted class it validates as."""
    step: str | None = None
    """Address it to this step only (LlamaIndex's ``send_event(ev, step=...)``)."""


class EventsInput(_Frozen):
    """Argument of the ``submit_events`` update."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    events: list[EventInput]


class StepOutput(_Frozen):
    """A step's results and sends (LlamaIndex's models), its stream writes, and its store patch."""

    outputs: list[dict[str, Any]]
    stream: list[str] = Field(default_factory=list)
    late_sends: list[str] = Field(default_factory=list)
    store_patch: list[dict[str, Any]] = Field(default_factory=list)
    took_ms: float | None = None
    """How long the step ran in its activity (``PATCH_EXACT`` runs): the run picks local activities by it
    (``StepOptions.local_below``), from what its history recorded, so a replay picks the same."""


BATCH_GRACE_MIN_SECONDS = 0.05
"""Once a batch's first invocation finishes, the others get half the time it took, at least this long."""

BATCH_TOO_LARGE = "LlamaStepBatchTooLarge"
"""The error type of a batch whose results together are over the payload limit (the run then runs each
invocation alone)."""

PATCH_STEP_BATCHES = "llama-runtime-step-batches"
"""Runs recorded before this scheduled one activity per step invocation; newer ones run the invocations
of one step made ready in the same workflow activation in one activity (:class:`StepBatchInput`)."""


PATCH_LIVE_STREAM = "llama-runtime-live-stream"
"""Runs recorded before this published a step's ``write_event_to_stream`` events when the step ended;
newer ones publish each as the step writes it (``STEP_STREAM_SIGNAL``)."""

PATCH_TYPED_STOP_RESULT = "llama-runtime-typed-stop-result"
"""Runs recorded before this returned ``StopEvent.result`` only as the stop event's JSON, so events and
models inside it came back as dicts; newer ones return it typed too (``RunOutput.stop_result``)."""

PATCH_COLLECT_SPECULATION = "llama-runtime-collect-speculation"
"""Runs recorded before this ran each rerun of a ``collect_events`` step (its buffer stale) as an activity of
its own; newer ones ask a batch to also run the reruns the loop is about to ask for (``StepBatchInput.speculate``)
and answer those reruns from the batch's result, with no activity."""

MAX_SPECULATED_RUNS = 64
"""At most this many speculative reruns per batch (a batch of n collect invocations needs n(n-1)/2)."""

PATCH_RUN_AHEAD = "llama-runtime-run-ahead"
"""Runs recorded before this ran ahead only a batch's ``collect_events`` reruns, each simulated by a rule of
its own (``PATCH_COLLECT_SPECULATION``); newer ones send the loop's broker state with a batch whose step has
work queued or several invocations (``StepBatchInput.broker``), and the activity runs LlamaIndex's own reducer
over it to run ahead every invocation of that step the loop will start next (queued work, collect reruns),
in the order the run reduces them. The run answers each such invocation from the batch's result."""

PATCH_SETTLE_STARTED = "llama-runtime-settle-started"
"""Runs recorded before this picked the next done task right after starting the loop's new ones, so a task
answered from run-ahead was done only at the pick after next; newer ones let the tasks just started take their
first step first (the default runtime's ``asyncio.wait`` yields there too), so an answered task is done at the
next pick. A ``collect_events`` rerun answered at once is then reduced before the join's next stale
invocation: each event of a 4-worker join is rerun about once instead of about three times.
``StepBatchInput.settled`` tells the activity's run-ahead which of the two orders the run reduces in."""

MAX_RUN_AHEAD_RUNS = 512
"""At most this many invocations run ahead per batch (``PATCH_RUN_AHEAD``)."""

MAX_RUN_AHEAD_BROKER_CHARS = 512_000
"""A broker state larger than this is not sent with a batch (the batch then runs only its own invocations)."""

PATCH_LIVE_SENDS = "llama-runtime-live-sends"
"""Runs recorded before this delivered a step's ``ctx.send_event`` calls when the step ended; newer ones ask
the step to signal them while it runs (``StepInput.live_sends``, ``STEP_SEND_SIGNAL``), as the default runtime
delivers a send once the sending step yields."""

PATCH_BUNDLE = "llama-runtime-patches-1"
"""Runs started since this record this one marker, standing for every patch in :data:`PATCHES_BUNDLED`; runs
recorded before it asked each of those (and replay as they were made). A patch made later is its own id, asked
after the bundle; this list never changes."""

PATCHES_BUNDLED = (
    "llama-runtime-step-batches",
    "llama-runtime-collect-speculation",
    "llama-runtime-live-stream",
    "llama-runtime-typed-stop-result",
    "llama-runtime-run-ahead",
    "llama-runtime-settle-started",
    "llama-runtime-live-sends",
)

LIVE_SEND_DELAY_SECONDS = 0.05
"""A step's sends are signalled once it has been running this long after the first unsent one: a step that
sends and returns at once (a scatter) delivers them with its result, with no signal; one that sends and then
awaits (a model call, a sleep) delivers them while it waits, as the default runtime does."""

RUN_AHEAD_MIN_SECONDS = 1.0
"""Running ahead stops starting invocations after the longer of this and the batch's own time (and within
half of the activity's start-to-close timeout), so it never makes a batch much slower than its own work."""
"""At most this many speculative reruns per batch (a batch of n collect invocations needs n(n-1)/2)."""


class StepBatchInput(_Frozen):
    """Invocations of one step made ready together, run in one activity, results in the same order.

    The run's store goes once (each invocation starts from it, as each would alone); a fan-in buffer
    that several invocations carry goes once too (``buffers``, referenced from each invocation's
    ``state["collected_events_ref"]``).
    """

    batch: list[StepInput]
    store: dict[str, Any] | None = None
    buffers: list[dict[str, Any]] = Field(default_factory=list)
    lists: list[list[str]] = Field(default_factory=list)
    """Fan-in buffers shared by prefix: ``state["collected_events_prefixes"]`` maps a buffer id to
    ``[index into lists, length]`` (runs with ``PATCH_COLLECT_SPECULATION``)."""
    speculate: bool = False
    """Also run the reruns of the batch's stale ``collect_events`` invocations (``PATCH_COLLECT_SPECULATION``)."""
    broker: dict[str, Any] | None = None
    """The loop's broker state as the batch went out (``SerializedContext``, ``PATCH_RUN_AHEAD``): the activity
    reduces the batch's results over it and runs ahead the invocations of this step the loop starts next."""
    order: list[int] = Field(default_factory=list)
    """Each invocation's place in the order the run reduces results that are done together (with ``broker``):
    its work item's first start, so a rerun keeps its first invocation's place."""
    settled: bool = False
    """The run lets the tasks it starts take their first step before it picks a done one
    (``PATCH_SETTLE_STARTED``): a task the reduction starts, answered from run-ahead, is done at the next pick."""
    across_steps: bool = False
    """Also run ahead the invocations of other steps the reduction starts, not only this step's: a fan-out's
    join runs in its workers' activity. The run answers any invocation whose input a batch ran (whatever its
    step), so this changes only how many the run finds ready, never a result (no patch)."""


class SpeculatedStep(_Frozen):
    """The result of a rerun the loop will probably ask for, run ahead in the batch's activity.

    ``key`` is :func:`speculation_key` of the rerun's exact input; the run uses ``output`` only for an
    invocation whose input has that key (so it is the step's result for that very input: at-least-once,
    as a retry is), and schedules an activity for any other.
    """

    key: str
    output: StepOutput | None = None
    same_as: int | None = None
    """``output`` is that of ``speculated[same_as]``, an earlier entry (``PATCH_RUN_AHEAD``): a join's reruns
    mostly return what its first try did, and each such output goes once."""


class StepBatchOutput(_Frozen):
    """Each invocation's :class:`StepOutput`, in the batch's order."""

    results: list[StepOutput | None]
    """``None``: the invocation was still running when the batch returned (see ``_activity._run_batch``);
    the run runs it alone."""
    speculated: list[SpeculatedStep] = Field(default_factory=list)
    """Reruns run ahead (``StepBatchInput.speculate``), in the order they ran."""


def speculation_key(inp: StepInput, run_ahead: bool = False) -> str:
    """What identifies a step invocation's input within its run, apart from its invocation id (a rerun
    gets a new one, which only keys its sends, and the run, not the step, turns sends into ticks).

    The run id is left out: it is the run's own (the keys never leave it), and a history replayed under
    another workflow id must decide the same.

    With ``run_ahead`` (``PATCH_RUN_AHEAD``) a first attempt's ``first_attempt_at`` is left out too: it is the
    time the loop started the invocation, which the activity running it ahead cannot know, and a step's
    result does not depend on it (the retry verdict of a failure does, and is decided by the run from its
    own record; run-ahead results never hold failures)."""
    # instrument_tags only when there are any: the keys of runs recorded before the field stay as they were.
    # signature: a field newer than every run that used keys (PATCH_EXACT runs answer nothing from run-ahead).
    exclude = {"run_id", "live_stream", "live_sends", "signature"}
    if not inp.instrument_tags:
        exclude.add("instrument_tags")
    data = inp.model_dump(mode="json", exclude=exclude)
    data["state"] = {k: v for k, v in data["state"].items() if k != "invocation_id"}
    if run_ahead and not data["retry"].get("retry_number"):
        data["retry"] = {k: v for k, v in data["retry"].items() if k != "first_attempt_at"}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    return digest[:32] if run_ahead else digest  # 128 bits tell a run's inputs apart; each goes in the history
