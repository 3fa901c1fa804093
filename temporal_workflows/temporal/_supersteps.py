"""Running a superstep's steps and callable reducers as activities.

One activity per step, typed ``"<graph>.<executor>"`` and identified as
``"<superstep>.<index>.<executor>"`` (what the Web UI lists). At most
``max_steps_in_flight`` are scheduled at once (Temporal refuses a workflow
task that leaves more than 2,000 activities pending); results still come back
in task order. Committed state rides inline in step inputs while it is small;
otherwise steps read it from their worker's cache (filled by query), so a
large state is never copied into every activity input.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from temporal_workflows._engine.driver import ReducerFailed, StepFailure, StepOutcome, StepsInterrupted
from temporal_workflows._engine.machine import CommitPlan, Engine, Reduction, StepResult, StepTask, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._options import activity_options
from temporal_workflows.temporal._protocol import (
    ACTIVITY_REDUCE,
    LEGACY_FAILURE_TYPES,
    MAX_STEPS_IN_FLIGHT,
    ReduceInput,
    StepInput,
    step_activity_name,
)
from temporal_workflows.temporal._wire import decode_step_result, encode_step_input

__all__ = ["INLINE_STATE_LIMIT", "PATCH_EVERY_FAILED_STEP", "StepRunner"]

INLINE_STATE_LIMIT = 2048
"""Committed state up to this many JSON bytes rides along in step inputs."""

PATCH_EVERY_FAILED_STEP = "report-every-failed-step"
"""Runs recorded before this failed at a superstep's first failed step; newer ones wait for every step."""


def _approx_json_size(value: Any) -> int:
    """Approximate JSON size without serializing (cheap, deterministic)."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, dict):
        return 2 + sum(len(k) + 4 + _approx_json_size(v) for k, v in value.items())
    if isinstance(value, list):
        return 2 + sum(1 + _approx_json_size(v) for v in value)
    return 8


def failure_of(e: BaseException) -> StepFailure:
    """A failed activity as the driver reports it: the user's error type and message, once each."""
    cause: BaseException = e
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        kind = cause.type or "ApplicationError"
        return StepFailure(LEGACY_FAILURE_TYPES.get(kind, kind), cause.message)
    if isinstance(cause, TimeoutError):
        return StepFailure("TimeoutError", f"{cause.message} ({cause.type.name if cause.type else 'timeout'})")
    return StepFailure(type(cause).__name__, str(cause))


class StepRunner:
    """Runs steps and reducers of one graph run as activities, and tracks the committed state they read."""

    def __init__(self, topology: Topology, step_options: dict[str, dict[str, Any]], *, epoch: int) -> None:
        self.topology = topology
        self.step_options = step_options
        self.epoch = epoch
        self.max_in_flight = MAX_STEPS_IN_FLIGHT
        self.state_version = "0"
        self.state_size = 0
        self.in_flight: list[str] = []

    def restored(self, engine: Engine) -> None:
        self.state_size = sum(_approx_json_size(v.data) for v in engine.state.values())

    def committed(self, plan: CommitPlan, engine: Engine) -> None:
        for key in plan.keys_written:
            value = engine.state.get(key)
            self.state_size += _approx_json_size(value.data) if value is not None else 0
        self.state_version = f"{workflow.info().run_id}:{engine.superstep}"
        self.in_flight = []

    async def run(
        self, tasks: Sequence[StepTask], engine: Engine, interrupted: Callable[[], bool]
    ) -> list[StepOutcome]:
        """One outcome per task, in task order.

        Raises:
            StepsInterrupted: ``interrupted()`` became true (a reset): the steps were cancelled.
        """
        self.in_flight = [t.executor_id for t in tasks]
        inline = dict(engine.state) if self.state_size <= INLINE_STATE_LIMIT else None
        window = asyncio.Semaphore(self.max_in_flight)
        running = [asyncio.ensure_future(self._run_step(t, inline, window)) for t in tasks]

        def settled() -> bool:
            return all(f.done() for f in running)

        def failed() -> bool:
            return any(f.done() and not f.cancelled() and f.exception() is not None for f in running)

        try:
            await workflow.wait_condition(lambda: settled() or failed() or interrupted())
            if not settled() and not interrupted() and workflow.patched(PATCH_EVERY_FAILED_STEP):
                # Every failed step of the superstep is reported, not only the first.
                await workflow.wait_condition(lambda: settled() or interrupted())
        except asyncio.CancelledError:
            # The run is cancelled: cancel its steps too, and end only once they have
            # stopped (heartbeating steps get to clean up), so nothing keeps running.
            await self._cancel(running)
            raise
        if interrupted() and not settled():
            await self._cancel(running)
            raise StepsInterrupted()
        outcomes: list[StepOutcome] = []
        for f in running:
            if not f.done() or f.cancelled():
                outcomes.append(None)  # a run recorded before every failed step was reported
            elif f.exception() is not None:
                outcomes.append(failure_of(f.exception()))  # type: ignore[arg-type]
            else:
                outcomes.append(f.result())
        self.in_flight = []
        return outcomes

    async def _cancel(self, running: Sequence[asyncio.Future[StepResult]]) -> None:
        for f in running:
            f.cancel()
        with contextlib.suppress(asyncio.CancelledError, ActivityError, ApplicationError):
            await asyncio.gather(*running, return_exceptions=True)
        self.in_flight = []

    async def _run_step(
        self, task: StepTask, inline: dict[str, Envelope] | None, window: asyncio.Semaphore
    ) -> StepResult:
        name = self.topology.name or ""
        async with window:
            local, options = activity_options(self.step_options.get(task.executor_id, {}))
            arg = encode_step_input(StepInput(task, self.state_version, inline, self.epoch))
            # "<superstep>.<index>.<executor>" is what the Web UI lists, so a step
            # needs no summary: one payload less to record and visit per step.
            activity_id = f"{task.superstep}.{task.index}.{task.executor_id}"
            activity_type = step_activity_name(name, task.executor_id)
            raw: dict[str, Any]
            if local:
                raw = await workflow.execute_local_activity(
                    activity_type, arg, result_type=dict, activity_id=activity_id, **options
                )
            else:
                raw = await workflow.execute_activity(
                    activity_type, arg, result_type=dict, activity_id=activity_id, **options
                )
        return decode_step_result(raw, task, self.topology.fan_in_groups)

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:
        """Run a callable reducer (user code) in an activity.

        Raises:
            ReducerFailed: it raised (after its retries).
        """
        try:
            result: Envelope = await workflow.execute_activity(
                ACTIVITY_REDUCE,
                ReduceInput(self.topology.name or "", reduction.key, reduction.committed, list(reduction.writes)),
                result_type=Envelope,
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"reduce {reduction.key!r} · superstep {superstep}",
            )
        except ActivityError as e:
            failure = failure_of(e)
            raise ReducerFailed(failure.error_type, failure.message) from None
        return result
