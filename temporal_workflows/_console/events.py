"""A run's events live, over server-sent events: one reader per run for the whole console, resumable.

However many pages follow a run, the console reads its events once
(:class:`RunEvents`, over ``RunHandle.events()``, itself one poll of the run
per process) and turns each stream position into JSON once; every page's
stream sends those same strings. So a thousand pages cost the run nothing
more than one, and the console little more than their sockets.

Each SSE message holds whole stream positions (at most :data:`EVENT_BATCH`
events unless one position holds more) and its ``id`` is the last position
in it. A browser that loses the connection reconnects by itself and sends
``Last-Event-ID``; a client can also ask ``?after=<position>``: the stream
then goes on right after it, exactly once, whether the run is live or
closed, in this console process or a new one. Messages:

- ``events``: a JSON list of events (``id``: the stream position);
- ``status``: ``{"temporal": "unreachable", "message": ...}`` while the
  console cannot reach Temporal (the stream waits and resumes), then
  ``{"temporal": "ok"}``;
- ``end``: the run has closed and every event was sent (never sent for a
  running run);
- ``error``: the stream failed (``{"message": ...}``); the connection then
  closes and the browser reconnects, resuming after the last ``id``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from temporal_workflows._console.state import ConsoleState, Refused, why
from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._events import WorkflowEvent, WorkflowStatusEvent
from temporal_workflows._live import LiveEvent
from temporal_workflows.temporal._client.client import RunHandle

__all__ = ["EVENT_BATCH", "RunEvents", "event_json", "routes"]

EVENT_BATCH = 500
"""Events sent in one SSE message at most (a run emitting fast is followed in batches, not event by event)."""
_COOLDOWN = timedelta(milliseconds=50)
"""How soon the run is polled again after a poll brought something: low, so a fast run is followed closely."""
KEPT_JSON_BYTES = 64 * 1024 * 1024
"""JSON of a run's events the console keeps for pages that join late; a page needing older ones reads them itself."""
LINGER_SECONDS = 30.0
"""How long a run's reader goes on after its last page left (a reload joins it again)."""
RECONNECT_MS = 1000
"""The ``retry:`` the console asks browsers to wait before reconnecting."""


def event_json(event: WorkflowEvent) -> dict[str, Any]:
    try:
        data: dict[str, Any] = event.model_dump(mode="json", fallback=str)
    except Exception:
        data = {"type": event.type, "data": str(event.data)}
    data["class"] = type(event).__name__
    if isinstance(event, WorkflowStatusEvent) and event.state is not None:
        data["status"] = RunStatus.of(event.state).value  # the status word the badge and the filter use
    text = getattr(event.data, "text", None) if isinstance(event, LiveEvent) else None
    if isinstance(text, str) and text:
        data["text"] = text  # an agent's streamed update: its text delta (not the committed whole, again)
    return data


def _fragment(events: list[WorkflowEvent]) -> str:
    return ",".join(json.dumps(event_json(e)) for e in events)


