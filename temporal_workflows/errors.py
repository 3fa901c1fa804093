"""Every named error the library raises, the same in process and on Temporal.

    from temporal_workflows.errors import StateConflictError, WorkflowError

All derive from :class:`WorkflowError`; those that end a run derive from
:class:`WorkflowRunError`. On Temporal a run's failure comes back from
``RunHandle`` as the same class with the same message, so one ``except``
serves the in-process and Temporal hosts. The classes live in a private module because their class
paths are type keys in stored data; this module is where users import them.
"""

from __future__ import annotations

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
    RunInProgressError,
    RunTooLargeError,
    ScheduleError,
    ScheduleNotFoundError,
    StateConflictError,
    StoredValueMissingError,
    SuperstepLimitError,
    UndeliverableMessageError,
    UnknownGraphError,
    UnknownRequestError,
    WorkerVersionNotReadyError,
    WorkflowError,
    WorkflowRunError,
)

__all__ = [
    "AlreadyAnsweredError",
    "CheckpointNotFoundError",
    "CheckpointStorageError",
    "DeliveryForgottenError",
    "ExecutorFailedError",
    "GraphSignatureMismatchError",
    "GraphValidationError",
    "InvalidResponseError",
    "InvalidRunInputError",
    "NotSerializableError",
    "PayloadTooLargeError",
    "ReducerError",
    "RequestTimeoutError",
    "RunBusyError",
    "RunClosedError",
    "RunInProgressError",
    "RunTooLargeError",
    "ScheduleError",
    "ScheduleNotFoundError",
    "StateConflictError",
    "StoredValueMissingError",
    "SuperstepLimitError",
    "UndeliverableMessageError",
    "UnknownGraphError",
    "UnknownRequestError",
    "WorkerVersionNotReadyError",
    "WorkflowError",
    "WorkflowRunError",
]
