"""Sub-workflows on Temporal: each activation of a child is a child workflow of the child graph.

A ``WorkflowExecutor``'s step (``_engine/subworkflows.py`` plans it, as in process)
starts a child workflow whose type is the child graph's name and whose id is
the child's run id (``<parent id>/<executor>/<superstep>.<index>``, the same
for every activation of one child; hashed where it would pass Temporal's
1,000-byte limit, ``_engine/ids.py``): it appears under its parent in the Web
UI, with its own history, steps and event stream. The child runs to rest
and completes with what it produced and, while it waits for responses, its
snapshot, which the parent keeps in its committed state. So no child
workflow runs while a child waits for a human, however many supersteps or
continue-as-news of the parent that takes, and the parent's checkpoints,
resets and forks hold its children; a response resumes the child as a new
activation under the same id. A cancelled parent cancels the running child
(the parent waits for it, as for its steps); a parent that is terminated or
times out takes its running children with it (parent close policy
``TERMINATE``: ``REQUEST_CANCEL`` left running a child that could not take
the cancel, one whose workflow task kept failing, say, and its descendants).
Both (the bounded id and the policy) come with patch ``PATCH_CHILD_START``.

Both sides are here: the parent's :func:`run_child`, and what a child run
does differently (:func:`resume_child`, :func:`deliver_to_child`,
:func:`child_result`), which ``GraphWorkflow`` calls when its input has a
``subrun``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.workflow import ParentClosePolicy

from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._engine.ids import bounded_id
from temporal_workflows._engine.limits import GUIDANCE, json_size
from temporal_workflows._engine.machine import Engine, PendingRequest, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._engine.subworkflows import (
    Activation,
    SubWorkflowOutcome,
    deliver_responses,
    resume_engine,
    sub_workflow_outcome,
)
from temporal_workflows._errors import RunTooLargeError
from temporal_workflows.temporal._failures import refuse
from temporal_workflows.temporal._protocol import FAILURE_INVALID_RESPONSE, RunInput, SubWorkflowInput, Validated, quote
from temporal_workflows.temporal._workflow.patches import PATCH_CHILD_START, PATCH_FIRST_COME, patched

if TYPE_CHECKING:
    from temporal_workflows.temporal._workflow.budget import TaskBudget

__all__ = [
    "carry_sub_workflow",
    "child_result",
    "deliver_to_child",
    "resume_child",
    "run_child",
    "sub_workflow_refusal",
]

_OUTCOME: TypeAdapter[SubWorkflowOutcome] = TypeAdapter(SubWorkflowOutcome)

Validate = Callable[[str, Envelope, PendingRequest | None], Awaitable[Validated]]


# -- the parent's side -------------------------------------------------------------------------


async def run_child(
    act: Activation,
    *,
    budget: TaskBudget,
    max_steps_in_flight: int | None = None,
    stream: bool | None = None,
    signature: str | None = None,
) -> SubWorkflowOutcome:
    """Run one activation of a child as a child workflow, to rest; its outcome.

    The child runs at most as many steps at once as its parent (``max_steps_in_flight``), and is read as
    its parent is (``stream``), and runs the child graph its parent's version was built with
    (``signature``, pinned with the parent's graph).

    Raises:
        ChildWorkflowError: the child failed (its own error is the cause: the
            parent's step fails with that error's type and message, as in process).
    """
    subrun = SubWorkflowInput(
        parent_id=workflow.info().workflow_id,
        executor_id=act.executor_id,
        snapshot=act.snapshot,
        responses=list(act.responses),
    )
    start = act.start
    inp = RunInput(
        message=start.data if start else None,
        message_type=start.type if start else None,
        max_steps_in_flight=max_steps_in_flight,
        subrun=subrun,
        stream=stream,
        graph_signature=signature,
    )
    size = json_size(inp)
    async with budget.lock:
        # The start command records the input in this workflow task.
        await budget.room(size)
        budget.charge(size)
    # The id within Temporal's limit however deep the nesting (the child's own children extend it). A
    # parent that closes while a child runs was terminated or timed out (a cancelled one cancels its
    # children and waits for them, as for its steps): the child closes with it, whatever it is doing.
    current = patched(PATCH_CHILD_START)
    handle = await workflow.start_child_workflow(
        act.graph,
        inp,
        id=bounded_id(act.run_id) if current else act.run_id,
        result_type=dict,
        parent_close_policy=ParentClosePolicy.TERMINATE if current else ParentClosePolicy.REQUEST_CANCEL,
    )
    result: dict[str, Any] = await handle
    return _OUTCOME.validate_python(result["subrun"])


# -- the child's side --------------------------------------------------------------------------


def sub_workflow_refusal(subrun: SubWorkflowInput) -> str:
    """Why a child refuses outside input: its parent gives it input, and holds it while it waits."""
    return (
        f"this run is a sub-workflow of executor {quote(subrun.executor_id)} in run {quote(subrun.parent_id)}; "
        "send messages and answer requests to the parent run"
    )


def resume_child(engine: Engine, subrun: SubWorkflowInput, topology: Topology) -> None:
    """Restore a waiting child from the snapshot its parent kept.

    Raises:
        GraphSignatureMismatchError: the child graph changed since the snapshot.
        WorkflowError: the snapshot is inconsistent with the graph.
    """
    assert subrun.snapshot is not None
    engine.restore(resume_engine(topology, subrun.snapshot).snapshot())


async def deliver_to_child(
    engine: Engine, subrun: SubWorkflowInput, *, now: float, validate: Validate
) -> tuple[set[str], list[str]]:
    """Deliver the child's responses, each validated first (a local activity), then time out its due requests.

    Returns the ids of the requests it then waits for (any other request
    pending when it comes to rest is new) and those of responses that found
    their request timed out.

    Raises:
        ApplicationError: a response does not validate (``InvalidResponseError``,
            the same message as in process): the child fails, and with it the parent's step.
        RequestTimeoutError: a due request was made with ``on_timeout="fail"``.
    """

    async def checked(request: PendingRequest, response: Envelope) -> Envelope:
        result = await validate(request.executor_id, response, request)
        if result.error is not None or result.value is None:
            raise refuse(result.error_type or FAILURE_INVALID_RESPONSE, result.error or "invalid response")
        return result.value

    input_first = patched(PATCH_FIRST_COME)
    ignored = await deliver_responses(engine, subrun.responses, now=now, validate=checked, input_first=input_first)
    return set(engine.pending_requests), ignored


def child_result(
    engine: Engine,
    known: set[str],
    ignored: list[str],
    *,
    run_id: str,
    timestamp: datetime,
    limit: int,
    intermediate: list[Envelope] | None = None,
) -> dict[str, Any]:
    """A child's result: its outcome (outputs, intermediate outputs, new requests, the snapshot while it
    waits), and little else.

    The parent's history records it, so it does not repeat the outputs
    outside the outcome.

    Raises:
        RunTooLargeError: the outcome passes the payload limit.
    """
    outcome = sub_workflow_outcome(engine, known, run_id=run_id, timestamp=timestamp, intermediate=intermediate or ())
    outcome.ignored = ignored
    size = json_size(outcome)
    if size > limit:
        raise RunTooLargeError(
            f"the sub-workflow run's outcome (its outputs, new requests and, while it waits, its state) is "
            f"{size:,} bytes as JSON, over the payload limit of {limit:,} bytes; {GUIDANCE}",
            superstep=engine.superstep,
        )
    return {"status": RunStatus.COMPLETED, "superstep": engine.superstep, "subrun": outcome}


def carry_sub_workflow(
    subrun: SubWorkflowInput | None, known: set[str], intermediate: list[Envelope] | None = None
) -> SubWorkflowInput | None:
    """What an activation that continues as new hands on: who it belongs to, what it waited for at first,
    and the intermediate outputs it has published so far."""
    if subrun is None:
        return None
    return dataclasses.replace(
        subrun, snapshot=None, responses=[], known=sorted(known), intermediate=list(intermediate or []) or None
    )
