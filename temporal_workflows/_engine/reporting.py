"""The run's events in Agent Framework's vocabulary: what the driver says about what it does.

The driver (``driver.py``) decides what happens at a boundary and in a
superstep; this module says it, once, for every host: a step's
``executor_invoked`` / ``executor_completed`` / ``executor_failed`` events in
the order the step produced what it did (its outputs, custom events and
requests among them), a request's ``request_info`` event and the form a
pending request is listed in, the ``status`` events (which change only when
work begins, a request is announced, the run goes idle or fails, as in Agent
Framework), a sub-workflow's bubbled ``intermediate`` output, and how every
failed run's event stream ends (:func:`failed_run_events`, which the Temporal
workflow also calls for a run that fails outside the driver).

Events are made here with their ``data`` still JSON (``data_type`` names its
type); a host decides how they leave.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import Engine, PendingRequest, StepResult, StepTask
from temporal_workflows._engine.serde import Envelope, encode, type_key, validation_message
from temporal_workflows._errors import ExecutorFailedError, WorkflowError, class_path, error_args_of
from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowIntermediateEvent,
    WorkflowOutputEvent,
    WorkflowRunState,
    built_event,
    completed_event,
    invoked_event,
    status_event,
)

__all__ = [
    "INTERMEDIATE_EVENT_TYPE",
    "STEP_EVENT_DATA_LIMIT",
    "DriverEvent",
    "RunReport",
    "StepFailure",
    "StepOutcome",
    "failed_run_events",
    "intermediate_event",
    "intermediate_value",
    "pending_request_event",
    "pending_request_from_json",
    "request_event",
]

DriverEvent = WorkflowEvent | Envelope
"""What the driver emits: a run event (JSON ``data``) or a step's custom event as an envelope."""


@dataclass(frozen=True, slots=True)
class StepFailure:
    """A step that produced no result, as every host reports it.

    Attributes:
        error_type: The exception's class name (on Temporal: the activity
            failure's type, e.g. ``"ValueError"``, ``"TimeoutError"``).
        message: The exception's message, without its type.
        cause: The exception itself, where the host has it (in process).
        error_class: The exception's class by its qualified name
            (``ExecutorFailedError.error_class``); on Temporal, what the step
            activity's failure carries.
        args: The exception's arguments as JSON where its message alone does
            not give them back (``ExecutorFailedError.error_args``).
    """

    error_type: str
    message: str
    cause: BaseException | None = None
    error_class: str | None = None
    worker: str | None = None
    """Which worker's attempt failed last, where the host knows (on Temporal: its identity)."""
    args: list[Any] | None = None

    @staticmethod
    def of(e: BaseException) -> StepFailure:
        # pydantic's own text quotes the rejected input; failures reach logs and events.
        message = validation_message(e) if isinstance(e, ValidationError) else str(e)
        kind, own = getattr(e, "type", None), getattr(e, "message", None)
        if isinstance(kind, str) and kind and isinstance(own, str):
            # An error that names its own type (Temporal's ApplicationError(type="Refused")): reported
            # under that type, as a Temporal activity failure is (without importing temporalio here).
            return StepFailure(kind, own, e)
        return StepFailure(type(e).__name__, message, e, class_path(type(e)), args=error_args_of(e))

    def error(self, executor_id: str, superstep: int) -> ExecutorFailedError:
        """The error that fails the run for this step's failure (the first failed step's, in task order)."""
        return ExecutorFailedError(
            executor_id,
            superstep,
            self.cause,
            error_type=self.error_type,
            detail=self.message,
            error_class=self.error_class,
            error_args=self.args,
        )


StepOutcome = StepResult | StepFailure | None
"""``None``: the step had not finished when the host gave up waiting (see ``run_steps``)."""


def request_event(req: PendingRequest) -> RequestInfoEvent:
    """The event that announces a pending request (its ``data`` as JSON)."""
    return RequestInfoEvent(
        request_id=req.request_id,
        source_executor_id=req.executor_id,
        data=req.data.data,
        data_type=req.data.type,
        response_type=req.response_type,
        response_schema=req.response_schema,
        timeout=req.timeout,
    )


