"""A run's timeline from what the run already records: supersteps by executors, as bars, with no collector.

Every step of a run on Temporal is an activity whose id is
``<superstep>.<index>.<executor>``, so the run's history says when each step
was scheduled, when its last attempt started and on which worker (the
``identity`` of ``ActivityTaskStarted``: ``<pid>@<host>``, the
``service.instance.id`` of that worker's telemetry), how many attempts it
took, why the one before failed, and when and how it ended. A step still
running is read from the run's description (its pending activities: current
attempt, worker, last failure). Segments a run continued into are read back
to front, up to :data:`MAX_SEGMENTS`.

``GET /api/runs/{id}/timeline`` serves it (:func:`timeline_route`); the run
page draws it (``static/timeline.js``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

__all__ = ["MAX_SEGMENTS", "run_timeline", "timeline_route"]

MAX_SEGMENTS: Final = 10
"""Continue-as-new segments a timeline reads back (newest first); older ones are left out, saying so."""

MAX_FAILURE_CHARS: Final = 300

_STEP_ID = re.compile(r"^(\d+)\.(\d+)\.(.+?)(?:\.(\d+))?$")


def _ms(value: Any) -> int | None:
    """Epoch milliseconds of a protobuf Timestamp (or a datetime), ``None`` when unset."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if not value.seconds and not value.nanos:
        return None
    return int(value.seconds * 1000 + value.nanos // 1_000_000)


def _failure(f: Any) -> str | None:
    if f is None or not f.message:
        return None
    text = " ".join(f.message.split())
    return text[:MAX_FAILURE_CHARS] + ("…" if len(text) > MAX_FAILURE_CHARS else "")


@dataclass
class _Step:
    activity_id: str
    superstep: int
    index: int
    executor: str
    scheduled: int | None
    segment: int
    started: int | None = None
    ended: int | None = None
    attempts: int = 1
    worker: str | None = None
    outcome: str = "scheduled"
    failure: str | None = None

    def json(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "activity_id": self.activity_id,
            "index": self.index,
            "scheduled": self.scheduled,
            "started": self.started,
            "ended": self.ended,
            "attempts": self.attempts,
            "worker": self.worker,
            "outcome": self.outcome,
            "failure": self.failure,
        }


@dataclass
class _Segment:
    run_id: str
    start: int | None = None
    end: int | None = None
    status: str = "running"
    previous: str | None = None
    steps: dict[int, _Step] = field(default_factory=dict)  # by scheduled event id


def _read(events: list[HistoryEvent], run_id: str, graph: str, segment: int) -> _Segment:
    seg = _Segment(run_id)
    prefix = f"{graph}."
    for e in events:
        kind = e.WhichOneof("attributes")
        t = _ms(e.event_time)
        if kind == "workflow_execution_started_event_attributes":
            seg.start = t
            seg.previous = e.workflow_execution_started_event_attributes.continued_execution_run_id or None
        elif kind == "activity_task_scheduled_event_attributes":
            scheduled = e.activity_task_scheduled_event_attributes
            match = _STEP_ID.match(scheduled.activity_id)
            if match is None or not scheduled.activity_type.name.startswith(prefix):
                continue  # not a step (a reducer, a checkpoint, validating outside input)
            seg.steps[e.event_id] = _Step(
                scheduled.activity_id, int(match.group(1)), int(match.group(2)), match.group(3), t, segment
            )
        elif kind == "activity_task_started_event_attributes":
            started = e.activity_task_started_event_attributes
            step = seg.steps.get(started.scheduled_event_id)
            if step is not None:
                step.started, step.attempts, step.worker = t, max(started.attempt, 1), started.identity or None
                step.outcome = "running"
                if started.HasField("last_failure"):
                    step.failure = _failure(started.last_failure)
        elif kind in (
            "activity_task_completed_event_attributes",
            "activity_task_failed_event_attributes",
            "activity_task_timed_out_event_attributes",
            "activity_task_canceled_event_attributes",
        ):
            ended: Any = getattr(e, kind)
            step = seg.steps.get(ended.scheduled_event_id)
            if step is None:
                continue
            step.ended = t
            step.outcome = kind.removeprefix("activity_task_").removesuffix("_event_attributes")
            failing = kind in ("activity_task_failed_event_attributes", "activity_task_timed_out_event_attributes")
            if failing and ended.HasField("failure"):
                step.failure = _failure(ended.failure)
            if kind == "activity_task_completed_event_attributes" and ended.identity:
                step.worker = ended.identity
        elif kind in (
            "workflow_execution_completed_event_attributes",
            "workflow_execution_failed_event_attributes",
            "workflow_execution_timed_out_event_attributes",
            "workflow_execution_canceled_event_attributes",
            "workflow_execution_terminated_event_attributes",
            "workflow_execution_continued_as_new_event_attributes",
        ):
            seg.end = t
            seg.status = kind.removeprefix("workflow_execution_").removesuffix("_event_attributes")
    return seg


def _pending(seg: _Segment, description: Any) -> None:
    """Steps still running in the latest segment: their current attempt, worker and last failure."""
    by_id = {s.activity_id: s for s in seg.steps.values() if s.ended is None}
    for p in description.pending_activities:
        step = by_id.get(p.activity_id)
        if step is None:
            continue
        step.attempts = max(p.attempt, 1)
        step.worker = p.last_worker_identity or step.worker
        started = _ms(p.last_started_time) if p.HasField("last_started_time") else None
        if started is not None:
            step.started = started
            step.outcome = "running"
        if p.HasField("last_failure"):
            step.failure = _failure(p.last_failure)


async def run_timeline(client: Client, workflow_id: str, *, max_segments: int = MAX_SEGMENTS) -> dict[str, Any]:
    """The timeline of the run ``workflow_id`` (its latest segment and up to ``max_segments - 1`` before it)."""
    latest: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    description = await latest.describe()
    graph = description.workflow_type
    segments: list[_Segment] = []
    run_id: str | None = description.run_id
    while run_id and len(segments) < max_segments:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        seg = _read(list(history.events), run_id, graph, 0)
        if not segments:
            _pending(seg, description.raw_description)
        segments.append(seg)
        run_id = seg.previous
    truncated = run_id is not None
    segments.reverse()
    supersteps: list[dict[str, Any]] = []
    for number, seg in enumerate(segments):
        grouped: dict[int, list[_Step]] = {}
        for step in seg.steps.values():
            step.segment = number
            grouped.setdefault(step.superstep, []).append(step)
        for superstep in sorted(grouped):
            steps = sorted(grouped[superstep], key=lambda s: (s.index, s.activity_id))
            starts = [s.scheduled for s in steps if s.scheduled is not None]
            ends = [s.ended for s in steps]
            supersteps.append(
                {
                    "segment": number,
                    "superstep": superstep,
                    "start": min(starts) if starts else None,
                    "end": None if any(e is None for e in ends) else max(e for e in ends if e is not None),
                    "steps": [s.json() for s in steps],
                }
            )
    return {
        "id": workflow_id,
        "graph": graph,
        "run_id": description.run_id,
        "start": segments[0].start if segments else None,
        "end": segments[-1].end if segments else None,
        "segments": [{"run_id": s.run_id, "start": s.start, "end": s.end, "status": s.status} for s in segments],
        "truncated": truncated,
        "supersteps": supersteps,
        "workers": sorted({s["worker"] for ss in supersteps for s in ss["steps"] if s["worker"]}),
    }


def timeline_route(
    client: Callable[[], Awaitable[Client]], workflow_id: Callable[[Request], str]
) -> Callable[[Request], Awaitable[Response]]:
    """The ``GET /api/runs/{id}/timeline`` handler (the console's gate and error mapping wrap it)."""

    async def timeline(request: Request) -> Response:
        return JSONResponse(await run_timeline(await client(), workflow_id(request)))

    return timeline
