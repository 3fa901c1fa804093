"""Durable, graph-shaped agent workflows on Temporal.

Define a graph of executors joined by edges (Agent Framework's API), run it in
process for tests and notebooks, and host the same graph durably on Temporal.
"""

from typing import TYPE_CHECKING, Any

from temporal_workflows._checkpoints.base import CheckpointId, CheckpointStorage, WorkflowCheckpoint
from temporal_workflows._checkpoints.file import FileCheckpointStorage
from temporal_workflows._checkpoints.memory import HistoryCheckpointStorage, InMemoryCheckpointStorage
from temporal_workflows._checkpoints.sqlite import SqliteCheckpointStorage
from temporal_workflows._engine.registry import register_checkpoint_type
from temporal_workflows._engine.serde import register_type
from temporal_workflows._errors import (
    AlreadyAnsweredError,
    CheckpointNotFoundError,
    CheckpointStorageError,
    DeliveryForgottenError,
    ExecutorFailedError,
    GraphSignatureMismatchError,
    GraphValidationError,
    InvalidResponseError,
    InvalidRunInputError,
    NotSerializableError,
    PayloadTooLargeError,
    ReducerError,
    RequestTimeoutError,
    RunBusyError,
    RunClosedError,
    RunTooLargeError,
    StateConflictError,
    SuperstepLimitError,
    UndeliverableMessageError,
    UnknownGraphError,
    UnknownRequestError,
    WorkflowError,
    WorkflowRunError,
)
from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowErrorDetails,
    WorkflowEvent,
    WorkflowEventSource,
    WorkflowFailedEvent,
    WorkflowIntermediateEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowRunResult,
    WorkflowRunState,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
    WorkflowWarningEvent,
)
from temporal_workflows._graph.builder import WorkflowBuilder
from temporal_workflows._graph.context import StateView, WorkflowContext
from temporal_workflows._graph.edges import Case, Default
from temporal_workflows._graph.executor import (
    Executor,
    ExecutorOptions,
    FunctionExecutor,
    executor,
    handler,
    response_handler,
)
from temporal_workflows._graph.subworkflow import WorkflowExecutor
from temporal_workflows._graph.viz import WorkflowViz
from temporal_workflows._graph.workflow import Workflow, load_workflow
from temporal_workflows._live import (
    LiveCommittedEvent,
    LiveEvent,
    LiveOmittedEvent,
    StepProgressEvent,
    StepRetryEvent,
)
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows._subworkflow import SubWorkflowRequestMessage, SubWorkflowResponseMessage
from temporal_workflows._version import __version__ as __version__

if TYPE_CHECKING:
    from temporal_workflows.agents import AgentExecutor as AgentExecutor
    from temporal_workflows.agents import AgentExecutorRequest as AgentExecutorRequest
    from temporal_workflows.agents import AgentExecutorResponse as AgentExecutorResponse

_AGENT_NAMES = ("AgentExecutor", "AgentExecutorRequest", "AgentExecutorResponse")
"""Agent Framework users import these from where ``WorkflowBuilder`` comes from; they need the ``agents`` extra,
so they are imported on first use (importing the graph API never imports Agent Framework)."""


def __getattr__(name: str) -> Any:
    if name not in _AGENT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from temporal_workflows import agents
    except ImportError as e:
        raise ImportError(
            f"temporal_workflows.{name} needs Agent Framework, which the 'agents' extra installs: "
            "pip install 'temporal-workflows[agents]' (agent-framework-core)",
            name=__name__,
        ) from e
    value = getattr(agents, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_AGENT_NAMES})


__all__ = [
    "AlreadyAnsweredError",
    "InvalidRunInputError",
    "ReducerError",
    "DeliveryForgottenError",
    "RunBusyError",
    "RunClosedError",
    "RunTooLargeError",
    "UnknownGraphError",
    "Case",
    "CheckpointId",
    "CheckpointNotFoundError",
    "CheckpointStorage",
    "CheckpointStorageError",
    "Default",
    "Executor",
    "ExecutorCompletedEvent",
    "ExecutorFailedError",
    "ExecutorFailedEvent",
    "ExecutorInvokedEvent",
    "ExecutorOptions",
    "FileCheckpointStorage",
    "HistoryCheckpointStorage",
    "FunctionExecutor",
    "GraphSignatureMismatchError",
    "GraphValidationError",
    "InMemoryCheckpointStorage",
    "SqliteCheckpointStorage",
    "InvalidResponseError",
    "NotSerializableError",
    "PayloadTooLargeError",
    "RequestInfoEvent",
    "RequestTimedOut",
    "RequestTimeoutError",
    "StateConflictError",
    "StateView",
    "SuperStepCompletedEvent",
    "SuperStepStartedEvent",
    "SuperstepLimitError",
    "UndeliverableMessageError",
    "UnknownRequestError",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowCheckpoint",
    "WorkflowContext",
    "WorkflowError",
    "WorkflowEvent",
    "WorkflowFailedEvent",
    "WorkflowOutputEvent",
    "WorkflowRunError",
    "WorkflowRunResult",
    "WorkflowRunState",
    "WorkflowStartedEvent",
    "WorkflowStatusEvent",
    "WorkflowViz",
    "WorkflowResetEvent",
    "WorkflowWarningEvent",
    "executor",
    "handler",
    "load_workflow",
    "register_type",
    "response_handler",
    "WorkflowErrorDetails",
    "WorkflowEventSource",
    "WorkflowIntermediateEvent",
    "register_checkpoint_type",
    "SubWorkflowRequestMessage",
    "SubWorkflowResponseMessage",
    "WorkflowExecutor",
    "LiveCommittedEvent",
    "LiveEvent",
    "LiveOmittedEvent",
    "StepProgressEvent",
    "StepRetryEvent",
]
