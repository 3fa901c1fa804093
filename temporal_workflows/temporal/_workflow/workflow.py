"""The Temporal workflow: the superstep driver as deterministic workflow code.

One dynamic workflow class serves every graph: the workflow type is the
graph's name, and the first thing a run does is a local activity that returns
the graph's topology, which records it in history. Replays read it from there,
so deploying a changed graph never changes a running execution.

This module runs no user code: steps, callable reducers, routing and the
validation of outside input all run in activities. The loop is
``_engine.driver.SuperstepDriver``, the same one the in-process runner drives; this
class is its host on Temporal. Its state lives in parts that each carry
themselves across continue-as-new:

* ``inbox.Inbox``: outside input (responses, messages, events) until a boundary;
* ``checkpointing.Checkpoints``: checkpoints, resets and forks;
* ``status.StatusBoard``: the status query, search attribute and warnings;
* ``supersteps.StepRunner``: steps and reducers as activities;
* ``continuation.Continuation``: continue-as-new, when history is long or a reset asks.

Where a run starts (five starting points) is ``startup.start_engine``. The
driver's host (``_Host``) is given these parts and the run's ``RunControls``.

Every signal, update and query is declared here, so the wire contract is read
in one file (the names and argument types are in ``_protocol``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from pydantic_core import to_json
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue, RetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError, FailureError

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._checkpoints.base import WorkflowCheckpoint
from temporal_workflows._engine.driver import DriverHost, RunStatus, StepOutcome, SuperstepDriver, pending_request_event
from temporal_workflows._engine.limits import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    json_size,
    truncated_requests,
    truncated_state,
)
from temporal_workflows._engine.machine import (
    CommitPlan,
    Engine,
    PendingRequest,
    Reduction,
    StepTask,
    Topology,
    shared_part,
)
from temporal_workflows._engine.registry import resolve as resolve_type
from temporal_workflows._engine.serde import Envelope, encode
from temporal_workflows._errors import (
    CheckpointStorageError,
    InvalidRunInputError,
    WorkflowError,
    WorkflowRunError,
)
from temporal_workflows._events import (
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowRunState,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
)
from temporal_workflows._graph.shape import GraphShape
from temporal_workflows.temporal._failures import refuse, short_message, to_failure
from temporal_workflows.temporal._protocol import (
    ACTIVITY_ROUTE,
    ACTIVITY_TOPOLOGY,
    ACTIVITY_VALIDATE,
    DEFAULT_MAX_HISTORY_EVENTS,
    EVENTS_TOPIC,
    FAILURE_DELIVERY_FORGOTTEN,
    FAILURE_INPUT_TOO_LONG,
    FAILURE_RUN_BUSY,
    FAILURE_RUN_CLOSED,
    FAILURE_UNDELIVERABLE,
    FAILURE_UNKNOWN_DELIVERY,
    FAILURE_UNKNOWN_GRAPH,
    LEGACY_FAILURE_TYPES,
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    MAX_RESPONSES_PER_UPDATE,
    MAX_STEPS_IN_FLIGHT,
    MAX_TYPE_NAME_CHARS,
    QUERY_CHECKPOINT,
    QUERY_CHECKPOINTS,
    QUERY_COMMITTED_STATE,
    QUERY_COMMITTED_STATE_PAGE,
    QUERY_OUTSIDE_INPUT,
    QUERY_PENDING_REQUESTS,
    QUERY_STATE,
    QUERY_STATUS,
    QUERY_TOPOLOGY,
    SIGNAL_CHECKPOINT,
    SIGNAL_CLOSE,
    SIGNAL_DELIVER,
    SIGNAL_RESET,
    SIGNAL_RESPOND,
    SIGNAL_SEND,
    SIGNAL_SEND_EVENT,
    SIGNATURE_PREFIX,
    UPDATE_CHECKPOINT,
    UPDATE_CONFIRM,
    UPDATE_RESET,
    UPDATE_RESPOND,
    UPDATE_RESPOND_ALL,
    UPDATE_SEND,
    UPDATE_SEND_EVENT,
    VALIDATE_INLINE_BYTES,
    CheckpointRequest,
    CheckpointSetup,
    ConfirmInput,
    Delivery,
    EventInput,
    Pinned,
    ResetRequest,
    RespondAllInput,
    RespondInput,
    Routed,
    RouteInput,
    RunInput,
    SendInput,
    StatePage,
    StateSnapshot,
    Validated,
    ValidateInput,
    quote,
    state_page_text,
    too_long,
)
from temporal_workflows.temporal._tracing import workflow_span
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.checkpointing import CheckpointAsk, Checkpoints, ResetPlan
from temporal_workflows.temporal._workflow.children import (
    carry_subrun,
    child_result,
    deliver_to_child,
    subrun_refusal,
)
from temporal_workflows.temporal._workflow.continuation import Continuation, RunCarry
from temporal_workflows.temporal._workflow.inbox import (
    DELIVERED_CARRIED,
    Inbox,
    delivery_digest,
    oversized_event,
    oversized_send,
)
from temporal_workflows.temporal._workflow.locals import LocalActivities, execute_local_activity
from temporal_workflows.temporal._workflow.patches import (
    PATCH_CARRY_LATER,
    PATCH_CHECKPOINT_FAILURE_FAILS_RUN,
    PATCH_ENTRY_CHECKPOINT,
    PATCH_RELEASE_OUTPUTS,
    PATCH_STATE_LIMIT,
    PATCH_STATE_PAGES,
    PATCH_STATUS_ON_CONTINUE_AS_NEW,
    PATCH_STATUS_ON_EVERY_FAILURE,
    PATCH_TASK_BUDGET,
    PATCH_VALIDATE_IN_ACTIVITY,
    RunPatches,
)
from temporal_workflows.temporal._workflow.startup import start_engine
from temporal_workflows.temporal._workflow.status import StatusBoard
from temporal_workflows.temporal._workflow.supersteps import StepRunner

__all__ = [
    "GraphWorkflow",
    "PATCH_CARRY_LATER",
    "PATCH_CHECKPOINT_FAILURE_FAILS_RUN",
    "PATCH_ENTRY_CHECKPOINT",
    "PATCH_STATUS_ON_EVERY_FAILURE",
    "PATCH_STATUS_ON_CONTINUE_AS_NEW",
]

SIGNALS = (
    SIGNAL_RESPOND,
    SIGNAL_SEND,
    SIGNAL_SEND_EVENT,
    SIGNAL_CLOSE,
    SIGNAL_CHECKPOINT,
    SIGNAL_RESET,
    SIGNAL_DELIVER,
)
UPDATES = (
    UPDATE_RESPOND,
    UPDATE_RESPOND_ALL,
    UPDATE_SEND,
    UPDATE_SEND_EVENT,
    UPDATE_CHECKPOINT,
    UPDATE_RESET,
    UPDATE_CONFIRM,
)

_T = TypeVar("_T")

_JSON_PLAIN = {"encoding": b"json/plain"}

_NO_ARGUMENT = RawValue(Payload(metadata={"encoding": b"binary/null"}))
"""Default of signals whose argument is optional (``checkpoint``, ``reset``)."""


def _is_event_type(key: str | None) -> bool:
    """Whether ``key`` names a WorkflowEvent class (looked up, nothing built: LlamaIndex events are left as sent)."""
    if key is None:
        return False
    try:
        return issubclass(resolve_type(key), WorkflowEvent)
    except Exception:
        return False


def _payload(env: Envelope) -> Payload:
    return Payload(metadata=_JSON_PLAIN, data=to_json(env))


def _is_null(raw: RawValue) -> bool:
    encoding = raw.payload.metadata.get("encoding")
    return encoding == b"binary/null" or (encoding == b"json/plain" and raw.payload.data.strip() == b"null")


def _failure_message(e: BaseException) -> str:
    """What failed the run, for ``status``: the activity's own error rather than "Activity task failed"."""
    while isinstance(e, FailureError) and not isinstance(e, ApplicationError) and e.cause is not None:
        e = e.cause
    return short_message(e, 1000) if not isinstance(e, FailureError) else " ".join(e.message.split())[:1000]


