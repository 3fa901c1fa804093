"""Acting on runs: answers, messages, resets, forks, checkpoints, and starting runs (``POST``s, CSRF-checked by the
gate)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import WorkflowUpdateFailedError

from temporal_workflows._console.state import ConsoleState, Refused, check_workflow_id, guarded, why
from temporal_workflows._engine.inbound import CONCURRENT_INPUT
from temporal_workflows._errors import AlreadyAnsweredError, InvalidResponseError, UnknownRequestError, WorkflowError
from temporal_workflows.temporal._client.client import start_run
from temporal_workflows.temporal._failures import library_error

__all__ = ["answer_refusal", "routes"]

_TYPE_SUFFIX = re.compile(r"\s*\[type=[^\]]*\]\s*$")


def _validation_messages(text: str) -> list[str]:
    """The run's "N validation errors for T: field: message [type=...]; ..." as ``field: message`` lines.

    That is the library's one-line form of pydantic's report (``serde.validation_message``, without the
    input); pydantic's own multi-line form is read too.
    """
    one_line = re.search(r"\d+ validation errors? for [^:\n]*: (.*)$", text)
    if one_line is not None:
        parts = re.split(r" \[type=[^\]]*\](?:; |$)", one_line.group(1))
        return [_plain(p) for p in parts if p.strip()]
    head = re.search(r"\d+ validation errors? for [^\n]*\n", text)
    if head is None:
        return []
    out: list[str] = []
    where: str | None = None
    for line in text[head.end() :].splitlines():
        if not line.strip() or line.startswith("    "):
            continue  # "For further information visit ..."
        if not line.startswith(" "):
            where = line.strip()
            continue
        message = _plain(_TYPE_SUFFIX.sub("", line.strip()))
        out.append(f"{where}: {message}" if where else message)
        where = None
    return out


def _plain(message: str) -> str:
    message = message.strip()
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.replace(f": {prefix}", ": ").removeprefix(prefix)
    return message


def answer_refusal(e: BaseException) -> str:
    """What the person who sent an answer reads when the run refuses it: the reason, in their terms.

    The run's own words (``why``) name the request by its id and repeat pydantic's whole report, input
    included; the form says which field is wrong and why.
    """
    error = e if isinstance(e, WorkflowError) else library_error(e)
    if isinstance(error, InvalidResponseError):
        detail = str(error).split(" is invalid: ", 1)[-1]
        fields = _validation_messages(detail)
        if fields:
            return "The run refused this answer: " + "; ".join(fields)
        return "The run refused this answer: " + re.sub(r"^expected [^,]*, got [^:]*: ", "", detail)
    if isinstance(error, AlreadyAnsweredError):
        return "This request was answered already (the first answer stands)."
    if isinstance(error, UnknownRequestError):
        return "This request is no longer pending: answered elsewhere, timed out, or the run was reset."
    return why(e)


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


_REFUSED = (WorkflowError, WorkflowUpdateFailedError, ValueError)
"""What a run (or its handle, before asking it) raises when it refuses an action: a 422 in its own words."""


async def _act(key: str, call: Awaitable[Any], words: Callable[[BaseException], str] = why) -> Response:
    """``{key: what the run answered}``, or the run's refusal as 422: ``words`` for the person, its own words as
    ``detail`` (left out where they are the same)."""
    try:
        result = await call
    except _REFUSED as e:
        raise Refused(422, words(e), detail=why(e)) from None
    return JSONResponse({key: result})


def _optional_str(body: dict[str, Any], name: str, what: str = "a string") -> str | None:
    """``body[name]`` if it is a string, ``None`` if absent or null; anything else is a 400 naming the field."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise Refused(400, f"{name}: {what}")
    return value


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
        return await _act("accepted", h.respond(request_id, response), answer_refusal)

    async def reset(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        checkpoint_id = _optional_str(await state.body_json(request), "checkpoint_id")
        return await _act("accepted", h.reset(checkpoint_id=checkpoint_id))

    async def fork(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        body = await state.body_json(request)
        checkpoint_id, new_id = body.get("checkpoint_id"), body.get("new_id")
        if not isinstance(checkpoint_id, str):
            raise Refused(400, "checkpoint_id: a string")
        new_id = check_workflow_id(new_id, "new_id")
        try:
            new = await h.fork(checkpoint_id, new_id)
        except (WorkflowError, ValueError) as e:
            raise Refused(422, why(e)) from None
        return JSONResponse({"started": new.id})

    async def checkpoint(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        label = _optional_str(await state.body_json(request), "label")
        return await _act("taken", h.checkpoint(label or None))

    async def send(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        body = await state.body_json(request)
        if "message" not in body:
            raise Refused(400, 'the body is {"message": ..., "executor_id"?: ..., "policy"?: ...}')
        policy, executor_id = body.get("policy") or None, body.get("executor_id") or None
        if policy is not None and policy not in CONCURRENT_INPUT:
            raise Refused(400, f"policy: one of {', '.join(CONCURRENT_INPUT)}")
        if executor_id is not None and not isinstance(executor_id, str):
            raise Refused(400, "executor_id: a string")
        if executor_id is None:
            topology = await h.topology()
            executor_id = topology.get("start_executor") if isinstance(topology, dict) else None
            if not isinstance(executor_id, str):
                raise Refused(400, "executor_id: this run does not say its start executor; name one")
        return await _act("accepted", h.send(executor_id, body["message"], policy=policy))

    async def send_event(request: Request) -> Response:
        h = await state.handle(request.path_params["run_id"])
        body = await state.body_json(request)
        event_type = _optional_str(body, "event_type", "the event's class name (a string), or null")
        step = _optional_str(body, "step", "a step name, or null")
        if not isinstance(body.get("event"), dict):
            raise Refused(400, 'the body is {"event_type": "Answer", "event": {...fields...}}')
        return await _act("accepted", h.send_event(event_type, body["event"], step=step))

    async def start(request: Request) -> Response:
        body = await state.body_json(request)
        name = body.get("graph")
        if not isinstance(name, str) or (name not in state.graphs and name not in state.llama_workflows):
            known = ", ".join(sorted([*state.graphs, *state.llama_workflows])) or "(none: start with --workflow)"
            raise Refused(400, f"graph: one of {known}")
        given = body.get("id")
        run_id = None if given is None or given == "" else check_workflow_id(given)  # none given: one is made
        if name in state.llama_workflows:
            from temporal_workflows._llama_runtime._start import StartRefused
            from temporal_workflows._llama_runtime._start import start_run as start_llama

            kwargs = body.get("message") or {}
            if not isinstance(kwargs, dict):
                raise Refused(400, "message: the run's keyword arguments (a JSON object)")
            try:
                return JSONResponse({"started": await start_llama(state.llama_workflows[name], kwargs, run_id=run_id)})
            except (StartRefused, WorkflowError) as e:
                raise Refused(422, str(e)) from None
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

    state.run_route("POST", "requests/*", answer)
    state.run_route("POST", "reset", reset)
    state.run_route("POST", "fork", fork)
    state.run_route("POST", "checkpoint", checkpoint)
    state.run_route("POST", "send", send)
    state.run_route("POST", "events", send_event)
    return [Route("/api/start", guarded(start), methods=["POST"])]
