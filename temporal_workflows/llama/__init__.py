"""LlamaIndex Workflows' programming model on this engine, in process and on Temporal.

A LlamaIndex program runs here by changing only its imports: every name it
imports from ``workflows``, ``workflows.events``, ``workflows.context``,
``workflows.decorators``, ``workflows.retry_policy``, ``workflows.errors``,
``workflows.resource`` and ``workflows.handler`` is importable with the same
name from the submodule of the same name here (``temporal_workflows.llama.events``,
``.context``, ``.decorators``, ``.retry_policy``, ``.errors``, ``.resource``,
``.handler``). This module holds what ``workflows`` itself exports, the events
nearly every program uses, and the Temporal side::

    from temporal_workflows.llama import Workflow, step, Context, StartEvent, StopEvent

On Temporal, pass the workflow instance to ``TemporalWorkflowsPlugin([...])``
and start runs with :func:`start_run` (a :class:`LlamaRunHandle`), or run
LlamaIndex's own loop with :class:`TemporalRuntime`. How the model maps onto
the engine, and where it differs: ``docs/llama.md``; the full surface:
``docs/api.md``. Names this module exported before (the retry helpers,
errors, resources, the other events) still import from here for one release,
with a ``DeprecationWarning`` naming their submodule.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

from temporal_workflows.llama import context as _context
from temporal_workflows.llama import decorators as _decorators
from temporal_workflows.llama import errors as _errors
from temporal_workflows.llama import events as _events
from temporal_workflows.llama import handler as _handler
from temporal_workflows.llama import resource as _resource
from temporal_workflows.llama import retry_policy as _retry_policy
from temporal_workflows.llama.context import Context
from temporal_workflows.llama.decorators import catch_error, step
from temporal_workflows.llama.events import Event, HumanResponseEvent, InputRequiredEvent, StartEvent, StopEvent
from temporal_workflows.llama.workflow import Workflow

if TYPE_CHECKING:
    from temporal_workflows._llama_runtime._options import StepOptions as StepOptions
    from temporal_workflows._llama_runtime._runtime import TemporalRuntime
    from temporal_workflows.llama.temporal import LlamaRunHandle, get_run, start_run

retry_policy = _retry_policy.retry_policy
"""The ``@retry_policy`` decorator, as this module exported it before; it shadows the submodule of the same name as it
always did (import the submodule's names with ``from temporal_workflows.llama.retry_policy import ...``). It cannot
warn when read, so it stays, out of ``__all__``, until the other moved names go."""

_TEMPORAL = ("LlamaRunHandle", "get_run", "start_run")

_SUBMODULES: tuple[ModuleType, ...] = (
    _context,
    _decorators,
    _errors,
    _events,
    _handler,
    _resource,
    _retry_policy,
)

_MOVED: dict[str, ModuleType] = {
    name: module
    for module in _SUBMODULES
    for name in (
        "ContextSerdeError", "ContextStateError", "WorkflowCancelledByUser", "WorkflowConfigurationError",
        "WorkflowDone", "WorkflowRuntimeError", "WorkflowStepDoesNotExistError", "WorkflowTimeoutError",
        "WorkflowValidationError", "DictState", "InMemoryStateStore", "StateStore", "StepConfig",
        "CollectionReleaseEvent", "DictLikeModel", "EventType", "IdleReleasedEvent", "InternalDispatchEvent",
        "StepFailedEvent", "StepState", "StepStateChanged", "UnhandledEvent", "UnreconstructedException",
        "WorkflowCancelledEvent", "WorkflowFailedEvent", "WorkflowIdleEvent", "WorkflowTimedOutEvent",
        "WorkflowHandler", "Resource", "ResourceConfig", "ResourceDefinition", "ResourceManager",
        "ConstantDelayRetryPolicy", "ExponentialBackoffRetryPolicy", "RetryInfo", "RetryPolicy",
        "retry_all", "retry_always", "retry_any", "retry_if_exception", "retry_if_exception_cause_type",
        "retry_if_exception_message", "retry_if_exception_type", "retry_if_not_exception_message",
        "retry_if_not_exception_type", "retry_never", "retry_unless_exception_type",
        "stop_after_attempt", "stop_after_delay", "stop_all", "stop_any", "stop_before_delay", "stop_never",
        "wait_chain", "wait_combine", "wait_exponential", "wait_exponential_jitter", "wait_fixed",
        "wait_full_jitter", "wait_incrementing", "wait_none", "wait_random", "wait_random_exponential",
    )
    if name in module.__all__
}  # fmt: skip
"""Names this module exported before it kept to ``workflows``' own top level: each now imports from the
submodule that mirrors LlamaIndex's (still importable here for one release, with a ``DeprecationWarning``)."""


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
        from temporal_workflows._llama_runtime._runtime import TemporalRuntime

        globals()[name] = TemporalRuntime
        return TemporalRuntime
    if name == "StepOptions":  # TemporalRuntime(step_options=...)
        from temporal_workflows._llama_runtime._options import StepOptions as StepOptions

        globals()[name] = StepOptions
        return StepOptions
    module = _MOVED.get(name)
    if module is not None:
        warnings.warn(
            f"importing {name} from temporal_workflows.llama is deprecated: import it from {module.__name__} "
            f"(as from LlamaIndex's {module.__name__.replace('temporal_workflows.llama', 'workflows')}); "
            "the old import goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    # what LlamaIndex's `workflows` exports
    "Context",
    "Workflow",
    "catch_error",
    "step",
    # the events nearly every program uses (all of them: temporal_workflows.llama.events)
    "Event",
    "HumanResponseEvent",
    "InputRequiredEvent",
    "StartEvent",
    "StopEvent",
    # on Temporal
    "LlamaRunHandle",
    "TemporalRuntime",
    "get_run",
    "start_run",
]
