"""Bad input on a real dev server: each is refused or reported, and no run is left stuck or corrupted.

docs/bad-input.md lists every kind of bad input with what happens and the
test that shows it; this module holds the ones not shown elsewhere. Outside
input is sent as raw payloads (``json/plain`` with arbitrary bytes), exactly
what a client in another language, or a bug, can send. After each bad input
the run is shown to be usable: a correct input is processed and the run ends
with the right result.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._engine.limits import DEFAULT_MAX_PAYLOAD_BYTES, json_size
from temporal_workflows.errors import (
    ExecutorFailedError,
    GraphSignatureMismatchError,
    NotSerializableError,
    PayloadTooLargeError,
    RunClosedError,
    SuperstepLimitError,
)
from temporal_workflows.events import RequestInfoEvent, WorkflowOutputEvent, WorkflowWarningEvent
from temporal_workflows.temporal import RunHandle, send_or_start, start_run
from tests.conftest import TASK_QUEUE
from tests.integration import graphs
from tests.integration.runs import outcome, terminate_if_running, update_error
from tests.integration.streams import events_until, nth

pytestmark = pytest.mark.usefixtures("worker")

NOT_JSON = b"{not json"
A_JSON_STRING = b'"just a string"'
WRONG_FIELD_TYPES = b'{"request_id": 7, "executor_id": 7, "label": 7, "checkpoint_id": 7, "items": 7, "topics": 7}'
"""An object whose every field, in every input type of every signal and update, has the wrong type."""
MALFORMED = [NOT_JSON, A_JSON_STRING, WRONG_FIELD_TYPES]

STREAM_PUBLISH = "__temporal_workflow_stream_publish"
"""The signal of ``temporalio.contrib.workflow_streams`` that the run registers for its event stream."""
STREAM_POLL = "__temporal_workflow_stream_poll"
"""The update of the same module that ``RunHandle.events()`` long-polls with."""

BIG = DEFAULT_MAX_PAYLOAD_BYTES + 1


def raw(data: bytes) -> RawValue:
    """A payload exactly as it reaches the server: encoding ``json/plain``, whatever bytes."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


async def accepted_updates(handle: RunHandle, name: str, payloads: list[bytes]) -> int:
    """How many ``name`` updates whose argument is one of ``payloads`` the run has accepted, from history (others
    of the same name, e.g. a process's shared reader of the run polling its stream meanwhile, are not counted)."""
    history = await handle.handle.fetch_history()
    return sum(
        request.input.name == name and any(p.data in payloads for p in request.input.args.payloads)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        for request in [e.workflow_execution_update_accepted_event_attributes.accepted_request]
    )


async def step_attempts(handle: RunHandle, executor_id: str) -> list[int]:
    """The attempt number of every start of ``executor_id``'s steps, from history."""
    history = await handle.handle.fetch_history()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and scheduled[e.activity_task_started_event_attributes.scheduled_event_id].endswith(f".{executor_id}")
    ]


# -- scenarios: a run waiting for two answers, and a keep-alive conversation -----------------


async def two_questions(client: Client, workflow_id: str) -> tuple[RunHandle, dict[str, str]]:
    """``it_two_questions`` waiting for alice's and bob's answers; returns the request ids by asker."""
    handle = await start_run(client, graphs.two_questions, "tea", id=workflow_id, task_queue=TASK_QUEUE)
    await events_until(handle, nth(RequestInfoEvent, 2))
    return handle, {p.data.asker: p.request_id for p in await handle.pending_requests()}


async def answer_two_questions(handle: RunHandle, pending: dict[str, str], *, wait: bool) -> None:
    """Answer both questions and check the run's result: the answers, joined in source order."""
    await handle.respond(pending["bob"], graphs.Answer(text="no"), wait=wait)
    await handle.respond(pending["alice"], graphs.Answer(text="yes"), wait=wait)
    assert (await asyncio.wait_for(handle.result(), 30))["outputs"] == [["alice=yes", "bob=no"]]


async def conversation(client: Client, workflow_id: str) -> RunHandle:
    return await start_run(client, graphs.conversation, id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True)


