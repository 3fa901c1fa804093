"""The adversarial tester's findings ("Nothing lost, nothing stuck"), each on a real dev server.

Every test sends exactly the reported input, then variants of the same kind,
and checks three things: the bad input is a warning (signal) or a refused
update, never a failed or stuck run; ``status`` tells the truth all along;
and the run then takes good input and ends with the right result.

Items (numbered as in the report; docs/bad-input.md has a row for each):

2. a ``send`` signal whose ``message_type`` names a registered model the data
   does not validate as, a ``list[...]`` type given a scalar, or a type that is
   not registered (``pydantic:BaseSettings``);
3. outside strings large enough to break the ``status`` query or the run's
   continue-as-new: 1.2 MB request ids, 1.1 MB checkpoint labels;
5. start inputs that used to fail the workflow task for ever: ``None``,
   negative ``checkpoint_every`` / ``max_history_events``, a forged
   ``carried`` snapshot;
7. a clean reset after a reset to a checkpoint starts from the ORIGINAL start
   message;
8. misspelled signal and update names.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from temporal_workflows._engine.limits import DEFAULT_MAX_PAYLOAD_BYTES
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.errors import InvalidRunInputError, RunTooLargeError, UndeliverableMessageError
from temporal_workflows.events import (
    RequestInfoEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowWarningEvent,
)
from temporal_workflows.temporal import RunHandle, send_or_start, start_run
from temporal_workflows.temporal._protocol import (
    FAILURE_INPUT_TOO_LONG,
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    MAX_TYPE_NAME_CHARS,
    UPDATE_SEND,
    Carried,
    CarriedCheckpoints,
    CarriedStatus,
    RunInput,
)
from temporal_workflows.temporal._workflow.continuation import Continuation
from temporal_workflows.temporal._workflow.handlers import SIGNALS, UPDATES
from temporal_workflows.temporal._workflow.status import WARNING_LIMIT
from tests.conftest import TASK_QUEUE
from tests.integration import graphs
from tests.integration.runs import outcome as settled
from tests.integration.runs import terminate_if_running, update_error
from tests.integration.streams import events_until, nth

pytestmark = pytest.mark.usefixtures("worker")

MB = 1_000_000

# -- helpers ---------------------------------------------------------------------------------


async def warning_events(handle: RunHandle, n: int) -> list[WorkflowWarningEvent]:
    """The run's first ``n`` warnings, from its event stream (waits for them)."""
    seen = await events_until(handle, nth(WorkflowWarningEvent, n))
    return [e for e in seen if isinstance(e, WorkflowWarningEvent)]


async def two_questions(client: Client, workflow_id: str) -> tuple[RunHandle, dict[str, str]]:
    """``it_two_questions`` ("tea") waiting for alice's and bob's answers; request ids by asker."""
    handle = await start_run(client, graphs.two_questions, "tea", id=workflow_id, task_queue=TASK_QUEUE)
    return handle, await asked(handle, 2)


async def asked(handle: RunHandle, requests_seen: int) -> dict[str, str]:
    """Once the run's ``requests_seen``-th request was announced: the open request ids by asker."""
    await events_until(handle, nth(RequestInfoEvent, requests_seen))
    pending = await handle.pending_requests()
    assert {p.data.text.split(":")[0] for p in pending} == {"alice", "bob"}
    assert all(p.data.text.endswith("what about tea?") for p in pending)
    return {p.data.asker: p.request_id for p in pending}


async def answer_two_questions(handle: RunHandle, pending: dict[str, str], *, wait: bool = True) -> None:
    await handle.respond(pending["bob"], graphs.Answer(text="no"), wait=wait)
    await handle.respond(pending["alice"], graphs.Answer(text="yes"), wait=wait)
    result = await asyncio.wait_for(handle.result(), 30)
    assert result["outputs"] == [["alice=yes", "bob=no"]]
    assert (await handle.status())["status"] == "completed"


async def conversation(client: Client, workflow_id: str, message: Any = None) -> RunHandle:
    if message is None:
        return await start_run(client, graphs.conversation, id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True)
    return await start_run(client, graphs.conversation, message, id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True)


