"""A LlamaIndex run (``TemporalRuntime``'s workflow ``LlamaIndexRun``) as :class:`~.client.RunHandle` serves it.

One client layer serves both kinds of run, so the CLI, the console and the AG-UI endpoint read and answer them
alike: a handle learns its run's kind once (the workflow type, by ``describe``) and hands the calls that differ
here. A LlamaIndex run answers the same queries as a graph run (``status``, ``pending_requests``, ``state``,
``topology``); what differs is its event stream (what ``handler.stream_events()`` shows, as its serializer
wrote each event), its result (a ``StopEvent``), how outside input enters (an event by class name and JSON, the
``submit_event`` update, checked by the run against the events its workflow accepts), and its checkpoints (the
context ``ctx.to_dict()`` returns, from which a new run is forked).

Nothing here imports LlamaIndex, or any class a run names: events are read as the JSON the run wrote, so a tool
reads a run of any program without that program installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._engine.limits import check_payload
from temporal_workflows._errors import UnknownRequestError, WorkflowError
from temporal_workflows._events import RequestInfoEvent, WorkflowEvent
from temporal_workflows._llama_runtime._protocol import (
    EVENTS_TOPIC,
    QUERY_CONTEXT,
    QUERY_PENDING_REQUESTS,
    QUERY_TOPOLOGY,
    RESULT_ERROR_TYPE,
    SIGNAL_SEND_EVENT,
    UPDATE_SEND_EVENT,
    UPDATE_SEND_EVENTS,
    WORKFLOW_TYPE,
)
from temporal_workflows.temporal._client.starting import start_workflow

if TYPE_CHECKING:
    from temporal_workflows.temporal._client.client import RunHandle

__all__ = [
    "IDLE_EVENT",
    "INPUT_REQUIRED_EVENT",
    "INTERNAL_EVENTS",
    "NOW",
    "STEP_STATE_EVENT",
    "STOP_EVENTS",
    "WORKFLOW_TYPE",
    "LlamaEvent",
    "LlamaRestEvent",
    "LlamaRunFailedError",
    "checkpoints",
    "decode_item",
    "event_fields",
    "events",
    "fork",
    "not_for_llama",
    "pending_requests",
    "read_stream",
    "respond",
    "respond_all",
    "result",
    "send_event",
    "topology",
]

STEP_STATE_EVENT = "workflows.events.StepStateChanged"
IDLE_EVENT = "workflows.events.WorkflowIdleEvent"
"""LlamaIndex publishes it when the run comes to rest (no step running or queued, nothing to deliver): the
tools' "waiting for input" (with requests pending) or "idle" (waiting for an outside event), read from the
stream itself, so every reader sees the rest at the same place."""
INPUT_REQUIRED_EVENT = "workflows.events.InputRequiredEvent"
INTERNAL_EVENTS = frozenset(
    {STEP_STATE_EVENT, IDLE_EVENT, "workflows.events.UnhandledEvent", "workflows.events.InternalDispatchEvent"}
)
"""LlamaIndex's ``InternalDispatchEvent`` classes: ``stream_events()`` leaves them out unless
``expose_internal=True``, and so do the tools unless asked."""
STOP_EVENTS = frozenset(
    {
        "workflows.events.StopEvent",
        "workflows.events.WorkflowFailedEvent",
        "workflows.events.WorkflowCancelledEvent",
        "workflows.events.WorkflowTimedOutEvent",
    }
)
NOW = "now"
"""The id of a LlamaIndex run's one checkpoint: its context now (``ctx.to_dict()``), read when it is used."""

QUERY_TIMEOUT = timedelta(seconds=10)
"""A query the event reader makes on the side (is a rest the newest thing, what waits) gives up after this."""
_NOT_READY_RETRIES = 12


