"""Issue 23 on a real dev server: looping cause chains; the in-process twins are in ``tests/test_robustness.py``."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from temporal_workflows import ExecutorFailedError
from temporal_workflows.temporal import start_run
from tests.conftest import TASK_QUEUE
from tests.integration import robust_graphs
from tests.integration.agent_graphs import AVAILABLE, GRAPHS

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
