"""What every handler of ``GraphWorkflow`` reads, and the checks they share.

The workflow's signal, update and query handlers live in mixins (``queries.py``,
``handlers.py``, ``controls.py``) that the SDK collects from ``GraphWorkflow``'s
bases; this base declares the run's parts they read (``GraphWorkflow.__init__``
sets them) and the checks they share: is the run open, is it busy. Outside
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

__all__ = ["HandlerBase"]


_T = TypeVar("_T")


_NO_ARGUMENT = RawValue(Payload(metadata={"encoding": b"binary/null"}))
"""Default of signals whose argument is optional (``checkpoint``, ``reset``)."""


def _is_null(raw: RawValue) -> bool:
    encoding = raw.payload.metadata.get("encoding")
    return encoding == b"binary/null" or (encoding == b"json/plain" and raw.payload.data.strip() == b"null")


class HandlerBase:
    """The run's parts the handlers read, and the checks they share."""

    # Set by ``GraphWorkflow.__init__`` (and ``_run``), read by the handlers.
    _input: RunInput
    _input_error: str | None
    _carried: Carried | None
    _board: StatusBoard
    _admission: Admission
    _checkpoints: Checkpoints
    _continuation: Continuation
    _budget: TaskBudget
    patches: RunPatches
    locals: LocalActivities
    _engine: Engine | None
    _topology: Topology | None
    _signature_from: str | None
    _shape: GraphShape | None
    _shape_note: str | None
    _steps: StepRunner | None
    _keep_alive: bool
    _closing: bool
    _close_waits: bool
    _epoch: int
    _segment: int
    _start_env: Envelope | None
    _lineage: dict[str, Any] | None
    _sub_workflow: SubWorkflowInput | None
    _payload_limit: int
    _state_text: tuple[str, str] | None
    _pace: ReaderPace

    def _signal_arg(self, name: str, raw: RawValue, typ: type[_T]) -> tuple[_T | None, bool]:
        """``(value, ok)``; ``(None, True)`` for an omitted or null argument of an optional one."""
        if raw is _NO_ARGUMENT or _is_null(raw):
            return None, True
        try:
            value: _T = workflow.payload_converter().from_payload(raw.payload, typ)
        except Exception as e:
            self._board.warn(f"signal {name!r} ignored: its argument is not a valid {typ.__name__}: {short_message(e)}")
            return None, False
        return value, True

    async def _started_engine(self, *, answer: bool = False) -> Engine:
        """The engine, once this execution has one (the first task pins the topology and builds it).

        An answer arriving before then (at the start of the next execution after
        continue-as-new, say) waits for it instead of being refused as unknown.
        """
        if self._engine is None:  # (recorded runs never waited here: their engine was there)
            await workflow.wait_condition(lambda: self._engine is not None or self._board.closed)
            self._check_open(answer=answer)
        assert self._engine is not None
        return self._engine

    def _sub_workflow_ignores(self, signal: str) -> bool:
        """A child's input comes from its parent only: a signal from outside is a warning."""
        if self._sub_workflow is None:
            return False
        self._board.warn(f"signal {signal!r} ignored: {sub_workflow_refusal(self._sub_workflow)}")
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
        await self._admission.quiet()

    def _signature(self) -> str | None:
        """The run's graph signature as activities that run its code check it (``None``: not pinned yet)."""
        return self._topology.signature_hash[:SIGNATURE_PREFIX] if self._topology is not None else None

    def _check_open(self, *, answer: bool = False) -> None:
        """Refuse input to a run that has ended or is closing; ``answer``: an answer, which a closing run that
        waits for its pending requests still takes (``PATCH_CLOSE_WAITS``)."""
        if self._sub_workflow is not None:
            raise refuse(FAILURE_RUN_CLOSED, sub_workflow_refusal(self._sub_workflow))
        if self._board.closed or (self._closing and not (answer and self._close_waits)):
            state = "closing" if self._closing and not self._board.closed else self._board.status
            raise refuse(FAILURE_RUN_CLOSED, f"the run is {state}")