class LlamaRunFailedError(WorkflowError):
    """A LlamaIndex run ended with an error: what LlamaIndex raised (``"KeyError: 'missing-key'"``, as the run's
    ``status`` says it), or its cancel or termination. ``error_type`` is the error's qualified class name."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class LlamaEvent(WorkflowEvent):
    """An event of a LlamaIndex run's stream, as ``handler.stream_events()`` yields it, read as JSON.

    Attributes:
        event_type: Its class's qualified name (``app.ProgressEvent``), as the run's serializer recorded it.
        name: The class's own name (``ProgressEvent``).
        data: Its fields (LlamaIndex's dynamic fields too: ``InputRequiredEvent(prefix=...)`` gives ``prefix``).
        internal: One of LlamaIndex's internal events (``StepStateChanged``, ``WorkflowIdleEvent``, ...), which
            ``stream_events()`` shows only with ``expose_internal=True``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=False)

    type: Literal["llama_event"] = "llama_event"  # type: ignore[assignment]
    event_type: str | None = None
    name: str = "Event"
    data: Any = None
    internal: bool = False


class LlamaRestEvent(WorkflowEvent):
    """The run came to rest just now (LlamaIndex's ``WorkflowIdleEvent`` at the stream's head): what it waits for.

    ``requests`` are its pending requests then (``pending_requests``'s records); empty: the run is idle,
    waiting for an outside event no request names. Made by the reader, not the run: a rest read back later
    (the run has moved on) is not told again.
    """

    type: Literal["llama_rest"] = "llama_rest"  # type: ignore[assignment]
    requests: list[RequestInfoEvent] = Field(default_factory=list)

    @property
    def waiting(self) -> bool:
        return bool(self.requests)


def event_fields(value: Any) -> Any:
    """An event's fields as plain JSON: LlamaIndex's dynamic fields (``_data``) with the declared ones, and the
    serializer's records (``{"__is_pydantic": true, "value": ...}``) as their values."""
    if isinstance(value, dict):
        if value.get("__is_pydantic") and "value" in value:
            return event_fields(value["value"])
        out = {k: event_fields(v) for k, v in value.items() if k not in ("_data", "__exact", "__exceptions")}
        dynamic = value.get("_data")
        if isinstance(dynamic, dict):
            for k, v in dynamic.items():
                out.setdefault(str(k), event_fields(v))
        return out
    if isinstance(value, list):
        return [event_fields(v) for v in value]
    return value


def decode_item(text: Any) -> LlamaEvent:
    """One item of a run's stream (the serializer's JSON string) as a :class:`LlamaEvent`; never imports."""
    record: Any = text
    if isinstance(text, str):
        try:
            record = json.loads(text)
        except ValueError:
            return LlamaEvent(name="(unreadable)", data=text[:500])
    if isinstance(record, dict) and isinstance(record.get("qualified_name"), str):
        qualified = record["qualified_name"]
        return LlamaEvent(
            event_type=qualified,
            name=qualified.rpartition(".")[2],
            data=event_fields(record.get("value")),
            internal=qualified in INTERNAL_EVENTS,
        )
    # A workflow with a serializer of its own (not the runtime's JSON): shown as it was written.
    return LlamaEvent(name="(serialized)", data=record if isinstance(record, dict | list) else str(record)[:500])


async def read_stream(
    client: Client, workflow_id: str, from_offset: int = 0, *, poll_cooldown: timedelta = timedelta(milliseconds=100)
) -> AsyncIterator[tuple[int, LlamaEvent]]:
    """The run's stream from ``from_offset``: each item's offset and event; follows continue-as-new; ends after
    the run closes."""
    stream = WorkflowStreamClient.create(client, workflow_id)
    offset, retries = from_offset, 0
    while True:
        try:
            async for item in stream.subscribe([EVENTS_TOPIC], offset, result_type=str, poll_cooldown=poll_cooldown):
                offset, retries = item.offset + 1, 0
                yield item.offset, decode_item(item.data)
            return
        except RPCError as e:
            # As for graph runs: a poll refused while the run's workflow task is retried is polled again.
            if e.status != RPCStatusCode.FAILED_PRECONDITION or retries >= _NOT_READY_RETRIES:
                raise
            await asyncio.sleep(min(1.0, 0.05 * 2**retries))
            retries += 1


