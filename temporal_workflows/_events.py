"""Events a run emits, run states, and the result of an in-process run.

Events are pydantic models with a ``type`` discriminator, so the same objects
stream from the in-process runner and (as JSON) out of a Temporal run. Names
follow Microsoft Agent Framework.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ExecutorCompletedEvent",
    "ExecutorFailedEvent",
    "ExecutorInvokedEvent",
    "RequestInfoEvent",
    "SuperStepCompletedEvent",
    "SuperStepStartedEvent",
    "WorkflowEvent",
    "WorkflowFailedEvent",
    "WorkflowOutputEvent",
    "WorkflowResetEvent",
    "WorkflowRunResult",
    "WorkflowRunState",
    "WorkflowStartedEvent",
    "WorkflowStatusEvent",
]


class WorkflowRunState(enum.StrEnum):
    """Where a run is. Values match Agent Framework's names."""

    IN_PROGRESS = "IN_PROGRESS"
    IN_PROGRESS_PENDING_REQUESTS = "IN_PROGRESS_PENDING_REQUESTS"
    IDLE = "IDLE"
    IDLE_WITH_PENDING_REQUESTS = "IDLE_WITH_PENDING_REQUESTS"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class WorkflowEvent(BaseModel):
    """Base of all events. Subclass it for custom events sent with ``ctx.add_event``."""

    model_config = ConfigDict(arbitrary_types_allowed=False)

    type: str = "custom"


class WorkflowStartedEvent(WorkflowEvent):
    type: Literal["started"] = "started"
    run_id: str


class WorkflowStatusEvent(WorkflowEvent):
    type: Literal["status"] = "status"
    state: WorkflowRunState


class SuperStepStartedEvent(WorkflowEvent):
    type: Literal["superstep_started"] = "superstep_started"
    superstep: int
    executor_ids: list[str]


class SuperStepCompletedEvent(WorkflowEvent):
    type: Literal["superstep_completed"] = "superstep_completed"
    superstep: int
    state_keys_written: list[str] = []
    checkpoint_id: str | None = None


class ExecutorInvokedEvent(WorkflowEvent):
    type: Literal["executor_invoked"] = "executor_invoked"
    executor_id: str
    superstep: int


class ExecutorCompletedEvent(WorkflowEvent):
    type: Literal["executor_completed"] = "executor_completed"
    executor_id: str
    superstep: int


class ExecutorFailedEvent(WorkflowEvent):
    type: Literal["executor_failed"] = "executor_failed"
    executor_id: str
    superstep: int
    error_type: str
    error: str


class WorkflowOutputEvent(WorkflowEvent):
    type: Literal["output"] = "output"
    executor_id: str
    data: Any
    data_type: str | None = None
    """Type key of ``data`` when it arrived as JSON (events streamed from Temporal)."""


class RequestInfoEvent(WorkflowEvent):
    """A step asked for outside input; answer it with ``run(responses={request_id: ...})``."""

    type: Literal["request_info"] = "request_info"
    request_id: str
    source_executor_id: str
    data: Any
    response_type: str
    response_schema: dict[str, Any] = {}
    data_type: str | None = None
    """Type key of ``data`` when it arrived as JSON (events streamed from Temporal)."""
    timeout: float | None = None
    """Seconds until the request times out, if it does."""


class WorkflowWarningEvent(WorkflowEvent):
    """Outside input the run could not use (e.g. a bad ``respond`` signal); the run goes on unchanged."""

    type: Literal["warning"] = "warning"
    message: str
    request_id: str | None = None
    executor_id: str | None = None


class WorkflowResetEvent(WorkflowEvent):
    """The run was reset (on Temporal: it continues as new from the reset's starting point).

    ``checkpoint_id`` is the checkpoint it went back to, or ``None`` for a clean start.
    """

    type: Literal["reset"] = "reset"
    checkpoint_id: str | None = None
    superstep: int = 0
    resets: int = 1


class WorkflowFailedEvent(WorkflowEvent):
    type: Literal["failed"] = "failed"
    error_type: str
    error: str
    executor_id: str | None = None
    superstep: int


class WorkflowRunResult(list[WorkflowEvent]):
    """The events of one ``run()`` call, plus accessors for what they mean.

    It is a list of events (as in Agent Framework); ``get_outputs()`` and
    friends read them. ``state`` is the committed shared state after the call.
    """

    def __init__(
        self,
        events: list[WorkflowEvent],
        *,
        final_state: WorkflowRunState,
        state: dict[str, Any],
        run_id: str,
    ) -> None:
        super().__init__(events)
        self._final_state = final_state
        self.state = state
        self.run_id = run_id

    def get_outputs(self) -> list[Any]:
        """Values yielded with ``ctx.yield_output`` during this call, in commit order."""
        return [e.data for e in self if isinstance(e, WorkflowOutputEvent)]

    def get_request_info_events(self) -> list[RequestInfoEvent]:
        """Requests raised during this call (``Workflow.pending_requests`` lists every one still open)."""
        return [e for e in self if isinstance(e, RequestInfoEvent)]

    def get_final_state(self) -> WorkflowRunState:
        """The run state when this call returned (Agent Framework's meaning)."""
        return self._final_state

    def get_state(self) -> dict[str, Any]:
        """The committed shared state (executor-private keys excluded)."""
        return self.state
