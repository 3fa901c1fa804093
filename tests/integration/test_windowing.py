"""A wide superstep runs windowed: never more steps in flight than allowed, same commit order."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from temporal_workflows import Executor, Workflow, WorkflowBuilder, WorkflowContext, executor, handler
from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run

WIDTH = 12
_PENDING_ENDS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
}


@executor(id="deal")
async def deal(n: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(n)


class Dealt(Executor):
    """Later workers finish first, so completion order is the reverse of task order."""

    def __init__(self, i: int) -> None:
        super().__init__(id=f"w{i:02d}")
        self.i = i

    @handler
    async def take(self, n: int, ctx: WorkflowContext[int]) -> None:
        await asyncio.sleep((WIDTH - self.i) * 0.01)
        ctx.set_state("order", [self.id])
        await ctx.send_message(n + self.i)


@executor(id="tally")
async def tally(values: list[int], ctx: WorkflowContext[None, list[int]]) -> None:
    await ctx.yield_output(values)


def _graph() -> Workflow:
    workers = [Dealt(i) for i in range(WIDTH)]
    return (
        WorkflowBuilder(start_executor=deal, name="it_window")
        .add_fan_out_edges(deal, workers)
        .add_fan_in_edges(workers, tally)
        .add_state_reducer("order", "append")
        .build()
    )


def _most_in_flight(events: list) -> int:  # type: ignore[type-arg]
    pending = most = 0
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            pending += 1
            most = max(most, pending)
        elif e.event_type in _PENDING_ENDS:
            pending -= 1
    return most


async def test_a_wide_superstep_keeps_to_max_steps_in_flight_and_commits_in_task_order(
    temporal_address: str,
) -> None:
    graph = _graph()
    expected = await _graph().run(100)
    client = await Client.connect(temporal_address, plugins=[TemporalWorkflowsPlugin([graph])])
    queue = f"tw-window-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue):
        run = await start_run(client, graph, 100, task_queue=queue, max_steps_in_flight=3)
        result = await run.result()
        state = await run.state()
        history = await run.handle.fetch_history()
    assert result["outputs"] == expected.get_outputs() == [[100 + i for i in range(WIDTH)]]
    # The append reducer commits in task order although the steps finished in reverse.
    assert state["order"] == expected.get_state()["order"] == [f"w{i:02d}" for i in range(WIDTH)]
    assert _most_in_flight(list(history.events)) == 3


async def test_max_steps_in_flight_out_of_range_is_refused(client: Client, workflow_id: str) -> None:
    with pytest.raises(ValueError, match="max_steps_in_flight must be 1 to 1000, not 0"):
        await start_run(client, "research", "x", id=workflow_id, max_steps_in_flight=0)
    # A plain SDK start cannot be checked by the client: the run fails at once, saying why.
    handle = await client.start_workflow(
        "research", {"message": "x", "max_steps_in_flight": 5000}, id=workflow_id, task_queue="tw-tests"
    )
    with pytest.raises(WorkflowFailureError) as info:  # the plain SDK handle: the SDK's error, of our type
        await handle.result()
    assert isinstance(info.value.cause, ApplicationError) and info.value.cause.type == "InvalidRunInputError"
    assert "max_steps_in_flight must be 1 to 1000, not 5000" in str(info.value.cause)
