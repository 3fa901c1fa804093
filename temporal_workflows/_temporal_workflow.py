"""The Temporal workflow: the superstep loop as deterministic workflow code.

One dynamic workflow class serves every graph: the workflow type is the
graph's name, and the first thing a run does is a local activity that returns
the graph's topology, which records it in history. Replays read it from there,
so deploying a changed graph never changes a running execution.

This module runs no user code. Steps, callable reducers and routing all run
in activities; here there is only the engine's bookkeeping over JSON envelopes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ._engine import (
        EXECUTOR_STATE_PREFIX,
        Engine,
        StepResult,
        StepTask,
        Topology,
    )
    from ._errors import WorkflowError, WorkflowRunError
    from ._protocol import (
        ACTIVITY_REDUCE,
        ACTIVITY_TOPOLOGY,
        QUERY_COMMITTED_STATE,
        ReduceInput,
        RunInput,
        StateSnapshot,
        StepInput,
        step_activity_name,
    )
    from ._serde import Envelope
    from ._tracing import workflow_span

__all__ = ["GraphWorkflow", "INLINE_STATE_LIMIT"]

INLINE_STATE_LIMIT = 2048
"""Committed state up to this many JSON bytes rides along in step inputs.

Above it, steps read state from their worker's cache (filled by query), so a
large state is never copied into every activity input.
"""

DEFAULT_RETRY: dict[str, Any] = {"initial_interval": 1.0, "backoff_coefficient": 2.0, "maximum_attempts": 3}


def _retry_policy(spec: dict[str, Any] | None) -> RetryPolicy:
    spec = spec or DEFAULT_RETRY
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.get("initial_interval", 1.0)),
        backoff_coefficient=spec.get("backoff_coefficient", 2.0),
        maximum_interval=timedelta(seconds=spec["maximum_interval"]) if spec.get("maximum_interval") else None,
        maximum_attempts=int(spec.get("maximum_attempts") or 0),
        non_retryable_error_types=list(spec.get("non_retryable_error_types") or []) or None,
    )


def _json_size(value: Any) -> int:
    """Approximate JSON size without serializing (cheap, deterministic)."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, dict):
        return 2 + sum(len(k) + 4 + _json_size(v) for k, v in value.items())
    if isinstance(value, list):
        return 2 + sum(1 + _json_size(v) for v in value)
    return 8


def _failure(error: WorkflowRunError) -> ApplicationError:
    return ApplicationError(
        str(error),
        {"executor_id": error.executor_id, "superstep": error.superstep},
        type=type(error).__name__,
        non_retryable=True,
    )


