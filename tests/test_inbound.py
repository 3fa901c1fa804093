"""What reaching the engine means for outside input (``_engine/inbound``), the rule every host applies.

A response answers its pending request (or is told why it cannot: answered
already, or no such request); a message is queued for its executor.
Checkpoint and reset requests wait in a host's ``BoundaryAsks`` and the driver
serves them at fixed points of a boundary: a reset first, then input, expiry,
the checkpoints asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Container
from dataclasses import replace
from typing import Any, Never

import pytest

from temporal_workflows import InMemoryCheckpointStorage, WorkflowBuilder, WorkflowCheckpoint, WorkflowContext, executor
from temporal_workflows._engine.driver import DriverHost, SuperstepDriver
from temporal_workflows._engine.inbound import (
    Applied,
    BoundaryAsks,
    CheckpointAsk,
    Inbound,
    Unanswerable,
    apply,
    open_request,
)
from temporal_workflows._engine.machine import REQUEST_TIMED_OUT_TYPE, Engine, PendingRequest, StepResult, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import CheckpointStorageError, UnknownRequestError

T0 = 1_700_000_000.0


def _engine(*request_ids: str) -> Engine:
    """An engine idle at a boundary, its first superstep having asked ``request_ids`` (of executor ``a``)."""
    topology = Topology(
        name="t",
        start_executor_id="a",
        executor_ids=("a", "b"),
        fan_in_groups={},
        reducers={},
        max_iterations=100,
        signature_hash="sig",
    )
    engine = Engine(topology)
    engine.start(Envelope(None, "go"))
    engine.begin_superstep()
    requests = [PendingRequest(rid, "a", Envelope(None, {"q": rid}), "str", {}, 1) for rid in request_ids]
    engine.apply_commit(engine.prepare_commit([StepResult(requests=requests)]), now=T0)
    return engine


def _next_tasks(engine: Engine) -> list[tuple[str, str, Any]]:
    return [(t.kind, t.executor_id, t.messages[0].data) for t in engine.begin_superstep()]


def test_a_checked_response_answers_its_request_in_the_next_superstep() -> None:
    engine = _engine("r1", "r2")
    request = open_request(engine, "r1")
    assert isinstance(request, PendingRequest) and request.executor_id == "a"
    applied = apply(engine, Inbound("respond", "r1", Envelope(None, "yes"), checked=True))
    assert applied == Applied(answered=("r1",))
    assert set(engine.pending_requests) == {"r2"}
    assert _next_tasks(engine) == [("response", "a", "yes")]


def test_a_response_to_no_pending_request_says_why_and_lists_the_open_ones() -> None:
    engine = _engine("r2", "r1")
    assert open_request(engine, "nope") == Unanswerable("nope", answered=False, pending=("r1", "r2"))
    apply(engine, Inbound("respond", "r1", Envelope(None, "yes"), checked=True))
    # Remembered as delivered by the host: "already answered", not "unknown".
    assert open_request(engine, "r1", delivered={"r1"}) == Unanswerable("r1", answered=True)
    assert open_request(engine, "r1") == Unanswerable("r1", answered=False, pending=("r2",))
    # An answer accepted (not yet applied) wins over a later one, though the request is still pending.
    assert open_request(engine, "r2", answered={"r2"}) == Unanswerable("r2", answered=True)
    with pytest.raises(UnknownRequestError, match="no pending request with id 'r1'"):
        apply(engine, Inbound("respond", "r1", Envelope(None, "again"), checked=True))


def test_a_checked_message_is_queued_for_its_executor() -> None:
    engine = _engine()
    assert apply(engine, Inbound("send", "b", Envelope(None, "hi"), checked=True)) == Applied()
    assert _next_tasks(engine) == [("message", "b", "hi")]


def test_unchecked_input_never_reaches_the_engine() -> None:
    engine = _engine("r1")
    with pytest.raises(ValueError, match="only once checked"):
        apply(engine, Inbound("respond", "r1", Envelope(None, "yes")))
    with pytest.raises(ValueError, match="only once checked"):
        apply(engine, Inbound("send", "b", Envelope(None, 1)))
    assert set(engine.pending_requests) == {"r1"} and not engine.has_work()


# -- checkpoint and reset requests: queued by the host, served by the driver at fixed points ------------


class _Stop(Exception):
    """Ends a test's driver loop where its boundary would run a superstep (or carry out a reset)."""


