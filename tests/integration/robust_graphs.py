"""Graphs of the second adversarial round (issue 23) that no other module holds, for both hosts.

Step errors whose cause chain loops (``raise e from e``, contexts that point at
each other) or runs thousands of links deep: the run must report the step's
own error type and message, in process and on Temporal alike.
"""

from __future__ import annotations

from typing import Never

from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from temporal_workflows import ExecutorOptions, Workflow, WorkflowBuilder, WorkflowContext, executor

ONCE = ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1))

DEEP_CHAIN = 5_000
"""Links of the deepest cause chain raised: far past what the SDK's recursive failure conversion survives."""


def looping_error(kind: str) -> BaseException:
    """A step error whose cause chain loops (``"cause"``, ``"context"``) or is ``DEEP_CHAIN`` links deep."""
    if kind == "cause":
        e = ValueError("its own cause")
        e.__cause__ = e  # what `raise e from e` leaves
        return e
    if kind == "context":
        # The SDK follows an ApplicationError's context, and a plain error's cause.
        a, b = ApplicationError("a looping context"), ValueError("b")
        a.__context__, b.__cause__ = b, a
        return a
    top: BaseException = RuntimeError("the top of a deep chain")
    node = top
    for i in range(DEEP_CHAIN):
        cause = OSError(f"link {i}")
        node.__cause__ = cause
        node = cause
    return top


@executor(id="looping", options=ONCE)
async def looping(kind: str, ctx: WorkflowContext[Never, str]) -> None:
    raise looping_error(kind)


cause_cycles = WorkflowBuilder(start_executor=looping, name="robust_cause_cycles").build()


def all_workflows() -> list[Workflow]:
    return [cause_cycles]
