"""Leaving a fleet without a timeout: a worker that stops drains its steps, then hands its runs back.

A worker stopped the SDK's way (``Worker.shutdown()``) stops polling at once, workflow tasks included, and
gives its running activities the graceful-shutdown time to finish. Each step that finishes then schedules
its run's next workflow task on the run's *sticky* queue, this worker's, which nobody polls any more: the
task waits there for the sticky timeout and Temporal records a workflow task timeout before any worker
takes it. The runs this worker cached meet the same when their next event comes from elsewhere.

So a worker leaves in three moves (:func:`leave`):

1. **drain**: it takes no new step (its activity slots, :class:`DrainableActivitySlots`, are handed out no
   more, so no eager step either) while it keeps polling workflow tasks, so the steps it runs finish and
   their runs' next workflow tasks are processed here;
2. **stop**: ``Worker.shutdown()``, with no step running;
3. **hand back**: every run it cached has its stickiness reset (``ResetStickyTaskQueue``), so their next
   workflow tasks go to the task queue, where any worker takes them at once.

A rolling restart of four workers under a steady stream of runs so recorded no timeout at all (``python -m
bench --only fleet``, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    Worker,
)

from temporal_workflows.temporal._worker.eviction import cached_runs

__all__ = ["DrainableActivitySlots", "leave"]

_log = logging.getLogger(__name__)


class _Permit(SlotPermit):
    def __init__(self) -> None:
        self.used = False


class DrainableActivitySlots(CustomSlotSupplier):
    """``size`` activity slots (as ``max_concurrent_activities``) that stop being handed out on :meth:`drain`.

    The SDK reserves a slot before each poll and marks it used when a task arrives; released slots wake
    the pollers waiting for one. Once draining, no slot is handed out: the worker polls for no more steps and
    takes none eagerly, and :meth:`idle` says when the steps it was running have finished. Thread-safe:
    the SDK may release a slot from another thread.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._reserved = 0
        self._running = 0
        self._draining = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def running(self) -> int:
        """Steps running now (slots marked used and not released)."""
        return self._running

    def _take(self) -> _Permit | None:
        with self._lock:
            if self._draining or self._reserved >= self.size:
                return None
            self._reserved += 1
            return _Permit()

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        loop = asyncio.get_running_loop()
        while True:
            permit = self._take()
            if permit is not None:
                return permit
            waiter: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiters.append((loop, waiter))
            try:
                await waiter
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    self._waiters.remove((loop, waiter))

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return self._take()

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        with self._lock:
            self._running += 1
        if isinstance(ctx.permit, _Permit):
            ctx.permit.used = True

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        used = ctx.permit.used if isinstance(ctx.permit, _Permit) else ctx.slot_info is not None
        with self._lock:
            self._reserved -= 1
            if used:
                self._running -= 1
            waiters = list(self._waiters) if not self._draining else []
        for loop, waiter in waiters:  # at most one per poller: each checks again
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits there any more
                loop.call_soon_threadsafe(_wake, waiter)

    def drain(self) -> None:
        """Hand out no more slots (the waiting pollers keep waiting until the worker stops)."""
        with self._lock:
            self._draining = True

    async def idle(self, timeout: float) -> bool:
        """Wait until no step runs (at most ``timeout`` seconds); whether none does."""
        deadline = time.monotonic() + timeout
        while self._running > 0:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)  # polling a counter the SDK's threads change
        return True


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _hand_back(worker: Worker, runs: list[tuple[str, str]]) -> int:
    """Reset the stickiness of ``runs`` (workflow id, run id): their next workflow task goes to the queue."""
    client = worker.client

    async def one(workflow_id: str, run_id: str) -> bool:
        try:
            await client.workflow_service.reset_sticky_task_queue(
                ResetStickyTaskQueueRequest(
                    namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
                )
            )
            return True
        except Exception:  # closed since, or the server refuses: its next task waits out the sticky timeout
            return False

    done = await asyncio.gather(*(one(w, r) for w, r in runs))
    return sum(done)


async def leave(worker: Worker, slots: DrainableActivitySlots | None, grace: float) -> dict[str, Any]:
    """Stop ``worker`` without leaving a task to time out: drain its steps (for at most ``grace`` seconds),
    stop it, and hand the runs it cached back to the task queue. What it did, for the log."""
    drained = True
    if slots is not None:
        slots.drain()
        drained = await slots.idle(grace)
    runs = {(w, r) for r, w in cached_runs(worker).items()}
    await worker.shutdown()
    runs |= {(w, r) for r, w in cached_runs(worker).items()}
    handed = await _hand_back(worker, sorted(runs))
    return {"drained": drained, "runs_handed_back": handed}
