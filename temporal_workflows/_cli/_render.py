"""Watching a run from a terminal: its events as lines, retries as they happen, the request to answer.

Three views share one driver (:func:`watch`):

- **compact** (``run`` without ``--follow``): a line per superstep, outputs,
  requests and warnings, as ``make demo`` prints them;
- **detailed** (``run --follow``, ``events``): every event with its time,
  each step's duration, retries as Temporal schedules them (attempt, error,
  next try), the command that answers a waiting request, outputs cut to a
  line; with ``rich`` installed and a terminal, in colour with a live status
  line (:mod:`temporal_workflows._cli._rich`);
- **json** (``--json``): one JSON object per line, nothing cut, for programs.

A LlamaIndex run (``TemporalRuntime``) is watched the same way: its events are what ``stream_events()``
shows (LlamaIndex's internal ones, ``StepStateChanged`` and the like, with ``--internal``), and each time it
comes to rest the views say what it waits for: "waiting for input" with the command that answers each
request, or "idle" when it waits for an outside event no request names.

Retries are not events of the run (a step's attempts all happen inside one
activity), so the driver reads them from the workflow's pending activities
(``describe``) while the run has steps in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Protocol

from pydantic import BaseModel
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
    WorkflowWarningEvent,
)
from temporal_workflows.temporal._client.client import RawEvent, RunHandle
from temporal_workflows.temporal._client.llama import (
    STEP_STATE_EVENT,
    STOP_EVENTS,
    WORKFLOW_TYPE,
    LlamaEvent,
    LlamaRestEvent,
)

__all__ = [
    "CompactView",
    "DetailedView",
    "JsonView",
    "Retry",
    "View",
    "answer_template",
    "describe_event",
    "event_time",
    "follow",
    "short",
    "watch",
]

LINE_CHARS = 160
"""Values in a line are cut to about this many characters (``--json`` cuts nothing)."""
RETRY_POLL_SECONDS = 1.0
NO_WORKER_AFTER_SECONDS = 5.0
"""A run that has shown nothing for this long gets its task queue's pollers checked."""


def llama_line(ev: LlamaEvent) -> str:
    """A LlamaIndex event as a line: its class and its fields (``ProgressEvent {"msg": "..."}``)."""
    return f"{ev.name} {short(ev.data)}" if ev.data not in (None, {}) else ev.name


def shown(ev: WorkflowEvent, internal: bool) -> bool:
    """Whether a view shows ``ev``: LlamaIndex's internal events only with ``--internal``, as
    ``stream_events(expose_internal=True)``."""
    return not (isinstance(ev, LlamaEvent) and ev.internal and not internal)


def _from(ev: RequestInfoEvent) -> str:
    return f" from {ev.source_executor_id}" if ev.source_executor_id else ""


def describe_event(ev: WorkflowEvent) -> str | None:
    """One line for the events a person watching a run wants; ``None`` for the rest."""
    if isinstance(ev, LlamaEvent):
        # A LlamaIndex run's StopEvent is its result, printed when the run ends.
        return None if ev.internal or ev.event_type in STOP_EVENTS else f"  {llama_line(ev)}"
    if isinstance(ev, SuperStepStartedEvent):
        return f"superstep {ev.superstep}: running {', '.join(ev.executor_ids)}"
    if isinstance(ev, WorkflowOutputEvent):
        return f"  {_output_text(ev)}"
    if isinstance(ev, RequestInfoEvent):
        expects = _type_shown(ev.response_type)
        return f"  request {ev.request_id}{_from(ev)}: {_request_text(ev)} (expects {expects})"
    if isinstance(ev, WorkflowWarningEvent):
        return f"  warning: {ev.message}"
    if isinstance(ev, WorkflowResetEvent):
        to = f"checkpoint {ev.checkpoint_id} (superstep {ev.superstep})" if ev.checkpoint_id else "a clean start"
        return f"reset to {to}"
    if isinstance(ev, WorkflowFailedEvent):
        return f"failed in superstep {ev.superstep}: {ev.error}"
    return None


