"""Reading runs: what the console knows (``/api/info``), runs from visibility, one run in full, schedules."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._console.state import ConsoleState, Refused, guarded, iso, why
from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._graph.shape import GraphShape
from temporal_workflows._graph.viz import mermaid_node_ids, to_mermaid
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows._llama_runtime._picture import to_mermaid as llama_mermaid
from temporal_workflows.temporal._client.client import get_run
from temporal_workflows.temporal._client.llama import WORKFLOW_TYPE as LLAMA_WORKFLOW_TYPE
from temporal_workflows.temporal._client.schedules import SCHEDULED_BY_ATTRIBUTE, list_schedules
from temporal_workflows.temporal._protocol import STATUS_SEARCH_ATTRIBUTE

__all__ = ["MAX_PAGE_SIZE", "STATUSES", "graph_json", "llama_json", "query_for", "routes", "run_picture"]

STATUSES: tuple[str, ...] = tuple(
    s.value
    for s in (RunStatus.RUNNING, RunStatus.WAITING_FOR_INPUT, RunStatus.IDLE, RunStatus.COMPLETED, RunStatus.FAILED)
)
"""The statuses the page filters by (``RunStatus``; ``starting`` and ``continued_as_new`` last only a task)."""
MAX_PAGE_SIZE = 200
_STATUS_KEY = SearchAttributeKey.for_keyword(STATUS_SEARCH_ATTRIBUTE)
_SCHEDULED_BY_KEY = SearchAttributeKey.for_keyword(SCHEDULED_BY_ATTRIBUTE)
_SAFE_VALUE = re.compile(r"[^'\"\\\x00-\x1f]{1,200}")
_SHAPE = TypeAdapter(GraphShape)


def graph_json(workflow: Workflow) -> dict[str, Any]:
    """A graph given with ``--workflow``: its picture and its start form's schema."""
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


def llama_picture(rep: dict[str, Any], source: str) -> dict[str, Any]:
    """A LlamaIndex workflow's picture (its representation, ``_llama_runtime/_picture.py``) as the page draws one."""
    mermaid, steps = llama_mermaid(rep)
    # The events its steps take from outside: offered by the page's event form.
    kinds = {str(n.get("id")): n.get("node_type") for n in rep.get("nodes") or ()}
    takes = sorted(
        {
            str(e.get("source"))
            for e in rep.get("edges") or ()
            if kinds.get(str(e.get("source"))) == "event" and kinds.get(str(e.get("target"))) == "step"
        }
        - {"StartEvent"}
    )
    return {
        "name": rep.get("workflow") or rep.get("name"),
        "kind": "llama_index",
        "mermaid": mermaid,
        "node_ids": steps,
        "start_executor": "StartEvent",
        "accepted_events": takes,
        "from": source,
    }


def llama_json(workflow: Any) -> dict[str, Any]:
    """A LlamaIndex workflow given with ``--workflow``: its picture, and the form of its start event."""
    from temporal_workflows._llama_runtime._picture import representation

    picture = llama_picture(representation(workflow), "console")
    start = workflow.start_event_class
    schema: dict[str, Any] | None = None
    with contextlib.suppress(Exception):
        schema = start.model_json_schema()
    if not schema or not schema.get("properties"):
        # LlamaIndex's plain StartEvent takes any keyword: the run's keyword arguments as one JSON object.
        schema = {"type": "object", "title": "keyword arguments of run() (JSON object)"}
    picture.update(name=workflow.workflow_name, start_executor=start.__name__, start_schema=schema)
    return picture


def run_picture(answer: Any) -> tuple[dict[str, Any] | None, str]:
    """The picture a run keeps of its graph (its ``topology`` query's ``shape``), drawn by the same code as
    ``graph --format mermaid``; or ``None`` and why not."""
    if not isinstance(answer, dict):
        return None, "the run did not answer"
    if "unavailable" in answer:
        return None, f"the run did not answer its topology query ({answer['unavailable']})"
    if answer.get("kind") == "llama_index":
        rep = answer.get("representation")
        if not isinstance(rep, dict):
            return None, str(answer.get("note") or "the run keeps no picture of its workflow")
        try:
            return llama_picture(rep, "run"), ""
        except Exception as e:
            return None, f"the run's picture could not be drawn: {type(e).__name__}: {e}"[:500]
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


