"""The same program, durable by one line: ``workflow.on_temporal(client)`` has ``run``'s signatures and results.

Each test runs one program twice, against the in-process workflow and against
its durable twin, and compares what the program saw: the events of every call
(ids masked), the outputs, the final states and the errors.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from examples import approval
from temporal_workflows import Workflow, WorkflowEvent, WorkflowRunResult, WorkflowRunState
from temporal_workflows.errors import ExecutorFailedError, UnknownRequestError, WorkflowError
from temporal_workflows.events import (
    RequestInfoEvent,
    StepProgressEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowOutputEvent,
    WorkflowStartedEvent,
)
from temporal_workflows.temporal import DurableWorkflow
from temporal_workflows.testing import GraphTestEnvironment
from tests.conformance import scenarios as sc
from tests.conftest import TASK_QUEUE
from tests.integration import graphs

pytestmark = pytest.mark.usefixtures("worker")

Runner = Workflow | DurableWorkflow


def seen(events: list[WorkflowEvent], ids: dict[str, str]) -> list[dict[str, Any]]:
    """Events as a program sees them, run and request ids replaced by their order of appearance."""

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            return ids.setdefault(value, f"id{len(ids)}") if value in ids or len(value) >= 20 else value
        if isinstance(value, dict):
            return {k: mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    out = []
    for ev in events:
        fields = ev.model_dump(mode="json")
        fields.pop("run_id", None)
        fields.pop("timestamp", None)  # when Temporal published it (workflow time); in process events have none
        fields.pop("worker", None)  # which worker ran a step, on Temporal; in process none
        out.append({"class": type(ev).__name__, **mask(fields)})
    return out


async def approval_program(wf: Runner) -> dict[str, Any]:
    """The README's human-in-the-loop program: run, then answer every request until none is left."""
    ids: dict[str, str] = {}
    calls = []
    result: WorkflowRunResult = await wf.run(approval.SAMPLE_INPUT)
    calls.append((seen(list(result), ids), result.get_final_state()))
    while result.get_request_info_events():
        answers = {r.request_id: approval.auto_answer(r) for r in result.get_request_info_events()}
        result = await wf.run(responses=answers)
        calls.append((seen(list(result), ids), result.get_final_state()))
    return {"calls": calls, "outputs": [o.model_dump(mode="json") for o in result.get_outputs()], "state": result.state}


def durable(client: Client, wf: Workflow, **kwargs: Any) -> DurableWorkflow:
    return wf.on_temporal(client, task_queue=TASK_QUEUE, **kwargs)


async def test_a_program_gives_the_same_events_outputs_and_states_in_process_and_on_temporal(client: Client) -> None:
    local = await approval_program(approval.build())
    on_temporal = await approval_program(durable(client, approval.workflow))
    assert on_temporal == local
    assert [state for _, state in local["calls"]][-1] == WorkflowRunState.IDLE
    assert len(local["calls"]) > 1  # it waited for a person at least once


async def test_streaming_yields_the_same_events_as_in_process(client: Client) -> None:
    async def program(wf: Runner) -> list[list[dict[str, Any]]]:
        ids: dict[str, str] = {}
        calls: list[list[dict[str, Any]]] = []
        events = [ev async for ev in wf.run(approval.SAMPLE_INPUT, stream=True)]
        calls.append(seen(events, ids))
        while requests := [e for e in events if isinstance(e, RequestInfoEvent)]:
            answers = {r.request_id: approval.auto_answer(r) for r in requests}
            events = [ev async for ev in wf.run(responses=answers, stream=True)]
            calls.append(seen(events, ids))
        return calls

    assert await program(durable(client, approval.workflow)) == await program(approval.build())


async def test_a_failed_run_raises_the_same_error_with_the_calls_events(client: Client) -> None:
    async def program(wf: Runner) -> tuple[str, str, list[str]]:
        with pytest.raises(ExecutorFailedError) as failed:
            await wf.run("boom")
        result = failed.value.result
        assert result is not None
        return type(failed.value).__name__, str(failed.value), [type(e).__name__ for e in result]

    local = await program(graphs.fatal)
    assert await program(durable(client, graphs.fatal)) == local
    assert local[2][-1] == "WorkflowFailedEvent"  # status events are in result.status_timeline(), as in MAF


