"""A small client layer: start a graph run on Temporal, answer it, and watch it.

Anything here can also be done with the plain SDK or the ``temporal`` CLI
(see ``docs/temporal.md``): ``client.start_workflow("<graph name>",
{"message": ...}, id=..., task_queue=...)``, the ``respond`` / ``send``
signals, the ``submit_response`` / ``send_message`` updates and the
``status`` / ``pending_requests`` / ``state`` queries.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from ._events import WorkflowEvent
from ._plugin import DEFAULT_TASK_QUEUE
from ._protocol import (
    EVENTS_TOPIC,
    QUERY_PENDING_REQUESTS,
    QUERY_STATE,
    QUERY_STATUS,
    SIGNAL_CLOSE,
    SIGNAL_RESPOND,
    SIGNAL_SEND,
    UPDATE_RESPOND,
    UPDATE_SEND,
    RespondInput,
    RunInput,
    SendInput,
)
from ._serde import Envelope, decode, encode
from ._workflow import Workflow

__all__ = ["RawEvent", "RunHandle", "get_run", "send_or_start", "start_run"]


class RawEvent(WorkflowEvent):
    """A streamed custom event whose class is not importable in this process."""

    type: str = "custom"
    event_type: str | None = None
    data: Any = None


def _event(env: Envelope) -> WorkflowEvent:
    try:
        event = decode(env)
    except Exception:
        return RawEvent(event_type=env.type, data=env.data)
    if not isinstance(event, WorkflowEvent):
        return RawEvent(event_type=env.type, data=env.data)
    # Outputs and request data travel as JSON with their type key: restore the type if we can.
    data_type = getattr(event, "data_type", None)
    if data_type is not None:
        with contextlib.suppress(Exception):  # not importable here: leave it as JSON
            event = event.model_copy(update={"data": decode(Envelope(data_type, getattr(event, "data", None)))})
    return event


class RunHandle:
    """A graph run on Temporal. ``handle`` is the SDK's own workflow handle."""

    def __init__(self, handle: WorkflowHandle[Any, Any], client: Client | None = None) -> None:
        self.handle = handle
        self._client = client

    @property
    def id(self) -> str:
        return self.handle.id

    async def result(self) -> dict[str, Any]:
        """The run's JSON result: ``outputs``, ``output_types``, ``superstep``, ``status``.

        Committed state is not in the result (it may be large); read it with :meth:`state`.
        """
        result: dict[str, Any] = await self.handle.result()
        return result

    async def outputs(self) -> list[Any]:
        """The outputs with their pydantic/dataclass types restored (types must be importable here)."""
        r = await self.result()
        return [decode(Envelope(t, d)) for d, t in zip(r["outputs"], r.get("output_types") or [], strict=False)]

    async def status(self) -> dict[str, Any]:
        """Live status: ``status`` (running, idle, waiting_for_input, completed, failed), superstep,
        in-flight executors, pending request count, outputs so far, warnings."""
        status: dict[str, Any] = await self.handle.query(QUERY_STATUS)
        return status

    async def pending_requests(self) -> list[dict[str, Any]]:
        """Open requests: id, executor, request JSON, response JSON schema, created time, deadline."""
        pending: list[dict[str, Any]] = await self.handle.query(QUERY_PENDING_REQUESTS)
        return pending

    async def state(self) -> dict[str, Any]:
        """Committed shared state (JSON) from the ``state`` query."""
        state: dict[str, Any] = await self.handle.query(QUERY_STATE)
        return state

    async def describe(self) -> WorkflowExecutionDescription:
        return await self.handle.describe()

    async def respond(self, request_id: str, response: Any, *, wait: bool = True) -> dict[str, Any] | None:
        """Answer a pending request.

        Args:
            request_id: From :meth:`pending_requests` or a ``RequestInfoEvent``.
            response: A value of the request's response type (or its JSON).
            wait: Use the ``submit_response`` update: returns once the run has
                accepted the response and raises ``WorkflowUpdateFailedError``
                naming the problem if it refuses it. ``False`` sends the
                ``respond`` signal and returns at once; a bad response then
                shows up as a warning in :meth:`status` and the event stream.
        """
        arg = RespondInput(request_id, encode(response, what=f"response to request {request_id!r}").data)
        if not wait:
            await self.handle.signal(SIGNAL_RESPOND, arg)
            return None
        accepted: dict[str, Any] = await self.handle.execute_update(UPDATE_RESPOND, arg, result_type=dict)
        return accepted

    async def send(self, executor_id: str, message: Any, *, wait: bool = True) -> dict[str, Any] | None:
        """Send a message to an executor of a running or idle (keep-alive) run; see :meth:`respond` for ``wait``."""
        arg = _send_input(executor_id, message)
        if not wait:
            await self.handle.signal(SIGNAL_SEND, arg)
            return None
        accepted: dict[str, Any] = await self.handle.execute_update(UPDATE_SEND, arg, result_type=dict)
        return accepted

    async def close(self) -> None:
        """Let a keep-alive run complete once it is idle."""
        await self.handle.signal(SIGNAL_CLOSE)

    async def events(
        self, *, from_offset: int = 0, poll_cooldown: timedelta = timedelta(milliseconds=100)
    ) -> AsyncIterator[WorkflowEvent]:
        """The run's events as they happen, from ``from_offset``; ends after the run closes.

        The same event classes as an in-process ``run_stream()``: supersteps,
        executor invocations and completions, outputs, requests, warnings,
        status changes and custom ``ctx.add_event`` events. Served by
        ``temporalio.contrib.workflow_streams`` (long-poll updates), so a
        subscriber that starts late or reconnects misses nothing.
        """
        if self._client is None:
            raise RuntimeError("events() needs the Client: build the handle with RunHandle(handle, client)")
        stream = WorkflowStreamClient.create(self._client, self.id)
        async for item in stream.subscribe(
            [EVENTS_TOPIC], from_offset, result_type=Envelope, poll_cooldown=poll_cooldown
        ):
            yield _event(item.data)


