"""The run's own spans and metrics: ``workflow.run``, supersteps, requests; runs, completed steps, pending requests.

All of it is workflow code, so all of it is replay-safe (``_telemetry/workflow.py``):
spans keep their ids on every replay and are exported by the execution that
counts, metrics are recorded once, when live, through the replay gate. None
of it is a command: nothing here changes the run's history.

* ``workflow.run`` (Agent Framework's span, with ``workflow.name`` the graph
  and ``workflow.id`` the run's workflow id) covers one segment of the run, a
  child of Temporal's ``RunWorkflow`` span; a continue-as-new ends it and the
  next segment opens its own.
* ``superstep N`` covers a superstep from its start to its commit; its steps'
  ``StartActivity`` spans are its children. ``temporal_workflows.superstep.duration``
  records its length in workflow time.
* ``request <id>`` covers a request for input, from the commit that made it
  pending to the boundary that took its answer (or its expiry), with its
  outcome; ``temporal_workflows.requests.pending`` goes up and down with it.
* ``temporal_workflows.runs`` counts runs started and segments ended by
  status; ``temporal_workflows.steps.completed`` counts the steps whose
  result the run recorded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode
from temporalio import workflow

from temporal_workflows._engine.driver import RunStatus, StepOutcome
from temporal_workflows._engine.machine import Engine, StepResult, StepTask
from temporal_workflows._telemetry import Attr, instruments
from temporal_workflows.temporal._telemetry.workflow import record, start_span, workflow_span

__all__ = ["RunTelemetry"]

_COUNTED_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CONTINUED_AS_NEW})


class RunTelemetry:
    """One run segment's spans and metrics (module doc)."""

    def __init__(self) -> None:
        self._graph = ""
        self._requests: dict[str, tuple[Span | None, float | None]] = {}
        self._counted: RunStatus | None = None

    def _base(self) -> dict[str, Any]:
        return {Attr.WORKFLOW_NAME: self._graph}

    @contextmanager
    def run(self, graph: str, *, new_run: bool, segment: int) -> Iterator[None]:
        """Around the run's segment: the ``workflow.run`` span; ``new_run`` counts a run started."""
        self._graph = graph
        info = workflow.info()
        if new_run:
            record(lambda: instruments().runs.add(1, {**self._base(), Attr.STATUS: "started"}))
        attributes = {
            Attr.WORKFLOW_NAME: graph,
            Attr.WORKFLOW_ID: info.workflow_id,
            Attr.GRAPH: graph,
            Attr.RUN_ID: info.workflow_id,
            Attr.TEMPORAL_RUN_ID: info.run_id,
            Attr.SEGMENT: segment,
        }
        with workflow_span(Attr.WORKFLOW_RUN_SPAN, attributes):
            yield

    def status(self, status: RunStatus) -> None:
        """The run's status changed: count the statuses that end a run or a segment."""
        if status == self._counted or status not in _COUNTED_STATUSES:
            return
        self._counted = status
        record(lambda: instruments().runs.add(1, {**self._base(), Attr.STATUS: status.value}))

    @contextmanager
    def superstep(self, superstep: int, executor_ids: Sequence[str]) -> Iterator[None]:
        attributes = {
            Attr.GRAPH: self._graph,
            Attr.SUPERSTEP: superstep,
            Attr.EXECUTOR_IDS: list(executor_ids),
            Attr.RUN_ID: workflow.info().workflow_id,
        }
        start = workflow.now()
        with workflow_span(f"superstep {superstep}", attributes):
            yield
        seconds = (workflow.now() - start).total_seconds()
        record(lambda: instruments().superstep_duration.record(seconds, self._base()))

    def steps_finished(self, tasks: Sequence[StepTask], outcomes: Sequence[StepOutcome]) -> None:
        """Count the steps whose results the run just recorded (once per step, whatever its attempts)."""
        done: dict[str, int] = {}
        for task, outcome in zip(tasks, outcomes, strict=False):
            if isinstance(outcome, StepResult):
                done[task.executor_id] = done.get(task.executor_id, 0) + 1
        if done:
            base = self._base()

            def count() -> None:
                for executor_id, n in done.items():
                    instruments().steps_completed.add(n, {**base, Attr.EXECUTOR_ID: executor_id})

            record(count)

    def requests(self, engine: Engine, *, ended: str | None = None) -> None:
        """Bring request spans and the pending count up to date with ``engine``'s pending requests.

        A request newly pending opens its span (a child of the current one: the
        superstep that asked) and counts up; one no longer pending ends it,
        answered or expired, and counts down. ``ended`` closes every open one
        with that outcome (the segment ends).
        """
        pending = {} if ended is not None else engine.pending_requests
        now = workflow.now().timestamp()
        gone = [rid for rid in self._requests if rid not in pending]
        for rid in gone:
            span, deadline = self._requests.pop(rid)
            outcome = ended or ("expired" if deadline is not None and deadline <= now else "answered")
            if span is not None:
                span.set_attribute(Attr.REQUEST_OUTCOME, outcome)
                if outcome == "expired":
                    span.set_status(Status(StatusCode.ERROR, "the request expired unanswered"))
                span.end()
        new = [rid for rid in pending if rid not in self._requests]
        for rid in new:
            req = pending[rid]
            span = start_span(
                f"request {rid}",
                {
                    Attr.GRAPH: self._graph,
                    Attr.REQUEST_ID: rid,
                    Attr.EXECUTOR_ID: req.executor_id,
                    Attr.MESSAGE_PAYLOAD_TYPE: (req.data.type or "").rsplit(":", 1)[-1],
                    Attr.RUN_ID: workflow.info().workflow_id,
                },
            )
            self._requests[rid] = (span, req.deadline)
        delta = len(new) - len(gone)
        if delta:
            base = self._base()
            record(lambda: instruments().requests_pending.add(delta, base))
