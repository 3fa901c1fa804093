"""The run's own local activities in flight, and why outside input waits for none to be.

A workaround for an SDK behaviour (temporalio 1.35, sdk-core), reproduced with a
plain-SDK workflow (an update handler that runs a local activity, concurrent
updates, a query now and then): when a query reaches a run while a local
activity of its workflow task runs, sdk-core completes that task with the
activity's marker but hands the activity's result to the workflow only in the
next activation, together with the next task's jobs. The Python SDK applies a
new update (its acceptance) and signals before that result, so the history
records, say, "update B accepted" before "update A completed" (A completing on
that result). On replay the marker resolves the activity inside its own task,
so A completes first, and the replay fails: ``UpdateMachine in state
CompletedCommandCreated says the transition is invalid during event ...
WorkflowExecutionUpdateAccepted``; the live run's next task fails the same way
after a worker restart, and the run is wedged. The same family of upstream
reports: temporalio/sdk-rust#803 (a local activity's result ordered differently
on replay), temporalio/sdk-java#2796 (update completions between markers),
temporalio/sdk-python#1578 (local activity results in completion order); no report of this exact case
was found. ``tests/integration/sdk_update_local_activity_repro.py`` reproduces it without this library
(3 of 3 histories unreplayable), for an upstream report.

So nothing the run does in response to outside input may depend on where a
local activity's result lands: update validators refuse (``RunBusyError``,
retryable; the client retries it) while one of the run's local activities is in
flight, so no update is accepted in an activation that still holds a late
result; outside input is type-checked in a regular activity (its result is a
history event, delivered where it is recorded); and handlers that issue commands
wait until no local activity is in flight. ``tests/integration/test_concurrent_input.py``
replays histories made under that load.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

__all__ = ["LocalActivities", "execute_local_activity"]


class LocalActivities:
    """How many of the run's own local activities are in flight (scheduled, result not yet taken)."""

    def __init__(self) -> None:
        self.in_flight = 0

    @property
    def idle(self) -> bool:
        return self.in_flight == 0


async def execute_local_activity(*args: Any, **kwargs: Any) -> Any:
    """``workflow.execute_local_activity``, counted in the run's :class:`LocalActivities` (if it has one)."""
    counter = getattr(workflow.instance(), "locals", None)
    if not isinstance(counter, LocalActivities):
        return await workflow.execute_local_activity(*args, **kwargs)
    counter.in_flight += 1
    try:
        return await workflow.execute_local_activity(*args, **kwargs)
    finally:
        counter.in_flight -= 1
