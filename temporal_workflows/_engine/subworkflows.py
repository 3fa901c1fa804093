"""Sub-workflows in the superstep: which child each step of a ``WorkflowExecutor`` runs, and what it leaves.

A ``WorkflowExecutor`` runs a child graph as one executor of its parent. Each
input message starts a child run of its own; the child runs to rest (idle,
or waiting for responses) within the parent's superstep, and its outputs and
new requests come back as that step's result. A child waiting for responses
is kept *in the parent's committed state*, as a snapshot under the executor's
private key ``@<executor>/sub/<key>``: so a parent checkpoint holds its
children exactly as they were at that boundary, and a restore, reset or fork
brings parent and children back together. Nothing runs while a child waits:
a response for it (a ``SubWorkflowResponseMessage``, or the answer to a
request the executor propagated) resumes it from its snapshot.

This module is the part both graph hosts share, and it is pure (workflow code on
Temporal): it plans every sub-workflow step of a superstep from the
committed state, orders the steps that resume one child (one after another,
in task order, each from the snapshot the previous one left, as Agent
Framework runs them), and turns a child's outcome into the step's result.
The hosts supply how a child runs (in process: the driver over the child's
engine; on Temporal: a child workflow of the child graph), how the
executor's own step runs (it routes the outputs: user code), and the futures
that order steps (the engine imports no ``asyncio``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from temporal_workflows._checkpoints.base import WorkflowCheckpoint, check_signature, checkpoint_of
from temporal_workflows._engine.driver import intermediate_event
from temporal_workflows._engine.inbound import Inbound, Unanswerable, apply, open_request
from temporal_workflows._engine.machine import (
    EXECUTOR_STATE_PREFIX,
    REQUEST_TIMED_OUT_TYPE,
    Engine,
    PendingRequest,
    StateWrite,
    StepResult,
    StepTask,
    Topology,
)
from temporal_workflows._engine.serde import Envelope, encode, node_envelope, type_key, validation_message
from temporal_workflows._errors import WorkflowError
from temporal_workflows._events import WorkflowWarningEvent
from temporal_workflows._subworkflow import SubWorkflowReport, SubWorkflowResponseMessage

__all__ = [
    "REPORT_TYPE",
    "RESPONSE_MESSAGE_TYPE",
    "Activation",
    "SubWorkflowOutcome",
    "SubWorkflowSuperstep",
    "sub_workflow_key_prefix",
    "deliver_responses",
    "list_envelope",
    "resume_engine",
    "sub_workflow_outcome",
]

REPORT_TYPE = type_key(SubWorkflowReport)
RESPONSE_MESSAGE_TYPE = type_key(SubWorkflowResponseMessage)
SUB_WORKFLOW_KEY = "sub/"


def sub_workflow_key_prefix(executor_id: str) -> str:
    """Where ``executor_id`` keeps its waiting children in the parent's state (executor-private)."""
    return f"{EXECUTOR_STATE_PREFIX}{executor_id}/{SUB_WORKFLOW_KEY}"


@dataclass(frozen=True)
class Activation:
    """One run of a child to rest: started with a message, or resumed from its snapshot with responses.

    Attributes:
        executor_id: The ``WorkflowExecutor`` in the parent.
        graph: The child graph's name (the child workflow's type on Temporal).
        key: The child's key in the parent's state.
        run_id: The child's run id: its steps' idempotency keys and request ids
            derive from it; on Temporal, the child workflow's id (bounded to
            Temporal's id limit there: ``_engine/ids.py``, ``temporal/_workflow/children.run_child``).
        start: The start message of a new child.
        snapshot: The waiting child to resume (a ``WorkflowCheckpoint`` as JSON).
        responses: ``(request_id, response)`` to deliver to the resumed child.
    """

    executor_id: str
    graph: str
    key: str
    run_id: str
    start: Envelope | None = None
    snapshot: dict[str, Any] | None = None
    responses: tuple[tuple[str, Envelope], ...] = ()


