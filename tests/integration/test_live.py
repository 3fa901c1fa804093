"""Live events on Temporal: a running step's events reach RunHandle.events() before the step completes,
tagged, and a retry never shows a reader stale or duplicated output."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from temporal_workflows import (
    ExecutorCompletedEvent,
    LiveCommittedEvent,
    LiveEvent,
    StepProgressEvent,
    StepRetryEvent,
    WorkflowEvent,
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