def _request(record: dict[str, Any]) -> RequestInfoEvent:
    """A LlamaIndex run's pending request (the ``pending_requests`` query's record) as the tools show requests."""
    found = record.get("response_schema")
    schema: dict[str, Any] = found if isinstance(found, dict) else {}
    response_type = str(record.get("response_type") or "workflows.events.HumanResponseEvent")
    if response_type == "workflows.events.HumanResponseEvent" and not schema.get("properties"):
        # LlamaIndex's own HumanResponseEvent declares no field and takes any: its documented use is
        # HumanResponseEvent(response=...), so a form offers that field (others may be added as JSON).
        schema = {
            **schema,
            "type": "object",
            "properties": {"response": {"type": "string", "title": "Response"}},
            "required": ["response"],
            "additionalProperties": True,
        }
    created = record.get("created_at")
    return RequestInfoEvent(
        request_id=str(record.get("request_id")),
        source_executor_id=str(record.get("source_executor_id") or ""),
        data=event_fields(record.get("data")),
        response_type=response_type,
        response_schema=schema,
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
    )


async def pending_requests(handle: RunHandle) -> list[RequestInfoEvent]:
    """The run's pending requests (each ``InputRequiredEvent`` out, each ``wait_for_event`` waiting), oldest first."""
    records: list[dict[str, Any]] = await handle._query(QUERY_PENDING_REQUESTS)
    return [_request(r) for r in records if isinstance(r, dict)]


async def _at_head(stream: WorkflowStreamClient, offset: int) -> bool:
    with contextlib.suppress(Exception):
        return offset + 1 >= await asyncio.wait_for(stream.get_offset(), QUERY_TIMEOUT.total_seconds())
    return False


async def events(
    handle: RunHandle, client: Client, *, from_offset: int = 0, poll_cooldown: timedelta
) -> AsyncIterator[tuple[int, WorkflowEvent]]:
    """The run's stream as :class:`LlamaEvent`\\ s, each with its stream position; each time the run comes to
    rest, what it waits for.

    A rest is LlamaIndex's own ``WorkflowIdleEvent``; read at the stream's head (the run rests now), it is
    followed by a :class:`LlamaRestEvent` with the run's pending requests, queried then (at the idle event's
    position: resuming after it does not repeat either). One read back later (the run has gone on) is shown as
    the internal event it is.
    """
    desc = await handle.describe()
    running = desc.status == WorkflowExecutionStatus.RUNNING
    stream = WorkflowStreamClient.create(client, handle.id)
    async for offset, event in read_stream(client, handle.id, from_offset, poll_cooldown=poll_cooldown):
        yield offset, event
        if running and event.event_type == IDLE_EVENT and await _at_head(stream, offset):
            requests: list[RequestInfoEvent] = Field(default_factory=list)
            with contextlib.suppress(Exception):
                requests = await asyncio.wait_for(pending_requests(handle), QUERY_TIMEOUT.total_seconds())
            yield offset, LlamaRestEvent(requests=requests)


async def result(handle: RunHandle) -> dict[str, Any]:
    """The run's result as the tools show it: ``{"kind": "llama_index", "status": "completed", "result": ...,
    "stop_event": {...}}`` (``result``: what ``await handler`` returns, as JSON).

    Raises:
        LlamaRunFailedError: the run failed (``"KeyError: 'missing-key'"``, as its ``status`` says), was
            cancelled or terminated; the SDK's ``WorkflowFailureError`` is its cause.
    """
    try:
        out: Any = await handle.handle.result()
    except WorkflowFailureError as e:
        raise run_error(e) from e
    if not isinstance(out, dict):
        return {"kind": "llama_index", "status": "completed", "result": out}
    stop = decode_item(out.get("stop_event"))
    fields: dict[str, Any] = stop.data if isinstance(stop.data, dict) else {}
    # `await handler` returns StopEvent.result (here as JSON); for a StopEvent of its own class, the event itself.
    value = fields.get("result") if stop.event_type == "workflows.events.StopEvent" else stop.data
    return {
        "kind": "llama_index",
        "status": "completed",
        "result": value,
        "stop_event": {"event_type": stop.event_type, "name": stop.name, "data": stop.data},
    }