@dataclass
class SubWorkflowOutcome:
    """What an activation left: the child's outputs and new requests, and the child itself if it waits.

    Attributes:
        outputs: Values the child yielded in this activation, in commit order.
        requests: Requests it raised in this activation and still waits for.
        snapshot: The child at rest (a ``WorkflowCheckpoint`` as JSON, its
            outputs left out: they are handed on) while it waits for any
            request; ``None`` once it waits for nothing (it is done).
        ignored: Responses that found their request gone (it timed out as the child resumed).
        intermediate: Its intermediate outputs in this activation (its
            ``intermediate_output_from`` executors' yields, and those its own
            sub-workflows bubbled up), in the order they were published: the
            ``WorkflowExecutor`` publishes each as an ``intermediate`` event of
            its own, as in Agent Framework. Absent from results recorded before.
    """

    outputs: list[Envelope] = field(default_factory=list)
    requests: list[PendingRequest] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None
    ignored: list[str] = field(default_factory=list)
    intermediate: list[Envelope] = field(default_factory=list)


def sub_workflow_outcome(
    engine: Engine, known: set[str], *, run_id: str, timestamp: datetime, intermediate: Sequence[Envelope] = ()
) -> SubWorkflowOutcome:
    """The outcome of a child whose driver has come to rest (in process and on Temporal).

    Args:
        known: Ids of the requests the child was waiting for when the
            activation began (after its responses were delivered): every
            other pending request is new, and goes to the parent.
        intermediate: What the child's driver collected (``SuperstepDriver(intermediate=...)``).
    """
    outputs = [o.value for o in engine.outputs]
    requests = [r for rid, r in engine.pending_requests.items() if rid not in known]
    snapshot = None
    if engine.pending_requests:
        cp = checkpoint_of(engine, checkpoint_id="", run_id=run_id, previous_checkpoint_id=None, timestamp=timestamp)
        snapshot = cp.model_copy(update={"outputs": []}).model_dump(mode="json")
    return SubWorkflowOutcome(outputs, requests, snapshot, intermediate=list(intermediate))


def resume_engine(topology: Topology, snapshot: dict[str, Any]) -> Engine:
    """A waiting child's engine, from the snapshot its parent kept (in process and on Temporal).

    Raises:
        WorkflowError: the snapshot is not a checkpoint, or not one of this graph
            (``GraphSignatureMismatchError``), or inconsistent with it: the child
            fails, and with it the parent's step, never a task retried for ever.
    """
    try:
        cp = WorkflowCheckpoint.model_validate(snapshot)
    except ValidationError as e:
        raise WorkflowError(
            f"the waiting sub-workflow's snapshot is not a checkpoint: {validation_message(e)}"
        ) from None
    check_signature(cp, topology)
    return Engine(topology, cp.to_snapshot())


async def deliver_responses(
    engine: Engine,
    responses: Sequence[tuple[str, Envelope]],
    *,
    now: float,
    validate: Callable[[PendingRequest, Envelope], Awaitable[Envelope]],
    input_first: bool = True,
) -> list[str]:
    """Resume a child: deliver each response, then time out its due requests (in process and on Temporal).

    The order of every boundary (``driver``): input first, then deadlines. The
    parent took each answer at a boundary of its own, before the propagated
    request's deadline (or delivered its ``RequestTimedOut``), so an answer
    that arrived in time wins even when the parent's superstep that resumes
    the child starts after the deadline. ``input_first=False``: the order of
    Temporal runs recorded before (``PATCH_FIRST_COME``).

    A response is validated against its request first (``validate`` raises
    ``InvalidResponseError``: the child's run, and the parent's step, fail
    with it). A ``RequestTimedOut`` is the parent's timeout of a propagated
    request: it times the child's request out (if the child's own deadline
    has not already). Any other response whose request is gone is returned,
    to be warned about.

    Raises:
        RequestTimeoutError: a due request was made with ``on_timeout="fail"``.
        InvalidResponseError: a response does not validate.
    """
    if not input_first:
        engine.expire_due(now)
    ignored: list[str] = []
    for rid, env in responses:
        request = open_request(engine, rid)
        if isinstance(request, Unanswerable):
            if env.type != REQUEST_TIMED_OUT_TYPE:  # the parent's timeout of a request the child's timed out
                ignored.append(rid)
            continue
        checked = env if env.type == REQUEST_TIMED_OUT_TYPE else await validate(request, env)
        apply(engine, Inbound("respond", rid, checked, checked=True))
    engine.expire_due(now)
    return ignored