async def test_a_bad_response_is_refused_before_any_is_delivered(client: Client) -> None:
    twin = durable(client, approval.workflow)
    result = await twin.run(approval.SAMPLE_INPUT)
    request = result.get_request_info_events()[0]
    answer = approval.auto_answer(request)
    with pytest.raises(UnknownRequestError, match="no pending request with id 'nope'"):
        await twin.run(responses={request.request_id: answer, "nope": answer})
    assert twin.handle is not None
    assert [r.request_id for r in await twin.handle.pending_requests()] == [request.request_id]
    assert twin.run_state == WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    await twin.cancel()


async def test_calls_the_in_process_workflow_refuses_are_refused_alike(client: Client) -> None:
    calls: list[Callable[[Runner], Awaitable[Any]]] = [
        lambda wf: wf.run(),
        lambda wf: wf.run("x", checkpoint_id="c"),
        lambda wf: wf.run(responses={"r": 1}),
    ]
    for call in calls:
        with pytest.raises(WorkflowError) as local:
            await call(approval.build())
        with pytest.raises(WorkflowError) as on_temporal:
            await call(durable(client, approval.workflow))
        assert str(on_temporal.value) == str(local.value)


async def test_two_calls_started_back_to_back_cannot_both_run_and_a_dropped_stream_frees_the_workflow(
    client: Client,
) -> None:
    twin = durable(client, approval.workflow)
    first = twin.run(approval.SAMPLE_INPUT)
    with pytest.raises(WorkflowError, match="already running"):
        twin.run(approval.SAMPLE_INPUT)
    result = await first
    unread = twin.run(responses={}, stream=True)
    del unread  # never iterated: must not leave the workflow reserved
    answers = {r.request_id: approval.auto_answer(r) for r in result.get_request_info_events()}
    assert (await twin.run(responses=answers)).get_final_state() in (
        WorkflowRunState.IDLE,
        WorkflowRunState.IDLE_WITH_PENDING_REQUESTS,
    )
    if twin.run_state != WorkflowRunState.IDLE:
        await twin.cancel()


async def test_cancelling_the_callers_task_leaves_the_run_going_and_the_next_call_picks_it_up(
    client: Client,
) -> None:
    twin = durable(client, approval.workflow)
    result = await twin.run(approval.SAMPLE_INPUT)
    handle = twin.handle
    assert handle is not None
    following = asyncio.ensure_future(twin.run(responses={}))  # follows a run that waits for a person
    done, _ = await asyncio.wait({following}, timeout=0.5)
    assert not done  # nothing new happens in a run that waits: the call goes on following it
    following.cancel()
    with pytest.raises(asyncio.CancelledError):
        await following
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    answers = {r.request_id: approval.auto_answer(r) for r in result.get_request_info_events()}
    result = await twin.run(responses=answers)
    assert result.get_final_state() in (WorkflowRunState.IDLE, WorkflowRunState.IDLE_WITH_PENDING_REQUESTS)
    await twin.cancel()


async def test_a_checkpoint_of_a_closed_run_starts_it_again_from_there_under_its_id(client: Client) -> None:
    workflow_id = f"durable-{uuid.uuid4().hex[:8]}"
    twin = durable(client, approval.workflow, id=workflow_id)
    first = await twin.run(approval.SAMPLE_INPUT)
    request = first.get_request_info_events()[0]
    assert twin.handle is not None
    taken = await twin.handle.checkpoint()
    assert taken is not None
    finished = await approval_answers_until_done(twin, first)
    # A new object in another process would do the same: only the id and the checkpoint id are needed.
    again = durable(client, approval.workflow, id=workflow_id)
    restored = await again.run(checkpoint_id=taken["checkpoint_id"])
    assert restored.get_final_state() == WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert [r.request_id for r in again.pending_requests] == [request.request_id]
    assert (await approval_answers_until_done(again, restored)).get_outputs() == finished.get_outputs()


async def approval_answers_until_done(wf: Runner, result: WorkflowRunResult) -> WorkflowRunResult:
    while result.get_request_info_events():
        result = await wf.run(
            responses={r.request_id: approval.auto_answer(r) for r in result.get_request_info_events()}
        )
    return result


# -- a streamed call paces its run (issue #39: Agent Framework's checkpoint_with_resume on the twin) ----------


