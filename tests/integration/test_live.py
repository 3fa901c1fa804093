"""Live events on Temporal: a running step's events reach RunHandle.events() before the step completes,
tagged, and a retry never shows a reader stale or duplicated output."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from temporal_workflows import WorkflowEvent
from temporal_workflows._live import MAX_LIVE_EVENT_BYTES
from temporal_workflows.events import (
    ExecutorCompletedEvent,
    LiveCommittedEvent,
    LiveEvent,
    LiveOmittedEvent,
    StepProgressEvent,
    StepRetryEvent,
)
from temporal_workflows.temporal import RunHandle, start_run
from tests.conftest import TASK_QUEUE
from tests.integration import live_graphs

pytestmark = pytest.mark.usefixtures("worker")


async def _started(handle: RunHandle) -> None:
    """Until the run has scheduled its first step, read from history: nothing is asked of the run while its
    first workflow task runs the topology local activity (see test_agents_temporal._started)."""

    async def scan() -> None:
        async for ev in handle.handle.fetch_history_events(wait_new_event=True):
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                return

    await asyncio.wait_for(scan(), 30)


async def _all(handle: RunHandle, **kw: object) -> list[WorkflowEvent]:
    return await asyncio.wait_for(_collect(handle, **kw), 60)


async def _collect(handle: RunHandle, **kw: object) -> list[WorkflowEvent]:
    return [e async for e in handle.events(**kw)]  # type: ignore[arg-type]


async def test_a_running_steps_live_events_reach_the_reader_before_it_completes(
    client: Client, workflow_id: str
) -> None:
    handle = await start_run(client, live_graphs.gated, 3, id=workflow_id, task_queue=TASK_QUEUE)
    await _started(handle)
    seen: list[WorkflowEvent] = []
    first_latency = None
    try:
        async with asyncio.timeout(60):
            async for ev in handle.events():
                seen.append(ev)
                if isinstance(ev, StepProgressEvent) and first_latency is None:
                    first_latency = time.time() - ev.data["at"]
                if sum(isinstance(e, StepProgressEvent) for e in seen) == 3:
                    break
        # The step is still waiting at its gate: nothing of its completion has been published.
        assert not any(isinstance(e, (ExecutorCompletedEvent, LiveCommittedEvent)) for e in seen)
        assert (await handle.status())["in_flight"] == ["narrator"]
    finally:
        live_graphs.GATES[workflow_id].set()
    assert (await handle.result())["outputs"] == ["told"]
    assert first_latency is not None and first_latency < 5  # the bench measures it on a quiet machine

    events = await _all(handle)
    live = [e for e in events if isinstance(e, LiveEvent)]
    assert [(e.executor_id, e.superstep, e.index, e.attempt) for e in live] == [("narrator", 1, 0, 1)] * 3
    assert [e.seq for e in live] == [1, 2, 3]  # progress events are never merged
    assert [e.message for e in live if isinstance(e, StepProgressEvent)] == ["piece 0", "piece 1", "piece 2"]
    types = [e.type for e in events]
    # Live items precede the step's committed marker, which precedes its completion.
    assert types.index("live_committed") > max(i for i, t in enumerate(types) if t == "progress")
    assert types.index("executor_completed") > types.index("live_committed")
    (marker,) = [e for e in events if isinstance(e, LiveCommittedEvent)]
    assert (marker.executor_id, marker.superstep, marker.attempt, marker.items) == ("narrator", 1, 1, 3)


async def test_a_retried_step_shows_a_retry_first_and_the_committed_view_only_the_attempt_that_completed(
    client: Client, workflow_id: str
) -> None:
    handle = await start_run(client, live_graphs.retried, "alpha beta gamma", id=workflow_id, task_queue=TASK_QUEUE)
    assert (await handle.result())["outputs"] == ["alpha beta gamma"]

    live_view = [e for e in await _all(handle) if isinstance(e, (LiveEvent, LiveCommittedEvent))]
    assert [(type(e).__name__, e.attempt, getattr(e, "seq", None)) for e in live_view] == [
        ("StepProgressEvent", 1, 1),
        ("StepProgressEvent", 1, 2),
        ("StepRetryEvent", 2, 0),
        ("StepProgressEvent", 2, 1),
        ("StepProgressEvent", 2, 2),
        ("StepProgressEvent", 2, 3),
        ("LiveCommittedEvent", 2, None),
    ]
    retry = live_view[2]
    assert isinstance(retry, StepRetryEvent) and retry.executor_id == "stutter"

    # After the fact, the committed view shows only what the completed attempt published, and no retry.
    committed = [e for e in await _all(handle, view="committed") if isinstance(e, (LiveEvent, LiveCommittedEvent))]
    assert [getattr(e, "message", None) for e in committed] == [
        "alpha (attempt 2)",
        "beta (attempt 2)",
        "gamma (attempt 2)",
        None,
    ]
    assert all(e.attempt == 2 for e in committed)
    marker = committed[-1]
    assert isinstance(marker, LiveCommittedEvent) and marker.items == 3


async def test_events_refuses_an_unknown_view(client: Client) -> None:
    handle = RunHandle(client.get_workflow_handle("no-such-run"), client)
    with pytest.raises(ValueError, match="view"):
        await anext(handle.events(view="everything"))  # type: ignore[arg-type]


async def _signal_sizes(client: Client, workflow_id: str) -> list[int]:
    """Bytes of each live-event batch (publish signal) the run's history recorded."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        sum(p.ByteSize() for p in e.workflow_execution_signaled_event_attributes.input.payloads)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        and e.workflow_execution_signaled_event_attributes.signal_name == "__temporal_workflow_stream_publish"
    ]


