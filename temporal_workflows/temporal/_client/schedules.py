"""Runs on a schedule: Temporal Schedules, each scheduled run a normal run of the graph.

A schedule is Temporal's own (``client.create_schedule``): the server keeps
the calendar, starts each run, applies the overlap policy, and survives every
worker and client restart; nothing of ours loops or sleeps. Its action starts
the graph's workflow with the start input :func:`~.client.start_input` builds,
the same one :func:`~.client.start_run` sends, so a scheduled run is
indistinguishable from one started by hand, except that Temporal names its
schedule in the run's ``TemporalScheduledById`` search attribute (the console
and ``temporal-workflows status`` show it).

    handle = await create_schedule(client, research, {"topic": "bees"}, cron="0 9 * * 1-5", overlap="skip")
    await handle.trigger()            # one run now
    await handle.pause(note="holiday")

The handle returned is the SDK's :class:`temporalio.client.ScheduleHandle`
(``describe``, ``pause``, ``unpause``, ``trigger``, ``update``, ``delete``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleListDescription,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._errors import ScheduleError, ScheduleNotFoundError
from temporal_workflows.temporal._client.client import _graph_name, start_input
from temporal_workflows.temporal._protocol import MAX_ID_CHARS
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = [
    "OVERLAP_POLICIES",
    "SCHEDULED_BY_ATTRIBUTE",
    "SCHEDULE_MEMO",
    "Overlap",
    "ScheduleError",
    "ScheduleNotFoundError",
    "create_schedule",
    "describe_schedule",
    "get_schedule",
    "list_schedules",
    "schedule_json",
]

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]
"""What a schedule does when a run is due while the previous one still runs (Temporal's overlap policies)."""

OVERLAP_POLICIES: tuple[str, ...] = get_args(Overlap)

_OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}

SCHEDULE_MEMO = "temporal_workflows.schedule"
"""Memo key of a schedule this library made: its calendar as given (``{"cron": [...], "every_seconds": n}``).

Temporal turns cron text into calendar structures; the text a person wrote is kept here to show it back."""

SCHEDULED_BY_ATTRIBUTE = "TemporalScheduledById"
"""The search attribute Temporal sets on every run a schedule started: the schedule's id."""


def overlap_policy(overlap: str) -> ScheduleOverlapPolicy:
    """Temporal's overlap policy for one of :data:`OVERLAP_POLICIES`.

    Raises:
        ScheduleError: an unknown name, listing the known ones.
    """
    try:
        return _OVERLAP[overlap]
    except (KeyError, TypeError):
        raise ScheduleError(f"unknown overlap policy {overlap!r}; one of: {', '.join(OVERLAP_POLICIES)}") from None


def _check_cron(cron: Sequence[str]) -> list[str]:
    """Cron strings as Temporal takes them; an obviously malformed one is refused here, naming it.

    Temporal parses the calendar itself (5 fields, optional seconds and year,
    names, ``@daily``/``@every 1h``, ``CRON_TZ=``) and refuses what it cannot
    read; this catches what is surely wrong before a round trip.
    """
    checked = []
    for c in cron:
        if not isinstance(c, str) or not c.strip():
            raise ScheduleError(f"cron must be a non-empty string like '0 9 * * 1-5', not {c!r}")
        text = c.strip()
        body = text.split(None, 1)[1] if text.startswith("CRON_TZ=") and " " in text else text
        if not body.startswith("@") and not 5 <= len(body.split()) <= 7:
            raise ScheduleError(
                f"cron {text!r} has {len(body.split())} fields; a cron expression has 5 "
                "(minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'"
            )
        checked.append(text)
    return checked


def _refusal(e: RPCError, schedule_id: str) -> ScheduleError:
    if e.status == RPCStatusCode.NOT_FOUND:
        return ScheduleNotFoundError(f"no schedule {schedule_id!r} in this namespace")
    if e.status == RPCStatusCode.INVALID_ARGUMENT:
        return ScheduleError(f"Temporal refused schedule {schedule_id!r}: {e.message}")
    return ScheduleError(f"schedule {schedule_id!r}: {e.message}")