def list_envelope(messages: Sequence[Envelope], executor_id: str) -> Envelope:
    """A fan-in's messages as one list, the start message of a child (what the child's handler takes)."""
    types = {m.type for m in messages}
    if len(types) != 1:
        raise WorkflowError(
            f"sub-workflow executor {executor_id!r} received a fan-in of messages of different types "
            f"({sorted(str(t) for t in types)}); a child starts with a list of one type"
        )
    (typ,) = types
    if typ is not None and (typ.startswith("list[") or typ.startswith("dict[")):
        raise WorkflowError(
            f"sub-workflow executor {executor_id!r} received a fan-in of {typ} messages; a child starts with "
            "a list of models, dataclasses or plain JSON values, not of lists"
        )
    return Envelope(None if typ is None else f"list[{typ}]", [m.data for m in messages])


class Future(Protocol):
    """The part of an ``asyncio.Future`` the planner uses (the host makes them; the engine imports no asyncio)."""

    def set_result(self, result: bool, /) -> None: ...

    def __await__(self) -> Any: ...


Activate = Callable[[Activation], Awaitable[SubWorkflowOutcome]]
"""How a host runs a child to rest (raises the child's failure)."""
ReportStep = Callable[[StepTask], Awaitable[StepResult]]
"""How a host runs the executor's own step on a report (user code; raises its failure)."""


@dataclass
class _Plan:
    task: StepTask
    kind: Literal["start", "resume", "ignore"]
    key: str = ""
    start: Envelope | None = None
    request_id: str = ""
    response: Envelope | None = None
    after: int | None = None
    """The step before this one that resumes the same child (it must finish first)."""
    last: bool = True
    """The last step of the superstep resuming this child: it writes the child's snapshot."""


def _bubble_up(result: StepResult, events: list[Envelope]) -> None:
    """Add a child's intermediate outputs to its executor's step, as Agent Framework orders them.

    After what the step sent on or yielded (the child's outputs), before the
    requests it handed on. The events are made here, in the pure part, so on
    Temporal they cost no activity: a child that only yields intermediate
    outputs runs no report step, as before.
    """
    order = result.production_order()
    cut = next((i for i, code in enumerate(order) if code == "r"), len(order))
    before = sum(code == "e" for code in order[:cut])
    result.events[before:before] = events
    if result.emitted:
        result.emitted[cut:cut] = ["e"] * len(events)


def _warning(executor_id: str, request_id: str, why: str) -> Envelope:
    message = (
        f"a response to request {request_id!r} reached sub-workflow executor {executor_id!r}, {why}; it was ignored"
    )
    return encode(WorkflowWarningEvent(message=message, request_id=request_id, executor_id=executor_id))


