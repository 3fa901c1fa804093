"""Running a superstep's steps and callable reducers as activities.

One activity per step, typed ``"<graph>.<executor>"`` and identified as
``"<superstep>.<index>.<executor>"`` (what the Web UI lists). At most
``max_steps_in_flight`` are scheduled at once (Temporal refuses a workflow
task that leaves more than 2,000 activities pending); results still come back
in task order. Committed state rides inline in step inputs while it is small;
otherwise steps read it from their worker's cache (filled by query), so a
large state is never copied into every activity input.

What one workflow task records is budgeted (:class:`TaskBudget`): steps whose
inputs would add up past it are scheduled in the next workflow task.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from pydantic_core import to_json
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from temporal_workflows._engine.driver import ReducerFailed, StepFailure, StepOutcome, StepsInterrupted
from temporal_workflows._engine.ids import bounded_id
from temporal_workflows._engine.machine import CommitPlan, Engine, Reduction, StepResult, StepTask, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._engine.subworkflows import Activation, SubWorkflowOutcome, SubWorkflowSuperstep
from temporal_workflows._errors import class_path, error_classes
from temporal_workflows.temporal._failures import innermost
from temporal_workflows.temporal._protocol import (
    ACTIVITY_REDUCE,
    FAILURE_SIGNATURE_MISMATCH,
    LEGACY_FAILURE_TYPES,
    MAX_STEPS_IN_FLIGHT,
    SIGNATURE_PREFIX,
    SIGNATURE_RETRY_DELAYS,
    SIGNATURE_WAIT,
    STEP_ERROR_CLASS,
    ReduceInput,
    StepInput,
    step_activity_name,
)
from temporal_workflows.temporal._wire import decode_step_result, encode_step_input
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.children import run_child
from temporal_workflows.temporal._workflow.locals import execute_local_activity
from temporal_workflows.temporal._workflow.options import activity_options
from temporal_workflows.temporal._workflow.patches import (
    PATCH_EVERY_FAILED_STEP,
    PATCH_FIRST_COME,
    PATCH_TASK_BUDGET,
    PATCH_WAIT_FOR_SIGNATURE,
    patched,
)

__all__ = ["INLINE_STATE_LIMIT", "PATCH_EVERY_FAILED_STEP", "PATCH_TASK_BUDGET", "StepRunner", "TaskBudget"]


INLINE_STATE_LIMIT = 2048
"""Committed state up to this many JSON bytes rides along in step inputs."""


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
    cause = innermost(e)
    inner = cause.cause if isinstance(cause, ApplicationError) and not cause.type else None
    if isinstance(inner, ApplicationError) and inner.type in error_classes():
        # The SDK's own wrapper around one of ours ("Failed decoding arguments": a step input kept by reference
        # whose stored copy is missing, StoredValueMissingError): the step failed with ours.
        cause = inner
    if isinstance(cause, ApplicationError):
        kind = cause.type or "ApplicationError"
        details = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
        kind = LEGACY_FAILURE_TYPES.get(kind, kind)
        # The library's own errors by their class (as in process); a user's, as the step activity named it.
        library = error_classes().get(kind)
        error_class = class_path(library) if library is not None else details.get(STEP_ERROR_CLASS)
        return StepFailure(
            kind,
            cause.message,
            error_class=error_class if isinstance(error_class, str) else None,
        )
    if isinstance(cause, TimeoutError):
        return StepFailure("TimeoutError", f"{cause.message} ({cause.type.name if cause.type else 'timeout'})")
    return StepFailure(type(cause).__name__, str(cause))


def _outcome(f: asyncio.Future[StepResult | None]) -> StepOutcome:
    if not f.done() or f.cancelled():
        return None  # a run recorded before every failed step was reported
    error = f.exception()
    if error is not None:
        return failure_of(error)
    return f.result()


class StepRunner:
    """Runs steps and reducers of one graph run as activities, and tracks the committed state they read."""

    def __init__(
        self,
        topology: Topology,
        step_options: dict[str, dict[str, Any]],
        *,
        epoch: int,
        budget: TaskBudget | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.topology = topology
        self.notice = notice  # says in the run's status what a step waits for
        self.step_options = step_options
        self.epoch = epoch
        self.budget = budget or TaskBudget()
        self.max_in_flight = MAX_STEPS_IN_FLIGHT
        self.streaming: bool | None = None
        """How the run is read (``RunInput.stream``), passed to every step (``ctx.is_streaming()``)."""
        self.invocation_kwargs: dict[str, Any] | None = None
        """The run's ``RunInput.invocation_kwargs``, passed to every step."""
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
        sub_workflows = None
        if SubWorkflowSuperstep.any_in(self.topology, tasks):
            # Sub-workflow executors' steps run their children as child workflows first (children.py).
            run_key = workflow.info().workflow_id + (f"@{self.epoch}" if self.epoch else "")
            loop = asyncio.get_running_loop()
            sub_workflows = SubWorkflowSuperstep(
                self.topology, tasks, engine.state, run_key=run_key, future=loop.create_future
            )
        running = [asyncio.ensure_future(self._run_step(t, inline, window, sub_workflows)) for t in tasks]
        # Counted as steps finish, so the conditions below cost O(1) however wide the superstep
        # (they are checked after every activation job, e.g. each of 5,000 activity results).
        finished = [0, 0]  # steps done, steps failed
        # Asked here by runs recorded before patches were asked at the start (``patches.py``): they have its
        # marker at this point of their history, so the call stays, though what it gated (a step ending the
        # run before the others finished) is gone with the front end that had such steps.
        patched(PATCH_FIRST_COME)

        def count(i: int, f: asyncio.Future[StepResult | None]) -> None:
            finished[0] += 1
            if not f.cancelled() and f.exception() is not None:
                finished[1] += 1

        for i, f in enumerate(running):
            f.add_done_callback(functools.partial(count, i))

        def settled() -> bool:
            return finished[0] == len(running)

        def failed() -> bool:
            return finished[1] > 0

        try:
            await workflow.wait_condition(lambda: settled() or failed() or interrupted())
            if not settled() and not interrupted() and patched(PATCH_EVERY_FAILED_STEP):
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
        outcomes = [_outcome(f) for f in running]
        self.in_flight = []
        return outcomes

    async def _cancel(self, running: Sequence[asyncio.Future[StepResult | None]]) -> None:
        for f in running:
            f.cancel()
        with contextlib.suppress(asyncio.CancelledError, ActivityError, ApplicationError):
            await asyncio.gather(*running, return_exceptions=True)
        self.in_flight = []

    async def _run_step(
        self,
        task: StepTask,
        inline: dict[str, Envelope] | None,
        window: asyncio.Semaphore,
        sub_workflows: SubWorkflowSuperstep | None = None,
    ) -> StepResult | None:
        if sub_workflows is not None and sub_workflows.owns(task):

            async def child(act: Activation) -> SubWorkflowOutcome:
                # A running child counts against the window like a step (Temporal also bounds pending children).
                async with window:
                    limit = self.max_in_flight if self.max_in_flight != MAX_STEPS_IN_FLIGHT else None
                    return await run_child(act, budget=self.budget, max_steps_in_flight=limit, stream=self.streaming)

            async def report(report_task: StepTask) -> StepResult:
                return await self._activity_step(report_task, inline, window)

            return await sub_workflows.run(task, child, report)
        return await self._activity_step(task, inline, window)

    async def _activity_step(
        self, task: StepTask, inline: dict[str, Envelope] | None, window: asyncio.Semaphore
    ) -> StepResult:
        name = self.topology.name or ""
        async with window:
            local, options = activity_options(self.step_options.get(task.executor_id, {}))
            signature = self.topology.signature_hash[:SIGNATURE_PREFIX]
            arg = encode_step_input(
                StepInput(
                    task, self.state_version, inline, self.epoch, signature, self.streaming, self.invocation_kwargs
                )
            )
            # "<superstep>.<index>.<executor>" is what the Web UI lists, so a step
            # needs no summary: one payload less to record and visit per step.
            activity_id = bounded_id(f"{task.superstep}.{task.index}.{task.executor_id}")
            activity_type = step_activity_name(name, task.executor_id)
            raw: dict[str, Any]
            budget = self.budget
            if local:
                # Its input is not recorded; its result is, in a marker, in the task it comes back in.
                raw = await execute_local_activity(
                    activity_type, arg, result_type=dict, activity_id=activity_id, **options
                )
                budget.charge(len(to_json(raw)))
            else:
                size = budget.size_of(arg)
                rounds = 0
                while True:
                    # Steps whose inputs would pass the budget together start in the next workflow task.
                    handle = await budget.start_activity(
                        size,
                        activity_type,
                        arg,
                        result_type=dict,
                        activity_id=activity_id if rounds == 0 else f"{activity_id}.{rounds}",
                        **options,
                    )
                    try:
                        raw = await handle
                        break
                    except ActivityError as e:
                        delay = self._signature_wait(e, task, rounds)
                        if delay is None:
                            raise
                    rounds += 1
                    await workflow.sleep(delay, summary=f"wait for a worker hosting {self.topology.name}'s graph")
        return decode_step_result(raw, task, self.topology.fan_in_groups)

    def _signature_wait(self, e: ActivityError, task: StepTask, rounds: int) -> timedelta | None:
        """How long to wait before scheduling again a step that only met workers of another graph signature.

        A deploy without Worker Versioning that replaces every worker leaves a
        waiting run no worker of its graph: its step is refused (retryably) by
        each new one. The run waits for one to come back (a rollback, or old
        workers kept for draining) for ``SIGNATURE_WAIT``, saying so in its
        status, rather than failing within seconds. ``None``: fail as before.
        """
        cause = innermost(e)
        if not isinstance(cause, ApplicationError) or cause.type != FAILURE_SIGNATURE_MISMATCH:
            return None
        if not patched(PATCH_WAIT_FOR_SIGNATURE):
            return None
        first, longest = SIGNATURE_RETRY_DELAYS

        def backoff(i: int) -> timedelta:
            return min(longest, first * (1 << min(i, 16)))

        if sum((backoff(i) for i in range(rounds)), timedelta()) >= SIGNATURE_WAIT:
            return None
        delay = backoff(rounds)
        if rounds == 0 and self.notice is not None:
            details = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
            self.notice(
                f"step {task.executor_id!r} of superstep {task.superstep} waits for a worker hosting graph "
                f"{self.topology.name!r} with signature {str(details.get('run_signature', '?'))[:16]}… (the "
                f"run's); the workers polling its task queue host signature "
                f"{str(details.get('worker_signature', '?'))[:16]}…. It is scheduled again, with backoff, for up "
                f"to {SIGNATURE_WAIT}; run such a worker, or turn on Worker Versioning (docs/deployment.md)"
            )
        return delay

    async def reduce(self, superstep: int, reduction: Reduction) -> Envelope:
        """Run a callable reducer (user code) in an activity.

        Raises:
            ReducerFailed: it raised (after its retries).
        """
        inp = ReduceInput(self.topology.name or "", reduction.key, reduction.committed, list(reduction.writes))
        size = len(to_json(inp))
        budget = self.budget
        try:
            handle = await budget.start_activity(
                size,
                ACTIVITY_REDUCE,
                inp,
                result_type=Envelope,
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"reduce {reduction.key!r} · superstep {superstep}",
            )
            result: Envelope = await handle
        except ActivityError as e:
            failure = failure_of(e)
            raise ReducerFailed(failure.error_type, failure.message) from None
        return result