def run_error(e: WorkflowFailureError) -> LlamaRunFailedError:
    """The failure of a LlamaIndex run, in its own words (the error LlamaIndex raised, as ``status`` says it)."""
    cause = e.cause
    if isinstance(cause, ApplicationError) and (cause.type or "").startswith(RESULT_ERROR_TYPE):
        details = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
        qualified = str(details.get("exception_type") or (cause.type or "").partition(":")[2] or "Exception")
        message = str(details.get("exception_message") or cause.message or "")
        name = qualified.rpartition(".")[2]
        return LlamaRunFailedError(f"{name}: {message}" if message else name, qualified)
    if isinstance(cause, CancelledError):
        return LlamaRunFailedError("the run was cancelled", "workflows.errors.WorkflowCancelledByUser")
    if isinstance(cause, TerminatedError):
        return LlamaRunFailedError(f"the run was terminated: {cause.message}", "TerminatedError")
    return LlamaRunFailedError(f"the run failed: {cause or e}", type(cause or e).__name__)


async def send_event(
    handle: RunHandle, event_type: str | None, event: Any, *, step: str | None = None, wait: bool = True
) -> dict[str, Any] | None:
    """An event from outside, by class name and its fields (``handler.ctx.send_event(...)``, from anywhere).

    ``wait=True`` sends the ``submit_event`` update: the run checks it against the events its workflow
    accepts and returns ``{"accepted": "module.Class"}``, or refuses it naming the accepted ones
    (``WorkflowUpdateFailedError``; nothing changes). ``wait=False`` sends the ``send_event`` signal (for what
    the run cannot use, a warning in ``status``).
    """
    if event_type is not None and not isinstance(event_type, str):
        raise ValueError("event_type: a class name ('Answer', 'app.Answer') or None")
    what = f"event {event_type or ''}".strip()
    check_payload(event, what=what)
    arg: dict[str, Any] = {"event": event}
    if event_type is not None:
        arg["event_type"] = event_type
    if step is not None:
        arg["step"] = step
    if not wait:
        await handle._signal(SIGNAL_SEND_EVENT, arg)
        return None
    return await handle._update(UPDATE_SEND_EVENT, arg)


async def respond(handle: RunHandle, request_id: str, response: Any, *, wait: bool = True) -> dict[str, Any] | None:
    """Answer a pending request: its response type's event with ``response`` as its fields.

    A LlamaIndex ``InputRequiredEvent`` carries no id: the run numbers them (``input-1``, ...) and an answer
    goes to the steps as the event LlamaIndex's loop delivers, so it answers the oldest open request of its
    type; a ``wait_for_event``'s request is its waiter id, answered when its waiter takes the event.

    Raises:
        UnknownRequestError: no pending request has that id (the pending ones named).
    """
    pending = await pending_requests(handle)
    found = next((r for r in pending if r.request_id == request_id), None)
    if found is None:
        raise UnknownRequestError(request_id, [r.request_id for r in pending])
    accepted = await send_event(handle, found.response_type, response, wait=wait)
    return None if accepted is None else {**accepted, "request_id": request_id}


async def respond_all(handle: RunHandle, responses: Mapping[str, Any]) -> dict[str, Any]:
    """Answer several pending requests together: all or none.

    Every id must name a pending request (``UnknownRequestError`` before anything is sent), and the run reads
    every answer as its response event before it takes any (one ``submit_events`` update: a refused one leaves
    the run as it was). A run on a worker without that update gets them one by one, as :func:`respond` sends.
    """
    if not responses:
        return {"request_ids": [], "accepted": True}
    pending = {r.request_id: r for r in await pending_requests(handle)}
    events: list[dict[str, Any]] = []
    for request_id, response in responses.items():
        found = pending.get(request_id)
        if found is None:
            raise UnknownRequestError(request_id, list(pending))
        check_payload(response, what=f"response to request {request_id!r}")
        events.append({"event": response, "event_type": found.response_type})
    try:
        await handle._update(UPDATE_SEND_EVENTS, {"events": events})
    except WorkflowUpdateFailedError as e:
        if getattr(e.cause, "type", None) != "UnknownUpdateError":
            raise
        for one in events:
            await handle._update(UPDATE_SEND_EVENT, one)
    return {"request_ids": list(responses), "accepted": True}