def to_json(value: Any) -> Any:
    """``value`` as JSON-able data (models dumped)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def short(value: Any, limit: int = LINE_CHARS) -> str:
    """Compact JSON of ``value``, cut to ``limit`` characters with the full length said."""
    text = json.dumps(to_json(value), default=str, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} chars)"


def event_time(ev: WorkflowEvent) -> datetime | None:
    """When the run recorded ``ev``, if the event carries it (``timestamp``: a datetime, epoch seconds or ISO)."""
    for name in ("timestamp", "time", "created_at"):
        value = getattr(ev, name, None)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                parsed = datetime.fromisoformat(value)
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _output_text(ev: WorkflowOutputEvent) -> str:
    return f"output from {ev.executor_id}: {short(ev.data)}"


def _request_text(ev: RequestInfoEvent) -> str:
    return short(ev.data)


def _type_shown(key: str | None) -> str:
    """A response type as a reader knows it: ``HumanResponseEvent``, not ``module:HumanResponseEvent`` (nor a
    LlamaIndex class's ``module.HumanResponseEvent``)."""
    key = key or "response"
    return key.rpartition(":")[2] if ":" in key else key.rpartition(".")[2]


def _rest_lines(ev: LlamaRestEvent, prog: str, run_id: str, told: set[str]) -> list[str]:
    """What a resting LlamaIndex run waits for, and the commands that answer it (each request told once)."""
    if not ev.requests:
        return [
            "idle: the run waits for an outside event",
            f"  send one it accepts: {prog} send-event {run_id} <EventClass> '<fields as JSON>'",
        ]
    lines = ["waiting for input"]
    for r in ev.requests:
        if r.request_id in told:
            continue
        told.add(r.request_id)
        lines += [
            f"  request {r.request_id}{_from(r)}: {_request_text(r)}",
            f"    the run waits for a {_type_shown(r.response_type)}; answer it with:",
            f"    {prog} respond {run_id} {r.request_id} '{answer_template(r.response_schema)}'",
        ]
    return lines


def answer_template(schema: dict[str, Any]) -> str:
    """A JSON skeleton of a response from its JSON schema: ``{"approved": <boolean>, "note": <string>}``."""
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        kind = schema.get("type")
        return f"<{kind}>" if isinstance(kind, str) else "<JSON>"
    required = set(schema.get("required") or [])
    fields = sorted(props, key=lambda name: (name not in required, list(props).index(name)))
    parts = []
    for name in fields:
        spec = props[name] if isinstance(props[name], dict) else {}
        kind = spec.get("type") or (
            "|".join(str(o.get("type")) for o in spec.get("anyOf", []) if "type" in o) or "value"
        )
        if "const" in spec:  # a value the answer must carry as it is (a Literal field)
            parts.append(f'"{name}": {json.dumps(spec["const"], ensure_ascii=False)}')
            continue
        optional = "" if name in required else "?"
        parts.append(f'"{name}": <{kind}{optional}>')
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class Retry:
    """A step's failed attempt, read from the run's pending activities.

    Attributes:
        executor_id: The step's executor.
        attempt: The attempt about to run (2 for the first retry).
        maximum_attempts: The retry policy's limit (0: unlimited).
        error: The last attempt's failure message.
        next_at: When the next attempt is scheduled, if known.
    """

    executor_id: str
    attempt: int
    maximum_attempts: int
    error: str
    next_at: datetime | None


class View(Protocol):
    """What :func:`watch` tells as a run goes on."""

    def event(self, ev: WorkflowEvent, at: datetime | None) -> None: ...

    def retry(self, r: Retry, at: datetime) -> None: ...

    def note(self, text: str) -> None: ...

    def done(self, result: dict[str, Any], at: datetime) -> None: ...

    def close(self) -> None: ...


def _clock(at: datetime) -> str:
    return at.astimezone().strftime("%H:%M:%S.%f")[:-3]


def _seconds(s: float) -> str:
    """A duration as a person reads it: ``35 ms``, ``2.0 s``, ``4.5 min``, ``3.0 h``, ``2.0 days``."""
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 120 * 60:
        return f"{s / 60:.1f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


STREAM_GRANULARITY = 0.2
"""Seconds within which events without times of their own arrive (the stream's long-poll cooldown and batching)."""


def _duration(seconds: float, *, exact: bool) -> str:
    """A duration; from arrival times (not the run's own) it is approximate, and under the granularity unknown."""
    if exact:
        return _seconds(seconds)
    return f"<{_seconds(STREAM_GRANULARITY)}" if seconds < STREAM_GRANULARITY else f"~{_seconds(seconds)}"


class _Timing:
    """Durations of steps and supersteps from the times their events carry (or arrived, when watched live).

    Without a time (a closed run's events replayed from its stream, which
    carry none) steps are still tracked as running, but no duration is told.
    """

    def __init__(self) -> None:
        self.steps: dict[tuple[str, int], datetime | None] = {}
        self.supersteps: dict[int, datetime | None] = {}
        self.first: datetime | None = None

    def seen(self, ev: WorkflowEvent, at: datetime | None) -> float | None:
        """Record ``ev``; the duration it closes (a step's or a superstep's), if any."""
        self.first = self.first or at
        began: datetime | None = None
        if isinstance(ev, ExecutorInvokedEvent):
            self.steps.setdefault((ev.executor_id, ev.superstep), at)
        elif isinstance(ev, ExecutorCompletedEvent | ExecutorFailedEvent):
            began = self.steps.pop((ev.executor_id, ev.superstep), None)
        elif isinstance(ev, SuperStepStartedEvent):
            self.supersteps[ev.superstep] = at
            # A superstep's steps run from its start; each step's events (invoked first) come when it commits.
            for eid in ev.executor_ids:
                self.steps[(eid, ev.superstep)] = at
        elif isinstance(ev, SuperStepCompletedEvent):
            began = self.supersteps.pop(ev.superstep, None)
        return (at - began).total_seconds() if at is not None and began is not None else None

    def running(self) -> list[str]:
        return [eid for eid, _ in self.steps]


class CompactView:
    """``run`` without ``--follow``: supersteps, outputs, requests, warnings, retries; no times."""

    def __init__(self, out: IO[str], run_id: str, prog: str, *, internal: bool = False) -> None:
        self.out, self.run_id, self.prog = out, run_id, prog
        self.internal = internal
        self._told: set[str] = set()

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def event(self, ev: WorkflowEvent, at: datetime | None) -> None:
        if isinstance(ev, LlamaRestEvent):
            for text in _rest_lines(ev, self.prog, self.run_id, self._told):
                self._print(text if text.startswith(" ") else f"  {text}")
            return
        if isinstance(ev, LlamaEvent) and ev.internal and self.internal:
            self._print(f"  {llama_line(ev)}")
            return
        line = describe_event(ev)
        if line is not None:
            self._print(line)
        if isinstance(ev, RequestInfoEvent):
            hint = f"{self.prog} respond {self.run_id} {ev.request_id} '{answer_template(ev.response_schema)}'"
            self._print(f"  waiting for an answer: {hint}")

    def retry(self, r: Retry, at: datetime) -> None:
        self._print(f"  retry: {_retry_text(r, at)}")

    def note(self, text: str) -> None:
        self._print(text)

    def done(self, result: dict[str, Any], at: datetime) -> None:
        if result.get("kind") == "llama_index":
            return  # its result (what `await handler` returns) is what `run` prints next
        self._print(f"{result['status']} after {result['superstep']} supersteps")

    def close(self) -> None:
        pass


def _retry_text(r: Retry, at: datetime) -> str:
    of = f" of {r.maximum_attempts}" if r.maximum_attempts else ""
    when = ""
    if r.next_at is not None:
        wait = max(0.0, (r.next_at - at).total_seconds())
        when = f" at {_clock(r.next_at)} (in {_seconds(wait)})"
    return f"{r.executor_id} attempt {r.attempt - 1} failed: {r.error}; attempt {r.attempt}{of}{when}"


class DetailedView:
    """``run --follow`` and ``events`` as plain lines: time, what happened, durations, the answer to give."""

    def __init__(self, out: IO[str], run_id: str, prog: str, *, internal: bool = False) -> None:
        self.out, self.run_id, self.prog = out, run_id, prog
        self.internal = internal
        self.timing = _Timing()
        self._told: set[str] = set()
        self.llama_seen = False
        self.llama_running: dict[tuple[str, str], datetime | None] = {}
        """A LlamaIndex run's step invocations running now (step, worker), from its ``StepStateChanged`` events."""

    def _print(self, at: datetime | None, text: str) -> None:
        stamp = _clock(at) if at is not None else " " * 12
        print(f"{stamp}  {text}", file=self.out, flush=True)

    def lines(self, ev: WorkflowEvent, at: datetime | None) -> list[str]:
        """The text for ``ev`` (shared with the rich view)."""
        if isinstance(ev, LlamaEvent):
            self.llama_seen = True
            self.timing.first = self.timing.first or at
            if ev.event_type == STEP_STATE_EVENT and isinstance(ev.data, dict):
                key = (str(ev.data.get("name")), str(ev.data.get("worker_id")))
                if ev.data.get("step_state") == "running":
                    self.llama_running[key] = at
                elif ev.data.get("step_state") == "not_running":
                    self.llama_running.pop(key, None)
            return [f"  {llama_line(ev)}"] if shown(ev, self.internal) else []
        if isinstance(ev, LlamaRestEvent):
            return _rest_lines(ev, self.prog, self.run_id, self._told)
        took_s = self.timing.seen(ev, at)
        took = None if took_s is None else _duration(took_s, exact=event_time(ev) is not None)
        if isinstance(ev, WorkflowStartedEvent):
            return ["run started"]
        if isinstance(ev, WorkflowStatusEvent):
            state = str(getattr(ev.state, "value", ev.state)).lower()
            return [] if state == "in_progress" else [f"status: {state.replace('_', ' ')}"]
        if isinstance(ev, SuperStepStartedEvent):
            return [f"superstep {ev.superstep}: running {', '.join(ev.executor_ids)}"]
        if isinstance(ev, ExecutorInvokedEvent):
            return []
        if isinstance(ev, ExecutorCompletedEvent):
            where = f" on {ev.worker}" if ev.worker else ""
            return [f"  {ev.executor_id} done" + (f" in {took}" if took is not None else "") + where]
        if isinstance(ev, ExecutorFailedEvent):
            after = f" after {took}" if took is not None else ""
            where = f" on {ev.worker}" if ev.worker else ""
            return [f"  {ev.executor_id} failed{after}{where}: {ev.error_type}: {short(ev.error)}"]
        if isinstance(ev, SuperStepCompletedEvent):
            extra = [f"in {took}"] if took is not None else []
            if ev.state_keys_written:
                extra.append(f"wrote {', '.join(ev.state_keys_written)}")
            if ev.checkpoint_id:
                extra.append(f"checkpoint {ev.checkpoint_id}")
            return [f"superstep {ev.superstep} done" + (f" ({'; '.join(extra)})" if extra else "")]
        if isinstance(ev, WorkflowOutputEvent):
            return [f"  {_output_text(ev)}"]
        if isinstance(ev, RequestInfoEvent):
            deadline = f", answer within {_seconds(ev.timeout)}" if ev.timeout else ""
            return [
                f"  request {ev.request_id}{_from(ev)}: {_request_text(ev)}",
                f"    the run waits for a {_type_shown(ev.response_type)}{deadline}; answer it with:",
                f"    {self.prog} respond {self.run_id} {ev.request_id} '{answer_template(ev.response_schema)}'",
            ]
        if isinstance(ev, WorkflowWarningEvent):
            return [f"  warning: {ev.message}"]
        if isinstance(ev, WorkflowResetEvent | WorkflowFailedEvent):
            return [describe_event(ev) or ""]
        if isinstance(ev, RawEvent):
            return [f"  event {ev.event_type or ev.type}: {short(ev.data)}"]
        data = ev.model_dump(mode="json", exclude={"type", "timestamp"})
        return [f"  event {ev.type}: {short(data)}"]

    def event(self, ev: WorkflowEvent, at: datetime | None) -> None:
        for i, line in enumerate(self.lines(ev, at)):
            self._print(at if i == 0 else None, line)

    def retry(self, r: Retry, at: datetime) -> None:
        self._print(at, f"  retry: {_retry_text(r, at)}")

    def note(self, text: str) -> None:
        self._print(None, text)

    def done(self, result: dict[str, Any], at: datetime) -> None:
        took = f" in {_seconds((at - self.timing.first).total_seconds())}" if self.timing.first else ""
        if result.get("kind") == "llama_index":
            self._print(at, f"{result['status']}{took}: {short(result.get('result'))}")
            return
        self._print(at, f"{result['status']} after {result['superstep']} supersteps{took}")

    def close(self) -> None:
        pass


class JsonView:
    """``--json``: one object per line with ``time`` and ``type``; values whole."""

    def __init__(self, out: IO[str], run_id: str, prog: str, *, internal: bool = False) -> None:
        self.out, self.run_id, self.prog = out, run_id, prog
        self.internal = internal

    def _emit(self, record: dict[str, Any]) -> None:
        print(json.dumps(record, default=str, ensure_ascii=False), file=self.out, flush=True)

    def event(self, ev: WorkflowEvent, at: datetime | None) -> None:
        if not shown(ev, self.internal):
            return
        record = {"time": at.isoformat() if at else None, **ev.model_dump(mode="json")}
        if isinstance(ev, RequestInfoEvent):
            record["answer_with"] = [self.prog, "respond", self.run_id, ev.request_id, "<JSON>"]
        if isinstance(ev, LlamaRestEvent):
            record["status"] = "waiting_for_input" if ev.requests else "idle"
            for r, out in zip(ev.requests, record["requests"], strict=True):
                out["answer_with"] = [self.prog, "respond", self.run_id, r.request_id, "<JSON>"]
        self._emit(record)

    def retry(self, r: Retry, at: datetime) -> None:
        self._emit(
            {
                "time": at.isoformat(),
                "type": "step_retry",
                "executor_id": r.executor_id,
                "attempt": r.attempt,
                "maximum_attempts": r.maximum_attempts,
                "error": r.error,
                "next_attempt_at": r.next_at.isoformat() if r.next_at else None,
            }
        )

    def note(self, text: str) -> None:
        self._emit({"time": datetime.now(UTC).isoformat(), "type": "note", "message": text})

    def done(self, result: dict[str, Any], at: datetime) -> None:
        self._emit({"time": at.isoformat(), "type": "result", "workflow_id": self.run_id, **result})

    def close(self) -> None:
        pass


def _retries_from(desc: Any, graph: str) -> list[tuple[str, Retry]]:
    """(activity id + attempt, retry) for each step whose current attempt is not its first."""
    found = []
    for info in getattr(desc.raw_description, "pending_activities", []):
        if info.attempt < 2:
            continue
        name = info.activity_type.name
        executor_id = name[len(graph) + 1 :] if name.startswith(graph + ".") else name
        if graph == WORKFLOW_TYPE:  # a LlamaIndex step's activity: <workflow name>.<step>
            executor_id = name.rpartition(".")[2]
        failure = info.last_failure
        error = failure.message if failure is not None and failure.message else "(no message)"
        kind = failure.application_failure_info.type if failure is not None else ""
        next_at = None
        if info.HasField("next_attempt_schedule_time"):
            next_at = info.next_attempt_schedule_time.ToDatetime(tzinfo=UTC)
        retry = Retry(executor_id, info.attempt, info.maximum_attempts, f"{kind}: {error}" if kind else error, next_at)
        found.append((f"{info.activity_id}#{info.attempt}", retry))
    return found


async def _has_pollers(client: Client, task_queue: str) -> bool:
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    response = await client.workflow_service.describe_task_queue(request)
    return len(response.pollers) > 0


async def _watch_pending(
    handle: RunHandle, view: View, client: Client | None, activity: list[float], worker_hint: str | None
) -> None:
    """Report retries from the run's pending activities, and a task queue nobody polls, until cancelled."""
    seen: set[str] = set()
    warned = False
    while True:
        await asyncio.sleep(RETRY_POLL_SECONDS)
        try:
            desc = await handle.describe()
        except Exception:
            continue  # a transient RPC error: the next poll tries again; the stream reports real failures
        for key, retry in _retries_from(desc, desc.workflow_type):
            if key not in seen:
                seen.add(key)
                view.retry(retry, datetime.now(UTC))
        idle = time.monotonic() - activity[0]
        if client is not None and not warned and idle > NO_WORKER_AFTER_SECONDS and desc.task_queue:
            warned = True
            with contextlib.suppress(Exception):
                if not await _has_pollers(client, desc.task_queue):
                    start = worker_hint or f"a worker hosting {desc.workflow_type!r}"
                    view.note(
                        f"  no worker polls task queue {desc.task_queue!r}: the run waits for one; start {start} "
                        f"on that queue"
                    )


async def watch(
    handle: RunHandle,
    view: View,
    *,
    client: Client | None = None,
    retries: bool = True,
    worker_hint: str | None = None,
    live: bool = True,
) -> dict[str, Any]:
    """Show ``handle``'s events in ``view`` until the run closes; return its result.

    Args:
        client: Lets the watcher say when no worker polls the run's task queue.
        retries: Poll the run's pending activities for failed attempts.
        live: The run is open, so an event without a time of its own (a
            live item from a running step) is stamped with when it arrived
            (within the stream's poll interval); ``False`` (a closed run's
            stream read back) shows no time for those. The run's own events
            carry the workflow time they were published at.
        worker_hint: How to start a worker, for that message.

    Raises:
        WorkflowError: The run failed (the library's error for it), after its
            events were shown.
    """
    activity = [time.monotonic()]
    poller = asyncio.create_task(_watch_pending(handle, view, client, activity, worker_hint)) if retries else None
    try:
        async for ev in handle.events():
            activity[0] = time.monotonic()
            view.event(ev, event_time(ev) or (datetime.now(UTC) if live else None))
        result: dict[str, Any] = await handle.result()
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        view.close()
    closed_at = datetime.now(UTC)
    if not live:  # a closed run read back: it ended when Temporal closed it, not now
        with contextlib.suppress(Exception):
            closed_at = (await handle.describe()).close_time or closed_at
    view.done(result, closed_at)
    return result


async def follow(
    handle: RunHandle, out: IO[str] = sys.stdout, *, every_event: bool = False, prog: str = "temporal-workflows"
) -> dict[str, Any]:
    """Print the run's progress from its event stream as it happens; return its result.

    ``every_event`` prints the detailed view (times, durations, every event)
    instead of one line per superstep.
    """
    view: View = (DetailedView if every_event else CompactView)(out, handle.id, prog)
    return await watch(handle, view)
