"""How a ``TemporalRuntime`` runs each step activity."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["StepOptions"]


@dataclass(frozen=True)
class StepOptions:
    """Temporal options of every step activity of a runtime's workflows.

    LlamaIndex's own ``retry_policy=`` on a step decides retries of a step that
    *raised* (in the workflow, with durable timers, as under the default
    runtime); Temporal's retries here only cover a step whose worker was lost
    or whose activity failed outside the step (heartbeats stop: the step runs
    again on another worker, so steps are at-least-once).

    Attributes:
        task_queue: Queue the step activities go to (``None``: the run's own).
        start_to_close_timeout: Longest one attempt of a step may run.
        heartbeat_timeout: A worker that stops heartbeating for this long is
            presumed dead and the step runs again elsewhere (the activity
            heartbeats by itself every third of it while the step runs).
        maximum_attempts: Attempts per step invocation on lost workers (0: unlimited).
        local_below: A step whose every invocation so far in the run took less than this runs its next
            ones as local activities, on the worker running the run (no round trip through the server per
            invocation, no input in history); its first invocation, and any after one took longer, run as
            activities. ``None``: every invocation is an activity. Either way each invocation the loop
            starts runs once per attempt; see docs/llama-runtime.md ("Local activities").
    """

    task_queue: str | None = None
    start_to_close_timeout: timedelta = timedelta(hours=1)
    heartbeat_timeout: timedelta = timedelta(seconds=30)
    maximum_attempts: int = 0
    local_below: timedelta | None = timedelta(milliseconds=200)
