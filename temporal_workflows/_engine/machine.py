"""The superstep machine: pure, deterministic bookkeeping over envelopes.

This module is the one engine both graph hosts drive: the in-process runner and the
Temporal workflow. It imports nothing that does I/O, reads no clock and runs no
user code: routing (edge conditions, selection functions, type checks) happens
in the sending step, callable reducers are handed back to the host, and
everything it holds is JSON envelopes. So the same inputs give the same
commits, in the same order, in a notebook and on a Temporal replay.

A superstep:
    1. ``begin_superstep()`` turns the messages and responses queued at the
       last boundary into :class:`StepTask` objects, in a fixed order.
    2. The host runs every task concurrently against the state committed at
       the last boundary and collects one :class:`StepResult` per task.
    3. ``prepare_commit(results)`` merges the writes in task order (never in
       completion order), failing with :class:`StateConflictError` when two
       steps wrote one key that has no reducer; callable reducers are returned
       to the host as :class:`Reduction` objects.
    4. ``apply_commit(plan, reduced)`` commits state, outputs, requests and
       the messages for the next superstep, releasing fan-in groups whose
       every source has sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import (
    RequestTimeoutError,
    StateConflictError,
    SuperstepLimitError,
    UndeliverableMessageError,
    UnknownRequestError,
    WorkflowError,
)
from temporal_workflows._events import WorkflowRunState

_new = object.__new__
_set_attr = object.__setattr__

__all__ = [
    "BUILTIN_REDUCERS",
    "CommitPlan",
    "RoutedMessage",
    "Engine",
    "EngineSnapshot",
    "FanInGroup",
    "Output",
    "PendingRequest",
    "Reduction",
    "StateWrite",
    "StepResult",
    "StepTask",
    "Topology",
    "apply_builtin_reducer",
    "check_snapshot",
    "executor_hook_key",
    "hook_key_executor",
    "is_shared_key",
    "shared_part",
]

BUILTIN_REDUCERS = ("append", "sum", "merge")
EXECUTOR_STATE_PREFIX = "@"
REQUEST_TIMED_OUT_TYPE = "temporal_workflows._requests:RequestTimedOut"
"""Type key of the response a timed-out request's handler receives."""


_V = TypeVar("_V")


def is_shared_key(key: str) -> bool:
    """Whether ``key`` is shared state, the part of the state a user reads and writes by name.

    Keys under :data:`EXECUTOR_STATE_PREFIX` are the engine's: executors'
    private state and checkpoint state, sub-workflow bookkeeping. Every view
    of "the state" a user sees (``get_final_state``, the ``state`` query)
    leaves them out through this one rule.
    """
    return not key.startswith(EXECUTOR_STATE_PREFIX)


def shared_part(state: Mapping[str, _V]) -> dict[str, _V]:
    """The shared keys of ``state`` (see :func:`is_shared_key`), in their order."""
    return {k: v for k, v in state.items() if not k.startswith(EXECUTOR_STATE_PREFIX)}


def executor_hook_key(executor_id: str) -> str:
    """The state key holding an executor's checkpoint state (what its ``on_checkpoint_save`` returned).

    It is the executor's private-state prefix itself (``"@<id>/"``, a key no
    ``ctx.executor_state`` write can make), so it is committed, checkpointed,
    carried across continue-as-new and read by steps exactly as state is.
    """
    return f"{EXECUTOR_STATE_PREFIX}{executor_id}/"


def hook_key_executor(key: str, executor_ids: tuple[str, ...]) -> str | None:
    """The executor whose checkpoint state ``key`` holds, or ``None`` if it is no such key."""
    if not (key.startswith(EXECUTOR_STATE_PREFIX) and key.endswith("/")):
        return None
    eid = key[len(EXECUTOR_STATE_PREFIX) : -1]
    return eid if eid in executor_ids else None


@dataclass(frozen=True, slots=True)
class FanInGroup:
    """A fan-in edge group: ``target`` fires once every source has sent."""

    id: str
    sources: tuple[str, ...]
    target: str