class _Host(DriverHost):
    """A host whose boundary is recorded: the reset it carries out, the input it hands over, what it saves."""

    def __init__(self, clock: float, *, failing: Container[str | None] = ()) -> None:
        self.boundary_asks: BoundaryAsks[str] = BoundaryAsks()
        self.clock = clock
        self.failing = failing
        self.log: list[tuple[Any, ...]] = []
        self.warnings: list[str] = []
        self.queued: list[Inbound] = []

    def now(self) -> float:
        return self.clock

    async def carry_out_reset(self, engine: Engine) -> None:
        self.log.append(("reset", self.boundary_asks.reset, [i.key for i in self.queued]))
        raise _Stop  # on Temporal: the run continues as new; nothing queued with the reset is taken here

    async def take_input(self, engine: Engine) -> None:
        for item in self.queued:
            apply(engine, item)
        self.log.append(("input", [i.key for i in self.queued]))
        self.queued.clear()

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    async def before_superstep(self, engine: Engine) -> None:
        raise _Stop

    async def save_checkpoint(self, engine: Engine, trigger: str, label: str | None = None) -> str | None:
        if label in self.failing:
            raise CheckpointStorageError("disk full")
        snap = engine.snapshot()
        answers = sorted((rid, env.type) for rid, env in snap.responses)
        self.log.append(("save", trigger, label, answers, [m.target_id for m in snap.pending]))
        return f"cp-{label}"


async def _boundary(engine: Engine, host: _Host) -> None:
    driver = SuperstepDriver(engine, host, checkpoint_every=0, payload_limit=lambda: 1 << 20)
    with contextlib.suppress(_Stop):  # (or the run, with no work, finishes)
        async for _ in driver.run():
            pass


async def test_a_checkpoint_asked_for_holds_what_its_boundary_took_input_and_expiry_alike() -> None:
    engine = _engine("r1", "late")
    late = engine.pending_requests["late"]
    engine.pending_requests["late"] = replace(
        late, deadline=T0 + 5
    )  # due at this boundary: times out before the checkpoint
    host = _Host(T0 + 10)
    host.queued += [
        Inbound("respond", "r1", Envelope(None, "yes"), checked=True),
        Inbound("send", "b", Envelope(None, "hi"), checked=True),
    ]
    first, second = CheckpointAsk("first"), CheckpointAsk("second", warn=True)
    host.boundary_asks.checkpoints += [first, second]
    assert host.boundary_asks and not host.boundary_asks.resetting
    await _boundary(engine, host)
    # Input first, then expiry, then the checkpoints asked for, oldest first: both hold the answer, the
    # timeout and the message.
    held = [("late", REQUEST_TIMED_OUT_TYPE), ("r1", None)], ["b"]
    assert host.log == [
        ("input", ["r1", "b"]),
        ("save", "requested", "first", *held),
        ("save", "requested", "second", *held),
    ]
    assert (first.done, first.checkpoint_id, first.superstep, first.failure) == (True, "cp-first", 1, None)
    assert (second.done, second.checkpoint_id) == (True, "cp-second")
    assert not host.boundary_asks.checkpoints and not host.warnings


async def test_a_checkpoint_that_cannot_be_saved_is_its_askers_error_and_a_warning_only_when_nobody_waits() -> None:
    host = _Host(T0, failing={"update", "signal"})
    asks = [CheckpointAsk("update"), CheckpointAsk("signal", warn=True), CheckpointAsk("fine")]
    host.boundary_asks.checkpoints += asks
    await _boundary(_engine("r1"), host)
    text = "checkpoint after superstep 1 was not saved: disk full"
    assert [(a.done, a.error, a.checkpoint_id) for a in asks] == [
        (True, text, None),
        (True, text, None),
        (True, None, "cp-fine"),  # one failure does not keep the next asker waiting
    ]
    assert isinstance(asks[0].failure, CheckpointStorageError) and str(asks[0].failure) == "disk full"
    assert host.warnings == [text]


async def test_a_reset_is_carried_out_first_at_its_boundary_before_queued_input_or_checkpoints() -> None:
    engine = _engine("r1")
    host = _Host(T0)
    host.queued.append(Inbound("respond", "r1", Envelope(None, "yes"), checked=True))
    host.boundary_asks.checkpoints.append(CheckpointAsk("asked"))
    host.boundary_asks.reset = "to cp-1"
    assert host.boundary_asks.resetting
    await _boundary(engine, host)
    assert host.log == [("reset", "to cp-1", ["r1"])]
    assert set(engine.pending_requests) == {"r1"} and not engine.has_work()  # nothing of the old run's queue taken


async def test_an_idle_in_process_workflow_takes_a_checkpoint_asked_for_as_the_driver_does() -> None:
    stored: list[WorkflowCheckpoint] = []

    class _Full(InMemoryCheckpointStorage):
        async def save(self, checkpoint: WorkflowCheckpoint) -> str:
            stored.append(checkpoint)
            raise OSError("no space left")

    @executor(id="echo")
    async def echo(msg: str, ctx: WorkflowContext[Never, str]) -> None:
        await ctx.yield_output(msg)

    workflow = WorkflowBuilder(start_executor=echo).build()
    storage = InMemoryCheckpointStorage()
    cp_id = await workflow.create_checkpoint(storage)
    assert (await storage.load(cp_id)).iteration_count == 0
    # The storage's error reaches the caller as the storage said it (no boundary wording in process).
    with pytest.raises(CheckpointStorageError, match=r"^OSError: no space left$"):
        await workflow.create_checkpoint(_Full())
    assert len(stored) == 1