def _failure_type(e: BaseException) -> str:
    """The failure's type as the client reads it back (``InvalidRunInputError``, ``UnknownGraphError``, ...)."""
    while isinstance(e, FailureError) and not isinstance(e, ApplicationError) and e.cause is not None:
        e = e.cause
    return (e.type if isinstance(e, ApplicationError) else None) or type(e).__name__


def _request_json(req: PendingRequest) -> dict[str, Any]:
    """A pending request's JSON: the one form (``pending_request_event``), as the query and the result give it."""
    out: dict[str, Any] = pending_request_event(req).model_dump(mode="json")
    return out


def _pinned(raw: RawValue) -> Pinned:
    """The pinned topology and step options, also from runs recorded by earlier versions."""
    converter = workflow.payload_converter()
    try:
        pinned: Pinned = converter.from_payload(raw.payload, Pinned)
    except Exception:
        pinned = Pinned(converter.from_payload(raw.payload, Topology), None)
    if pinned.step_options is None:
        # Earlier versions kept executor options inside the topology.
        legacy: dict[str, Any] = converter.from_payload(raw.payload, dict)
        topology = legacy.get("topology", legacy)
        options = topology.get("executor_options") if isinstance(topology, dict) else None
        pinned = dataclasses.replace(pinned, step_options=options if isinstance(options, dict) else {})
    return pinned


def _check_input(inp: RunInput) -> None:
    """Refuse a malformed start input, naming the field (it would otherwise fail later, or for ever)."""
    if inp.checkpoint_every is not None and inp.checkpoint_every < 0:
        raise InvalidRunInputError(f"checkpoint_every must be 0 or more, not {inp.checkpoint_every}")
    if inp.max_history_events is not None and inp.max_history_events < 1:
        raise InvalidRunInputError(f"max_history_events must be positive, not {inp.max_history_events}")
    if inp.max_steps_in_flight is not None and not 1 <= inp.max_steps_in_flight <= MAX_STEPS_IN_FLIGHT:
        raise InvalidRunInputError(
            f"max_steps_in_flight must be 1 to {MAX_STEPS_IN_FLIGHT}, not {inp.max_steps_in_flight}"
        )
    if inp.message_type is not None and not isinstance(inp.message_type, str):
        raise InvalidRunInputError("message_type must be a type name (a string)")
    error = too_long("message_type", inp.message_type, MAX_TYPE_NAME_CHARS)
    if inp.fork_from is not None:
        error = error or too_long("fork_from.checkpoint_id", inp.fork_from.checkpoint_id, MAX_ID_CHARS)
    if error is not None:
        raise InvalidRunInputError(error)


def _reset_error(req: ResetRequest) -> str | None:
    """Why a reset request is refused before anything is looked up: an id or type name over its limit."""
    return too_long("checkpoint id", req.checkpoint_id, MAX_ID_CHARS) or too_long(
        "message type", req.message_type, MAX_TYPE_NAME_CHARS
    )


def _label_error(req: CheckpointRequest | None) -> str | None:
    return too_long("label", req.label if req else None, MAX_LABEL_CHARS)


