"""What every handler of ``GraphWorkflow`` reads, and the checks they share.

The workflow's signal, update and query handlers live in mixins (``queries.py``,
``handlers.py``, ``controls.py``) that the SDK collects from ``GraphWorkflow``'s
bases; this base declares the run's parts they read (one ``RunParts``, which
``GraphWorkflow.__init__`` fills) and the checks they share: is the run open, is it busy. Outside
input is checked, accepted and taken by the run's ``Admission`` (``admission.py``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._engine.machine import (
    Engine,
    Topology,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._graph.shape import GraphShape
from temporal_workflows.temporal._failures import refuse, short_message
from temporal_workflows.temporal._protocol import (
    FAILURE_RUN_BUSY,
    FAILURE_RUN_CLOSED,
    SIGNATURE_PREFIX,
    Carried,
    RunInput,
    SubWorkflowInput,
)
from temporal_workflows.temporal._workflow.admission import Admission
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.checkpointing import Checkpoints
from temporal_workflows.temporal._workflow.children import sub_workflow_refusal
from temporal_workflows.temporal._workflow.continuation import Continuation
from temporal_workflows.temporal._workflow.locals import LocalActivities
from temporal_workflows.temporal._workflow.pacing import ReaderPace
from temporal_workflows.temporal._workflow.patches import (
    RunPatches,
)
from temporal_workflows.temporal._workflow.status import StatusBoard
from temporal_workflows.temporal._workflow.supersteps import StepRunner

__all__ = ["HandlerBase", "RunParts"]


_T = TypeVar("_T")


_NO_ARGUMENT = RawValue(Payload(metadata={"encoding": b"binary/null"}))
"""Default of signals whose argument is optional (``checkpoint``, ``reset``)."""


def _is_null(raw: RawValue) -> bool:
    encoding = raw.payload.metadata.get("encoding")
    return encoding == b"binary/null" or (encoding == b"json/plain" and raw.payload.data.strip() == b"null")


class RunParts:
    """The run's parts its handlers share, in one object (``GraphWorkflow.parts``).

    ``GraphWorkflow.__init__`` makes each (the first workflow task fills in
    what pinning the graph learns: ``topology``, ``engine``, ``steps``...);
    the handler mixins read them here, so what they share is declared once.
    """

    input: RunInput
    input_error: str | None
    """Why the start input is not a ``RunInput`` (the run then fails in ``run()``)."""
    carried: Carried | None
    """What the execution before handed over when it continued as new."""
    board: StatusBoard
    admission: Admission
    checkpoints: Checkpoints
    continuation: Continuation
    budget: TaskBudget
    engine: Engine | None
    topology: Topology | None
    signature_from: str | None
    """How the run's graph was chosen: ``"starter"`` (its start input's signature) or ``"first worker"``."""
    shape: GraphShape | None
    shape_note: str | None
    steps: StepRunner | None
    keep_alive: bool
    closing: bool
    close_waits: bool
    """A closing run waits for its pending requests' answers (asked when the close comes, ``controls.py``)."""
    epoch: int
    segment: int
    start_env: Envelope | None
    lineage: dict[str, Any] | None
    sub_workflow: SubWorkflowInput | None
    """A sub-workflow's child: it runs to rest and refuses outside input (``children.py``)."""
    payload_limit: int
    state_text: tuple[str, str] | None
    """``committed_state_page``'s text, and the version it was made for."""
    pace: ReaderPace
    """The reader a streamed call of the durable twin paces the run by (``pacing.py``)."""


class HandlerBase:
    """The run's parts the handlers read, and the checks they share."""

    parts: RunParts
    # Read by the SDK helpers through ``workflow.instance()`` (``patches.patched``, ``locals.execute_local_activity``).
    patches: RunPatches
    locals: LocalActivities

    def _signal_arg(self, name: str, raw: RawValue, typ: type[_T]) -> tuple[_T | None, bool]:
        """``(value, ok)``; ``(None, True)`` for an omitted or null argument of an optional one."""
        if raw is _NO_ARGUMENT or _is_null(raw):
            return None, True
        try:
            value: _T = workflow.payload_converter().from_payload(raw.payload, typ)
        except Exception as e:
            self.parts.board.warn(
                f"signal {name!r} ignored: its argument is not a valid {typ.__name__}: {short_message(e)}"
            )
            return None, False
        return value, True

    async def _started_engine(self, *, answer: bool = False) -> Engine:
        """The engine, once this execution has one (the first task pins the topology and builds it).

        An answer arriving before then (at the start of the next execution after
        continue-as-new, say) waits for it instead of being refused as unknown.
        """
        if self.parts.engine is None:  # (recorded runs never waited here: their engine was there)
            await workflow.wait_condition(lambda: self.parts.engine is not None or self.parts.board.closed)
            self._check_open(answer=answer)
        assert self.parts.engine is not None
        return self.parts.engine

    def _sub_workflow_ignores(self, signal: str) -> bool:
        """A child's input comes from its parent only: a signal from outside is a warning."""
        if self.parts.sub_workflow is None:
            return False
        self.parts.board.warn(f"signal {signal!r} ignored: {sub_workflow_refusal(self.parts.sub_workflow)}")
        return True

    def _check_not_busy(self) -> None:
        """Refuse an update while one of the run's local activities is in flight (see ``locals.py``).

        Accepted now, the update could be ordered before that activity's result
        in history and after it on replay. Refused, it leaves no trace; the
        client sends it again shortly (``RunBusyError`` is retryable).
        """
        if not self.locals.idle:
            raise refuse(
                FAILURE_RUN_BUSY,
                "the run is busy with a local activity of its own; send the update again shortly",
                retryable=True,
            )

    async def _quiet(self) -> None:
        """Wait until none of the run's local activities is in flight (``Admission.quiet``)."""
        await self.parts.admission.quiet()

    def _signature(self) -> str | None:
        """The run's graph signature as activities that run its code check it (``None``: not pinned yet)."""
        return self.parts.topology.signature_hash[:SIGNATURE_PREFIX] if self.parts.topology is not None else None

    def _check_open(self, *, answer: bool = False) -> None:
        """Refuse input to a run that has ended or is closing; ``answer``: an answer, which a closing run that
        waits for its pending requests still takes (``PATCH_CLOSE_WAITS``)."""
        if self.parts.sub_workflow is not None:
            raise refuse(FAILURE_RUN_CLOSED, sub_workflow_refusal(self.parts.sub_workflow))
        if self.parts.board.closed or (self.parts.closing and not (answer and self.parts.close_waits)):
            state = "closing" if self.parts.closing and not self.parts.board.closed else self.parts.board.status
            raise refuse(FAILURE_RUN_CLOSED, f"the run is {state}")