async def finish_conversation(handle: RunHandle, *lines: str) -> None:
    """Close the conversation; it answered exactly ``lines``, in order."""
    await handle.close()
    result = await asyncio.wait_for(handle.result(), 30)
    assert result["outputs"] == [f"#{n}: {line.upper()}" for n, line in enumerate(lines, 1)]
    assert await handle.state() == {"turns": len(lines)}
    assert (await handle.status())["status"] == "completed"


def assert_bounded(status: dict[str, Any]) -> None:
    """Every warning is short, whatever the input quoted in it."""
    for w in status["warnings"]:
        assert len(w["message"]) <= WARNING_LIMIT
        assert len(w["request_id"] or "") <= 100 and len(w["executor_id"] or "") <= 100


# == 2. a malformed `send` signal never fails the run ========================================

COUNT = "tests.integration.graphs:Count"
"""A registered model (``tick``'s input): the worker knows it, so decoding it is attempted."""

MALFORMED_SENDS = {
    # The reported inputs.
    "registered model, data that does not validate": {"message": {"n": "many"}, "message_type": COUNT},
    "list type, a scalar": {"message": 5, "message_type": f"list[{COUNT}]"},
    "type not registered": {"message": {}, "message_type": "pydantic:BaseSettings"},
    # Variants of the same kind.
    "list type, an object": {"message": {"n": 1}, "message_type": f"list[{COUNT}]"},
    "dict type, a list": {"message": [1, 2], "message_type": f"dict[{COUNT}]"},
    "dict type, a string": {"message": "x", "message_type": f"dict[{COUNT}]"},
    "registered model, not an object": {"message": [1], "message_type": COUNT},
    "registered model, null": {"message": None, "message_type": COUNT},
    "module of a registered type, not a class": {"message": {}, "message_type": "tests.integration.graphs:HOLDS"},
    "a module never imported": {"message": {}, "message_type": "email.mime.text:MIMEText"},
    "a builtin": {"message": {}, "message_type": "builtins:dict"},
    "not a type key": {"message": "x", "message_type": "no colon here"},
    "an empty type key": {"message": "x", "message_type": ""},
    "list of nothing": {"message": [1], "message_type": "list[]"},
}


async def test_malformed_send_signals_are_warnings_and_the_conversation_goes_on(
    client: Client, workflow_id: str
) -> None:
    handle = await conversation(client, workflow_id)
    for body in MALFORMED_SENDS.values():
        await handle.handle.signal("send", {"executor_id": "chat", **body})
    warned = await warning_events(handle, len(MALFORMED_SENDS))
    assert len(warned) == len(MALFORMED_SENDS)
    assert all(w.executor_id == "chat" and "chat" in w.message for w in warned)
    assert "pydantic:BaseSettings" in warned[2].message and "not registered" in warned[2].message
    status = await handle.status()
    # The run is where it was: idle, nothing delivered, nothing failed.
    assert (status["status"], status["superstep"], status["error"], status["outputs"]) == ("idle", 0, None, [])
    assert [w["message"] for w in status["warnings"]] == [w.message for w in warned]
    assert_bounded(status)
    await handle.send("chat", "hello", wait=False)
    await finish_conversation(handle, "hello")


async def test_malformed_send_updates_are_refused_and_change_nothing(client: Client, workflow_id: str) -> None:
    handle = await conversation(client, workflow_id)
    for name, body in MALFORMED_SENDS.items():
        # RunHandle's own update path, with the raw argument another client could send.
        with pytest.raises(UndeliverableMessageError) as refused:
            await handle._update(UPDATE_SEND, {"executor_id": "chat", **body})
        assert "chat" in str(refused.value), name
    status = await handle.status()
    assert (status["status"], status["superstep"], status["warnings"], status["error"]) == ("idle", 0, [], None)
    assert await handle.send("chat", "hello") == {"executor_id": "chat", "accepted": True}
    await finish_conversation(handle, "hello")


