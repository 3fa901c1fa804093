"""Acting on runs: answers, resets, forks, checkpoints, and starting runs (``POST``s, CSRF-checked by the gate)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import WorkflowUpdateFailedError

from temporal_workflows._console.state import ConsoleState, Refused, guarded, why
from temporal_workflows._errors import WorkflowError
from temporal_workflows.temporal._client.client import start_run
from temporal_workflows.temporal._protocol import MAX_ID_CHARS

__all__ = ["routes"]


def approval(request: Any, approved: bool) -> Any:
    """The JSON answer to an agent's tool-approval request (Agent Framework's ``Content``)."""
    try:
        from agent_framework import Content

        from temporal_workflows.agents._maf_types import install_maf_types
    except ImportError:
        raise Refused(400, "approving a tool call needs the agents extra on the console") from None
    install_maf_types()
    try:
        content = Content.from_dict(request)
        return content.to_function_approval_response(approved=approved).to_dict()
    except Exception as e:
        raise Refused(400, f"this request is not a tool approval: {e}") from None


def routes(state: ConsoleState) -> list[Any]:
    async def answer(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        request_id = request.path_params["request_id"]
        body = await state.body_json(request)
        if "approve" in body:
            if not isinstance(body["approve"], bool):
                raise Refused(400, "approve: true or false")
            pending = {r.request_id: r for r in await h.pending_requests(restore=False)}
            if request_id not in pending:
                raise Refused(409, f"request {request_id!r} is not pending (answered elsewhere?)")
            response = approval(pending[request_id].data, body["approve"])
        elif "response" in body:
            response = body["response"]
        else:
            raise Refused(400, 'the body is {"response": ...} or {"approve": true|false}')
        try:
            accepted = await h.respond(request_id, response)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise Refused(422, why(e)) from None
        return JSONResponse({"accepted": accepted})

    async def reset(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        body = await state.body_json(request)
        checkpoint_id = body.get("checkpoint_id")
        if checkpoint_id is not None and not isinstance(checkpoint_id, str):
            raise Refused(400, "checkpoint_id: a string")
        try:
            accepted = await h.reset(checkpoint_id=checkpoint_id)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise Refused(422, why(e)) from None
        return JSONResponse({"accepted": accepted})

    async def fork(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        body = await state.body_json(request)
        checkpoint_id, new_id = body.get("checkpoint_id"), body.get("new_id")
        if not isinstance(checkpoint_id, str) or not isinstance(new_id, str) or not new_id.strip():
            raise Refused(400, "checkpoint_id and new_id: strings")
        try:
            new = await h.fork(checkpoint_id, new_id.strip())
        except (WorkflowError, ValueError) as e:
            raise Refused(422, why(e)) from None
        return JSONResponse({"started": new.id})

    async def checkpoint(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        body = await state.body_json(request)
        label = body.get("label")
        if label is not None and not isinstance(label, str):
            raise Refused(400, "label: a string")
        try:
            taken = await h.checkpoint(label or None)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise Refused(422, why(e)) from None
        return JSONResponse({"taken": taken})

    async def start(request: Request) -> Response:
        body = await state.body_json(request)
        name = body.get("graph")
        if not isinstance(name, str) or name not in state.graphs:
            known = ", ".join(sorted(state.graphs)) or "(none: start with --workflow)"
            raise Refused(400, f"graph: one of {known}")
        run_id = body.get("id") or None
        if run_id is not None and (not isinstance(run_id, str) or len(run_id) > MAX_ID_CHARS):
            raise Refused(400, f"id: a workflow id of at most {MAX_ID_CHARS} characters")
        try:
            h = await start_run(
                await state.client(),
                state.graphs[name],
                body.get("message"),
                id=run_id,
                task_queue=state.settings.task_queue,
            )
        except (WorkflowError, ValueError) as e:
            raise Refused(422, why(e)) from None
        return JSONResponse({"started": h.id})

    return [
        Route("/api/runs/{run_id:path}/requests/{request_id}", guarded(answer), methods=["POST"]),
        Route("/api/runs/{run_id:path}/reset", guarded(reset), methods=["POST"]),
        Route("/api/runs/{run_id:path}/fork", guarded(fork), methods=["POST"]),
        Route("/api/runs/{run_id:path}/checkpoint", guarded(checkpoint), methods=["POST"]),
        Route("/api/start", guarded(start), methods=["POST"]),
    ]
