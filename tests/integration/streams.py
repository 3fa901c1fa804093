"""Waiting on a run's event stream: tests synchronise on what the run reports, never on sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporal_workflows import WorkflowEvent
from temporal_workflows.temporal import RunHandle


async def events_until(
    handle: RunHandle, pred: Callable[[WorkflowEvent], bool], *, timeout: float = 30
) -> list[WorkflowEvent]:
    """The run's events from the start up to and including the first that matches ``pred``."""

    async def scan() -> list[WorkflowEvent]:
        seen: list[WorkflowEvent] = []
        async for ev in handle.events():
            seen.append(ev)
            if pred(ev):
                return seen
        raise AssertionError(f"the stream ended without a match; saw {[e.type for e in seen]}")

    return await asyncio.wait_for(scan(), timeout)


def nth(kind: type[WorkflowEvent], n: int) -> Callable[[WorkflowEvent], bool]:
    """A predicate true at the ``n``-th event of ``kind``."""
    count = 0

    def pred(ev: WorkflowEvent) -> bool:
        nonlocal count
        count += isinstance(ev, kind)
        return count == n

    return pred