@dataclass(frozen=True)
class Topology:
    """The graph as pure data: everything the engine (and a Temporal workflow) needs.

    It holds no callables, so it can be recorded in history when a run starts
    and pinned for the run's lifetime.

    Attributes:
        name: The graph's name (the Temporal workflow type).
        start_executor_id: Where the start message goes.
        executor_ids: Every executor, in the order they were added.
        fan_in_groups: Fan-in edge groups by id.
        reducers: State key → ``"append" | "sum" | "merge" | "callable"``.
        max_iterations: Supersteps allowed per activation (from start, or from
            a response or message that woke an idle run).
        signature_hash: Hash of the graph's shape; checkpoints record it.
        edges: Display form of every edge group (kind, sources, targets, labels).
        subworkflows: Executor id → child graph name, for each ``WorkflowExecutor``
            (each of its steps runs a child run of that graph: ``_engine/subworkflows.py``).
        output_from: Executors whose yields are workflow outputs; ``None``: every
            executor's (unless ``intermediate_from`` is set, as in Agent Framework).
        intermediate_from: Executors whose yields are intermediate outputs
            (``intermediate`` events, not part of the run's outputs).
    """

    name: str | None
    start_executor_id: str
    executor_ids: tuple[str, ...]
    fan_in_groups: dict[str, FanInGroup]
    reducers: dict[str, str]
    max_iterations: int
    signature_hash: str
    edges: tuple[dict[str, Any], ...] = ()
    subworkflows: dict[str, str] = field(default_factory=dict)
    output_from: tuple[str, ...] | None = None
    intermediate_from: tuple[str, ...] = ()

    def output_kind(self, executor_id: str) -> Literal["output", "intermediate"] | None:
        """What an executor's ``yield_output`` makes: an output, an intermediate output, or nothing shown.

        With neither designation every yield is an output; with either, only
        the executors named are (Agent Framework's rule), the others' yields
        are hidden (they still show in their ``executor_completed`` event).
        """
        if self.output_from is None and not self.intermediate_from:
            return "output"
        if executor_id in (self.output_from or ()):
            return "output"
        if executor_id in self.intermediate_from:
            return "intermediate"
        return None


@dataclass(frozen=True, slots=True)
class RoutedMessage:
    """Message(s) routed to a target, waiting for the next superstep.

    A sent message has one entry and, if it goes into a fan-in group's
    buffer, ``fan_in`` set. A released fan-in group is one routed message holding
    every buffered message, in source order.
    """

    target_id: str
    messages: tuple[Envelope, ...]
    source_ids: tuple[str | None, ...] = ()
    fan_in: str | None = None

    @staticmethod
    def one(target_id: str, message: Envelope, source_id: str | None, fan_in: str | None = None) -> RoutedMessage:
        return RoutedMessage(target_id, (message,), (source_id,), fan_in)


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """An outstanding ``ctx.request_info`` call."""

    request_id: str
    executor_id: str
    data: Envelope
    response_type: str
    response_schema: dict[str, Any]
    superstep: int
    timeout: float | None = None
    """Seconds the request may stay unanswered, or ``None`` for ever."""
    on_timeout: Literal["respond", "fail"] = "respond"
    created_at: float | None = None
    """When the request was committed (epoch seconds, the host's clock)."""
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class Output:
    executor_id: str
    value: Envelope


@dataclass(frozen=True, slots=True)
class StepTask:
    """One handler invocation of a superstep.

    Attributes:
        superstep: The superstep it runs in.
        index: Its position in the superstep; fixes commit order.
        executor_id: The executor to invoke.
        kind: ``"message"`` (one message), ``"fan_in"`` (a list, one per
            buffered message) or ``"response"`` (a response to a request).
        messages: The message(s); for ``response`` the response itself.
        source_ids: Who sent each message (``None`` for outside input).
        request: The answered request, for ``response`` tasks.
    """

    superstep: int
    index: int
    executor_id: str
    kind: Literal["message", "fan_in", "response"]
    messages: tuple[Envelope, ...]
    source_ids: tuple[str | None, ...] = ()
    request: PendingRequest | None = None

    @property
    def step_key(self) -> str:
        """Part of the idempotency key: unique within a run, stable on replay."""
        return f"{self.superstep}.{self.index}.{self.executor_id}"


