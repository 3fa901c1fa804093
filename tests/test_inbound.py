"""What reaching the engine means for outside input (``_engine/inbound``), the rule every host applies.

A response answers its pending request (or is told why it cannot: answered
already, or no such request); a message is queued for its executor; an event
answers the waits its front end's policy matched, then reaches the steps it
routed it to, and says so when nothing took it.
"""

from __future__ import annotations

from typing import Any

import pytest

from temporal_workflows._engine.inbound import Applied, Inbound, Route, Unanswerable, apply, open_request
from temporal_workflows._engine.machine import Engine, PendingRequest, StepResult, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import UnknownRequestError

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


def test_an_event_answers_its_waits_then_reaches_its_targets_in_one_boundary() -> None:
    engine = _engine("w1", "w2")
    event = Inbound("event", "", Envelope(None, {"ev": 1}), checked=True)
    # A wait answered since the policy routed (here: w2 is gone) is skipped, not an error.
    apply(engine, Inbound("respond", "w2", Envelope(None, "other"), checked=True))
    applied = apply(engine, event, Route(answers=("w1", "w2"), targets=("b",)))
    assert applied == Applied(answered=("w1",), unhandled=False)
    assert not engine.pending_requests
    tasks = _next_tasks(engine)
    assert len(tasks) == 3
    assert {repr(t) for t in tasks} == {
        repr(("message", "b", {"ev": 1})),
        repr(("response", "a", "other")),
        repr(("response", "a", {"ev": 1})),
    }


def test_an_event_nothing_takes_is_reported_unhandled_and_changes_nothing() -> None:
    engine = _engine("w1")
    applied = apply(engine, Inbound("event", "", Envelope(None, 1), checked=True), Route())
    assert applied == Applied(answered=(), unhandled=True)
    assert set(engine.pending_requests) == {"w1"} and not engine.has_work()


def test_unchecked_input_or_an_event_without_its_route_never_reaches_the_engine() -> None:
    engine = _engine("r1")
    with pytest.raises(ValueError, match="only once checked"):
        apply(engine, Inbound("respond", "r1", Envelope(None, "yes")))
    with pytest.raises(ValueError, match="only with its route"):
        apply(engine, Inbound("event", "", Envelope(None, 1), checked=True))
    assert set(engine.pending_requests) == {"r1"} and not engine.has_work()
