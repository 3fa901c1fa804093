"""The in-process host's way of running a superstep's steps in the order ``_engine/order.py`` gives."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from temporal_workflows._engine.machine import StepResult, StepTask

__all__ = ["in_order"]

_O = TypeVar("_O")


async def in_order(
    tasks: Sequence[StepTask], after: Sequence[int | None], run: Callable[[StepTask], Awaitable[_O]]
) -> list[_O | None]:
    """Run every task concurrently, each started once the one it runs after (``after``) has finished.

    A task whose predecessor did not produce a :class:`StepResult` (it failed,
    or was itself skipped) is not run: its outcome is ``None``, and the
    superstep fails with the predecessor's error, as a step after a failed one
    in Agent Framework's delivery order is never delivered.
    """
    finished: list[asyncio.Future[bool]] = [asyncio.get_running_loop().create_future() for _ in tasks]

    async def one(i: int, task: StepTask) -> _O | None:
        ok = False
        try:
            before = after[i]
            if before is not None and not await finished[before]:
                return None
            outcome = await run(task)
            ok = isinstance(outcome, StepResult)
            return outcome
        finally:
            finished[i].set_result(ok)

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))