@workflow.defn(dynamic=True, sandboxed=False)
class GraphWorkflow:
    """Runs one graph execution: pins the topology, then drives supersteps, waiting durably when idle.

    Runs outside Temporal's sandbox: it calls no user code (handlers run in
    activities), and the sandbox's work around each workflow task cost more
    than the task itself. Determinism is checked instead by replaying every
    run of the test session inside the sandbox with its default restrictions
    (tests/integration/test_replay.py).
    """

    @workflow.init
    def __init__(self, args: Sequence[RawValue]) -> None:
        inp = RunInput()
        # A start input that is not a RunInput fails the run (in run()), rather than
        # the workflow task, which Temporal would retry for ever.
        self._input_error: str | None = None
        if args:
            try:
                decoded = workflow.payload_converter().from_payload(args[0].payload, RunInput)
                if not isinstance(decoded, RunInput):
                    raise TypeError(f"got {type(decoded).__name__}")
                inp = decoded
            except Exception as e:
                self._input_error = f'the start input is not {{"message": ...}} (a RunInput): {short_message(e)}'
        self._input = inp
        carried = inp.carried if self._input_error is None else None
        self._carried = carried
        # Must be built here, in __init__: the stream registers its signal,
        # update and query handlers before the first event is delivered.
        self._stream = WorkflowStream(prior_state=carried.stream if carried else None)
        self._events = self._stream.topic(EVENTS_TOPIC, type=Envelope)
        self._board = StatusBoard(self._publish, carried.status if carried else None)
        self.patches = RunPatches()
        self._budget = TaskBudget()
        self.locals = LocalActivities()  # read by locals.execute_local_activity
        self._input_taken = (-1, 0)  # (workflow task, bytes of update input its validators let in)
        self._held: dict[str, Envelope] = {}  # large input being validated, by reference (outside_input)
        self._held_count = 0
        self._inbox = Inbox(
            self._validate,
            self._board,
            carried.inbox if carried else None,
            budget=self._budget,
            route=self._route,
            publish=self._publish,
            validate_update=self._validate_update,
        )
        self._checkpoints = Checkpoints(carried.checkpoints if carried else None)
        self._engine: Engine | None = None
        self._topology: Topology | None = None
        self._shape: GraphShape | None = None
        self._shape_note: str | None = None
        self._steps: StepRunner | None = None
        self._reset: ResetPlan | None = None
        self._keep_alive = inp.keep_alive
        self._closing = carried.closing if carried else False
        self._epoch = carried.epoch if carried else 0
        self._segment = carried.segment if carried else 0
        self._start_env: Envelope | None = carried.start if carried else None
        self._lineage: dict[str, Any] | None = carried.lineage if carried else None
        # A sub-workflow's child: runs to rest, refuses outside input (children.py).
        self._subrun = inp.subrun if self._input_error is None else None
        self._subrun_known: set[str] = set(inp.subrun.known or []) if inp.subrun and carried else set()
        self._subrun_ignored: list[str] = []
        # A child's intermediate outputs go to its parent with its outcome (those before a continue-as-new too).
        self._subrun_intermediate: list[Envelope] = (
            list(inp.subrun.intermediate or []) if inp.subrun and carried else []
        )
        self._payload_limit = DEFAULT_MAX_PAYLOAD_BYTES
        self._continuation = Continuation(
            stream=self._stream,
            board=self._board,
            inbox=self._inbox,
            checkpoints=self._checkpoints,
            budget=self._budget,
            patches=self.patches,
            publish=self._publish,
            payload_limit=lambda: self._payload_limit,
            max_events=DEFAULT_MAX_HISTORY_EVENTS,
        )
        self._state_text: tuple[str, str] | None = None  # committed_state_page's text, and its version

    @workflow.dynamic_config
    def dynamic_config(self) -> workflow.DynamicWorkflowConfig:
        # An engine error is a bug in the graph: fail the run, never retry the task for ever.
        return workflow.DynamicWorkflowConfig(failure_exception_types=[WorkflowError])

    # -- queries -----------------------------------------------------------------

    @workflow.query(name=QUERY_COMMITTED_STATE)
    def committed_state(self) -> StateSnapshot:
        engine = self._engine
        version = self._steps.state_version if self._steps else "0"
        return StateSnapshot(version, dict(engine.state) if engine else {})

    @workflow.query(name=QUERY_COMMITTED_STATE_PAGE)
    def committed_state_page(self, offset: int) -> StatePage:
        """The committed state's JSON text from ``offset``, at most half a payload of it (escaped again in the
        answer, it still fits in one): a state of several payloads reaches a step in several queries."""
        engine = self._engine
        version = self._steps.state_version if self._steps else "0"
        if self._state_text is None or self._state_text[0] != version:
            # Made once per version, kept for the other pages (and the other steps) of that version.
            self._state_text = (version, state_page_text(engine.state if engine else {}))
        text = self._state_text[1]
        page = max(4096, self._payload_limit // 2 - 4096)
        start = max(0, offset)
        return StatePage(version, len(text), text[start : start + page])

    @workflow.query(name=QUERY_OUTSIDE_INPUT)
    def outside_input(self, ref: str) -> Envelope | None:
        """Large outside input the ``validate`` activity checks by reference (``ValidateInput.ref``)."""
        return self._held.get(ref)

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> dict[str, Any]:
        """Where the run is: status, superstep, in-flight executors, requests, outputs so far, warnings."""
        engine, board, cps = self._engine, self._board, self._checkpoints
        return {
            "status": board.status,
            "superstep": engine.superstep if engine else 0,
            "in_flight": list(self._steps.in_flight) if self._steps else [],
            "pending_requests": len(engine.pending_requests) if engine else 0,
            "outputs": [o.value.data for o in engine.outputs] if engine else [],
            "outputs_released": engine.outputs_released if engine else 0,
            "keep_alive": self._keep_alive,
            "warnings": list(board.warnings),
            "error": board.error,
            "last_checkpoint_id": cps.last_id,
            "checkpoints": len(cps.listed),
            "resets": self._epoch,
            "continued_as_new": self._segment,
            "lineage": self._lineage,
            # The run's graph version: a worker without Worker Versioning compares its own at start-up.
            "graph_signature": self._topology.signature_hash[:SIGNATURE_PREFIX] if self._topology else None,
        }

    @workflow.query(name=QUERY_TOPOLOGY)
    def topology(self) -> dict[str, Any]:
        """The run's graph as pinned, and its picture as data (``shape``) or a ``note`` saying why there is none.

        Answered from what the run recorded when it started (the topology activity's result), never from the
        worker's current graph, so it is the graph this run runs; kept once per run, not per query.
        """
        topology, shape = self._topology, self._shape
        note = self._shape_note
        if topology is None:
            note = "the run has not pinned its graph yet"
        elif shape is None and note is None:
            note = "this run was started by a worker that kept no picture of its graph (an earlier version)"
        return {
            "graph": topology.name if topology else workflow.info().workflow_type,
            "start_executor": topology.start_executor_id if topology else None,
            "executor_ids": list(topology.executor_ids) if topology else [],
            "subworkflows": dict(topology.subworkflows) if topology else {},
            "shape": dataclasses.asdict(shape) if shape is not None else None,
            "note": note,
        }

    @workflow.query(name=QUERY_CHECKPOINTS)
    def checkpoints(self) -> list[dict[str, Any]]:
        """This workflow's checkpoints, oldest first: id, superstep, label, created time, parent id."""
        return [dict(c) for c in self._checkpoints.listed]

    @workflow.query(name=QUERY_CHECKPOINT)
    def get_checkpoint(self, checkpoint_id: str) -> WorkflowCheckpoint | None:
        """A history-only checkpoint whole (``None`` if this run does not hold it)."""
        return self._checkpoints.kept.get(checkpoint_id)

    @workflow.query(name=QUERY_PENDING_REQUESTS)
    def pending_requests(self) -> list[dict[str, Any]]:
        """Open requests (``RequestInfoEvent`` JSON, with the schema a response must match), oldest first;
        the largest cut if need be."""
        engine = self._engine
        if engine is None:
            return []
        pending = [_request_json(r) for r in engine.pending_requests.values() if self._inbox.is_open(r.request_id)]
        return truncated_requests(pending, self._payload_limit)

    @workflow.query(name=QUERY_STATE)
    def state(self) -> dict[str, Any]:
        """Committed shared state as JSON; cut, with a note, where it would not fit in one payload."""
        engine = self._engine
        if engine is None:
            return {}
        shared = {k: v.data for k, v in shared_part(engine.state).items()}
        return truncated_state(shared, self._payload_limit)

    # -- outside input -------------------------------------------------------------

    # Signals take their argument raw and decode it here: a signal whose argument
    # does not decode would otherwise be dropped by the SDK with a worker log line
    # only; this way it becomes a warning in ``status`` and the event stream.

    def _signal_arg(self, name: str, raw: RawValue, typ: type[_T]) -> tuple[_T | None, bool]:
        """``(value, ok)``; ``(None, True)`` for an omitted or null argument of an optional one."""
        if raw is _NO_ARGUMENT or _is_null(raw):
            return None, True
        try:
            value: _T = workflow.payload_converter().from_payload(raw.payload, typ)
        except Exception as e:
            self._board.warn(f"signal {name!r} ignored: its argument is not a valid {typ.__name__}: {short_message(e)}")
            return None, False
        return value, True

    @workflow.signal(name=SIGNAL_RESPOND)
    def respond_signal(self, raw: RawValue) -> None:
        """Answer a request; bad input becomes a warning, never a failure."""
        inp, _ = self._signal_arg(SIGNAL_RESPOND, raw, RespondInput)
        if inp is not None and not self._subrun_ignores(SIGNAL_RESPOND):
            self._inbox.respond_signal(inp)

    @workflow.signal(name=SIGNAL_SEND)
    def send_signal(self, raw: RawValue) -> None:
        """Queue a message for an executor; bad input becomes a warning."""
        inp, _ = self._signal_arg(SIGNAL_SEND, raw, SendInput)
        if inp is not None and not self._subrun_ignores(SIGNAL_SEND):
            self._inbox.send_signal(inp)

    @workflow.signal(name=SIGNAL_SEND_EVENT)
    def send_event_signal(self, raw: RawValue) -> None:
        """An event for the run to route at its next boundary (a front end's ``send_event``); bad input warns."""
        inp, _ = self._signal_arg(SIGNAL_SEND_EVENT, raw, EventInput)
        if inp is not None and not self._subrun_ignores(SIGNAL_SEND_EVENT):
            self._inbox.event_signal(inp)

    @workflow.signal(name=SIGNAL_CLOSE)
    def close(self) -> None:
        """Let a keep-alive run complete once it is idle."""
        self._closing = True

    @workflow.signal(name=SIGNAL_CHECKPOINT)
    def checkpoint_signal(self, raw: RawValue = _NO_ARGUMENT) -> None:
        """Take a checkpoint at the next boundary; a failure becomes a warning."""
        req, ok = self._signal_arg(SIGNAL_CHECKPOINT, raw, CheckpointRequest)
        if not ok or self._subrun_ignores(SIGNAL_CHECKPOINT):
            return
        error = _label_error(req)
        if error is not None:
            # Never stored: the checkpoint list is carried across continue-as-new and served by query.
            self._board.warn(f"signal 'checkpoint' ignored: {error}")
            return
        if not self._board.closed:
            self._checkpoints.asks.append(CheckpointAsk(req.label if req else None, via_update=False))

    @workflow.update(name=UPDATE_CHECKPOINT)
    async def take_checkpoint(self, req: CheckpointRequest | None = None) -> dict[str, Any]:
        """Take a checkpoint at the next boundary (now, if idle); returns its id once saved."""
        self._continuation.updates_since_task = True
        ask = CheckpointAsk(req.label if req else None, via_update=True)
        self._checkpoints.asks.append(ask)
        await workflow.wait_condition(lambda: ask.done)
        if ask.error is not None or ask.result is None:
            raise to_failure(CheckpointStorageError(ask.error or "checkpoint failed"))
        return ask.result

    @take_checkpoint.validator
    def _validate_take_checkpoint(self, req: CheckpointRequest | None = None) -> None:
        self._check_open()
        self._check_not_busy()
        error = _label_error(req)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)

    @workflow.signal(name=SIGNAL_RESET)
    async def reset_signal(self, raw: RawValue = _NO_ARGUMENT) -> None:
        """Reset at the next boundary; an unusable request becomes a warning."""
        req, ok = self._signal_arg(SIGNAL_RESET, raw, ResetRequest)
        if not ok:
            return
        error = _reset_error(req) if req is not None else None
        if error is not None:
            self._board.warn(f"reset refused: {error}")
            return
        await self._quiet()
        try:
            self._reset = await self._plan_reset(req or ResetRequest())
        except ApplicationError as e:
            self._board.warn(f"reset refused: {e.message}")

    @workflow.update(name=UPDATE_RESET)
    async def reset_run(self, req: ResetRequest | None = None) -> dict[str, Any]:
        """Reset at the next boundary (now, if idle); returns once the reset is accepted."""
        self._continuation.updates_since_task = True
        self._budget.charge(json_size(req))  # the SDK repeats the accepted update's input in this task
        plan = await self._plan_reset(req or ResetRequest())
        self._reset = plan
        return {
            "accepted": True,
            "checkpoint_id": plan.requested_checkpoint_id,
            "superstep": plan.checkpoint.superstep if plan.checkpoint is not None else 0,
        }

    @reset_run.validator
    def _validate_reset_run(self, req: ResetRequest | None = None) -> None:
        self._check_open()
        self._check_not_busy()
        error = _reset_error(req) if req is not None else None
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        cid = req.checkpoint_id if req else None
        cps = self._checkpoints
        if cid is not None and cps.history_only and cid not in cps.kept:
            raise cps.unknown(cid)
        self._check_room_for(req)

    async def _plan_reset(self, req: ResetRequest) -> ResetPlan:
        self._check_open()
        await workflow.wait_condition(lambda: self._topology is not None)
        assert self._topology is not None
        plan = await self._checkpoints.plan_reset(
            req, self._topology, self._validate, start=self._start_env, lineage=self._lineage
        )
        if plan.checkpoint is not None:
            # Loaded by a local activity, whose marker records it in this workflow task.
            self._budget.charge(json_size(plan.checkpoint))
        return plan

    @workflow.update(name=UPDATE_RESPOND)
    async def submit_response(self, inp: RespondInput) -> dict[str, Any]:
        """Answer a request; returns once accepted (delivered at the next boundary)."""
        self._continuation.updates_since_task = True
        self._check_open()
        self._inbox.charge_update(inp)
        return await self._inbox.accept_response(await self._started_engine(), inp)

    @submit_response.validator
    def _validate_submit_response(self, inp: RespondInput) -> None:
        # Rejected here, an update leaves no trace in history.
        self._check_not_busy()
        self._check_respond(inp)
        self._check_room_for(inp)

    def _check_respond(self, inp: RespondInput) -> None:
        self._check_open()
        self._inbox.check_request(self._engine, inp.request_id)

    @workflow.update(name=UPDATE_RESPOND_ALL)
    async def submit_responses(self, inp: RespondAllInput) -> dict[str, Any]:
        """Answer several requests together (all or none); returns once all are accepted, applied at one boundary."""
        self._continuation.updates_since_task = True
        self._check_open()
        self._inbox.charge_update(inp)
        accepted = await self._inbox.accept_responses(await self._started_engine(), inp)
        if inp.stream is not None and self._steps is not None:
            self._steps.streaming = inp.stream  # how the caller reads the supersteps these answers start
        if inp.invocation_kwargs is not None and self._steps is not None:
            self._steps.invocation_kwargs = inp.invocation_kwargs
        return accepted

    @submit_responses.validator
    def _validate_submit_responses(self, inp: RespondAllInput) -> None:
        self._check_not_busy()
        self._check_open()
        if not inp.responses or len(inp.responses) > MAX_RESPONSES_PER_UPDATE:
            raise refuse(
                FAILURE_INPUT_TOO_LONG,
                f"submit_responses takes 1 to {MAX_RESPONSES_PER_UPDATE} responses, not {len(inp.responses)}",
            )
        self._inbox.check_requests(self._engine, inp)
        self._check_room_for(inp)

    @workflow.update(name=UPDATE_SEND)
    async def send_message(self, inp: SendInput) -> dict[str, Any]:
        """Queue a message for an executor; returns once it is accepted."""
        self._continuation.updates_since_task = True
        self._inbox.charge_update(inp)
        return await self._inbox.accept_message(inp, self._check_open)

    @send_message.validator
    def _validate_send_message(self, inp: SendInput) -> None:
        self._check_not_busy()
        self._check_send(inp)
        self._check_room_for(inp)

    def _check_send(self, inp: SendInput) -> None:
        self._check_open()
        error = oversized_send(inp)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        topology = self._topology
        if topology is not None and inp.executor_id not in topology.executor_ids:
            raise refuse(
                FAILURE_UNDELIVERABLE,
                f"no executor {quote(inp.executor_id)} in graph {workflow.info().workflow_type!r}; "
                f"executors: {sorted(topology.executor_ids)}",
            )

    @workflow.update(name=UPDATE_SEND_EVENT)
    async def submit_event(self, inp: EventInput) -> dict[str, Any]:
        """An event for the run to route at its next boundary; returns once the run can read it."""
        self._continuation.updates_since_task = True
        self._check_open()
        self._inbox.charge_update(inp)
        return await self._inbox.accept_event(await self._started_engine(), inp, self._check_open)

    @submit_event.validator
    def _validate_submit_event(self, inp: EventInput) -> None:
        # Rejected here, an update leaves no trace in history.
        self._check_not_busy()
        self._check_open()
        error = oversized_event(inp)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        topology = self._topology
        if topology is not None and inp.step is not None and inp.step not in topology.executor_ids:
            raise refuse(
                FAILURE_UNDELIVERABLE,
                f"no step {quote(inp.step)} in workflow {workflow.info().workflow_type!r}; "
                f"steps: {sorted(topology.executor_ids)}",
            )
        self._check_room_for(inp)

    @workflow.signal(name=SIGNAL_DELIVER)
    async def deliver(self, raw: RawValue) -> None:
        """Large input a client waits for: checked as its update would be, the outcome kept to confirm."""
        d, ok = self._signal_arg(SIGNAL_DELIVER, raw, Delivery)
        if d is None:
            if ok:  # (a malformed argument was warned about already)
                self._board.warn("signal 'deliver' ignored: it needs a delivery (id, and send or respond), not null")
            return
        error = too_long("delivery id", d.id, MAX_ID_CHARS)
        if error is not None or [d.send, d.respond, d.event].count(None) != 2:
            self._board.warn(f"signal 'deliver' ignored: {error or 'it needs exactly one of send, respond or event'}")
            return
        deliveries = self._inbox.deliveries
        digest = delivery_digest(d.send if d.send is not None else d.respond)
        if deliveries.known(d.id):
            known = deliveries.digest_of(d.id)
            if known and known != digest:
                # The same id with other content: not delivered, and confirm_delivery answers for the first.
                self._board.warn(
                    f"signal 'deliver' ignored: delivery id {quote(d.id)} was already used for other input; "
                    "give each delivery its own id"
                )
            return  # the same delivery again: its outcome stands
        if deliveries.forgotten(d.id):
            self._board.warn(
                f"signal 'deliver' ignored: delivery {quote(d.id)} reached this run before "
                "(its outcome is too old to be kept); give each delivery its own id"
            )
            return
        deliveries.begin(d.id, digest)
        outcome: dict[str, Any] | ApplicationError
        try:
            # As the update would, less charging the task for its input: the server records a signal's.
            if d.send is not None:
                self._check_send(d.send)
                outcome = await self._inbox.accept_message(d.send, self._check_open)
            elif d.event is not None:
                self._validate_submit_event(d.event)
                outcome = await self._inbox.accept_event(await self._started_engine(), d.event, self._check_open)
            else:
                assert d.respond is not None
                self._check_respond(d.respond)
                outcome = await self._inbox.accept_response(await self._started_engine(), d.respond)
        except ApplicationError as e:
            outcome = e
        deliveries.settle(d.id, outcome)

    @workflow.update(name=UPDATE_CONFIRM)
    async def confirm_delivery(self, inp: ConfirmInput) -> dict[str, Any]:
        """What became of a ``deliver`` signal: its update's result, or the same refusal."""
        deliveries = self._inbox.deliveries
        await workflow.wait_condition(lambda: deliveries.outcome(inp.id) is not None)
        outcome = deliveries.outcome(inp.id)
        assert outcome is not None
        if outcome.result is None:
            raise refuse(outcome.error_type or FAILURE_UNDELIVERABLE, outcome.error or "refused", **outcome.details)
        return outcome.result

    @confirm_delivery.validator
    def _validate_confirm_delivery(self, inp: ConfirmInput) -> None:
        self._check_not_busy()
        deliveries = self._inbox.deliveries
        if deliveries.known(inp.id):
            return
        if deliveries.forgotten(inp.id):
            # Not "never arrived": sending it again would deliver it twice.
            raise refuse(
                FAILURE_DELIVERY_FORGOTTEN,
                f"delivery {quote(inp.id)} reached this run and was processed (accepted or refused), but its "
                f"outcome is too old to be kept (the run keeps the last {DELIVERED_CARRIED}); do not send it again",
                delivery_id=inp.id,
            )
        hint = (
            f" (this run no longer remembers {deliveries.forgotten_count} older deliveries: if this one is that "
            "old, it may have been processed)"
            if deliveries.lost_track
            else ""
        )
        raise refuse(
            FAILURE_UNKNOWN_DELIVERY,
            f"no delivery {quote(inp.id)} reached this run: send it by the 'deliver' signal first{hint}",
        )

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow has no handler for (a misspelled name): a warning, never silence."""
        self._board.warn(f"unknown signal {quote(name)} ignored; signals: {', '.join(SIGNALS)}")

    @workflow.update(dynamic=True)
    async def unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise AssertionError("refused by the validator")  # pragma: no cover

    @unknown_update.validator
    def _validate_unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise refuse("UnknownUpdateError", f"no update named {quote(name)} on this run; updates: {', '.join(UPDATES)}")

    async def _started_engine(self) -> Engine:
        """The engine, once this execution has one (the first task pins the topology and builds it).

        An answer arriving before then (at the start of the next execution after
        continue-as-new, say) waits for it instead of being refused as unknown.
        """
        if self._engine is None:  # (recorded runs never waited here: their engine was there)
            await workflow.wait_condition(lambda: self._engine is not None or self._board.closed)
            self._check_open()
        assert self._engine is not None
        return self._engine

    def _subrun_ignores(self, signal: str) -> bool:
        """A child's input comes from its parent only: a signal from outside is a warning."""
        if self._subrun is None:
            return False
        self._board.warn(f"signal {signal!r} ignored: {subrun_refusal(self._subrun)}")
        return True

    def _check_room_for(self, inp: Any) -> None:
        """Refuse an update whose input the current workflow task has no more room for (retryable).

        The SDK repeats each accepted update's input in the completion of the
        task that accepts it, and the server writes that completion together
        with the signals that arrived meanwhile in one transaction, refused
        over 4 MiB (``TransactionSizeLimitError``; the task then fails again
        and again). So one task accepts at most one payload of update input:
        any one update fits (each is under the payload limit); a second large
        one is refused as ``RunBusyError`` and the client sends it again to the
        next task. Validators do not run on replay, and a refused update
        leaves no trace: nothing here touches history.
        """
        size = json_size(inp)
        task = workflow.info().get_current_history_length()
        seen, taken = self._input_taken
        if seen != task:
            taken = 0
        if taken and taken + size > self._payload_limit:
            raise refuse(
                FAILURE_RUN_BUSY,
                f"the run took {taken:,} bytes of update input in this workflow task; "
                f"this {size:,}-byte input goes to the next one: send it again shortly",
                retryable=True,
            )
        self._input_taken = (task, taken + size)

    def _check_not_busy(self) -> None:
        """Refuse an update while one of the run's local activities is in flight (see ``locals.py``).

        Accepted now, the update could be ordered before that activity's result
        in history and after it on replay. Refused, it leaves no trace; the
        client sends it again shortly (``RunBusyError`` is retryable).
        """
        if not self.locals.idle:
            raise refuse(
                FAILURE_RUN_BUSY,
                "the run is busy with a local activity of its own; send the update again shortly",
                retryable=True,
            )

    async def _quiet(self) -> None:
        """Wait until none of the run's local activities is in flight, before issuing a command from a handler.

        A handler's command then follows the result of any such activity in
        history and on replay alike (see ``locals.py``). Runs recorded before
        ``PATCH_VALIDATE_IN_ACTIVITY`` did not wait.
        """
        if self.patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            locals_ = self.locals
            await workflow.wait_condition(lambda: locals_.idle)

    async def _validate_update(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check input an update (or a ``deliver`` signal) brought, in a regular activity.

        A local activity here made concurrent input unreplayable (``locals.py``):
        its result can reach the run an activation late. A regular activity's
        result is a history event, delivered where it is recorded.
        """
        if not self.patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            return await self._validate(executor_id, value, request)
        await self._quiet()
        name = workflow.info().workflow_type
        what = f"response to {request.request_id}" if request else f"message for {executor_id}"
        ref: str | None = None
        if json_size(value.data) > VALIDATE_INLINE_BYTES:
            # History holds it already (its update or signal): the activity reads it by query, not again.
            self._held_count += 1
            ref = f"input-{self._held_count}"
            self._held[ref] = value
            arg = ValidateInput(name, executor_id, Envelope(value.type, None), request, ref=ref)
        else:
            arg = ValidateInput(name, executor_id, value, request)
        try:
            handle = await self._budget.start_activity(
                json_size(arg),
                ACTIVITY_VALIDATE,
                arg,
                result_type=Validated,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=5)),
                summary=f"validate {what}",
            )
            result: Validated = await handle
        finally:
            if ref is not None:
                del self._held[ref]
        await self._quiet()  # what the handler does next follows any local activity's result
        return result.resolved(value)

    def _check_open(self) -> None:
        if self._subrun is not None:
            raise refuse(FAILURE_RUN_CLOSED, subrun_refusal(self._subrun))
        if self._board.closed or self._closing:
            state = "closing" if self._closing and not self._board.closed else self._board.status
            raise refuse(FAILURE_RUN_CLOSED, f"the run is {state}")

    async def _validate(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check outside input in a local activity: the types are user code."""
        name = workflow.info().workflow_type

        async def validate() -> Validated:
            checked: Validated = await execute_local_activity(
                ACTIVITY_VALIDATE,
                ValidateInput(name, executor_id, value, request),
                result_type=Validated,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"validate {'response to ' + request.request_id if request else 'message for ' + executor_id}",
            )
            return checked

        budget = self._budget
        if not self.patches.get(PATCH_TASK_BUDGET):
            result = await validate()  # recorded before: validations ran side by side
        else:
            # Its marker records the result in this workflow task: one validation at a time, with room
            # for a whole value (what a validation that changed the value returns, at most).
            async with budget.lock:
                await budget.room(self._payload_limit)
                result = await validate()
                budget.charge(json_size(result))
        # The activity returns only what validation changed (the value is in history already).
        return result.resolved(value)

    async def _route(self, step: str | None, event: Envelope, pending: list[PendingRequest], busy: bool) -> Routed:
        """Type and route an event sent into the run in a local activity: event classes are user code."""
        name = workflow.info().workflow_type
        summary = f"route {event.type or 'event'}" + (f" to {step}" if step else "")
        arg = RouteInput(name, event, step, pending, busy)
        if self.patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            # A regular activity, as for validation (``_validate_update``): a local activity in an update
            # handler made concurrent input unreplayable (``locals.py``).
            await self._quiet()
            handle = await self._budget.start_activity(
                json_size(arg),
                ACTIVITY_ROUTE,
                arg,
                result_type=Routed,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=5)),
                summary=summary,
            )
            result: Routed = await handle
            await self._quiet()
            return result
        async with self._budget.lock:
            await self._budget.room(self._payload_limit)
            routed: Routed = await execute_local_activity(
                ACTIVITY_ROUTE,
                arg,
                result_type=Routed,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=summary,
            )
            self._budget.charge(json_size(routed))
        return routed

    # -- events ------------------------------------------------------------------

    def _publish(self, event: WorkflowEvent | Envelope) -> None:
        # A ready-made payload skips the stream's per-item converter lookup (a fifth
        # of a run's workflow CPU when measured); the bytes are what the converter
        # would make of the envelope, and the codec still applies when they are served.
        env = event if isinstance(event, Envelope) else encode(event)
        if isinstance(env.data, dict) and "timestamp" not in env.data and _is_event_type(env.type):
            # Stamped with workflow time (the same on every replay; publishing is no command), so a closed
            # run's events read back say when each happened. Added to the JSON: the event is not decoded here.
            env = Envelope(env.type, {**env.data, "timestamp": workflow.now().isoformat()})
        self._events.publish(_payload(env))

    # -- the run -----------------------------------------------------------------

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> dict[str, Any]:
        try:
            return await self._run()
        except (FailureError, WorkflowError) as e:
            # Whatever fails the run (its input, an activity of its own), ``status`` must not say otherwise.
            if not self._board.closed:
                message = _failure_message(e)
                upsert = self._board.attribute is not None and self.patches.get(PATCH_STATUS_ON_EVERY_FAILURE)
                self._board.fail(message, upsert=upsert)
                # Like every failed run's, its event stream ends with the failure (publishing is no command).
                superstep = self._engine.superstep if self._engine is not None else 0
                self._publish(WorkflowFailedEvent(error_type=_failure_type(e), error=message, superstep=superstep))
                self._publish(WorkflowStatusEvent(state=WorkflowRunState.FAILED))
            raise

    async def _run(self) -> dict[str, Any]:
        self.patches.ask_at_start()  # first, before any activity (see patches.py)
        name = workflow.info().workflow_type
        inp = self._input
        if self._input_error is not None:
            raise to_failure(InvalidRunInputError(self._input_error))
        try:
            _check_input(inp)
        except InvalidRunInputError as e:
            raise to_failure(e) from None
        raw: RawValue = await execute_local_activity(
            ACTIVITY_TOPOLOGY,
            name,
            result_type=RawValue,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                maximum_attempts=3,
                non_retryable_error_types=[FAILURE_UNKNOWN_GRAPH]
                + [k for k, v in LEGACY_FAILURE_TYPES.items() if v == FAILURE_UNKNOWN_GRAPH],
            ),
            summary=f"pin topology of {name}",
        )
        pinned = _pinned(raw)
        topology = pinned.topology
        self._topology = topology
        self._shape = pinned.shape
        self._shape_note = pinned.shape_note
        self._board.attribute = pinned.status_attribute
        cps = self._checkpoints
        cps.setup = pinned.checkpoints or CheckpointSetup()
        self._payload_limit = pinned.max_payload_bytes or DEFAULT_MAX_PAYLOAD_BYTES
        self._continuation.max_events = inp.max_history_events or DEFAULT_MAX_HISTORY_EVENTS
        steps = self._steps = StepRunner(
            topology, pinned.step_options or {}, epoch=self._epoch, budget=self._budget, notice=self._board.warn
        )
        steps.max_in_flight = inp.max_steps_in_flight or MAX_STEPS_IN_FLIGHT
        steps.streaming = inp.stream
        steps.invocation_kwargs = inp.invocation_kwargs
        engine = Engine(topology)
        point = await start_engine(engine, inp, self._carried, self._subrun, checkpoints=cps, budget=self._budget)
        if point.start is not None:
            self._start_env = point.start
        if point.lineage is not None:
            self._lineage = point.lineage
        self._engine = engine
        steps.restored(engine)
        if self._epoch:
            cps.metadata["resets"] = self._epoch
        if self._lineage is not None:
            cps.metadata["lineage"] = self._lineage
        every = inp.checkpoint_every if inp.checkpoint_every is not None else cps.setup.every
        if self._subrun is not None:
            every = 0  # a child's checkpoints are its parent's: they hold it
        driver = SuperstepDriver(
            engine,
            _Host(
                steps=steps,
                inbox=self._inbox,
                checkpoints=cps,
                board=self._board,
                continuation=self._continuation,
                patches=self.patches,
                run=RunControls(
                    resetting=lambda: self._reset is not None,
                    closing=lambda: self._closing,
                    may_finish=self._may_finish,
                    continue_as_new=lambda engine, may_postpone: self._continue_as_new(
                        engine, may_postpone=may_postpone
                    ),
                ),
            ),
            checkpoint_every=every,
            payload_limit=lambda: self._payload_limit,
            # New input (not a restored snapshot) is checkpointed before its first superstep.
            entry_checkpoint=point.new_input,
            limit_state=self.patches.get(PATCH_STATE_LIMIT),
            # Runs recorded before steps read the state in pages kept it within one payload.
            state_limit=None if self.patches.get(PATCH_STATE_PAGES) else (lambda: self._payload_limit),
            release_outputs=lambda: self.patches.get(PATCH_RELEASE_OUTPUTS),
            intermediate=self._subrun_intermediate if self._subrun is not None else None,
        )
        carried = self._carried
        if carried is None or carried.reason != "history":
            self._publish(WorkflowStartedEvent(run_id=workflow.info().run_id))
            # A run restored from a checkpoint says again what it is waiting for.
            for event in driver.announce_pending():
                self._publish(event)
        try:
            if self._subrun is not None and carried is None:
                now = workflow.now().timestamp()
                delivered = await deliver_to_child(engine, self._subrun, now=now, validate=self._validate)
                self._subrun_known, self._subrun_ignored = delivered
            async for event in driver.run():
                self._publish(event)
        except WorkflowRunError as e:
            self._board.error = str(e)
            raise to_failure(e) from None
        # Let in-flight handlers finish (and stream pollers see the end) before closing.
        await self._continuation.settle(engine)
        if self._subrun is not None:
            try:
                return child_result(
                    engine,
                    self._subrun_known,
                    self._subrun_ignored,
                    run_id=workflow.info().workflow_id,
                    timestamp=workflow.now(),
                    limit=self._payload_limit,
                    intermediate=self._subrun_intermediate,
                )
            except WorkflowRunError as e:
                self._board.error = str(e)
                raise to_failure(e) from None
        return {
            "outputs": [o.value.data for o in engine.outputs],
            "output_types": [o.value.type for o in engine.outputs],
            "superstep": engine.superstep,
            "status": RunStatus.COMPLETED,
            "unanswered_requests": [_request_json(r) for r in engine.pending_requests.values()],
            **({"outputs_released": engine.outputs_released} if engine.outputs_released else {}),
        }

    def _may_finish(self, engine: Engine) -> bool:
        """Whether the run ends when it has no work (otherwise it waits for input)."""
        # A sub-workflow's child ends each activation at rest; its parent keeps it while it waits.
        return self._subrun is not None or self._closing or (not self._keep_alive and not engine.pending_requests)

    # -- continue-as-new (continuation.py) --------------------------------------------

    def _run_carry(self) -> RunCarry:
        """What the run is now, for a continue-as-new (its parts carry themselves)."""
        steps = self._steps
        return RunCarry(
            reset=self._reset,
            start=self._start_env,
            epoch=self._epoch,
            closing=self._closing,
            segment=self._segment,
            lineage=self._lineage,
            input=self._input,
            keep_alive=self._keep_alive,
            stream=steps.streaming if steps is not None else self._input.stream,
            invocation_kwargs=steps.invocation_kwargs if steps is not None else self._input.invocation_kwargs,
            subrun=carry_subrun(self._subrun, self._subrun_known, self._subrun_intermediate),
        )

    async def _continue_as_new(self, engine: Engine, *, may_postpone: bool = False) -> None:
        """Continue as new at this boundary (a reset, or a long history): steps in flight go with this run."""
        if self._steps is not None:
            self._steps.in_flight = []
        await self._continuation.continue_as_new(engine, self._run_carry, may_postpone=may_postpone)


