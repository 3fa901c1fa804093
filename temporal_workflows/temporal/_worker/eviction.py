"""Evict the runs a stopped worker still holds in its cache, as the SDK evicts them while it runs.

When a worker shuts down, the SDK stops polling but does not evict the
workflows in its cache: a run that was mid-superstep (waiting on a step) is
left as a suspended coroutine, which the garbage collector closes later, at
an arbitrary point and in whatever ``contextvars`` context is current then.
Every span open in that coroutine (Temporal's ``RunWorkflow`` span, this
library's superstep span) then tries to restore the OpenTelemetry context
with a token from another context, and OpenTelemetry logs "Failed to detach
context ... was created in a different Context" with a traceback, once per
span. Nothing is lost (the run continues on another worker by replay), but a
clean shutdown prints errors.

Evicting each remaining run the way the SDK does on a cache eviction
(a ``remove_from_cache`` activation) cancels its tasks inside their own
contexts, so every span closes where it was opened; during eviction the
workflow counts as replaying, so nothing is exported twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from temporalio.bridge.proto.workflow_activation import RemoveFromCache, WorkflowActivation, WorkflowActivationJob
from temporalio.worker import Worker

__all__ = ["cached_runs", "evict_cached_runs"]

_log = logging.getLogger(__name__)


def _cached_runs(worker: Worker) -> dict[str, Any]:
    """The stopped worker's cache (``run_id -> running workflow``), or ``{}`` if the SDK keeps it elsewhere."""
    workflow_worker = getattr(worker, "_workflow_worker", None)
    running = getattr(workflow_worker, "_running_workflows", None)
    return running if isinstance(running, dict) else {}


def cached_runs(worker: Worker) -> dict[str, str]:
    """The runs ``worker`` caches now: run id → workflow id (``{}`` if the SDK keeps them elsewhere)."""
    found = {}
    for run_id, cached in list(_cached_runs(worker).items()):
        workflow_id = getattr(cached, "workflow_id", None)
        if isinstance(run_id, str) and isinstance(workflow_id, str):
            found[run_id] = workflow_id
    return found


async def evict_cached_runs(worker: Worker) -> int:
    """Evict every run ``worker`` (already stopped) still caches; return how many.

    Uses the SDK's own eviction path on its private worker state; if a later
    SDK keeps that state elsewhere (or evicts on shutdown itself) this does
    nothing.
    """
    running = _cached_runs(worker)
    evicted = 0
    for run_id, cached in list(running.items()):
        activate = getattr(cached, "activate", None)
        if activate is None:
            continue
        job = WorkflowActivationJob(
            remove_from_cache=RemoveFromCache(
                message="worker shut down",
                reason=RemoveFromCache.EvictionReason.LANG_REQUESTED,
            )
        )
        activation = WorkflowActivation(run_id=run_id, jobs=[job])
        try:
            # In a thread, as the SDK runs activations: the workflow's event loop takes over the
            # thread's running loop while it runs.
            await asyncio.to_thread(activate, activation)
        except Exception:
            _log.debug("evicting run %s after worker shutdown failed", run_id, exc_info=True)
            continue
        running.pop(run_id, None)
        evicted += 1
    return evicted