@dataclass(frozen=True, slots=True)
class StateWrite:
    """One ``set_state`` (``value``) or ``delete`` (``value is None``)."""

    key: str
    value: Envelope | None


@dataclass(slots=True)
class StepResult:
    """What one step produced; nothing of it is visible until the commit.

    Attributes:
        emitted: What the step did, in the order it did it: ``"s<n>"`` for a
            ``send_message`` that made the next ``n`` routed messages of ``sent``
            (``"s0"``: it went nowhere, its message is the next of
            ``unrouted``), ``"o"`` for the next output, ``"e"`` for the next
            event, ``"r"`` for the next request. Empty: the default order
            (each routed message its own send, then outputs, events, requests), which
            is also how results recorded before this existed read.
        unrouted: Messages a ``send_message`` routed nowhere (every edge
            condition false); shown in the step's ``executor_completed`` event.
        worker: Which worker ran the step (placement), where the host knows.
    """

    writes: list[StateWrite] = field(default_factory=list)
    sent: list[RoutedMessage] = field(default_factory=list)
    outputs: list[Envelope] = field(default_factory=list)
    requests: list[PendingRequest] = field(default_factory=list)
    events: list[Envelope] = field(default_factory=list)
    emitted: list[str] = field(default_factory=list)
    unrouted: list[Envelope] = field(default_factory=list)
    worker: str | None = None
    """Which worker ran the step, where the host knows (on Temporal: the worker's identity, by default
    ``<pid>@<host>``); its ``executor_completed`` event says so. Nothing of the run's semantics reads it."""

    def production_order(self) -> list[str]:
        """:attr:`emitted`, or the default order when the step did not record one."""
        if self.emitted:
            return self.emitted
        return [
            *(["s1"] * len(self.sent)),
            *(["o"] * len(self.outputs)),
            *(["e"] * len(self.events)),
            *(["r"] * len(self.requests)),
        ]


@dataclass(frozen=True, slots=True)
class Reduction:
    """A callable reducer the host must run: ``reducer(committed, writes)``."""

    key: str
    committed: Envelope | None
    writes: tuple[Envelope, ...]