async def finish_conversation(handle: RunHandle, *lines: str) -> None:
    """Close the conversation and check it answered exactly ``lines``, in order."""
    await handle.close()
    result = await asyncio.wait_for(handle.result(), 30)
    assert result["outputs"] == [f"#{n}: {line.upper()}" for n, line in enumerate(lines, 1)]
    assert await handle.state() == {"turns": len(lines)}


# -- malformed JSON in every signal ---------------------------------------------------------


@pytest.mark.parametrize("signal", ["respond", "checkpoint", "reset", STREAM_PUBLISH])
async def test_malformed_signals_to_a_waiting_run_are_ignored_with_a_warning_and_it_goes_on(
    client: Client, workflow_id: str, signal: str
) -> None:
    """Each is ignored with a warning in ``status`` (the stream's own signal is dropped by the SDK).

    Nothing else in the run changes, and the same signal well formed still works.
    """
    handle, pending = await two_questions(client, workflow_id)
    for data in MALFORMED:
        await handle.handle.signal(signal, raw(data))
    warnings = [w["message"] for w in (await handle.status())["warnings"]]
    if signal == STREAM_PUBLISH:
        assert warnings == []
    else:
        assert len(warnings) == len(MALFORMED)
        assert all(w.startswith(f"signal {signal!r} ignored: its argument is not a valid") for w in warnings)
    # Each kind of signal, well formed, still works afterwards.
    if signal == "checkpoint":
        await handle.checkpoint("good", wait=False)
    if signal == "reset":
        await handle.reset(wait=False)  # a clean reset: the questions are asked again, with new ids
        await events_until(handle, nth(RequestInfoEvent, 4))
        pending = {p.data.asker: p.request_id for p in await handle.pending_requests()}
    await answer_two_questions(handle, pending, wait=signal != "respond")
    status = await handle.status()
    assert status["resets"] == (1 if signal == "reset" else 0)
    assert [c["label"] for c in await handle.checkpoints()] == (["good"] if signal == "checkpoint" else [])
    assert [e.data for e in [e async for e in handle.events()] if isinstance(e, WorkflowOutputEvent)] == [
        ["alice=yes", "bob=no"]
    ]


async def test_malformed_send_signals_are_ignored_with_a_warning_and_the_conversation_goes_on(
    client: Client, workflow_id: str
) -> None:
    handle = await conversation(client, workflow_id)
    for data in MALFORMED:
        await handle.handle.signal("send", raw(data))
    warnings = [w["message"] for w in (await handle.status())["warnings"]]
    assert len(warnings) == len(MALFORMED) and all("not a valid SendInput" in w for w in warnings)
    await handle.send("chat", "hello", wait=False)
    await finish_conversation(handle, "hello")


async def test_a_close_signal_that_is_not_json_is_dropped_and_any_json_argument_is_ignored(
    client: Client, workflow_id: str
) -> None:
    handle = await conversation(client, workflow_id)
    await handle.handle.signal("close", raw(NOT_JSON))
    # Still open: the update's validator refuses messages to a closing run.
    assert await handle.send("chat", "still open") == {"executor_id": "chat", "accepted": True}
    await handle.handle.signal("close", raw(A_JSON_STRING))  # close takes no argument: it closes
    result = await asyncio.wait_for(handle.result(), 30)
    assert result["outputs"] == ["#1: STILL OPEN"]
    # A closed run takes nothing more, and says so.
    for wait in (True, False):
        with pytest.raises(RunClosedError) as closed:
            await handle.send("chat", "too late", wait=wait)
        assert "has completed: it takes no more input" in str(closed.value)


# -- malformed JSON in every update ----------------------------------------------------------

# What each update's decoding error names, besides "Failed decoding arguments".
INPUT_TYPES = {
    "submit_response": "RespondInput",
    "send_message": "SendInput",
    "take_checkpoint": "CheckpointRequest",
    "reset_run": "ResetRequest",
    STREAM_POLL: "PollInput",
}