async def _left_after_superstep(wf: Runner, superstep: int, *, close: bool) -> str:
    """Stream a run, and leave the stream once ``superstep`` has completed (``aclose()``, or ``break`` alone).

    Returns the run's id, as its ``started`` event gives it.
    """
    events = wf.run(sc.Count(n=1, upto=6), stream=True)
    run_id = ""
    async for ev in events:
        if isinstance(ev, WorkflowStartedEvent):
            run_id = ev.run_id
        if isinstance(ev, SuperStepCompletedEvent) and ev.superstep == superstep:
            break
    if close:
        await events.aclose()  # type: ignore[attr-defined]
    else:
        del events  # dropped: closed when collected, as a sample's rebinding does it
        gc.collect()
    return run_id


async def _closed(handle: Any, status: WorkflowExecutionStatus) -> None:
    async with asyncio.timeout(30):
        while (await handle.describe()).status != status:
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("close", [True, False], ids=["aclose", "break-and-drop"])
async def test_leaving_a_stream_stops_the_run_where_its_reader_left_it_as_in_process(
    client: Client, close: bool
) -> None:
    """In process a stream is the run: its reader leaving stops it there, with no checkpoint past that point. The
    twin's run is paced by its reader (docs/maf.md): it waits where the reader left it and is cancelled there."""
    local_run = await _left_after_superstep(sc.resumable, 2, close=close)
    local = [c.superstep for c in await sc.resume_store.list_checkpoints(workflow_name="cf_resume", run_id=local_run)]
    twin = durable(client, sc.resumable)
    await _left_after_superstep(twin, 2, close=close)
    assert twin.handle is not None
    await _closed(twin.handle.handle, WorkflowExecutionStatus.CANCELED)
    assert [c["superstep"] for c in await twin.handle.checkpoints()] == local == [0, 1, 2]
    # Resumed from the latest checkpoint, it goes on from there, as in process.
    resumed = await twin.run(checkpoint_id=(await twin.handle.checkpoints())[-1]["checkpoint_id"])
    assert [e.superstep for e in resumed if isinstance(e, SuperStepStartedEvent)] == [3, 4, 5, 6, 7]
    await twin.cancel()


async def test_cancelling_a_streamed_caller_stops_following_and_the_run_goes_on(client: Client) -> None:
    twin = durable(client, sc.resumable)
    reading = asyncio.Event()

    async def follow() -> None:
        async for ev in twin.run(sc.Count(n=1, upto=6), stream=True):
            if isinstance(ev, SuperStepCompletedEvent) and ev.superstep == 1:
                reading.set()
                await asyncio.Event().wait()  # reads no further

    task = asyncio.ensure_future(follow())
    await asyncio.wait_for(reading.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert twin.handle is not None
    async with asyncio.timeout(30):  # it goes on to the confirmer's question, unread
        while not await twin.handle.pending_requests():
            await asyncio.sleep(0.05)
    assert (await twin.handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await twin.cancel()


async def test_a_reader_that_stops_polling_without_a_word_holds_its_run_no_longer_than_the_lapse() -> None:
    """A caller that crashed never says it left: after ``READER_LAPSE`` the run goes on (skipped here)."""
    async with await GraphTestEnvironment.start_time_skipping([sc.chain]) as env:
        handle = await env.start_run(sc.chain, "hello", reader="a-reader-that-crashed")
        async with asyncio.timeout(60):
            result = await handle.result()
        assert result["status"] == "completed"
        warnings = (await handle.status())["warnings"]
        assert any("has not read on for 30 s" in w["message"] for w in warnings)


async def test_a_second_call_reads_on_after_a_step_that_streamed_batches_of_live_events(client: Client) -> None:
    """A step publishes 300 live items (a few stream positions: a step's live events go in batches) and asks;
    the answering call yields what came after, not a slice cut by a count of the events seen before."""
    from tests.integration import live_graphs

    async def program(wf: Runner) -> tuple[list[str], list[str], list[Any]]:
        first = [ev async for ev in wf.run(300, stream=True)]
        (asked,) = [e for e in first if isinstance(e, RequestInfoEvent)]
        second = [ev async for ev in wf.run(responses={asked.request_id: "hello"}, stream=True)]
        outputs = [e.data for e in second if isinstance(e, WorkflowOutputEvent)]
        live = [e.message for e in first if isinstance(e, StepProgressEvent)]
        return live, [type(e).__name__ for e in second], outputs

    live, second, outputs = await program(durable(client, live_graphs.chatty))
    assert live == [str(i) for i in range(300)]
    assert outputs == ["heard hello"]
    local = await program(live_graphs.chatty)
    assert (live, second, outputs) == local
