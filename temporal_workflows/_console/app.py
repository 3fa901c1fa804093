"""The console's ASGI app: runs from visibility, a run live, its requests, checkpoints, and starting runs.

Every route reads or acts through the project's client layer
(``RunHandle``: ``status``, ``pending_requests``, ``state``,
``checkpoints``, ``events``, ``respond``, ``reset``, ``fork``; ``start_run``),
so what the console shows and does is what the CLI shows and does, and a
refusal is the run's own (an update the run refused comes back as its
library error, whose text the page shows). The page itself is static
(``static/``): plain ES modules and a vendored Mermaid; no build step.

The routes live by subject, each module a ``routes(state)`` over one
:class:`~._console.state.ConsoleState`: ``pages`` (the page, login),
``runs`` (what it knows, runs, a run), ``events`` (a run's events over SSE),
``actions`` (answers, resets, forks, checkpoints, starts); ``codec`` the
codec server's protocol. JSON routes (all behind :class:`~._console.gate.Gate`):

- ``GET /api/info``: namespace, the graphs this console knows (their
  pictures and start forms), whether a token is required.
- ``GET /api/runs?graph=&status=&since=&until=&page_size=&next=``: one page
  of runs from Temporal visibility (``WorkflowType``, the
  ``GraphRunStatus`` search attribute, ``ExecutionStatus``, ``StartTime``);
  ``next`` is the page token the previous page returned.
- ``GET /api/runs/{id}``: describe, status, pending requests, state, checkpoints, and the run's picture:
  the one the run keeps of the graph it pinned (its ``topology`` query), else that of the graph given with
  ``--workflow``, else none and ``picture_note`` saying why.
- ``GET /api/runs/{id}/events``: the run's events over SSE, batched.
- ``POST /api/runs/{id}/requests/{request_id}`` ``{"response": ...}`` or
  ``{"approve": true|false}`` (a tool approval in one click).
- ``POST /api/runs/{id}/reset`` ``{"checkpoint_id": ...}`` (or none: clean),
  ``POST /api/runs/{id}/fork`` ``{"checkpoint_id", "new_id"}``,
  ``POST /api/runs/{id}/checkpoint`` ``{"label"}``,
  ``POST /api/start`` ``{"graph", "message", "id"}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from temporalio.client import Client

from temporal_workflows._console import actions, events, pages, runs
from temporal_workflows._console.codec import codec_routes
from temporal_workflows._console.gate import Gate
from temporal_workflows._console.guard import Guard
from temporal_workflows._console.runs import run_picture as _run_picture
from temporal_workflows._console.state import ConsoleSettings, ConsoleState, error

__all__ = ["ConsoleSettings", "make_app"]

_ = _run_picture  # kept importable here for code that reads a run's picture the way the console does


def make_app(
    guard: Guard,
    settings: ConsoleSettings,
    connect: Callable[[], Awaitable[Client]],
) -> Gate:
    """The console (and codec endpoints), wrapped in its gate.

    Args:
        guard: Who may use it (token, host names, Web UI origins).
        settings: What it serves.
        connect: Makes the Temporal client, once, on the server's event loop.
    """
    state = ConsoleState(guard, settings, connect)
    routes: list[Any] = [*pages.routes(state), *runs.routes(state), *events.routes(state), *actions.routes(state)]
    routes += state.run_routes()  # what the subjects serve under a run, by path and by ?id=
    if settings.codec is not None:
        routes += codec_routes(settings.codec, settings.limits, allow_encode=settings.allow_encode)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no such page: {request.url.path}")

    app = Starlette(routes=routes, exception_handlers={404: not_found})
    return Gate(app, guard)
