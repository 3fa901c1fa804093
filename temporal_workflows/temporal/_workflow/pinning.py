"""Which graph a run executes: the one its starter built, pinned on a worker that hosts it.

A run pins its graph's topology once, as its first activity, and replays read it from history, so its own
workflow code never changes under it. *Which* graph it pins is decided here:

* **The start input names a signature** (``RunInput.graph_signature``: every client that has the graph sends
  it, and a run carries its own across continue-as-new): the run pins that signature. It asks the worker
  holding its first workflow task first, in a local activity (no round trip: the usual case). A worker
  hosting another version of the graph (a mixed fleet, a rolling deploy) refuses; the run then asks in a
  regular activity, which any worker polling the task queue may take and only one hosting the signature
  completes: Temporal retries it, with backoff, while the others refuse it. Meanwhile the run's status
  says what it waits for. The workflow task itself never fails for it: this workflow's code is the same on
  every worker (it runs no user code), so whichever worker takes a task can carry the run; only the
  activities that run the graph's code need the right worker, and each of them checks the signature
  (``_activities/steps.py``: pinning, steps, validation, routing, reducers; an activity type a worker lacks
  is refused the same way).
* **No signature** (``temporal workflow start`` with plain JSON, or a client without the graph): the
  graph of the first worker that takes the run, as before; the status says so.

Runs recorded before ``PATCH_PIN_SIGNATURE`` pinned the first worker's graph whatever their input said.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from temporal_workflows._errors import GraphSignatureMismatchError
from temporal_workflows.temporal._failures import innermost, to_failure
from temporal_workflows.temporal._protocol import (
    ACTIVITY_PIN,
    ACTIVITY_TOPOLOGY,
    FAILURE_SIGNATURE_MISMATCH,
    FAILURE_UNKNOWN_GRAPH,
    LEGACY_FAILURE_TYPES,
    SIGNATURE_PREFIX,
    SIGNATURE_WAIT,
    SIGNATURE_WAIT_TEXT,
    PinInput,
)
from temporal_workflows.temporal._workflow.locals import execute_local_activity
from temporal_workflows.temporal._workflow.status import StatusBoard

__all__ = ["PIN_RETRY", "elsewhere", "local_first", "pin_topology", "refusal", "waiting_note"]

_T = TypeVar("_T")

PIN_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=10)
)
"""How the regular pinning activity is retried while workers of other versions refuse it: soon at first
(in a mixed fleet the next attempt often lands on a worker of the run's graph), then every 10 s, for
``SIGNATURE_WAIT`` in all. Each attempt lands on whichever worker of the queue polls first, so once a worker
of the run's graph has come the wait is a few of these intervals (half the attempts land on it in a fleet of
two versions): 10 s keeps that under a minute, where 30 s made it minutes. A retry adds no history event;
the cost is one refused task per waiting run every 10 s."""

_UNKNOWN_GRAPH = [FAILURE_UNKNOWN_GRAPH] + [k for k, v in LEGACY_FAILURE_TYPES.items() if v == FAILURE_UNKNOWN_GRAPH]


def refusal(e: BaseException) -> dict[str, Any] | None:
    """The details of a worker's refusal to run the graph's code for this run (it hosts another version, or
    lacks the activity type), or ``None`` when ``e`` is another failure."""
    cause = innermost(e)
    if isinstance(cause, ApplicationError) and cause.type == FAILURE_SIGNATURE_MISMATCH:
        details = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
        return dict(details)
    return None


def local_first(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` for a local activity that runs the graph's code: a refusal is not retried there (the same
    worker would refuse again); the caller runs it as a regular activity instead, which another worker takes."""
    kept = list(policy.non_retryable_error_types or ())
    if FAILURE_SIGNATURE_MISMATCH in kept:
        return policy
    return dataclasses.replace(policy, non_retryable_error_types=[*kept, FAILURE_SIGNATURE_MISMATCH])


