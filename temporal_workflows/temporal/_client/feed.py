"""One reader of a run's event stream per process, shared by every reader of that run in it.

A run's events are a ``temporalio.contrib.workflow_streams`` stream: an
append-only log with global offsets, read by a long-poll update (answered when
the run publishes something new) or by a query (answered at once). Every
reader of a run in one process (console pages, CLI followers, a program's
``RunHandle.events()`` loops) reads through one :class:`RunFeed`, so a process
holds at most one poll of a run, however many people watch it there. The
feed keeps what it read (bounded, :data:`KEPT_BYTES`) for readers that join
late, decodes each item once, and ends when the run has closed and its last
item is read.

How it reads, and why it never takes the room input needs:

- **By update while the run welcomes it.** A run holds at most
  ``MAX_STREAM_POLLS`` polls (``temporal/_workflow/readers.py``) and refuses
  one more with ``STREAM_POLLS_FULL``; the feed then reads **by query**, with
  a backoff from 0.1 s to 1 s while nothing is new, and asks by update again
  after :data:`UPDATE_RETRY_SECONDS`. A query takes no update room and adds
  nothing to history. The server's own refusal of an update for load
  (``RESOURCE_EXHAUSTED``: its 10 in flight are taken) does the same.
- **Across continue-as-new** (long runs, resets) it follows the workflow id's
  latest run: offsets go on from the run before.
- **Across a server outage** it keeps trying, backing off up to 5 s, and
  resumes from its offset, re-awaiting the poll it had in flight (an accepted
  update outlives the outage) so it leaves no poll behind; a reader gives up
  after its own ``outage_timeout`` (``None``: never). Nothing is read twice
  or skipped: offsets say where it is.
- **After the run closes** it reads the rest by query (what the SDK's
  ``subscribe`` does), then ends.

A reader that starts before what the feed keeps (it joined late, after the
feed dropped old items) reads that part itself, by query, then joins.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._engine.serde import Envelope
from temporal_workflows._events import WorkflowEvent
from temporal_workflows.temporal._protocol import EVENTS_TOPIC, STREAM_POLL, STREAM_POLLS_FULL

__all__ = [
    "KEPT_BYTES",
    "LINGER_SECONDS",
    "QUERY_WAIT_SECONDS",
    "UPDATE_RETRY_SECONDS",
    "RunFeed",
    "StreamItem",
    "feed_for",
    "is_unreachable",
]

QUERY_WAIT_SECONDS = (0.1, 1.0)
"""First and longest wait between two reads by query while the run publishes nothing new."""
UPDATE_RETRY_SECONDS = 10.0
"""After the run (or the server) refused a poll by update for room, read by query this long before asking again."""
OUTAGE_WAIT_SECONDS = (0.25, 5.0)
"""First and longest wait before trying a server that cannot be reached again."""
DESCRIBE_EVERY_SECONDS = 2.0
"""While reading by query, how often to ask whether the run has closed."""
LINGER_SECONDS = 30.0
"""How long a feed goes on after its last reader left (a page reloaded, a follower restarted joins it again)."""
KEPT_BYTES = 32 * 1024 * 1024
"""Items a feed keeps for readers that join late, by their size on the wire; older ones are read again if needed."""
_NOT_READY_RETRIES = 12
"""Polls refused while the run's workflow task is being retried (``FAILED_PRECONDITION``), before giving up."""
_DRAINING = "StreamDraining"
_TRUNCATED = "TruncatedOffset"
_RETRY_UNAVAILABLE = ("update was aborted", "please retry")


def is_unreachable(e: BaseException) -> bool:
    """Whether ``e`` is the server not answering (down, restarting, a network cut), not a refusal."""
    if not isinstance(e, RPCError):
        return False
    if e.status == RPCStatusCode.UNAVAILABLE:
        return not any(m in e.message for m in _RETRY_UNAVAILABLE)
    if e.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
        return True
    return e.status == RPCStatusCode.UNKNOWN and any(
        m in e.message.lower() for m in ("transport", "connection", "broken pipe", "h2 protocol")
    )


def _wait(bounds: tuple[float, float], attempt: int) -> float:
    first, longest = bounds
    return min(longest, first * (1 << min(attempt, 16))) * random.uniform(0.7, 1.0)


def _raise_if_cancelled(e: BaseException) -> None:
    """The SDK turns a cancelled call into its own error: a feed being stopped stops, whatever it was doing."""
    task = asyncio.current_task()
    if isinstance(e.__cause__, asyncio.CancelledError) or (task is not None and task.cancelling()):
        raise asyncio.CancelledError from e


