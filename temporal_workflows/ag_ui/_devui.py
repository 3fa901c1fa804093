"""Agent Framework DevUI's API for hosted graphs: DevUI's own page, served unchanged, starts, follows and answers runs.

DevUI (``agent-framework-devui``) is a React page over an OpenAI
Responses-style API. This module serves that API over the same turns as the
AG-UI endpoint (``_turn.py``), translating each turn's AG-UI events into the
events DevUI's page reads, so a DevUI *session* is an AG-UI *thread*: the same
durable run (``<prefix>:<graph>:<session id>``), whichever front end started
it.

- ``GET /meta``, ``/health``, ``/v1/entities``, ``/v1/entities/{name}/info``:
  the graphs given, as DevUI workflow entities (their picture as Agent
  Framework's ``Workflow.to_dict()`` draws it, the start executor's input form).
- ``GET|POST /v1/conversations``: the graph's threads, from Temporal
  visibility (a session waiting for a person is marked so); a new session is
  a new thread id (its run starts with its first input).
- ``POST /v1/responses`` (``stream: true``): a turn. The input form's value is
  the new message; ``workflow_hil_response`` answers are the ``resume``; run
  "from the checkpoint" ``now`` (``extra_body.checkpoint_id``), the turn gives
  nothing and shows where the run is, asking again what it waits for.
- ``GET /v1/conversations/{id}/items``: one checkpoint item, ``now``: the run as
  it is (its superstep, what it waits for).

Nothing is kept in the serving process: sessions are runs, items are queries.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from importlib import resources
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from pydantic import TypeAdapter
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError

from temporal_workflows._graph.shape import graph_shape
from temporal_workflows._http.body import BodyRefused, read_json_object
from temporal_workflows._version import __version__
from temporal_workflows.ag_ui._app import AGUIApp
from temporal_workflows.ag_ui._graph import GraphKind
from temporal_workflows.ag_ui._ids import thread_prefix, thread_workflow_id
from temporal_workflows.ag_ui._kinds import Refusal
from temporal_workflows.ag_ui._turn import Made, Turn
from temporal_workflows.temporal._client.client import get_run
from temporal_workflows.temporal._protocol import MAX_ID_CHARS, STATUS_SEARCH_ATTRIBUTE

__all__ = ["DEVUI_PATH", "devui_available", "devui_routes"]

DEVUI_PATH = "/devui"
"""Where the console serves DevUI's page (its API is at the root, where the page looks for it)."""
SESSIONS_LISTED = 100
_STATUS = SearchAttributeKey.for_keyword(STATUS_SEARCH_ATTRIBUTE)
_SAFE_NAME = re.compile(r"[^'\"\\\x00-\x1f]{1,200}")
_SAFE_THREAD = re.compile(r"[A-Za-z0-9._~-]{1,128}")
_EDGE_GROUP = {
    "single": "SingleEdgeGroup",
    "fan_out": "FanOutEdgeGroup",
    "fan_in": "FanInEdgeGroup",
    "switch_case": "SwitchCaseEdgeGroup",
    "multi_selection": "MultiSelectionEdgeGroup",
}
_PRIMITIVE = ("string", "integer", "number", "boolean")


def devui_ui() -> Any | None:
    """DevUI's built page (``agent_framework_devui/ui``), as the package ships it; ``None`` if it is not installed."""
    try:
        ui = resources.files("agent_framework_devui") / "ui"
    except ModuleNotFoundError:
        return None
    return ui if ui.joinpath("index.html").is_file() else None


def devui_available() -> bool:
    return devui_ui() is not None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}, "detail": message}, status)


# -- entities -------------------------------------------------------------------------------------------


def _input_schema(kind: GraphKind) -> tuple[dict[str, Any], str]:
    types = kind.workflow.graph.executors[kind.start_executor].input_types
    if str in types:
        return {"type": "string"}, "str"
    for tp in types:
        try:
            return TypeAdapter(tp).json_schema(), getattr(tp, "__name__", str(tp))
        except Exception:
            continue
    return {"type": "string"}, "str"


