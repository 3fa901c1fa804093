"""Library errors across the wire: one ``ApplicationError`` shape out, the same exception class back in.

A run on Temporal reports a failure as an ``ApplicationError`` whose ``type``
is the library error's class name (the ``FAILURE_*`` names in
``_protocol``), whose message is the error's own message (the type is not
repeated in it), and whose details are the error's attributes. The client
turns such a failure back into that class, so a user catches
``UnknownRequestError`` or ``StateConflictError`` whether the run is in
process or on Temporal.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.api.failure.v1 import Failure
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.converter import (
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadConverter,
)
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, FailureError

from temporal_workflows._engine.serde import validation_message
from temporal_workflows._errors import WorkflowError, failure_details, rebuild_error
from temporal_workflows.temporal._protocol import LEGACY_FAILURE_TYPES

__all__ = [
    "short_message",
    "MAX_CAUSE_CHAIN",
    "CycleSafeFailureConverter",
    "CycleSafeFailureConverterWithEncodedAttributes",
    "from_failure",
    "innermost",
    "library_error",
    "refuse",
    "refusal_retry_delay",
    "sever_cause_cycles",
    "to_failure",
]

REFUSAL_RETRY_LONGEST = timedelta(seconds=10)
"""The longest wait before an activity a worker refused for routing (it hosts another version of the
run's graph) is tried again; see :func:`refusal_retry_delay`."""

MAX_CAUSE_CHAIN = 32
"""Links of an error's cause chain a failure carries; the SDK converts the chain recursively."""


def sever_cause_cycles(error: BaseException, *, limit: int = MAX_CAUSE_CHAIN) -> BaseException:
    """Cut ``error``'s cause chain where it loops back on itself or grows past ``limit`` links; returns ``error``.

    The SDK turns an exception into a failure by following the chain Python
    prints (``__cause__``, else ``__context__`` unless suppressed), recursively
    and without a guard. ``raise e from e`` (``e.__cause__ is e``), or any
    longer loop of causes and contexts, then recurses until Python gives up and
    the SDK reports "maximum recursion depth exceeded" instead of the step's
    own error; a chain thousands of links long does the same. Cutting the link
    keeps what a reader needs, the error's own type and message and the first
    causes, the same as the in-process host reports them. Python's own
    traceback printing stops at a loop the same way.
    """
    seen = {id(error)}
    node = error
    for _ in range(limit):
        nxt = node.__cause__
        if nxt is None and not node.__suppress_context__:
            nxt = node.__context__
        if nxt is None:
            return error
        if id(nxt) in seen:
            break
        seen.add(id(nxt))
        node = nxt
    # ``__cause__ = None`` also sets ``__suppress_context__``: the chain ends at ``node``.
    node.__cause__ = None
    return error


class CycleSafeFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter, which first cuts a looping or very deep cause chain (:func:`sever_cause_cycles`).

    The plugin's data converters use it, so every error a worker reports (a
    step's, a reducer's, a checkpoint store's, a user's own activity's) reads
    as itself instead of as the SDK's recursion error.
    """

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        super().to_failure(sever_cause_cycles(exception), payload_converter, failure)


class CycleSafeFailureConverterWithEncodedAttributes(
    CycleSafeFailureConverter, DefaultFailureConverterWithEncodedAttributes
):
    """:class:`CycleSafeFailureConverter` moving messages and stack traces into encoded (encrypted) attributes."""


def short_message(e: BaseException, limit: int = 300) -> str:
    """An error message fit for a warning or a failure: one line, bounded, quoting no input values."""
    text = " ".join((validation_message(e) if isinstance(e, ValidationError) else str(e)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_failure(error: WorkflowError, *, non_retryable: bool = True) -> ApplicationError:
    """``error`` as the ``ApplicationError`` a workflow or activity raises."""
    sever_cause_cycles(error)
    return ApplicationError(str(error), failure_details(error), type=type(error).__name__, non_retryable=non_retryable)


def refuse(type_name: str, message: str, **details: Any) -> ApplicationError:
    """An update's refusal (or a run's failure) of a named type, for an error that has no library object."""
    return ApplicationError(message, details, type=type_name, non_retryable=True)


def innermost(e: BaseException) -> BaseException:
    """The failing side's own error, under the SDK's wrappers (activity, child, workflow, update failures).

    A local activity's non-retryable failure arrives unwrapped; this returns it as it is.
    """
    while isinstance(e, (WorkflowFailureError, WorkflowUpdateFailedError, ActivityError, ChildWorkflowError)):
        if e.cause is None:
            break
        e = e.cause
    return e


def library_error(e: BaseException) -> WorkflowError | None:
    """The library error a Temporal failure stands for (``None`` if it is not one of ours)."""
    cause = innermost(e)
    if not isinstance(cause, ApplicationError) or not cause.type:
        return None
    type_name = LEGACY_FAILURE_TYPES.get(cause.type, cause.type)
    details: dict[str, Any] = {}
    if cause.details and isinstance(cause.details[0], dict):
        details = cause.details[0]
    error = rebuild_error(type_name, cause.message, details)
    if error is not None:
        error.__cause__ = e
    return error


def from_failure(e: FailureError | WorkflowFailureError | WorkflowUpdateFailedError) -> BaseException:
    """What the client raises for a failed run or update: the library's error if it is one, else ``e``."""
    return library_error(e) or e


def refusal_retry_delay() -> timedelta:
    """When Temporal should try again an activity this worker refuses because it hosts another version of
    the run's graph: 1 s, doubling, at most :data:`REFUSAL_RETRY_LONGEST` (10 s).

    A refusal is routing, not a failure of the user's code, so its cadence is not the step's retry policy:
    under Temporal's default policy a run of refusals backs off to 100 s, and a step of a mixed fleet (a
    rolling deploy without Worker Versioning), whose attempts land on whichever worker polls first, could
    wait minutes with a worker of its graph idle beside it. At 10 s it finds that worker within a few
    intervals; the cost is one refused task per waiting activity every 10 s, and no history event (a retry
    is the server's). The refusal still counts as an attempt of the policy.
    """
    attempt = activity.info().attempt if activity.in_activity() else 1
    return min(REFUSAL_RETRY_LONGEST, timedelta(seconds=1 << min(max(attempt, 1) - 1, 8)))
