"""LlamaIndex ``workflows`` programs, unchanged, on Temporal: :class:`TemporalRuntime` (docs/llama-runtime.md).

A program keeps every line it has (``from workflows import Workflow, step,
Context, ...``) and gets the runtime, which runs LlamaIndex's own control loop
as Temporal workflow code, each step invocation an activity::

    from temporal_workflows.llama import TemporalRuntime

    wf = MyWorkflow(timeout=60, runtime=TemporalRuntime(worker=True))

The import-swap front end this module held before (its own ``Workflow``,
``Context``, ``step``, events, retry policies, ``start_run``, ...) was
retired: importing one of its names from here raises an error that says how
to move (change the imports back to ``workflows`` and add ``TemporalRuntime``).
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

    from temporal_workflows._llama_runtime._options import StepOptions
    from temporal_workflows._llama_runtime._temporal_runtime import TemporalRuntime

__all__ = ["StepOptions", "TemporalRuntime"]

_RETIRED_MESSAGE = (
    "{what} was part of the import-swap front end of temporal_workflows.llama, which was retired: LlamaIndex "
    "programs run unchanged on TemporalRuntime. Change your imports back to LlamaIndex's `workflows` (e.g. "
    "`from workflows import Workflow, step, Context` and `from workflows.events import StartEvent, StopEvent`) "
    "and add `from temporal_workflows.llama import TemporalRuntime` "
    "(`MyWorkflow(timeout=60, runtime=TemporalRuntime())`); see docs/llama-runtime.md"
)

_RETIRED_NAMES = frozenset(
    (
        # what this module exported
        "Context", "Workflow", "catch_error", "step", "Event", "HumanResponseEvent", "InputRequiredEvent",
        "StartEvent", "StopEvent", "LlamaRunHandle", "get_run", "start_run", "retry_policy",
        # what it still answered for one release, with a DeprecationWarning
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
)  # fmt: skip
"""Names the retired front end exported from this module."""

_RETIRED_MODULES = frozenset(
    f"{__name__}.{name}"
    for name in (
        "context", "decorators", "errors", "events", "handler", "resource", "retry_policy", "workflow", "temporal",
    )
)  # fmt: skip
"""Its submodules (each mirrored one of LlamaIndex's ``workflows`` modules, or held its Temporal client)."""


def __getattr__(name: str) -> Any:
    if name == "TemporalRuntime":
        # LlamaIndex's own `workflows` package (the `llama-runtime` extra) is needed only here.
        from temporal_workflows._llama_runtime._temporal_runtime import TemporalRuntime

        globals()[name] = TemporalRuntime
        return TemporalRuntime
    if name == "StepOptions":  # TemporalRuntime(step_options=StepOptions(...))
        from temporal_workflows._llama_runtime._options import StepOptions

        globals()[name] = StepOptions
        return StepOptions
    if name in _RETIRED_NAMES:
        # An ImportError, not an AttributeError: `from temporal_workflows.llama import Workflow` would replace an
        # AttributeError with its own "cannot import name", losing the way to move this message gives.
        raise ImportError(_RETIRED_MESSAGE.format(what=f"{__name__}.{name}"), name=__name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _RetiredModules(importlib.abc.MetaPathFinder):
    """Says how to move when a retired submodule is imported (``temporal_workflows.llama.events``, ...)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname in _RETIRED_MODULES:
            raise ImportError(_RETIRED_MESSAGE.format(what=f"module {fullname}"), name=fullname)
        return None


if not any(isinstance(f, _RetiredModules) for f in sys.meta_path):
    sys.meta_path.append(_RetiredModules())