@pytest.mark.parametrize("update", list(INPUT_TYPES))
async def test_malformed_updates_are_rejected_naming_the_input_and_leave_no_trace(
    client: Client, workflow_id: str, update: str
) -> None:
    handle = await conversation(client, workflow_id) if update == "send_message" else None
    pending: dict[str, str] = {}
    if handle is None:
        handle, pending = await two_questions(client, workflow_id)
    before = (await handle.pending_requests(), await handle.state(), await handle.checkpoints())
    for data in MALFORMED:
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.handle.execute_update(update, raw(data))
        err = update_error(info)
        assert "Failed decoding arguments" in err.message
        detail = str(err.cause)
        assert INPUT_TYPES[update] in detail
        assert ("Invalid JSON" if data == NOT_JSON else "should be") in detail
    assert (await handle.pending_requests(), await handle.state(), await handle.checkpoints()) == before
    assert (await handle.status())["resets"] == 0
    # Refused before they were accepted, they are not in history at all.
    assert await accepted_updates(handle, update, list(MALFORMED)) == 0

    # The same update, well formed, works; the run ends as it should.
    if update == "send_message":
        assert await handle.send("chat", "hello") == {"executor_id": "chat", "accepted": True}
        await finish_conversation(handle, "hello")
        return
    if update == "take_checkpoint":
        taken = await handle.checkpoint("good")
        assert taken is not None and taken["label"] == "good"
    if update == "reset_run":
        assert (await handle.reset())["accepted"] is True  # type: ignore[index]
        await events_until(handle, nth(RequestInfoEvent, 4))
        pending = {p.data.asker: p.request_id for p in await handle.pending_requests()}
    if update == STREAM_POLL:
        await events_until(handle, nth(RequestInfoEvent, 2))  # events() polls with the same update
    await answer_two_questions(handle, pending, wait=True)


async def test_a_reset_with_a_misspelled_field_is_refused_not_taken_as_a_clean_reset(
    client: Client, workflow_id: str
) -> None:
    handle, pending = await two_questions(client, workflow_id)
    try:
        taken = await handle.checkpoint("before")
        assert taken is not None
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.handle.execute_update("reset_run", {"checkpoint": taken["checkpoint_id"]})
        assert (await handle.status())["resets"] == 0
        await answer_two_questions(handle, pending, wait=True)
    finally:
        await terminate_if_running(handle.handle)


# -- a start input that is not the workflow's input object ------------------------------------


@pytest.mark.parametrize("data", [NOT_JSON, A_JSON_STRING], ids=["not JSON", "a JSON string"])
async def test_a_start_input_that_is_not_a_run_input_fails_the_run_at_once(
    client: Client, workflow_id: str, data: bytes
) -> None:
    handle = await client.start_workflow("it_chat", raw(data), id=workflow_id, task_queue=TASK_QUEUE)
    try:
        ev = await outcome(handle)
        assert ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, EventType.Name(ev.event_type)
        assert "input" in ev.workflow_execution_failed_event_attributes.failure.message
    finally:
        await terminate_if_running(handle)


