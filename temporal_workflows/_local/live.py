"""Live events in process: a running step's live events reach ``run(stream=True)`` as they happen.

The driver yields its events only between host calls, and while the steps of
a superstep run it is waiting in ``run_steps``. So the in-process run drives
the driver in a task of its own, which puts its events in one queue,
and every step's live sink puts its live events in the same queue, in the
order they happen: the caller reads them from there, each live event as soon
as it is published and always before anything that followed it (the step's
completion included). The same event types, in the same order, as
``RunHandle.events()`` shows for the run on Temporal.

One task per run, and a queue operation per batch of driver events (all it
makes between two host calls): reading a run costs about what it did when the
caller drove the driver itself. The driver never runs ahead of its reader:
after each batch it waits until the reader has taken its last event and asks
for the next (as Agent Framework's generator-driven run does; the driver does
nothing between the events of a batch). So a reader that stops reading (breaks out of ``async for``, closes
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


_NONE: list[LiveEvent] = []
"""What :meth:`LiveQueue._published` returns when nothing was published (never appended to)."""


class LiveQueue(Generic[T]):
    """The events of one ``run()`` call, driver's and steps' live ones, in the order they happen."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._unread = 0
        """Live events published since :meth:`_published` last took them (0: none, nothing to look at)."""
        self._direct: Callable[[LiveEvent], None] | None = None

    def deliver_to(self, emit: Callable[[LiveEvent], None]) -> None:
        """Hand each live event to ``emit`` as it is published, instead of queueing it.

        For a run nobody reads before it ends (an awaited ``run()``): the
        driver's ``live_event``, which puts it among the driver's events
        where it happened (after the superstep's start, before its steps'
        results), so the driver needs no hand-over before each superstep's
        steps run.
        """
        self._direct = emit

    def publish(self, event: LiveEvent, data: bytes) -> None:
        """A step's live event (the steps' sink)."""
        if self._direct is not None:
            self._direct(event)
            return
        self._queue.put_nowait(event)
        self._unread += 1

    async def room(self) -> None:
        """In process the caller's queue takes every event at once (it holds objects, sends nothing)."""

    def _put(self, item: object) -> None:
        self._queue.put_nowait(item)

    def _published(self) -> list[LiveEvent]:
        """The live events published since the last call, when no task puts the driver's events here."""
        if not self._unread:  # (between most batches: no step published any)
            return _NONE
        self._unread = 0
        out: list[LiveEvent] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            assert isinstance(item, LiveEvent)
            out.append(item)
        return out


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def with_live(
    batches: AsyncIterator[list[T]],
    queue: LiveQueue[T],
    convert: Callable[[T], WorkflowEvent],
    *,
    live_while_running: bool = True,
) -> AsyncIterator[list[WorkflowEvent]]:
    """The driver's events (``batches``, each event through ``convert``), with the queue's live events, as they
    happen, in batches: one per driver batch, and the live events before it.

    The driver task waits for the reader once per batch (when it asks for the
    batch after it), not once per event: the driver does nothing between the
    events of a batch, so a reader that stops mid-batch stops the run at the
    same point, and a step costs no task switch per event. A streamed run's
    reader takes the batches' events one at a time (``RunStream``); an
    awaited run takes each batch whole.

    ``live_while_running=False`` (a ``run()`` that is awaited for its result,
    not streamed: nobody reads an event before the run ends) drives the
    driver in the reader's own task, with no queue round trip: the live
    events the steps published while they ran are taken before the driver's
    next batch, which is where the task would have put them too (the driver
    makes its next batch only once ``run_steps`` returned), so the events
    and their order are the same. (The in-process runner's awaited run has
    its live events delivered into the driver's own batches instead,
    :meth:`LiveQueue.deliver_to`: the same place again; ``convert`` leaves
    live events as they are.)
    """
    if not live_while_running:
        try:
            async for batch in batches:
                live = queue._published()
                out: list[WorkflowEvent] = list(live) if live else []
                out.extend(map(convert, batch))
                yield out
            live = queue._published()
            if live:
                yield list(live)
        finally:
            aclose = getattr(batches, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(BaseException):
                    await aclose()
        return

    loop = asyncio.get_running_loop()

    async def drive() -> None:
        try:
            async for batch in batches:
                taken = loop.create_future()
                queue._put(("driver", batch, taken))
                await taken  # the reader asked for the event after the batch: go on to the next
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
                _, batch, taken = item
                yield [convert(event) for event in batch]
                taken.set_result(None)
            else:
                assert isinstance(item, LiveEvent)
                yield [item]
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
        aclose = getattr(batches, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(BaseException):
                await aclose()
