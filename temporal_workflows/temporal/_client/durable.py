"""The in-process ``Workflow.run`` calls, backed by a run on Temporal: the same program, durable by one line.

    durable = workflow.on_temporal(client)
    result = await durable.run("hello")                 # was: await workflow.run("hello")
    result = await durable.run(responses={rid: "yes"})  # was: await workflow.run(responses=...)
    async for event in durable.run("hi", stream=True):  # was: workflow.run("hi", stream=True)
        ...

Each call returns what the in-process call returns (a ``WorkflowRunResult``,
or the same events in the same order) and raises the same errors, but the run
is a Temporal workflow execution: it survives the caller, the worker and the
machine. A call follows the run's event stream (``RunHandle.events``) from
where the previous call stopped until the run is idle again (completed,
waiting for responses, or failed), exactly as the in-process call runs until
the graph is idle.

A streamed call (``run(..., stream=True)``) paces its run as an in-process
stream does: the run goes no further than the caller has read (its reader
token, ``temporal/_workflow/pacing.py``). Leaving the stream (``break``,
``aclose()``, dropping it) before the run is idle stops the run where the
reader left it: it is cancelled there, having run, committed and
checkpointed nothing more, so ``run(checkpoint_id=...)`` resumes it from its
checkpoints as Agent Framework's ``checkpoint_with_resume`` does in process.
Cancelling the caller's task (Ctrl-C, ``task.cancel()``) stops following the
run and nothing else: the run goes on on Temporal, and the next call, or
:meth:`DurableWorkflow.handle`, picks it up; a caller that crashes leaves it
going on too (after ``READER_LAPSE``). :meth:`DurableWorkflow.cancel` cancels
the run itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, overload

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError

from temporal_workflows._engine.inbound import ConcurrentInput, check_policy
from temporal_workflows._errors import RunClosedError, WorkflowError, WorkflowRunError, attach_result
from temporal_workflows._events import (
    RequestInfoEvent,
    WorkflowEvent,
    WorkflowRunResult,
    WorkflowRunState,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
)
from temporal_workflows._graph.runs import MISSING, Reservation, RunStream, check_run_arguments, invocation_kwargs
from temporal_workflows.temporal._client.client import RunHandle, fork, get_run, start_run
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

if TYPE_CHECKING:
    from temporal_workflows._checkpoints.base import CheckpointStorage
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["DurableWorkflow"]

_SETTLED = frozenset(
    {
        WorkflowRunState.IDLE,
        WorkflowRunState.IDLE_WITH_PENDING_REQUESTS,
        WorkflowRunState.FAILED,
        WorkflowRunState.CANCELLED,
    }
)
"""Run states at which an in-process ``run()`` returns: the graph is idle (or failed)."""


class DurableWorkflow:
    """A built :class:`~temporal_workflows.Workflow` whose ``run`` calls run on Temporal.

    Made by :meth:`Workflow.on_temporal`. A worker hosting the workflow must
    be polling ``task_queue`` (``TemporalWorkflowsPlugin([workflow])``).

    Args:
        workflow: The graph; its ``name`` is the Temporal workflow type.
        client: A client connected with the plugin (or its data converter).
        id: The workflow id of the runs this object starts; each new run gets
            a fresh id when omitted. With an id, ``run(checkpoint_id=...)``
            also resumes that id's closed run, from a new object or process.
        task_queue: Where the hosting worker polls.
        checkpoint_every: As for :func:`~temporal_workflows.temporal.start_run`.
    """

    def __init__(
        self,
        workflow: Workflow,
        client: Client,
        *,
        id: str | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        checkpoint_every: int | None = None,
    ) -> None:
        self._workflow = workflow
        self._client = client
        self._id = id
        self._task_queue = task_queue
        self._checkpoint_every = checkpoint_every
        self._handle: RunHandle | None = get_run(client, id) if id is not None else None
        self._offset = 0
        self._state = WorkflowRunState.IDLE
        self._pending: dict[str, RequestInfoEvent] = {}
        self._run_id = ""
        self._reservation = Reservation()

    # -- what the in-process workflow also tells ----------------------------------------

    @property
    def workflow(self) -> Workflow:
        return self._workflow

    @property
    def handle(self) -> RunHandle | None:
        """The current run on Temporal (``None`` before the first ``run``)."""
        return self._handle

    @property
    def run_state(self) -> WorkflowRunState:
        """The run's state when the last call returned."""
        return self._state

    @property
    def pending_requests(self) -> list[RequestInfoEvent]:
        """Requests of the current run still waiting for a response, as the last call left them."""
        return list(self._pending.values())

    async def cancel(self) -> None:
        """Cancel the run on Temporal (its steps are cancelled; its stream ends ``CANCELLED``)."""
        if self._handle is not None:
            await self._handle.handle.cancel()

    # -- run ---------------------------------------------------------------------------

    @overload
    def run(
        self,
        message: Any = ...,
        *,
        stream: Literal[True],
        responses: Mapping[str, Any] | None = ...,
        checkpoint_id: str | None = ...,
        checkpoint_storage: CheckpointStorage | None = ...,
        function_invocation_kwargs: Mapping[str, Any] | None = ...,
        client_kwargs: Mapping[str, Any] | None = ...,
        concurrent_input: ConcurrentInput | None = ...,
    ) -> AsyncIterator[WorkflowEvent]: ...

    @overload
    def run(
        self,
        message: Any = ...,
        *,
        stream: Literal[False] = ...,
        responses: Mapping[str, Any] | None = ...,
        checkpoint_id: str | None = ...,
        checkpoint_storage: CheckpointStorage | None = ...,
        function_invocation_kwargs: Mapping[str, Any] | None = ...,
        client_kwargs: Mapping[str, Any] | None = ...,
        concurrent_input: ConcurrentInput | None = ...,
    ) -> Awaitable[WorkflowRunResult]: ...

    def run(
        self,
        message: Any = MISSING,
        *,
        stream: bool = False,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
        function_invocation_kwargs: Mapping[str, Any] | None = None,
        client_kwargs: Mapping[str, Any] | None = None,
        concurrent_input: ConcurrentInput | None = None,
    ) -> AsyncIterator[WorkflowEvent] | Awaitable[WorkflowRunResult]:
        """As :meth:`Workflow.run`, on Temporal.

        Args:
            message: Start a new run with this message.
            stream: Return an async iterator of the events as they happen.
            responses: ``{request_id: response}`` answers to the current run's
                pending requests; all ids are checked before any is sent.
            checkpoint_id: Go back to this checkpoint: the run that took it
                resets to it if it is open, else it is started again from it
                under its workflow id. The run is this object's (its ``id``, or
                the run it started); a new object given only the checkpoint id
                finds the run the checkpoint names in ``checkpoint_storage`` or
                the graph's own storage (the worker's, when it is shared: a
                file or SQLite store), as Agent Framework's ``run(checkpoint_id=...)``
                needs nothing else.
            checkpoint_storage: Where to look a checkpoint's run up (see
                ``checkpoint_id``); the checkpoint itself is loaded by the worker.
            function_invocation_kwargs, client_kwargs: As in process (a new run
                gets them; responses may replace them).
            concurrent_input: As in process: a new run's policy for messages
                :meth:`send` brings while it is busy.

        Raises:
            WorkflowRunError: the run failed: the same class and message as in
                process, its ``result`` holding this call's events.
            UnknownRequestError / InvalidResponseError / AlreadyAnsweredError:
                a refused response.
            WorkflowError: a call the in-process workflow refuses too (another
                ``run`` under way, no run to answer, both a message and a
                checkpoint), or a new run while this object's run is open.
        """
        check_run_arguments(message, responses, checkpoint_id)
        kwargs = invocation_kwargs(function_invocation_kwargs, client_kwargs)
        if concurrent_input is not None:
            kwargs = {**(kwargs or {}), "concurrent_input": check_policy(concurrent_input)}
        # Taken here, synchronously, as in process: two calls started back to back cannot both pass.
        events = self._reservation.take(
            self._events(message, responses, checkpoint_id, checkpoint_storage, stream, kwargs)
        )
        if stream:
            return events
        return self._collect(events)

    async def send(
        self, message: Any, *, executor_id: str | None = None, policy: ConcurrentInput | None = None
    ) -> dict[str, Any]:
        """As :meth:`Workflow.send`: a message into this object's open run, by ``RunHandle.send``.

        Raises:
            WorkflowError: this object has no open run (start one with ``run(message)``).
            RunInProgressError: the run is busy and the policy is ``"reject"``.
        """
        if self._handle is None or not await _is_open(self._handle):
            raise RunClosedError("no run of this workflow is open to send to; start one with run(message)")
        target = executor_id if executor_id is not None else self._workflow.graph.topology.start_executor_id
        sent = await self._handle.send(target, message, policy=policy)
        assert sent is not None
        return sent

    def run_stream(
        self,
        message: Any = MISSING,
        *,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
    ) -> AsyncIterator[WorkflowEvent]:
        """Same as ``run(..., stream=True)``."""
        return self.run(message, stream=True, responses=responses, checkpoint_id=checkpoint_id)

    async def _collect(self, events: RunStream) -> WorkflowRunResult:
        collected: list[WorkflowEvent] = []
        try:
            async for ev in events:
                collected.append(ev)
        except WorkflowRunError as e:
            attach_result(e, await self._result(collected))
            raise
        return await self._result(collected)

    async def _result(self, events: list[WorkflowEvent]) -> WorkflowRunResult:
        state: dict[str, Any] = {}
        if self._handle is not None:
            state = await self._handle.state()
        return WorkflowRunResult(events, final_state=self._state, state=state, run_id=self._run_id)

    async def _events(
        self,
        message: Any,
        responses: Mapping[str, Any] | None,
        checkpoint_id: str | None,
        storage: CheckpointStorage | None,
        stream: bool,
        kwargs: dict[str, Any] | None = None,
    ) -> AsyncGenerator[WorkflowEvent, None]:
        # A streamed call paces its run by a reader token of its own (see the module); an awaited one reads
        # every event anyway, and never leaves part way.
        reader = uuid.uuid4().hex if stream else None
        if checkpoint_id is not None:
            handle = await self._restore(checkpoint_id, storage, stream, reader)
        elif message is not MISSING:
            handle = await self._start(message, stream, kwargs, reader)
        else:
            handle = await self._open_handle()
            if reader is not None:
                await _follow(handle, reader)
        if responses:
            await self._respond(handle, responses, stream, kwargs)
        settled = False
        consumer = asyncio.current_task()  # the task reading the stream (it runs this code at each next event)
        try:
            events = handle.events(
                from_offset=self._offset,
                reader=reader,
                poll_cooldown=_PACED_POLL_COOLDOWN if reader is not None else _POLL_COOLDOWN,
            )
            async for event in events:
                # Where the next call resumes: the stream position read through, not a count of events (a
                # step's batch of live events shares one position, and the view can leave an item out).
                self._offset = max(self._offset, events.offset + 1)
                self._seen(event)
                settled = isinstance(event, WorkflowStatusEvent) and event.state in _SETTLED
                yield event
                consumer = asyncio.current_task()
                if settled:
                    break
        except asyncio.CancelledError:
            if reader is not None and not settled:
                await self._leave(handle, reader, "release")  # the caller stopped following; the run goes on
            raise
        except GeneratorExit:
            if reader is not None and not settled:
                # Closed (``aclose()``, or collected) after the reader left the stream: the run stops where it
                # waits. Unless the reading task was cancelled (its cancel came while it awaited something else
                # in the loop, and left the stream to be collected): a cancelled caller only stops following.
                cancelled = consumer is not None and (consumer.cancelled() or consumer.cancelling() > 0)
                await self._leave(handle, reader, "release" if cancelled else "stop")
            raise
        if self._state == WorkflowRunState.FAILED:
            await handle.result()  # raises the run's own error, as the in-process run does
            raise AssertionError("a failed run returned a result")  # pragma: no cover

    def _seen(self, event: WorkflowEvent) -> None:
        if isinstance(event, WorkflowStartedEvent):
            self._run_id = event.run_id
        elif isinstance(event, RequestInfoEvent):
            self._pending[event.request_id] = event
        elif isinstance(event, WorkflowStatusEvent):
            self._state = event.state

    async def _leave(self, handle: RunHandle, reader: str, action: Literal["release", "stop"]) -> None:
        """Tell the run its reader stopped following (``release``) or left it (``stop``: cancel it where it waits).

        Only the execution that ``reader`` paces is cancelled (the one that took the ``pace`` update): a
        stream dropped after a newer call reset the run, whose reader paces it now, changes nothing. Best
        effort: a run this cannot reach goes on without its reader after ``READER_LAPSE``.
        """
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_LEAVE_SECONDS):
                told = await handle.pace(reader, action)
                run_id = told.get("run_id")
                if action == "stop" and told.get("paced") and isinstance(run_id, str):
                    await self._client.get_workflow_handle(handle.id, run_id=run_id).cancel()

    async def _start(
        self, message: Any, stream: bool, kwargs: dict[str, Any] | None, reader: str | None = None
    ) -> RunHandle:
        if self._handle is not None and await _is_open(self._handle):
            raise WorkflowError(
                f"run {self._handle.id!r} is still open ({self._state}): answer it with run(responses=...), "
                "or cancel() it, before starting another"
            )
        workflow_id = self._id or f"{self._workflow.name}-{uuid.uuid4().hex}"
        self._handle = await start_run(
            self._client,
            self._workflow,
            message,
            id=workflow_id,
            task_queue=self._task_queue,
            checkpoint_every=self._checkpoint_every,
            stream=stream,  # steps read it as ctx.is_streaming(), as in process
            reader=reader,
            **(kwargs or {}),
        )
        self._new_run()
        return self._handle

    async def _restore(
        self, checkpoint_id: str, storage: CheckpointStorage | None, stream: bool, reader: str | None = None
    ) -> RunHandle:
        followed = self._handle is not None and self._run_id != ""
        handle = self._handle or await self._run_of(checkpoint_id, storage)
        if await _is_open(handle):
            if not followed:
                # An open run this object has not read: its events from now on are this call's.
                self._offset = await WorkflowStreamClient.create(self._client, handle.id).get_offset()
            try:
                if reader is not None:
                    await _follow(handle, reader)  # the reset carries it to the run's next execution
                # The reset continues the run as new; its event stream goes on from the same offset.
                await handle.reset(checkpoint_id=checkpoint_id)
            except Exception:
                # The run closed between the check and the reset (it finished, or was closing and refused
                # it): then it starts again from the checkpoint, as a closed run does. Anything else is raised.
                if await _is_open(handle):
                    raise
            else:
                self._handle = handle
                self._pending.clear()
                return handle
        self._handle = await fork(
            self._client,
            handle.id,
            checkpoint_id,
            handle.id,
            task_queue=self._task_queue,
            stream=stream,
            reader=reader,
        )
        self._new_run()
        return self._handle

    async def _run_of(self, checkpoint_id: str, storage: CheckpointStorage | None) -> RunHandle:
        """The run that took ``checkpoint_id``: the checkpoint names it (its ``run_id`` is the workflow id)."""
        storage = storage or self._workflow.checkpoint_storage
        if storage is None:
            raise WorkflowError(
                "no run to restore a checkpoint into: give on_temporal(client, id=...) the workflow id of the run "
                "that took it, or pass checkpoint_storage= (the worker's storage) so the checkpoint can name it"
            )
        cp = await storage.load(checkpoint_id)
        if not cp.run_id:
            raise WorkflowError(f"checkpoint {checkpoint_id!r} names no run to restore it into")
        return get_run(self._client, cp.run_id)

    async def _open_handle(self) -> RunHandle:
        if self._handle is None or not await _is_open(self._handle):
            raise WorkflowError("no run to send responses to; start one with run(message)")
        return self._handle

    async def _respond(
        self, handle: RunHandle, responses: Mapping[str, Any], stream: bool, kwargs: dict[str, Any] | None
    ) -> None:
        # One update with every answer (as in process, where a bad one changes nothing): the run checks them
        # all before taking any, and hands them to the engine at one boundary, so the superstep that follows
        # sees all of them and this call returns only once the run is idle again after it.
        given = {k: v for k, v in (kwargs or {}).items() if k != "concurrent_input"}  # (a new run's, at its start)
        await handle.respond_all(responses, stream=stream, **given)
        for request_id in responses:
            self._pending.pop(request_id, None)

    def _new_run(self) -> None:
        self._offset = 0
        self._pending.clear()
        self._state = WorkflowRunState.IN_PROGRESS


_POLL_COOLDOWN = timedelta(milliseconds=100)
"""An awaited call's reader polls at most this often while it is caught up (``RunHandle.events``' default)."""
_PACED_POLL_COOLDOWN = timedelta(0)
"""A paced reader polls again at once: the run waits for its poll (which waits, server-side, for new events)."""
_LEAVE_SECONDS = 10.0
"""Most a stream's ``aclose()`` (or a cancelled caller) waits to tell the run its reader left."""


async def _follow(handle: RunHandle, reader: str) -> None:
    """Pace ``handle``'s run by ``reader`` from now; a worker that predates pacing refuses it: then it is not paced."""
    try:
        await handle.pace(reader, "follow")
    except (WorkflowUpdateFailedError, RPCError) as e:
        if "pace" not in str(e) and not isinstance(e, RPCError):
            raise


async def _is_open(handle: RunHandle) -> bool:
    try:
        desc = await handle.describe()
    except Exception:
        return False
    return desc.status == WorkflowExecutionStatus.RUNNING
