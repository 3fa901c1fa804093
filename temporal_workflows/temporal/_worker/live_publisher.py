"""Live events from a running step activity into its run's event stream.

A step's live events (``temporal_workflows._live``) go to the run's
``events`` topic through ``WorkflowStreamClient.from_within_activity``: each
flush is one ``__temporal_workflow_stream_publish`` signal, which the server
records in the run's history, so what a streaming step costs in history
grows with its *batches*, not with its events:

* the first event of a quiet spell goes out after ``first_delay`` (a tenth
  of a second: a reader sees it within a round trip or two, and the burst a
  model call often starts with goes in the same signal); the ones that
  follow wait for the next batch, at most one every ``interval`` seconds;
* events waiting for the same batch are combined where their class says they
  can be (:meth:`LiveEvent.merge`: consecutive text deltas become one), up
  to the size of a batch;
* one signal carries at most ``max_batch_bytes`` (256 KiB as recorded: the
  events' JSON, base64-encoded by the stream, and its framing), as *one*
  item of the stream (``LIVE_BATCH_TYPE``; ``RunHandle.events`` unpacks
  it), so the stream the workflow keeps, and every poll of it, grows with
  batches, not events; a larger
  backlog goes out in several signals, one after another without waiting
  for the interval. One event larger than a batch goes alone (the context
  never hands over one over ``MAX_LIVE_EVENT_BYTES``: a
  ``LiveOmittedEvent`` stands in for it);
* a step that publishes faster than its events can be sent waits in
  ``ctx.add_event`` while more than ``max_backlog_bytes`` are waiting
  (backpressure): a tight loop of 100,000 events streams them all, in
  order, in bounded memory, rather than one signal gRPC or Temporal would
  refuse (which is how 10,000 events were once all lost);
* the step's remaining events are flushed before the step returns its
  result, so its live items always precede its completion in the stream.

The stream client numbers each batch per publisher and the workflow drops a
batch it has seen, so a signal the client had to send again is not shown
twice. Publishing never fails a step: a batch that cannot be sent is sent
again (with a growing pause; backpressure is off meanwhile, so a step is
never stuck on a stream that is down), and what still cannot be sent when
the step ends is dropped with a warning that counts it (the step's committed
result is what counts; a reader's ``view="committed"`` then lacks those
items, which their ``seq`` numbers make visible).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
from typing import Any

from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from temporal_workflows._engine.serde import encode
from temporal_workflows._live import LiveEvent
from temporal_workflows.temporal._protocol import EVENTS_TOPIC, LIVE_BATCH_TYPE

__all__ = [
    "DEFAULT_FIRST_DELAY",
    "DEFAULT_LIVE_INTERVAL",
    "MAX_BACKLOG_BYTES",
    "MAX_BATCH_BYTES",
    "LivePublisher",
    "wire_size",
]

_log = logging.getLogger(__name__)

DEFAULT_LIVE_INTERVAL = 0.5
"""Seconds between two batches of a step's live events."""

DEFAULT_FIRST_DELAY = 0.1
"""Seconds the first live event of a quiet spell waits for company before it is sent."""

MAX_BATCH_BYTES = 256 * 1024
"""Most bytes of live events one signal carries, as the stream sends them (see :func:`wire_size`)."""

MAX_BACKLOG_BYTES = 4 * MAX_BATCH_BYTES
"""A step publishing while more than this waits to be sent waits in ``ctx.add_event`` until it drains."""

_JSON_PLAIN = {"encoding": b"json/plain"}

_BATCH_HEAD = b'{"type":"' + LIVE_BATCH_TYPE.encode() + b'","data":['
_BATCH_TAIL = b"]}"

_BATCH_FRAMING = 512
"""Bytes of a publish signal around its one item's events: the batch envelope, the payload's metadata, the
signal's fields (topic, publisher id, sequence), base64's padding."""

_CLOSE_TIMEOUT = 30.0
"""Longest a step waits, when it ends, for one batch of its last live events to be accepted."""

_CLOSE_ATTEMPTS = 4
"""Attempts a step makes, when it ends, to send one batch the server keeps refusing before it drops the rest."""

_MAX_RETRY_PAUSE = 10.0
"""Longest pause between two attempts to send a batch the server did not accept."""


def wire_size(json_bytes: int) -> int:
    """Bytes one live event of ``json_bytes`` of JSON adds to a publish signal (base64, with its comma)."""
    return (4 * (json_bytes + 1) + 2) // 3


@dataclasses.dataclass(slots=True)
class _Item:
    event: LiveEvent
    data: bytes | None
    """The event as JSON; ``None`` once merged (encoded again when sent)."""
    size: int
    """Its :func:`wire_size` (for a merged one, the sum of its parts': an upper bound)."""


