"""Running a LlamaIndex workflow on Temporal: :func:`start_run` and :class:`LlamaRunHandle`.

The worker side needs nothing LlamaIndex-specific: pass the workflow instance
to ``TemporalWorkflowsPlugin([MyWorkflow()])`` and the worker hosts it as the
graph it compiles to (workflow type: the class name, or ``name=``; one
activity per step, ``<workflow>.<step>``; the workflow itself runs no user
code). This module is the client side, a thin layer over the graph client's
:class:`~temporal_workflows.temporal.RunHandle`:

* :func:`start_run` starts a run with the start event, open until a step
  returns a ``StopEvent`` (``keep_alive``) and bounded by the workflow's
  ``timeout`` (the execution timeout);
* ``await run.result()`` (or ``await run``) is the ``StopEvent``'s result,
  as ``await handler`` is in process;
* ``run.events()`` (or ``stream_events()``) yields what steps publish, ending
  with the ``StopEvent``;
* ``await run.send_event(ev)`` hands the event to the run, which routes it
  at its next boundary as ``handler.ctx.send_event`` does in process: the
  ``wait_for_event`` calls it matches, then the steps that accept it.

Everything else of ``RunHandle`` (status, checkpoints, reset, fork, the
``temporal`` CLI) works on ``run.run`` as for graphs.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Generator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError, TerminatedError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

from temporal_workflows._engine.limits import check_payload
from temporal_workflows._engine.serde import Envelope, decode, encode
from temporal_workflows._errors import ExecutorFailedError, step_error
from temporal_workflows._events import WorkflowFailedEvent as GraphFailedEvent
from temporal_workflows._events import WorkflowOutputEvent
from temporal_workflows.llama._runtime import LlamaFailedStreamEvent, LlamaStreamEvent
from temporal_workflows.llama.errors import WorkflowCancelledByUser, WorkflowRuntimeError, WorkflowTimeoutError
from temporal_workflows.llama.events import (
    Event,
    InternalDispatchEvent,
    StartEvent,
    StopEvent,
    WorkflowCancelledEvent,
    WorkflowFailedEvent,
    WorkflowTimedOutEvent,
)
from temporal_workflows.temporal._client.client import RunHandle
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

if TYPE_CHECKING:
    from temporal_workflows.llama.workflow import Workflow

__all__ = ["LlamaRunHandle", "get_run", "start_run"]


class LlamaRunHandle:
    """A LlamaIndex workflow's run on Temporal.

    Attributes:
        run: The graph client's handle (status, checkpoints, reset, fork, ...).
        workflow: The workflow instance (its event classes decode the run's events).
    """

    def __init__(self, run: RunHandle, workflow: Workflow) -> None:
        self.run = run
        self.workflow = workflow
        self._compiled = workflow._compiled()

    @property
    def id(self) -> str:
        return self.run.id

    async def _stop_event(self) -> StopEvent:
        try:
            result = await self.run.result()
        except ExecutorFailedError as e:
            raise step_error(e) from None
        except WorkflowFailureError as e:
            cause = e.cause
            if isinstance(cause, TemporalTimeoutError):
                timeout = self.workflow._timeout
                active = await self._active_steps()
                info = "Currently active steps: " + ", ".join(active) if active else "No steps active"
                raise WorkflowTimeoutError(
                    f"Operation timed out after {float(timeout) if timeout is not None else '?'} seconds. {info}"
                ) from e
            if isinstance(cause, CancelledError):
                raise WorkflowCancelledByUser() from e
            if isinstance(cause, TerminatedError):
                raise WorkflowRuntimeError(f"the run was terminated: {cause.message}") from e
            raise
        outputs = result.get("outputs") or []
        types = result.get("output_types") or []
        if not outputs:
            raise WorkflowRuntimeError(
                f"run {self.id!r} ended without a StopEvent: it went idle with no step running, no event queued "
                "and no wait_for_event pending, and was closed (start it with keep_alive, as start_run does)"
            )
        stop = decode(Envelope(types[0] if types else None, outputs[0]))
        if not isinstance(stop, StopEvent):
            raise WorkflowRuntimeError(f"run {self.id!r} ended with {type(stop).__name__}, not a StopEvent")
        return stop

    async def stop_event_result(self) -> StopEvent:
        """The run's ``StopEvent`` itself (whatever its class)."""
        return await self._stop_event()

    async def result(self) -> Any:
        """The ``StopEvent``'s ``result`` (the event itself for a custom ``StopEvent`` class).

        Raises:
            Exception: a failed step's own exception class where it can be
                made again here (``step_error``: builtin ones, and the
                program's own imported classes whose constructor takes the
                message), else ``ExecutorFailedError`` naming the
                step and its error type; ``WorkflowTimeoutError`` when the run
                exceeded the workflow's ``timeout``; ``WorkflowCancelledByUser``
                when it was cancelled; the engine's named errors otherwise
                (``StateConflictError``, ...).
        """
        stop = await self._stop_event()
        return stop.result if type(stop) is StopEvent else stop

    def __await__(self) -> Generator[Any, Any, Any]:
        return self.result().__await__()

    async def events(self, *, from_offset: int = 0, expose_internal: bool = False) -> AsyncIterator[Event]:
        """What the run's steps publish (``write_event_to_stream``, returned ``InputRequiredEvent``\\ s,
        waiter events), ending with its ``StopEvent`` (or the event saying why it ended otherwise);
        internal events (``UnhandledEvent``) only with ``expose_internal``, as ``stream_events`` in process."""
        async for ev in self.run.events(from_offset=from_offset):
            if isinstance(ev, (LlamaStreamEvent, LlamaFailedStreamEvent)):
                event = decode(Envelope.from_json(ev.event))
                if expose_internal or not isinstance(event, InternalDispatchEvent):
                    yield event
            elif isinstance(ev, WorkflowOutputEvent):
                stop = ev.data if isinstance(ev.data, StopEvent) else decode(Envelope(ev.data_type, ev.data))
                if isinstance(stop, StopEvent):
                    yield stop
                    return
            elif isinstance(ev, GraphFailedEvent):
                yield await self._failed_event(ev)
                return
        desc = await self.run.describe()
        if desc.status == WorkflowExecutionStatus.TIMED_OUT:
            active = await self._active_steps()
            yield WorkflowTimedOutEvent(timeout=float(self.workflow._timeout or 0), active_steps=active)
        elif desc.status == WorkflowExecutionStatus.CANCELED:
            yield WorkflowCancelledEvent()

    async def _failed_event(self, ev: GraphFailedEvent) -> WorkflowFailedEvent:
        """LlamaIndex's ``WorkflowFailedEvent``: the step's own exception (its class rebuilt), with the
        attempts and time its retry policy spent, read from the run's failure."""
        try:
            await self.run.result()
        except ExecutorFailedError as e:
            return WorkflowFailedEvent(
                step_name=e.executor_id or "",
                exception=step_error(e),
                attempts=e.attempts,
                elapsed_seconds=e.elapsed_seconds,
            )
        except Exception as e:
            return WorkflowFailedEvent(step_name=ev.executor_id or "", exception=e)
        return WorkflowFailedEvent(step_name=ev.executor_id or "", exception=RuntimeError(ev.error))

    async def _active_steps(self) -> list[str]:
        """The steps a run that timed out was running: its ``status`` query (a closed run still answers it)."""
        try:
            status = await self.run.status()
        except Exception:
            return []
        return list(dict.fromkeys(str(s) for s in status.get("in_flight") or []))

    def stream_events(self, expose_internal: bool = False) -> AsyncIterator[Event]:
        """LlamaIndex's name for :meth:`events` (internal events such as ``UnhandledEvent`` only if asked)."""
        return self.events(expose_internal=expose_internal)

    async def send_event(self, event: Event, step: str | None = None) -> None:
        """Send an event into the run, as ``handler.ctx.send_event`` does in process.

        One ``submit_event`` update carries the event; the run routes it
        itself at its next boundary, by LlamaIndex's rule over what is pending
        there (``_routing``): it answers every ``wait_for_event`` it matches
        (class and required values), then goes to each step that accepts it
        (only ``step`` if given) and was not waiting for it; an event nothing
        takes is published as an ``UnhandledEvent``. The ``temporal`` CLI
        does the same with plain JSON: the ``send_event`` signal,
        ``{"event": {...}, "event_type": "module:Class", "step": ...}``
        (``event_type`` may be left out when the JSON reads as one of the
        events the run awaits or its steps accept).

        Raises:
            WorkflowRuntimeError: ``step`` does not exist or does not accept the event.
            UndeliverableMessageError: the run cannot read the event.
        """
        if not isinstance(event, Event):
            raise WorkflowRuntimeError(f"send_event takes an Event, not {type(event).__name__}")
        if step is not None:
            self._compiled.check_target(step, event)
        await self.run.send_event(event, step=step)

    async def cancel_run(self) -> None:
        """Cancel the run (its steps are cancelled; :meth:`result` raises ``WorkflowCancelledByUser``)."""
        await self.run.handle.cancel()

    async def status(self) -> dict[str, Any]:
        return await self.run.status()


async def start_run(
    client: Client,
    workflow: Workflow,
    start_event: StartEvent | None = None,
    *,
    id: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    checkpoint_every: int | None = None,
    max_history_events: int | None = None,
    **kwargs: Any,
) -> LlamaRunHandle:
    """Start a run of ``workflow`` on Temporal with ``start_event`` (or one made from ``kwargs``).

    The run stays open until a step returns a ``StopEvent`` (it is started
    ``keep_alive``, so it waits for events sent with
    :meth:`LlamaRunHandle.send_event` when idle, as a LlamaIndex run does),
    and fails with ``WorkflowTimeoutError`` after the workflow's ``timeout``
    (its Temporal execution timeout).

    Raises:
        PayloadTooLargeError: the start event is too large for one Temporal payload.
    """
    workflow._validate()
    graph = workflow.__temporal_workflows_graph__()
    name = graph.name or workflow._temporal_name()
    event = workflow._start_event(start_event, **kwargs)
    env = encode(event, what="start event")
    check_payload(env.data, what="start event")
    arg: dict[str, Any] = {"message": env.data, "message_type": env.type, "keep_alive": True}
    if checkpoint_every is not None:
        arg["checkpoint_every"] = checkpoint_every
    if max_history_events is not None:
        arg["max_history_events"] = max_history_events
    timeout = workflow._timeout
    handle = await client.start_workflow(
        name,
        arg,
        id=id or f"{name}-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=dict,
        execution_timeout=timedelta(seconds=float(timeout)) if timeout else None,
    )
    return LlamaRunHandle(RunHandle(handle, client), workflow)


def get_run(client: Client, workflow: Workflow, workflow_id: str) -> LlamaRunHandle:
    """A handle on an existing run of ``workflow``."""
    return LlamaRunHandle(RunHandle(client.get_workflow_handle(workflow_id), client), workflow)