def waiting_note(what: str, name: str, signature: str, worker_signature: str | None, whose: str = "the run's") -> str:
    """What the run's status says while ``what`` waits for a worker hosting its graph's signature."""
    seen = (
        f"the worker that took it hosts {worker_signature[:SIGNATURE_PREFIX]}…"
        if worker_signature
        else "the worker that took it does not host this graph"
    )
    return (
        f"{what} waits for a worker hosting graph {name!r} with signature {signature}… ({whose}); {seen}. "
        f"Another worker on the task queue takes it once one of that version polls (retried for up to "
        f"{SIGNATURE_WAIT_TEXT}); run such a worker, or turn on Worker Versioning (docs/deployment.md)"
    )


async def elsewhere(
    activity: str,
    arg: Any,
    result_type: type[_T],
    *,
    board: StatusBoard,
    note: str,
    summary: str,
) -> _T:
    """``activity`` as a regular activity, which only a worker hosting the run's graph completes (the others
    refuse it), retried for ``SIGNATURE_WAIT``; ``note`` is in the run's status meanwhile."""
    board.note(note)
    try:
        result: _T = await workflow.execute_activity(
            activity,
            arg,
            result_type=result_type,
            start_to_close_timeout=timedelta(seconds=30),
            schedule_to_close_timeout=SIGNATURE_WAIT,
            retry_policy=PIN_RETRY,
            summary=summary,
        )
    finally:
        board.unnote(note)
    return result


async def pin_topology(name: str, signature: str | None, board: StatusBoard, *, first_segment: bool) -> RawValue:
    """The run's pinned topology (a :class:`~temporal_workflows.temporal._protocol.Pinned` payload).

    Args:
        signature: The signature the run must execute, or ``None``: the first worker's graph.
        first_segment: The run's first execution (not a continue-as-new): says in the status how the graph
            was chosen when no signature was given.

    Raises:
        ApplicationError: ``UnknownGraphError`` (no signature: the worker hosts no such graph), or
            ``GraphSignatureMismatchError`` once no worker hosting ``signature`` took the pinning within
            ``SIGNATURE_WAIT``; non-retryable: the run fails, its workflow task does not.
    """
    if signature is None:
        raw: RawValue = await execute_local_activity(
            ACTIVITY_TOPOLOGY,
            name,
            result_type=RawValue,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=_UNKNOWN_GRAPH),
            summary=f"pin topology of {name}",
        )
        if first_segment:
            board.note(
                "this run's start input named no graph signature (started without the graph, e.g. by `temporal "
                "workflow start`): it runs the graph of the first worker that took it, shown as graph_signature"
            )
        return raw
    arg = PinInput(name, signature)
    try:
        local: RawValue = await execute_local_activity(
            ACTIVITY_PIN,
            arg,
            result_type=RawValue,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                maximum_attempts=3, non_retryable_error_types=[FAILURE_SIGNATURE_MISMATCH, *_UNKNOWN_GRAPH]
            ),
            summary=f"pin graph {name} {signature}",
        )
        return local
    except (ActivityError, ApplicationError) as e:  # a local activity's refusal arrives unwrapped
        details = refusal(e)
        if details is None:
            raise
        worker_signature = details.get("worker_signature")
    note = waiting_note(
        "the run",
        name,
        signature,
        worker_signature if isinstance(worker_signature, str) else None,
        "the graph its starter built",
    )
    workflow.set_current_details(note)
    try:
        return await elsewhere(
            ACTIVITY_PIN,
            arg,
            RawValue,
            board=board,
            note=note,
            summary=f"pin graph {name} {signature}… (waiting for a worker hosting it)",
        )
    except ActivityError:
        raise to_failure(
            GraphSignatureMismatchError(
                f"no worker hosting graph {name!r} with signature {signature}… (the graph the run's starter "
                f"built) took the run within {SIGNATURE_WAIT_TEXT}"
            )
        ) from None
