"""The Temporal workflow: the superstep loop as deterministic workflow code.

One dynamic workflow class serves every graph: the workflow type is the
graph's name, and the first thing a run does is a local activity that returns
the graph's topology, which records it in history. Replays read it from there,
so deploying a changed graph never changes a running execution.

This module runs no user code. Steps, callable reducers, routing and the
validation of outside input all run in activities; here there is only the
engine's bookkeeping over JSON envelopes.

Outside input (responses, messages) arrives by signal or update at any time
but reaches the engine only at superstep boundaries, in arrival order: a
superstep always reads the state and inputs of the boundary it started at.
Between supersteps with nothing to do, the run waits on a condition (and on a
timer when a request has a deadline), holding no worker and no activity.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, TypeVar

from pydantic_core import to_json
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue, RetryPolicy, SearchAttributeKey
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ._checkpoint import WorkflowCheckpoint
    from ._engine import (
        EXECUTOR_STATE_PREFIX,
        Engine,
        Output,
        PendingRequest,
        StepResult,
        StepTask,
        Topology,
    )
    from ._errors import PayloadTooLargeError, WorkflowError, WorkflowRunError
    from ._events import (
        ExecutorCompletedEvent,
        ExecutorFailedEvent,
        ExecutorInvokedEvent,
        RequestInfoEvent,
        SuperStepCompletedEvent,
        SuperStepStartedEvent,
        WorkflowEvent,
        WorkflowFailedEvent,
        WorkflowOutputEvent,
        WorkflowResetEvent,
        WorkflowStartedEvent,
        WorkflowStatusEvent,
        WorkflowWarningEvent,
    )
    from ._limits import DEFAULT_MAX_PAYLOAD_BYTES, GUIDANCE, check_step_input, input_may_exceed, json_size
    from ._protocol import (
        ACTIVITY_LOAD_CHECKPOINT,
        ACTIVITY_REDUCE,
        ACTIVITY_SAVE_CHECKPOINT,
        ACTIVITY_TOPOLOGY,
        ACTIVITY_VALIDATE,
        DEFAULT_MAX_HISTORY_EVENTS,
        EVENTS_TOPIC,
        MAX_STEPS_IN_FLIGHT,
        QUERY_CHECKPOINT,
        QUERY_CHECKPOINTS,
        QUERY_COMMITTED_STATE,
        QUERY_PENDING_REQUESTS,
        QUERY_STATE,
        QUERY_STATUS,
        SIGNAL_CHECKPOINT,
        SIGNAL_CLOSE,
        SIGNAL_RESET,
        SIGNAL_RESPOND,
        SIGNAL_SEND,
        UPDATE_CHECKPOINT,
        UPDATE_RESET,
        UPDATE_RESPOND,
        UPDATE_SEND,
        Carried,
        CarriedInput,
        CheckpointRequest,
        CheckpointSetup,
        LoadCheckpointInput,
        Pinned,
        ReduceInput,
        ResetRequest,
        RespondInput,
        RunInput,
        SaveCheckpointInput,
        SendInput,
        StateSnapshot,
        StepInput,
        Validated,
        ValidateInput,
        step_activity_name,
    )
    from ._serde import Envelope, encode
    from ._tracing import workflow_span
    from ._wire import decode_step_result, encode_step_input

__all__ = ["GraphWorkflow", "INLINE_STATE_LIMIT", "MAX_WARNINGS", "STREAM_EVENTS_CARRIED"]

INLINE_STATE_LIMIT = 2048
"""Committed state up to this many JSON bytes rides along in step inputs.

Above it, steps read state from their worker's cache (filled by query), so a
large state is never copied into every activity input.
"""

MAX_WARNINGS = 20
"""Warnings about unusable outside input kept for the ``status`` query (newest last)."""

STREAM_EVENTS_CARRIED = 1000
"""Most recent events a run carries across continue-as-new (older offsets are then gone)."""

CHECKPOINTS_LISTED = 1000
"""Checkpoint entries the ``checkpoints`` query keeps (newest last)."""

MIN_SEGMENT_EVENTS = 20
"""History events a run adds before it may continue as new again."""

DELIVERED_CARRIED = 200
"""Answered request ids carried across continue-as-new, to say "already answered"."""

_SAVE_ERRORS = ["CheckpointStorageError", "CheckpointBaseMissing"]

DEFAULT_RETRY: dict[str, Any] = {"initial_interval": 1.0, "backoff_coefficient": 2.0, "maximum_attempts": 3}


def _retry_policy(spec: dict[str, Any] | None) -> RetryPolicy:
    spec = spec or DEFAULT_RETRY
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.get("initial_interval", 1.0)),
        backoff_coefficient=spec.get("backoff_coefficient", 2.0),
        maximum_interval=timedelta(seconds=spec["maximum_interval"]) if spec.get("maximum_interval") else None,
        maximum_attempts=int(spec.get("maximum_attempts") or 0),
        non_retryable_error_types=list(spec.get("non_retryable_error_types") or []) or None,
    )


def _approx_json_size(value: Any) -> int:
    """Approximate JSON size without serializing (cheap, deterministic)."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, dict):
        return 2 + sum(len(k) + 4 + _approx_json_size(v) for k, v in value.items())
    if isinstance(value, list):
        return 2 + sum(1 + _approx_json_size(v) for v in value)
    return 8


def _failure(error: WorkflowRunError) -> ApplicationError:
    return ApplicationError(
        str(error),
        {"executor_id": error.executor_id, "superstep": error.superstep},
        type=type(error).__name__,
        non_retryable=True,
    )


_T = TypeVar("_T")

_JSON_PLAIN = {"encoding": b"json/plain"}


def _payload(env: Envelope) -> Payload:
    return Payload(metadata=_JSON_PLAIN, data=to_json(env))


_NO_ARGUMENT = RawValue(Payload(metadata={"encoding": b"binary/null"}))
"""Default of signals whose argument is optional (``checkpoint``, ``reset``)."""