def _graph_name(workflow: Workflow | str) -> str:
    name = workflow if isinstance(workflow, str) else workflow.name
    if not name:
        raise ValueError("a workflow hosted on Temporal needs a name: WorkflowBuilder(name=...)")
    return name


def _send_input(executor_id: str, message: Any) -> SendInput:
    env = encode(message, what=f"message for executor {executor_id!r}")
    return SendInput(executor_id, env.data, env.type)


def get_run(client: Client, workflow_id: str) -> RunHandle:
    """A handle on an existing run (its latest execution)."""
    return RunHandle(client.get_workflow_handle(workflow_id), client)


async def start_run(
    client: Client,
    workflow: Workflow | str,
    message: Any = None,
    *,
    id: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    keep_alive: bool = False,
) -> RunHandle:
    """Start a run of ``workflow`` (a built graph, or its name) with a start message.

    Args:
        keep_alive: Keep the run open when it is idle, for more :meth:`RunHandle.send`
            messages (one run per conversation); end it with :meth:`RunHandle.close`.
            A keep-alive run started without a message starts idle.
    """
    name = _graph_name(workflow)
    env = encode(message, what="start message")
    arg: dict[str, Any] = {"message": env.data}
    if env.type is not None:
        arg["message_type"] = env.type
    if keep_alive:
        arg["keep_alive"] = True
    handle = await client.start_workflow(
        name, arg, id=id or f"{name}-{uuid.uuid4().hex[:12]}", task_queue=task_queue, result_type=dict
    )
    return RunHandle(handle, client)


async def send_or_start(
    client: Client,
    workflow: Workflow | str,
    message: Any,
    *,
    id: str,
    executor_id: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    wait: bool = True,
) -> RunHandle:
    """Send ``message`` to the keep-alive run ``id``, starting it first if it is not running.

    For stateless front ends: one workflow id per conversation, and every turn
    is this one call. ``wait=True`` uses update-with-start (returns once the
    message is accepted, or raises naming the problem); ``wait=False`` uses
    signal-with-start.

    Args:
        executor_id: Who gets the message; the start executor by default.
    """
    name = _graph_name(workflow)
    target = executor_id
    if target is None:
        if isinstance(workflow, str):
            raise ValueError("pass executor_id= when the workflow is given by name")
        target = workflow.graph.topology.start_executor_id
    arg = _send_input(target, message)
    start = RunInput(keep_alive=True)
    if not wait:
        handle = await client.start_workflow(
            name,
            start,
            id=id,
            task_queue=task_queue,
            result_type=dict,
            start_signal=SIGNAL_SEND,
            start_signal_args=[arg],
        )
        return RunHandle(handle, client)
    op: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        name,
        start,
        id=id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        result_type=dict,
    )
    await client.execute_update_with_start_workflow(UPDATE_SEND, arg, start_workflow_operation=op, result_type=dict)
    return RunHandle(await op.workflow_handle(), client)
