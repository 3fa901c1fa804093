"""Where a run of ``GraphWorkflow`` starts: its five starting points, chosen in one place.

One execution of the workflow starts its engine from the first of these its
input has:

1. ``carried.snapshot``: the engine a continue-as-new carried (history was long);
2. ``carried.start``: the start message a clean reset carried;
3. ``subrun.snapshot``: a sub-workflow's child resumed with its parent's answers;
4. ``fork_from``: a checkpoint of another run (a fork), loaded by local activity;
5. the start message (none for a keep-alive run started empty).

What it started from is named in the error if it cannot (a forged or corrupt
snapshot fails the run with ``InvalidRunInputError``, never the workflow task),
and decides whether the driver takes an entry checkpoint (new input only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import Engine, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import InvalidRunInputError, WorkflowError
from temporal_workflows.temporal._failures import short_message, to_failure
from temporal_workflows.temporal._protocol import MAX_ID_CHARS, Carried, RunInput, SubWorkflowInput, quote, too_long
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.checkpointing import Checkpoints
from temporal_workflows.temporal._workflow.children import resume_child

__all__ = ["StartingPoint", "start_engine"]


@dataclass
class StartingPoint:
    """What a run's engine started from.

    Attributes:
        source: ``"carried.snapshot"``, ``"carried.start"``, ``"subrun.snapshot"``,
            ``"fork_from: ..."`` or ``"message"``: named in errors.
        start: The run's start message, when this execution started from it
            (a reset later starts again from it).
        lineage: The run and checkpoint a fork started from.
    """

    source: str
    start: Envelope | None = None
    lineage: dict[str, Any] | None = None

    @property
    def new_input(self) -> bool:
        """Whether it is new input, not a restored snapshot: the driver checkpoints it before its first superstep."""
        return self.source in ("message", "carried.start")


async def start_engine(
    engine: Engine,
    inp: RunInput,
    carried: Carried | None,
    subrun: SubWorkflowInput | None,
    *,
    checkpoints: Checkpoints,
    budget: TaskBudget,
) -> StartingPoint:
    """Start ``engine`` from the first starting point ``inp`` has (see the module docstring).

    Raises:
        ApplicationError: ``InvalidRunInputError``, non-retryable, naming the
            starting point that could not be used.
    """
    topology = engine.topology
    point = StartingPoint("message")
    if carried is not None:
        try:
            _check_carried(carried, topology)
        except InvalidRunInputError as e:
            raise to_failure(e) from None
    try:
        if carried is not None:
            if carried.snapshot is not None:
                point.source = "carried.snapshot"
                engine.restore(carried.snapshot.to_snapshot())
            elif carried.start is not None:
                point.source = "carried.start"
                engine.start(carried.start)
        elif subrun is not None and subrun.snapshot is not None:
            point.source = "subrun.snapshot"
            resume_child(engine, subrun, topology)
        elif inp.fork_from is not None:
            fork = inp.fork_from
            cp = await checkpoints.load(fork.workflow_id, fork.checkpoint_id)
            budget.charge(json_size(cp))  # its local activity's marker records it in this task
            checkpoints.check_signature(cp, topology, fork.allow_signature_mismatch)
            point.source = f"fork_from: checkpoint {quote(fork.checkpoint_id)} of workflow {quote(fork.workflow_id)}"
            engine.restore(cp.to_snapshot())
            point.lineage = {"workflow_id": fork.workflow_id, "checkpoint_id": fork.checkpoint_id}
            checkpoints.restored(cp.checkpoint_id, base=False)
        elif not (inp.keep_alive and inp.message is None and inp.message_type is None):
            point.start = inp.envelope
            engine.start(point.start)
    except WorkflowError as e:
        error = InvalidRunInputError(f"the run cannot start from its input: {point.source}: {short_message(e, 1000)}")
        raise to_failure(error) from None
    return point


def _check_carried(carried: Carried, topology: Topology) -> None:
    """Refuse a ``carried`` start input no run of this graph could have handed over (the snapshot: the engine's)."""
    for i, item in enumerate(carried.inbox.items if carried.inbox else ()):
        where = f"carried.inbox.items[{i}]"
        # ('event': a send_event an execution of an older version carried; the inbox drops it with a warning)
        if item.kind not in ("respond", "send", "event"):
            raise InvalidRunInputError(f"{where}.kind must be 'respond' or 'send', not {quote(str(item.kind))}")
        error = too_long(f"{where}.key", item.key, MAX_ID_CHARS)
        if error is not None:
            raise InvalidRunInputError(error)
        if item.kind == "send" and item.key not in topology.executor_ids:
            raise InvalidRunInputError(
                f"{where} is a message for {quote(item.key)}, not an executor of graph {topology.name!r}"
            )
