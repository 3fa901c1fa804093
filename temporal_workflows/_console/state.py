"""What every console route shares: the settings, the Temporal client, and how a route refuses.

The routes are split by subject (``pages``, ``runs``, ``events``,
``actions``), each a ``routes(state)`` function over one
:class:`ConsoleState`; ``app.make_app`` puts them together. A new subject
(another front end's endpoint, another panel's data) is one more module of
the same shape.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from importlib.abc import Traversable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._console.codec import BodyRefused, read_body
from temporal_workflows._console.guard import Guard
from temporal_workflows._console.server import Limits
from temporal_workflows._errors import WorkflowError
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows.temporal._client.client import RunHandle, get_run
from temporal_workflows.temporal._codec import EncryptionCodec
from temporal_workflows.temporal._protocol import MAX_ID_CHARS
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

__all__ = ["ConsoleSettings", "ConsoleState", "Refused", "error", "guarded", "iso", "why"]

Handler = Callable[[Request], Awaitable[Response]]


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


class Refused(Exception):
    """A refusal a route answers as JSON ``{"error": ...}`` with its status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


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
            return error(e.status, str(e))
        except WorkflowAlreadyStartedError as e:
            return error(409, f"a run {e.workflow_id!r} already exists")
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return error(404, f"not found: {e.message}")
            if e.status == RPCStatusCode.INVALID_ARGUMENT:
                return error(400, e.message)
            return error(502, f"Temporal: {e.message}")

    return wrapper


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
        self.pictures: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.static: Traversable = resources.files("temporal_workflows._console") / "static"
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
        if not run_id or len(run_id) > MAX_ID_CHARS:
            raise Refused(400, f"a workflow id of 1 to {MAX_ID_CHARS} characters")
        return get_run(await self.client(), run_id)

    async def body_json(self, request: Request) -> dict[str, Any]:
        try:
            raw = await read_body(request, self.settings.limits)
        except BodyRefused as e:
            raise Refused(e.response.status_code, bytes(e.response.body).decode()) from None
        try:
            value = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise Refused(400, f"the body is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise Refused(400, "the body is a JSON object")
        return value

    def keep_picture(self, run_id: str, picture: dict[str, Any]) -> None:
        self.pictures[run_id] = picture
        while len(self.pictures) > self.PICTURES_KEPT:
            self.pictures.popitem(last=False)

    def picture(self, run_id: str) -> dict[str, Any] | None:
        if run_id in self.pictures:
            self.pictures.move_to_end(run_id)
            return self.pictures[run_id]
        return None