@workflow.defn(dynamic=True)
class GraphWorkflow:
    """Runs one graph execution: pins the topology, then loops supersteps until idle."""

    def __init__(self) -> None:
        self._engine: Engine | None = None
        self._topology: Topology | None = None
        self._status = "starting"
        self._state_version = "0"
        self._state_size = 0
        self._in_flight: list[str] = []
        self._error: str | None = None

    @workflow.dynamic_config
    def dynamic_config(self) -> workflow.DynamicWorkflowConfig:
        # An engine error is a bug in the graph: fail the run, never retry the task for ever.
        return workflow.DynamicWorkflowConfig(failure_exception_types=[WorkflowError])

    # -- queries -----------------------------------------------------------------

    @workflow.query(name=QUERY_COMMITTED_STATE)
    def committed_state(self) -> StateSnapshot:
        engine = self._engine
        return StateSnapshot(self._state_version, dict(engine.state) if engine else {})

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        """Where the run is: status, superstep, in-flight executors, outputs so far."""
        engine = self._engine
        return {
            "status": self._status,
            "superstep": engine.superstep if engine else 0,
            "in_flight": list(self._in_flight),
            "pending_requests": len(engine.pending_requests) if engine else 0,
            "outputs": [o.value.data for o in engine.outputs] if engine else [],
            "error": self._error,
        }

    @workflow.query(name="state")
    def state(self) -> dict[str, Any]:
        """Committed shared state as JSON."""
        engine = self._engine
        if engine is None:
            return {}
        return {k: v.data for k, v in engine.state.items() if not k.startswith(EXECUTOR_STATE_PREFIX)}

    # -- the run -----------------------------------------------------------------

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> dict[str, Any]:
        name = workflow.info().workflow_type
        inp = RunInput()
        if args:
            inp = workflow.payload_converter().from_payload(args[0].payload, RunInput)
        topology: Topology = await workflow.execute_local_activity(
            ACTIVITY_TOPOLOGY,
            name,
            result_type=Topology,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["UnknownGraph"]),
            summary=f"pin topology of {name}",
        )
        self._topology = topology
        engine = Engine(topology)
        self._engine = engine
        engine.start(Envelope(inp.message_type, inp.message))
        self._status = "running"
        try:
            while engine.has_work():
                await self._superstep(name, engine)
        except WorkflowRunError as e:
            self._status = "failed"
            self._error = str(e)
            raise _failure(e) from None
        self._status = "completed"
        workflow.set_current_details(f"completed after {engine.superstep} supersteps")
        return {
            "outputs": [o.value.data for o in engine.outputs],
            "output_types": [o.value.type for o in engine.outputs],
            "superstep": engine.superstep,
            "status": "completed",
        }

    async def _superstep(self, name: str, engine: Engine) -> None:
        tasks = engine.begin_superstep()
        step = tasks[0].superstep
        attributes = {
            "temporal_workflows.graph": name,
            "temporal_workflows.superstep": step,
            "temporal_workflows.executor_ids": [t.executor_id for t in tasks],
            "temporal_workflows.workflow_id": workflow.info().workflow_id,
        }
        # Steps started inside this span are its children (the context rides in
        # the activity headers), so a trace reads run → superstep → step.
        with workflow_span(f"superstep {step}", attributes):
            await self._run_superstep(name, engine, tasks, step)

    async def _run_superstep(self, name: str, engine: Engine, tasks: list[StepTask], step: int) -> None:
        self._in_flight = [t.executor_id for t in tasks]
        workflow.set_current_details(f"superstep {step}: running {', '.join(self._in_flight)}")
        inline = dict(engine.state) if self._state_size <= INLINE_STATE_LIMIT else None
        try:
            results = await asyncio.gather(*(self._run_step(name, t, inline) for t in tasks))
        except _StepFailed as e:
            engine.abort_superstep()
            raise WorkflowRunError(
                f"executor {e.task.executor_id!r} failed in superstep {step}: {e.detail}",
                superstep=step,
                executor_id=e.task.executor_id,
            ) from None
        try:
            plan = engine.prepare_commit(list(results))
        except WorkflowRunError:
            engine.abort_superstep()
            raise
        reduced: dict[str, Envelope] = {}
        for r in plan.reductions:
            reduced[r.key] = await workflow.execute_activity(
                ACTIVITY_REDUCE,
                ReduceInput(name, r.key, r.committed, list(r.writes)),
                result_type=Envelope,
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"reduce {r.key!r} · superstep {step}",
            )
        engine.apply_commit(plan, reduced)
        for key in plan.keys_written:
            value = engine.state.get(key)
            self._state_size += _json_size(value.data) if value is not None else 0
        self._state_version = f"{workflow.info().run_id}:{engine.superstep}"
        self._in_flight = []

    async def _run_step(self, name: str, task: StepTask, inline: dict[str, Envelope] | None) -> StepResult:
        assert self._topology is not None
        opts = self._topology.executor_options.get(task.executor_id, {})
        arg = StepInput(name, task, workflow.info().workflow_id, self._state_version, inline)
        common: dict[str, Any] = {
            "result_type": StepResult,
            "start_to_close_timeout": timedelta(seconds=opts.get("start_to_close_timeout") or 300),
            "retry_policy": _retry_policy(opts.get("retry_policy")),
            "activity_id": f"{task.superstep}.{task.index}.{task.executor_id}",
            "summary": f"{task.executor_id} · superstep {task.superstep}",
        }
        activity_type = step_activity_name(name, task.executor_id)
        try:
            result: StepResult
            if opts.get("local"):
                result = await workflow.execute_local_activity(activity_type, arg, **common)
                return result
            hb = opts.get("heartbeat_timeout")
            result = await workflow.execute_activity(
                activity_type,
                arg,
                task_queue=opts.get("task_queue"),
                heartbeat_timeout=timedelta(seconds=hb) if hb else None,
                **common,
            )
            return result
        except ActivityError as e:
            cause = e.cause
            detail = str(cause) if cause is not None else str(e)
            if isinstance(cause, ApplicationError) and cause.type:
                detail = f"{cause.type}: {detail}"
            raise _StepFailed(task, detail) from e


class _StepFailed(Exception):
    def __init__(self, task: StepTask, detail: str) -> None:
        super().__init__(detail)
        self.task = task
        self.detail = detail
