"""How an executor's steps run as Temporal activities: ``ExecutorOptions`` → activity options, in one place.

``ExecutorOptions`` (the graph API) says what a user wants; this module is
the only place that turns it into the SDK's activity options, and holds every
default. What differs from the defaults is pinned in each run's history by the
topology activity (``Pinned.step_options``), so a deploy that changes an
executor's options does not change a running execution's steps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from temporal_workflows._graph.executor import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_RETRY_POLICY,
    DEFAULT_START_TO_CLOSE_TIMEOUT,
    ExecutorOptions,
)
from temporal_workflows.temporal._workflow.patches import PATCH_DEFAULT_HEARTBEAT, patched

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "DEFAULT_RETRY_POLICY",
    "DEFAULT_START_TO_CLOSE_TIMEOUT",
    "PATCH_DEFAULT_HEARTBEAT",
    "activity_options",
    "step_options",
]


def _retry_json(policy: RetryPolicy) -> dict[str, Any]:
    return {
        "initial_interval": policy.initial_interval.total_seconds(),
        "backoff_coefficient": policy.backoff_coefficient,
        "maximum_interval": policy.maximum_interval.total_seconds() if policy.maximum_interval else None,
        "maximum_attempts": policy.maximum_attempts,
        "non_retryable_error_types": list(policy.non_retryable_error_types or []) or None,
    }


def step_options(options: ExecutorOptions) -> dict[str, Any]:
    """What differs from the defaults, as JSON (what a run pins)."""
    spec: dict[str, Any] = {}
    if options.start_to_close_timeout != DEFAULT_START_TO_CLOSE_TIMEOUT:
        spec["start_to_close_timeout"] = options.start_to_close_timeout.total_seconds()
    if options.heartbeat_timeout != DEFAULT_HEARTBEAT_TIMEOUT:
        # 0 (from None or timedelta(0)): no heartbeat timeout, no automatic heartbeats.
        spec["heartbeat_timeout"] = options.heartbeat_timeout.total_seconds() if options.heartbeat_timeout else 0.0
    if options.task_queue:
        spec["task_queue"] = options.task_queue
    if options.local:
        spec["local"] = True
    if options.retry_policy is not None:
        spec["retry_policy"] = _retry_json(options.retry_policy)
    if options.concurrent:
        spec["concurrent"] = True  # not an activity option: which steps wait for which (_engine/order.py)
    return spec


def _retry_policy(spec: dict[str, Any] | None) -> RetryPolicy:
    if not spec:
        return DEFAULT_RETRY_POLICY
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.get("initial_interval", 1.0)),
        backoff_coefficient=spec.get("backoff_coefficient", 2.0),
        maximum_interval=timedelta(seconds=spec["maximum_interval"]) if spec.get("maximum_interval") else None,
        maximum_attempts=int(spec.get("maximum_attempts") or 0),
        non_retryable_error_types=list(spec.get("non_retryable_error_types") or []) or None,
    )


def _heartbeat_timeout(spec: dict[str, Any]) -> timedelta | None:
    """A step's heartbeat timeout: its executor's own (0: none), else the default, unless its run predates it."""
    if "heartbeat_timeout" in spec:
        seconds = spec["heartbeat_timeout"]
        return timedelta(seconds=seconds) if seconds else None
    if workflow.in_workflow() and not patched(PATCH_DEFAULT_HEARTBEAT):
        return None  # a run recorded before the default: replay it as it ran
    return DEFAULT_HEARTBEAT_TIMEOUT


def activity_options(spec: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """``(local, options)``: keyword arguments for ``execute_activity`` (or ``execute_local_activity``).

    Every non-local step has a heartbeat timeout (:data:`DEFAULT_HEARTBEAT_TIMEOUT`
    unless its executor sets one), and the step activity heartbeats while the
    handler runs: a dead worker is noticed within the timeout, and a cancel
    reaches the handler as ``asyncio.CancelledError`` at its next ``await``.
    So a cancel (or a reset) waits for the step to stop, letting it clean up.
    That wait is bounded by the heartbeat timeout, not the step: once the
    cancel has reached it, the automatic heartbeats stop, so a step that
    ignores the cancel (or blocks the event loop and never sees it) times out
    on the server within the heartbeat timeout, and the cancel completes
    (only heartbeats the handler sends itself, ``ctx.heartbeat()``, keep it
    alive longer). A step with heartbeats turned off (``heartbeat_timeout=0``)
    cannot be told of a cancel unless it heartbeats itself, so its cancel is
    only tried: the run does not wait for it.
    """
    common: dict[str, Any] = {
        "start_to_close_timeout": timedelta(seconds=spec["start_to_close_timeout"])
        if spec.get("start_to_close_timeout")
        else DEFAULT_START_TO_CLOSE_TIMEOUT,
        "retry_policy": _retry_policy(spec.get("retry_policy")),
    }
    if spec.get("local"):
        return True, common
    hb = _heartbeat_timeout(spec)
    common.update(
        task_queue=spec.get("task_queue"),
        heartbeat_timeout=hb,
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        if hb
        else workflow.ActivityCancellationType.TRY_CANCEL,
    )
    return False, common
