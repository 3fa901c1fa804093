"""What every handler of ``GraphWorkflow`` reads, and the checks they share.

The workflow's signal, update and query handlers live in mixins (``queries.py``,
``handlers.py``, ``controls.py``) that the SDK collects from ``GraphWorkflow``'s
bases; this base declares the run's parts they read (``GraphWorkflow.__init__``
sets them) and the checks they share: is the run open, busy, has it room for
this input, and type-checking outside input in an activity.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue, RetryPolicy

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import (
    Engine,
    PendingRequest,
    Topology,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._graph.shape import GraphShape
from temporal_workflows.temporal._failures import refuse, short_message
from temporal_workflows.temporal._protocol import (
    ACTIVITY_VALIDATE,
    FAILURE_RUN_BUSY,
    FAILURE_RUN_CLOSED,
    Carried,
    RunInput,
    SubWorkflowInput,
    Validated,
    ValidateInput,
)
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.checkpointing import Checkpoints
from temporal_workflows.temporal._workflow.children import sub_workflow_refusal
from temporal_workflows.temporal._workflow.continuation import Continuation
from temporal_workflows.temporal._workflow.inbox import Inbox
from temporal_workflows.temporal._workflow.locals import LocalActivities, execute_local_activity
from temporal_workflows.temporal._workflow.patches import (
    PATCH_TASK_BUDGET,
    PATCH_VALIDATE_IN_ACTIVITY,
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
    _inbox: Inbox
    _checkpoints: Checkpoints
    _continuation: Continuation
    _budget: TaskBudget
    patches: RunPatches
    locals: LocalActivities
    _engine: Engine | None
    _topology: Topology | None
    _shape: GraphShape | None
    _shape_note: str | None
    _steps: StepRunner | None
    _keep_alive: bool
    _closing: bool
    _epoch: int
    _segment: int
    _start_env: Envelope | None
    _lineage: dict[str, Any] | None
    _sub_workflow: SubWorkflowInput | None
    _payload_limit: int
    _input_taken: tuple[int, int]
    _held: dict[str, Envelope]
    _held_count: int
    _state_text: tuple[str, str] | None

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

    async def _started_engine(self) -> Engine:
        """The engine, once this execution has one (the first task pins the topology and builds it).

        An answer arriving before then (at the start of the next execution after
        continue-as-new, say) waits for it instead of being refused as unknown.
        """
        if self._engine is None:  # (recorded runs never waited here: their engine was there)
            await workflow.wait_condition(lambda: self._engine is not None or self._board.closed)
            self._check_open()
        assert self._engine is not None
        return self._engine

    def _sub_workflow_ignores(self, signal: str) -> bool:
        """A child's input comes from its parent only: a signal from outside is a warning."""
        if self._sub_workflow is None:
            return False
        self._board.warn(f"signal {signal!r} ignored: {sub_workflow_refusal(self._sub_workflow)}")
        return True

    def _check_room_for(self, inp: Any) -> None:
        """Refuse an update whose input the current workflow task has no more room for (retryable).

        The SDK repeats each accepted update's input in the completion of the
        task that accepts it, and the server writes that completion together
        with the signals that arrived meanwhile in one transaction, refused
        over 4 MiB (``TransactionSizeLimitError``; the task then fails again
        and again). So one task accepts at most one payload of update input:
        any one update fits (each is under the payload limit); a second large
        one is refused as ``RunBusyError`` and the client sends it again to the
        next task. Validators do not run on replay, and a refused update
        leaves no trace: nothing here touches history.
        """
        size = json_size(inp)
        task = workflow.info().get_current_history_length()
        seen, taken = self._input_taken
        if seen != task:
            taken = 0
        if taken and taken + size > self._payload_limit:
            raise refuse(
                FAILURE_RUN_BUSY,
                f"the run took {taken:,} bytes of update input in this workflow task; "
                f"this {size:,}-byte input goes to the next one: send it again shortly",
                retryable=True,
            )
        self._input_taken = (task, taken + size)

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
        """Wait until none of the run's local activities is in flight, before issuing a command from a handler.

        A handler's command then follows the result of any such activity in
        history and on replay alike (see ``locals.py``). Runs recorded before
        ``PATCH_VALIDATE_IN_ACTIVITY`` did not wait.
        """
        if self.patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            locals_ = self.locals
            await workflow.wait_condition(lambda: locals_.idle)

    def _check_open(self) -> None:
        if self._sub_workflow is not None:
            raise refuse(FAILURE_RUN_CLOSED, sub_workflow_refusal(self._sub_workflow))
        if self._board.closed or self._closing:
            state = "closing" if self._closing and not self._board.closed else self._board.status
            raise refuse(FAILURE_RUN_CLOSED, f"the run is {state}")

    async def _validate(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check outside input in a local activity: the types are user code."""
        name = workflow.info().workflow_type

        async def validate() -> Validated:
            checked: Validated = await execute_local_activity(
                ACTIVITY_VALIDATE,
                ValidateInput(name, executor_id, value, request),
                result_type=Validated,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"validate {'response to ' + request.request_id if request else 'message for ' + executor_id}",
            )
            return checked

        budget = self._budget
        if not self.patches.get(PATCH_TASK_BUDGET):
            result = await validate()  # recorded before: validations ran side by side
        else:
            # Its marker records the result in this workflow task: one validation at a time, with room
            # for a whole value (what a validation that changed the value returns, at most).
            async with budget.lock:
                await budget.room(self._payload_limit)
                result = await validate()
                budget.charge(json_size(result))
        # The activity returns only what validation changed (the value is in history already).
        return result.resolved(value)