class RunEvents:
    """The console's one reader of a run's events, as JSON fragments by stream position, for every page."""

    def __init__(self, handle: RunHandle, forget: Any) -> None:
        self.handle = handle
        self._forget = forget
        self.closed_run: str | None = None
        """Once the run has closed and every event is here: the Temporal run id of its last execution (a
        later run under the same workflow id is another stream)."""
        self._positions: list[int] = []
        self._fragments: list[tuple[int, int, str]] = []  # (position, events, JSON of the events, no brackets)
        self._bytes = 0
        self.base = -1
        """Positions up to this one are no longer kept (a page after one of them reads them itself)."""
        self.done = False
        self.error: BaseException | None = None
        self.readers = 0
        self._tick = asyncio.Event()
        self._stream = handle.events(poll_cooldown=_COOLDOWN, outage_timeout=None)
        self._task: asyncio.Task[None] | None = asyncio.get_running_loop().create_task(self._read())
        self._linger: asyncio.TimerHandle | None = None

    @property
    def unreachable(self) -> BaseException | None:
        return self._stream.unreachable

    def _wake(self) -> None:
        self._tick.set()
        self._tick = asyncio.Event()

    async def _read(self) -> None:
        try:
            async for position, events in self._stream.batches():
                fragment = _fragment(events)
                self._positions.append(position)
                self._fragments.append((position, len(events), fragment))
                self._bytes += len(fragment)
                while self._bytes > KEPT_JSON_BYTES and len(self._fragments) > 1:
                    old = self._fragments.pop(0)
                    self._positions.pop(0)
                    self._bytes -= len(old[2])
                    self.base = old[0]
                self._wake()
            with contextlib.suppress(Exception):
                self.closed_run = (await self.handle.describe()).run_id
            self.done = True
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.error = e
            self._forget(self)  # the next page starts a new reader
        finally:
            self._task = None
            self._wake()
            if self.readers <= 0 and self._linger is None:
                self._linger = asyncio.get_running_loop().call_later(LINGER_SECONDS, self.close)

    def join(self) -> None:
        self.readers += 1
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def leave(self) -> None:
        self.readers -= 1
        if self.readers <= 0 and self._linger is None:
            self._linger = asyncio.get_running_loop().call_later(LINGER_SECONDS, self.close)

    def close(self) -> None:
        """Stop reading (the reader's lingering ended with no page on it) and forget it."""
        self._forget(self)
        if self._task is not None:
            self._task.cancel()

    async def messages(self, after: int) -> AsyncIterator[dict[str, Any]]:
        """The SSE messages of a page that has every position up to ``after``, until the run's end."""
        self.join()
        try:
            pos = after
            told_unreachable = False
            yield {"retry": RECONNECT_MS, "comment": "stream"}
            while True:
                if pos < self.base:
                    async for message in self._read_itself(pos):
                        pos = int(message["id"])
                        yield message
                    pos = max(pos, self.base)  # nothing of the run's between that the view shows
                    continue
                i = bisect.bisect_right(self._positions, pos)
                if i < len(self._fragments):
                    parts: list[str] = []
                    count = 0
                    for position, n, fragment in self._fragments[i:]:
                        if parts and count + n > EVENT_BATCH:
                            break
                        parts.append(fragment)
                        count += n
                        pos = position
                    yield {"event": "events", "id": str(pos), "data": "[" + ",".join(parts) + "]"}
                    continue
                if self.error is not None:
                    yield {"event": "error", "data": json.dumps({"message": why(self.error)})}
                    return
                if self.done:
                    yield {"event": "end", "data": "{}"}
                    return
                down = self.unreachable
                if (down is not None) != told_unreachable:
                    told_unreachable = down is not None
                    status = {"temporal": "unreachable", "message": why(down)} if down else {"temporal": "ok"}
                    yield {"event": "status", "data": json.dumps(status)}
                tick = self._tick
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):  # not wait_for, which can lose a cancellation in 3.11
                        await tick.wait()
        finally:
            self.leave()

    async def _read_itself(self, after: int) -> AsyncIterator[dict[str, Any]]:
        """Positions after ``after`` that the shared reader no longer keeps, read through the client layer."""
        stream = self.handle.events(after=after, poll_cooldown=_COOLDOWN, outage_timeout=None)
        try:
            parts: list[str] = []
            count = 0
            last = after
            async for position, events in stream.batches():
                if position > self.base:
                    break
                parts.append(_fragment(events))
                count += len(events)
                last = position
                if count >= EVENT_BATCH:
                    yield {"event": "events", "id": str(last), "data": "[" + ",".join(parts) + "]"}
                    parts, count = [], 0
            if parts:
                yield {"event": "events", "id": str(last), "data": "[" + ",".join(parts) + "]"}
        finally:
            await stream.aclose()


def _after(request: Request) -> int:
    """The position a stream resumes after: ``Last-Event-ID`` (a browser's reconnect) over ``?after=``."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "-1"
    try:
        after = int(raw)
    except ValueError:
        raise Refused(400, f"after / Last-Event-ID: a stream position (an integer), not {raw[:40]!r}") from None
    if after < -1:
        raise Refused(400, "after / Last-Event-ID: -1 (from the start) or a stream position")
    return after


def routes(state: ConsoleState) -> list[Any]:
    readers: dict[str, RunEvents] = state.run_events

    def forget(hub: RunEvents) -> None:
        if readers.get(hub.handle.id) is hub:
            del readers[hub.handle.id]

    async def events(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        after = _after(request)
        desc = await h.describe()  # a 404 now, not an SSE stream that ends at once
        hub = readers.get(h.id)
        if hub is not None and hub.done and hub.closed_run != desc.run_id:
            hub.close()  # the run closed and its id has started again: another stream
            hub = None
        if hub is None:
            hub = readers[h.id] = RunEvents(h, forget)

        async def stream() -> AsyncIterator[dict[str, Any]]:
            async for message in hub.messages(after):
                yield message

        return EventSourceResponse(stream(), ping=15, send_timeout=60, headers={"Cache-Control": "no-store"})

    state.run_route("GET", "events", events)
    return []
