"""Issue 23 on a real dev server: looping cause chains, long child ids; in process: ``tests/test_robustness.py``."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType, ParentClosePolicy
from temporalio.client import Client, WorkflowExecutionStatus

from temporal_workflows._engine.ids import MAX_ID_BYTES, bounded_id
from temporal_workflows._engine.limits import OMITTED_KEY, TRUNCATED_KEY
from temporal_workflows.errors import ExecutorFailedError, WorkflowError
from temporal_workflows.temporal import start_run
from temporal_workflows.temporal.integration import step_activity_name
from tests.conftest import TASK_QUEUE
from tests.integration import robust_graphs
from tests.integration.agent_graphs import AVAILABLE, GRAPHS
from tests.integration.test_subworkflows import until_history_has

pytestmark = pytest.mark.usefixtures("worker")


async def _failure(wf: object, message: str, client: Client, workflow_id: str) -> ExecutorFailedError:
    handle = await start_run(client, wf, message, id=workflow_id, task_queue=TASK_QUEUE)  # type: ignore[arg-type]
    with pytest.raises(ExecutorFailedError) as info:
        await asyncio.wait_for(handle.result(), 60)
    return info.value


@pytest.mark.parametrize("kind", ["cause", "context", "deep"])
async def test_a_step_error_with_a_looping_cause_chain_reads_as_in_process(
    kind: str, client: Client, workflow_id: str
) -> None:
    with pytest.raises(ExecutorFailedError) as local:
        await robust_graphs.cause_cycles.run(kind)
    error = await _failure(robust_graphs.cause_cycles, kind, client, workflow_id)
    assert "recursion" not in str(error)
    assert (error.executor_id, error.error_type, error.detail) == (
        local.value.executor_id,
        local.value.error_type,
        local.value.detail,
    )


@pytest.mark.skipif(not AVAILABLE, reason="needs the agent extras")
async def test_an_agents_model_error_reads_as_in_process(client: Client, workflow_id: str) -> None:
    error = await _failure(GRAPHS["exploding"], "zz-exploding hello", client, workflow_id)
    assert (error.executor_id, error.error_type, error.detail) == (
        "volatile",
        "UpstreamModelError",
        "the upstream model exploded",
    )


# -- child workflow ids within Temporal's limit; children close with their parent (item 2) --------


async def _children(client: Client, workflow_id: str) -> list[str]:
    """The ids of the child workflows ``workflow_id`` started (read from its history)."""
    ids: list[str] = []
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events():
        if ev.HasField("start_child_workflow_execution_initiated_event_attributes"):
            attrs = ev.start_child_workflow_execution_initiated_event_attributes
            assert attrs.parent_close_policy == ParentClosePolicy.PARENT_CLOSE_POLICY_TERMINATE
            ids.append(attrs.workflow_id)
    return ids


async def test_sub_workflows_nested_deep_under_long_executor_ids_complete(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, robust_graphs.deep, "hi", id=workflow_id, task_queue=TASK_QUEUE)
    result = await asyncio.wait_for(handle.result(), 60)
    assert result["outputs"] == ["leaf:hi"]
    lineage, parent = [], workflow_id
    while children := await _children(client, parent):
        assert len(children) == 1
        parent = children[0]
        lineage.append(parent)
        assert len(parent.encode()) <= MAX_ID_BYTES
        described = await client.get_workflow_handle(parent).describe()
        assert described.status == WorkflowExecutionStatus.COMPLETED
        assert len(described.workflow_type.encode()) <= MAX_ID_BYTES
    assert len(lineage) == robust_graphs.DEPTH
    assert robust_graphs.nesting_id(1) in lineage[0] and lineage[-1].endswith(robust_graphs.nesting_id(5) + "/1.0")


async def test_a_child_whose_plain_id_would_be_1002_characters_gets_a_bounded_one(client: Client) -> None:
    suffix = "/child/1.0"
    workflow_id = "long-" + "w" * (1002 - len(suffix) - 5)
    assert len(workflow_id + suffix) == 1002
    handle = await start_run(client, robust_graphs.one_level, "hi", id=workflow_id, task_queue=TASK_QUEUE)
    result = await asyncio.wait_for(handle.result(), 60)
    assert result["outputs"] == ["leaf:hi"]
    [child] = await _children(client, workflow_id)
    assert child == bounded_id(workflow_id + suffix) and len(child) <= MAX_ID_BYTES and child.endswith(suffix)


async def test_the_descendants_of_a_terminated_run_are_terminated_with_it(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, robust_graphs.dozing_tree, "zz", id=workflow_id, task_queue=TASK_QUEUE)
    child = f"{workflow_id}/outer/1.0"
    grandchild = f"{child}/inner/1.0"
    await until_history_has(client, grandchild, step_activity_name("robust_dozing.outer.inner", "dozing"))
    await handle.handle.terminate("the operator stops the whole tree")
    for descendant in (child, grandchild):
        async with asyncio.timeout(30):
            while (status := (await client.get_workflow_handle(descendant).describe()).status) in (
                WorkflowExecutionStatus.RUNNING,
                None,
            ):
                await asyncio.sleep(0.1)  # polling a server-side state change, with a bound
        assert status == WorkflowExecutionStatus.TERMINATED, descendant


# -- committed state past one payload (item 3) -----------------------------------------------------


async def test_state_adding_up_past_the_limit_fails_the_step_naming_the_keys_and_the_state_stays_readable(
    client: Client, workflow_id: str
) -> None:
    with pytest.raises(ExecutorFailedError) as local:
        await robust_graphs.large_state.run(5)
    handle = await start_run(client, robust_graphs.large_state, 5, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(ExecutorFailedError) as remote:
        await asyncio.wait_for(handle.result(), 60)
    error = remote.value
    # Four values of 1.8 MB were committed and read by the next step (the state in pages: a query each).
    assert (error.executor_id, error.superstep, error.error_type) == ("write_e", 5, "PayloadTooLargeError")
    assert str(error) == str(local.value)
    assert "'e' (1,800,037 bytes, by 'write_e'), beside 'a' (1,800,037 bytes), 'b' (1,800,037 bytes)" in error.detail
    state = await handle.state()  # never "Blob data size exceeds limit": cut to one payload, with a note
    assert list(state) == ["a", TRUNCATED_KEY] and len(state["a"]) == robust_graphs.LARGE_STATE
    assert state[TRUNCATED_KEY].startswith("3 of 4 state keys")
    assert "PayloadTooLargeError" in (await handle.status())["error"]


async def test_a_long_history_with_state_too_large_to_carry_goes_on_in_the_same_execution_and_says_so(
    client: Client, workflow_id: str
) -> None:
    # Four 1.8 MB values (7.2 MB): within the state's limit, past what a continue-as-new carries. History
    # reaches max_history_events every few supersteps: past one payload of state the run goes on in the same
    # execution (once noted in its status) rather than fail, and completes.
    handle = await start_run(
        client, robust_graphs.large_state, 4, id=workflow_id, task_queue=TASK_QUEUE, max_history_events=20
    )
    result = await asyncio.wait_for(handle.result(), 120)
    assert result["outputs"] == ["wrote ['a', 'b', 'c', 'd', 'e']"]
    notes = [w["message"] for w in (await handle.status())["warnings"]]
    assert len(notes) == 1 and "too large for a continue-as-new to carry" in notes[0], notes
    # It continued as new while the state fitted (after 'a'), then no more: the latest run holds 'b' to 'e'.
    kinds = [e.event_type async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    assert kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) >= 4


async def test_state_past_one_payload_is_checkpointed_every_superstep(client: Client, workflow_id: str) -> None:
    # A checkpoint is saved as a delta by a local activity (only its id reaches history): 7.2 MB fits.
    handle = await start_run(
        client, robust_graphs.large_state, 4, id=workflow_id, task_queue=TASK_QUEUE, checkpoint_every=1
    )
    result = await asyncio.wait_for(handle.result(), 120)
    assert result["outputs"] == ["wrote ['a', 'b', 'c', 'd', 'e']"]
    checkpoints = await handle.checkpoints()
    assert [c["superstep"] for c in checkpoints][-1] == 5


async def test_a_reset_to_a_checkpoint_past_one_payload_is_refused_and_the_run_goes_on(
    client: Client, workflow_id: str
) -> None:
    handle = await start_run(
        client,
        robust_graphs.large_state,
        4,
        id=workflow_id,
        task_queue=TASK_QUEUE,
        checkpoint_every=1,
        keep_alive=True,
    )

    async def idle_after_superstep_5(resets: int = 0) -> None:
        async with asyncio.timeout(120):
            while True:
                status = await handle.status()
                assert status["status"] != "failed", status["error"]
                if status["status"] == "idle" and status["superstep"] >= 5 and status.get("resets", 0) == resets:
                    return
                await asyncio.sleep(0.1)  # polling the run's state, with a bound

    await idle_after_superstep_5()
    at = {c["superstep"]: c["checkpoint_id"] for c in await handle.checkpoints()}
    # After superstep 4 the state is 7.2 MB: a continue-as-new could not carry it.
    with pytest.raises(WorkflowError, match="so a run cannot restore it"):
        await handle.reset(checkpoint_id=at[4])
    assert (await handle.status())["status"] == "idle"
    await handle.reset(checkpoint_id=at[1])  # 1.8 MB of state: fits, and the run goes on from there
    await idle_after_superstep_5(resets=1)
    await handle.close()
    result = await asyncio.wait_for(handle.result(), 120)
    assert result["outputs"][-1] == "wrote ['a', 'b', 'c', 'd', 'e']"


async def test_waiting_children_adding_up_past_the_limit_fail_the_step_naming_their_keys(
    client: Client, workflow_id: str
) -> None:
    handle = await start_run(client, robust_graphs.hoarding, 7, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(ExecutorFailedError) as info:
        await asyncio.wait_for(handle.result(), 120)
    error = info.value
    assert (error.executor_id, error.error_type) == ("hoarders", "PayloadTooLargeError")
    # The five largest of the seven children's keys (their sizes differ by a few bytes) are named.
    assert sum(f"'@hoarders/sub/2.{i}' (1,300," in error.detail for i in range(7)) == 5, error.detail
    assert await handle.state() == {}


async def test_waiting_children_with_large_state_past_one_payload_fit_and_their_answers_complete_the_run(
    client: Client, workflow_id: str
) -> None:
    # Three children of 1.3 MB each: 3.9 MB in the parent's state, past one payload, within STATE_PAYLOADS.
    handle = await start_run(client, robust_graphs.hoarding, 3, id=workflow_id, task_queue=TASK_QUEUE)
    async with asyncio.timeout(60):
        while len(pending := await handle.pending_requests()) < 3:
            await asyncio.sleep(0.1)  # polling the run's state, with a bound
    assert await handle.state() == {}
    for i, request in enumerate(pending):
        await handle.respond(request.request_id, f"enough {i}")
    result = await asyncio.wait_for(handle.result(), 120)
    assert sorted(result["outputs"]) == ["enough 0", "enough 1", "enough 2"]


async def test_open_requests_too_large_together_are_listed_with_the_largest_data_cut_and_can_be_answered(
    client: Client, workflow_id: str
) -> None:
    handle = await start_run(client, robust_graphs.large_requests, 3, id=workflow_id, task_queue=TASK_QUEUE)
    async with asyncio.timeout(30):
        while (await handle.status())["pending_requests"] < 3:
            await asyncio.sleep(0.1)  # polling the run's state, with a bound
    pending = await handle.pending_requests()  # never "Blob data size exceeds limit"
    assert len(pending) == 3 and all(r.response_schema for r in pending)
    cut = [r for r in pending if r.data is None]
    assert 1 <= len(cut) < 3 and all("900,0" in (r.model_dump()[OMITTED_KEY] or "") for r in cut)
    for r in pending:
        await handle.respond(r.request_id, "ok")
    result = await asyncio.wait_for(handle.result(), 60)
    assert sorted(result["outputs"]) == ["0: ok", "1: ok", "2: ok"]