def _is_null(raw: RawValue) -> bool:
    encoding = raw.payload.metadata.get("encoding")
    return encoding == b"binary/null" or (encoding == b"json/plain" and raw.payload.data.strip() == b"null")


def _short(e: BaseException, limit: int = 300) -> str:
    """An error message fit for a warning or a failure: one line, bounded."""
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cause(e: BaseException) -> BaseException:
    """The activity's own error: a local activity's non-retryable failure arrives unwrapped."""
    return (e.cause or e) if isinstance(e, ActivityError) else e


def _pinned(raw: RawValue) -> Pinned:
    """The pinned topology, also from runs started before it carried the status attribute."""
    converter = workflow.payload_converter()
    try:
        pinned: Pinned = converter.from_payload(raw.payload, Pinned)
    except Exception:
        return Pinned(converter.from_payload(raw.payload, Topology), None)
    return pinned


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat() if epoch is not None else None


def _request_json(req: PendingRequest) -> dict[str, Any]:
    return {
        "request_id": req.request_id,
        "executor_id": req.executor_id,
        "request": req.data.data,
        "request_type": req.data.type,
        "response_type": req.response_type,
        "response_schema": req.response_schema,
        "superstep": req.superstep,
        "created_at": _iso(req.created_at),
        "deadline": _iso(req.deadline),
        "on_timeout": req.on_timeout if req.timeout is not None else None,
    }


def _request_event(req: PendingRequest) -> RequestInfoEvent:
    return RequestInfoEvent(
        request_id=req.request_id,
        source_executor_id=req.executor_id,
        data=req.data.data,
        data_type=req.data.type,
        response_type=req.response_type,
        response_schema=req.response_schema,
        timeout=req.timeout,
    )


@dataclass
class _Input:
    """Outside input waiting for the next boundary, in arrival order."""

    kind: str  # "respond" | "send"
    key: str  # request id or executor id
    value: Envelope
    validated: bool = False


@dataclass
class _CheckpointAsk:
    """A checkpoint request waiting for a boundary."""

    label: str | None
    via_update: bool
    result: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False


@dataclass
class _ResetPlan:
    """An accepted reset: start again from ``checkpoint``, or from ``start`` (None: idle)."""

    checkpoint: WorkflowCheckpoint | None
    start: Envelope | None
    requested_checkpoint_id: str | None


class _CheckpointFailed(Exception):
    pass


