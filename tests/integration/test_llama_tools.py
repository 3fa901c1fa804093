"""LlamaIndex runs (``TemporalRuntime``) in the project's CLI, on the dev server, with worker processes.

Every command a graph run has, for a LlamaIndex run, as a person at a terminal uses it: ``run`` (and
``--follow``), ``status``, ``requests``, ``respond``, ``send-event``, ``events`` (``--json``, ``--internal``),
``checkpoints`` and ``fork``; bad input refused with what the run accepts; the workers are
``temporal-workflows worker --workflow app:Flow`` processes, two of them on one queue.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("workflows")

from workflows.events import HumanResponseEvent, InputRequiredEvent

from temporal_workflows.temporal import get_run
from tests.integration import llama_tools_app as app
from tests.integration.ag_ui_support import Processes
from tests.integration.cli import ROOT, cli_env, run_cli
from tests.integration.llama_docs_examples import HumanInTheLoopWorkflow

APP = "tests.integration.llama_tools_app"


HOSTED = [arg for spec in app.SPECS for arg in ("--workflow", spec)]


@dataclass
class Fleet:
    queue: str
    procs: Processes


@pytest.fixture(scope="module")
async def fleet(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Fleet]:
    """Two ``temporal-workflows worker`` processes hosting the programs, on one queue of this module's own."""
    name = f"llama-tools-{uuid.uuid4().hex[:8]}"
    async with Processes(temporal_address, tmp_path_factory.mktemp("llama-tools")) as procs:
        await asyncio.gather(
            procs.worker("worker-1", *HOSTED, "--task-queue", name),
            procs.worker("worker-2", *HOSTED, "--task-queue", name),
        )
        yield Fleet(name, procs)


@pytest.fixture
def queue(fleet: Fleet) -> str:
    return fleet.queue


async def cli(address: str, *args: str) -> tuple[int, str, str]:
    return await run_cli(address, *args, timeout=120)


async def ok(address: str, *args: str) -> Any:
    """A command that must succeed and print JSON: its value."""
    code, out, err = await cli(address, *args)
    assert code == 0, (args, out, err)
    return json.loads(out)


async def refused(address: str, *args: str) -> str:
    """A command that must be refused (exit 1, nothing on stdout): its message."""
    code, out, err = await cli(address, *args)
    assert code == 1 and out == "", (args, code, out, err)
    return err


async def until_waiting(client: Any, run_id: str, timeout: float = 60) -> dict[str, Any]:
    """The run's status once it waits for input (a poll of its status query, as a watcher would)."""
    handle = get_run(client, run_id)
    async with asyncio.timeout(timeout):
        while True:
            try:
                status = await handle.status()
            except Exception:
                status = {}
            if status.get("status") == "waiting_for_input":
                return status
            await asyncio.sleep(0.2)


async def stream_event_names_in_process() -> list[str]:
    """What LlamaIndex's own default runtime streams for the docs' human-in-the-loop example, answered 42."""
    workflow = HumanInTheLoopWorkflow(timeout=30)
    handler = workflow.run()
    names = []
    async for event in handler.stream_events():
        names.append(type(event).__name__)
        if isinstance(event, InputRequiredEvent):
            handler.ctx.send_event(HumanResponseEvent(response="42"))
    assert await handler == "42"
    return names