async def test_malformed_send_signals_while_a_superstep_runs_are_warnings_and_the_run_completes(
    client: Client, workflow_id: str
) -> None:
    """The same inputs reaching a run that is not idle: they wait for the boundary, then are warned about."""
    hold = graphs.Hold(2)
    graphs.HOLDS[workflow_id] = hold
    handle = await start_run(client, graphs.ticker, graphs.Count(n=1, upto=3), id=workflow_id, task_queue=TASK_QUEUE)
    await asyncio.wait_for(hold.reached.wait(), 30)
    reported = list(MALFORMED_SENDS.values())[:3]
    for body in reported:
        await handle.handle.signal("send", {"executor_id": "tick", **body})
    assert (await handle.status())["status"] == "running"
    hold.release.set()
    result = await asyncio.wait_for(handle.result(), 30)
    assert result["outputs"] == [{"rounds": 3}] and result["superstep"] == 3
    assert await handle.state() == {"total": 6, "count": 3}
    status = await handle.status()
    assert status["status"] == "completed" and status["error"] is None
    assert len(status["warnings"]) == len(reported)
    assert all(w["executor_id"] == "tick" for w in status["warnings"])


async def test_a_send_signal_to_a_run_waiting_for_input_is_a_warning_and_the_answers_still_count(
    client: Client, workflow_id: str
) -> None:
    handle, pending = await two_questions(client, workflow_id)
    for body in list(MALFORMED_SENDS.values())[:3]:
        await handle.handle.signal("send", {"executor_id": "fan", **body})
    await warning_events(handle, 3)
    status = await handle.status()
    assert status["status"] == "waiting_for_input" and status["pending_requests"] == 2
    await answer_two_questions(handle, pending)


# == 3. large outside strings never break `status` nor the continue-as-new ==================