def query_for(params: Mapping[str, str]) -> str:
    """A visibility query from the page's filters; values are checked, never pasted as they are."""
    clauses = []
    graph = params.get("graph") or ""
    if graph:
        if not _SAFE_VALUE.fullmatch(graph):
            raise Refused(400, "graph: a graph name without quotes or backslashes")
        clauses.append(f"WorkflowType = '{graph}'")
    status = params.get("status") or ""
    if status:
        if status not in STATUSES:
            raise Refused(400, f"status: one of {', '.join(STATUSES)}")
        if status == RunStatus.COMPLETED:
            clauses.append("ExecutionStatus = 'Completed'")
        elif status == RunStatus.FAILED:
            clauses.append(
                f"(ExecutionStatus IN ('Failed', 'Terminated', 'TimedOut') OR {STATUS_SEARCH_ATTRIBUTE} = "
                f"'{RunStatus.FAILED.value}')"
            )
        else:
            # A LlamaIndex run sets no search attribute: a running one is listed, and kept if its status query
            # says the same (``runs`` asks it).
            clauses.append(
                f"ExecutionStatus = 'Running' AND ({STATUS_SEARCH_ATTRIBUTE} = '{status}' "
                f"OR WorkflowType = '{LLAMA_WORKFLOW_TYPE}')"
            )
    else:
        # A reset or a long run continues as new: its earlier executions are the same run (same id), not rows.
        clauses.append("ExecutionStatus != 'ContinuedAsNew'")
    for name, op in (("since", ">="), ("until", "<=")):
        value = params.get(name) or ""
        if value:
            try:
                when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise Refused(400, f"{name}: an ISO 8601 time, e.g. 2026-01-31T12:00:00Z") from None
            if when.tzinfo is None:
                raise Refused(400, f"{name}: give a time zone (Z or +hh:mm)")
            clauses.append(f"StartTime {op} '{when.isoformat()}'")
    return " AND ".join(clauses)