async def test_the_docs_human_in_the_loop_example_run_watched_and_answered_from_the_cli(
    temporal_address: str, fleet: Fleet, client: Any
) -> None:
    queue = fleet.queue
    run_id = f"hitl-{uuid.uuid4().hex[:8]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        "run",
        f"{APP}:hitl",
        "--input",
        "{}",
        "--id",
        run_id,
        "--task-queue",
        queue,
        env=cli_env(temporal_address),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(90):  # `run` says it is waiting, and how to answer, while the run waits
        while not any("respond" in line for line in lines):
            line = (await proc.stdout.readline()).decode()
            assert line, lines
            lines.append(line.rstrip("\n"))
    assert lines[0] == f"started {run_id}"
    assert '  InputRequiredEvent {"prefix": "Enter a number: "}' in lines
    assert "  waiting for input" in lines
    assert '  request input-1: {"prefix": "Enter a number: "}' in lines
    assert lines[-1].endswith(f"respond {run_id} input-1 '{{\"response\": <string>}}'")

    status = await ok(temporal_address, "status", run_id)
    assert status["kind"] == "llama_index" and status["status"] == "waiting_for_input"
    assert status["workflow"] == "tests.integration.llama_docs_examples.HumanInTheLoopWorkflow"
    assert status["temporal_status"] == "RUNNING" and status["pending_requests"] == 1 and status["in_flight"] == []
    (request,) = await ok(temporal_address, "requests", run_id)
    assert request["request_id"] == "input-1" and request["data"] == {"prefix": "Enter a number: "}
    assert request["response_type"] == "workflows.events.HumanResponseEvent"
    assert request["response_schema"]["required"] == ["response"]  # a form for LlamaIndex's documented field
    # One worker dies while the run waits; the answer is taken by the other, which replays the run.
    await fleet.procs.kill("worker-1")
    answered = await ok(temporal_address, "respond", run_id, "input-1", '{"response": "42"}')
    assert answered == {"accepted": "workflows.events.HumanResponseEvent", "request_id": "input-1"}

    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines()[-1] == '"42"'  # what `await handler` returns, as LlamaIndex prints it

    # The stream read back: what stream_events() shows under LlamaIndex's default runtime, and the result.
    code, text, err_text = await cli(temporal_address, "events", run_id)
    assert code == 0, err_text
    assert '  InputRequiredEvent {"prefix": "Enter a number: "}' in text and '  StopEvent {"result": "42"}' in text
    assert text.splitlines()[-1].endswith('completed: "42"')
    code, text, _ = await cli(temporal_address, "events", run_id, "--json")
    records = [json.loads(line) for line in text.splitlines()]
    names = [r["name"] for r in records if r["type"] == "llama_event"]
    assert names == await stream_event_names_in_process() == ["InputRequiredEvent", "StopEvent"]
    assert records[-1]["type"] == "result" and records[-1]["result"] == "42"
    code, text, _ = await cli(temporal_address, "events", run_id, "--internal")
    assert "StepStateChanged" in text and "WorkflowIdleEvent" in text  # as stream_events(expose_internal=True)
    status = await ok(temporal_address, "status", run_id)
    assert status["status"] == "completed" and status["pending_requests"] == 0
    await fleet.procs.worker("worker-1", *HOSTED, "--task-queue", queue)  # the fleet back to two


async def test_bad_input_to_a_llamaindex_run_is_refused_naming_what_it_accepts(
    temporal_address: str, queue: str, client: Any
) -> None:
    run_id = f"review-{uuid.uuid4().hex[:8]}"
    started = await cli(
        temporal_address, "run", f"{APP}:review", "--input", '{"topic": "bees"}', "--id", run_id, "--no-wait",
        "--task-queue", queue,
    )  # fmt: skip
    assert started[0] == 0 and started[1].strip() == f"started {run_id}", started
    await until_waiting(client, run_id)

    wrong_name = await refused(temporal_address, "send-event", run_id, "Approvl", '{"approved": true, "score": 3}')
    assert "'Approvl' is not one this run accepts" in wrong_name
    assert "accepted: tests.integration.llama_tools_app.Approval" in wrong_name
    wrong_shape = await refused(temporal_address, "respond", run_id, "input-1", '{"approved": true, "score": 9}')
    assert "score" in wrong_shape and "less than or equal to 5" in wrong_shape and "9" not in wrong_shape
    not_an_object = await refused(temporal_address, "send-event", run_id, "Approval", "[1]")
    assert "a JSON object of its fields" in not_an_object
    unknown = await refused(temporal_address, "respond", run_id, "input-7", '{"approved": true, "score": 3}')
    assert "no pending request with id 'input-7'; pending request ids: ['input-1']" in unknown
    no_run = await refused(temporal_address, "respond", f"no-such-{run_id}", "input-1", "{}")
    assert f"no run 'no-such-{run_id}'" in no_run
    for command in (("send", run_id, "ask", "{}"), ("reset", run_id), ("close", run_id), ("checkpoint", run_id)):
        assert "is for graph runs; a LlamaIndex run" in await refused(temporal_address, *command)
    # By signal (the `temporal` CLI's way): not refused, but dropped with a warning the run shows.
    signalled = await ok(temporal_address, "send-event", run_id, "Approval", '{"approved": "maybe"}', "--signal")
    assert signalled == {"signalled": True}
    handle = get_run(client, run_id)
    async with asyncio.timeout(30):
        while not (await handle.status())["warnings"]:
            await asyncio.sleep(0.2)
    (warning,) = (await handle.status())["warnings"]
    assert "dropped a send_event signal" in warning["message"] and "maybe" not in warning["message"]

    # Nothing refused changed the run: it waits for the same request, and takes a good answer.
    status = await ok(temporal_address, "status", run_id)
    assert status["status"] == "waiting_for_input" and status["pending_requests"] == 1
    accepted = await ok(temporal_address, "send-event", run_id, "Approval", '{"approved": true, "score": 4}')
    assert accepted == {"accepted": "tests.integration.llama_tools_app.Approval"}
    assert (await handle.result())["result"] == "approved (4/5)"
    assert await handle.state() == {"topic": "bees", "score": 4}
    ended = await refused(temporal_address, "send-event", run_id, "Approval", '{"approved": true, "score": 4}')
    assert f"run '{run_id}' has completed: it takes no more input" in ended