INTERMEDIATE_EVENT_TYPE = type_key(WorkflowIntermediateEvent)


def intermediate_event(executor_id: str, value: Envelope) -> Envelope:
    """A sub-workflow's intermediate output, bubbled up as its ``WorkflowExecutor``'s own ``intermediate`` event.

    Agent Framework's ``WorkflowExecutor`` does this (the event names the
    executor, not the child's executor that yielded it), and the parent's
    output designation does not apply to it.
    """
    return encode(WorkflowIntermediateEvent(executor_id=executor_id, data=value.data, data_type=value.type))


def intermediate_value(event: Envelope) -> Envelope:
    """The value an ``intermediate`` event (a step's custom event, as an envelope) carries."""
    data = event.data if isinstance(event.data, dict) else {}
    data_type = data.get("data_type")
    return Envelope(data_type if isinstance(data_type, str) else None, data.get("data"))


_EARLIER_PENDING_NAMES = {"executor_id": "source_executor_id", "request": "data", "request_type": "data_type"}
"""How workers before the one form named a pending request's fields in the ``pending_requests`` query."""


def pending_request_from_json(raw: Mapping[str, Any], *, restore: bool = True) -> RequestInfoEvent:
    """A pending request from its JSON (:func:`pending_request_event`'s).

    An answer from a worker of an earlier version (``executor_id``,
    ``request``, ``request_type``) reads the same.

    Args:
        restore: Turn ``data`` back into its type where this process can
            (else it stays JSON, with ``data_type``, as pages and the CLI show it).
    """
    fields = {_EARLIER_PENDING_NAMES.get(k, k): v for k, v in raw.items() if k != "type"}
    event = RequestInfoEvent.model_validate(fields)
    return event.restored() if restore else event


