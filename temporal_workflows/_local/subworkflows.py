"""Sub-workflows in process: a ``WorkflowExecutor``'s child runs on the same driver, inside the parent's step.

The planning (which child a step starts or resumes, in which order, what it
leaves in the parent's state) is ``_engine/subworkflows.py``, shared with the
Temporal host; this module supplies what differs in process: a child run is
the superstep driver over the child's own engine, with the in-process host
(so a child's own sub-workflows run the same way, nested), and it comes to
rest before the parent's step ends. The child's events stay with the child,
as in Agent Framework: the parent sees its outputs, intermediate outputs and requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from temporal_workflows._engine.driver import StepFailure, StepOutcome, SuperstepDriver
from temporal_workflows._engine.limits import max_payload_bytes
from temporal_workflows._engine.machine import Engine, PendingRequest, StepResult, StepTask
from temporal_workflows._engine.serde import Envelope, decode
from temporal_workflows._engine.subworkflows import (
    Activation,
    SubWorkflowOutcome,
    SubWorkflowSuperstep,
    deliver_responses,
    resume_engine,
    sub_workflow_outcome,
)
from temporal_workflows._graph.context import run_step
from temporal_workflows._graph.graph import Graph
from temporal_workflows._local.ordering import in_order

if TYPE_CHECKING:
    from temporal_workflows._local.runner import _GraphLocalHost

__all__ = ["activate", "run_with_sub_workflows"]


async def activate(
    parent: Graph, act: Activation, host_for: Callable[[Graph, str], _GraphLocalHost]
) -> SubWorkflowOutcome:
    """Run one child of ``parent`` to rest: a new one from its start message, or a waiting one with its answers.

    ``host_for(graph, run_id)`` is the child's host: the parent's kind, read as
    the parent is (it is given, not imported, so the in-process host and this
    module do not import each other).

    Raises:
        WorkflowRunError: the child's run failed (the parent's step fails with it).
        InvalidResponseError: a response does not validate against its request.
    """
    from temporal_workflows._graph.subworkflow import WorkflowExecutor

    ex = parent.executors[act.executor_id]
    assert isinstance(ex, WorkflowExecutor)
    child = ex.workflow.graph
    if act.snapshot is None:
        assert act.start is not None
        engine = Engine(child.topology)
        engine.start(act.start)
    else:
        engine = resume_engine(child.topology, act.snapshot)
    host = host_for(child, act.run_id)

    async def validate(request: PendingRequest, response: Envelope) -> Envelope:
        return child.validate_response(request, decode(response))

    ignored = await deliver_responses(engine, act.responses, now=host.now(), validate=validate)
    known = set(engine.pending_requests)
    intermediate: list[Envelope] = []
    driver = SuperstepDriver(
        engine, host, checkpoint_every=0, payload_limit=max_payload_bytes, intermediate=intermediate
    )
    async for _ in driver.run():
        pass  # the child's events stay with it; its outputs and requests are in the engine
    outcome = sub_workflow_outcome(
        engine, known, run_id=act.run_id, timestamp=datetime.now(UTC), intermediate=intermediate
    )
    outcome.ignored = ignored
    return outcome


async def run_with_sub_workflows(
    host: _GraphLocalHost, tasks: Sequence[StepTask], engine: Engine, after: Sequence[int | None] | None = None
) -> list[StepOutcome]:
    """The superstep's steps, those of sub-workflow executors running their children first (in task order)."""
    graph = host.runner.graph
    state = engine.state
    run_id = host.runner.run_id or ""
    sub_workflows = SubWorkflowSuperstep(
        graph.topology, tasks, state, run_key=run_id, future=asyncio.get_running_loop().create_future
    )

    async def run_sub_workflow(act: Activation) -> SubWorkflowOutcome:
        return await activate(graph, act, host.for_sub_workflow)

    async def report(task: StepTask) -> StepResult:
        return await run_step(graph, task, state, run_id=run_id, streaming=host.streaming)

    async def one(task: StepTask) -> StepOutcome:
        if not sub_workflows.owns(task):
            return await host._run_task(task, state)
        try:
            return await sub_workflows.run(task, run_sub_workflow, report)
        except Exception as e:
            return StepFailure.of(e)

    if after is not None:  # a sender's messages to one executor: one after another (_engine/order.py)
        return await in_order(tasks, after, one)
    return list(await asyncio.gather(*(one(t) for t in tasks)))
