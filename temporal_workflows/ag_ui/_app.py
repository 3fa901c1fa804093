"""The AG-UI endpoint as a Starlette app: ``POST /{name}`` with a ``RunAgentInput``, answered by the turn's SSE stream.

Mount it in any ASGI app (``app.mount("/ag-ui", AGUIApp(...))`` in FastAPI or
Starlette); ``temporal-workflows console`` serves it at ``/ag-ui`` behind its
token, host and origin rules. The app itself checks what every request
brings: a JSON body (``Content-Type: application/json``) of bounded size,
read by a deadline, that is a valid ``RunAgentInput``; a ``Last-Event-ID``
that is one of its own event ids. Refusals are JSON ``{"error": ...}`` with a
4xx status; what the run refuses comes in the stream, as ``RUN_ERROR``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import PROTOCOL_VERSION, RunAgentInput, RunErrorEvent, RunStartedEvent
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client
from temporalio.service import RPCError

from temporal_workflows._engine.inbound import check_policy
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows._http.body import BodyRefused, read_json_object
from temporal_workflows._http.server import Limits
from temporal_workflows.ag_ui._graph import GraphKind
from temporal_workflows.ag_ui._ids import TurnCursor
from temporal_workflows.ag_ui._kinds import Refusal, RunKind
from temporal_workflows.ag_ui._llama import llama_kind
from temporal_workflows.ag_ui._turn import Turn, sse
from temporal_workflows.temporal._protocol import MAX_ID_CHARS
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

__all__ = ["AGUIApp", "AGUISettings"]

_log = logging.getLogger("temporal_workflows.ag_ui")

MAX_RESUME_ENTRIES = 100
"""Answers one turn may carry (a run answers at most this many requests in one update)."""

POLICY_PROPS = ("concurrentInput", "multitaskStrategy")
"""Where a turn's ``forwardedProps`` say what its message does if the run is busy: this library's name
(``concurrent_input``), and LangGraph's (``multitask_strategy``, which its AG-UI adapter forwards), so a front
end written for either works unchanged. The values are the same four: ``enqueue``, ``reject``,
``interrupt``, ``rollback``."""


def turn_policy(forwarded: Any) -> str | None:
    """The concurrent-input policy a turn's ``forwardedProps`` name (``None``: the run's own).

    Raises:
        ValueError: a value that is not one of the four, or the two names given different values (naming the field).
    """
    if not isinstance(forwarded, dict):
        return None  # forwardedProps is the client's own: only an object can name a policy
    found: dict[str, str] = {}
    for name in POLICY_PROPS:
        value = forwarded.get(name)
        if value is not None:
            found[name] = check_policy(value, f"forwardedProps.{name}")
    if len(set(found.values())) > 1:
        given = ", ".join(f"{k}={v!r}" for k, v in found.items())
        raise ValueError(f"forwardedProps: {given} disagree; give one of {' or '.join(POLICY_PROPS)}")
    return next(iter(found.values()), None)


@dataclass(frozen=True)
class AGUISettings:
    """How an AG-UI endpoint starts runs and what it takes from a request.

    Attributes:
        task_queue: Where the runs of new threads go (the workers' queue).
        workflow_id_prefix: The first part of every thread's workflow id,
            ``<prefix>:<name>:<threadId>``; the same in every process serving
            the endpoint.
        max_body_bytes: Largest request body (AG-UI clients send the whole
            conversation every turn).
        request_timeout: Seconds the body may take to arrive.
        keepalive_seconds: An SSE comment this often while the run works,
            so proxies keep the stream open.
    """

    task_queue: str = DEFAULT_TASK_QUEUE
    workflow_id_prefix: str = "ag-ui"
    max_body_bytes: int = 4 * 1024 * 1024
    request_timeout: float = 30.0
    keepalive_seconds: float = 15.0


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


def _kind_of(workflow: Any) -> RunKind:
    if isinstance(workflow, RunKind):
        return workflow
    if isinstance(workflow, Workflow):
        return GraphKind(workflow)
    llama = llama_kind(workflow)  # a LlamaIndex workflow on TemporalRuntime
    if llama is not None:
        return llama
    raise TypeError(
        "an AG-UI endpoint serves graphs (temporal_workflows.Workflow) and LlamaIndex workflows on TemporalRuntime, "
        f"not {type(workflow).__name__}"
    )


def _validation_errors(e: ValidationError) -> str:
    """Pydantic's errors by field, without the values the client sent."""
    parts = []
    for err in e.errors(include_url=False, include_input=False, include_context=False)[:10]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


class AGUIApp(Starlette):
    """An AG-UI endpoint for durable runs: ``POST /{name}`` for each workflow given (``name``: the graph's name, or
    the LlamaIndex workflow's ``workflow_name``).

    ``threadId`` names the run (the Temporal workflow id
    ``<prefix>:<name>:<threadId>``): the first turn of a thread starts it,
    every later one gives it the turn's input (``resume`` answers, the newest
    user message) in the same call, then streams the run's events until the
    run is at rest. Any process serving the endpoint, against any worker, can
    serve any turn of any thread: nothing is kept between requests.

    Args:
        client: A Temporal client whose data converter reads the runs (the
            ``TemporalWorkflowsPlugin``'s), or a coroutine function that makes
            one (called once, on the server's event loop).
        workflows: The graphs it serves (built with a ``name``), and LlamaIndex workflows hosted on a
            ``TemporalRuntime`` (``MyFlow(runtime=TemporalRuntime(...))``: a thread is one run of it).
        settings: Task queue, id prefix, body limits.
    """

    def __init__(
        self,
        client: Client | Callable[[], Awaitable[Client]],
        workflows: Sequence[Any],
        *,
        settings: AGUISettings | None = None,
    ) -> None:
        self.settings = settings or AGUISettings()
        self.kinds: dict[str, RunKind] = {}
        for wf in workflows:
            kind = _kind_of(wf)
            if kind.name in self.kinds:
                raise ValueError(f"two workflows named {kind.name!r}: each needs its own name")
            self.kinds[kind.name] = kind
        self._connect = client
        self._client: Client | None = client if isinstance(client, Client) else None
        self._lock = asyncio.Lock()
        self._limits = Limits(request_timeout=self.settings.request_timeout, max_body=self.settings.max_body_bytes)

        async def not_found(request: Request, exc: Exception) -> Response:
            return _error(404, f"no AG-UI endpoint here; POST to one of: {', '.join(self._paths(request))}")

        async def not_allowed(request: Request, exc: Exception) -> Response:
            return _error(405, "an AG-UI endpoint takes POST with a RunAgentInput JSON body")

        super().__init__(
            routes=[Route("/{name}", self._serve, methods=["POST"])],
            exception_handlers={404: not_found, 405: not_allowed},
        )

    def _paths(self, request: Request) -> list[str]:
        root = request.scope.get("root_path", "")
        return [f"{root}/{name}" for name in sorted(self.kinds)] or ["(none: no workflow given)"]

    async def client(self) -> Client:
        if self._client is None:
            async with self._lock:
                if self._client is None:
                    connect = self._connect
                    assert callable(connect)
                    self._client = await connect()  # type: ignore[misc]
        return self._client

    async def _serve(self, request: Request) -> Response:
        kind = self.kinds.get(request.path_params["name"])
        if kind is None:
            return _error(
                404,
                f"no workflow {request.path_params['name']!r} here; POST to one of: {', '.join(self._paths(request))}",
            )
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return _error(415, "send the RunAgentInput as JSON (Content-Type: application/json)")
        try:
            body = await read_json_object(request, self._limits, empty_is_object=False)
        except BodyRefused as e:
            return _error(e.response.status_code, bytes(e.response.body).decode())
        try:
            inp = RunAgentInput.model_validate(body)
        except ValidationError as e:
            return _error(400, f"not a RunAgentInput: {_validation_errors(e)}")
        for what, value in (("threadId", inp.thread_id), ("runId", inp.run_id)):
            if not value or len(value) > MAX_ID_CHARS:
                return _error(400, f"{what}: 1 to {MAX_ID_CHARS} characters")
        if inp.resume and len(inp.resume) > MAX_RESUME_ENTRIES:
            return _error(400, f"resume: at most {MAX_RESUME_ENTRIES} entries")
        try:
            policy = turn_policy(inp.forwarded_props)
        except ValueError as e:
            return _error(400, str(e))
        after: TurnCursor | None = None
        last_id = request.headers.get("last-event-id")
        if last_id is not None:
            after = TurnCursor.parse(last_id)
            if after is None:
                return _error(400, "Last-Event-ID: not an id of this endpoint's events")
        try:
            turn = Turn(
                kind,
                await self.client(),
                inp,
                task_queue=self.settings.task_queue,
                id_prefix=self.settings.workflow_id_prefix,
                last_event_id=after,
                policy=policy,
            )
            refused = await turn.begin()
        except RPCError as e:
            return _error(502, f"Temporal: {e.message}")
        except ValueError as e:
            return _error(400, str(e))
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        if refused is not None:
            return EventSourceResponse(_refused(inp, refused), sep="\n", headers=headers)
        return EventSourceResponse(
            _guarded(inp, turn.events()), sep="\n", ping=int(self.settings.keepalive_seconds), headers=headers
        )


async def _refused(inp: RunAgentInput, refusal: Refusal) -> AsyncIterator[dict[str, Any]]:
    """A turn whose input was refused: the run is untouched."""
    yield sse((None, RunStartedEvent(thread_id=inp.thread_id, run_id=inp.run_id, protocol_version=PROTOCOL_VERSION)))
    yield sse((None, RunErrorEvent(message=str(refusal), code=refusal.code)))


async def _guarded(inp: RunAgentInput, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """The turn's events; if following the run fails (Temporal unreachable), a ``RUN_ERROR`` saying so ends them."""
    started = False
    try:
        async for item in events:
            started = True
            yield item
    except (RPCError, Refusal) as e:
        _log.warning("AG-UI turn %s of thread %s: %s", inp.run_id, inp.thread_id, e)
        if not started:
            yield sse((None, RunStartedEvent(thread_id=inp.thread_id, run_id=inp.run_id)))
        message = e.message if isinstance(e, RPCError) else str(e)
        error = RunErrorEvent(
            message=f"the run could not be followed: {message} (reconnect with Last-Event-ID)", code=type(e).__name__
        )
        yield sse((None, error))