async def create_schedule(
    client: Client,
    workflow: Workflow | str,
    message: Any = None,
    *,
    cron: str | Sequence[str] | None = None,
    every: timedelta | None = None,
    id: str | None = None,
    overlap: Overlap = "skip",
    task_queue: str = DEFAULT_TASK_QUEUE,
    paused: bool = False,
    note: str | None = None,
    time_zone: str | None = None,
    catchup_window: timedelta | None = None,
    start_options: Mapping[str, Any] | None = None,
) -> ScheduleHandle:
    """Create a Temporal Schedule that starts a run of ``workflow`` with ``message`` on a calendar.

    Args:
        cron: One cron expression or several (``"0 9 * * 1-5"``: 09:00 on weekdays).
        every: Or an interval (``timedelta(hours=1)``); at least one of the two.
        id: The schedule's id (default ``<graph>-schedule-<random>``); each run's
            workflow id is ``<id>-<time it was due>`` (Temporal's).
        overlap: When a run is due while the last one still runs: ``"skip"`` it
            (the default), ``"buffer_one"`` (run it after), ``"buffer_all"``,
            ``"cancel_other"``, ``"terminate_other"`` or ``"allow_all"``.
        task_queue: Where the runs go (a worker hosting the graph polls it).
        paused: Create it paused (``unpause`` it later).
        note: A note shown with the schedule (why it is paused, who owns it).
        time_zone: The IANA zone the cron is read in (default UTC).
        catchup_window: How late a missed run may still start after the server
            was down (Temporal's default: a year).
        start_options: :func:`~.client.start_run`'s options for every run
            (``keep_alive``, ``checkpoint_every``, ``max_steps_in_flight``, ...),
            checked now as :func:`~.client.start_run` checks them.

    Raises:
        ScheduleError: a malformed calendar or overlap policy, a taken id, or
            a calendar Temporal refuses (its words).
        PayloadTooLargeError, InvalidRunInputError, ValueError: the start input,
            as :func:`~.client.start_run` would refuse it.
    """
    name = _graph_name(workflow)
    crons = _check_cron([cron] if isinstance(cron, str) else list(cron or []))
    if not crons and every is None:
        raise ScheduleError("a schedule needs cron= (e.g. '0 9 * * 1-5') or every= (e.g. timedelta(hours=1))")
    if every is not None and every <= timedelta(0):
        raise ScheduleError(f"every must be a positive interval, not {every}")
    policy = overlap_policy(overlap)
    arg = start_input(workflow, message, **dict(start_options or {}))
    schedule_id = id or f"{name}-schedule-{uuid.uuid4().hex[:8]}"
    if not schedule_id.strip() or len(schedule_id) > MAX_ID_CHARS:
        raise ScheduleError(f"a schedule id has 1 to {MAX_ID_CHARS} characters")
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(name, arg, id=f"{schedule_id}-run", task_queue=task_queue),
        spec=ScheduleSpec(
            cron_expressions=crons,
            intervals=[ScheduleIntervalSpec(every=every)] if every is not None else [],
            time_zone_name=time_zone,
        ),
        policy=SchedulePolicy(overlap=policy, catchup_window=catchup_window or SchedulePolicy().catchup_window),
        state=ScheduleState(paused=paused, note=note),
    )
    given: dict[str, Any] = {"cron": crons} if crons else {}
    if every is not None:
        given["every_seconds"] = every.total_seconds()
    try:
        return await client.create_schedule(schedule_id, schedule, memo={SCHEDULE_MEMO: given})
    except ScheduleAlreadyRunningError:
        raise ScheduleError(f"a schedule {schedule_id!r} already exists; pick another id or delete it") from None
    except RPCError as e:
        raise _refusal(e, schedule_id) from None