BIG_ID = "r" * (12 * MB // 10)  # 1.2 MB
BIG_LABEL = "l" * (11 * MB // 10)  # 1.1 MB


async def test_two_huge_respond_signals_with_unknown_ids_leave_status_and_reset_working(
    client: Client, workflow_id: str
) -> None:
    handle, pending = await two_questions(client, workflow_id)
    for i in range(2):
        await handle.handle.signal("respond", {"request_id": f"{i}{BIG_ID}", "response": {"text": "x"}})
    warned = await warning_events(handle, 2)
    for i, w in enumerate(warned):
        assert len(w.message) <= WARNING_LIMIT and f"{MAX_ID_CHARS:,}" in w.message
        assert f"'{i}rrrr" in w.message and "1,200,001 characters" in w.message  # quoted by prefix
    status = await handle.status()  # used to be over gRPC's 4 MB ("GRPC Message too large")
    assert status["status"] == "waiting_for_input" and len(status["warnings"]) == 2
    assert_bounded(status)
    # The run still continues as new (a clean reset), and then takes its answers.
    await handle.reset(wait=False)
    pending = await asked(handle, 4)
    status = await handle.status()
    assert (status["status"], status["resets"], status["error"]) == ("waiting_for_input", 1, None)
    assert_bounded(status)
    await answer_two_questions(handle, pending, wait=False)


async def test_huge_responses_to_unknown_request_ids_are_warnings_and_the_run_goes_on(
    client: Client, workflow_id: str
) -> None:
    """A variant: short unknown ids, 1.2 MB responses; nothing of them is kept."""
    handle, _ = await two_questions(client, workflow_id)
    for i in range(2):
        await handle.handle.signal("respond", {"request_id": f"ghost-{i}", "response": {"text": BIG_ID}})
    warned = await warning_events(handle, 2)
    assert ["ghost-0" in warned[0].message, "ghost-1" in warned[1].message] == [True, True]
    status = await handle.status()
    assert len(str(status)) < 10_000
    await handle.reset(wait=False)
    await answer_two_questions(handle, await asked(handle, 4))


async def test_huge_ids_by_update_are_refused_naming_the_limit(client: Client, workflow_id: str) -> None:
    handle, pending = await two_questions(client, workflow_id)
    refused = {
        "submit_response": {"request_id": BIG_ID, "response": {"text": "x"}},
        "send_message": {"executor_id": BIG_ID, "message": "x"},
        "take_checkpoint": {"label": BIG_LABEL},
        "reset_run": {"checkpoint_id": BIG_ID},
    }
    for update, arg in refused.items():
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.handle.execute_update(update, arg)
        err = update_error(info)
        limit = MAX_LABEL_CHARS if update == "take_checkpoint" else MAX_ID_CHARS
        assert err.type == FAILURE_INPUT_TOO_LONG, update
        assert f"{limit:,} characters" in err.message and len(err.message) < 500, update
    # Just over each limit is refused too; at the limit, a label is taken.
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.handle.execute_update("take_checkpoint", {"label": "l" * (MAX_LABEL_CHARS + 1)})
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.handle.execute_update(
            "send_message", {"executor_id": "fan", "message": "x", "message_type": "t" * (MAX_TYPE_NAME_CHARS + 1)}
        )
    taken = await handle.checkpoint("l" * MAX_LABEL_CHARS)
    assert taken is not None and taken["label"] == "l" * MAX_LABEL_CHARS
    status = await handle.status()
    assert (status["warnings"], status["resets"], status["checkpoints"]) == ([], 0, 1)
    await answer_two_questions(handle, pending)


async def test_the_client_refuses_oversized_ids_and_labels_before_sending(client: Client, workflow_id: str) -> None:
    handle, pending = await two_questions(client, workflow_id)
    too_long_id = "i" * (MAX_ID_CHARS + 1)
    for wait in (True, False):
        with pytest.raises(ValueError, match=f"{MAX_ID_CHARS:,} characters"):
            await handle.respond(too_long_id, {"text": "x"}, wait=wait)
        with pytest.raises(ValueError, match=f"{MAX_ID_CHARS:,} characters"):
            await handle.send(too_long_id, "x", wait=wait)
        with pytest.raises(ValueError, match=f"{MAX_LABEL_CHARS:,} characters"):
            await handle.checkpoint("l" * (MAX_LABEL_CHARS + 1), wait=wait)
        with pytest.raises(ValueError, match=f"{MAX_ID_CHARS:,} characters"):
            await handle.reset(checkpoint_id=too_long_id, wait=wait)
    with pytest.raises(ValueError, match=f"{MAX_ID_CHARS:,} characters"):
        await send_or_start(client, graphs.conversation, "x", id=f"{workflow_id}-c", executor_id=too_long_id)
    # Nothing was sent: no warning, nothing taken, no reset.
    status = await handle.status()
    assert (status["warnings"], status["checkpoints"], status["resets"]) == ([], 0, 0)
    await answer_two_questions(handle, pending)


async def test_two_huge_checkpoint_labels_then_a_reset_leave_the_run_working(client: Client, workflow_id: str) -> None:
    handle, pending = await two_questions(client, workflow_id)
    for i in range(2):
        await handle.handle.signal("checkpoint", {"label": f"{i}{BIG_LABEL}"})
    warned = await warning_events(handle, 2)
    for i, w in enumerate(warned):
        assert len(w.message) <= WARNING_LIMIT and f"{MAX_LABEL_CHARS:,} characters" in w.message
        assert f"'{i}llll" in w.message and "1,100,001 characters" in w.message
    # Never stored whole: the checkpoint list holds no such label.
    assert all(len(c["label"] or "") <= MAX_LABEL_CHARS for c in await handle.checkpoints())
    await handle.handle.signal("reset", {})
    pending = await asked(handle, 4)  # continued as new: it used to fail carrying 2.2 MB of labels
    status = await handle.status()
    assert (status["status"], status["resets"], status["error"]) == ("waiting_for_input", 1, None)
    assert_bounded(status)
    await answer_two_questions(handle, pending)


async def test_huge_send_and_reset_signals_are_warnings_quoting_a_prefix(client: Client, workflow_id: str) -> None:
    """Variants: an executor id, a message type, a checkpoint id of a reset, a signal name, all over 1 MB."""
    handle = await conversation(client, workflow_id)
    await handle.handle.signal("send", {"executor_id": BIG_ID, "message": "x"})
    await handle.handle.signal("send", {"executor_id": "chat", "message": "x", "message_type": BIG_ID})
    await handle.handle.signal("reset", {"checkpoint_id": BIG_ID})
    await handle.handle.signal("reset", {"message": "x", "message_type": BIG_ID})
    await handle.handle.signal(BIG_ID[:1000], {})  # the server refuses longer names
    warned = await warning_events(handle, 5)
    assert all(len(w.message) <= WARNING_LIMIT and "rrrr" in w.message for w in warned)
    status = await handle.status()
    assert (status["resets"], status["superstep"], status["status"]) == (0, 0, "idle")
    assert_bounded(status)
    await handle.send("chat", "hello")
    await finish_conversation(handle, "hello")


def test_a_run_too_large_to_continue_names_the_parts_that_are() -> None:
    """What ``RunTooLargeError`` names at continue-as-new is what is large, not only state keys."""
    snapshot = graphs_checkpoint(state={"small": Envelope(None, "s")})
    carried = Carried(
        reason="history",
        snapshot=snapshot,
        checkpoints=CarriedCheckpoints(listed=[{"label": "c" * 900_000}, {"label": "c" * 900_000}]),
        status=CarriedStatus(warnings=[{"message": "w" * 10}]),
        start=Envelope(None, "m" * 400_000),
    )
    arg = RunInput(carried=carried)
    fake = SimpleNamespace(_payload_limit=lambda: DEFAULT_MAX_PAYLOAD_BYTES)
    error = Continuation._too_large_to_continue(fake, arg, 2_300_000, 7)  # type: ignore[arg-type]
    assert isinstance(error, RunTooLargeError) and error.superstep == 7
    message = str(error)
    assert "checkpoint list (1,800," in message and "start message (400,0" in message
    assert message.index("checkpoint list") < message.index("start message")
    assert "2,300,000 bytes" in message and f"{DEFAULT_MAX_PAYLOAD_BYTES:,}" in message


def graphs_checkpoint(**fields: Any) -> Any:
    from datetime import UTC, datetime

    from temporal_workflows import WorkflowCheckpoint

    base: dict[str, Any] = {
        "checkpoint_id": "",
        "workflow_name": "it_chat",
        "run_id": "r",
        "graph_signature_hash": "0" * 64,
        "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        "superstep": 1,
        "state": {},
        "messages": [],
    }
    return WorkflowCheckpoint(**{**base, **fields})


# == 5. malformed start input fails the run at once, naming the field ========================


async def start_failing(client: Client, workflow_id: str, arg: Any, graph: str = "it_chat") -> ApplicationError:
    """Start ``graph`` with ``arg``; the run must fail at once (never a failing workflow task)."""
    handle = await client.start_workflow(graph, arg, id=workflow_id, task_queue=TASK_QUEUE)
    try:
        ev = await settled(handle)
        assert ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, EventType.Name(ev.event_type)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 30)
    finally:
        await terminate_if_running(handle)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidRunInputError", cause
    assert cause.non_retryable
    # RunHandle turns it back into the library's error, and `status` says failed.
    run = RunHandle(handle, client)
    with pytest.raises(InvalidRunInputError):
        await run.result()
    status = await run.status()
    assert status["status"] == "failed" and status["error"] == cause.message
    # Its event stream ends as every failed run's does.
    events = [e async for e in run.events()]
    assert [e.type for e in events[-2:]] == ["failed", "status"]
    failed = events[-2]
    assert isinstance(failed, WorkflowFailedEvent) and failed.error_type == "InvalidRunInputError"
    assert failed.error == cause.message
    return cause


async def test_a_null_start_input_fails_the_run_at_once(client: Client, workflow_id: str) -> None:
    cause = await start_failing(client, workflow_id, None)
    assert "RunInput" in cause.message and '{"message": ...}' in cause.message


@pytest.mark.parametrize(
    ("arg", "field"),
    [
        ({"message": "x", "checkpoint_every": -1}, "checkpoint_every"),
        ({"message": "x", "max_history_events": -5}, "max_history_events"),
        ({"message": "x", "max_history_events": 0}, "max_history_events"),
        ({"message": "x", "checkpoint_every": "-3"}, "checkpoint_every"),
        ({"message": "x", "max_steps_in_flight": 0}, "max_steps_in_flight"),
        ({"message": "x", "max_steps_in_flight": 5000}, "max_steps_in_flight"),
        ({"message": "x", "checkpoint_every": "often"}, "checkpoint_every"),
        ({"message": "x", "keep_alive": {"no": 1}}, "keep_alive"),
        ([{"message": "x"}], "RunInput"),
        ({"message": "x", "fork_from": {"workflow_id": "w", "checkpoint_id": "c" * (MAX_ID_CHARS + 1)}}, "fork_from"),
    ],
    ids=[
        "checkpoint_every -1",
        "max_history_events -5",
        "max_history_events 0",
        "checkpoint_every '-3'",
        "max_steps_in_flight 0",
        "max_steps_in_flight 5000",
        "checkpoint_every 'often'",
        "keep_alive an object",
        "a list",
        "fork_from a huge checkpoint id",
    ],
)
async def test_a_malformed_start_input_fails_the_run_at_once_naming_the_field(
    client: Client, workflow_id: str, arg: Any, field: str
) -> None:
    cause = await start_failing(client, workflow_id, arg)
    assert field in cause.message


def forged(snapshot: dict[str, Any], **carried: Any) -> dict[str, Any]:
    """A start input as a run continuing as new would hand over, with ``snapshot`` fields forged."""
    snap = {
        "checkpoint_id": "",
        "workflow_name": "it_two_questions",
        "run_id": "forged",
        "graph_signature_hash": "0" * 64,
        "timestamp": "2026-01-01T00:00:00Z",
        "superstep": 1,
        "state": {},
        "messages": [],
        **snapshot,
    }
    return {"message": "tea", "carried": {"reason": "history", "snapshot": snap, **carried}}


def request(request_id: str, executor_id: str = "alice") -> dict[str, Any]:
    return {
        "request_id": request_id,
        "executor_id": executor_id,
        "data": {"type": COUNT.replace("Count", "Question"), "data": {"asker": executor_id, "text": "?"}},
        "response_type": "tests.integration.graphs:Answer",
        "response_schema": {},
        "superstep": 1,
    }


ANSWER = {"type": "tests.integration.graphs:Answer", "data": {"text": "yes"}}


@pytest.mark.parametrize(
    ("snapshot", "named"),
    [
        # The reported input: a response to a request that is not pending.
        ({"responses": [["ghost", ANSWER]]}, ["response", "'ghost'"]),
        ({"pending_requests": {"r1": request("r1")}, "responses": [["ghost", ANSWER]]}, ["'ghost'", "'r1'"]),
        # Variants: every reference a snapshot holds points at something that exists.
        ({"pending_requests": {"r1": request("r1")}, "responses": [["r1", ANSWER], ["r1", ANSWER]]}, ["twice", "'r1'"]),
        ({"pending_requests": {"r1": request("r1", "nobody")}}, ["'nobody'", "'r1'"]),
        ({"pending_requests": {"r1": request("r2")}}, ["'r1'", "'r2'"]),
        ({"messages": [{"target_id": "nobody", "messages": [{"type": None, "data": "x"}]}]}, ["'nobody'"]),
        ({"messages": [{"target_id": "alice", "messages": []}]}, ["'alice'", "no message"]),
        (
            {"messages": [{"target_id": "join", "messages": [{"type": None, "data": "x"}], "fan_in": "nope"}]},
            ["'nope'", "fan-in"],
        ),
        ({"fan_in_buffers": {"nope": {"alice": [{"type": None, "data": "x"}]}}}, ["'nope'", "fan-in"]),
        ({"superstep": -1}, ["superstep"]),
    ],
    ids=[
        "response to no request",
        "response to an unknown request",
        "two responses to one request",
        "request from an unknown executor",
        "request under another id",
        "message to an unknown executor",
        "delivery with no message",
        "delivery of an unknown fan-in group",
        "buffer of an unknown fan-in group",
        "negative superstep",
    ],
)
async def test_a_forged_carried_snapshot_fails_the_run_at_once_naming_what_is_inconsistent(
    client: Client, workflow_id: str, snapshot: dict[str, Any], named: list[str]
) -> None:
    cause = await start_failing(client, workflow_id, forged(snapshot), graph="it_two_questions")
    assert "carried.snapshot" in cause.message
    for text in named:
        assert text in cause.message, (text, cause.message)


async def test_a_consistent_carried_snapshot_still_restores(client: Client, workflow_id: str) -> None:
    """The check refuses only what is inconsistent: a well-formed hand-made snapshot runs."""
    snap = forged(
        {"pending_requests": {"r1": request("r1"), "r2": request("r2", "bob")}, "responses": [["r1", ANSWER]]},
        reason="reset",  # a restored run announces its pending requests again
    )
    started = await client.start_workflow("it_two_questions", snap, id=workflow_id, task_queue=TASK_QUEUE)
    handle = RunHandle(started, client)
    try:
        await events_until(handle, nth(RequestInfoEvent, 1))  # r2 is announced again
        assert [p.request_id for p in await handle.pending_requests()] == ["r2"]
        await handle.respond("r2", graphs.Answer(text="no"))
        result = await asyncio.wait_for(handle.result(), 30)
        assert result["outputs"] == [["alice=yes", "bob=no"]]
    finally:
        await terminate_if_running(handle.handle)


async def test_a_reset_to_an_inconsistent_checkpoint_is_refused_and_the_run_goes_on(
    client: Client, workflow_id: str
) -> None:
    """The same check before a reset: a stored checkpoint the run could not start from is refused, not taken."""
    hold = graphs.Hold(2)
    graphs.HOLDS[workflow_id] = hold
    handle = await start_run(
        client,
        graphs.planted_ticker,
        graphs.Count(n=1, upto=3),
        id=workflow_id,
        task_queue=TASK_QUEUE,
        checkpoint_every=1,
    )
    await asyncio.wait_for(hold.reached.wait(), 30)
    good = await graphs.shared_store.load((await handle.checkpoints())[0]["checkpoint_id"])
    bad = good.model_copy(update={"checkpoint_id": f"bad-{workflow_id}", "responses": [("ghost", Envelope(None, 1))]})
    await graphs.shared_store.save(bad)
    with pytest.raises(InvalidRunInputError) as refused:
        await handle.reset(checkpoint_id=bad.checkpoint_id)
    assert bad.checkpoint_id in str(refused.value) and "'ghost'" in str(refused.value)
    await handle.reset(checkpoint_id=bad.checkpoint_id, wait=False)
    (warned,) = await warning_events(handle, 1)
    assert "reset refused" in warned.message and "'ghost'" in warned.message
    hold.release.set()
    assert (await asyncio.wait_for(handle.result(), 30))["outputs"] == [{"rounds": 3}]
    assert await handle.state() == {"total": 6, "count": 3}
    assert (await handle.status())["resets"] == 0


# == 7. a clean reset always starts from the ORIGINAL start message ============================


async def test_a_clean_reset_after_a_reset_to_a_checkpoint_starts_from_the_original_message(
    client: Client, workflow_id: str
) -> None:
    handle, pending = await two_questions(client, workflow_id)
    taken = await handle.checkpoint("asked")
    assert taken is not None
    seen = 2
    for round_ in range(3):  # however many resets came before
        assert (await handle.reset(checkpoint_id=taken["checkpoint_id"]))["superstep"] == 2  # type: ignore[index]
        seen += 2  # the checkpoint's requests are announced again, same ids
        assert await asked(handle, seen) == pending
        await handle.reset()  # clean: from "tea" again, new questions
        seen += 2
        fresh = await asked(handle, seen)
        assert set(fresh.values()).isdisjoint(pending.values())
        status = await handle.status()
        assert (status["resets"], status["superstep"], status["status"]) == (2 * round_ + 2, 2, "waiting_for_input")
    await answer_two_questions(handle, fresh)
    resets = [e for e in [e async for e in handle.events()] if isinstance(e, WorkflowResetEvent)]
    assert [e.checkpoint_id for e in resets] == [taken["checkpoint_id"], None] * 3


async def test_a_clean_reset_by_raw_signals_after_a_reset_to_a_checkpoint_restarts_the_conversation(
    client: Client, workflow_id: str
) -> None:
    """The same with the raw signals (``temporal workflow signal``), on a conversation with outputs."""
    handle = await conversation(client, workflow_id, "hi")
    await events_until(handle, nth(WorkflowOutputEvent, 1))
    taken = await handle.checkpoint("after hi")
    assert taken is not None
    await handle.send("chat", "more")
    await events_until(handle, nth(WorkflowOutputEvent, 2))
    for n in range(2):  # however many resets came before
        await handle.handle.signal("reset", {"checkpoint_id": taken["checkpoint_id"]})
        await events_until(handle, nth(WorkflowResetEvent, 2 * n + 1))
        assert (await handle.status())["outputs"] == ["#1: HI"]
        await handle.handle.signal("reset", {})
        await events_until(handle, nth(WorkflowOutputEvent, 3 + n))  # "hi" answered again, as turn 1
    status = await handle.status()
    assert status["resets"] == 4 and status["outputs"] == ["#1: HI"]
    assert await handle.state() == {"turns": 1}
    await handle.send("chat", "again")
    await finish_conversation(handle, "hi", "again")


async def test_a_clean_reset_after_a_reset_with_a_new_message_starts_from_that_message(
    client: Client, workflow_id: str
) -> None:
    """A reset with a new message makes it the start message: later clean resets start from it."""
    handle = await conversation(client, workflow_id, "hi")
    await events_until(handle, nth(WorkflowOutputEvent, 1))
    taken = await handle.checkpoint()
    assert taken is not None
    await handle.reset(message="new")
    await events_until(handle, nth(WorkflowOutputEvent, 2))
    await handle.reset(checkpoint_id=taken["checkpoint_id"])
    await handle.reset()
    await events_until(handle, nth(WorkflowOutputEvent, 3))
    assert (await handle.status())["outputs"] == ["#1: NEW"]
    await finish_conversation(handle, "new")


# == 8. misspelled signal and update names ==================================================


async def test_a_misspelled_signal_is_a_warning_naming_the_known_signals(client: Client, workflow_id: str) -> None:
    handle, pending = await two_questions(client, workflow_id)
    await handle.handle.signal("repsond", {"request_id": pending["alice"], "response": {"text": "yes"}})
    await handle.handle.signal("Respond")
    await handle.handle.signal("close ", {"x": 1})
    # The retired LlamaIndex import-swap front end's signal is as unknown to a graph run (it routed no events).
    await handle.handle.signal("send_event", {"event": {"text": "yes"}})
    warned = await warning_events(handle, 4)
    for w, name in zip(warned, ["repsond", "Respond", "close ", "send_event"], strict=True):
        assert f"unknown signal {name!r}" in w.message
        assert all(s in w.message for s in SIGNALS)
    status = await handle.status()
    assert [w["message"] for w in status["warnings"]] == [w.message for w in warned]
    # Nothing was answered: both requests still wait.
    assert (status["status"], status["pending_requests"]) == ("waiting_for_input", 2)
    await answer_two_questions(handle, pending, wait=False)


async def test_a_misspelled_update_is_refused_naming_the_known_updates(client: Client, workflow_id: str) -> None:
    handle, pending = await two_questions(client, workflow_id)
    for name in ("submit_respons", "Submit_Response", "respond", "submit_event"):
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.handle.execute_update(name, {"request_id": pending["alice"], "response": {"text": "yes"}})
        err = update_error(info)
        assert repr(name) in err.message and all(u in err.message for u in UPDATES)
    # Refused by the validator: never accepted, so not in history (event-stream polls are updates too).
    history = await handle.handle.fetch_history()
    accepted = {
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    }
    assert accepted <= {"__temporal_workflow_stream_poll"}
    status = await handle.status()
    assert (status["status"], status["pending_requests"], status["warnings"]) == ("waiting_for_input", 2, [])
    await answer_two_questions(handle, pending)