# -- payloads larger than Temporal accepts ---------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "what"),
    [
        (graphs.Sizes(state=3_000_000), "state key 'report'"),
        (graphs.Sizes(message=3_000_000), "message to 'archive'"),
        (graphs.Sizes(output=3_000_000), "output"),
        (graphs.Sizes(state=1_200_000, keys=2), "the step's result"),
    ],
    ids=["state", "message", "output", "total"],
)
async def test_a_step_result_over_the_limit_fails_the_run_naming_executor_and_value(
    client: Client, workflow_id: str, sizes: graphs.Sizes, what: str
) -> None:
    """Before Temporal refuses it (``PayloadsTooLarge``, naming nothing, after retrying the step)."""
    handle = await start_run(client, graphs.sizes, sizes, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(ExecutorFailedError) as info:
        await asyncio.wait_for(handle.result(), 30)
    message = str(info.value)
    assert info.value.error_type == "PayloadTooLargeError" and info.value.executor_id == "hoard"
    assert "'hoard'" in message and "superstep 2" in message and message.count("PayloadTooLargeError") == 1
    assert f"{what} is " in message and f"{DEFAULT_MAX_PAYLOAD_BYTES:,} bytes" in message
    assert "external storage" in message and "reference in state" in message
    if what == "the step's result":
        assert "state key 'report'" in message and "state key 'report1'" in message
    else:
        assert f"{3_000_002:,} bytes" in message
    # Not retried (it would fail the same way), and Temporal never saw the payload.
    assert await step_attempts(handle, "hoard") == [1]
    history = await handle.handle.fetch_history()
    assert "PayloadsTooLarge" not in str(history.events) and "TMPRL1103" not in str(history.events)
    # The run failed at the boundary before: what it had committed is intact and readable.
    assert await handle.state() == {"asked": sizes.model_dump()}
    status = await handle.status()
    assert status["status"] == "failed" and what in status["error"]


async def test_a_step_result_just_under_the_limit_is_accepted_by_temporal(client: Client, workflow_id: str) -> None:
    """The default limit leaves enough room for the envelope: Temporal takes what the check lets through."""
    size = DEFAULT_MAX_PAYLOAD_BYTES - 1024
    handle = await start_run(client, graphs.sizes, graphs.Sizes(state=size), id=workflow_id, task_queue=TASK_QUEUE)
    result = await asyncio.wait_for(handle.result(), 60)
    assert result["status"] == "completed" and result["outputs"] == []
    assert len((await handle.state())["report"]) == size


async def test_the_client_refuses_input_over_the_limit_before_sending_it(client: Client, workflow_id: str) -> None:
    big = "x" * BIG
    with pytest.raises(PayloadTooLargeError) as info:
        await start_run(client, graphs.conversation, big, id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True)
    err = info.value
    assert (err.what, err.size, err.limit, err.executor_id) == (
        "start message",
        BIG + 2,
        DEFAULT_MAX_PAYLOAD_BYTES,
        None,
    )
    assert "start message" in str(err) and "external storage" in str(err)
    with pytest.raises(RPCError) as never_started:
        await client.get_workflow_handle(workflow_id).describe()
    assert never_started.value.status == RPCStatusCode.NOT_FOUND

    handle = await conversation(client, workflow_id)
    for wait in (True, False):
        with pytest.raises(PayloadTooLargeError, match="message for executor 'chat'"):
            await handle.send("chat", big, wait=wait)
    with pytest.raises(PayloadTooLargeError, match="message for executor 'chat'"):
        await send_or_start(client, graphs.conversation, big, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(PayloadTooLargeError, match="reset message"):
        await handle.reset(message=big)
    await handle.send("chat", "small enough")
    await finish_conversation(handle, "small enough")

    questions, pending = await two_questions(client, f"{workflow_id}-q")
    for wait in (True, False):
        with pytest.raises(PayloadTooLargeError, match=f"response to request {pending['bob']!r}"):
            await questions.respond(pending["bob"], {"text": big}, wait=wait)
    assert sorted(p.request_id for p in await questions.pending_requests()) == sorted(pending.values())
    await answer_two_questions(questions, pending, wait=True)


async def test_a_fan_in_input_adding_up_past_the_limit_fails_the_run_naming_the_target(
    client: Client, workflow_id: str
) -> None:
    handle = await client.start_workflow("it_big_fan_in", {"message": 800_000}, id=workflow_id, task_queue=TASK_QUEUE)
    try:
        ev = await outcome(handle)
        assert ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, EventType.Name(ev.event_type)
        message = ev.workflow_execution_failed_event_attributes.failure.message
        assert "'gather'" in message and "fan-in" in message and "external storage" in message
    finally:
        await terminate_if_running(handle)


async def test_outputs_adding_up_past_the_limit_release_the_oldest_and_the_run_completes(
    client: Client, workflow_id: str
) -> None:
    emit = graphs.Emit(n=1, upto=4, size=800_000)
    handle = await start_run(client, graphs.big_outputs, emit, id=workflow_id, task_queue=TASK_QUEUE)
    result = await asyncio.wait_for(handle.result(), 60)
    # The run's result is one payload: it keeps the newest outputs that fit and counts the released ones.
    assert result["outputs"] == ["3" * 800_000, "4" * 800_000]
    assert result["outputs_released"] == 2
    # Every output was delivered as it was committed: the event stream has all four.
    events = await asyncio.wait_for(_all_events(handle), 60)
    outputs = [e.data for e in events if isinstance(e, WorkflowOutputEvent)]
    assert [o[:1] for o in outputs] == ["1", "2", "3", "4"]


async def _all_events(handle: RunHandle) -> list[object]:
    return [e async for e in handle.events()]


# -- values JSON cannot carry ------------------------------------------------------------------------


async def test_an_unserializable_state_value_fails_the_run_naming_executor_and_key(
    client: Client, workflow_id: str
) -> None:
    sizes = graphs.Sizes(unserializable_key="tags")
    handle = await start_run(client, graphs.sizes, sizes, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(ExecutorFailedError) as info:
        await asyncio.wait_for(handle.result(), 30)
    message = str(info.value)
    assert info.value.error_type == "NotSerializableError" and message.count("NotSerializableError") == 1
    assert "NotSerializableError" in message and "'hoard'" in message and "state key 'tags'" in message
    assert "_thread.lock" in message
    assert await step_attempts(handle, "hoard") == [1]
    assert await handle.state() == {"asked": sizes.model_dump()}


async def test_an_unserializable_message_is_refused_by_the_client_and_the_run_goes_on(
    client: Client, workflow_id: str
) -> None:
    handle = await conversation(client, workflow_id)
    for wait in (True, False):
        with pytest.raises(NotSerializableError, match="message for executor 'chat'"):
            await handle.send("chat", {"tags": threading.Lock()}, wait=wait)
    await handle.send("chat", "fine")
    await finish_conversation(handle, "fine")


# -- a cycle with no exit ------------------------------------------------------------------------------


async def test_a_cycle_without_exit_stops_at_max_iterations_with_its_state_intact_as_in_process(
    client: Client, workflow_id: str
) -> None:
    in_process = graphs.laps_graph()
    with pytest.raises(SuperstepLimitError) as local:
        await in_process.run(0)
    handle = await start_run(client, graphs.laps, 0, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(SuperstepLimitError) as info:
        await asyncio.wait_for(handle.result(), 30)
    assert str(info.value) == str(local.value)  # the same error, word for word
    assert info.value.superstep == local.value.superstep == 6
    assert "max_iterations=5" in str(info.value) and "'lap'" in str(info.value)
    # Every superstep up to the limit was committed; the state says so, on Temporal as in process.
    assert await handle.state() == {"laps": 5} == in_process.state
    status = await handle.status()
    assert status["status"] == "failed" and status["superstep"] == 5


# -- a checkpoint from another graph version -------------------------------------------------------------


async def test_a_reset_to_a_checkpoint_of_another_graph_version_is_refused_and_the_run_goes_on(
    client: Client, workflow_id: str
) -> None:
    source = await start_run(
        client, graphs.planted_ticker, graphs.Count(n=1, upto=3), task_queue=TASK_QUEUE, checkpoint_every=1
    )
    await source.result()
    original = await graphs.shared_store.load((await source.checkpoints())[0]["checkpoint_id"])

    hold = graphs.Hold(2)
    graphs.HOLDS[workflow_id] = hold
    handle = await start_run(
        client, graphs.planted_ticker, graphs.Count(n=1, upto=4), id=workflow_id, task_queue=TASK_QUEUE
    )
    await asyncio.wait_for(hold.reached.wait(), 30)
    # A checkpoint of this very run, as an older version of the graph would have written it.
    old = original.model_copy(
        update={"checkpoint_id": f"old-{workflow_id}", "run_id": workflow_id, "graph_signature_hash": "0" * 64}
    )
    await graphs.shared_store.save(old)

    with pytest.raises(GraphSignatureMismatchError) as mismatch:
        await handle.reset(checkpoint_id=old.checkpoint_id)
    message = str(mismatch.value)
    assert old.checkpoint_id in message and "graph signature" in message and "allow_signature_mismatch" in message
    await handle.reset(checkpoint_id=old.checkpoint_id, wait=False)
    warned = [
        e for e in await events_until(handle, nth(WorkflowWarningEvent, 1)) if isinstance(e, WorkflowWarningEvent)
    ]
    assert "graph signature" in warned[0].message and old.checkpoint_id in warned[0].message

    hold.release.set()
    assert (await asyncio.wait_for(handle.result(), 30))["outputs"] == [{"rounds": 4}]
    assert await handle.state() == {"total": 10, "count": 4}
    assert (await handle.status())["resets"] == 0


def test_the_sizes_in_these_tests_are_what_the_check_measures() -> None:
    """Guards the numbers above: a string's JSON is its length plus two quotes."""
    assert json_size("x" * BIG) == BIG + 2 > DEFAULT_MAX_PAYLOAD_BYTES
    assert json_size("r" * 3_000_000) == 3_000_002