@dataclass(frozen=True)
class RunControls:
    """What the driver's host asks of the run itself, beyond its parts: whether a reset or close is pending,
    whether it may finish when idle, and continuing as new (``GraphWorkflow`` supplies them)."""

    resetting: Callable[[], bool]
    closing: Callable[[], bool]
    may_finish: Callable[[Engine], bool]
    continue_as_new: Callable[[Engine, bool], Awaitable[None]]


class _Host(DriverHost):
    """The driver's host on Temporal: the workflow's parts, at boundaries and in supersteps.

    It is given each collaborator it uses (no reaching into the workflow): the
    parts that carry themselves, and the run's :class:`RunControls`.
    """

    def __init__(
        self,
        *,
        steps: StepRunner,
        inbox: Inbox,
        checkpoints: Checkpoints,
        board: StatusBoard,
        continuation: Continuation,
        patches: RunPatches,
        run: RunControls,
    ) -> None:
        self.steps = steps
        self.inbox = inbox
        self.checkpoints = checkpoints
        self.board = board
        self.continuation = continuation
        self.patches = patches
        self.run = run

    def now(self) -> float:
        return workflow.now().timestamp()

    async def take_input(self, engine: Engine) -> None:
        if self.run.resetting():
            await self.run.continue_as_new(engine, False)
        await self.inbox.drain(engine)

    async def serve_checkpoints(self, engine: Engine) -> None:
        await self.checkpoints.serve(engine, self.board.warn)

    def may_finish(self, engine: Engine) -> bool:
        return self.run.may_finish(engine)

    async def before_superstep(self, engine: Engine) -> None:
        later = self.continuation
        if later.history_is_long() and not later.carry_later(engine) and not later.inbox_takes_first():
            await self.run.continue_as_new(engine, True)

    async def wait_for_input(self, engine: Engine) -> None:
        inbox, checkpoints, run = self.inbox, self.checkpoints, self.run
        deadline = engine.next_deadline()
        timeout = max(0.0, deadline - workflow.now().timestamp()) if deadline is not None else None
        # On timeout a request's deadline has come: the driver expires it at the next boundary.
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: bool(inbox or checkpoints.asks) or run.closing() or run.resetting(),
                timeout=timeout,
                timeout_summary="request deadline",
            )

    def on_status(self, status: RunStatus, details: str) -> None:
        self.board.set(status, details)

    def superstep_scope(self, superstep: int, executor_ids: Sequence[str]) -> AbstractContextManager[Any]:
        # Steps started inside this span are its children (the context rides in
        # the activity headers), so a trace reads run → superstep → step.
        attributes = {
            "temporal_workflows.graph": workflow.info().workflow_type,
            "temporal_workflows.superstep": superstep,
            "temporal_workflows.executor_ids": list(executor_ids),
            "temporal_workflows.workflow_id": workflow.info().workflow_id,
        }
        workflow.set_current_details(f"superstep {superstep}: running {', '.join(executor_ids)}")
        return workflow_span(f"superstep {superstep}", attributes)

    async def run_steps(self, tasks: Sequence[StepTask], engine: Engine) -> Sequence[StepOutcome]:
        return await self.steps.run(tasks, engine, self.run.resetting)

    def finish_order(self) -> Sequence[int] | None:
        return self.steps.finished_order

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:
        return await self.steps.reduce(superstep, reduction)

    def committed(self, plan: CommitPlan, engine: Engine) -> None:
        self.steps.committed(plan, engine)
        self.checkpoints.written(plan.keys_written)

    async def save_checkpoint(self, engine: Engine, trigger: str) -> str | None:
        if trigger == "entry" and not self.patches.get(PATCH_ENTRY_CHECKPOINT):
            return None
        try:
            return await self.checkpoints.take(engine, None, trigger)
        except CheckpointStorageError as e:
            if self.patches.get(PATCH_CHECKPOINT_FAILURE_FAILS_RUN):
                raise
            self.board.warn(str(e))
            return None