def _workflow_dump(kind: GraphKind) -> dict[str, Any]:
    """The graph as Agent Framework's ``Workflow.to_dict()`` shows it (what DevUI draws)."""
    graph = kind.workflow.graph
    shape = graph_shape(graph)
    groups = []
    for n, g in enumerate(shape.groups):
        edges = [{"source_id": s, "target_id": t} for s in g.sources for t in dict.fromkeys(g.targets)]
        groups.append(
            {"id": f"{_EDGE_GROUP.get(g.kind, 'EdgeGroup')}/{n}", "type": _EDGE_GROUP.get(g.kind), "edges": edges}
        )
    return {
        "name": shape.name,
        "id": shape.name,
        "start_executor_id": shape.start,
        "max_iterations": graph.topology.max_iterations,
        "edge_groups": groups,
        "executors": {eid: {"id": eid, "type": type(graph.executors[eid]).__name__} for eid in shape.executors},
        "output_executors": None,
        "intermediate_executors": None,
    }


def _entity(kind: GraphKind, *, detail: bool) -> dict[str, Any]:
    schema, type_name = _input_schema(kind)
    executors = list(kind.workflow.graph.executors)
    return {
        "id": kind.name,
        "type": "workflow",
        "name": kind.name,
        "description": (kind.workflow.description or None) if hasattr(kind.workflow, "description") else None,
        "framework": "agent_framework",
        "tools": executors,
        "metadata": {"source": "temporal_workflows", "durable": True},
        "source": "in_memory",
        "required_env_vars": None,
        "deployment_supported": False,
        "deployment_reason": "runs on Temporal: deploy its workers",
        "executors": executors,
        "workflow_dump": _workflow_dump(kind) if detail else None,
        "input_schema": schema,
        "input_type_name": type_name,
        "start_executor_id": kind.start_executor,
    }


# -- a turn's AG-UI events, as DevUI reads them ---------------------------------------------------------


def _strip(name: str) -> str:
    return re.sub(r" \(\d+\)$", "", name)