async def test_a_tight_loop_of_100_000_small_live_events_reaches_the_reader_whole_in_order_and_batched(
    client: Client, workflow_id: str
) -> None:
    count = 100_000
    handle = await start_run(client, live_graphs.flooded, count, id=workflow_id, task_queue=TASK_QUEUE)
    # Read while it runs, as a watcher does (reading a closed run's stream replays its history per poll).
    events = await asyncio.wait_for(_collect(handle), 300)
    assert (await asyncio.wait_for(handle.result(), 300))["outputs"] == [count]
    live = [e for e in events if isinstance(e, StepProgressEvent)]
    assert [e.message for e in live] == [str(i) for i in range(count)]
    assert [e.seq for e in live] == list(range(1, count + 1))
    (marker,) = [e for e in events if isinstance(e, LiveCommittedEvent)]
    assert marker.items == count
    # Bounded batches: every signal stays near 256 KiB (the limit counts the items; the signal adds its framing).
    sizes = await _signal_sizes(client, workflow_id)
    assert len(sizes) > 50
    assert max(sizes) < 256 * 1024 + 4096


async def test_live_events_over_the_per_event_limit_are_replaced_by_a_note_and_the_rest_arrive_in_order(
    client: Client, workflow_id: str
) -> None:
    count = 10_000
    handle = await start_run(client, live_graphs.mixed_sizes, count, id=workflow_id, task_queue=TASK_QUEUE)
    assert (await asyncio.wait_for(handle.result(), 300))["outputs"] == [count]
    for view in ("live", "committed"):
        events = await asyncio.wait_for(_collect(handle, view=view), 300)
        live = [e for e in events if isinstance(e, LiveEvent)]
        assert [e.seq for e in live] == list(range(1, count + 1))  # nothing missing, nothing out of order
        omitted = [e for e in live if isinstance(e, LiveOmittedEvent)]
        assert [e.seq - 1 for e in omitted] == [i for i in range(count) if i % 2500 == 1]
        note = omitted[0]
        assert (note.event_type, note.event_class) == ("progress", "temporal_workflows._live:StepProgressEvent")
        assert note.size > live_graphs.BIG and note.limit == MAX_LIVE_EVENT_BYTES
        assert "not streamed" in note.note
        kept = [e for e in live if isinstance(e, StepProgressEvent)]
        assert [e.message for e in kept] == [str(i) for i in range(count) if i % 2500 != 1]
        assert all(len(e.data) == 300_000 for e in kept if int(e.message) % 1000 == 2)
    # An event larger than a batch goes alone; no signal comes near the payload limit.
    assert max(await _signal_sizes(client, workflow_id)) < 500_000
