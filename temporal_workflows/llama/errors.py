"""LlamaIndex's workflow errors, with the same names as ``workflows.errors``.

They are plain exceptions (not this library's ``WorkflowError``), so code that
catches them keeps working unchanged; where a run on this engine fails for a
reason LlamaIndex has no name for (two steps writing one state key in a
superstep, a value that cannot be JSON on Temporal), the engine's own named
error is raised instead (``StateConflictError``, ``NotSerializableError``).
"""

from __future__ import annotations

__all__ = [
    "ContextSerdeError",
    "ContextStateError",
    "WorkflowCancelledByUser",
    "WorkflowConfigurationError",
    "WorkflowDone",
    "WorkflowRuntimeError",
    "WorkflowStepDoesNotExistError",
    "WorkflowTimeoutError",
    "WorkflowValidationError",
]


class WorkflowValidationError(Exception):
    """The workflow's steps or event graph are invalid (raised before the run starts)."""


class WorkflowTimeoutError(Exception):
    """The run exceeded ``Workflow(timeout=...)``."""


class WorkflowRuntimeError(Exception):
    """A step or a caller used the run wrongly (unknown step, an event a step does not accept, ...)."""


class WorkflowDone(Exception):
    """LlamaIndex's internal end-of-run signal (kept for imports)."""


class WorkflowCancelledByUser(Exception):
    """The run was cancelled (``await handler.cancel_run()``, or the Temporal run was cancelled)."""


class WorkflowStepDoesNotExistError(Exception):
    """A step name that is not in the workflow."""


class WorkflowConfigurationError(Exception):
    """The workflow class is misconfigured (no step takes a ``StartEvent``, two start event types, ...)."""


class ContextSerdeError(Exception):
    """A ``Context`` could not be serialized (``to_dict``) or restored (``from_dict``)."""


class ContextStateError(Exception):
    """A ``Context`` method was called in the wrong phase (before the run, outside a step, ...)."""
