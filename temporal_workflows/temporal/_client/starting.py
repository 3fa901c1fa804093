"""Every start of a run goes through here, so a start pinned to a version its queue has not learned yet waits.

A start on a versioned task queue can pin its run to a Worker Deployment version (``routing.py``: the
version hosting the graph its starter built). The server refuses such a start, with ``FAILED_PRECONDITION``
``Pinned version '<deployment>:<build id>' is not present in task queue '<queue>' of type 'Workflow'``, until
the queue has learned that version: a worker of it has polled the queue, and the queue learns the version
a moment later (the server also keeps a "not present" answer for about a second). A version that is
announced but not yet learned is the normal state right after its first worker starts, so that refusal,
and only that one, is sent again here: with backoff, for :data:`PINNED_START_WAIT` seconds at most, then
:class:`~temporal_workflows.errors.WorkerVersionNotReadyError` says what is missing. Every other error
(another ``FAILED_PRECONDITION``, another version or queue in the message, a start with no pinned version)
passes through untouched, as the first attempt raised it.

Sending the start again cannot make two runs. The server checks a pinned override before it looks at the
workflow id (``StartWorkflowExecution``, ``SignalWithStartWorkflowExecution`` and update-with-start alike),
so a refused attempt created nothing and delivered nothing; and a single attempt whose reply was lost is
retried by the SDK itself with the same request id, which the server answers with the run that request
made. A workflow id conflict on a later attempt is therefore never this start's own earlier attempt: it is
another start's run, reported as it would be without the retry (``WorkflowAlreadyStartedError``, or the
existing run under ``USE_EXISTING``).

The start paths that use this: ``start_run``, ``send_or_start`` (signal-with-start and update-with-start),
``fork`` (graphs and LlamaIndex runs), and through them the CLI's ``run``/``fork``, the console and
``DurableWorkflow``; AG-UI's start of a graph run; ``TemporalRuntime``'s start of a LlamaIndex run.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import PinnedVersioningOverride, VersioningOverride
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._errors import WorkerVersionNotReadyError

__all__ = ["PINNED_START_WAIT", "start_workflow", "update_with_start"]

_log = logging.getLogger(__name__)

PINNED_START_WAIT = 10.0
"""Seconds a start pinned to a version its task queue has not learned is sent again before
:class:`~temporal_workflows.errors.WorkerVersionNotReadyError` (a module setting: set it to ``0`` not to wait)."""

PINNED_START_BACKOFF = (0.1, 1.0)
"""First and longest wait between two refused attempts (doubling, with jitter)."""

_LEGACY_REFUSAL = "Pinned version is not present in the task queue"
"""The refusal's words on servers 1.30 and earlier (no version or queue named)."""

T = TypeVar("T")


def not_learned(error: BaseException, override: VersioningOverride | None, task_queue: str) -> bool:
    """Whether ``error`` is the server's refusal of a start pinned by ``override`` to a version ``task_queue``
    has not learned: status ``FAILED_PRECONDITION`` and exactly its message for this version and queue."""
    if not isinstance(error, RPCError) or error.status != RPCStatusCode.FAILED_PRECONDITION:
        return False
    if not isinstance(override, PinnedVersioningOverride):
        return False
    version = override.version
    expected = (
        f"Pinned version '{version.deployment_name}:{version.build_id}' is not present in task queue "
        f"'{task_queue}' of type 'Workflow'"
    )
    return error.message in (expected, _LEGACY_REFUSAL)


async def _retrying(
    attempt: Callable[[], Awaitable[T]], *, workflow_id: str, task_queue: str, override: VersioningOverride | None
) -> T:
    if not isinstance(override, PinnedVersioningOverride):
        return await attempt()  # nothing to learn: not one refusal of this kind can come
    loop = asyncio.get_running_loop()
    wait = PINNED_START_WAIT
    deadline = loop.time() + wait
    delay, longest = PINNED_START_BACKOFF
    refusals = 0
    while True:
        try:
            return await attempt()
        except RPCError as e:
            if not not_learned(e, override, task_queue):
                raise
            refusals += 1
            version = f"{override.version.deployment_name}:{override.version.build_id}"
            if refusals == 1:
                _log.info(
                    "start of run %r waits for task queue %r to learn worker version %r (up to %g s)",
                    workflow_id,
                    task_queue,
                    version,
                    wait,
                )
            pause = delay * random.uniform(0.8, 1.2)
            if loop.time() + pause > deadline:
                raise WorkerVersionNotReadyError(
                    f"run {workflow_id!r} was not started: it is pinned to worker version {version!r}, which task "
                    f"queue {task_queue!r} had not learned after {wait:g} s ({refusals} refused starts; a queue "
                    "learns a version once a worker of it polls there). Start a worker of that version on the "
                    "queue, then start the run again"
                ) from e
        await asyncio.sleep(pause)  # backoff between refused attempts; nothing was started by them
        delay = min(delay * 2, longest)


async def start_workflow(
    client: Client,
    workflow: str,
    arg: Any,
    *,
    id: str,
    task_queue: str,
    versioning_override: VersioningOverride | None = None,
    start_signal: str | None = None,
    start_signal_args: Sequence[Any] = (),
    **options: Any,
) -> WorkflowHandle[Any, Any]:
    """``client.start_workflow`` (or signal-with-start, with ``start_signal``), its pinned-version refusal
    sent again while the queue learns the version (the module's docstring)."""

    async def attempt() -> WorkflowHandle[Any, Any]:
        return await client.start_workflow(
            workflow,
            arg,
            id=id,
            task_queue=task_queue,
            versioning_override=versioning_override,
            start_signal=start_signal,
            start_signal_args=list(start_signal_args),
            **options,
        )

    return await _retrying(attempt, workflow_id=id, task_queue=task_queue, override=versioning_override)


async def update_with_start(
    client: Client,
    update: str,
    arg: Any,
    *,
    operation: Callable[[], WithStartWorkflowOperation[Any, Any]],
    workflow_id: str,
    task_queue: str,
    versioning_override: VersioningOverride | None,
    result_type: type,
) -> tuple[Any, WorkflowHandle[Any, Any]]:
    """``client.execute_update_with_start_workflow``, its pinned-version refusal sent again as a start's is; an
    operation is used once, so ``operation`` makes a new one per attempt. The update's result and the run."""

    async def attempt() -> tuple[Any, WorkflowHandle[Any, Any]]:
        op = operation()
        result = await client.execute_update_with_start_workflow(
            update, arg, start_workflow_operation=op, result_type=result_type
        )
        return result, await op.workflow_handle()

    return await _retrying(attempt, workflow_id=workflow_id, task_queue=task_queue, override=versioning_override)