class _Responses:
    """Translates one turn's AG-UI events into DevUI's Responses stream (its ``_mapper.py``'s shapes)."""

    def __init__(self, response_id: str, entity_id: str, conversation: str) -> None:
        self.response_id = response_id
        self.entity_id = entity_id
        self.conversation = conversation
        self.created = time.time()
        self.seq = 0
        self.index = 0
        self.steps: dict[str, tuple[str, str, int]] = {}
        self.current: tuple[str, str, int] | None = None
        self.texts: dict[str, tuple[str, int, str]] = {}
        self.outputs: dict[str, tuple[str, list[str]]] = {}

    def _ev(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {"type": kind, **fields, "sequence_number": self.seq}

    def response(self, status: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created,
            "model": "temporal-workflows",
            "status": status,
            "output": [],
            "error": error,
            "metadata": {"entity_id": self.entity_id, "conversation": self.conversation},
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
        }

    def opening(self) -> list[dict[str, Any]]:
        return [
            self._ev("response.created", response=self.response("in_progress")),
            self._ev("response.in_progress", response=self.response("in_progress")),
        ]

    def _item_of(self, executor_id: str | None) -> tuple[str, str, int] | None:
        if executor_id is not None:
            for item in reversed(self.steps.values()):
                if item[1] == executor_id:
                    return item
        return self.current

    def _workflow_event(self, name: str, value: Any, executor_id: str | None = None) -> dict[str, Any]:
        item = self.current
        return self._ev(
            "response.workflow_event.completed",
            data={"event_type": name, "data": value, "executor_id": executor_id, "timestamp": _now()},
            executor_id=executor_id,
            item_id=item[0] if item else f"msg_{self.response_id}",
            output_index=item[2] if item else 0,
        )

    def map(self, event: BaseEvent) -> list[dict[str, Any]]:
        item: tuple[str, str, int] | None
        action: dict[str, Any]
        executor_id: Any
        if isinstance(event, StepStartedEvent):
            executor_id = _strip(event.step_name)
            self.index += 1
            # Unique across the session's responses: the page keeps items by id from turn to turn.
            item = (f"exec_{executor_id}_{self.response_id[-8:]}_{self.index}", executor_id, self.index)
            self.steps[event.step_name] = self.current = item
            action = {
                "type": "executor_action",
                "id": item[0],
                "executor_id": executor_id,
                "status": "in_progress",
                "metadata": {},
                "result": None,
                "error": None,
            }
            return [self._ev("response.output_item.added", output_index=item[2], item=action, created_at=time.time())]
        if isinstance(event, StepFinishedEvent):
            item = self.steps.pop(event.step_name, None)
            if item is None:
                return []
            action = {
                "type": "executor_action",
                "id": item[0],
                "executor_id": item[1],
                "status": "completed",
                "metadata": None,
                "result": None,
                "error": None,
            }
            return [self._ev("response.output_item.done", output_index=item[2], item=action, created_at=time.time())]
        if isinstance(event, TextMessageStartEvent):
            tag = (event.metadata or {}).get("temporal_workflows") or {}
            executor_id = tag.get("executor_id") or event.name
            if tag.get("output"):
                self.outputs[event.message_id] = (str(executor_id), [])
                return []
            item = self._item_of(executor_id)
            if item is None:
                return []
            self.texts[event.message_id] = (item[0], item[2], str(item[1]))
            part = {"type": "output_text", "text": "", "annotations": []}
            return [
                self._ev(
                    "response.content_part.added", content_index=0, item_id=item[0], output_index=item[2], part=part
                )
            ]
        if isinstance(event, TextMessageContentEvent):
            if event.message_id in self.outputs:
                self.outputs[event.message_id][1].append(event.delta)
                return []
            found = self.texts.get(event.message_id)
            if found is None:
                return []
            item_id, index, executor_id = found
            meta = {"workflow_event_type": "output", "workflow_output_kind": "terminal", "executor_id": executor_id}
            return [
                self._ev(
                    "response.output_text.delta",
                    content_index=0,
                    delta=event.delta,
                    item_id=item_id,
                    logprobs=[],
                    output_index=index,
                    metadata=meta,
                )
            ]
        if isinstance(event, TextMessageEndEvent):
            output = self.outputs.pop(event.message_id, None)
            self.texts.pop(event.message_id, None)
            if output is None:
                return []
            self.index += 1
            meta = {"workflow_event_type": "output", "workflow_output_kind": "terminal", "executor_id": output[0]}
            message = {
                "type": "message",
                "id": f"msg_{self.response_id}_{self.index}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "".join(output[1]), "annotations": []}],
                "metadata": meta,
            }
            return [self._ev("response.output_item.added", output_index=self.index, item=message)]
        if isinstance(event, ToolCallStartEvent):
            item = self.current
            call = {
                "type": "function_call",
                "id": event.tool_call_id,
                "call_id": event.tool_call_id,
                "name": event.tool_call_name,
                "arguments": "",
                "status": "in_progress",
            }
            return [self._ev("response.output_item.added", output_index=item[2] if item else 0, item=call)]
        if isinstance(event, ToolCallArgsEvent):
            item = self.current
            return [
                self._ev(
                    "response.function_call_arguments.delta",
                    delta=event.delta,
                    item_id=event.tool_call_id,
                    output_index=item[2] if item else 0,
                )
            ]
        if isinstance(event, ToolCallResultEvent):
            item = self.current
            result = event.content if isinstance(event.content, str) else json.dumps(event.content)
            return [
                self._ev(
                    "response.function_result.complete",
                    call_id=event.tool_call_id,
                    output=result,
                    status="completed",
                    item_id=event.message_id,
                    output_index=item[2] if item else 0,
                    timestamp=_now(),
                )
            ]
        if isinstance(event, CustomEvent):
            if event.name == "request_info":
                return []  # asked when the run rests (the interrupt outcome), where it can be answered
            value = event.value
            if event.name == "status":  # as DevUI shows a workflow's status: a trace line
                data = {"trace_type": "workflow_info", "event_type": "status", "data": value, "timestamp": _now()}
                item = self.current
                return [
                    self._ev(
                        "response.trace.completed",
                        data=data,
                        span_id=f"workflow_info_{self.seq}",
                        item_id=item[0] if item else f"msg_{self.response_id}",
                        output_index=item[2] if item else 0,
                    )
                ]
            executor_id = value.get("executor_id") if isinstance(value, dict) else None
            return [self._workflow_event(event.name, value, executor_id)]
        if isinstance(event, RunFinishedEvent):
            out = []
            if isinstance(event.outcome, RunFinishedInterruptOutcome):
                for interrupt in event.outcome.interrupts:
                    out.append(self._asked(interrupt))
            out.append(self._ev("response.completed", response=self.response("completed")))
            return out
        if isinstance(event, RunErrorEvent):
            error = {"code": event.code or "error", "message": event.message}
            return [self._ev("response.failed", response=self.response("failed", error))]
        if event.type in (EventType.RUN_STARTED, EventType.TOOL_CALL_END):
            return []
        dumped = event.model_dump(mode="json", by_alias=True)
        dumped.pop("type", None)
        return [self._workflow_event(event.type.value.lower(), dumped)]

    def _asked(self, interrupt: Any) -> dict[str, Any]:
        tag = (interrupt.metadata or {}).get("temporal_workflows") or {}
        schema = interrupt.response_schema or {"type": "string"}
        form = schema
        if schema.get("type") in _PRIMITIVE:
            form = {"type": "object", "properties": {"response": schema}, "required": ["response"]}
        item = self.current
        return self._ev(
            "response.request_info.requested",
            request_id=interrupt.id,
            source_executor_id=tag.get("source_executor_id", ""),
            request_type=tag.get("response_type", ""),
            request_data=tag.get("data") if isinstance(tag.get("data"), dict) else {"request": tag.get("data")},
            request_schema=form,
            response_schema=schema,
            item_id=item[0] if item else f"msg_{self.response_id}",
            output_index=item[2] if item else 0,
            timestamp=_now(),
        )


def _pending_event(ask: Any) -> dict[str, Any]:
    """A pending request as Agent Framework's checkpoints keep one (``pending_request_info_events``)."""
    tag = ask.metadata.get("temporal_workflows") or {}
    return {
        "request_id": ask.id,
        "source_executor_id": tag.get("source_executor_id"),
        "request_type": "FunctionApprovalRequest" if ask.reason == "tool_call" else "RequestInfo",
        "response_type": tag.get("response_type"),
        "data": tag.get("data"),
        "message": ask.message,
    }


def _now() -> str:
    return datetime.now().isoformat()


# -- requests -------------------------------------------------------------------------------------------


def _hil_responses(raw: Any) -> dict[str, Any] | None:
    """``{request id: answer}`` of a ``workflow_hil_response`` input (DevUI's answer form), else ``None``."""
    if not isinstance(raw, list):
        return None
    for item in raw:
        if isinstance(item, dict) and item.get("type") == "message" and isinstance(item.get("content"), list):
            for part in item["content"]:
                if isinstance(part, dict) and part.get("type") == "workflow_hil_response":
                    answers = part.get("responses")
                    if isinstance(answers, dict):
                        return {str(k): v for k, v in answers.items()}
    return None


def _message_text(raw: Any) -> str:
    """The input form's value as the message's text: the string itself, ``{"input": text}``, or a model's JSON."""
    if isinstance(raw, dict) and set(raw) == {"input"}:
        raw = raw["input"]
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):  # an OpenAI message list: its text parts
        texts = [
            str(part.get("text"))
            for item in raw
            if isinstance(item, dict)
            for part in (item["content"] if isinstance(item.get("content"), list) else [])
            if isinstance(part, dict) and part.get("type") in ("input_text", "text", "output_text")
        ]
        if texts:
            return "".join(texts)
    return json.dumps(raw)


