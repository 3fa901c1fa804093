"""What a graph run and a LlamaIndex run share behind the endpoint: one durable run reached by its handle.

Both kinds (``_graph.py``, ``_llama.py``) read a run through ``RunHandle``:
where it is, its stream's head, what it asks, its state, and answers to it;
both translators send its state as a ``STATE_SNAPSHOT`` then ``STATE_DELTA``
patches, and feed a stream item event by event. That is written once here;
each kind keeps only what differs (how input enters, how its events read).
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from ag_ui.core import StateDeltaEvent, StateSnapshotEvent
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._errors import WorkflowError
from temporal_workflows._events import RequestInfoEvent
from temporal_workflows.ag_ui._emit import Emitter
from temporal_workflows.ag_ui._kinds import Phase, Refusal, RunKind, Translator, TurnContext
from temporal_workflows.ag_ui._patch import json_patch
from temporal_workflows.temporal._client.client import RunHandle, get_run
from temporal_workflows.temporal._failures import innermost

__all__ = ["POLL_COOLDOWN", "HandleKind", "StateTranslator", "failure_code", "failure_text", "if_found"]

POLL_COOLDOWN = timedelta(milliseconds=50)
"""How soon a turn polls the run's stream again after a poll returned (as the console's event route)."""

_T = TypeVar("_T")
_D = TypeVar("_D")


async def if_found(call: Awaitable[_T], missing: _D) -> _T | _D:
    """``call``'s result, or ``missing`` when the run (or its stream) does not exist (``NOT_FOUND``)."""
    try:
        return await call
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return missing
        raise


def failure_text(e: BaseException) -> str:
    """A refusal in the run's own words (an update's ``ApplicationError`` message), else the error's."""
    if isinstance(e, WorkflowUpdateFailedError):
        cause = innermost(e)
        return cause.message if isinstance(cause, ApplicationError) else str(e.cause or e)
    if isinstance(e, WorkflowError):
        return str(e)
    if isinstance(e, RPCError):
        return e.message
    return f"{type(e).__name__}: {e}"


def failure_code(e: BaseException) -> str:
    """The refusal's code: an update's ``ApplicationError`` type, else the error's class name."""
    if isinstance(e, WorkflowUpdateFailedError):
        cause = innermost(e)
        if isinstance(cause, ApplicationError) and cause.type:
            return cause.type
    return type(e).__name__


class HandleKind(RunKind):
    """A kind whose runs are read and answered through ``RunHandle`` (graph runs and LlamaIndex runs alike)."""

    def _handle(self, client: Client, workflow_id: str) -> RunHandle:
        return get_run(client, workflow_id)

    @abc.abstractmethod
    def _resting(self, status: Any) -> bool:
        """Whether a running run whose ``status()`` says ``status`` is at rest (idle or waiting for input)."""

    async def phase(self, client: Client, workflow_id: str) -> Phase | None:
        handle = self._handle(client, workflow_id)
        desc = await if_found(handle.describe(), None)
        if desc is None:
            return None
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return "closed"
        return "resting" if self._resting((await handle.status()).get("status")) else "working"

    async def _pending(self, client: Client, workflow_id: str) -> list[RequestInfoEvent]:
        """The run's open requests, oldest first (none: there is no such run)."""
        no_requests: list[RequestInfoEvent] = []
        return await if_found(self._handle(client, workflow_id).pending_requests(restore=False), no_requests)

    async def head(self, client: Client, workflow_id: str) -> int:
        return await if_found(WorkflowStreamClient.create(client, workflow_id).get_offset(), 0)

    async def respond(self, client: Client, workflow_id: str, answers: dict[str, Any]) -> None:
        try:
            await self._handle(client, workflow_id).respond_all(answers)
        except (WorkflowError, WorkflowUpdateFailedError, ValueError) as e:
            raise Refusal(failure_text(e), failure_code(e)) from None

    async def state(self, client: Client, workflow_id: str) -> dict[str, Any]:
        return await if_found(self._handle(client, workflow_id).state(), {})


class StateTranslator(Translator):
    """A translator of one run of a :class:`HandleKind`: its state as a snapshot, then as deltas against it."""

    def __init__(self, ctx: TurnContext, mode: str, kind: HandleKind, client: Client) -> None:
        self.ctx = ctx
        self.em = Emitter(ctx)
        self.activated = mode == "r"
        self._kind = kind
        self._client = client
        self.state: dict[str, Any] | None = None
        self.outputs = []

    async def snapshot(self) -> list[Any]:
        self.state = await self._kind.state(self._client, self.ctx.workflow_id)
        return [StateSnapshotEvent(snapshot=self.state)]

    async def _delta(self) -> None:
        state = await self._kind.state(self._client, self.ctx.workflow_id)
        if self.state is None:
            self.state = state
            self.em.emit(StateSnapshotEvent(snapshot=state), counted=False)
            return
        ops = json_patch(self.state, state)
        self.state = state
        if ops:
            self.em.emit(StateDeltaEvent(delta=ops), counted=False)  # type: ignore[arg-type]

    async def feed(self, offset: int, events: list[Any], *, live: bool) -> list[tuple[bool, Any]]:
        for n, event in enumerate(events):
            if self.ended is not None:
                break
            await self._one(offset, n, event, live=live)
        return self.em.take()

    @abc.abstractmethod
    async def _one(self, offset: int, n: int, event: Any, *, live: bool) -> None:
        """Emit the AG-UI events of the ``n``-th event of the stream item at ``offset``."""

    def close(self) -> list[Any]:
        self.em.close()
        return [e for _, e in self.em.take()]
