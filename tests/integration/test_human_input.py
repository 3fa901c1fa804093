"""Human input, status and live progress of runs on a real dev server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError

from examples import approval, research
from temporal_workflows import WorkflowEvent, WorkflowRunState
from temporal_workflows.errors import (
    AlreadyAnsweredError,
    InvalidResponseError,
    RunClosedError,
    UndeliverableMessageError,
    UnknownRequestError,
)
from temporal_workflows.events import (
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowOutputEvent,
    WorkflowStatusEvent,
    WorkflowWarningEvent,
)
from temporal_workflows.temporal import RunHandle, get_run, send_or_start, start_run
from temporal_workflows.temporal._client.devserver import temporal_cli_path
from temporal_workflows.temporal.integration import STATUS_SEARCH_ATTRIBUTE
from tests.conftest import TASK_QUEUE
from tests.integration import graphs
from tests.integration.cli import run_cli
from tests.integration.streams import events_until, nth

pytestmark = pytest.mark.usefixtures("worker")

ROOT = Path(__file__).parents[2]


def nth_request(n: int) -> Callable[[WorkflowEvent], bool]:
    return nth(RequestInfoEvent, n)


def warnings(n: int) -> Callable[[WorkflowEvent], bool]:
    return nth(WorkflowWarningEvent, n)


def waiting(ev: WorkflowEvent) -> bool:
    return isinstance(ev, WorkflowStatusEvent) and ev.state == WorkflowRunState.IDLE_WITH_PENDING_REQUESTS


async def expected_approval_outputs() -> list[Any]:
    wf = approval.build()
    result = await wf.run(approval.SAMPLE_INPUT)
    while result.get_request_info_events():
        result = await wf.run(
            responses={r.request_id: approval.auto_answer(r) for r in result.get_request_info_events()}
        )
    return [o.model_dump(mode="json") for o in result.get_outputs()]


async def start_approval(client: Client, workflow_id: str) -> tuple[RunHandle, RequestInfoEvent]:
    handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    seen = await events_until(handle, waiting)
    requests = [e for e in seen if isinstance(e, RequestInfoEvent)]
    assert len(requests) == 1
    return handle, requests[0]


def update_error(exc: pytest.ExceptionInfo[WorkflowUpdateFailedError]) -> ApplicationError:
    cause = exc.value.cause
    assert isinstance(cause, ApplicationError), cause
    return cause


# -- the approval flow ---------------------------------------------------------------


async def test_waiting_run_reports_status_and_pending_requests(client: Client, workflow_id: str) -> None:
    handle, request = await start_approval(client, workflow_id)
    status = await handle.status()
    assert status["status"] == "waiting_for_input"
    assert status["pending_requests"] == 1 and status["in_flight"] == []
    [pending] = await handle.pending_requests()
    assert pending.request_id == request.request_id
    assert pending.source_executor_id == "reviewer"
    assert pending.data.draft.round == 1
    # The one form of a pending request: the event that announced it, with where it stands.
    assert pending.model_dump(exclude={"superstep", "created_at", "deadline", "on_timeout"}) == request.model_dump(
        exclude={"timestamp"}
    )
    assert pending.response_schema["properties"]["approved"]["type"] == "boolean"
    assert pending.created_at is not None and pending.deadline is None and pending.superstep == 2
    # The streamed request carries the typed request and the same schema.
    assert isinstance(request.data, approval.ReviewRequest)
    assert request.response_schema == pending.response_schema
    # The Web UI's summary line, and the status search attribute.
    metadata = await handle.handle.query("__temporal_workflow_metadata")
    assert metadata.current_details == "waiting for input: 1 request from reviewer"
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(SearchAttributeKey.for_keyword(STATUS_SEARCH_ATTRIBUTE)) == (
        "waiting_for_input"
    )
    await handle.handle.terminate("test done")


async def test_approval_answered_by_update_completes_like_in_process(client: Client, workflow_id: str) -> None:
    handle, first = await start_approval(client, workflow_id)
    accepted = await handle.respond(first.request_id, approval.auto_answer(first))
    assert accepted == {"request_id": first.request_id, "executor_id": "reviewer", "accepted": True}
    second = [e for e in await events_until(handle, nth_request(2)) if isinstance(e, RequestInfoEvent)][-1]
    assert second.request_id != first.request_id
    await handle.respond(second.request_id, approval.auto_answer(second))
    result = await handle.result()
    assert result["outputs"] == await expected_approval_outputs()
    assert [r["round"] for r in (await handle.state())["reviews"]] == [1, 2]


async def test_status_search_attribute_finds_runs_waiting_for_input(client: Client, workflow_id: str) -> None:
    handle, _ = await start_approval(client, workflow_id)
    query = f'WorkflowId = "{workflow_id}" AND {STATUS_SEARCH_ATTRIBUTE} = "waiting_for_input"'
    # Visibility is eventually consistent: poll it (bounded) rather than assume.
    for _ in range(100):
        if [w async for w in client.list_workflows(query)]:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"no run matched {query}")
    await handle.handle.terminate("test done")


# -- bad input -------------------------------------------------------------------------


async def test_bad_responses_by_update_are_rejected_and_change_nothing(client: Client, workflow_id: str) -> None:
    handle, request = await start_approval(client, workflow_id)
    before = (await handle.status(), await handle.pending_requests(), await handle.state())

    # The same exceptions as a run in process raises for the same input.
    with pytest.raises(UnknownRequestError) as unknown:
        await handle.respond("no-such-request", {"approved": True})
    assert "no-such-request" in str(unknown.value) and request.request_id in str(unknown.value)
    assert unknown.value.request_id == "no-such-request"

    with pytest.raises(InvalidResponseError) as invalid:
        await handle.respond(request.request_id, {"approved": "maybe"})
    assert request.request_id in str(invalid.value) and "reviewer" in str(invalid.value)

    assert (await handle.status(), await handle.pending_requests(), await handle.state()) == before

    await handle.respond(request.request_id, approval.auto_answer(request))
    with pytest.raises(AlreadyAnsweredError):
        await handle.respond(request.request_id, {"approved": True})

    second = [e for e in await events_until(handle, nth_request(2)) if isinstance(e, RequestInfoEvent)][-1]
    await handle.respond(second.request_id, approval.auto_answer(second))
    assert (await handle.result())["outputs"] == await expected_approval_outputs()


async def test_bad_responses_by_signal_become_warnings_and_the_run_goes_on(client: Client, workflow_id: str) -> None:
    handle, request = await start_approval(client, workflow_id)

    await handle.respond("no-such-request", {"approved": True}, wait=False)
    await handle.respond(request.request_id, {"approved": "maybe"}, wait=False)
    seen = await events_until(handle, warnings(2))
    unknown, invalid = [e for e in seen if isinstance(e, WorkflowWarningEvent)]
    assert unknown.request_id == "no-such-request" and "no pending request" in unknown.message
    assert invalid.request_id == request.request_id and invalid.executor_id == "reviewer"
    assert "ReviewDecision" in invalid.message

    status = await handle.status()
    assert status["status"] == "waiting_for_input"
    assert [w["request_id"] for w in status["warnings"]] == ["no-such-request", request.request_id]
    assert [p.request_id for p in await handle.pending_requests()] == [request.request_id]

    # A good answer, then the same answer again: the second is only a warning.
    await handle.respond(request.request_id, approval.auto_answer(request), wait=False)
    await handle.respond(request.request_id, approval.auto_answer(request), wait=False)
    seen = await events_until(handle, warnings(3))
    assert "already answered" in [e for e in seen if isinstance(e, WorkflowWarningEvent)][-1].message

    second = [e for e in await events_until(handle, nth_request(2)) if isinstance(e, RequestInfoEvent)][-1]
    await handle.respond(second.request_id, approval.auto_answer(second), wait=False)
    assert (await handle.result())["outputs"] == await expected_approval_outputs()


async def test_responding_with_the_temporal_cli(client: Client, temporal_address: str, workflow_id: str) -> None:
    handle, request = await start_approval(client, workflow_id)
    answer = json.dumps({"request_id": request.request_id, "response": {"approved": False, "feedback": "add source"}})
    cli = [temporal_cli_path(), "workflow", "signal", "--address", temporal_address, "--workflow-id", workflow_id]
    proc = await asyncio.create_subprocess_exec(
        *cli, "--name", "respond", "--input", answer, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    second = [e for e in await events_until(handle, nth_request(2)) if isinstance(e, RequestInfoEvent)][-1]
    assert second.data.draft.round == 2 and "Sources:" in second.data.draft.text
    answer = json.dumps({"request_id": second.request_id, "response": {"approved": True}})
    proc = await asyncio.create_subprocess_exec(
        *cli, "--name", "respond", "--input", answer, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    [publication] = (await handle.result())["outputs"]
    assert publication["status"] == "published" and publication["rounds"] == 2


# -- several requests at once ------------------------------------------------------------


async def test_two_pending_requests_answered_in_reverse_order(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, graphs.two_questions, "tea", id=workflow_id, task_queue=TASK_QUEUE)
    await events_until(handle, waiting)
    pending = {p.data.asker: p.request_id for p in await handle.pending_requests()}
    assert sorted(pending) == ["alice", "bob"]
    await handle.respond(pending["bob"], graphs.Answer(text="no"))
    assert [p.data.asker for p in await handle.pending_requests()] == ["alice"]
    await handle.respond(pending["alice"], {"text": "yes"}, wait=False)
    assert (await handle.result())["outputs"] == [["alice=yes", "bob=no"]]


async def test_request_answered_before_its_deadline(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, graphs.timed, graphs.Deadline(seconds=3600), id=workflow_id, task_queue=TASK_QUEUE)
    await events_until(handle, waiting)
    [pending] = await handle.pending_requests()
    assert pending.deadline is not None and pending.on_timeout == "respond"
    await handle.respond(pending.request_id, graphs.Approval(approved=True))
    assert (await handle.result())["outputs"] == ["approved"]


# -- messages and conversations ----------------------------------------------------------


async def test_keep_alive_conversation_with_update_and_signal_with_start(client: Client, workflow_id: str) -> None:
    await send_or_start(client, graphs.conversation, "hello", id=workflow_id, task_queue=TASK_QUEUE)
    handle = await send_or_start(client, graphs.conversation, "again", id=workflow_id, task_queue=TASK_QUEUE)
    await send_or_start(client, graphs.conversation, "third", id=workflow_id, task_queue=TASK_QUEUE, wait=False)
    seen = await events_until(handle, lambda e: isinstance(e, WorkflowOutputEvent) and e.data.startswith("#3"))
    assert (await handle.status())["status"] in ("idle", "running")
    assert [e.text for e in seen if isinstance(e, graphs.Note)] == ["turn 1", "turn 2", "turn 3"]
    await handle.close()
    result = await handle.result()
    assert result["outputs"] == ["#1: HELLO", "#2: AGAIN", "#3: THIRD"]
    assert (await handle.state()) == {"turns": 3}


async def test_close_waits_for_pending_requests_then_completes(client: Client, workflow_id: str) -> None:
    """``close`` while requests wait: the run takes no new message but still takes the answers, and completes
    once the last is answered; no request is dropped (docs/temporal.md, ``close``)."""
    handle = await start_run(
        client, graphs.two_questions, "bees", id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True
    )
    await events_until(
        handle, lambda e: isinstance(e, WorkflowStatusEvent) and e.state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    )
    await handle.close()
    status = await handle.status()
    assert status["closing"] is True and status["status"] == "waiting_for_input", status
    with pytest.raises(RunClosedError, match="closing"):
        await handle.send("fan", "wasps")
    await handle.send("fan", "wasps", wait=False)  # by signal: a warning, not taken
    first, second = sorted(await handle.pending_requests(), key=lambda r: r.source_executor_id)
    await handle.respond(first.request_id, {"text": "buzz"})
    assert (await handle.status())["status"] in ("running", "waiting_for_input")  # one still waits
    await handle.respond(second.request_id, {"text": "hum"}, wait=False)  # by signal too
    result = await handle.result()
    assert result["outputs"] == [["alice=buzz", "bob=hum"]] and result["unanswered_requests"] == []
    status = await handle.status()
    assert status["status"] == "completed" and status["closing"] is False
    assert any("the run is closing" in w["message"] for w in status["warnings"])


async def test_a_close_while_a_step_runs_still_waits_for_the_request_already_asked(
    client: Client, workflow_id: str
) -> None:
    """``close`` comes while the run works (superstep 3's step is held) and superstep 2's request waits: the
    run finishes its work, then rests waiting for the answer instead of completing; the answer is taken and
    the run completes once idle, with nothing unanswered."""
    hold = graphs.Hold(0)
    graphs.HOLDS[workflow_id] = hold
    try:
        handle = await start_run(
            client, graphs.answer_mid_step, "moths", id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True
        )
        await asyncio.wait_for(hold.reached.wait(), 30)
        await handle.close()
        status = await handle.status()
        assert status["closing"] is True and status["status"] == "running", status
        hold.release.set()

        done = 0

        def rests_after_the_held_step(ev: WorkflowEvent) -> bool:
            nonlocal done
            done += isinstance(ev, SuperStepCompletedEvent) and ev.superstep >= 3
            return done > 0 and waiting(ev)

        # (Before close waited for answers, the run completed right after this rest, its request unanswered.)
        await events_until(handle, rests_after_the_held_step)
        status = await handle.status()
        assert status["closing"] is True and status["status"] == "waiting_for_input", status
        (asked,) = await handle.pending_requests()
        await handle.respond(asked.request_id, {"text": "ok"})
        result = await asyncio.wait_for(handle.result(), 30)
        assert result["outputs"] == [["polished draft of moths", "review=ok"]], result
        assert result["unanswered_requests"] == []
        assert (await handle.status())["status"] == "completed"
    finally:
        graphs.HOLDS.pop(workflow_id, None)


async def test_bad_messages_are_rejected_by_update_and_warned_by_signal(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, graphs.conversation, id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True)
    with pytest.raises(UndeliverableMessageError) as unknown:
        await handle.send("nobody", "hi")
    assert "chat" in str(unknown.value)
    with pytest.raises(UndeliverableMessageError) as wrong_type:
        await handle.send("chat", {"not": "a string"})
    assert "no handler" in str(wrong_type.value)
    await handle.send("chat", 42, wait=False)
    seen = await events_until(handle, warnings(1))
    assert [e.executor_id for e in seen if isinstance(e, WorkflowWarningEvent)] == ["chat"]
    await handle.send("chat", "still fine")
    await handle.close()
    assert (await handle.result())["outputs"] == ["#1: STILL FINE"]


# -- the event stream --------------------------------------------------------------------


async def test_event_stream_matches_the_in_process_stream(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    remote = [e async for e in handle.events()]
    local = [e async for e in research.build().run_stream(research.SAMPLE_INPUT)]

    def shape(events: list[WorkflowEvent]) -> list[tuple[str, Any]]:
        return [(e.type, getattr(e, "superstep", getattr(e, "executor_id", None))) for e in events]

    assert shape(remote) == shape(local)
    started = [e.superstep for e in remote if isinstance(e, SuperStepStartedEvent)]
    completed = [e.superstep for e in remote if isinstance(e, SuperStepCompletedEvent)]
    assert started == completed == [1, 2, 3]
    [out] = [e.data for e in remote if isinstance(e, WorkflowOutputEvent)]
    [local_out] = [e.data for e in local if isinstance(e, WorkflowOutputEvent)]
    assert out == local_out  # typed again on this side


# -- a worker restart while a run waits ----------------------------------------------------


async def _worker_process(address: str, queue: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        "--workflow",
        "examples.approval:workflow",
        "--task-queue",
        queue,
        "--address",
        address,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert b"worker" in line, line
    return proc


async def test_waiting_run_survives_a_worker_restart(client: Client, temporal_address: str, workflow_id: str) -> None:
    queue = f"restart-{workflow_id}"
    worker = await _worker_process(temporal_address, queue)
    handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=workflow_id, task_queue=queue)
    [first] = [e for e in await events_until(handle, waiting) if isinstance(e, RequestInfoEvent)]
    assert (await handle.status())["status"] == "waiting_for_input"
    worker.terminate()
    assert await asyncio.wait_for(worker.wait(), 30) == 0

    worker = await _worker_process(temporal_address, queue)
    try:
        await handle.respond(first.request_id, approval.auto_answer(first), wait=False)
        second = [e for e in await events_until(handle, nth_request(2)) if isinstance(e, RequestInfoEvent)][-1]
        await handle.respond(second.request_id, approval.auto_answer(second))
        result = await asyncio.wait_for(handle.result(), 30)
        assert result["outputs"] == await expected_approval_outputs()
    finally:
        worker.terminate()
        await asyncio.wait_for(worker.wait(), 30)


# -- the command line --------------------------------------------------------------------


async def _cli(address: str, *args: str) -> tuple[int, str, str]:
    return await run_cli(address, "--address", address, *args)


async def test_cli_run_follow_requests_and_respond(client: Client, temporal_address: str, workflow_id: str) -> None:
    run = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        "--address",
        temporal_address,
        "run",
        "examples.approval:workflow",
        "--input",
        approval.SAMPLE_INPUT.model_dump_json(),
        "--id",
        workflow_id,
        "--task-queue",
        TASK_QUEUE,
        "--json",
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert run.stdout is not None
    printed: list[str] = []
    while not any('"type": "request_info"' in line for line in printed):
        line = (await asyncio.wait_for(run.stdout.readline(), 30)).decode()
        assert line, f"run ended early: {printed}"
        printed.append(line)
    assert json.loads(printed[0])["type"] == "run_started" and json.loads(printed[1])["type"] == "started"

    code, out, _ = await _cli(temporal_address, "requests", workflow_id)
    assert code == 0
    [pending] = json.loads(out)
    assert pending["source_executor_id"] == "reviewer" and "approved" in pending["response_schema"]["properties"]
    assert pending["type"] == "request_info" and pending["data"]["draft"]["round"] == 1

    code, _, err = await _cli(temporal_address, "respond", workflow_id, pending["request_id"], '{"approved": "maybe"}')
    assert code == 1 and "refused" in err and "ReviewDecision" in err
    code, _, err = await _cli(temporal_address, "respond", workflow_id, pending["request_id"], "{not json")
    assert code == 2 and "not valid JSON" in err
    assert [p["request_id"] for p in json.loads((await _cli(temporal_address, "requests", workflow_id))[1])] == [
        pending["request_id"]
    ]

    code, out, err = await _cli(temporal_address, "respond", workflow_id, pending["request_id"], '{"approved": true}')
    assert code == 0, err
    assert json.loads(out)["accepted"] is True
    rest, err_bytes = await asyncio.wait_for(run.communicate(), 60)
    assert run.returncode == 0, err_bytes.decode()
    text = "".join(printed) + rest.decode()
    records = [json.loads(line) for line in text.splitlines()]
    assert {"output", "superstep_completed"} <= {r["type"] for r in records}
    assert records[-1]["type"] == "result" and records[-1]["outputs"][0]["status"] == "published"


async def test_cli_send_and_close_a_keep_alive_run(client: Client, temporal_address: str, workflow_id: str) -> None:
    code, out, err = await _cli(
        temporal_address, "run", "it_chat", "--keep-alive", "--id", workflow_id, "--task-queue", TASK_QUEUE, "--no-wait"
    )
    assert code == 0, err
    code, out, err = await _cli(temporal_address, "send", workflow_id, "chat", '"hi there"')
    assert code == 0 and json.loads(out)["accepted"] is True, err
    code, out, err = await _cli(temporal_address, "send", workflow_id, "nobody", '"hi"')
    assert code == 1 and "nobody" in err
    code, out, err = await _cli(temporal_address, "close", workflow_id)
    assert code == 0, err
    assert (await get_run(client, workflow_id).result())["outputs"] == ["#1: HI THERE"]
