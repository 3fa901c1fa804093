"""Say so when a run is started on a task queue that no worker polls: the run waits, which looks like a hang.

Temporal keeps a run's tasks until a worker of its queue polls, however long that takes: right for a run
whose workers are restarting, silent for a client that names a queue no worker serves (a typo, a worker
started with another ``--task-queue``). A client that starts a run checks the queue's pollers, at most once
per :data:`CHECK_EVERY` seconds per queue, in the background, and logs a warning naming the queue and how
to serve it. Nothing waits on the check, and a failed check says nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

__all__ = ["CHECK_EVERY", "LLAMA_SERVE_HINT", "check_pollers", "has_pollers"]

_log = logging.getLogger("temporal_workflows")

CHECK_EVERY = 60.0
"""Seconds between two checks of one queue's pollers by one process."""

LLAMA_SERVE_HINT = (
    "Start one: `temporal-workflows worker --workflow module:YourWorkflow` (it polls 'llama-index-workflows', "
    "TemporalRuntime()'s queue, unless --task-queue names another: then give TemporalRuntime(task_queue=...) the "
    "same), or build TemporalRuntime(worker=True) to run the workflows in this process"
)
"""How to serve ``TemporalRuntime``'s queue, for its warning."""

_checked: dict[tuple[str, str, str], float] = {}
_tasks: set[asyncio.Task[None]] = set()


async def has_pollers(client: Client, task_queue: str) -> bool:
    """Whether a worker polled ``task_queue``'s workflow tasks lately (Temporal keeps pollers of the last minutes)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(response.pollers) > 0


def check_pollers(client: Client, task_queue: str, run_id: str, serve: str) -> None:
    """In the background: warn, naming ``run_id`` and how to ``serve`` the queue, if no worker polls it."""
    key = (client.service_client.config.target_host, client.namespace, task_queue)
    now = time.monotonic()
    if _checked.get(key, -CHECK_EVERY) > now - CHECK_EVERY:
        return
    _checked[key] = now

    async def check() -> None:
        try:
            polled = await has_pollers(client, task_queue)
        except Exception:
            return  # no answer is no news: the run goes on either way
        if not polled:
            _log.warning(
                "no worker polls task queue %r: run %r waits until one does. %s",
                task_queue,
                run_id,
                serve,
            )

    task = asyncio.get_running_loop().create_task(check())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
