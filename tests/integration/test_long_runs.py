"""Runs that go on for ever: continue-as-new at superstep boundaries keeps every history short.

These tests use their own dev server, started with a low
``limit.historyCount.suggestContinueAsNew`` so Temporal itself suggests
continuing as new after a few hundred events.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from examples import approval
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, start_dev_server, start_run
from tests.conftest import hosted_workflows
from tests.integration import graphs
from tests.integration.streams import events_until, nth

SUGGEST_AFTER = 400
QUEUE = "tw-long"


@pytest.fixture(scope="module")
async def long_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(
        extra_args=["--dynamic-config-value", f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER}"]
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="module")
async def long_client(long_env: WorkflowEnvironment, checkpoint_db: Any) -> AsyncIterator[Client]:
    address = long_env.client.service_client.config.target_host
    client = await Client.connect(
        address, plugins=[TemporalWorkflowsPlugin(hosted_workflows(), checkpoint_storage=checkpoint_db)]
    )
    async with Worker(client, task_queue=QUEUE):
        yield client


async def _segments(client: Client, workflow_id: str) -> list[int]:
    """History length of every run in the workflow id's continue-as-new chain, oldest first."""
    lengths = []
    async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id, run_id=wf.run_id)
        history = await handle.fetch_history()
        last = history.events[-1].event_type
        assert last in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        ), last
        lengths.append(len(history.events))
    return lengths


async def test_a_2000_superstep_loop_continues_as_new_with_short_histories(long_client: Client) -> None:
    wid = f"long-{uuid.uuid4().hex[:8]}"
    handle = await start_run(long_client, graphs.ticker, graphs.Count(n=1, upto=2000), id=wid, task_queue=QUEUE)
    result = await handle.result()
    assert result["outputs"] == [{"rounds": 2000}]
    assert result["superstep"] == 2000
    assert await handle.state() == {"total": 2000 * 2001 // 2, "count": 2000}
    segments = await _segments(long_client, wid)
    assert len(segments) >= 10
    assert max(segments) < 10_000
    # Temporal's suggestion is followed at the first boundary after it: a superstep's worth later at most.
    assert max(segments) < SUGGEST_AFTER + 20
    status = await handle.status()
    assert status["continued_as_new"] == len(segments) - 1
    # Every step ran exactly once across all the segments.
    keys = graphs.EFFECTS[wid]
    assert len(keys) == 2000 == len(set(keys))


async def test_messages_sent_around_the_switch_are_never_lost(long_client: Client) -> None:
    """A keep-alive run continuing as new every few supersteps, fed by signals and updates at once."""
    wid = f"burst-{uuid.uuid4().hex[:8]}"
    handle = await start_run(
        long_client, graphs.collector, None, id=wid, task_queue=QUEUE, keep_alive=True, max_history_events=60
    )
    n = 40
    await asyncio.gather(*(handle.send("collect", f"m{i}", wait=i % 2 == 0) for i in range(n)))
    await handle.close()
    result = await handle.result()
    sent = sorted(f"m{i}" for i in range(n))
    assert sorted(result["outputs"]) == [m.upper() for m in sent]
    state = await handle.state()
    assert state["count"] == n and sorted(state["received"]) == sent
    assert len(await _segments(long_client, wid)) >= 2


async def test_a_pending_request_survives_continue_as_new(long_client: Client) -> None:
    wid = f"wait-{uuid.uuid4().hex[:8]}"
    handle = await start_run(
        long_client,
        approval.workflow,
        approval.ArticleRequest(topic="moths", max_rounds=3),
        id=wid,
        task_queue=QUEUE,
        max_history_events=25,
    )
    answered = 0
    while True:
        ev = (await events_until(handle, nth(RequestInfoEvent, answered + 1)))[-1]
        assert isinstance(ev, RequestInfoEvent)
        # Each answer is one superstep later, past the limit: the request crossed a continue-as-new.
        approve = answered == 2
        await handle.respond(ev.request_id, approval.ReviewDecision(approved=approve, feedback="more sources"))
        answered += 1
        if approve:
            break
    result = await handle.result()
    assert result["outputs"][0]["status"] == "published"
    assert len(await _segments(long_client, wid)) >= 2


async def test_checkpoints_and_reset_across_continue_as_new(long_client: Client) -> None:
    wid = f"cpcan-{uuid.uuid4().hex[:8]}"
    hold = graphs.Hold(150)
    graphs.HOLDS[wid] = hold
    handle: RunHandle = await start_run(
        long_client,
        graphs.ticker,
        graphs.Count(n=1, upto=160),
        id=wid,
        task_queue=QUEUE,
        checkpoint_every=25,
        max_history_events=200,
    )
    await asyncio.wait_for(hold.reached.wait(), 60)
    listed = await handle.checkpoints()
    assert [c["superstep"] for c in listed] == [0, 25, 50, 75, 100, 125]  # 0: the start, before superstep 1
    # Ids and parents chain across run segments.
    assert [c["parent_id"] for c in listed[1:]] == [c["checkpoint_id"] for c in listed[:-1]]
    assert len({c["temporal_run_id"] for c in listed}) > 1
    await handle.reset(checkpoint_id=listed[1]["checkpoint_id"])  # from an earlier segment
    hold.release.set()
    result = await handle.result()
    assert result["outputs"] == [{"rounds": 160}]
    assert await handle.state() == {"total": 160 * 161 // 2, "count": 160}
