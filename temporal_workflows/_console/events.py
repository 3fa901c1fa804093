"""A run's events live, over server-sent events, in batches."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from temporal_workflows._console.state import ConsoleState, guarded, why
from temporal_workflows._events import WorkflowEvent
from temporal_workflows._live import LiveEvent

__all__ = ["EVENT_BATCH", "event_json", "routes"]

EVENT_BATCH = 500
"""Events sent in one SSE message at most (a run emitting fast is followed in batches, not event by event)."""
_COOLDOWN = timedelta(milliseconds=50)
"""How soon the events route polls again after a poll returned: low, so a fast run is followed closely."""


def event_json(event: WorkflowEvent) -> dict[str, Any]:
    try:
        data: dict[str, Any] = event.model_dump(mode="json", fallback=str)
    except Exception:
        data = {"type": event.type, "data": str(event.data)}
    data["class"] = type(event).__name__
    text = getattr(event.data, "text", None) if isinstance(event, LiveEvent) else None
    if isinstance(text, str) and text:
        data["text"] = text  # an agent's streamed update: its text delta (not the committed whole, again)
    return data


def routes(state: ConsoleState) -> list[Any]:
    async def events(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        await h.describe()  # a 404 now, not an SSE stream that ends at once
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=10 * EVENT_BATCH)

        async def read() -> None:
            try:
                async for event in h.events(poll_cooldown=_COOLDOWN):
                    await queue.put(event_json(event))
            except Exception as e:
                await queue.put({"type": "console_error", "message": why(e)})
            finally:
                await queue.put(None)

        async def stream() -> AsyncIterator[dict[str, Any]]:
            reader = asyncio.create_task(read())
            sent = 0
            try:
                while True:
                    first = await queue.get()
                    if first is None:
                        yield {"event": "end", "data": "{}"}
                        return
                    batch = [first]
                    while len(batch) < EVENT_BATCH and not queue.empty():
                        item = queue.get_nowait()
                        if item is None:
                            queue.put_nowait(None)
                            break
                        batch.append(item)
                    sent += len(batch)
                    yield {"event": "events", "id": str(sent), "data": json.dumps(batch)}
            finally:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader

        return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-store"})

    return [Route("/api/runs/{run_id:path}/events", guarded(events))]
