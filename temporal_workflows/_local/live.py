"""Live events in process: a running step's live events reach ``run(stream=True)`` as they happen.

The driver yields its events only between host calls, and while the steps of
a superstep run it is waiting in ``run_steps``. So the in-process host gives
each step a sink that queues its live events, and :func:`with_live` reads the
driver's events and the queue together: a live event is yielded as soon as it
is published, in publication order, and always before the event that follows
the step's completion (the queue is drained before each driver event). The
same event types, in the same order, as ``RunHandle.events()`` shows for the
run on Temporal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

from temporal_workflows._events import WorkflowEvent
from temporal_workflows._live import LiveEvent

__all__ = ["LiveQueue", "with_live"]

T = TypeVar("T")


class LiveQueue(Generic[T]):
    """The live events of one ``run()`` call, in publication order (every step's sink)."""

    def __init__(self) -> None:
        self._items: list[LiveEvent] = []
        self._ready = asyncio.Event()

    def publish(self, event: LiveEvent) -> None:
        self._items.append(event)
        self._ready.set()

    def take(self) -> list[LiveEvent]:
        items, self._items = self._items, []
        self._ready.clear()
        return items


async def with_live(
    events: AsyncIterator[T], queue: LiveQueue[T], convert: Callable[[T], WorkflowEvent]
) -> AsyncIterator[WorkflowEvent]:
    """``events`` (each through ``convert``), with the queue's live events yielded as they are published."""
    source = aiter(events)
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(source))
            while not pending.done():
                ready = asyncio.ensure_future(queue._ready.wait())
                try:
                    await asyncio.wait({pending, ready}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ready.cancel()
                for live in queue.take():
                    yield live
            for live in queue.take():  # published by steps that completed in the meantime
                yield live
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield convert(item)
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
