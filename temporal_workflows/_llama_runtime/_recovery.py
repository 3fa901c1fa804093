"""A step whose worker process died on this host is retried at once, not after its heartbeat timeout.

Temporal learns that a worker is gone when the step's heartbeats stop for ``heartbeat_timeout`` (30 s by
default), then retries the step on another worker. LlamaIndex's loop keeps counting its own ``timeout``
meanwhile (45 s by default), so a program killed mid-step and started again (LlamaIndex's DBOS example,
``kill -9`` of a worker) saw its resumed run time out while Temporal waited. DBOS resumes such a run at
once, because its new process knows the old one is gone. So does this runtime, where it can know it:

* a worker's identity is ``<pid>@<host>`` (the SDK's default). When a ``TemporalRuntime`` worker starts
  (in process with ``worker=True``, or ``rt.worker(client)``: the CLI's too), and when a program attaches
  to a run (``run(run_id=...)`` of a run that exists, ``get_external_adapter``), the run's steps still
  marked as running on a process of *this* host that no longer exists are failed by id, with a retryable
  error (``LlamaStepWorkerLost``). Temporal retries each at once (its retry policy's first interval,
  1 s), on a live worker;
* a worker on another host that dies is noticed by the heartbeat timeout, as before
  (``StepOptions(heartbeat_timeout=...)``): this host cannot tell a dead process there from a slow one.

Only a process id that does not exist on this host counts as dead: a live worker's step is never failed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from temporal_workflows._llama_runtime._protocol import WORKFLOW_TYPE

__all__ = ["STEP_WORKER_LOST", "recover_queue", "recover_run"]

_log = logging.getLogger(__name__)

STEP_WORKER_LOST = "LlamaStepWorkerLost"
"""Failure type of a step attempt whose worker process on this host has exited (retried at once)."""

MAX_RUNS_SCANNED = 200
"""Open runs of a queue a starting worker looks at (the most recent first)."""


def _dead_local_pid(identity: str) -> int | None:
    """The process id in ``<pid>@<host>`` when ``host`` is this one and no such process exists, else ``None``."""
    pid_text, sep, host = identity.partition("@")
    if not sep or host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return pid
    except OSError:
        return None  # it exists (another user's): alive
    return None


async def recover_run(client: Client, workflow_id: str) -> int:
    """Fail (retryably) the steps of ``workflow_id`` running on a dead process of this host; how many."""
    try:
        desc = await client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(
                namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id)
            )
        )
    except Exception:
        return 0
    run_id = desc.workflow_execution_info.execution.run_id
    failed = 0
    for pending in desc.pending_activities:
        if pending.state != PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
            continue
        pid = _dead_local_pid(pending.last_worker_identity)
        if pid is None:
            continue
        handle = client.get_async_activity_handle(
            workflow_id=workflow_id, run_id=run_id, activity_id=pending.activity_id
        )
        try:
            await handle.fail(
                ApplicationError(
                    f"the worker process {pid} on {socket.gethostname()} running this step has exited; "
                    "the step runs again on a live worker",
                    type=STEP_WORKER_LOST,
                )
            )
        except Exception as e:  # completed meanwhile, or the server refused: its heartbeat timeout still applies
            _log.debug("step %s of run %s not failed: %s", pending.activity_id, workflow_id, e)
            continue
        failed += 1
        _log.info(
            "run %s: step %s was running on worker process %d of this host, which has exited: it runs again now",
            workflow_id,
            pending.activity_type.name,
            pid,
        )
    return failed


async def recover_queue(client: Client, task_queue: str) -> int:
    """:func:`recover_run` for the open LlamaIndex runs of ``task_queue`` (at most :data:`MAX_RUNS_SCANNED`)."""
    query = f'WorkflowType = "{WORKFLOW_TYPE}" AND ExecutionStatus = "Running" AND TaskQueue = "{task_queue}"'
    ids: list[str] = []
    try:
        async for execution in client.list_workflows(query, limit=MAX_RUNS_SCANNED):
            ids.append(execution.id)
    except Exception as e:
        _log.debug("open runs of %s not listed: %s", task_queue, e)
        return 0
    counts = await asyncio.gather(*(recover_run(client, i) for i in ids))
    return sum(counts)