def routes(state: ConsoleState) -> list[Any]:
    known = {name: graph_json(wf) for name, wf in state.graphs.items()}
    known.update({name: llama_json(wf) for name, wf in state.llama_workflows.items()})

    async def info(request: Request) -> Response:
        c = await state.client()
        return JSONResponse(
            {
                "namespace": c.namespace,
                "graphs": list(known.values()),
                "statuses": list(STATUSES),
                "token_required": state.guard.token_required,
                "task_queue": state.settings.task_queue,
            }
        )

    async def llama_status(row: dict[str, Any], limit: asyncio.Semaphore) -> None:
        """A running LlamaIndex run says where it is by its status query (it sets no search attribute)."""
        async with limit:
            with contextlib.suppress(Exception):
                status = await asyncio.wait_for(get_run(await state.client(), row["id"]).status(), 3)
                row["status"] = status.get("status") or row["status"]
                row["graph_status"] = row["status"]
                row["graph"] = status.get("workflow") or row["graph"]
                row["kind"] = "llama_index"

    async def runs(request: Request) -> Response:
        params = dict(request.query_params)
        if params.get("graph") in state.llama_workflows:
            params["graph"] = LLAMA_WORKFLOW_TYPE  # LlamaIndex runs have one workflow type, whichever workflow
        query = query_for(params)
        try:
            page_size = int(params.get("page_size") or 50)
        except ValueError:
            raise Refused(400, "page_size: a number") from None
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise Refused(400, f"page_size: 1 to {MAX_PAGE_SIZE}")
        token: bytes | None = None
        if params.get("next"):
            try:
                token = base64.b64decode(params["next"].encode(), altchars=b"-_", validate=True)
            except (binascii.Error, ValueError):
                raise Refused(400, "next: the token a previous page returned") from None
        it = (await state.client()).list_workflows(query or None, page_size=page_size, next_page_token=token)
        try:
            await it.fetch_next_page()
        except RPCError as e:
            if e.status == RPCStatusCode.INVALID_ARGUMENT and STATUS_SEARCH_ATTRIBUTE in e.message:
                raise Refused(
                    400,
                    f"status: this namespace has no {STATUS_SEARCH_ATTRIBUTE} search attribute, which the filter "
                    f"reads (`temporal-workflows dev` registers it; elsewhere: temporal operator search-attribute "
                    f"create --name {STATUS_SEARCH_ATTRIBUTE} --type Keyword)",
                ) from None
            raise
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
                    "start_time": iso(ex.start_time),
                    "close_time": iso(ex.close_time),
                    "task_queue": ex.task_queue,
                    "scheduled_by": ex.typed_search_attributes.get(_SCHEDULED_BY_KEY),
                }
            )
        limit = asyncio.Semaphore(8)
        llama_rows = [r for r in rows if r["graph"] == LLAMA_WORKFLOW_TYPE and r["temporal_status"] == "running"]
        await asyncio.gather(*(llama_status(row, limit) for row in llama_rows))
        wanted = params.get("status")
        if wanted in (RunStatus.RUNNING, RunStatus.WAITING_FOR_INPUT, RunStatus.IDLE):
            # The query listed every running LlamaIndex run; keep those whose status query matched (a page
            # can come back shorter than page_size; the next token still goes on from where it stopped).
            asked = {id(r) for r in llama_rows}
            rows = [r for r in rows if id(r) not in asked or r["status"] == wanted]
        next_token = it.next_page_token
        return JSONResponse(
            {
                "runs": rows,
                "query": query,
                "next": base64.urlsafe_b64encode(next_token).decode() if next_token else None,
            }
        )

    async def run(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        desc = await h.describe()

        async def maybe(call: Callable[[], Awaitable[Any]]) -> Any:
            try:
                return await asyncio.wait_for(call(), 10)
            except Exception as e:
                return {"unavailable": why(e)}

        async def picture() -> tuple[dict[str, Any] | None, str]:
            # The run's own picture first (the graph it pinned, which --workflow may no longer match), kept
            # once drawn; then the one of the graph given with --workflow; else none, saying why.
            kept = state.picture(desc.run_id) if desc.run_id else None
            if kept is not None:
                return kept, ""
            drawn, note = run_picture(await maybe(h.topology))
            if drawn is not None and desc.run_id:
                state.keep_picture(desc.run_id, drawn)
            return drawn or known.get(desc.workflow_type), note

        async def pending_json() -> list[dict[str, Any]]:
            return [r.model_dump(mode="json") for r in await h.pending_requests(restore=False)]

        status, pending, run_state, checkpoints, (graph, note) = await asyncio.gather(
            maybe(h.status), maybe(pending_json), maybe(h.state), maybe(h.checkpoints), picture()
        )
        if graph is None and isinstance(status, dict) and status.get("kind") == "llama_index":
            graph = known.get(str(status.get("workflow")))  # the LlamaIndex workflow given with --workflow
        llama = desc.workflow_type == LLAMA_WORKFLOW_TYPE
        result = None
        if llama and desc.status == WorkflowExecutionStatus.COMPLETED:
            result = await maybe(h.result)  # what `await handler` returned
        return JSONResponse(
            {
                "id": h.id,
                "run_id": desc.run_id,
                "kind": "llama_index" if llama else "graph",
                "graph": (status.get("workflow") if llama and isinstance(status, dict) else None) or desc.workflow_type,
                "temporal_status": desc.status.name.lower() if desc.status else None,
                "start_time": iso(desc.start_time),
                "close_time": iso(desc.close_time),
                "task_queue": desc.task_queue,
                "scheduled_by": desc.typed_search_attributes.get(_SCHEDULED_BY_KEY),
                "status": status,
                "pending_requests": pending if isinstance(pending, list) else [],
                "state": run_state,
                "checkpoints": checkpoints if isinstance(checkpoints, list) else [],
                "picture": graph,
                "picture_note": None if graph else note,
                "result": result,
            }
        )

    async def schedules(request: Request) -> Response:
        return JSONResponse({"schedules": await list_schedules(await state.client(), limit=MAX_PAGE_SIZE)})

    state.run_route("GET", "", run)
    return [
        Route("/api/info", guarded(info)),
        Route("/api/runs", guarded(runs)),
        Route("/api/schedules", guarded(schedules)),
    ]
