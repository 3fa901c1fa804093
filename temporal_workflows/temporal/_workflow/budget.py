"""What one workflow task may record: steps, children, inbox drains and updates share one budget.

Its own module because every part of the workflow that records a large value
(``supersteps``, ``children``, ``inbox``) asks it for room, and none of them
should import another to reach it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

from pydantic_core import to_json
from temporalio import workflow

from temporal_workflows.temporal._protocol import TASK_BUDGET_BYTES
from temporal_workflows.temporal._workflow.patches import PATCH_TASK_BUDGET, patched

__all__ = ["TaskBudget"]


def _lower_bound(value: Any, enough: int) -> int:
    """At most the JSON size of ``value`` (each string counts its characters and quotes), stopping at ``enough``."""
    total = 0
    todo = [value]
    while todo and total < enough:
        v = todo.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, dict):
            todo.extend(v.values())
            total += 2
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
            total += 2
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            todo.extend(getattr(v, f.name) for f in dataclasses.fields(v))
        elif hasattr(v, "__dict__") and not isinstance(v, type):
            todo.extend(vars(v).values())
        else:
            total += 1
    return total


_REFERENCE_BYTES = 1024
"""More than a stored payload's reference takes in history (driver name, key, digest, size)."""


class TaskBudget:
    """What the current workflow task has recorded so far, in bytes, and room for more.

    A workflow task's completion carries its commands: the input of every
    activity it schedules, the result of every local activity it ran (a
    marker), update results, a continue-as-new input. gRPC refuses a
    completion over 4 MiB, and the server then terminates the run
    (``GrpcMessageTooLarge``): nothing a run does must put more than
    :data:`TASK_BUDGET_BYTES` into one task. Whatever records a large value
    asks for :meth:`room` first, and what would not fit waits for the next
    workflow task: a 1 ms timer ends this one. One value always fits (it is
    under the payload limit, well under the budget), so nothing waits for ever.

    The current task is told by the history length, which changes with every
    workflow task and only then (also on replay). Callers that record across
    an ``await`` (a local activity's result) hold :attr:`lock` meanwhile, so
    no one else spends the room they checked.
    """

    def __init__(self, limit: int = TASK_BUDGET_BYTES) -> None:
        self.limit = limit
        self.stored_over: int | None = None
        """With a store for large values (pinned): a payload this large is recorded as a reference."""
        self.lock = asyncio.Lock()
        self._task = -1
        self._used = 0

    @property
    def used(self) -> int:
        """Bytes the current workflow task has recorded so far (that went through this budget)."""
        task = workflow.info().get_current_history_length()
        if task != self._task:
            self._task, self._used = task, 0
        return self._used

    def size_of(self, arg: Any) -> int:
        """The JSON size of ``arg`` (an activity's input), or, when it surely goes to the store for large values,
        a lower bound found without serializing it (its strings' lengths: a step input holding a 100 MB document
        is not written out in workflow code just to learn that its reference is what history records)."""
        over = self.stored_over
        if over is not None and _lower_bound(arg, over) >= over:
            return over
        return len(to_json(arg))

    def recorded(self, size: int) -> int:
        """What a value of ``size`` bytes adds to the task: itself, or a reference if it goes to the store."""
        over = self.stored_over
        return _REFERENCE_BYTES if over is not None and size >= over else size

    def charge(self, size: int) -> None:
        """Count ``size`` bytes the current workflow task records."""
        self._used = self.used + self.recorded(size)

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes fit in the current workflow task (anything fits in an empty one)."""
        used = self.used
        return used == 0 or used + self.recorded(size) <= self.limit

    async def room(self, size: int) -> bool:
        """Return once ``size`` more bytes fit: at once, or (``True``) in the next workflow task."""
        if self.fits(size) or not patched(PATCH_TASK_BUDGET):
            return False
        await workflow.sleep(timedelta(milliseconds=1), summary="task budget: the rest in the next workflow task")
        return True

    async def start_activity(self, size: int, activity: str, arg: Any, **options: Any) -> workflow.ActivityHandle[Any]:
        """``workflow.start_activity`` for an input of ``size`` bytes, in a workflow task with room for it.

        The input is recorded in the task's ``ScheduleActivityTask`` command,
        so the room is asked for and spent under :attr:`lock`: no one else
        spends it between the check and the command.
        """
        async with self.lock:
            await self.room(size)
            handle = workflow.start_activity(activity, arg, **options)
            self.charge(size)
        return handle
