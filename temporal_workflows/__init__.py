"""Durable, graph-shaped agent workflows on Temporal.

Define a graph of executors joined by edges (Agent Framework's API), run it in
process for tests and notebooks, and host the same graph durably on Temporal.
"""

from ._builder import WorkflowBuilder
from ._checkpoint import (
    CheckpointId,
    CheckpointStorage,
    FileCheckpointStorage,
    HistoryCheckpointStorage,
    InMemoryCheckpointStorage,
    WorkflowCheckpoint,
)
from ._checkpoint_sqlite import SqliteCheckpointStorage
from ._context import StateView, WorkflowContext
from ._edges import Case, Default
from ._errors import (
    CheckpointNotFoundError,
    CheckpointStorageError,
    ExecutorFailedError,
    GraphSignatureMismatchError,
    GraphValidationError,
    InvalidResponseError,
    NotSerializableError,
    PayloadTooLargeError,
    RequestTimeoutError,
    StateConflictError,
    SuperstepLimitError,
    UndeliverableMessageError,
    UnknownRequestError,
    WorkflowError,
    WorkflowRunError,
)
from ._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowRunResult,
    WorkflowRunState,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
    WorkflowWarningEvent,
)
from ._executor import Executor, ExecutorOptions, FunctionExecutor, executor, handler, response_handler
from ._requests import RequestTimedOut
from ._serde import register_type
from ._viz import WorkflowViz
from ._workflow import Workflow, load_workflow

__all__ = [
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
]
