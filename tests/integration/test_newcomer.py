"""A newcomer's first hour on Temporal, against the session's dev server: what the CLI shows and says.

Watching a run (times, durations, retries as they happen, the command that
answers a waiting run, JSON lines), leaving it with Ctrl-C (it goes on), a
closed pipe, a run another worker took, a task queue nobody polls, a TOML
profile followed as ``temporal`` follows it, the status search attribute of a
segment that continued as new, and a worker shut down mid-step without
OpenTelemetry errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from temporal_workflows.errors import RunClosedError
from temporal_workflows.temporal import get_run, start_run
from temporal_workflows.temporal._client.devserver import temporal_cli_path
from tests.conftest import TASK_QUEUE
from tests.integration.cli import ROOT, cli_env, run_cli
from tests.integration.runs import terminate_if_running

pytestmark = pytest.mark.usefixtures("worker")

STAMP = r"\d\d:\d\d:\d\d\.\d{3}"


async def _spawn(address: str, *args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        *args,
        env=cli_env(address, env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _read_until(proc: asyncio.subprocess.Process, needle: str, timeout: float = 30) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    while not any(needle in line for line in lines):
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout)).decode()
        assert line, f"output ended before {needle!r}: {lines}"
        lines.append(line)
    return lines


async def test_follow_shows_times_durations_and_a_retry_as_it_happens(temporal_address: str, workflow_id: str) -> None:
    code, out, err = await run_cli(
        temporal_address,
        *("run", "tests.integration.newcomer_graphs:retry_once", "--input", '"hello"'),
        *("--id", workflow_id, "--task-queue", TASK_QUEUE, "--follow", "--plain"),
    )
    assert code == 0, err
    assert re.search(rf"^{STAMP}  superstep 1: running shaky$", out, re.M), out
    retry = re.search(
        rf"^{STAMP}    retry: shaky attempt 1 failed: .*the model API timed out; attempt 2 of 3 at {STAMP} \(in ",
        out,
        re.M,
    )
    assert retry, out  # seen while the run waited for the second attempt, with its time
    # The whole step, retries included, exact: the events carry the workflow time they were published at.
    assert re.search(rf"^{STAMP}    shaky done in [\d.]+ s on \d+@\S+$", out, re.M), out  # and on which worker
    assert re.search(rf"^{STAMP}  completed after 1 supersteps in ", out, re.M), out
    assert json.loads(out[out.index("\n[\n") :]) == ["hello (attempt 2)"]


async def test_json_lines_for_programs(client: Client, temporal_address: str, workflow_id: str) -> None:
    from examples import research

    code, out, err = await run_cli(
        temporal_address,
        *("run", "examples.research:workflow", "--input", research.SAMPLE_INPUT.model_dump_json()),
        *("--id", workflow_id, "--task-queue", TASK_QUEUE, "--json"),
    )
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0] == {"type": "run_started", "workflow_id": workflow_id, "task_queue": TASK_QUEUE}
    assert {"superstep_started", "executor_invoked", "executor_completed", "output"} <= {r["type"] for r in records}
    assert all(r["time"] for r in records[1:])
    assert records[-1]["type"] == "result" and records[-1]["status"] == "completed"
    code, out, err = await run_cli(temporal_address, "events", workflow_id, "--json")
    assert code == 0, err
    replayed = [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in replayed] == [r["type"] for r in records[1:]]
    # Each event carries the workflow time it was published at: read back after the run closed, the same times
    # as seen live, in order; the result is stamped with when the run closed, not with when `events` ran.
    times = [r["time"] for r in replayed[:-1]]
    assert all(times) and times == sorted(times) and times == [r["time"] for r in records[1:-1]]
    closed = (await get_run(client, workflow_id).describe()).close_time
    assert closed is not None and replayed[-1]["time"] == closed.isoformat() >= times[-1]
    code, out, err = await run_cli(temporal_address, "events", workflow_id, "--plain")
    assert code == 0, err
    assert all(re.match(rf"^{STAMP}  ", line) for line in out.splitlines() if line.strip()), out


async def test_status_of_a_failed_run_shows_the_failure(temporal_address: str, workflow_id: str) -> None:
    code, out, err = await run_cli(
        temporal_address,
        *("run", "tests.integration.newcomer_graphs:fails", "--input", '"hello"'),
        *("--id", workflow_id, "--task-queue", TASK_QUEUE),
    )
    assert code != 0, out
    code, out, err = await run_cli(temporal_address, "status", workflow_id)
    assert code == 0, err
    status = json.loads(out)
    assert status["temporal_status"] == "FAILED" and status["closed_at"]
    failure = status["failure"]
    assert failure["error"] == "ExecutorFailedError" and failure["executor_id"] == "broken"
    assert failure["superstep"] == 1 and failure["error_type"] == "ValueError"
    assert "no such city" in failure["message"] and failure["detail"] == "no such city"


async def test_a_waiting_run_says_how_to_answer_and_ctrl_c_leaves_it_running(
    client: Client, temporal_address: str, workflow_id: str
) -> None:
    from examples import approval

    proc = await _spawn(
        temporal_address,
        *("run", "examples.approval:workflow", "--input", approval.SAMPLE_INPUT.model_dump_json()),
        *("--id", workflow_id, "--task-queue", TASK_QUEUE, "--follow", "--plain"),
    )
    try:
        lines = await _read_until(proc, " respond ")
        command = lines[-1].split()
        assert command[:3] == ["python", "-m", "temporal_workflows"] and command[3:5] == ["respond", workflow_id]
        assert "the run waits for a ReviewDecision" in lines[-2]
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 130, err
    text = err.decode()
    assert "Traceback" not in text and len(text.strip().splitlines()) == 2, text
    assert f"stopped following run {workflow_id}; the run goes on" in text
    assert f"events {workflow_id}" in text
    handle = get_run(client, workflow_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    # The printed command, with a real answer in place of the template, answers it.
    code, out, err = await run_cli(temporal_address, "respond", workflow_id, command[5], '{"approved": true}')
    assert code == 0 and json.loads(out)["accepted"] is True, err
    code, out, err = await run_cli(temporal_address, "events", workflow_id)
    assert code == 0, err
    assert "completed after" in out.splitlines()[-1]

    # Answering (or checkpointing) the completed run says it has completed, not that there is no such run.
    for args in (("respond", workflow_id, command[5], '{"approved": true}'), ("checkpoint", workflow_id)):
        code, out, err = await run_cli(temporal_address, *args)
        assert code == 1 and len(err.strip().splitlines()) == 2, err
        assert f"run {workflow_id!r} has completed: it takes no more input" in err, err
        assert f"hint: `temporal-workflows status {workflow_id}` shows how it ended" in err, err
    # In Python: the library's named error, not the server's RPCError.
    with pytest.raises(RunClosedError, match="has completed"):
        await handle.respond(command[5], {"approved": True})
    with pytest.raises(RunClosedError, match="has completed"):
        await handle.checkpoint("late")


async def test_forking_into_an_id_that_is_running_says_so(
    client: Client, temporal_address: str, workflow_id: str
) -> None:
    from examples import approval

    handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    try:
        taken = await handle.checkpoint("here")
        assert taken is not None
        args = ("fork", taken["checkpoint_id"], "--from", workflow_id, "--id", workflow_id)
        code, out, err = await run_cli(temporal_address, *args)
        assert code == 1, out + err
        assert f"a run with id {workflow_id!r} already exists" in err and "choose another id (--id)" in err, err
        assert "unexpected error" not in err
    finally:
        await handle.handle.terminate("done")


async def test_a_reader_that_goes_away_is_no_traceback(client: Client, workflow_id: str, temporal_address: str) -> None:
    from examples import research

    await (
        await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    ).result()
    read, write = os.pipe()
    os.close(read)  # `status ... | head` after head has exited
    try:
        # Not subprocess.run: the session worker, in this event loop, answers the status query.
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "temporal_workflows", "status", workflow_id),
            cwd=ROOT,
            env=cli_env(temporal_address),
            stdout=write,
            stderr=subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        os.close(write)
    assert proc.returncode == 141 and err == b"", err.decode()


async def test_a_run_taken_by_a_worker_that_does_not_host_it_says_so(temporal_address: str, workflow_id: str) -> None:
    # The session worker polls TASK_QUEUE but hosts no graph of this name: the README's old order in small.
    code, _, err = await run_cli(
        temporal_address,
        "run",
        "hosted_by_another_worker",
        "--input",
        "1",
        "--id",
        workflow_id,
        "--task-queue",
        TASK_QUEUE,
    )
    assert code == 1 and "Traceback" not in err, err
    assert "UnknownGraphError" in err or "no graph named 'hosted_by_another_worker'" in err
    assert f"another worker on task queue {TASK_QUEUE!r} took the run" in err


async def test_a_task_queue_nobody_polls_is_said(client: Client, temporal_address: str, workflow_id: str) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:6]}"
    proc = await _spawn(
        temporal_address,
        *("run", "examples.research:workflow", "--input", '{"topic": "bees"}', "--id", workflow_id),
        *("--task-queue", queue, "--follow", "--plain"),
    )
    try:
        lines = await _read_until(proc, "no worker polls task queue", timeout=30)
        assert f"worker --workflow examples.research:workflow --task-queue {queue}" in lines[-1]
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
        await terminate_if_running(client.get_workflow_handle(workflow_id))


async def test_a_profile_is_followed_as_the_temporal_cli_follows_it(
    tmp_path: Path, client: Client, temporal_address: str, workflow_id: str
) -> None:
    from examples import research

    await (
        await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    ).result()
    config = tmp_path / "temporal.toml"
    config.write_text(
        f'[profile.default]\naddress = "127.0.0.1:1"\n\n[profile.local]\naddress = "{temporal_address}"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "local"}
    code, out, err = await run_cli(None, "status", workflow_id, env=env)  # no TEMPORAL_ADDRESS: the profile's
    assert code == 0, err
    assert json.loads(out)["status"] == "completed"
    theirs = await asyncio.create_subprocess_exec(
        *(temporal_cli_path(), "workflow", "describe", "--workflow-id", workflow_id),
        env=cli_env(None, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, their_err = await asyncio.wait_for(theirs.communicate(), 60)
    assert theirs.returncode == 0, their_err.decode()  # `temporal` reaches the same server with the same settings
    code, _, err = await run_cli(None, "--profile", "default", "status", workflow_id, env=env)
    assert code == 1 and "no Temporal server is listening at 127.0.0.1:1" in err


async def test_a_segment_that_continued_as_new_no_longer_counts_as_waiting(client: Client, workflow_id: str) -> None:
    from examples import approval

    handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    try:
        await _until(lambda: _statuses(client, workflow_id), lambda s: s == {"Running": ["waiting_for_input"]})
        await handle.reset(wait=True)  # a reset continues as new at once; the new segment waits again
        settled = await _until(
            lambda: _statuses(client, workflow_id),
            lambda s: s.get("Running") == ["waiting_for_input"] and bool(s.get("ContinuedAsNew")),
        )
        assert settled["ContinuedAsNew"] == ["continued_as_new"]
        query = f'WorkflowId = "{workflow_id}" AND GraphRunStatus = "waiting_for_input" AND ExecutionStatus = "Running"'
        assert len([w async for w in client.list_workflows(query)]) == 1
    finally:
        await terminate_if_running(client.get_workflow_handle(workflow_id))


async def _statuses(client: Client, workflow_id: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    async for w in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        status = w.search_attributes.get("GraphRunStatus") or [""]
        found.setdefault(w.status.name.title().replace("_", "") if w.status else "?", []).extend(map(str, status))
    return found


async def _until(read: object, done: object, seconds: float = 20) -> dict[str, list[str]]:
    deadline = asyncio.get_running_loop().time() + seconds
    last: dict[str, list[str]] = {}
    while asyncio.get_running_loop().time() < deadline:
        last = await read()  # type: ignore[operator]
        if done(last):  # type: ignore[operator]
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"visibility never showed it: {last}")


async def test_a_worker_shut_down_mid_step_closes_its_spans_without_errors(
    client: Client, temporal_address: str
) -> None:
    queue, workflow_id = f"shutdown-{uuid.uuid4().hex[:6]}", f"test-{uuid.uuid4().hex[:12]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.shutdown_mid_step",
        temporal_address,
        queue,
        workflow_id,
        env=cli_env(temporal_address),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        await terminate_if_running(client.get_workflow_handle(workflow_id))
    assert proc.returncode == 0 and out.decode().strip() == "collected", err.decode()
    assert "Failed to detach context" not in err.decode(), err.decode()
