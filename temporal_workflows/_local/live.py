"""Live events in process: a running step's live events reach ``run(stream=True)`` as they happen.

The driver yields its events only between host calls, and while the steps of
a superstep run it is waiting in ``run_steps``. So the in-process run drives
the driver in a task of its own, which puts each of its events in one queue,
and every step's live sink puts its live events in the same queue, in the
order they happen: the caller reads them from there, each live event as soon
as it is published and always before anything that followed it (the step's
completion included). The same event types, in the same order, as
``RunHandle.events()`` shows for the run on Temporal.

One task per run, and a queue operation per event: reading a run costs about
what it did when the caller drove the driver itself. The driver never runs
ahead of its reader: after each of its events it waits until the reader has
taken it and asks for the next (as Agent Framework's generator-driven run
does). So a reader that stops reading (breaks out of ``async for``, closes
the stream, or drops it) stops the run where it stopped reading: it reaches
no further boundary, commits nothing more and saves no more checkpoints;
closing (or finalizing) the stream then cancels the task. Live events are
never held back: they flow while the steps run, when the driver is not
waiting for the reader.
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

_END = object()


class LiveQueue(Generic[T]):
    """The events of one ``run()`` call, driver's and steps' live ones, in the order they happen."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue()

    def publish(self, event: LiveEvent, data: bytes) -> None:
        """A step's live event (the steps' sink)."""
        self._queue.put_nowait(event)

    async def room(self) -> None:
        """In process the caller's queue takes every event at once (it holds objects, sends nothing)."""

    def _put(self, item: object) -> None:
        self._queue.put_nowait(item)


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def with_live(
    events: AsyncIterator[T], queue: LiveQueue[T], convert: Callable[[T], WorkflowEvent]
) -> AsyncIterator[WorkflowEvent]:
    """``events`` (each through ``convert``), with the queue's live events, as they happen."""

    loop = asyncio.get_running_loop()

    async def drive() -> None:
        try:
            async for event in events:
                taken = loop.create_future()
                queue._put(("driver", event, taken))
                await taken  # the reader asked for the next event: go on to it
        except BaseException as e:
            queue._put(_Failed(e))
            if not isinstance(e, Exception):
                raise
        else:
            queue._put(_END)

    task = asyncio.ensure_future(drive())
    try:
        while True:
            item = await queue._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            if isinstance(item, tuple):
                _, event, taken = item
                yield convert(event)
                taken.set_result(None)
            else:
                assert isinstance(item, LiveEvent)
                yield item
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(BaseException):
                await aclose()
