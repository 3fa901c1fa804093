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
``actions`` (answers, resets, forks, checkpoints, starts); the codec server's protocol, the gate, the guard and
the server are the shared HTTP pieces in ``_http/``. JSON routes (all behind :class:`~._http.gate.Gate`):

- ``GET /api/info``: namespace, the graphs this console knows (their
  pictures and start forms), whether a token is required.
- ``GET /api/runs?graph=&status=&since=&until=&page_size=&next=``: one page
  of runs from Temporal visibility (``WorkflowType``, the
  ``GraphRunStatus`` search attribute, ``ExecutionStatus``, ``StartTime``);
  ``next`` is the page token the previous page returned.
- ``GET /api/runs/{id}``: describe, status, pending requests, state, checkpoints, and the run's picture:
  the one the run keeps of the graph it pinned (its ``topology`` query), else that of the graph given with
  ``--workflow``, else none and ``picture_note`` saying why.
- ``GET /api/runs/{id}/events``: the run's events over SSE, batched; ``id:`` is the stream position, and
  ``Last-Event-ID`` or ``?after=`` resumes after one.
- ``GET /api/runs/{id}/timeline``: supersteps by executors with times, attempts and workers, from the run's
  history (``timeline.py``).
- ``GET /api/schedules``: the namespace's schedules (``schedule_json``: id,
  graph, calendar, paused, next and recent runs); a run a schedule started
  says so in ``GET /api/runs/{id}`` (``scheduled_by``, Temporal's
  ``TemporalScheduledById`` search attribute).
- ``POST /api/runs/{id}/requests/{request_id}`` ``{"response": ...}`` or
  ``{"approve": true|false}`` (a tool approval in one click).
- ``POST /api/runs/{id}/events`` ``{"event_type": "Answer", "event": {...}, "step": null}``: an event for a
  LlamaIndex run (``RunHandle.send_event``), checked by the run.
- ``POST /api/runs/{id}/reset`` ``{"checkpoint_id": ...}`` (or none: clean),
  ``POST /api/runs/{id}/fork`` ``{"checkpoint_id", "new_id"}``,
  ``POST /api/runs/{id}/checkpoint`` ``{"label"}``,
  ``POST /api/runs/{id}/send`` ``{"message", "executor_id"?, "policy"?}`` (a message into a
  running or keep-alive run; ``policy``: what it does if the run is busy, docs/concurrent-input.md),
  ``POST /api/start`` ``{"graph", "message", "id"}``.

Every route under a run is also ``/api/run/<sub>?id=<id>`` (``GET /api/run?id=``, ``/api/run/events?id=``,
``/api/run/requests?id=&request_id=``, ...): the form for any id, ``.`` and ``..`` included; in the path form
the id is one segment (a ``/`` in it written ``%2F``).

AG-UI (``temporal_workflows.ag_ui``, with the ``ag-ui`` extra): ``POST
/ag-ui/{name}`` for each graph given, a ``RunAgentInput`` answered by the
AG-UI event stream; the gate's rules for front ends apply (``gate.py``).

LlamaIndex runs (``TemporalRuntime``) go through the same routes: ``RunHandle`` serves both kinds, so a
LlamaIndex run's status, requests, store (as state), context (as its checkpoint, forked into a new run) and
events read as a graph run's do; its picture is its workflow's steps and events, as LlamaIndex describes them
(``_llama_runtime/_picture.py``), lit per step from its ``StepStateChanged`` events. A LlamaIndex workflow
given with ``--workflow`` can be started here and is served over AG-UI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from temporalio.client import Client

from temporal_workflows._console import actions, events, pages, runs
from temporal_workflows._console.runs import run_picture as _run_picture
from temporal_workflows._console.state import ConsoleSettings, ConsoleState, check_run_id, error
from temporal_workflows._console.timeline import timeline_route
from temporal_workflows._http.codec import codec_routes
from temporal_workflows._http.gate import AG_UI_PREFIX, Gate
from temporal_workflows._http.guard import Guard

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
    state.run_route("GET", "timeline", timeline_route(state.client, _run_id))
    routes += state.run_routes()  # what the subjects serve under a run, by path and by ?id=
    if settings.codec is not None:
        routes += codec_routes(settings.codec, settings.limits, allow_encode=settings.allow_encode)
    routes += _ag_ui_routes(state)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no such page: {request.url.path}")

    app = Starlette(routes=routes, exception_handlers={404: not_found})
    return Gate(app, guard)


def _run_id(request: Request) -> str:
    """The run id a route under a run was reached with, refused as :meth:`ConsoleState.handle` refuses it."""
    return check_run_id(str(request.path_params["run_id"]))


def _ag_ui_routes(state: ConsoleState) -> list[Any]:
    """``/ag-ui/{name}`` for each graph (the AG-UI endpoint on the console's client, or why there is none), and
    Agent Framework DevUI's API and page over the same turns when ``agent-framework-devui`` is installed."""
    try:
        from temporal_workflows.ag_ui import AGUIApp, AGUISettings
    except ImportError as e:
        reason = str(e)

        async def missing(request: Request) -> Response:
            return error(404, f"no AG-UI endpoints on this console: {reason}")

        return [Mount(AG_UI_PREFIX, routes=[Route("/{path:path}", missing, methods=["GET", "POST"])])]
    from temporal_workflows.ag_ui._devui import devui_available, devui_routes

    app = AGUIApp(
        state.client,
        [*state.graphs.values(), *state.llama_workflows.values()],
        settings=AGUISettings(task_queue=state.settings.task_queue, max_body_bytes=state.settings.limits.max_body),
    )
    routes: list[Any] = [Mount(AG_UI_PREFIX, app=app)]
    if devui_available():
        routes += devui_routes(app, token_required=state.guard.token_required)
    return routes
