"""What every console route shares: the settings, the Temporal client, and how a route refuses.

The routes are split by subject (``pages``, ``runs``, ``events``,
``actions``), each a ``routes(state)`` function over one
:class:`ConsoleState`; ``app.make_app`` puts them together. A new subject
(another front end's endpoint, another panel's data) is one more module of
the same shape.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from importlib.abc import Traversable
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._errors import WorkflowError
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows._http.body import MAX_JSON_DEPTH, BodyRefused, read_json_object
from temporal_workflows._http.guard import Guard
from temporal_workflows._http.server import Limits
from temporal_workflows.temporal._client.client import RunHandle, get_run
from temporal_workflows.temporal._codec import EncryptionCodec
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

__all__ = [
    "MAX_WORKFLOW_ID_BYTES",
    "ConsoleSettings",
    "ConsoleState",
    "Refused",
    "check_run_id",
    "check_workflow_id",
    "error",
    "guarded",
    "iso",
    "why",
]

Handler = Callable[[Request], Awaitable[Response]]

MAX_WORKFLOW_ID_BYTES = 1000
"""The longest workflow id a run can have (Temporal's default ``limit.maxIDLength``, in UTF-8 bytes)."""
_log = logging.getLogger("temporal_workflows.console")


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
    llama_workflows: Mapping[str, Any] = field(default_factory=dict)
    """LlamaIndex workflows by ``workflow_name``, each hosted on a ``TemporalRuntime`` (which starts their runs)."""
    task_queue: str = DEFAULT_TASK_QUEUE
    codec: EncryptionCodec | None = None
    allow_encode: bool = False
    limits: Limits = field(default_factory=lambda: Limits(max_body=4 * 1024 * 1024))


class Refused(Exception):
    """A refusal a route answers as JSON ``{"error": ...}`` with its status."""

    def __init__(self, status: int, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def error(status: int, message: str, detail: str | None = None) -> JSONResponse:
    """A refusal: ``{"error": what a person reads}``, and ``detail`` (the run's own words in full) if any."""
    return JSONResponse({"error": message, **({"detail": detail} if detail and detail != message else {})}, status)


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def why(e: BaseException) -> str:
    """The run's own words for a refusal."""
    if isinstance(e, WorkflowError):
        return f"{type(e).__name__}: {e}"
    if isinstance(e, WorkflowUpdateFailedError):
        return str(e.cause or e)
    if isinstance(e, RPCError):
        return e.message
    return f"{type(e).__name__}: {e}"


def guarded(fn: Handler) -> Handler:
    """A route whose refusals (and Temporal's) are JSON answers."""

    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except Refused as e:
            return error(e.status, str(e), e.detail)
        except WorkflowAlreadyStartedError as e:
            return error(409, f"a run {e.workflow_id!r} already exists")
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return error(404, f"not found: {e.message}")
            if e.status == RPCStatusCode.INVALID_ARGUMENT:
                return error(400, e.message)
            return error(502, f"Temporal: {e.message}")
        except RecursionError:
            return error(400, f"the request is nested too deeply (at most {MAX_JSON_DEPTH} levels of JSON)")
        except RuntimeError as e:
            if "Failed client connect" in str(e):  # the SDK's words when no server answers at all
                return error(502, f"Temporal cannot be reached: {str(e).split('Server connection error:')[-1].strip()}")
            return _internal(request, e)
        except Exception as e:
            return _internal(request, e)

    return wrapper


def _internal(request: Request, e: Exception) -> JSONResponse:
    """A failure of the console itself: one log line (the traceback at debug level) and a JSON 500."""
    _log.warning("%s %s failed: %s: %s", request.method, request.url.path, type(e).__name__, e)
    _log.debug("traceback", exc_info=e)
    return error(500, f"the console failed to answer this: {type(e).__name__}: {e}"[:500])


def check_workflow_id(value: Any, what: str = "id") -> str:
    """A workflow id a run can have: a string of 1 to 1,000 bytes, not only blanks."""
    if not isinstance(value, str) or not value.strip():
        raise Refused(400, f"{what}: a workflow id (not empty, not only blanks)")
    if len(value.encode()) > MAX_WORKFLOW_ID_BYTES:
        raise Refused(400, f"{what}: a workflow id of at most {MAX_WORKFLOW_ID_BYTES:,} bytes (Temporal's limit)")
    return value


def check_run_id(run_id: str) -> str:
    """The id a route under a run was reached with, if a run can have it (1 to 1,000 bytes), else a 400."""
    if not run_id or len(run_id.encode()) > MAX_WORKFLOW_ID_BYTES:
        raise Refused(400, f"a workflow id of 1 to {MAX_WORKFLOW_ID_BYTES:,} bytes")
    return run_id


class ConsoleState:
    """The console's shared parts: settings, graphs, the pictures drawn, the Temporal client.

    Args:
        guard: Who may use it (token, host names, Web UI origins).
        settings: What it serves.
        connect: Makes the Temporal client, once, on the server's event loop.
    """

    PICTURES_KEPT = 256
    """Pictures of runs kept drawn (by Temporal run id; a run's pinned graph never changes)."""

    def __init__(self, guard: Guard, settings: ConsoleSettings, connect: Callable[[], Awaitable[Client]]) -> None:
        self.guard = guard
        self.settings = settings
        self.graphs: dict[str, Workflow] = dict(settings.graphs)
        self.llama_workflows: dict[str, Any] = dict(settings.llama_workflows)
        self.pictures: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.static: Traversable = resources.files("temporal_workflows._console") / "static"
        self._run_routes: dict[tuple[str, str], Handler] = {}
        self.run_events: dict[str, Any] = {}
        """The console's one reader of each run's events that pages follow (``events.RunEvents``), by id."""
        self._connect = connect
        self._client_lock = asyncio.Lock()
        self._client: Client | None = None

    async def client(self) -> Client:
        async with self._client_lock:
            if self._client is None:
                self._client = await self._connect()
            return self._client

    async def handle(self, run_id: str) -> RunHandle:
        return get_run(await self.client(), check_run_id(run_id))

    async def body_json(self, request: Request) -> dict[str, Any]:
        try:
            return await read_json_object(request, self.settings.limits)
        except BodyRefused as e:
            raise Refused(e.response.status_code, bytes(e.response.body).decode()) from None

    # -- routes under a run ---------------------------------------------------------------------

    def run_route(self, method: str, sub: str, handler: Handler) -> None:
        """Serve ``handler`` under a run: ``sub`` is ``""`` (the run itself), ``"events"``, ``"reset"``, …, or
        ``"requests/*"`` (one more segment: ``request_id``). The handler reads ``request.path_params["run_id"]``.

        Every such route is reachable two ways that cannot collide, whatever the id holds:
        ``/api/runs/<id>/<sub>`` with the id as **one** path segment (a ``/`` in it written ``%2F``), and
        ``/api/run/<sub>?id=<id>``, for ids a URL path cannot carry (``.`` and ``..``, which clients resolve away).
        """
        self._run_routes[(method, sub)] = guarded(handler)

    def run_routes(self) -> list[Route]:
        methods = sorted({m for m, _ in self._run_routes})
        return [
            Route("/api/runs/{rest:path}", self._by_path, methods=methods),
            Route("/api/run", self._by_query, methods=methods),
            Route("/api/run/{rest:path}", self._by_query, methods=methods),
        ]

    async def _dispatch(self, request: Request, run_id: str, parts: list[str]) -> Response:
        sub, request_id = "/".join(parts), None
        if len(parts) == 2 and parts[0] == "requests":
            sub, request_id = "requests/*", parts[1]
        handler = self._run_routes.get((request.method, sub)) or (
            self._run_routes.get(("GET", sub)) if request.method == "HEAD" else None
        )
        if handler is None:
            if any(s == sub for _, s in self._run_routes):
                return error(405, f"{request.method} is not served here")
            return error(404, f"no such page: {request.url.path}")
        request.scope["path_params"] = {"run_id": run_id, **({"request_id": request_id} if request_id else {})}
        return await handler(request)

    async def _by_path(self, request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.url.path.encode()
        rest = raw.decode("latin-1").split("/api/runs/", 1)[-1]
        segments = [unquote(part) for part in rest.split("/")]
        run_id, parts = segments[0], segments[1:]
        known = {s for _, s in self._run_routes}
        shape = "requests/*" if len(parts) == 2 and parts[0] == "requests" else "/".join(parts)
        if parts and shape not in known and request.method in ("GET", "HEAD"):
            run_id, parts = unquote(rest), []  # an id with a "/" left as it is (not %2F): as before, the whole rest
        return await self._dispatch(request, run_id, parts)

    async def _by_query(self, request: Request) -> Response:
        run_id = request.query_params.get("id")
        if run_id is None:
            return error(400, "id: the run's workflow id (?id=...)")
        rest = request.path_params.get("rest", "")
        parts = [p for p in rest.split("/") if p] if rest else []
        if parts == ["requests"] and request.query_params.get("request_id"):
            parts.append(request.query_params["request_id"])
        return await self._dispatch(request, run_id, parts)

    def keep_picture(self, run_id: str, picture: dict[str, Any]) -> None:
        self.pictures[run_id] = picture
        while len(self.pictures) > self.PICTURES_KEPT:
            self.pictures.popitem(last=False)

    def picture(self, run_id: str) -> dict[str, Any] | None:
        if run_id in self.pictures:
            self.pictures.move_to_end(run_id)
            return self.pictures[run_id]
        return None