@dataclass(frozen=True)
class StreamItem:
    """One item of a run's event stream: its offset and its events (one, or a step's batch of live events)."""

    offset: int
    events: tuple[WorkflowEvent, ...]
    size: int = 0
    """Its size on the wire, in bytes (what the feed keeps is bounded by it)."""


Decode = Callable[[Envelope], list[WorkflowEvent]]


class RunFeed:
    """The shared reader of one run's event stream in this process (see the module's docstring).

    Made by :func:`feed_for`; read with :meth:`read`.
    """

    def __init__(self, client: Client, workflow_id: str, start: int, decode: Decode, key: tuple[Any, ...]) -> None:
        self._client = client
        self.workflow_id = workflow_id
        self._decode = decode
        self._key = key
        self._items: list[StreamItem] = []
        self._offsets: list[int] = []
        self._bytes = 0
        self.base = start
        """The first offset this feed holds or will hold; a reader starting before it reads that part itself."""
        self.head = start
        """The offset the next poll asks from."""
        self.done = False
        """The run has closed and every item of its stream is here."""
        self.error: BaseException | None = None
        self.outage: BaseException | None = None
        """Why the server cannot be reached right now (``None`` while it answers)."""
        self.outage_since: float | None = None
        self.by_query = False
        """Reading by query now (the run refused a poll by update for room)."""
        self.cooldown = 0.1
        self.readers = 0
        self.polls = 0
        """Polls (updates and queries) made so far: for tests and benchmarks."""
        self._first_run: str | None = None
        self._run_id: str | None = None
        self._tick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._linger: asyncio.TimerHandle | None = None

    # -- readers ----------------------------------------------------------------------------------

    def _join(self, cooldown: float) -> None:
        self.readers += 1
        self.cooldown = min(self.cooldown, max(cooldown, 0.0))
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._task is None and not self.done and self.error is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"event feed {self.workflow_id}")

    def _leave(self) -> None:
        self.readers -= 1
        if self.readers <= 0:
            self._linger = asyncio.get_running_loop().call_later(LINGER_SECONDS, self.close)

    def close(self) -> None:
        """Stop reading and forget this feed (its readers, if any, get an error)."""
        if _feeds.get(self._key) is self:
            del _feeds[self._key]
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if not self.done and self.error is None:
            self.error = RuntimeError(f"the event feed of {self.workflow_id!r} was closed")
        self._wake()

    async def read(
        self, start: int, *, cooldown: float = 0.1, outage_timeout: float | None = None
    ) -> AsyncIterator[StreamItem]:
        """The stream's items from offset ``start``, as they come; ends once the run has closed and all are read.

        Raises the error that ended the feed, or the server's last error once it has been unreachable for
        longer than ``outage_timeout`` seconds.
        """
        self._join(cooldown)
        try:
            pos = start
            while True:
                if pos < self.base:
                    async for item in self._read_below_base(pos):
                        yield item
                        pos = item.offset + 1
                    pos = max(pos, self.base)
                    continue
                i = bisect.bisect_left(self._offsets, pos)
                if i < len(self._items):
                    for item in self._items[i : i + 256]:
                        yield item
                        pos = item.offset + 1
                    continue
                if self.error is not None:
                    raise self.error
                if self.done:
                    return
                if (
                    outage_timeout is not None
                    and self.outage is not None
                    and self.outage_since is not None
                    and time.monotonic() - self.outage_since > outage_timeout
                ):
                    raise self.outage
                tick = self._tick
                with contextlib.suppress(TimeoutError):
                    # asyncio.timeout, not wait_for: 3.11's wait_for can lose a cancellation (a reader that
                    # stops must stop)
                    async with asyncio.timeout(None if outage_timeout is None else 1.0):
                        await tick.wait()
        finally:
            self._leave()

    async def _read_below_base(self, pos: int) -> AsyncIterator[StreamItem]:
        """Items from ``pos`` up to what the feed holds, read by query (they are in the run already)."""
        attempt = 0
        while pos < self.base:
            try:
                result = await self._client.get_workflow_handle(self.workflow_id).query(
                    STREAM_POLL, PollInput(topics=[EVENTS_TOPIC], from_offset=pos), result_type=PollResult
                )
            except (RPCError, WorkflowQueryFailedError) as e:
                _raise_if_cancelled(e)
                if attempt >= 8 and not is_unreachable(e):
                    raise
                await asyncio.sleep(_wait(QUERY_WAIT_SECONDS, attempt))
                attempt += 1
                continue
            attempt = 0
            items = [it for it in self._items_of(result) if it.offset < self.base]
            for item in items:
                yield item
            if not items or not result.more_ready:
                return  # what the run retains below the feed's start is read (older items may be truncated)
            pos = items[-1].offset + 1

    # -- the poller -------------------------------------------------------------------------------

    def _wake(self) -> None:
        self._tick.set()
        self._tick = asyncio.Event()

    def _items_of(self, result: PollResult) -> list[StreamItem]:
        converter = self._client.data_converter.payload_converter
        out = []
        for wire in result.items:
            payload = Payload()
            try:
                payload.ParseFromString(base64.b64decode(wire.data))
                env = converter.from_payload(payload, Envelope)
                if not isinstance(env, Envelope):
                    raise TypeError(f"got {type(env).__name__}")
            except Exception as e:
                env = Envelope(None, {"unreadable": f"{type(e).__name__}: {e}"[:300]})
            out.append(StreamItem(wire.offset, tuple(self._decode(env)), len(wire.data) + len(wire.topic)))
        return out

    def _add(self, result: PollResult) -> None:
        added = False
        for item in self._items_of(result):
            if item.offset < self.head:
                continue  # read already (a poll answered twice across an outage)
            self._items.append(item)
            self._offsets.append(item.offset)
            self._bytes += item.size
            self.head = item.offset + 1
            added = True
        self.head = max(self.head, result.next_offset)
        while self._bytes > KEPT_BYTES and len(self._items) > 1:
            old = self._items.pop(0)
            self._offsets.pop(0)
            self._bytes -= old.size
            self.base = self._items[0].offset
        if added:
            self._wake()

    def _reached(self) -> None:
        if self.outage is not None:
            self.outage = None
            self.outage_since = None
            self._wake()

    def _unreachable(self, e: BaseException) -> None:
        if self.outage_since is None:
            self.outage_since = time.monotonic()
        self.outage = e
        self._wake()

    async def _run(self) -> None:
        try:
            await self._poll()
            self.done = True
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.error = e
        finally:
            # Its readers read on from what it holds; the next reader starts a fresh feed (a closed run may
            # be started again under its id: that run is another stream).
            if _feeds.get(self._key) is self:
                del _feeds[self._key]
            self._task = None
            self._wake()

    async def _poll(self) -> None:
        latest: WorkflowHandle[Any, Any] = self._client.get_workflow_handle(self.workflow_id)
        chain: WorkflowHandle[Any, Any] | None = None  # the run's executions only, not a later one of the same id
        closed: WorkflowHandle[Any, Any] | None = None
        update: WorkflowUpdateHandle[PollResult] | None = None
        update_after = 0.0
        query_wait = 0
        described = 0.0
        outage_attempt = 0
        not_ready = 0
        can_race = 0
        from_zero = False
        while True:
            poll = PollInput(topics=[EVENTS_TOPIC], from_offset=0 if from_zero else self.head)
            try:
                if chain is None:
                    closed = await self._closed(latest)
                    chain = self._client.get_workflow_handle(self.workflow_id, first_execution_run_id=self._first_run)
                    continue
                if closed is not None:
                    self.polls += 1
                    result = await closed.query(STREAM_POLL, poll, result_type=PollResult)
                    self._reached()
                    self._add(result)
                    if not result.more_ready:
                        return
                    continue
                if time.monotonic() >= update_after:
                    self.by_query = False
                    if update is None:
                        self.polls += 1
                        update = await chain.start_update(
                            STREAM_POLL, poll, wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=PollResult
                        )
                        self._run_id = update.workflow_run_id or self._run_id
                    result = await update.result()
                    update = None
                else:
                    self.by_query = True
                    self.polls += 1
                    # Pinned to the execution last seen: a later run of the same id is never read as this one's.
                    pinned = self._client.get_workflow_handle(self.workflow_id, run_id=self._run_id)
                    result = await pinned.query(STREAM_POLL, poll, result_type=PollResult)
                self._reached()
                outage_attempt = not_ready = can_race = 0
                from_zero = False
                before = self.head
                self._add(result)
                if result.more_ready:
                    continue
                if not self.by_query:
                    if self.cooldown > 0:
                        await asyncio.sleep(self.cooldown)
                    continue
                query_wait = 0 if self.head > before else query_wait + 1
                if time.monotonic() - described >= DESCRIBE_EVERY_SECONDS:
                    described = time.monotonic()
                    closed = await self._closed(latest)
                    if closed is not None:
                        continue
                await asyncio.sleep(_wait(QUERY_WAIT_SECONDS, query_wait))
            except asyncio.CancelledError:
                raise
            except WorkflowUpdateRPCTimeoutOrCancelledError as e:
                _raise_if_cancelled(e)
                # The wait for the poll's outcome timed out (a slow or unreachable server): wait again, the
                # update is kept.
                await asyncio.sleep(_wait(OUTAGE_WAIT_SECONDS, outage_attempt))
                outage_attempt += 1
                continue
            except (RPCError, WorkflowQueryFailedError, WorkflowUpdateFailedError) as e:
                _raise_if_cancelled(e)
                if is_unreachable(e):
                    self._unreachable(e)
                    await asyncio.sleep(_wait(OUTAGE_WAIT_SECONDS, outage_attempt))
                    outage_attempt += 1
                    continue  # a poll in flight is awaited again: accepted updates outlive an outage
                update = None
                if closed is not None:
                    raise  # reading a closed run's last items failed (no worker answers its queries?)
                kind = getattr(e.cause, "type", None) if isinstance(e, WorkflowUpdateFailedError) else None
                if kind == _TRUNCATED:
                    from_zero = True  # read from what the run still retains (its offsets go on)
                    continue
                if kind == _DRAINING:
                    cause: Any = e.cause
                    if STREAM_POLLS_FULL in tuple(getattr(cause, "details", ()) or ()):
                        update_after = time.monotonic() + UPDATE_RETRY_SECONDS  # the run holds enough polls
                        query_wait = 0
                    else:  # continuing as new, or busy with a local activity for a moment
                        await asyncio.sleep(max(self.cooldown, 0.05))
                    continue
                if isinstance(e, RPCError) and e.status == RPCStatusCode.RESOURCE_EXHAUSTED:
                    # The server's limit of updates in flight (others' input and polls), or its query buffer.
                    update_after = time.monotonic() + UPDATE_RETRY_SECONDS
                    await asyncio.sleep(_wait(QUERY_WAIT_SECONDS, query_wait))
                    query_wait += 1
                    continue
                if isinstance(e, RPCError) and e.status == RPCStatusCode.UNAVAILABLE:
                    await asyncio.sleep(_wait(QUERY_WAIT_SECONDS, 0))  # "please retry"
                    continue
                if isinstance(e, RPCError) and e.status == RPCStatusCode.FAILED_PRECONDITION:
                    # The server refuses polls while the run's workflow task is being retried (it fails one
                    # itself when signals buffered meanwhile add up to megabytes): the run is not stuck.
                    not_ready += 1
                    if not_ready > _NOT_READY_RETRIES:
                        raise
                    await asyncio.sleep(min(1.0, 0.05 * 2**not_ready))
                    continue
                try:
                    closed = await self._closed(latest)
                except RPCError:
                    raise e from None
                if closed is None:
                    # Running: a poll that met a continue-as-new goes to the new run; anything else is raised.
                    can_race += 1
                    if not (isinstance(e, RPCError) and e.status == RPCStatusCode.NOT_FOUND) or can_race > 5:
                        raise
                    await asyncio.sleep(0.05 * can_race)

    async def _closed(self, latest: WorkflowHandle[Any, Any]) -> WorkflowHandle[Any, Any] | None:
        """A handle on the run's last execution once it has closed (``None`` while it runs).

        The run is the chain of executions (continued as new) the feed started on: if the workflow id has
        started again since (a new run under the same id), the chain's last execution seen is the end.
        """
        desc = await latest.describe()
        self._reached()
        first = desc.raw_info.first_run_id or desc.run_id
        if self._first_run is None:
            self._first_run = first
        elif first != self._first_run:
            return self._client.get_workflow_handle(self.workflow_id, run_id=self._run_id)
        self._run_id = desc.run_id
        if desc.status in (None, WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
            return None
        return self._client.get_workflow_handle(self.workflow_id, run_id=desc.run_id)


_feeds: dict[tuple[Any, ...], RunFeed] = {}
"""(event loop, client, workflow id) -> the feed of that run in this process."""


def feed_for(client: Client, workflow_id: str, start: int, decode: Decode) -> RunFeed:
    """The feed of ``workflow_id`` in this process (and event loop), made starting at ``start`` if there is none."""
    key = (id(asyncio.get_running_loop()), id(client), workflow_id)
    feed = _feeds.get(key)
    if feed is None or feed.error is not None or feed.done:
        feed = _feeds[key] = RunFeed(client, workflow_id, start, decode, key)
    return feed