async def get_schedule(client: Client, schedule_id: str) -> ScheduleHandle:
    """The handle of an existing schedule (checked: it exists).

    Raises:
        ScheduleNotFoundError: no schedule has this id.
    """
    handle = client.get_schedule_handle(schedule_id)
    try:
        await handle.describe()
    except RPCError as e:
        raise _refusal(e, schedule_id) from None
    return handle


async def describe_schedule(client: Client, schedule_id: str) -> dict[str, Any]:
    """A schedule as JSON (:func:`schedule_json`), with its recent and next runs.

    Raises:
        ScheduleNotFoundError: no schedule has this id.
    """
    try:
        desc = await client.get_schedule_handle(schedule_id).describe()
    except RPCError as e:
        raise _refusal(e, schedule_id) from None
    return schedule_json(desc, await _memo(desc))


async def _memo(item: ScheduleDescription | ScheduleListDescription) -> dict[str, Any]:
    try:
        value = await item.memo_value(SCHEDULE_MEMO, None)
    except Exception:  # a memo this library did not write, or cannot decode here
        return {}
    return value if isinstance(value, dict) else {}


async def list_schedules(client: Client, *, limit: int = 1000) -> list[dict[str, Any]]:
    """The namespace's schedules that start graph runs, as JSON (:func:`schedule_json`), at most ``limit``.

    Read from Temporal's visibility, which lags a create or delete by a moment.
    """
    listed: list[dict[str, Any]] = []
    async for item in await client.list_schedules():
        listed.append(schedule_json(item, await _memo(item)))
        if len(listed) >= limit:
            break
    return listed


def _iso(t: datetime | None) -> str | None:
    if t is None:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).isoformat()


def _spec_json(spec: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    crons = list(getattr(spec, "cron_expressions", []) or []) or list(given.get("cron") or [])
    if crons:
        out["cron"] = crons
    intervals = getattr(spec, "intervals", None) or []
    if intervals:
        out["every_seconds"] = [i.every.total_seconds() for i in intervals]
    calendars = getattr(spec, "calendars", None) or []
    if calendars and not crons:
        out["calendars"] = len(calendars)  # (the server turns cron into calendars; a list shows those)
    zone = getattr(spec, "time_zone_name", None)
    if zone:
        out["time_zone"] = zone
    return out


def schedule_json(
    item: ScheduleDescription | ScheduleListDescription, given: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the CLI prints and the console shows of a schedule.

    ``{"id", "workflow", "task_queue"?, "spec": {"cron"?, "every_seconds"?, "time_zone"?}, "overlap"?,
    "paused", "note", "next_runs": [iso, ...], "recent_runs": [{"workflow_id", "scheduled_at",
    "started_at"}], "running": [workflow ids]?}``
    """
    schedule = item.schedule
    action = schedule.action if schedule is not None else None
    info = item.info
    out: dict[str, Any] = {"id": item.id}
    if isinstance(action, ScheduleActionStartWorkflow):
        out["workflow"] = action.workflow
        out["task_queue"] = action.task_queue
    else:
        out["workflow"] = getattr(action, "workflow", None)
    out["spec"] = _spec_json(schedule.spec, given or {}) if schedule is not None else {}
    policy = getattr(schedule, "policy", None)
    if policy is not None:
        out["overlap"] = next((k for k, v in _OVERLAP.items() if v == policy.overlap), None)
    state = schedule.state if schedule is not None else None
    out["paused"] = bool(state.paused) if state is not None else False
    out["note"] = (state.note if state is not None else None) or None
    out["next_runs"] = [_iso(t) for t in (getattr(info, "next_action_times", None) or [])[:5]]
    out["recent_runs"] = [
        {
            "workflow_id": getattr(a.action, "workflow_id", None),
            "scheduled_at": _iso(a.scheduled_at),
            "started_at": _iso(a.started_at),
        }
        for a in (getattr(info, "recent_actions", None) or [])
    ]
    running = getattr(info, "running_actions", None)
    if running is not None:
        out["running"] = [a.workflow_id for a in running]
    return out
