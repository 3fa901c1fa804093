"""LlamaIndex Workflows' programming model on this engine, in process and on Temporal.

Everything a LlamaIndex program imports from ``workflows``,
``workflows.events``, ``workflows.context``, ``workflows.decorators``,
``workflows.retry_policy``, ``workflows.errors`` and ``workflows.resource``
is importable from here with the same names, so a program runs in process
by changing only its imports::

    from temporal_workflows.llama import Workflow, step, Context, StartEvent, StopEvent

The submodules mirror LlamaIndex's (``temporal_workflows.llama.events``,
``.context``, ``.decorators``, ``.retry_policy``, ``.errors``, ``.resource``).
On Temporal, pass the workflow instance to ``TemporalWorkflowsPlugin([...])``
and start runs with :func:`start_run` (a :class:`LlamaRunHandle`). How the
model maps onto the engine, and where it differs: ``docs/llama.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporal_workflows.llama.context import Context, DictState, InMemoryStateStore, StateStore
from temporal_workflows.llama.decorators import StepConfig, catch_error, step
from temporal_workflows.llama.errors import (
    ContextSerdeError,
    ContextStateError,
    WorkflowCancelledByUser,
    WorkflowConfigurationError,
    WorkflowDone,
    WorkflowRuntimeError,
    WorkflowStepDoesNotExistError,
    WorkflowTimeoutError,
    WorkflowValidationError,
)
from temporal_workflows.llama.events import (
    CollectionReleaseEvent,
    DictLikeModel,
    Event,
    EventType,
    HumanResponseEvent,
    IdleReleasedEvent,
    InputRequiredEvent,
    InternalDispatchEvent,
    StartEvent,
    StepFailedEvent,
    StepState,
    StepStateChanged,
    StopEvent,
    UnhandledEvent,
    UnreconstructedException,
    WorkflowCancelledEvent,
    WorkflowFailedEvent,
    WorkflowIdleEvent,
    WorkflowTimedOutEvent,
)
from temporal_workflows.llama.handler import WorkflowHandler
from temporal_workflows.llama.resource import Resource, ResourceConfig, ResourceDefinition, ResourceManager
from temporal_workflows.llama.retry_policy import (
    ConstantDelayRetryPolicy,
    ExponentialBackoffRetryPolicy,
    RetryInfo,
    RetryPolicy,
    retry_all,
    retry_always,
    retry_any,
    retry_if_exception,
    retry_if_exception_cause_type,
    retry_if_exception_message,
    retry_if_exception_type,
    retry_if_not_exception_message,
    retry_if_not_exception_type,
    retry_never,
    retry_policy,
    retry_unless_exception_type,
    stop_after_attempt,
    stop_after_delay,
    stop_all,
    stop_any,
    stop_before_delay,
    stop_never,
    wait_chain,
    wait_combine,
    wait_exponential,
    wait_exponential_jitter,
    wait_fixed,
    wait_full_jitter,
    wait_incrementing,
    wait_none,
    wait_random,
    wait_random_exponential,
)
from temporal_workflows.llama.workflow import Workflow

if TYPE_CHECKING:
    from temporal_workflows.llama._runtime_temporal import TemporalRuntime
    from temporal_workflows.llama.temporal import LlamaRunHandle, get_run, start_run

_TEMPORAL = ("LlamaRunHandle", "get_run", "start_run")


def __getattr__(name: str) -> Any:
    # The Temporal client side is imported on first use: a notebook running workflows
    # in process never loads the client.
    if name in _TEMPORAL:
        from temporal_workflows.llama import temporal

        value = getattr(temporal, name)
        globals()[name] = value
        return value
    if name == "TemporalRuntime":
        # LlamaIndex's own `workflows` package (the `llama-runtime` extra) is needed only here.
        from temporal_workflows.llama._runtime_temporal import TemporalRuntime

        globals()[name] = TemporalRuntime
        return TemporalRuntime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CollectionReleaseEvent",
    "ConstantDelayRetryPolicy",
    "Context",
    "ContextSerdeError",
    "ContextStateError",
    "DictLikeModel",
    "DictState",
    "Event",
    "EventType",
    "ExponentialBackoffRetryPolicy",
    "HumanResponseEvent",
    "IdleReleasedEvent",
    "InMemoryStateStore",
    "InputRequiredEvent",
    "InternalDispatchEvent",
    "LlamaRunHandle",
    "Resource",
    "ResourceConfig",
    "ResourceDefinition",
    "ResourceManager",
    "RetryInfo",
    "RetryPolicy",
    "StartEvent",
    "StateStore",
    "StepConfig",
    "StepFailedEvent",
    "StepState",
    "StepStateChanged",
    "StopEvent",
    "TemporalRuntime",
    "UnhandledEvent",
    "UnreconstructedException",
    "Workflow",
    "WorkflowCancelledByUser",
    "WorkflowCancelledEvent",
    "WorkflowConfigurationError",
    "WorkflowDone",
    "WorkflowFailedEvent",
    "WorkflowHandler",
    "WorkflowIdleEvent",
    "WorkflowRuntimeError",
    "WorkflowStepDoesNotExistError",
    "WorkflowTimedOutEvent",
    "WorkflowTimeoutError",
    "WorkflowValidationError",
    "catch_error",
    "get_run",
    "retry_all",
    "retry_always",
    "retry_any",
    "retry_if_exception",
    "retry_if_exception_cause_type",
    "retry_if_exception_message",
    "retry_if_exception_type",
    "retry_if_not_exception_message",
    "retry_if_not_exception_type",
    "retry_never",
    "retry_policy",
    "retry_unless_exception_type",
    "start_run",
    "step",
    "stop_after_attempt",
    "stop_after_delay",
    "stop_all",
    "stop_any",
    "stop_before_delay",
    "stop_never",
    "wait_chain",
    "wait_combine",
    "wait_exponential",
    "wait_exponential_jitter",
    "wait_fixed",
    "wait_full_jitter",
    "wait_incrementing",
    "wait_none",
    "wait_random",
    "wait_random_exponential",
]