def _utc(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if epoch is not None else None


def pending_request_event(req: PendingRequest) -> RequestInfoEvent:
    """A request still open as every host lists it: its ``request_info`` event, and where it stands.

    The one form of a pending request (``Workflow.pending_requests`` in
    process, the ``pending_requests`` query and ``RunHandle.pending_requests()``
    on Temporal, a closed run's ``unanswered_requests``): its ``data`` as JSON
    here, which each reader restores to its type.
    """
    return request_event(req).model_copy(
        update={
            "superstep": req.superstep,
            "created_at": _utc(req.created_at),
            "deadline": _utc(req.deadline),
            "on_timeout": req.on_timeout if req.timeout is not None else None,
        }
    )


STEP_EVENT_DATA_LIMIT = 256 * 1024
"""Most JSON bytes of messages an ``executor_invoked`` / ``executor_completed`` event carries as its ``data``.

Larger data is left out (``data_omitted`` says how large it was): a Temporal
run's event stream serves each event as one payload, base64-encoded, so an
event near the payload limit could never be read, and the run's workflow task
would fail for ever. The same rule holds in process, so both graph hosts show the
same events. The messages themselves are delivered whatever their size."""


def _step_data(fields: dict[str, Any], items: Sequence[Envelope]) -> dict[str, Any]:
    """``fields`` (data and its types among them), or, when the data is over the limit, ``fields`` without the
    data and its types and with the size they would take (``data_omitted``)."""
    if fields.get("data") is None or _surely_small(items):
        return fields
    size = sum(json_size(e.data) for e in items) + len(items)
    if size <= STEP_EVENT_DATA_LIMIT:
        return fields
    return {k: v for k, v in fields.items() if k not in _DATA_FIELDS} | {"data_omitted": size}


_DATA_FIELDS = frozenset(("data", "data_type", "item_types"))
"""What :func:`_step_data` leaves out of an event whose data is too large to carry."""


_SCALAR_JSON_BYTES = 32
"""More than the JSON of any ``float``, ``bool`` or ``None`` takes (``-1.7976931348623157e+308`` is 24)."""


def _surely_small(items: Sequence[Envelope]) -> bool:
    """Whether ``items`` are scalars or strings whose JSON cannot reach :data:`STEP_EVENT_DATA_LIMIT` (no encoding).

    An upper bound, not a measure: a string's JSON takes at most 6 bytes per
    character (``\\uXXXX``) plus quotes, an int's at most one digit per 3 bits
    plus a sign. Anything else (lists, objects) is measured.
    """
    bound = len(items)
    for e in items:
        d = e.data
        t = type(d)
        if t is str:
            bound += 6 * len(d) + 2
        elif t is int:
            bound += d.bit_length() // 3 + 2
        elif t is float or t is bool or d is None:
            bound += _SCALAR_JSON_BYTES
        else:
            return False
    return bound <= STEP_EVENT_DATA_LIMIT


def _listed(items: Sequence[Envelope]) -> dict[str, Any]:
    """Several envelopes as one event's ``data`` (a list; ``None`` if empty) with what restores their types.

    A list of one model or dataclass is typed as a whole (``data_type``);
    items of different types each keep their own (``item_types``).
    """
    if not items:
        return {"data": None}
    if len(items) == 1 and items[0].type is None:  # most steps: one message of a JSON type
        return {"data": [items[0].data]}
    data = [e.data for e in items]
    types = [e.type for e in items]
    if all(t is None for t in types):
        return {"data": data}
    first = types[0]
    if first is not None and not first.startswith(("list[", "dict[")) and all(t == first for t in types):
        return {"data": data, "data_type": f"list[{first}]"}
    return {"data": data, "item_types": types}


def _invoked(task: StepTask) -> ExecutorInvokedEvent:
    """``executor_invoked`` with what the step received: its message, a fan-in's list, or the response."""
    if task.kind == "fan_in":
        fields = _listed(task.messages)
    else:
        first = task.messages[0]
        if len(task.messages) == 1 and _surely_small(task.messages):  # most steps: the fields as they are
            return invoked_event(task.executor_id, task.superstep, first.data, first.type)
        fields = {"data": first.data, "data_type": first.type}
    fields["executor_id"] = task.executor_id
    fields["superstep"] = task.superstep
    return built_event(ExecutorInvokedEvent, **_step_data(fields, task.messages))


_ONE_SEND: tuple[list[str], ...] = ([], ["s1"])
"""The production orders of a step that sent one message to one target and did nothing else (none recorded, or
that one send)."""


def _production_order(result: StepResult) -> list[str]:
    """The step's record of what it did in which order, if it accounts for everything; else the default order.

    The record comes from the step host (on Temporal, an activity's result);
    one that does not add up must not fail the workflow's code.
    """
    order = result.production_order()
    # Nearly every step sends each message to one target (or none): the record then holds only the four
    # one-character codes, and counting them (in C) says whether it adds up.
    sends, outs, events, reqs = order.count("s1"), order.count("o"), order.count("e"), order.count("r")
    if (
        sends + outs + events + reqs == len(order)
        and not result.unrouted
        and (sends, outs, events, reqs)
        == (len(result.sent), len(result.outputs), len(result.events), len(result.requests))
    ):
        return order
    counts = {"o": 0, "e": 0, "r": 0}
    delivered = unrouted = 0
    for code in order:
        if code in counts:
            counts[code] += 1
        elif code[:1] == "s" and code[1:].isdigit():
            n = int(code[1:])
            delivered += n
            unrouted += n == 0
        else:
            break
    else:
        if (delivered, unrouted, counts["o"], counts["e"], counts["r"]) == (
            len(result.sent),
            len(result.unrouted),
            len(result.outputs),
            len(result.events),
            len(result.requests),
        ):
            return order
    return StepResult(result.writes, result.sent, result.outputs, result.requests, result.events).production_order()


def failed_run_events(
    error_type: str, error: str, superstep: int, executor_id: str | None = None
) -> list[WorkflowEvent]:
    """How every failed run's event stream ends: its ``failed`` event, then the ``FAILED`` status.

    The driver ends a run that fails in it so (:meth:`RunReport.run_failed`),
    and the Temporal workflow a run that fails outside it (its input, an
    activity of its own), so a reader sees one ending whatever failed.
    """
    return [
        WorkflowFailedEvent(error_type=error_type, error=error, executor_id=executor_id, superstep=superstep),
        status_event(WorkflowRunState.FAILED),
    ]


class RunReport:
    """The events a run made that its host has not taken yet, and the state its ``status`` events last showed.

    One per driver (a run, or one activation of it in process). ``out`` is
    handed over by :meth:`flush`; the driver decides when.

    Args:
        engine: The run's engine (what an executor's outputs are, the requests as committed).
        intermediate: Where to collect the run's intermediate outputs as they
            are published (``SuperstepDriver``'s ``intermediate``), or ``None``.
    """

    __slots__ = ("_engine", "_intermediate", "out", "shown")

    def __init__(self, engine: Engine, intermediate: list[Envelope] | None) -> None:
        self._engine = engine
        self._intermediate = intermediate
        self.out: list[DriverEvent] = []
        self.shown: WorkflowRunState | None = None
        """The state of the last ``status`` event (``None``: none yet)."""

    def emit(self, event: DriverEvent) -> None:
        self.out.append(event)

    def flush(self) -> list[DriverEvent]:
        out, self.out = self.out, []
        return out

    def show_state(self, state: WorkflowRunState | None = None) -> None:
        """A ``status`` event for ``state`` (default: the engine's), unless it is the state shown last."""
        state = state or self._engine.run_state()
        if state != self.shown:
            self.shown = state
            self.emit(status_event(state))

    def activate(self) -> None:
        """Work begins (or goes on): ``IN_PROGRESS``, unless the run already says it is in progress.

        As in Agent Framework, the status changes only when work begins, when
        a request is announced (``IN_PROGRESS_PENDING_REQUESTS``, right after
        the first request event) and when the run goes idle or fails, so it
        does not depend on when outside input happens to arrive.
        """
        if self.shown not in (WorkflowRunState.IN_PROGRESS, WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS):
            self.show_state(WorkflowRunState.IN_PROGRESS)

    def announce_pending(self) -> list[DriverEvent]:
        """A restored run says again what it is waiting for (in progress, its requests, pending requests)."""
        pending = list(self._engine.pending_requests.values())
        if not pending:
            return []
        self.activate()
        for req in pending:
            self.emit(request_event(req))
        if self.shown is WorkflowRunState.IN_PROGRESS:
            self.show_state(WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS)
        return self.flush()

    def run_failed(self, error_type: str, error: str, superstep: int, executor_id: str | None) -> list[DriverEvent]:
        """The events so far, ended as every failed run's are (:func:`failed_run_events`)."""
        self.out.extend(failed_run_events(error_type, error, superstep, executor_id))
        self.shown = WorkflowRunState.FAILED
        return self.flush()

    def inputs_refused(self, refused: Sequence[tuple[StepTask, WorkflowError]], superstep: int) -> ExecutorFailedError:
        """Steps whose input cannot be one payload, each reported failed (never invoked); the first one's error."""
        for t, e in refused:
            self.emit(
                ExecutorFailedEvent(
                    executor_id=t.executor_id, superstep=superstep, error_type=type(e).__name__, error=str(e)
                )
            )
        t, e = refused[0]
        return StepFailure(type(e).__name__, str(e), e, class_path(type(e))).error(t.executor_id, superstep)

    def commit_refused(
        self,
        tasks: Sequence[StepTask],
        results: Sequence[StepResult],
        blamed: int,
        error: WorkflowError,
        superstep: int,
    ) -> ExecutorFailedError:
        """A superstep whose commit ``error`` refused: the step blamed failed, the others not committed; its error."""
        failure = StepFailure(type(error).__name__, str(error), error, error_class=class_path(type(error)))
        for i, (t, r) in enumerate(zip(tasks, results, strict=True)):
            self.step_events(t, failure if i == blamed else r, committed=False)
        return failure.error(tasks[blamed].executor_id, superstep)

    # -- one step's events ----------------------------------------------------------------

    def steps_uncommitted(self, tasks: Sequence[StepTask], outcomes: Sequence[StepOutcome]) -> None:
        for t, r in zip(tasks, outcomes, strict=True):
            self.step_events(t, r, committed=False)

    def step_events(self, task: StepTask, outcome: StepOutcome, *, committed: bool) -> None:
        """A step's events, in the order the step produced them: invoked, what it emitted, completed (or failed).

        Steps are reported one after another in the superstep's task order
        (never in completion order), in process and on Temporal. What a step emitted that
        only a commit makes real (outputs, requests) is shown only when its
        superstep commits; its custom events are shown either way.
        """
        self.emit(_invoked(task))
        if isinstance(outcome, StepFailure):
            self.emit(
                ExecutorFailedEvent(
                    executor_id=task.executor_id,
                    superstep=task.superstep,
                    error_type=outcome.error_type,
                    error=outcome.message,
                    **({"worker": outcome.worker} if outcome.worker else {}),
                )
            )
            return
        if outcome is None:
            return
        sent = outcome.sent
        if len(sent) == 1 and not (outcome.outputs or outcome.events or outcome.requests or outcome.unrouted):
            # Most steps: one message sent to one target, nothing else (the order it was made in says nothing).
            sent_one = sent[0].messages
            if sent_one[0].type is None and outcome.emitted in _ONE_SEND and _surely_small(sent_one):
                self.emit(completed_event(task.executor_id, task.superstep, [sent_one[0].data], outcome.worker))
                return
        order = _production_order(outcome)
        unrouted, outputs, events, requests = (
            outcome.unrouted,
            outcome.outputs,
            outcome.events,
            outcome.requests,
        )
        si = ui = oi = ei = ri = 0  # the next of each, in the order the step produced them
        kind: str | None = None
        messages: list[Envelope] = []
        yielded: list[Envelope] = []
        for code in order:
            c = code[0]
            if c == "s":
                n = 1 if code == "s1" else int(code[1:])
                if n:
                    messages.append(sent[si].messages[0])
                    si += n
                else:
                    messages.append(unrouted[ui])
                    ui += 1
            elif c == "o":
                env = outputs[oi]
                oi += 1
                yielded.append(env)
                if not committed:
                    continue
                if kind is None:
                    kind = self._engine.topology.output_kind(task.executor_id)
                if kind == "output":
                    self.emit(
                        built_event(
                            WorkflowOutputEvent, executor_id=task.executor_id, data=env.data, data_type=env.type
                        )
                    )
                elif kind == "intermediate":
                    self.emit(
                        built_event(
                            WorkflowIntermediateEvent, executor_id=task.executor_id, data=env.data, data_type=env.type
                        )
                    )
                    if self._intermediate is not None:
                        self._intermediate.append(env)
            elif c == "e":
                event = events[ei]
                ei += 1
                self.emit(event)
                if self._intermediate is not None and event.type == INTERMEDIATE_EVENT_TYPE:
                    self._intermediate.append(intermediate_value(event))
            elif c == "r":
                req = requests[ri]
                ri += 1
                if committed:
                    self.emit(request_event(self._engine.pending_requests.get(req.request_id, req)))
                    if self.shown is WorkflowRunState.IN_PROGRESS:
                        self.shown = WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS
                        self.emit(status_event(self.shown))
        done = messages + yielded if yielded else messages
        if len(done) == 1 and done[0].type is None and _surely_small(done):  # most steps: one JSON message
            self.emit(completed_event(task.executor_id, task.superstep, [done[0].data], outcome.worker))
            return
        fields = _listed(done)
        fields["executor_id"] = task.executor_id
        fields["superstep"] = task.superstep
        if outcome.worker:
            fields["worker"] = outcome.worker
        self.emit(built_event(ExecutorCompletedEvent, **_step_data(fields, done)))
