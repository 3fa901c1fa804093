"""A deploy without Worker Versioning that replaces every worker: waiting runs wait, they do not fail.

Issue #23, item 11. A rolling deploy that removed the old workers failed the
runs waiting for input within 20 seconds (``GraphSignatureMismatchError`` x3):
the new workers refuse a step of another graph signature, and the step's
retries ran out. Now the step is scheduled again, with backoff, for up to
``SIGNATURE_WAIT``, the run's status says what it waits for, and it finishes
on its own graph once a worker of it is back. docs/bad-input.md has the row.
"""

from __future__ import annotations

import asyncio
import io
import uuid
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, start_run
from temporal_workflows.temporal._client.unversioned import check_open_runs
from temporal_workflows.temporal._protocol import SIGNATURE_PREFIX
from tests.integration.test_versioning import NAME, pending_id, until, version


async def _worker(address: str, finisher: str, queue: str) -> tuple[Client, Worker]:
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin([version(finisher)])])
    return client, Worker(client, task_queue=queue)


async def _warned(run: RunHandle) -> list[str]:
    status: dict[str, Any] = await run.status()
    return [w["message"] for w in status["warnings"] if "waits for a worker hosting graph" in w["message"]]


async def test_a_run_whose_workers_were_all_replaced_waits_for_its_graph_and_says_so(temporal_address: str) -> None:
    queue = f"unversioned-{uuid.uuid4().hex[:8]}"
    old_client, old_worker = await _worker(temporal_address, "finish_a", queue)
    async with old_worker:
        run = await start_run(old_client, NAME, "topic", task_queue=queue)
        request_id = await pending_id(run)
    new_client, new_worker = await _worker(temporal_address, "finish_b", queue)
    async with new_worker:
        # The new worker warns at start-up that it cannot run this open run's steps.
        out = io.StringIO()
        assert await check_open_runs(new_client, [version("finish_b")], out) == 1
        assert "1 open run of graph 'it_versioned'" in out.getvalue()
        await run.respond(request_id, "word", wait=False)
        await until("the run says what it waits for", lambda: _warned(run), timeout=60)
        (warning,) = await _warned(run)
        old_signature = version("finish_a").graph_signature_hash[:SIGNATURE_PREFIX]
        assert f"with signature {old_signature}" in warning and "Worker Versioning" in warning
        status = await run.status()
        assert status["status"] != "failed" and status["error"] is None
        assert status["graph_signature"] == old_signature
    # A worker of the run's graph comes back: the step runs there, on the run's own edges.
    _, back = await _worker(temporal_address, "finish_a", queue)
    async with back:
        result = await asyncio.wait_for(run.result(), 120)
    assert result["outputs"] == ["finish_a:word"]