class LivePublisher:
    """The live sink of one step attempt on Temporal (see the module docstring).

    Created per attempt; the stream client is made on the first event, so a
    step that publishes nothing costs nothing.
    """

    def __init__(
        self,
        *,
        interval: float = DEFAULT_LIVE_INTERVAL,
        first_delay: float = DEFAULT_FIRST_DELAY,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        max_backlog_bytes: int = MAX_BACKLOG_BYTES,
    ) -> None:
        self._interval = interval
        self._first_delay = first_delay
        self._max_batch_bytes = max_batch_bytes
        self._max_backlog_bytes = max(max_backlog_bytes, max_batch_bytes)
        self._pending: collections.deque[_Item] = collections.deque()
        self._pending_bytes = 0
        self._client: WorkflowStreamClient | None = None
        self._topic: Any = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._full = asyncio.Event()
        self._progress = asyncio.Event()
        self._unconfirmed = 0
        """Events handed to the stream client whose signal the server has not accepted yet."""
        self._failures = 0
        """Consecutive batches the server did not accept (backpressure is off while it is not zero)."""
        self._closed = False
        self.batches = 0
        self.published = 0
        """Events the run's stream has accepted (the ``live_events.published`` metric)."""
        """Signals sent (for tests and measurements)."""
        self.largest_batch = 0
        """Bytes of the largest batch sent, as :func:`wire_size` counts them (for tests and measurements)."""
        self.waits = 0
        """Times the step waited for its backlog to drain (for tests and measurements)."""

    # -- the sink -------------------------------------------------------------------

    def publish(self, event: LiveEvent, data: bytes) -> None:
        if self._closed:
            _log.warning("live event %s published after its step ended; dropped", event.type)
            return
        if self._client is None:
            self._client = WorkflowStreamClient.from_within_activity()
            self._topic = self._client.topic(EVENTS_TOPIC)
        size = wire_size(len(data))
        if self._pending:
            last = self._pending[-1]
            if last.size + size <= self._max_batch_bytes:
                merged = last.event.merge(event)
                if merged is not None:
                    self._pending[-1] = _Item(merged, None, last.size + size)
                    self._pending_bytes += size
                    self._kick()
                    return
        self._pending.append(_Item(event, data, size))
        self._pending_bytes += size
        self._kick()

    async def room(self) -> None:
        """Wait while the backlog is over ``max_backlog_bytes`` and the stream takes batches."""
        while self._pending_bytes > self._max_backlog_bytes and not self._failures and not self._closed:
            self.waits += 1
            self._progress.clear()
            self._full.set()
            await self._progress.wait()

    def _kick(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="live events")
        self._wake.set()
        if self._pending_bytes >= self._max_batch_bytes:
            self._full.set()

    # -- batching -------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closed:
            await self._wake.wait()  # the first event of a quiet spell
            if self._first_delay > 0 and not self._full.is_set():
                # What the step publishes meanwhile (a model call's first burst) joins this batch.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._first_delay):  # not wait_for: see close()
                        await self._full.wait()
            while self._pending or self._unconfirmed:
                self._wake.clear()
                self._full.clear()
                try:
                    await self._send_one()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self._failures += 1
                    self._progress.set()  # a step waiting for room goes on: the stream is not taking batches
                    pause = min(self._interval * 2**self._failures, _MAX_RETRY_PAUSE)
                    _log.warning(
                        "live events could not be sent (%s: %s); %s waiting, sending again in %.1f s",
                        type(e).__name__,
                        e,
                        f"{len(self._pending) + self._unconfirmed:,}",
                        pause,
                    )
                    await asyncio.sleep(pause)
                    continue
                if self._pending_bytes >= self._max_batch_bytes:
                    continue  # a backlog drains at full speed
                # The next batch waits out the interval (or fills up); what arrives meanwhile joins it.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._full.wait()
            self._wake.clear()

    async def _send_one(self) -> None:
        """Send one batch: the one the server did not accept last time, else the oldest pending events."""
        client = self._client
        assert client is not None
        if not self._unconfirmed:
            size, parts = _BATCH_FRAMING, list[bytes]()
            while self._pending and (not parts or size + self._pending[0].size <= self._max_batch_bytes):
                item = self._pending.popleft()
                size += item.size
                self._pending_bytes -= item.size
                parts.append(item.data if item.data is not None else to_json(encode(item.event)))
            # One stream item per batch: the stream (and each poll of it) grows with batches, not events.
            self._topic.publish(Payload(metadata=_JSON_PLAIN, data=_BATCH_HEAD + b",".join(parts) + _BATCH_TAIL))
            self._unconfirmed = len(parts)
            self.largest_batch = max(self.largest_batch, size)
        # The stream client sends its whole buffer as one signal (and keeps it to send again if that fails):
        # it never holds more than this one batch.
        await client.flush()
        self.published += self._unconfirmed
        self._unconfirmed = 0
        self._failures = 0
        self.batches += 1
        self._progress.set()

    def abandon(self) -> None:
        """Stop without sending what is left (the attempt was cancelled: its items are void)."""
        self._closed = True
        self._pending.clear()
        self._pending_bytes = 0
        self._progress.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        """Flush what is left (the step is ending); never raises.

        The batching task is cancelled and awaited, and also told by ``_closed`` to stop: Python 3.11's
        ``asyncio.wait_for`` loses a cancellation that comes as the awaited future completes (its waits
        here are ``asyncio.timeout`` now), which left this await, and the step, waiting for ever.
        """
        self._closed = True
        self._progress.set()
        self._wake.set()
        self._full.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._client is None:
            return
        failures = 0
        while self._pending or self._unconfirmed:
            try:
                async with asyncio.timeout(_CLOSE_TIMEOUT):
                    await self._send_one()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if failures >= _CLOSE_ATTEMPTS:
                    _log.warning(
                        "the last %s live events of a step could not be sent (%s: %s); dropped",
                        f"{len(self._pending) + self._unconfirmed:,}",
                        type(e).__name__,
                        e,
                    )
                    return
                await asyncio.sleep(min(self._interval * 2**failures, _MAX_RETRY_PAUSE))