@dataclass(slots=True)
class CommitPlan:
    """The merged outcome of a superstep, before it is applied."""

    superstep: int
    state_updates: dict[str, Envelope | None]
    reductions: list[Reduction]
    sent: list[RoutedMessage]
    outputs: list[Output]
    requests: list[PendingRequest]
    keys_written: list[str]


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything needed to continue a run exactly: the checkpoint body."""

    superstep: int
    iterations: int
    state: dict[str, Envelope]
    pending: tuple[RoutedMessage, ...]
    fan_in_buffers: dict[str, dict[str, tuple[Envelope, ...]]]
    pending_requests: dict[str, PendingRequest]
    responses: tuple[tuple[str, Envelope], ...]
    outputs: tuple[Output, ...]
    outputs_released: int = 0
    """Earlier outputs the run no longer holds (:meth:`Engine.release_outputs`)."""


_NAMED = 80
"""Characters of a name from a snapshot an error quotes (a forged one may hold anything)."""
_PROBLEMS_LISTED = 5


def _q(text: object) -> str:
    s = str(text)
    return repr(s) if len(s) <= _NAMED else f"{s[:_NAMED]!r}… ({len(s):,} characters)"


def _listed(names: Any) -> str:
    names = sorted(str(n) for n in names)
    if not names:
        return "none"
    shown = ", ".join(_q(n) for n in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def check_snapshot(topology: Topology, snap: EngineSnapshot) -> None:
    """Refuse a snapshot the engine could not run: every reference in it must point at something that exists.

    A snapshot comes from outside the engine (a checkpoint store, a Temporal
    run's input): a response to a request that is not pending, a message for
    an executor the graph does not have, or a fan-in group it does not know
    would otherwise fail later, mid-superstep, with an error naming nothing
    (on Temporal: a workflow task failing for ever).

    Raises:
        WorkflowError: naming each inconsistency (the first few).
    """
    problems: list[str] = []
    executors = set(topology.executor_ids)
    groups = topology.fan_in_groups
    if snap.superstep < 0:
        problems.append(f"its superstep is {snap.superstep}, not 0 or more")
    if snap.iterations < 0:
        problems.append(f"its iteration count is {snap.iterations}, not 0 or more")
    for i, d in enumerate(snap.pending):
        where = f"message {i} (for {_q(d.target_id)})"
        if d.target_id not in executors:
            problems.append(f"{where} goes to an executor graph {topology.name!r} does not have")
        if not d.messages:
            problems.append(f"{where} holds no message")
        if d.fan_in is not None:
            group = groups.get(d.fan_in)
            if group is None:
                problems.append(f"{where} is the release of fan-in group {_q(d.fan_in)}, which the graph does not have")
            elif group.target != d.target_id:
                problems.append(
                    f"{where} is the release of fan-in group {_q(d.fan_in)}, whose target is {_q(group.target)}"
                )
    for gid, buffered in snap.fan_in_buffers.items():
        group = groups.get(gid)
        if group is None:
            problems.append(f"fan-in buffer {_q(gid)} is of a fan-in group the graph does not have")
            continue
        strangers = [s for s in buffered if s not in group.sources]
        if strangers:
            problems.append(
                f"fan-in buffer {_q(gid)} holds messages from {_listed(strangers)}, not sources of the group "
                f"({_listed(group.sources)})"
            )
    for rid, req in snap.pending_requests.items():
        if req.request_id != rid:
            problems.append(f"the pending request stored as {_q(rid)} has the id {_q(req.request_id)}")
        if req.executor_id not in executors:
            problems.append(
                f"pending request {_q(rid)} is from executor {_q(req.executor_id)}, which the graph does not have"
            )
    answered: set[str] = set()
    for rid, _ in snap.responses:
        if rid not in snap.pending_requests:
            known = _listed(snap.pending_requests)
            problems.append(f"a response answers request {_q(rid)}, which is not among its requests ({known})")
        elif rid in answered:
            problems.append(f"request {_q(rid)} is answered twice")
        answered.add(rid)
    if problems:
        more = f"; and {len(problems) - _PROBLEMS_LISTED} more" if len(problems) > _PROBLEMS_LISTED else ""
        raise WorkflowError(
            f"the snapshot is inconsistent with graph {topology.name!r}: {'; '.join(problems[:_PROBLEMS_LISTED])}{more}"
        )


def apply_builtin_reducer(kind: str, key: str, committed: Envelope | None, writes: list[Envelope]) -> Envelope:
    """Combine writes with a built-in reducer, in the order given.

    Operates on JSON envelopes only, so it can run inside a Temporal workflow.
    """
    if kind == "sum":
        total: Any = 0 if committed is None else committed.data
        for w in writes:
            total = total + w.data
        if isinstance(total, float) and not math.isfinite(total):
            raise WorkflowError(f"'sum' reducer on state key {key!r} produced {total!r}")
        return Envelope(None, total)
    if kind == "merge":
        merged: dict[str, Any] = dict(committed.data) if committed is not None else {}
        typ = committed.type if committed is not None else None
        for w in writes:
            merged.update(w.data)
            typ = typ or w.type
        return Envelope(typ, merged)
    if kind == "append":
        items: list[Any] = list(committed.data) if committed is not None else []
        typ = committed.type if committed is not None and committed.data else None
        for w in writes:
            if w.data and typ is not None and w.type is not None and w.type != typ:
                raise WorkflowError(
                    f"'append' reducer on state key {key!r}: cannot append items of type "
                    f"{w.type!r} to a list of {typ!r}"
                )
            if w.data and typ is None and items and w.type is not None:
                raise WorkflowError(
                    f"'append' reducer on state key {key!r}: cannot mix plain JSON items with {w.type!r}"
                )
            typ = typ or (w.type if w.data else None)
            items.extend(w.data)
        return Envelope(typ, items)
    raise WorkflowError(f"unknown reducer {kind!r} for state key {key!r}")


class Engine:
    """The mutable run state of one graph, advanced one superstep at a time."""

    def __init__(self, topology: Topology, snapshot: EngineSnapshot | None = None) -> None:
        self.topology = topology
        self.superstep = 0
        self.iterations = 0
        self.state: dict[str, Envelope] = {}
        self.pending: list[RoutedMessage] = []
        self.fan_in_buffers: dict[str, dict[str, list[Envelope]]] = {}
        self.pending_requests: dict[str, PendingRequest] = {}
        self.responses: list[tuple[str, Envelope]] = []
        self.outputs: list[Output] = []
        self.outputs_released = 0
        """How many of the run's oldest outputs it has released (:meth:`release_outputs`)."""
        self._running: list[StepTask] | None = None
        # Requests answered but not yet delivered (their response task still to run).
        self._answered: dict[str, PendingRequest] = {}
        if snapshot is not None:
            self.restore(snapshot)

    # -- inputs -------------------------------------------------------------

    def start(self, message: Envelope) -> None:
        """Queue the start message (or a message sent into a running run)."""
        self.send(self.topology.start_executor_id, message)

    def _check_between_supersteps(self, what: str) -> None:
        # Input queued mid-superstep would be overwritten by the commit: hosts
        # hold outside input until the boundary, and this keeps them honest.
        if self._running is not None:
            raise WorkflowError(f"cannot {what} while superstep {self.superstep + 1} is running; wait for the boundary")

    def send(self, executor_id: str, message: Envelope) -> None:
        """Queue a message from outside for ``executor_id`` in the next superstep."""
        self._check_between_supersteps("send a message")
        if executor_id not in self.topology.executor_ids:
            raise UndeliverableMessageError.no_executor(executor_id, self.topology.name, self.topology.executor_ids)
        if not self.has_work():
            self.iterations = 0
        self.pending.append(RoutedMessage.one(executor_id, message, None))

    def respond(self, request_id: str, response: Envelope) -> PendingRequest:
        """Accept a (host-validated) response; it is delivered in the next superstep."""
        self._check_between_supersteps("accept a response")
        request = self.pending_requests.get(request_id)
        if request is None:
            raise UnknownRequestError(request_id, list(self.pending_requests))
        if not self.has_work():
            self.iterations = 0
        del self.pending_requests[request_id]
        self.responses.append((request_id, response))
        self._answered[request_id] = request
        return request

    def next_deadline(self) -> float | None:
        """The earliest deadline of a pending request (epoch seconds), if any has one."""
        deadlines = [r.deadline for r in self.pending_requests.values() if r.deadline is not None]
        return min(deadlines) if deadlines else None

    def expire_due(self, now: float) -> list[PendingRequest]:
        """Time out every pending request whose deadline has passed, oldest deadline first.

        A ``respond`` request's handler gets a ``RequestTimedOut`` response in
        the next superstep; a ``fail`` request fails the run.

        Raises:
            RequestTimeoutError: A due request was made with ``on_timeout="fail"``.
        """
        due = sorted(
            (r for r in self.pending_requests.values() if r.deadline is not None and r.deadline <= now),
            key=lambda r: (r.deadline, r.request_id),
        )
        for req in due:
            if req.on_timeout == "fail":
                raise RequestTimeoutError(req.request_id, req.executor_id, req.timeout or 0.0, self.superstep + 1)
        for req in due:
            deadline = datetime.fromtimestamp(req.deadline or 0.0, UTC).isoformat()
            data = {"request_id": req.request_id, "timeout": req.timeout, "deadline": deadline}
            self.respond(req.request_id, Envelope(REQUEST_TIMED_OUT_TYPE, data))
        return due

    # -- the superstep ------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self.pending or self.responses)

    def begin_superstep(self) -> list[StepTask]:
        """Turn queued routed messages and responses into this superstep's tasks.

        Raises:
            SuperstepLimitError: ``max_iterations`` supersteps already ran in
                this activation.
        """
        if self._running is not None:
            raise WorkflowError("a superstep is already running; commit or abort it first")
        if self.iterations >= self.topology.max_iterations:
            raise SuperstepLimitError(
                self.topology.max_iterations,
                self.superstep + 1,
                [d.target_id for d in self.pending] + [self._request_for(rid).executor_id for rid, _ in self.responses],
            )
        step = self.superstep + 1
        tasks: list[StepTask] = []
        for d in self.pending:
            kind: Literal["message", "fan_in"] = "fan_in" if d.fan_in is not None else "message"
            tasks.append(StepTask(step, len(tasks), d.target_id, kind, d.messages, d.source_ids))
        for rid, resp in self.responses:
            req = self._request_for(rid)
            tasks.append(StepTask(step, len(tasks), req.executor_id, "response", (resp,), (None,), req))
        self._running = tasks
        return tasks

    def _request_for(self, request_id: str) -> PendingRequest:
        return self._answered[request_id]

    def abort_superstep(self) -> None:
        """Drop the running superstep: nothing it did is committed (a step failed)."""
        self._running = None

    def prepare_commit(self, results: list[StepResult]) -> CommitPlan:
        """Merge the superstep's results in task order.

        Raises:
            StateConflictError: two steps wrote one key without a reducer.
        """
        tasks = self._running
        if tasks is None:
            raise WorkflowError("no superstep is running")
        if len(results) != len(tasks):
            raise WorkflowError(f"expected {len(tasks)} step results, got {len(results)}")
        reducers = self.topology.reducers
        writers: dict[str, str] = {}
        writes_by_key: dict[str, list[StateWrite]] = {}
        sent: list[RoutedMessage] = []
        outputs: list[Output] = []
        requests: list[PendingRequest] = []
        for task, result in zip(tasks, results, strict=True):
            # (Each part is looked at only when the step made some: most steps make one or two kinds.)
            if result.writes:
                own: dict[str, list[StateWrite]] = {}
                for w in result.writes:
                    own.setdefault(w.key, []).append(w)
                for key, ws in own.items():
                    if key in writers and key not in reducers:
                        raise self._conflict(key, (writers[key], task.executor_id), task.superstep)
                    writers.setdefault(key, task.executor_id)
                    if key in reducers:
                        writes_by_key.setdefault(key, []).extend(ws)
                    else:
                        writes_by_key[key] = ws[-1:]  # a step's own later write wins over its earlier ones
            if result.sent:
                sent.extend(result.sent)
            if result.outputs and self.topology.output_kind(task.executor_id) == "output":
                outputs.extend(Output(task.executor_id, o) for o in result.outputs)
            if result.requests:
                requests.extend(result.requests)
        updates: dict[str, Envelope | None] = {}
        reductions: list[Reduction] = []
        for key, ws in writes_by_key.items():
            kind = reducers.get(key)
            if kind is None:
                updates[key] = ws[-1].value
                continue
            # A delete resets a reduced key; later writes reduce onto nothing.
            base = self.state.get(key)
            vals: list[Envelope] = []
            for w in ws:
                if w.value is None:
                    base, vals = None, []
                else:
                    vals.append(w.value)
            if not vals:
                updates[key] = None
            elif kind == "callable":
                reductions.append(Reduction(key, base, tuple(vals)))
            else:
                updates[key] = apply_builtin_reducer(kind, key, base, vals)
        return CommitPlan(
            tasks[0].superstep if tasks else self.superstep + 1,
            updates,
            reductions,
            sent,
            outputs,
            requests,
            list(writes_by_key),
        )

    def _conflict(self, key: str, executor_ids: tuple[str, str], superstep: int) -> StateConflictError:
        eid = hook_key_executor(key, self.topology.executor_ids)
        if eid is None:
            return StateConflictError(key, executor_ids, superstep)
        return StateConflictError(
            key,
            executor_ids,
            superstep,
            message=(
                f"executor {eid!r} ran several steps in superstep {superstep} and more than one changed its "
                "checkpoint state (what on_checkpoint_save returns): each step starts from the state committed "
                "at the last superstep boundary, so one would silently overwrite the other; keep such state in "
                "ctx.set_executor_state with a reducer, or send the executor one message per superstep"
            ),
        )

    def apply_commit(
        self, plan: CommitPlan, reduced: dict[str, Envelope] | None = None, *, now: float | None = None
    ) -> None:
        """Make the superstep's effects visible and queue the next superstep.

        Args:
            plan: From :meth:`prepare_commit`.
            reduced: The host's results of ``plan.reductions``.
            now: The host's clock (epoch seconds): stamps new requests with
                their creation time and deadline. The engine reads no clock.
        """
        if self._running is None:
            raise WorkflowError("no superstep is running")
        reduced = reduced or {}
        if plan.reductions:
            missing = [r.key for r in plan.reductions if r.key not in reduced]
            if missing:
                raise WorkflowError(f"callable reducers were not run for state keys {missing}")
        if plan.state_updates or reduced:
            # A new dict: the state a superstep's steps read, and a snapshot taken before, stay as they were.
            state = dict(self.state)
            for key, value in (*plan.state_updates.items(), *reduced.items()):
                if value is None:
                    state.pop(key, None)
                else:
                    state[key] = value
            self.state = state
        if plan.outputs:
            self.outputs.extend(plan.outputs)
        if self._answered:  # only a superstep that delivered responses answered requests
            answered_now = {req.request_id for req in (t.request for t in self._running) if req is not None}
            for rid in answered_now:
                self._answered.pop(rid, None)
        for req in plan.requests:
            if now is not None:
                deadline = now + req.timeout if req.timeout is not None else None
                req = replace(req, created_at=now, deadline=deadline)
            self.pending_requests[req.request_id] = req
        self.responses = []
        # Queue direct routed messages; buffer fan-in messages and release full groups.
        pending: list[RoutedMessage] = []
        touched: list[str] = []
        for d in plan.sent:
            if d.fan_in is None:
                pending.append(d)
                continue
            buf = self.fan_in_buffers.setdefault(d.fan_in, {})
            buf.setdefault(d.source_ids[0] or "", []).extend(d.messages)
            if d.fan_in not in touched:
                touched.append(d.fan_in)
        for gid in touched:
            group = self.topology.fan_in_groups[gid]
            buf = self.fan_in_buffers[gid]
            if all(buf.get(s) for s in group.sources):
                msgs: list[Envelope] = []
                sources: list[str | None] = []
                for src in group.sources:
                    msgs.extend(buf[src])
                    sources.extend([src] * len(buf[src]))
                del self.fan_in_buffers[gid]
                pending.append(RoutedMessage(group.target, tuple(msgs), tuple(sources), gid))
        self.pending = pending
        self.superstep = plan.superstep
        self.iterations += 1
        self._running = None

    # -- status and snapshots -----------------------------------------------

    def interrupt(self, *, superstep_used: bool = True) -> None:
        """Interrupt the current turn at a boundary: drop its work not yet done; keep what it committed.

        The superstep that was running, if one was (``superstep_used``; its
        host aborted it), keeps its number (the next one takes the number
        after it: step ids stay unique on Temporal), the messages queued for later supersteps and the fan-in
        buffers are dropped; committed state, pending requests, answers not
        yet delivered and outputs stay.
        """
        self._running = None
        self.superstep += superstep_used
        self.pending = []
        self.fan_in_buffers = {}
        self.iterations = 0

    def roll_back(self, snap: EngineSnapshot, *, superstep_used: bool = True) -> None:
        """Interrupt, and go back to ``snap`` (the boundary before the turn's input), superstep numbers onward.

        The snapshot is one this engine took itself (never outside input), so
        it is not checked again.
        """
        superstep = self.superstep + superstep_used
        self._running = None
        self.state = dict(snap.state)
        self.pending = list(snap.pending)
        self.fan_in_buffers = {g: {s: list(m) for s, m in b.items()} for g, b in snap.fan_in_buffers.items()}
        answered_ids = {rid for rid, _ in snap.responses}
        self.pending_requests = {k: v for k, v in snap.pending_requests.items() if k not in answered_ids}
        self._answered = {k: v for k, v in snap.pending_requests.items() if k in answered_ids}
        self.responses = list(snap.responses)
        self.outputs = list(snap.outputs)
        self.outputs_released = snap.outputs_released
        self.superstep = superstep
        self.iterations = 0

    def run_state(self) -> WorkflowRunState:
        if self.has_work():
            return (
                WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS if self.pending_requests else WorkflowRunState.IN_PROGRESS
            )
        return WorkflowRunState.IDLE_WITH_PENDING_REQUESTS if self.pending_requests else WorkflowRunState.IDLE

    def snapshot(self) -> EngineSnapshot:
        """The state at the current boundary. Cheap: envelopes are shared, never copied."""
        # Every field, in declaration order, straight into the frozen dataclass (what its ``__init__`` stores,
        # without a frozen ``__setattr__`` per field): in process a checkpoint, so a snapshot, per superstep.
        snap: EngineSnapshot = _new(EngineSnapshot)
        _set_attr(snap, "__dict__", self.snapshot_fields(tuple))
        return snap

    def snapshot_fields(self, sequence: Callable[[Iterable[Any]], Sequence[Any]] = tuple) -> dict[str, Any]:
        """:meth:`snapshot`'s fields by name, in declaration order, each sequence copied with ``sequence``.

        A checkpoint holds lists where the snapshot holds tuples: ``checkpoint_of`` takes the fields as
        lists (``sequence=list``), with no snapshot made and copied again in between.

        Raises:
            WorkflowError: a superstep is running.
        """
        if self._running is not None:
            raise WorkflowError("cannot snapshot in the middle of a superstep")
        answered = self._answered
        responses = sequence(self.responses)
        # Answered-but-undelivered requests travel with the responses.
        reqs = dict(self.pending_requests)
        for rid, _ in responses:
            reqs.setdefault(rid, replace(answered[rid]))
        return {
            "superstep": self.superstep,
            "iterations": self.iterations,
            "state": dict(self.state),
            "pending": sequence(self.pending),
            "fan_in_buffers": {g: {s: sequence(m) for s, m in b.items()} for g, b in self.fan_in_buffers.items()}
            if self.fan_in_buffers
            else {},
            "pending_requests": reqs,
            "responses": responses,
            "outputs": sequence(self.outputs),
            "outputs_released": self.outputs_released,
        }

    def release_outputs(self, count: int) -> None:
        """Stop holding the run's ``count`` oldest outputs (each was an ``output`` event when committed).

        A run holds its outputs so that its result can carry them; on Temporal
        that result, and the snapshot a long run continues as new with, is one
        payload. Past that, the oldest are released rather than fail the run;
        :attr:`outputs_released` counts them.
        """
        count = max(0, min(count, len(self.outputs)))
        del self.outputs[:count]
        self.outputs_released += count

    def restore(self, snap: EngineSnapshot) -> None:
        """Continue from ``snap`` (a checkpoint, or a Temporal run's input).

        Raises:
            WorkflowError: the snapshot is inconsistent with the graph (see :func:`check_snapshot`);
                the engine is left as it was.
        """
        check_snapshot(self.topology, snap)
        self.superstep = snap.superstep
        self.iterations = snap.iterations
        self.state = dict(snap.state)
        self.pending = list(snap.pending)
        self.fan_in_buffers = {g: {s: list(m) for s, m in b.items()} for g, b in snap.fan_in_buffers.items()}
        answered_ids = {rid for rid, _ in snap.responses}
        self.pending_requests = {k: v for k, v in snap.pending_requests.items() if k not in answered_ids}
        self._answered = {k: v for k, v in snap.pending_requests.items() if k in answered_ids}
        self.responses = list(snap.responses)
        self.outputs = list(snap.outputs)
        self.outputs_released = snap.outputs_released
        self._running = None