class SubWorkflowSuperstep:
    """The sub-workflow steps of one superstep, planned from the committed state at its start.

    Args:
        topology: The parent graph (``subworkflows`` names the executors that run children).
        tasks: Every task of the superstep.
        state: The committed state the superstep reads.
        run_key: The parent's run id, and its reset count if any (``"<id>@<n>"``):
            children's run ids derive from it.
        future: Makes a fresh future (``loop.create_future``).
    """

    def __init__(
        self,
        topology: Topology,
        tasks: Sequence[StepTask],
        state: Mapping[str, Envelope],
        *,
        run_key: str,
        future: Callable[[], Future],
    ) -> None:
        self.topology = topology
        self.run_key = run_key
        self._state = state
        self._plans: dict[int, _Plan] = {}
        self._done: dict[int, Future] = {}
        self._latest: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._touched: set[tuple[str, str]] = set()
        chains: dict[tuple[str, str], int] = {}
        for t in tasks:
            if t.executor_id not in topology.subworkflows:
                continue
            plan = self._plan(t)
            if plan.kind == "resume":
                chain = (t.executor_id, plan.key)
                before = chains.get(chain)
                if before is not None:
                    plan.after = before
                    self._plans[before].last = False
                chains[chain] = t.index
            self._plans[t.index] = plan
            self._done[t.index] = future()

    @staticmethod
    def any_in(topology: Topology, tasks: Sequence[StepTask]) -> bool:
        """Whether any task of the superstep belongs to a sub-workflow executor."""
        return bool(topology.subworkflows) and any(t.executor_id in topology.subworkflows for t in tasks)

    def owns(self, task: StepTask) -> bool:
        return task.index in self._plans

    # -- planning ------------------------------------------------------------------------------

    def _plan(self, task: StepTask) -> _Plan:
        x = task.executor_id
        if task.kind == "response":
            assert task.request is not None
            return self._resume(task, task.request.request_id, task.messages[0])
        if task.kind == "message" and task.messages[0].type == RESPONSE_MESSAGE_TYPE:
            data = task.messages[0].data
            event = data.get("source_event") if isinstance(data, dict) else None
            rid = event.get("request_id") if isinstance(event, dict) else None
            if not isinstance(rid, str):
                return _Plan(task, "ignore", request_id="")
            # Its ``data`` field (typed Any) holds the answer tagged with its type, or plain JSON of ``data_type``.
            return self._resume(task, rid, node_envelope(data.get("data"), data.get("data_type")))
        key = f"{task.superstep}.{task.index}"
        if task.kind == "fan_in":
            return _Plan(task, "start", key=key, start=list_envelope(task.messages, x))
        return _Plan(task, "start", key=key, start=task.messages[0])

    def _resume(self, task: StepTask, request_id: str, response: Envelope) -> _Plan:
        prefix = sub_workflow_key_prefix(task.executor_id)
        for k, env in self._state.items():
            if not k.startswith(prefix) or not isinstance(env.data, dict):
                continue
            waiting = env.data.get("pending_requests")
            if isinstance(waiting, dict) and request_id in waiting:
                return _Plan(task, "resume", key=k[len(prefix) :], request_id=request_id, response=response)
        return _Plan(task, "ignore", request_id=request_id)

    def _snapshot(self, executor_id: str, key: str) -> dict[str, Any] | None:
        chain = (executor_id, key)
        if chain in self._latest:
            return self._latest[chain]
        env = self._state.get(sub_workflow_key_prefix(executor_id) + key)
        return env.data if env is not None and isinstance(env.data, dict) else None

    # -- running -------------------------------------------------------------------------------

    async def run(self, task: StepTask, activate: Activate, report_step: ReportStep) -> StepResult | None:
        """Run ``task``'s child to rest, then the executor's step on what it produced.

        Returns ``None`` (the step did not run) when an earlier step resuming
        the same child failed: the superstep fails with that step's error.

        Raises:
            Exception: the child's failure, or the executor's step's.
        """
        plan = self._plans[task.index]
        done = self._done[task.index]
        if plan.after is not None and not await self._done[plan.after]:
            done.set_result(False)
            return None
        x = task.executor_id
        events: list[Envelope] = []
        outcome: SubWorkflowOutcome | None = None
        try:
            if plan.kind == "ignore":
                events.append(_warning(x, plan.request_id, "which has no child waiting for it (answered already?)"))
            elif plan.kind == "start":
                outcome = await activate(self._activation(plan, start=plan.start))
            else:
                snapshot = self._snapshot(x, plan.key)
                waiting = snapshot.get("pending_requests") if snapshot is not None else None
                if not isinstance(waiting, dict) or plan.request_id not in waiting:
                    events.append(_warning(x, plan.request_id, "whose child was answered already"))
                else:
                    assert plan.response is not None
                    act = self._activation(plan, snapshot=snapshot, responses=((plan.request_id, plan.response),))
                    outcome = await activate(act)
        except BaseException:
            done.set_result(False)
            raise
        if outcome is not None:
            self._latest[(x, plan.key)] = outcome.snapshot
            self._touched.add((x, plan.key))
            events.extend(_warning(x, rid, "whose request had timed out") for rid in outcome.ignored)
        done.set_result(True)
        result = StepResult()
        if outcome is not None and (outcome.outputs or outcome.requests):
            report = encode(SubWorkflowReport(outputs=outcome.outputs, requests=outcome.requests))
            result = await report_step(StepTask(task.superstep, task.index, x, "message", (report,), task.source_ids))
        if outcome is not None and outcome.intermediate:
            _bubble_up(result, [intermediate_event(x, v) for v in outcome.intermediate])
        result.events[:0] = events
        if plan.last and (x, plan.key) in self._touched:
            write = self._write(x, plan.key)
            if write is not None:
                result.writes.append(write)
        return result

    def _activation(self, plan: _Plan, **kw: Any) -> Activation:
        x = plan.task.executor_id
        return Activation(x, self.topology.subworkflows[x], plan.key, f"{self.run_key}/{x}/{plan.key}", **kw)

    def _write(self, executor_id: str, key: str) -> StateWrite | None:
        """The child's snapshot as the superstep leaves it; ``None`` for a new child that is done already."""
        state_key = sub_workflow_key_prefix(executor_id) + key
        snapshot = self._latest[(executor_id, key)]
        if snapshot is None:
            return StateWrite(state_key, None) if state_key in self._state else None
        return StateWrite(state_key, Envelope(None, snapshot))
