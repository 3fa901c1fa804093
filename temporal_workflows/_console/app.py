"""The console's ASGI app: runs from visibility, a run live, its requests, checkpoints, and starting runs.

Every route reads or acts through the project's client layer
(``RunHandle``: ``status``, ``pending_requests``, ``state``,
``checkpoints``, ``events``, ``respond``, ``reset``, ``fork``; ``start_run``),
so what the console shows and does is what the CLI shows and does, and a
refusal is the run's own (an update the run refused comes back as its
library error, whose text the page shows). The page itself is static
(``static/``): plain ES modules and a vendored Mermaid; no build step.

JSON routes (all behind :class:`~._console.gate.Gate`):

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
- ``GET /api/schedules``: the namespace's schedules (``schedule_json``: id,
  graph, calendar, paused, next and recent runs); a run a schedule started
  says so in ``GET /api/runs/{id}`` (``scheduled_by``, Temporal's
  ``TemporalScheduledById`` search attribute).
- ``POST /api/runs/{id}/requests/{request_id}`` ``{"response": ...}`` or
  ``{"approve": true|false}`` (a tool approval in one click).
- ``POST /api/runs/{id}/reset`` ``{"checkpoint_id": ...}`` (or none: clean),
  ``POST /api/runs/{id}/fork`` ``{"checkpoint_id", "new_id"}``,
  ``POST /api/runs/{id}/checkpoint`` ``{"label"}``,
  ``POST /api/runs/{id}/send`` ``{"message", "executor_id"?, "policy"?}`` (a message into a
  running or keep-alive run; ``policy``: what it does if the run is busy, docs/concurrent-input.md),
  ``POST /api/start`` ``{"graph", "message", "id"}``.

AG-UI (``temporal_workflows.ag_ui``, with the ``ag-ui`` extra): ``POST
/ag-ui/{name}`` for each graph given, a ``RunAgentInput`` answered by the
AG-UI event stream; the gate's rules for front ends apply (``gate.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from pydantic import TypeAdapter
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._console.codec import BodyRefused, codec_routes, read_body
from temporal_workflows._console.gate import AG_UI_PREFIX, Gate
from temporal_workflows._console.guard import COOKIE_NAME, Guard
from temporal_workflows._console.server import Limits
from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._engine.inbound import CONCURRENT_INPUT
from temporal_workflows._errors import WorkflowError
from temporal_workflows._events import WorkflowEvent
from temporal_workflows._graph.shape import GraphShape
from temporal_workflows._graph.viz import mermaid_node_ids, to_mermaid
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows._live import LiveEvent
from temporal_workflows.temporal._client.client import RunHandle, get_run, start_run
from temporal_workflows.temporal._client.schedules import SCHEDULED_BY_ATTRIBUTE, list_schedules
from temporal_workflows.temporal._codec import EncryptionCodec
from temporal_workflows.temporal._protocol import MAX_ID_CHARS, STATUS_SEARCH_ATTRIBUTE
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

__all__ = ["ConsoleSettings", "make_app"]

STATUSES: tuple[str, ...] = tuple(
    s.value
    for s in (RunStatus.RUNNING, RunStatus.WAITING_FOR_INPUT, RunStatus.IDLE, RunStatus.COMPLETED, RunStatus.FAILED)
)
"""The statuses the page filters by (``RunStatus``; ``starting`` and ``continued_as_new`` last only a task)."""
MAX_PAGE_SIZE = 200
EVENT_BATCH = 500
"""Events sent in one SSE message at most (a run emitting fast is followed in batches, not event by event)."""
_STATUS_KEY = SearchAttributeKey.for_keyword(STATUS_SEARCH_ATTRIBUTE)
_SCHEDULED_BY_KEY = SearchAttributeKey.for_keyword(SCHEDULED_BY_ATTRIBUTE)
_SAFE_VALUE = re.compile(r"[^'\"\\\x00-\x1f]{1,200}")


@dataclass(frozen=True)
class ConsoleSettings:
    """What one console serves.

    Attributes:
        graphs: The graphs it knows by name: their pictures, and start forms
            (runs of other graphs are listed and answered, without a picture).
        task_queue: Where runs started from the console go.
        codec: Serve ``/decode`` (and ``/encode`` if ``allow_encode``) with it, for the Web UI.
        allow_encode: Serve ``/encode``.
        limits: Request deadline, stranger cap, body size.
    """

    graphs: Mapping[str, Workflow] = field(default_factory=dict)
    task_queue: str = DEFAULT_TASK_QUEUE
    codec: EncryptionCodec | None = None
    allow_encode: bool = False
    limits: Limits = field(default_factory=lambda: Limits(max_body=4 * 1024 * 1024))


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _graph_json(workflow: Workflow) -> dict[str, Any]:
    graph = workflow.graph
    start = graph.executors[graph.topology.start_executor_id]
    schema: dict[str, Any] | None = None
    for tp in start.input_types:
        with contextlib.suppress(Exception):
            schema = TypeAdapter(tp).json_schema()
            break
    return {
        "name": workflow.name,
        "mermaid": to_mermaid(graph),
        "node_ids": mermaid_node_ids(graph),
        "start_executor": graph.topology.start_executor_id,
        "start_schema": schema,
        "from": "console",
    }


_SHAPE = TypeAdapter(GraphShape)
PICTURES_KEPT = 256
"""Pictures of runs the console keeps drawn (by Temporal run id; a run's pinned graph never changes)."""


def _run_picture(answer: Any) -> tuple[dict[str, Any] | None, str]:
    """The picture a run keeps of its graph (its ``topology`` query's ``shape``), drawn by the same code as
    ``graph --format mermaid``; or ``None`` and why not."""
    if not isinstance(answer, dict):
        return None, "the run did not answer"
    if "unavailable" in answer:
        return None, f"the run did not answer its topology query ({answer['unavailable']})"
    if answer.get("shape") is None:
        return None, str(answer.get("note") or "the run keeps no picture of its graph")
    try:
        shape = _SHAPE.validate_python(answer["shape"])
        return {
            "name": shape.name,
            "mermaid": to_mermaid(shape),
            "node_ids": mermaid_node_ids(shape),
            "start_executor": shape.start,
            "from": "run",
        }, ""
    except Exception as e:
        return None, f"the run's picture could not be drawn: {type(e).__name__}: {e}"[:500]


def _event_json(event: WorkflowEvent) -> dict[str, Any]:
    try:
        data: dict[str, Any] = event.model_dump(mode="json", fallback=str)
    except Exception:
        data = {"type": event.type, "data": str(event.data)}
    data["class"] = type(event).__name__
    text = getattr(event.data, "text", None) if isinstance(event, LiveEvent) else None
    if isinstance(text, str) and text:
        data["text"] = text  # an agent's streamed update: its text delta (not the committed whole, again)
    return data


def _why(e: BaseException) -> str:
    """The run's own words for a refusal."""
    if isinstance(e, WorkflowError):
        return f"{type(e).__name__}: {e}"
    if isinstance(e, WorkflowUpdateFailedError):
        return str(e.cause or e)
    if isinstance(e, RPCError):
        return e.message
    return f"{type(e).__name__}: {e}"


def _query_for(params: Mapping[str, str]) -> str:
    """A visibility query from the page's filters; values are checked, never pasted as they are."""
    clauses = []
    graph = params.get("graph") or ""
    if graph:
        if not _SAFE_VALUE.fullmatch(graph):
            raise _Refused(400, "graph: a graph name without quotes or backslashes")
        clauses.append(f"WorkflowType = '{graph}'")
    status = params.get("status") or ""
    if status:
        if status not in STATUSES:
            raise _Refused(400, f"status: one of {', '.join(STATUSES)}")
        if status == RunStatus.COMPLETED:
            clauses.append("ExecutionStatus = 'Completed'")
        elif status == RunStatus.FAILED:
            clauses.append(
                f"(ExecutionStatus IN ('Failed', 'Terminated', 'TimedOut') OR {STATUS_SEARCH_ATTRIBUTE} = "
                f"'{RunStatus.FAILED.value}')"
            )
        else:
            clauses.append(f"ExecutionStatus = 'Running' AND {STATUS_SEARCH_ATTRIBUTE} = '{status}'")
    for name, op in (("since", ">="), ("until", "<=")):
        value = params.get(name) or ""
        if value:
            try:
                when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise _Refused(400, f"{name}: an ISO 8601 time, e.g. 2026-01-31T12:00:00Z") from None
            if when.tzinfo is None:
                raise _Refused(400, f"{name}: give a time zone (Z or +hh:mm)")
            clauses.append(f"StartTime {op} '{when.isoformat()}'")
    return " AND ".join(clauses)


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
    graphs = dict(settings.graphs)
    graph_json = {name: _graph_json(wf) for name, wf in graphs.items()}
    pictures: OrderedDict[str, dict[str, Any]] = OrderedDict()
    client_lock = asyncio.Lock()
    clients: list[Client] = []
    static = resources.files("temporal_workflows._console") / "static"

    async def client() -> Client:
        async with client_lock:
            if not clients:
                clients.append(await connect())
            return clients[0]

    async def handle(run_id: str) -> RunHandle:
        if not run_id or len(run_id) > MAX_ID_CHARS:
            raise _Refused(400, f"a workflow id of 1 to {MAX_ID_CHARS} characters")
        return get_run(await client(), run_id)

    async def body_json(request: Request) -> dict[str, Any]:
        try:
            raw = await read_body(request, settings.limits)
        except BodyRefused as e:
            raise _Refused(e.response.status_code, bytes(e.response.body).decode()) from None
        try:
            value = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _Refused(400, f"the body is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise _Refused(400, "the body is a JSON object")
        return value

    def guarded(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def wrapper(request: Request) -> Response:
            try:
                return await fn(request)
            except _Refused as e:
                return _error(e.status, str(e))
            except WorkflowAlreadyStartedError as e:
                return _error(409, f"a run {e.workflow_id!r} already exists")
            except RPCError as e:
                if e.status == RPCStatusCode.NOT_FOUND:
                    return _error(404, f"not found: {e.message}")
                if e.status == RPCStatusCode.INVALID_ARGUMENT:
                    return _error(400, e.message)
                return _error(502, f"Temporal: {e.message}")

        return wrapper

    # -- pages --------------------------------------------------------------------------------

    async def index(request: Request) -> Response:
        return FileResponse(str(static / "index.html"), headers={"Cache-Control": "no-store"})

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return FileResponse(str(static / "login.html"))
        try:  # a urlencoded form, parsed here: no multipart parser needed for one field
            raw = await read_body(request, Limits(request_timeout=settings.limits.request_timeout, max_body=4096))
        except BodyRefused as e:
            return e.response
        given = (parse_qs(raw.decode(errors="replace")).get("token") or [""])[0]
        if not guard.token_required:
            return RedirectResponse("/", 303)
        if not guard.token_ok(given):
            return HTMLResponse(
                (static / "login.html").read_text().replace("<!--error-->", "<p class=error>Wrong token.</p>"), 401
            )
        response = RedirectResponse("/", 303)
        response.set_cookie(
            COOKIE_NAME,
            guard.session_value(),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    # -- reads ---------------------------------------------------------------------------------

    async def info(request: Request) -> Response:
        c = await client()
        return JSONResponse(
            {
                "namespace": c.namespace,
                "graphs": list(graph_json.values()),
                "statuses": list(STATUSES),
                "token_required": guard.token_required,
                "task_queue": settings.task_queue,
            }
        )

    async def runs(request: Request) -> Response:
        params = request.query_params
        query = _query_for(params)
        try:
            page_size = int(params.get("page_size") or 50)
        except ValueError:
            raise _Refused(400, "page_size: a number") from None
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise _Refused(400, f"page_size: 1 to {MAX_PAGE_SIZE}")
        token: bytes | None = None
        if params.get("next"):
            try:
                token = base64.b64decode(params["next"].encode(), altchars=b"-_", validate=True)
            except (binascii.Error, ValueError):
                raise _Refused(400, "next: the token a previous page returned") from None
        it = (await client()).list_workflows(query or None, page_size=page_size, next_page_token=token)
        await it.fetch_next_page()
        rows = []
        for ex in it.current_page or []:
            graph_status = ex.typed_search_attributes.get(_STATUS_KEY)
            temporal_status = ex.status.name.lower() if ex.status else None
            rows.append(
                {
                    "id": ex.id,
                    "run_id": ex.run_id,
                    "graph": ex.workflow_type,
                    # A running run says where it is by the search attribute (if the namespace has it).
                    "status": (graph_status or temporal_status)
                    if ex.status == WorkflowExecutionStatus.RUNNING
                    else temporal_status,
                    "graph_status": graph_status,
                    "temporal_status": temporal_status,
                    "start_time": _iso(ex.start_time),
                    "close_time": _iso(ex.close_time),
                    "task_queue": ex.task_queue,
                    "scheduled_by": ex.typed_search_attributes.get(_SCHEDULED_BY_KEY),
                }
            )
        next_token = it.next_page_token
        return JSONResponse(
            {
                "runs": rows,
                "query": query,
                "next": base64.urlsafe_b64encode(next_token).decode() if next_token else None,
            }
        )

    async def run(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        desc = await h.describe()

        async def maybe(call: Callable[[], Awaitable[Any]]) -> Any:
            try:
                return await asyncio.wait_for(call(), 10)
            except Exception as e:
                return {"unavailable": _why(e)}

        async def picture() -> tuple[dict[str, Any] | None, str]:
            # The run's own picture first (the graph it pinned, which --workflow may no longer match), kept
            # once drawn; then the one of the graph given with --workflow; else none, saying why.
            if desc.run_id and desc.run_id in pictures:
                pictures.move_to_end(desc.run_id)
                return pictures[desc.run_id], ""
            drawn, note = _run_picture(await maybe(h.topology))
            if drawn is not None and desc.run_id:
                pictures[desc.run_id] = drawn
                while len(pictures) > PICTURES_KEPT:
                    pictures.popitem(last=False)
            return drawn or graph_json.get(desc.workflow_type), note

        async def pending_json() -> list[dict[str, Any]]:
            return [r.model_dump(mode="json") for r in await h.pending_requests(restore=False)]

        status, pending, state, checkpoints, (graph, note) = await asyncio.gather(
            maybe(h.status), maybe(pending_json), maybe(h.state), maybe(h.checkpoints), picture()
        )
        return JSONResponse(
            {
                "id": h.id,
                "run_id": desc.run_id,
                "graph": desc.workflow_type,
                "temporal_status": desc.status.name.lower() if desc.status else None,
                "start_time": _iso(desc.start_time),
                "close_time": _iso(desc.close_time),
                "task_queue": desc.task_queue,
                "scheduled_by": desc.typed_search_attributes.get(_SCHEDULED_BY_KEY),
                "status": status,
                "pending_requests": pending if isinstance(pending, list) else [],
                "state": state,
                "checkpoints": checkpoints if isinstance(checkpoints, list) else [],
                "picture": graph,
                "picture_note": None if graph else note,
            }
        )

    async def events(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        await h.describe()  # a 404 now, not an SSE stream that ends at once
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=10 * EVENT_BATCH)

        async def read() -> None:
            try:
                async for event in h.events(poll_cooldown=_COOLDOWN):
                    await queue.put(_event_json(event))
            except Exception as e:
                await queue.put({"type": "console_error", "message": _why(e)})
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

    async def schedules(request: Request) -> Response:
        return JSONResponse({"schedules": await list_schedules(await client(), limit=MAX_PAGE_SIZE)})

    # -- actions -------------------------------------------------------------------------------

    async def answer(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        request_id = request.path_params["request_id"]
        body = await body_json(request)
        if "approve" in body:
            if not isinstance(body["approve"], bool):
                raise _Refused(400, "approve: true or false")
            pending = {r.request_id: r for r in await h.pending_requests(restore=False)}
            if request_id not in pending:
                raise _Refused(409, f"request {request_id!r} is not pending (answered elsewhere?)")
            response = _approval(pending[request_id].data, body["approve"])
        elif "response" in body:
            response = body["response"]
        else:
            raise _Refused(400, 'the body is {"response": ...} or {"approve": true|false}')
        try:
            accepted = await h.respond(request_id, response)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise _Refused(422, _why(e)) from None
        return JSONResponse({"accepted": accepted})

    async def reset(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        body = await body_json(request)
        checkpoint_id = body.get("checkpoint_id")
        if checkpoint_id is not None and not isinstance(checkpoint_id, str):
            raise _Refused(400, "checkpoint_id: a string")
        try:
            accepted = await h.reset(checkpoint_id=checkpoint_id)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise _Refused(422, _why(e)) from None
        return JSONResponse({"accepted": accepted})

    async def fork(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        body = await body_json(request)
        checkpoint_id, new_id = body.get("checkpoint_id"), body.get("new_id")
        if not isinstance(checkpoint_id, str) or not isinstance(new_id, str) or not new_id.strip():
            raise _Refused(400, "checkpoint_id and new_id: strings")
        try:
            new = await h.fork(checkpoint_id, new_id.strip())
        except (WorkflowError, ValueError) as e:
            raise _Refused(422, _why(e)) from None
        return JSONResponse({"started": new.id})

    async def checkpoint(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        body = await body_json(request)
        label = body.get("label")
        if label is not None and not isinstance(label, str):
            raise _Refused(400, "label: a string")
        try:
            taken = await h.checkpoint(label or None)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise _Refused(422, _why(e)) from None
        return JSONResponse({"taken": taken})

    async def send(request: Request) -> Response:
        h = await handle(request.path_params["run_id"])
        body = await body_json(request)
        if "message" not in body:
            raise _Refused(400, 'the body is {"message": ..., "executor_id"?: ..., "policy"?: ...}')
        policy, executor_id = body.get("policy") or None, body.get("executor_id") or None
        if policy is not None and policy not in CONCURRENT_INPUT:
            raise _Refused(400, f"policy: one of {', '.join(CONCURRENT_INPUT)}")
        if executor_id is not None and not isinstance(executor_id, str):
            raise _Refused(400, "executor_id: a string")
        if executor_id is None:
            topology = await h.topology()
            executor_id = topology.get("start_executor") if isinstance(topology, dict) else None
            if not isinstance(executor_id, str):
                raise _Refused(400, "executor_id: this run does not say its start executor; name one")
        try:
            sent = await h.send(executor_id, body["message"], policy=policy)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise _Refused(422, _why(e)) from None
        return JSONResponse({"accepted": sent})

    async def start(request: Request) -> Response:
        body = await body_json(request)
        name = body.get("graph")
        if not isinstance(name, str) or name not in graphs:
            raise _Refused(400, f"graph: one of {', '.join(sorted(graphs)) or '(none: start with --workflow)'}")
        run_id = body.get("id") or None
        if run_id is not None and (not isinstance(run_id, str) or len(run_id) > MAX_ID_CHARS):
            raise _Refused(400, f"id: a workflow id of at most {MAX_ID_CHARS} characters")
        try:
            h = await start_run(
                await client(), graphs[name], body.get("message"), id=run_id, task_queue=settings.task_queue
            )
        except (WorkflowError, ValueError) as e:
            raise _Refused(422, _why(e)) from None
        return JSONResponse({"started": h.id})

    routes: list[Any] = [
        Route("/", index),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/api/info", guarded(info)),
        Route("/api/runs", guarded(runs)),
        Route("/api/schedules", guarded(schedules)),
        Route("/api/runs/{run_id:path}/events", guarded(events)),
        Route("/api/runs/{run_id:path}/requests/{request_id}", guarded(answer), methods=["POST"]),
        Route("/api/runs/{run_id:path}/reset", guarded(reset), methods=["POST"]),
        Route("/api/runs/{run_id:path}/fork", guarded(fork), methods=["POST"]),
        Route("/api/runs/{run_id:path}/checkpoint", guarded(checkpoint), methods=["POST"]),
        Route("/api/runs/{run_id:path}/send", guarded(send), methods=["POST"]),
        Route("/api/runs/{run_id:path}", guarded(run)),
        Route("/api/start", guarded(start), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]
    if settings.codec is not None:
        routes += codec_routes(settings.codec, settings.limits, allow_encode=settings.allow_encode)
    routes += _ag_ui_routes(graphs, settings, client, token_required=guard.token_required)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, f"no such page: {request.url.path}")

    app = Starlette(routes=routes, exception_handlers={404: not_found})
    return Gate(app, guard)


def _ag_ui_routes(
    graphs: Mapping[str, Workflow],
    settings: ConsoleSettings,
    client: Callable[[], Awaitable[Client]],
    *,
    token_required: bool,
) -> list[Any]:
    """``/ag-ui/{name}`` for each graph (the AG-UI endpoint on the console's client, or why there is none), and
    Agent Framework DevUI's API and page over the same turns when ``agent-framework-devui`` is installed."""
    try:
        from temporal_workflows.ag_ui import AGUIApp, AGUISettings
    except ImportError as e:
        reason = str(e)

        async def missing(request: Request) -> Response:
            return _error(404, f"no AG-UI endpoints on this console: {reason}")

        return [Mount(AG_UI_PREFIX, routes=[Route("/{path:path}", missing, methods=["GET", "POST"])])]
    from temporal_workflows.ag_ui._devui import devui_available, devui_routes

    app = AGUIApp(
        client,
        list(graphs.values()),
        settings=AGUISettings(task_queue=settings.task_queue, max_body_bytes=settings.limits.max_body),
    )
    routes: list[Any] = [Mount(AG_UI_PREFIX, app=app)]
    if devui_available():
        routes += devui_routes(app, token_required=token_required)
    return routes


_COOLDOWN = timedelta(milliseconds=50)
"""How soon the events route polls again after a poll returned: low, so a fast run is followed closely."""


def _approval(request: Any, approved: bool) -> Any:
    """The JSON answer to an agent's tool-approval request (Agent Framework's ``Content``)."""
    try:
        from agent_framework import Content

        from temporal_workflows.agents._maf_types import install_maf_types
    except ImportError:
        raise _Refused(400, "approving a tool call needs the agents extra on the console") from None
    install_maf_types()
    try:
        content = Content.from_dict(request)
        return content.to_function_approval_response(approved=approved).to_dict()
    except Exception as e:
        raise _Refused(400, f"this request is not a tool approval: {e}") from None
