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
  can be (:meth:`LiveEvent.merge`: consecutive text deltas become one);
* a batch is also sent once it holds ``max_batch_bytes``, and the step's
  remaining events are flushed before the step returns its result, so its
  live items always precede its completion in the stream.

The stream client numbers each batch per publisher and the workflow drops a
batch it has seen, so a signal the client had to send again is not shown
twice. Publishing never fails a step: a batch that cannot be sent is kept
and sent with the next (the stream client's own retry), and what still
cannot be sent when the step ends is dropped with a warning (the step's
committed result is what counts; a reader's ``view="committed"`` then lacks
those items, which their ``seq`` numbers make visible).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from temporal_workflows._engine.serde import encode
from temporal_workflows._live import LiveEvent
from temporal_workflows.temporal._protocol import EVENTS_TOPIC

__all__ = ["DEFAULT_FIRST_DELAY", "DEFAULT_LIVE_INTERVAL", "LivePublisher"]

_log = logging.getLogger(__name__)

DEFAULT_LIVE_INTERVAL = 0.5
"""Seconds between two batches of a step's live events."""

DEFAULT_FIRST_DELAY = 0.1
"""Seconds the first live event of a quiet spell waits for company before it is sent."""

MAX_BATCH_BYTES = 256 * 1024
"""A batch holding this much JSON is sent at once (one signal stays far below the payload limit)."""

MAX_EVENT_BYTES = 1024 * 1024
"""A live event larger than this is not streamed (it would crowd out a signal); the step still commits."""

_JSON_PLAIN = {"encoding": b"json/plain"}

_CLOSE_TIMEOUT = 30.0
"""Longest a step waits, when it ends, for its last live events to be accepted."""


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
    ) -> None:
        self._interval = interval
        self._first_delay = first_delay
        self._max_batch_bytes = max_batch_bytes
        self._pending: list[LiveEvent] = []
        self._pending_bytes = 0
        self._client: WorkflowStreamClient | None = None
        self._topic: Any = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._full = asyncio.Event()
        self._closed = False
        self.batches = 0
        """Signals sent (for tests and measurements)."""

    # -- the sink -------------------------------------------------------------------

    def publish(self, event: LiveEvent) -> None:
        if self._closed:
            _log.warning("live event %s published after its step ended; dropped", event.type)
            return
        if self._client is None:
            self._client = WorkflowStreamClient.from_within_activity()
            self._topic = self._client.topic(EVENTS_TOPIC)
        if self._pending:
            merged = self._pending[-1].merge(event)
            if merged is not None:
                self._pending[-1] = merged
                self._pending_bytes += _rough_size(event)
                self._kick()
                return
        self._pending.append(event)
        self._pending_bytes += _rough_size(event)
        self._kick()

    def _kick(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="live events")
        self._wake.set()
        if self._pending_bytes >= self._max_batch_bytes:
            self._full.set()

    # -- batching -------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()  # the first event of a quiet spell
            if self._first_delay > 0 and not self._full.is_set():
                # What the step publishes meanwhile (a model call's first burst) joins this batch.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self._first_delay)
            while self._pending:
                self._wake.clear()
                self._full.clear()
                await self._send()
                # The next batch waits out the interval (or fills up); what arrives meanwhile joins it.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self._interval)
            self._wake.clear()

    async def _send(self) -> None:
        """Send what is pending as one batch (or more, if it is large)."""
        client = self._client
        if client is None:
            return
        events, self._pending, self._pending_bytes = self._pending, [], 0
        for event in events:
            data = to_json(encode(event))
            if len(data) > MAX_EVENT_BYTES:
                _log.warning(
                    "live event %s of executor %r is %s bytes as JSON, over %s; not streamed",
                    event.type,
                    event.executor_id,
                    f"{len(data):,}",
                    f"{MAX_EVENT_BYTES:,}",
                )
                continue
            self._topic.publish(Payload(metadata=_JSON_PLAIN, data=data))
        try:
            await client.flush()
            self.batches += 1
        except asyncio.CancelledError:
            raise
        except Exception as e:  # kept by the stream client and sent with the next batch
            _log.warning(
                "live events could not be sent yet (%s: %s); retrying with the next batch", type(e).__name__, e
            )

    def abandon(self) -> None:
        """Stop without sending what is left (the attempt was cancelled: its items are void)."""
        self._closed = True
        self._pending = []
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        """Flush what is left (the step is ending); never raises."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._client is None:
            return
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                if self._pending:
                    await self._send()
                await self._client.flush()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            _log.warning("the last live events of a step could not be sent (%s: %s); dropped", type(e).__name__, e)


def _rough_size(event: LiveEvent) -> int:
    """A cheap upper-bound-ish size for batching decisions (the exact JSON is made once, at send time)."""
    data = getattr(event, "data", None)
    return 200 + (len(str(data)) if data is not None else 0)