async def checkpoints(handle: RunHandle) -> list[dict[str, Any]]:
    """The run's checkpoint: its context now (``ctx.to_dict()``), from which :func:`fork` starts a new run.

    A LlamaIndex run keeps no list of past contexts (LlamaIndex has none: a program saves ``ctx.to_dict()``
    when it wants one); ``[]`` before the run's loop has started.
    """
    ctx = await handle._query(QUERY_CONTEXT)
    if not isinstance(ctx, dict):
        return []
    running = bool(ctx.get("is_running"))
    return [
        {
            "checkpoint_id": NOW,
            "label": "its context now (ctx.to_dict())" + ("" if running else ": the run has ended"),
            "superstep": None,
            "created_at": datetime.now(UTC).isoformat(),
            "is_running": running,
            "resettable": False,
            "forkable": running,
        }
    ]


def not_for_llama(what: str, instead: str) -> WorkflowError:
    """The error for a graph-run operation asked of a LlamaIndex run."""
    return WorkflowError(f"{what} is for graph runs; a LlamaIndex run {instead}")


async def fork(
    client: Client,
    source_id: str,
    checkpoint_id: str,
    new_workflow_id: str,
    *,
    task_queue: str | None,
    memo: dict[str, Any],
) -> Any:
    """Start ``new_workflow_id`` from the source run's context now, as ``wf.run(ctx=Context.from_dict(wf,
    handler.ctx.to_dict()))`` does: the same workflow (its name and signature), its steps' state and store.

    The source is not touched. Returns the new execution's SDK handle.

    Raises:
        CheckpointNotFoundError: ``checkpoint_id`` is not ``"now"``.
        WorkflowError: the source's context is not one a run goes on from (its loop has not started, or it
            completed: a new run from a completed context needs start input, ``wf.run(ctx=..., **kwargs)``).
    """
    from temporal_workflows._errors import CheckpointNotFoundError
    from temporal_workflows._llama_runtime._protocol import RunInput

    if checkpoint_id != NOW:
        raise CheckpointNotFoundError(
            f"a LlamaIndex run has one checkpoint, {NOW!r} (its context now), not {checkpoint_id!r}"
        )
    source = client.get_workflow_handle(source_id)
    desc = await source.describe()
    ctx = await source.query(QUERY_CONTEXT)
    if not isinstance(ctx, dict):
        raise WorkflowError(f"run {source_id!r} has no context yet (its loop has not started): nothing to fork")
    if not ctx.get("is_running"):
        raise WorkflowError(
            f"run {source_id!r} has completed: its context starts a new run only with start input "
            "(wf.run(ctx=Context.from_dict(wf, ctx_dict), **kwargs)); fork a run that is going, waiting or failed"
        )
    started: RunInput | None = None
    async for event in source.fetch_history_events(page_size=1):
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        [started] = await client.data_converter.decode(payloads, [RunInput])
        break
    if not isinstance(started, RunInput):
        raise WorkflowError(f"run {source_id!r} is not a LlamaIndex run of TemporalRuntime")
    state = {k: v for k, v in ctx.items() if k != "state"}
    inp = RunInput(
        workflow_name=started.workflow_name,
        signature=started.signature,
        timeout=started.timeout,
        timeout_set=started.timeout_set,
        instance_key=None,
        start_event=None,  # a context that is running goes on from where it was: no start event
        init_state=state,
        store=ctx.get("state") or started.store,
        idle_release_after_ticks=started.idle_release_after_ticks,
        instrument_tags=started.instrument_tags,
    )
    return await start_workflow(
        client,
        WORKFLOW_TYPE,
        inp,
        id=new_workflow_id,
        task_queue=task_queue or desc.task_queue,
        result_type=dict,
        memo=memo,
        static_summary=started.workflow_name,
    )


async def topology(handle: RunHandle) -> dict[str, Any]:
    """The run's picture (``{"kind": "llama_index", "workflow", "representation"}``), or a ``note`` saying why
    there is none (a worker of an earlier version answers no ``topology`` query)."""
    try:
        answer: dict[str, Any] = await handle._query(QUERY_TOPOLOGY)
    except WorkflowQueryFailedError as e:
        return {"kind": "llama_index", "representation": None, "shape": None, "note": f"no picture: {e}"}
    answer.setdefault("shape", None)
    return answer