def devui_routes(agui: AGUIApp, *, token_required: bool) -> list[BaseRoute]:
    """DevUI's API over ``agui``'s graphs and turns, and its page at :data:`DEVUI_PATH` (when it is installed)."""
    kinds: dict[str, GraphKind] = {n: k for n, k in agui.kinds.items() if isinstance(k, GraphKind)}
    settings = agui.settings

    def kind_of(name: Any) -> GraphKind:
        kind = kinds.get(str(name)) if isinstance(name, str) else None
        if kind is None:
            raise Refusal(f"no workflow {name!r} here; workflows: {', '.join(sorted(kinds)) or '(none)'}")
        return kind

    async def body_of(request: Request) -> dict[str, Any]:
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise _HTTP(415, "send JSON (Content-Type: application/json)")
        try:
            return await read_json_object(request, agui._limits)
        except BodyRefused as e:
            raise _HTTP(e.response.status_code, bytes(e.response.body).decode()) from None

    def guarded(fn: Any) -> Any:
        async def wrapper(request: Request) -> Response:
            try:
                response: Response = await fn(request)
                return response
            except _HTTP as e:
                return _error(e.status, str(e))
            except Refusal as e:
                return _error(404 if str(e).startswith("no workflow") else 400, str(e))
            except RPCError as e:
                return _error(502, f"Temporal: {e.message}")

        return wrapper

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "healthy", "entities_count": len(kinds), "framework": "agent_framework"})

    async def meta(request: Request) -> Response:
        return JSONResponse(
            {
                "ui_mode": "developer",
                "version": __version__,
                "framework": "agent_framework",
                "runtime": "python",
                "capabilities": {"instrumentation": False, "openai_proxy": False, "deployment": False},
                "auth_required": token_required,
            }
        )

    async def entities(request: Request) -> Response:
        return JSONResponse({"entities": [_entity(k, detail=False) for k in kinds.values()]})

    async def entity_info(request: Request) -> Response:
        return JSONResponse(_entity(kind_of(request.path_params["entity_id"]), detail=True))

    def conversation(thread: str, name: str, created: float, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"entity_id": name, "type": "workflow_session", "name": thread}
        if summary is not None:
            metadata["checkpoint_summary"] = summary
        return {"id": thread, "object": "conversation", "created_at": int(created), "metadata": metadata}

    async def list_conversations(request: Request) -> Response:
        wanted = request.query_params.get("entity_id")
        names = [kind_of(wanted).name] if wanted else sorted(kinds)
        client = await agui.client()
        data: list[dict[str, Any]] = []
        for name in names:
            if not _SAFE_NAME.fullmatch(name):
                continue
            prefix = thread_prefix(settings.workflow_id_prefix, name)
            query = f"WorkflowType = '{name}' AND WorkflowId STARTS_WITH '{prefix}'"
            async for ex in client.list_workflows(query, limit=SESSIONS_LISTED):
                thread = ex.id[len(prefix) :]
                if not _SAFE_THREAD.fullmatch(thread):
                    continue
                running = ex.status == WorkflowExecutionStatus.RUNNING
                waiting = running and ex.typed_search_attributes.get(_STATUS) == "waiting_for_input"
                started = ex.start_time.timestamp() if ex.start_time else time.time()
                summary = {
                    "count": 1 if running else 0,
                    "latest_iteration": 0,
                    "has_pending_hil": waiting,
                    "pending_hil_count": 1 if waiting else 0,
                }
                data.append(conversation(thread, name, started, summary))
        return JSONResponse({"object": "list", "data": data, "has_more": False})

    async def create_conversation(request: Request) -> Response:
        body = await body_of(request)
        found_metadata = body.get("metadata")
        metadata: dict[str, Any] = found_metadata if isinstance(found_metadata, dict) else {}
        name = kind_of(metadata.get("entity_id")).name
        thread = f"devui-{uuid.uuid4().hex[:12]}"  # its run starts with the session's first input
        return JSONResponse(conversation(thread, name, time.time()))

    async def find(thread: str) -> tuple[GraphKind, Any] | None:
        if not _SAFE_THREAD.fullmatch(thread):
            raise _HTTP(400, f"a session id of letters, digits and ._~- (at most 128), not {thread[:40]!r}")
        client = await agui.client()
        for kind in kinds.values():
            handle = get_run(client, thread_workflow_id(settings.workflow_id_prefix, kind.name, thread))
            try:
                return kind, await handle.describe()
            except RPCError:
                continue
        return None

    async def get_conversation(request: Request) -> Response:
        thread = request.path_params["conversation_id"]
        found = await find(thread)
        if found is None:
            raise _HTTP(404, f"no session {thread!r} (a session's run starts with its first input)")
        kind, desc = found
        return JSONResponse(conversation(thread, kind.name, desc.start_time.timestamp() if desc.start_time else 0))

    async def delete_conversation(request: Request) -> Response:
        thread = request.path_params["conversation_id"]
        raise _HTTP(
            409,
            f"session {thread!r} is a durable run, which other front ends and people may be using: it is not "
            "deleted from DevUI (close it with `temporal-workflows close <workflow id>`, or reset it in the console)",
        )

    async def now_item(thread: str, *, full: bool) -> dict[str, Any] | None:
        found = await find(thread)
        if found is None or found[1].status != WorkflowExecutionStatus.RUNNING:
            return None
        kind = found[0]
        client = await agui.client()
        wid = thread_workflow_id(settings.workflow_id_prefix, kind.name, thread)
        status = await get_run(client, wid).status()
        asks = await kind.asks(client, wid)
        item: dict[str, Any] = {
            "id": "checkpoint_now",
            "type": "checkpoint",
            "checkpoint_id": "now",
            "workflow_id": wid,
            "workflow_name": kind.name,
            "timestamp": int(time.time() * 1000),  # milliseconds, as the page reads it
            "status": "completed",
            "metadata": {
                "iteration_count": status.get("superstep", 0),
                "pending_hil_count": len(asks),
                "has_pending_hil": bool(asks),
                "message_count": 0,
                "version": "1.0",
                "graph_signature_hash": status.get("graph_signature"),
            },
        }
        if full:
            item["metadata"]["full_checkpoint"] = {
                "checkpoint_id": "now",
                "workflow_name": kind.name,
                "iteration_count": status.get("superstep", 0),
                "status": status,
                "pending_request_info_events": {a.id: _pending_event(a) for a in asks},
            }
        return item

    async def items(request: Request) -> Response:
        item = await now_item(request.path_params["conversation_id"], full=False)
        return JSONResponse(
            {"object": "list", "data": [item] if item else [], "has_more": False, "metadata": {"traces": []}}
        )

    async def item(request: Request) -> Response:
        if request.path_params["item_id"] != "checkpoint_now":
            raise _HTTP(404, "the only item of a durable session is checkpoint_now (the run as it is)")
        found = await now_item(request.path_params["conversation_id"], full=True)
        if found is None:
            raise _HTTP(404, "the session's run is not running")
        return JSONResponse(found)

    async def respond(request: Request) -> Response:
        body = await body_of(request)
        found_metadata = body.get("metadata")
        metadata: dict[str, Any] = found_metadata if isinstance(found_metadata, dict) else {}
        kind = kind_of(metadata.get("entity_id"))
        conv = body.get("conversation")
        if isinstance(conv, dict):
            conv = conv.get("id")
        thread = conv if isinstance(conv, str) and conv else f"devui-{uuid.uuid4().hex[:12]}"
        if not _SAFE_THREAD.fullmatch(thread) or len(thread) > MAX_ID_CHARS:
            raise _HTTP(400, "conversation: a session id of letters, digits and ._~- (at most 128)")
        raw: Any = body.get("input")
        if isinstance(raw, str):
            with contextlib.suppress(ValueError):
                raw = json.loads(raw)
        found_extra = body.get("extra_body")
        extra: dict[str, Any] = found_extra if isinstance(found_extra, dict) else {}
        response_id = f"resp_{uuid.uuid4().hex[:12]}"
        answers = _hil_responses(raw)
        messages: list[Any] = []
        resume: list[ResumeEntry] | None = None
        if answers is not None:
            client = await agui.client()
            asks = {
                a.id: a
                for a in await kind.asks(client, thread_workflow_id(settings.workflow_id_prefix, kind.name, thread))
            }
            resume = []
            for request_id, value in answers.items():
                ask = asks.get(request_id)
                schema = (ask.response_schema or {}) if ask is not None else {}
                if schema.get("type") in _PRIMITIVE and isinstance(value, dict) and "response" in value:
                    value = value["response"]  # DevUI's form wraps a plain answer
                resume.append(ResumeEntry(interrupt_id=request_id, status="resolved", payload=value))
        elif extra.get("checkpoint_id") is None:
            messages = [UserMessage(id=response_id, content=_message_text(raw))]
        inp = RunAgentInput(thread_id=thread, run_id=response_id, messages=messages, resume=resume)
        turn = Turn(
            kind, await agui.client(), inp, task_queue=settings.task_queue, id_prefix=settings.workflow_id_prefix
        )
        refused = await turn.begin()
        responses = _Responses(response_id, kind.name, thread)
        stream = _refused(responses, refused) if refused is not None else _streamed(responses, turn.made())
        return EventSourceResponse(
            stream,
            sep="\n",
            ping=int(settings.keepalive_seconds),
            headers={"Cache-Control": "no-store", "X-Response-ID": response_id},
        )

    async def cancel(request: Request) -> Response:
        return JSONResponse(
            {
                "id": request.path_params["response_id"],
                "cancelled": False,
                "note": "a durable run is not cancelled from DevUI: it goes on",
            }
        )

    routes: list[BaseRoute] = [
        Route("/health", guarded(health)),
        Route("/meta", guarded(meta)),
        Route("/v1/entities", guarded(entities)),
        Route("/v1/entities/{entity_id}/info", guarded(entity_info)),
        Route("/v1/conversations", guarded(list_conversations), methods=["GET"]),
        Route("/v1/conversations", guarded(create_conversation), methods=["POST"]),
        Route("/v1/conversations/{conversation_id}", guarded(get_conversation), methods=["GET"]),
        Route("/v1/conversations/{conversation_id}", guarded(delete_conversation), methods=["DELETE"]),
        Route("/v1/conversations/{conversation_id}/items", guarded(items), methods=["GET"]),
        Route("/v1/conversations/{conversation_id}/items/{item_id}", guarded(item), methods=["GET"]),
        Route("/v1/responses", guarded(respond), methods=["POST"]),
        Route("/v1/responses/{response_id}/cancel", guarded(cancel), methods=["POST"]),
    ]
    ui = devui_ui()
    if ui is not None:
        routes.append(Mount(DEVUI_PATH, app=StaticFiles(directory=str(ui), html=True), name="devui"))
    return routes


class _HTTP(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _streamed(responses: _Responses, made: AsyncIterator[Made]) -> AsyncIterator[dict[str, Any]]:
    for out in responses.opening():
        yield {"data": json.dumps(out)}
    try:
        async for _, event in made:
            for out in responses.map(event):
                yield {"data": json.dumps(out)}
    except (RPCError, Refusal) as e:
        error = {"code": type(e).__name__, "message": f"the run could not be followed: {e}"}
        yield {"data": json.dumps(responses._ev("response.failed", response=responses.response("failed", error)))}
    yield {"data": "[DONE]"}


async def _refused(responses: _Responses, refusal: Refusal) -> AsyncIterator[dict[str, Any]]:
    for out in responses.opening():
        yield {"data": json.dumps(out)}
    error = {"code": refusal.code, "message": str(refusal)}
    yield {"data": json.dumps(responses._ev("response.failed", response=responses.response("failed", error)))}
    yield {"data": "[DONE]"}
