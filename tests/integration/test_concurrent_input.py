"""Many senders at once: every input is accepted once, and the run's history still replays.

Issue #23, item 1. 60 to 150 concurrent ``RunHandle.send`` calls to one run
made its history unreplayable: after a worker restart the run's next task
failed (``UpdateMachine in state CompletedCommandCreated says the transition
is invalid during event ... WorkflowExecutionUpdateAccepted``) and every send
and query was refused. The cause is an SDK behaviour (a query reaching a run
while a local activity of its task runs moves that activity's result to the
next activation, after new updates), worked around in ``temporal/_workflow/locals.py``.
The senders also met the server's own limits (``in-flight updates``), which
the client now retries with backoff. docs/bad-input.md has the row.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from temporal_workflows.temporal import RunHandle, start_run
from temporal_workflows.temporal._client.client import _busy
from tests.integration import graphs
from tests.integration.test_replay import RUNNERS, _replayer

SENDERS = 200


async def _query_meanwhile(handle: RunHandle, stop: asyncio.Event) -> int:
    """Query the run's status until ``stop``: queries are what moved a local activity's result (see the module)."""
    answered = 0
    while not stop.is_set():
        await handle.status()
        answered += 1
    return answered


async def test_concurrent_senders_are_each_accepted_once_and_the_history_replays_after_a_worker_restart(
    client: Client,
) -> None:
    queue = f"concurrent-{uuid.uuid4().hex[:8]}"  # its own workers, so one can be restarted
    async with Worker(client, task_queue=queue):
        handle = await start_run(client, graphs.collector, "first", task_queue=queue, keep_alive=True)
        stop = asyncio.Event()
        pollers = [asyncio.create_task(_query_meanwhile(handle, stop)) for _ in range(2)]
        sent = [f"m{i}" for i in range(SENDERS)]
        accepted = await asyncio.gather(*(handle.send("collect", text) for text in sent))
        stop.set()
        assert sum(await asyncio.gather(*pollers)) > 0
        assert accepted == [{"executor_id": "collect", "accepted": True}] * SENDERS
    # A new worker replays the run from its history before it takes the next input.
    async with Worker(client, task_queue=queue):
        assert await asyncio.wait_for(handle.send("collect", "after the restart"), 60) == {
            "executor_id": "collect",
            "accepted": True,
        }
        await handle.close()
        result = await asyncio.wait_for(handle.result(), 120)
    # Each input counted once: every accepted message is one output, none twice.
    expected = sorted(t.upper() for t in ["first", *sent, "after the restart"])
    assert sorted(result["outputs"]) == expected
    history = await handle.handle.fetch_history()
    for runner in RUNNERS:
        replayed = await _replayer(runner).replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, (runner, str(replayed.replay_failure)[:300])


def test_what_the_client_retries_for_load() -> None:
    limit = "limit on number of concurrent in-flight updates has been reached (10)"
    assert _busy(RPCError(limit, RPCStatusCode.RESOURCE_EXHAUSTED, b"")) == limit
    assert _busy(RPCError("consistent query buffer is full", RPCStatusCode.RESOURCE_EXHAUSTED, b""))
    assert _busy(RPCError("workflow update was aborted", RPCStatusCode.UNAVAILABLE, b""))
    assert _busy(RPCError("buffered query cleared, please retry", RPCStatusCode.UNAVAILABLE, b""))
    assert _busy(RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")) is None
    timeout = RPCError("Timeout expired", RPCStatusCode.DEADLINE_EXCEEDED, b"")
    assert _busy(timeout) == "Timeout expired" and _busy(timeout, idempotent=False) is None
    assert _busy(RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b"")) is None
    assert _busy(WorkflowUpdateFailedError(ApplicationError("busy", type="RunBusyError"))) == "busy"
    unprocessed = "UnprocessedUpdate: Workflow Update is rejected because it wasn't processed by worker."
    assert _busy(WorkflowUpdateFailedError(ApplicationError(unprocessed))) == unprocessed
    other = WorkflowUpdateFailedError(ApplicationError("no", type="UndeliverableMessageError"))
    assert _busy(other) is None