async def test_run_follow_shows_the_stream_and_a_failure_reads_as_llamaindex_raised_it(
    temporal_address: str, queue: str
) -> None:
    where = ("--task-queue", queue)
    code, out, err = await cli(temporal_address, "run", f"{APP}:streaming", "--input", "{}", "--follow", *where)
    assert code == 0, err
    progress = [line.split("ProgressEvent ", 1)[1] for line in out.splitlines() if "ProgressEvent " in line]
    assert [json.loads(p)["msg"] for p in progress] == [
        "Step one is happening", "It was ", "the best ", "of times", "Step three is happening"
    ]  # fmt: skip
    assert out.splitlines()[-1] == '"Workflow complete."'

    run_id = f"broken-{uuid.uuid4().hex[:8]}"
    code, out, err = await cli(temporal_address, "run", f"{APP}:broken", "--input", "{}", "--id", run_id, *where)
    assert code == 1 and f"run {run_id} failed: KeyError: 'missing-key'" in err, (out, err)
    status = await ok(temporal_address, "status", run_id)
    assert status["temporal_status"] == "FAILED"
    assert status["failure"]["message"] == "KeyError: 'missing-key'"
    assert status["failure"]["error_type"] == "builtins.KeyError"


async def test_a_waiter_is_a_request_and_the_runs_context_forks_a_new_run(
    temporal_address: str, queue: str, client: Any
) -> None:
    run_id = f"wait-{uuid.uuid4().hex[:8]}"
    started = await cli(
        temporal_address, "run", f"{APP}:wait", "--input", "{}", "--id", run_id, "--no-wait", "--task-queue", queue
    )
    assert started[0] == 0, started
    await until_waiting(client, run_id)
    (request,) = await ok(temporal_address, "requests", run_id)
    assert request["request_id"] == "get_number" and request["source_executor_id"] == "ask_user"  # the waiter
    assert request["data"] == {"prefix": "Enter a number: "}  # its waiter_event

    (checkpoint,) = await ok(temporal_address, "checkpoints", run_id)
    assert checkpoint["checkpoint_id"] == "now" and checkpoint["forkable"] and not checkpoint["resettable"]
    fork_id = f"{run_id}-fork"
    forked = await ok(temporal_address, "fork", "now", "--from", run_id, "--id", fork_id)
    assert forked == {"started": fork_id, "forked_from": {"workflow_id": run_id, "checkpoint_id": "now"}}
    await until_waiting(client, fork_id)  # LlamaIndex re-runs a waiting step of a restored context: it asks again
    (again,) = await ok(temporal_address, "requests", fork_id)
    assert again["request_id"] == "get_number"
    await ok(temporal_address, "respond", fork_id, "get_number", '{"response": "7"}')
    assert await get_run(client, fork_id).outputs() == ["7"]
    assert (await get_run(client, run_id).status())["status"] == "waiting_for_input"  # the source is untouched
    await ok(temporal_address, "respond", run_id, "get_number", '{"response": "44"}')
    assert await get_run(client, run_id).outputs() == ["44"]
    unknown = await refused(temporal_address, "fork", "cp-1", "--from", run_id, "--id", f"{run_id}-2")
    assert "one checkpoint, 'now'" in unknown
    completed = await refused(temporal_address, "fork", "now", "--from", run_id, "--id", f"{run_id}-3")
    assert "has completed" in completed