@workflow.defn(dynamic=True, sandboxed=False)
class GraphWorkflow:
    """Runs one graph execution: pins the topology, then loops supersteps, waiting durably when idle.

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
                inp = workflow.payload_converter().from_payload(args[0].payload, RunInput)
            except Exception as e:
                self._input_error = f'the start input is not {{"message": ...}} (a RunInput): {_short(e)}'
        self._input = inp
        carried = inp.carried or Carried(reason="start")
        self._carried = inp.carried
        # Must be built here, in __init__: the stream registers its signal,
        # update and query handlers before the first event is delivered.
        self._stream = WorkflowStream(prior_state=carried.stream)
        self._events = self._stream.topic(EVENTS_TOPIC, type=Envelope)
        self._engine: Engine | None = None
        self._topology: Topology | None = None
        self._status_attribute: str | None = None
        self._status = "starting"
        self._state_version = "0"
        self._state_size = 0
        self._payload_limit = DEFAULT_MAX_PAYLOAD_BYTES
        self._outputs_size = 0
        self._in_flight: list[str] = []
        self._error: str | None = None
        self._inbox: list[_Input] = [_Input(i.kind, i.key, i.value, i.validated) for i in carried.inbox]
        # Request ids answered (by a response taken into the inbox or the engine): a second answer is refused.
        self._answered: set[str] = {i.key for i in self._inbox if i.kind == "respond" and i.validated}
        # Request ids whose response reached the engine.
        self._delivered: set[str] = set(carried.delivered)
        self._delivered_order: list[str] = list(carried.delivered)
        self._warnings: list[dict[str, Any]] = list(carried.warnings)
        self._keep_alive = inp.keep_alive
        self._closing = carried.closing
        self._published_status: str | None = None
        # Checkpoints, resets and continue-as-new.
        self._cp_setup = CheckpointSetup()
        self._cp_every = 0
        self._cp_last: str | None = carried.last_checkpoint_id
        self._cp_base: str | None = carried.checkpoint_base_id
        self._cp_dirty: set[str] = set(carried.dirty_keys)
        self._cp_list: list[dict[str, Any]] = list(carried.checkpoints)
        self._cp_kept: dict[str, WorkflowCheckpoint] = {c.checkpoint_id: c for c in carried.kept}
        self._cp_requests: list[_CheckpointAsk] = []
        self._reset: _ResetPlan | None = None
        self._epoch = carried.epoch
        self._segment = carried.segment
        self._start_env: Envelope | None = carried.start
        self._lineage: dict[str, Any] | None = carried.lineage
        self._max_events = inp.max_history_events or DEFAULT_MAX_HISTORY_EVENTS
        self._segment_start: int | None = None
        self._updates_since_task = False

    @workflow.dynamic_config
    def dynamic_config(self) -> workflow.DynamicWorkflowConfig:
        # An engine error is a bug in the graph: fail the run, never retry the task for ever.
        return workflow.DynamicWorkflowConfig(failure_exception_types=[WorkflowError])

    # -- queries -----------------------------------------------------------------

    @workflow.query(name=QUERY_COMMITTED_STATE)
    def committed_state(self) -> StateSnapshot:
        engine = self._engine
        return StateSnapshot(self._state_version, dict(engine.state) if engine else {})

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> dict[str, Any]:
        """Where the run is: status, superstep, in-flight executors, requests, outputs so far, warnings."""
        engine = self._engine
        return {
            "status": self._status,
            "superstep": engine.superstep if engine else 0,
            "in_flight": list(self._in_flight),
            "pending_requests": len(engine.pending_requests) if engine else 0,
            "outputs": [o.value.data for o in engine.outputs] if engine else [],
            "keep_alive": self._keep_alive,
            "warnings": list(self._warnings),
            "error": self._error,
            "last_checkpoint_id": self._cp_last,
            "checkpoints": len(self._cp_list),
            "resets": self._epoch,
            "continued_as_new": self._segment,
            "lineage": self._lineage,
        }

    @workflow.query(name=QUERY_CHECKPOINTS)
    def checkpoints(self) -> list[dict[str, Any]]:
        """This workflow's checkpoints, oldest first: id, superstep, label, created time, parent id."""
        return [dict(c) for c in self._cp_list]

    @workflow.query(name=QUERY_CHECKPOINT)
    def get_checkpoint(self, checkpoint_id: str) -> WorkflowCheckpoint | None:
        """A history-only checkpoint whole (``None`` if this run does not hold it)."""
        return self._cp_kept.get(checkpoint_id)

    @workflow.query(name=QUERY_PENDING_REQUESTS)
    def pending_requests(self) -> list[dict[str, Any]]:
        """Open requests with the JSON schema a response must match, oldest first."""
        engine = self._engine
        if engine is None:
            return []
        return [_request_json(r) for r in engine.pending_requests.values() if r.request_id not in self._answered]

    @workflow.query(name=QUERY_STATE)
    def state(self) -> dict[str, Any]:
        """Committed shared state as JSON."""
        engine = self._engine
        if engine is None:
            return {}
        return {k: v.data for k, v in engine.state.items() if not k.startswith(EXECUTOR_STATE_PREFIX)}

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
            self._warn(f"signal {name!r} ignored: its argument is not a valid {typ.__name__}: {_short(e)}")
            return None, False
        return value, True

    @workflow.signal(name=SIGNAL_RESPOND)
    def respond_signal(self, raw: RawValue) -> None:
        """Answer a request; bad input becomes a warning, never a failure."""
        inp, _ = self._signal_arg(SIGNAL_RESPOND, raw, RespondInput)
        if inp is not None:
            self._inbox.append(_Input("respond", inp.request_id, Envelope(None, inp.response)))

    @workflow.signal(name=SIGNAL_SEND)
    def send_signal(self, raw: RawValue) -> None:
        """Queue a message for an executor; bad input becomes a warning."""
        inp, _ = self._signal_arg(SIGNAL_SEND, raw, SendInput)
        if inp is not None:
            self._inbox.append(_Input("send", inp.executor_id, Envelope(inp.message_type, inp.message)))

    @workflow.signal(name=SIGNAL_CLOSE)
    def close(self) -> None:
        """Let a keep-alive run complete once it is idle."""
        self._closing = True

    @workflow.signal(name=SIGNAL_CHECKPOINT)
    def checkpoint_signal(self, raw: RawValue = _NO_ARGUMENT) -> None:
        """Take a checkpoint at the next boundary; a failure becomes a warning."""
        req, ok = self._signal_arg(SIGNAL_CHECKPOINT, raw, CheckpointRequest)
        if not ok:
            return
        if self._status not in ("completed", "failed"):
            self._cp_requests.append(_CheckpointAsk(req.label if req else None, via_update=False))

    @workflow.update(name=UPDATE_CHECKPOINT)
    async def take_checkpoint(self, req: CheckpointRequest | None = None) -> dict[str, Any]:
        """Take a checkpoint at the next boundary (now, if idle); returns its id once saved."""
        self._updates_since_task = True
        ask = _CheckpointAsk(req.label if req else None, via_update=True)
        self._cp_requests.append(ask)
        await workflow.wait_condition(lambda: ask.done)
        if ask.error is not None or ask.result is None:
            raise ApplicationError(ask.error or "checkpoint failed", type="CheckpointStorageError")
        return ask.result

    @take_checkpoint.validator
    def _validate_take_checkpoint(self, req: CheckpointRequest | None = None) -> None:
        self._check_open()

    @workflow.signal(name=SIGNAL_RESET)
    async def reset_signal(self, raw: RawValue = _NO_ARGUMENT) -> None:
        """Reset at the next boundary; an unusable request becomes a warning."""
        req, ok = self._signal_arg(SIGNAL_RESET, raw, ResetRequest)
        if not ok:
            return
        try:
            self._reset = await self._plan_reset(req or ResetRequest())
        except ApplicationError as e:
            self._warn(f"reset refused: {e.message}")

    @workflow.update(name=UPDATE_RESET)
    async def reset_run(self, req: ResetRequest | None = None) -> dict[str, Any]:
        """Reset at the next boundary (now, if idle); returns once the reset is accepted."""
        self._updates_since_task = True
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
        cid = req.checkpoint_id if req else None
        if cid is not None and self._cp_setup.store == "history" and cid not in self._cp_kept:
            raise ApplicationError(self._unknown_checkpoint(cid), type="CheckpointNotFoundError")

    def _unknown_checkpoint(self, checkpoint_id: str) -> str:
        known = [c["checkpoint_id"] for c in self._cp_list[-10:]]
        if self._cp_setup.store == "history":
            known = [k for k in known if k in self._cp_kept]
        return f"no checkpoint {checkpoint_id!r} in workflow {workflow.info().workflow_id!r}; latest: {known or 'none'}"

    async def _plan_reset(self, req: ResetRequest) -> _ResetPlan:
        """Check a reset request and fetch what it restores; raises ApplicationError if unusable."""
        self._check_open()
        await workflow.wait_condition(lambda: self._topology is not None)
        topology = self._topology
        assert topology is not None
        if req.checkpoint_id is not None:
            cp = await self._find_checkpoint(workflow.info().workflow_id, req.checkpoint_id)
            self._check_signature(cp, req.allow_signature_mismatch)
            return _ResetPlan(cp, None, req.checkpoint_id)
        if req.has_message:
            start = topology.start_executor_id
            checked = await self._validate(start, Envelope(req.message_type, req.message), None)
            if checked.value is None:
                raise ApplicationError(
                    checked.error or f"start executor {start!r} cannot take the reset message",
                    type="UndeliverableMessageError",
                )
            return _ResetPlan(None, checked.value, None)
        if self._start_env is None and self._lineage is not None:
            # A forked run starts again where it was forked from.
            lineage = self._lineage
            cp = await self._load_checkpoint(lineage["workflow_id"], lineage["checkpoint_id"])
            return _ResetPlan(cp, None, None)
        return _ResetPlan(None, self._start_env, None)

    async def _find_checkpoint(self, workflow_id: str, checkpoint_id: str) -> WorkflowCheckpoint:
        if self._cp_setup.store == "history" and workflow_id == workflow.info().workflow_id:
            cp = self._cp_kept.get(checkpoint_id)
            if cp is None:
                raise ApplicationError(self._unknown_checkpoint(checkpoint_id), type="CheckpointNotFoundError")
            return cp
        return await self._load_checkpoint(workflow_id, checkpoint_id)

    async def _load_checkpoint(self, workflow_id: str, checkpoint_id: str) -> WorkflowCheckpoint:
        """Read a checkpoint through the load activity; ApplicationError names what is wrong."""
        try:
            cp: WorkflowCheckpoint = await workflow.execute_local_activity(
                ACTIVITY_LOAD_CHECKPOINT,
                LoadCheckpointInput(
                    workflow.info().workflow_type, workflow_id, checkpoint_id, self._cp_setup.store == "history"
                ),
                result_type=WorkflowCheckpoint,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["CheckpointNotFoundError"]),
                summary=f"load checkpoint {checkpoint_id}",
            )
        except (ActivityError, ApplicationError) as e:
            cause = _cause(e)
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            raise ApplicationError(message, type="CheckpointNotFoundError", non_retryable=True) from None
        return cp

    def _check_signature(self, cp: WorkflowCheckpoint, allow: bool) -> None:
        topology = self._topology
        assert topology is not None
        if cp.graph_signature_hash != topology.signature_hash and not allow:
            raise ApplicationError(
                f"checkpoint {cp.checkpoint_id!r} was taken under graph signature {cp.graph_signature_hash[:12]}…, "
                f"but graph {topology.name!r} now has signature {topology.signature_hash[:12]}…; "
                "the graph changed (pass allow_signature_mismatch to restore it anyway)",
                type="GraphSignatureMismatchError",
                non_retryable=True,
            )

    @workflow.update(name=UPDATE_RESPOND)
    async def submit_response(self, inp: RespondInput) -> dict[str, Any]:
        """Answer a request; returns once accepted (delivered at the next boundary)."""
        self._updates_since_task = True
        req = self._check_request(inp.request_id)
        checked = await self._validate(req.executor_id, Envelope(None, inp.response), req)
        # Another answer may have been accepted while this one was validated.
        req = self._check_request(inp.request_id)
        if checked.value is None:
            raise ApplicationError(checked.error or "invalid response", type="InvalidResponseError")
        self._answered.add(req.request_id)
        self._inbox.append(_Input("respond", req.request_id, checked.value, validated=True))
        return {"request_id": req.request_id, "executor_id": req.executor_id, "accepted": True}

    @submit_response.validator
    def _validate_submit_response(self, inp: RespondInput) -> None:
        # Rejected here, an update leaves no trace in history.
        self._check_request(inp.request_id)

    @workflow.update(name=UPDATE_SEND)
    async def send_message(self, inp: SendInput) -> dict[str, Any]:
        """Queue a message for an executor; returns once it is accepted."""
        self._updates_since_task = True
        checked = await self._validate(inp.executor_id, Envelope(inp.message_type, inp.message), None)
        if checked.value is None:
            raise ApplicationError(checked.error or "undeliverable message", type="UndeliverableMessageError")
        self._check_open()
        self._inbox.append(_Input("send", inp.executor_id, checked.value, validated=True))
        return {"executor_id": inp.executor_id, "accepted": True}

    @send_message.validator
    def _validate_send_message(self, inp: SendInput) -> None:
        self._check_open()
        topology = self._topology
        if topology is not None and inp.executor_id not in topology.executor_ids:
            raise ApplicationError(
                f"no executor {inp.executor_id!r} in graph {workflow.info().workflow_type!r}; "
                f"executors: {sorted(topology.executor_ids)}",
                type="UndeliverableMessageError",
            )

    def _check_open(self) -> None:
        if self._status in ("completed", "failed") or self._closing:
            raise ApplicationError(f"the run is {self._status if not self._closing else 'closing'}", type="RunClosed")

    def _check_request(self, request_id: str) -> PendingRequest:
        """The pending request ``request_id``, or an error saying why it cannot be answered."""
        self._check_open()
        engine = self._engine
        req = engine.pending_requests.get(request_id) if engine else None
        if request_id in self._delivered or request_id in self._answered:
            raise ApplicationError(f"request {request_id!r} was already answered", type="AlreadyAnsweredError")
        if req is None:
            pending = sorted(r for r in (engine.pending_requests if engine else {}) if r not in self._answered)
            raise ApplicationError(
                f"no pending request with id {request_id!r}; pending request ids: {pending or 'none'}",
                type="UnknownRequestError",
            )
        return req

    async def _validate(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check outside input in a local activity: the types are user code."""
        name = workflow.info().workflow_type
        result: Validated = await workflow.execute_local_activity(
            ACTIVITY_VALIDATE,
            ValidateInput(name, executor_id, value, request),
            result_type=Validated,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3),
            summary=f"validate {'response to ' + request.request_id if request else 'message for ' + executor_id}",
        )
        return result

    def _warn(self, message: str, *, request_id: str | None = None, executor_id: str | None = None) -> None:
        warning = {"message": message, "request_id": request_id, "executor_id": executor_id}
        self._warnings = [*self._warnings, warning][-MAX_WARNINGS:]
        workflow.logger.warning(message)
        self._publish(WorkflowWarningEvent(message=message, request_id=request_id, executor_id=executor_id))

    async def _drain_inbox(self, engine: Engine) -> None:
        """Hand queued outside input to the engine, in arrival order (boundaries only)."""
        while self._inbox:
            item = self._inbox.pop(0)
            if item.kind == "respond":
                if not item.validated and item.key in self._answered:
                    # An update's answer was accepted (and its caller told so) while
                    # this signal waited: the update wins, whatever the order.
                    self._warn(f"request {item.key!r} was already answered; response ignored", request_id=item.key)
                    continue
                req = engine.pending_requests.get(item.key)
                if req is None:
                    if item.key in self._delivered:
                        self._warn(f"request {item.key!r} was already answered; response ignored", request_id=item.key)
                    else:
                        pending = sorted(engine.pending_requests)
                        self._warn(
                            f"no pending request with id {item.key!r}; pending request ids: {pending or 'none'}",
                            request_id=item.key,
                        )
                    continue
                value = item.value
                if not item.validated:
                    checked = await self._validate(req.executor_id, value, req)
                    if checked.value is None:
                        self._warn(
                            checked.error or "invalid response", request_id=req.request_id, executor_id=req.executor_id
                        )
                        continue
                    value = checked.value
                engine.respond(req.request_id, value)
                self._answered.discard(req.request_id)
                self._delivered.add(req.request_id)
                self._delivered_order.append(req.request_id)
            else:
                value = item.value
                if not item.validated:
                    checked = await self._validate(item.key, value, None)
                    if checked.value is None:
                        self._warn(checked.error or "undeliverable message", executor_id=item.key)
                        continue
                    value = checked.value
                engine.send(item.key, value)

    # -- status and events -------------------------------------------------------

    def _publish(self, event: WorkflowEvent) -> None:
        # A ready-made payload skips the stream's per-item converter lookup (a fifth
        # of a run's workflow CPU when measured); the bytes are what the converter
        # would make of the envelope, and the codec still applies when they are served.
        self._events.publish(_payload(encode(event)))

    def _set_status(self, status: str, details: str) -> None:
        self._status = status
        workflow.set_current_details(details)
        if status == self._published_status:
            return
        self._published_status = status
        if self._status_attribute:
            key = SearchAttributeKey.for_keyword(self._status_attribute)
            workflow.upsert_search_attributes([key.value_set(status)])
        engine = self._engine
        if engine is not None:
            self._publish(WorkflowStatusEvent(state=engine.run_state()))

    def _idle_details(self, engine: Engine) -> tuple[str, str]:
        if engine.pending_requests:
            who = sorted({r.executor_id for r in engine.pending_requests.values()})
            n = len(engine.pending_requests)
            return "waiting_for_input", f"waiting for input: {n} request{'s' * (n != 1)} from {', '.join(who)}"
        return "idle", f"idle after superstep {engine.superstep}; send a message or close"

    # -- the run -----------------------------------------------------------------

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> dict[str, Any]:
        name = workflow.info().workflow_type
        inp = self._input
        if self._input_error is not None:
            raise ApplicationError(self._input_error, type="InvalidRunInput", non_retryable=True)
        if inp.max_steps_in_flight is not None and not 1 <= inp.max_steps_in_flight <= MAX_STEPS_IN_FLIGHT:
            raise WorkflowError(
                f"max_steps_in_flight must be 1 to {MAX_STEPS_IN_FLIGHT}, not {inp.max_steps_in_flight}"
            )
        raw: RawValue = await workflow.execute_local_activity(
            ACTIVITY_TOPOLOGY,
            name,
            result_type=RawValue,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["UnknownGraph"]),
            summary=f"pin topology of {name}",
        )
        pinned = _pinned(raw)
        topology = pinned.topology
        self._topology = topology
        self._status_attribute = pinned.status_attribute
        self._cp_setup = pinned.checkpoints or CheckpointSetup()
        self._payload_limit = pinned.max_payload_bytes or DEFAULT_MAX_PAYLOAD_BYTES
        self._cp_every = inp.checkpoint_every if inp.checkpoint_every is not None else self._cp_setup.every
        engine = Engine(topology)
        carried = self._carried
        if carried is not None:
            if carried.snapshot is not None:
                engine.restore(carried.snapshot.to_snapshot())
            elif carried.start is not None:
                engine.start(carried.start)
        elif inp.fork_from is not None:
            fork = inp.fork_from
            cp = await self._load_checkpoint(fork.workflow_id, fork.checkpoint_id)
            self._check_signature(cp, fork.allow_signature_mismatch)
            engine.restore(cp.to_snapshot())
            self._lineage = {"workflow_id": fork.workflow_id, "checkpoint_id": fork.checkpoint_id}
            self._cp_last = cp.checkpoint_id
        elif not (inp.keep_alive and inp.message is None and inp.message_type is None):
            self._start_env = Envelope(inp.message_type, inp.message)
            engine.start(self._start_env)
        self._engine = engine
        self._state_size = sum(_approx_json_size(v.data) for v in engine.state.values())
        self._outputs_size = sum(json_size(o.value.data) for o in engine.outputs)
        if carried is None or carried.reason != "history":
            self._publish(WorkflowStartedEvent(run_id=workflow.info().run_id))
            # A run restored from a checkpoint says again what it is waiting for.
            for req in engine.pending_requests.values():
                self._publish(_request_event(req))
        try:
            await self._loop(name, engine)
        except WorkflowRunError as e:
            self._error = str(e)
            self._publish(
                WorkflowFailedEvent(
                    error_type=type(e).__name__, error=str(e), executor_id=e.executor_id, superstep=e.superstep
                )
            )
            self._set_status("failed", f"failed in superstep {e.superstep}: {e}")
            raise _failure(e) from None
        self._set_status("completed", f"completed after {engine.superstep} supersteps")
        # Let in-flight handlers finish (and stream pollers see the end) before closing.
        await self._settle(engine)
        return {
            "outputs": [o.value.data for o in engine.outputs],
            "output_types": [o.value.type for o in engine.outputs],
            "superstep": engine.superstep,
            "status": "completed",
            "unanswered_requests": [_request_json(r) for r in engine.pending_requests.values()],
        }

    async def _loop(self, name: str, engine: Engine) -> None:
        while True:
            if self._reset is not None:
                await self._continue_as_new(engine)
            await self._drain_inbox(engine)
            engine.expire_due(workflow.now().timestamp())
            await self._serve_checkpoints(engine)
            if not engine.has_work() and (self._closing or (not self._keep_alive and not engine.pending_requests)):
                return
            if self._history_is_long():
                await self._continue_as_new(engine)
            if engine.has_work():
                self._set_status("running", f"superstep {engine.superstep + 1}")
                await self._superstep(name, engine)
                continue
            status, details = self._idle_details(engine)
            self._set_status(status, details)
            deadline = engine.next_deadline()
            timeout = max(0.0, deadline - workflow.now().timestamp()) if deadline is not None else None
            # On timeout a request's deadline has come: expire_due at the top of the loop.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: bool(self._inbox or self._cp_requests) or self._closing or self._reset is not None,
                    timeout=timeout,
                    timeout_summary="request deadline",
                )

    # -- checkpoints, resets and continue-as-new ----------------------------------

    def _history_is_long(self) -> bool:
        info = workflow.info()
        length = info.get_current_history_length()
        if self._segment_start is None:
            self._segment_start = length
        # A new run must make some progress first, or a tiny limit would continue as new for ever.
        if length < self._segment_start + MIN_SEGMENT_EVENTS:
            return False
        return info.is_continue_as_new_suggested() or length >= self._max_events

    async def _serve_checkpoints(self, engine: Engine) -> None:
        """Take the checkpoints asked for (at a boundary), telling each asker how it went."""
        while self._cp_requests:
            ask = self._cp_requests.pop(0)
            try:
                cp_id = await self._take_checkpoint(engine, ask.label, "requested")
                ask.result = {"checkpoint_id": cp_id, "superstep": engine.superstep, "label": ask.label}
            except _CheckpointFailed as e:
                ask.error = str(e)
                if not ask.via_update:
                    self._warn(str(e))
            ask.done = True

    async def _take_checkpoint(self, engine: Engine, label: str | None, trigger: str) -> str:
        """Snapshot the engine at this boundary and store it; raises _CheckpointFailed if it cannot be."""
        topology = self._topology
        assert topology is not None
        info = workflow.info()
        # Deterministic: the same id on every replay of this run.
        cp_id = workflow.uuid4().hex
        metadata: dict[str, Any] = {"label": label, "trigger": trigger, "temporal_run_id": info.run_id}
        if self._epoch:
            metadata["resets"] = self._epoch
        if self._lineage is not None:
            metadata["lineage"] = self._lineage
        snap = engine.snapshot()
        full = WorkflowCheckpoint.from_snapshot(
            snap,
            checkpoint_id=cp_id,
            workflow_name=info.workflow_type,
            run_id=info.workflow_id,
            graph_signature_hash=topology.signature_hash,
            previous_checkpoint_id=self._cp_last,
            timestamp=workflow.now(),
            metadata=metadata,
        )
        if self._cp_setup.store == "history":
            self._cp_kept[cp_id] = full
        else:
            await self._save_checkpoint(full, label)
        self._cp_list.append(
            {
                "checkpoint_id": cp_id,
                "superstep": snap.superstep,
                "label": label,
                "created_at": full.timestamp.isoformat(),
                "parent_id": self._cp_last,
                "trigger": trigger,
                "temporal_run_id": info.run_id,
            }
        )
        del self._cp_list[:-CHECKPOINTS_LISTED]
        self._cp_last = cp_id
        return cp_id

    async def _save_checkpoint(self, full: WorkflowCheckpoint, label: str | None) -> None:
        """Save through the local activity, as a delta of the last saved checkpoint when there is one."""
        name = workflow.info().workflow_type
        base = self._cp_base
        attempts = [base, None] if base is not None else [None]
        for i, base_id in enumerate(attempts):
            if base_id is not None:
                dirty = sorted(self._cp_dirty)
                body = full.model_copy(update={"state": {k: full.state[k] for k in dirty if k in full.state}})
                inp = SaveCheckpointInput(name, body, base_id, [k for k in dirty if k not in full.state])
            else:
                inp = SaveCheckpointInput(name, full)
            try:
                await workflow.execute_local_activity(
                    ACTIVITY_SAVE_CHECKPOINT,
                    inp,
                    result_type=str,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=RetryPolicy(
                        maximum_attempts=3,
                        non_retryable_error_types=["CheckpointStorageError", "CheckpointBaseMissing"],
                    ),
                    summary=f"checkpoint{' ' + repr(label) if label else ''} · superstep {full.superstep}",
                )
            except (ActivityError, ApplicationError) as e:
                cause = _cause(e)
                if isinstance(cause, ApplicationError) and cause.type == "CheckpointBaseMissing" and i == 0:
                    continue  # the delta's base is gone: send it whole
                message = cause.message if isinstance(cause, ApplicationError) else str(cause)
                raise _CheckpointFailed(
                    f"checkpoint after superstep {full.superstep} was not saved: {message}"
                ) from None
            self._cp_base = full.checkpoint_id
            self._cp_dirty.clear()
            return

    async def _settle(self, engine: Engine, *, continuing: bool = False) -> None:
        """Let every handler finish before the run closes or continues as new.

        Checkpoint requests that arrive meanwhile are served here (this is a
        boundary), or their updates would wait for ever. Before continuing as
        new, the updates' completions are first sent in a workflow task of
        their own: completed in the same task as the continue-as-new, an
        update is sometimes delivered again to the new run
        (temporalio/temporal#6375), which would apply a message twice.
        """
        self._stream.detach_pollers()
        while True:
            await workflow.wait_condition(lambda: workflow.all_handlers_finished() or bool(self._cp_requests))
            if self._cp_requests:
                await self._serve_checkpoints(engine)
                continue
            if not continuing or not self._updates_since_task:
                return
            self._updates_since_task = False
            await workflow.sleep(timedelta(milliseconds=1), summary="flush update completions")

    def _stream_state(self, keep: int = STREAM_EVENTS_CARRIED) -> WorkflowStreamState:
        state = self._stream.get_state()
        extra = len(state.log) - keep
        if extra > 0:
            state = dataclasses.replace(state, log=state.log[extra:], base_offset=state.base_offset + extra)
        return state

    async def _continue_as_new(self, engine: Engine) -> NoReturn:
        """Continue as new at this boundary, for a reset or because history is long.

        The engine snapshot (or the reset's starting point) is the new run's
        input; outside input not yet delivered, checkpoint ids, lineage and
        the event stream go with it. Nothing is lost: handlers finish first.
        """
        self._in_flight = []
        await self._settle(engine, continuing=True)
        info = workflow.info()
        plan = self._reset  # a reset accepted while settling wins
        if plan is None:
            carried = Carried(
                reason="history",
                snapshot=WorkflowCheckpoint.from_snapshot(
                    engine.snapshot(),
                    checkpoint_id="",
                    workflow_name=info.workflow_type,
                    run_id=info.workflow_id,
                    graph_signature_hash=engine.topology.signature_hash,
                    previous_checkpoint_id=self._cp_last,
                    timestamp=workflow.now(),
                ),
                start=self._start_env,
                epoch=self._epoch,
                last_checkpoint_id=self._cp_last,
                checkpoint_base_id=self._cp_base,
                dirty_keys=sorted(self._cp_dirty),
                inbox=[CarriedInput(i.kind, i.key, i.value, i.validated) for i in self._inbox],
                delivered=self._delivered_order[-DELIVERED_CARRIED:],
                warnings=list(self._warnings),
                closing=self._closing,
            )
            workflow.logger.info("continuing as new after %s history events", info.get_current_history_length())
        else:
            cp = plan.checkpoint
            own = cp is not None and cp.run_id == info.workflow_id
            carried = Carried(
                reason="reset",
                snapshot=cp,
                start=plan.start if cp is None else None,
                epoch=self._epoch + 1,
                last_checkpoint_id=cp.checkpoint_id if cp is not None else None,
                checkpoint_base_id=cp.checkpoint_id
                if cp is not None and own and self._cp_setup.store == "external"
                else None,
            )
            # Results of steps still running, queued input, requests and outputs go with the old run.
            self._publish(
                WorkflowResetEvent(
                    checkpoint_id=plan.requested_checkpoint_id,
                    superstep=cp.superstep if cp is not None else 0,
                    resets=self._epoch + 1,
                )
            )
        carried.segment = self._segment + 1
        carried.checkpoints = list(self._cp_list)
        keep = self._cp_setup.keep
        carried.kept = list(self._cp_kept.values())[-keep:] if keep else []
        carried.lineage = self._lineage
        carried.stream = self._stream_state()
        arg = RunInput(
            keep_alive=self._keep_alive,
            checkpoint_every=self._input.checkpoint_every,
            max_history_events=self._input.max_history_events,
            max_steps_in_flight=self._input.max_steps_in_flight,
            carried=carried,
        )
        if json_size(arg) > self._payload_limit:
            # The stream's recent events are a convenience for late subscribers: shed them first.
            carried.stream = self._stream_state(keep=0)
            size = json_size(arg)
            if size > self._payload_limit:
                snapshot = carried.snapshot
                largest = sorted(
                    ((json_size(v.data), k) for k, v in (snapshot.state.items() if snapshot else ())), reverse=True
                )[:3]
                raise WorkflowRunError(
                    f"the run cannot continue as new: what it carries (state, pending messages, outputs) is "
                    f"{size:,} bytes as JSON, over the payload limit of {self._payload_limit:,} bytes; largest state "
                    f"keys: {', '.join(f'{k!r} ({n:,} bytes)' for n, k in largest) or 'none'}; {GUIDANCE}",
                    superstep=engine.superstep,
                )
        workflow.continue_as_new(args=[arg])

    # -- supersteps --------------------------------------------------------------

    async def _superstep(self, name: str, engine: Engine) -> None:
        tasks = engine.begin_superstep()
        step = tasks[0].superstep
        attributes = {
            "temporal_workflows.graph": name,
            "temporal_workflows.superstep": step,
            "temporal_workflows.executor_ids": [t.executor_id for t in tasks],
            "temporal_workflows.workflow_id": workflow.info().workflow_id,
        }
        # Steps started inside this span are its children (the context rides in
        # the activity headers), so a trace reads run → superstep → step.
        with workflow_span(f"superstep {step}", attributes):
            await self._run_superstep(name, engine, tasks, step)

    async def _run_superstep(self, name: str, engine: Engine, tasks: list[StepTask], step: int) -> None:
        self._in_flight = [t.executor_id for t in tasks]
        workflow.set_current_details(f"superstep {step}: running {', '.join(self._in_flight)}")
        self._publish(SuperStepStartedEvent(superstep=step, executor_ids=list(self._in_flight)))
        for t in tasks:
            self._publish(ExecutorInvokedEvent(executor_id=t.executor_id, superstep=step))
        self._check_step_inputs(engine, tasks, step)
        inline = dict(engine.state) if self._state_size <= INLINE_STATE_LIMIT else None
        # At most MAX_STEPS_IN_FLIGHT steps are scheduled at once (Temporal refuses more
        # than 2,000 pending activities per run); results still commit in task order.
        window = asyncio.Semaphore(self._input.max_steps_in_flight or MAX_STEPS_IN_FLIGHT)
        running = asyncio.gather(*(self._run_step(name, t, inline, window) for t in tasks))
        try:
            await workflow.wait_condition(lambda: running.done() or self._reset is not None)
        except asyncio.CancelledError:
            # The run is cancelled: cancel its steps too, and end only once they have
            # stopped (heartbeating steps get to clean up), so nothing keeps running.
            await self._cancel_steps(engine, running)
            raise
        if not running.done():
            # A reset: the steps' results would be discarded anyway, so stop waiting for them.
            await self._cancel_steps(engine, running)
            return
        try:
            results = running.result()
        except _StepFailed as e:
            engine.abort_superstep()
            self._publish(
                ExecutorFailedEvent(
                    executor_id=e.task.executor_id, superstep=step, error_type="ActivityError", error=e.detail
                )
            )
            raise WorkflowRunError(
                f"executor {e.task.executor_id!r} failed in superstep {step}: {e.detail}",
                superstep=step,
                executor_id=e.task.executor_id,
            ) from None
        for t, result in zip(tasks, results, strict=True):
            for custom in result.events:
                self._events.publish(_payload(custom))
            self._publish(ExecutorCompletedEvent(executor_id=t.executor_id, superstep=step))
        try:
            plan = engine.prepare_commit(list(results))
        except WorkflowRunError:
            engine.abort_superstep()
            raise
        reduced: dict[str, Envelope] = {}
        for r in plan.reductions:
            reduced[r.key] = await workflow.execute_activity(
                ACTIVITY_REDUCE,
                ReduceInput(name, r.key, r.committed, list(r.writes)),
                result_type=Envelope,
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"reduce {r.key!r} · superstep {step}",
            )
        engine.apply_commit(plan, reduced, now=workflow.now().timestamp())
        self._cp_dirty.update(plan.keys_written)
        for key in plan.keys_written:
            value = engine.state.get(key)
            self._state_size += _approx_json_size(value.data) if value is not None else 0
        self._state_version = f"{workflow.info().run_id}:{engine.superstep}"
        self._in_flight = []
        for out in plan.outputs:
            self._publish(
                WorkflowOutputEvent(executor_id=out.executor_id, data=out.value.data, data_type=out.value.type)
            )
        self._check_outputs(plan.outputs, step)
        for req in engine.pending_requests.values():
            if req.superstep == step:
                self._publish(_request_event(req))
        checkpoint_id = None
        if self._cp_every and engine.superstep % self._cp_every == 0:
            try:
                checkpoint_id = await self._take_checkpoint(engine, None, "auto")
            except _CheckpointFailed as e:
                self._warn(str(e))
        self._publish(
            SuperStepCompletedEvent(superstep=step, state_keys_written=plan.keys_written, checkpoint_id=checkpoint_id)
        )

    def _check_step_inputs(self, engine: Engine, tasks: list[StepTask], step: int) -> None:
        """Fail the run, naming the executor, if a step's input cannot be one payload.

        Each value was measured where it was made; only inputs that combine
        several (a fan-in, a request with its response) or came from outside
        can add up past the limit, and Temporal would refuse the command and
        retry the workflow task for ever.
        """
        for t in tasks:
            if not input_may_exceed(t):
                continue
            try:
                check_step_input(t, limit=self._payload_limit)
            except PayloadTooLargeError as e:
                engine.abort_superstep()
                self._in_flight = []
                self._publish(
                    ExecutorFailedEvent(
                        executor_id=t.executor_id, superstep=step, error_type=type(e).__name__, error=str(e)
                    )
                )
                raise WorkflowRunError(str(e), superstep=step, executor_id=t.executor_id) from None

    def _check_outputs(self, outputs: Sequence[Output], step: int) -> None:
        """Fail the run once its outputs add up past one payload: its result carries them all."""
        for out in outputs:
            self._outputs_size += json_size(out.value.data)
            if self._outputs_size > self._payload_limit:
                raise WorkflowRunError(
                    f"executor {out.executor_id!r}: the run's outputs add up to {self._outputs_size:,} bytes as "
                    f"JSON, over the payload limit of {self._payload_limit:,} bytes, and the run's result carries "
                    f"every output; yield smaller outputs, or {GUIDANCE}",
                    superstep=step,
                    executor_id=out.executor_id,
                )

    async def _cancel_steps(self, engine: Engine, running: asyncio.Future[Any]) -> None:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError, ActivityError, ApplicationError, _StepFailed):
            await running
        engine.abort_superstep()
        self._in_flight = []

    async def _run_step(
        self, name: str, task: StepTask, inline: dict[str, Envelope] | None, window: asyncio.Semaphore
    ) -> StepResult:
        assert self._topology is not None
        async with window:
            opts = self._topology.executor_options.get(task.executor_id, {})
            arg = encode_step_input(StepInput(task, self._state_version, inline, self._epoch))
            common: dict[str, Any] = {
                "result_type": dict,
                "start_to_close_timeout": timedelta(seconds=opts.get("start_to_close_timeout") or 300),
                "retry_policy": _retry_policy(opts.get("retry_policy")),
                # "<superstep>.<index>.<executor>" is what the Web UI lists, so a step
                # needs no summary: one payload less to record and visit per step.
                "activity_id": f"{task.superstep}.{task.index}.{task.executor_id}",
            }
            activity_type = step_activity_name(name, task.executor_id)
            try:
                raw: dict[str, Any]
                if opts.get("local"):
                    raw = await workflow.execute_local_activity(activity_type, arg, **common)
                else:
                    hb = opts.get("heartbeat_timeout")
                    raw = await workflow.execute_activity(
                        activity_type,
                        arg,
                        task_queue=opts.get("task_queue"),
                        heartbeat_timeout=timedelta(seconds=hb) if hb else None,
                        # A heartbeating step learns of a cancel and may clean up: wait for it. One
                        # that never heartbeats would hold a cancel or reset up until it finished.
                        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
                        if hb
                        else workflow.ActivityCancellationType.TRY_CANCEL,
                        **common,
                    )
            except (ActivityError, ApplicationError) as e:
                cause = _cause(e)
                detail = str(cause)
                if isinstance(cause, ApplicationError) and cause.type:
                    detail = f"{cause.type}: {detail}"
                raise _StepFailed(task, detail) from e
        return decode_step_result(raw, task, self._topology.fan_in_groups)


class _StepFailed(Exception):
    def __init__(self, task: StepTask, detail: str) -> None:
        super().__init__(detail)
        self.task = task
        self.detail = detail
