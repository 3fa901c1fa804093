"""Graphs hosted on a real Temporal dev server: parity, failures, history shape."""

from __future__ import annotations

import asyncio
import importlib
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from temporal_workflows._engine.serde import encode
from temporal_workflows.temporal import start_run
from tests.conftest import TASK_QUEUE
from tests.integration import graphs
from tests.integration.cli import run_cli

pytestmark = pytest.mark.usefixtures("worker")

# Examples that complete without outside input (the approval flow needs human input on Temporal).
SELF_DRIVING_EXAMPLES = ["research", "counter_loop"]


async def _history(client: Client, workflow_id: str) -> Any:
    return await client.get_workflow_handle(workflow_id).fetch_history()


@pytest.mark.parametrize("name", SELF_DRIVING_EXAMPLES)
async def test_examples_match_in_process_run(client: Client, name: str, workflow_id: str) -> None:
    module = importlib.import_module(f"examples.{name}")
    local = await module.build().run(module.SAMPLE_INPUT)
    handle = await start_run(client, module.workflow, module.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    remote = await handle.result()
    assert remote["status"] == "completed"
    assert remote["outputs"] == [encode(o).data for o in local.get_outputs()]
    assert await handle.state() == {k: encode(v).data for k, v in local.state.items()}
    assert await handle.outputs() == local.get_outputs()  # types restored on the client


async def test_plain_sdk_start_with_json_input(client: Client, workflow_id: str) -> None:
    from examples import research

    message = encode(research.SAMPLE_INPUT).data
    result = await client.execute_workflow(
        "research", {"message": message}, id=workflow_id, task_queue=TASK_QUEUE, result_type=dict
    )
    local = await research.build().run(research.SAMPLE_INPUT)
    assert result["outputs"] == [encode(o).data for o in local.get_outputs()]


async def test_every_step_is_an_activity_named_graph_dot_executor(client: Client, workflow_id: str) -> None:
    from examples import research

    handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    await handle.result()
    history = await _history(client, workflow_id)
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    types = {a.activity_type.name for a in scheduled}
    assert types == {f"research.{eid}" for eid in research.workflow.executors}
    # The Web UI lists each step as "<superstep>.<index>.<executor>": the planner first, then the researchers.
    ids = [a.activity_id for a in scheduled]
    assert ids[0] == "1.0.planner"
    assert sorted(ids[1:4]) == sorted(f"2.{i}.{e}" for i, e in enumerate(research.RESEARCHERS))


async def test_max_cached_workflows_zero_replays_every_task(client: Client) -> None:
    """A worker that caches nothing replays the whole history on every task."""
    queue = f"nocache-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, max_cached_workflows=0):
        for name in SELF_DRIVING_EXAMPLES:
            module = importlib.import_module(f"examples.{name}")
            local = await module.build().run(module.SAMPLE_INPUT)
            handle = await start_run(client, module.workflow, module.SAMPLE_INPUT, task_queue=queue)
            remote = await handle.result()
            assert remote["outputs"] == [encode(o).data for o in local.get_outputs()]


async def _failure(client: Client, graph: str, message: Any, workflow_id: str) -> ApplicationError:
    handle = await client.start_workflow(graph, {"message": message}, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), timeout=30)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def test_state_conflict_fails_the_run_naming_key_and_executors(client: Client, workflow_id: str) -> None:
    cause = await _failure(client, "it_conflict", "go", workflow_id)
    assert cause.type == "StateConflictError"
    assert "'owner'" in cause.message and "'left'" in cause.message and "'right'" in cause.message
    assert "superstep 2" in cause.message


async def test_superstep_limit_fails_the_run(client: Client, workflow_id: str) -> None:
    cause = await _failure(client, "it_endless", 0, workflow_id)
    assert cause.type == "SuperstepLimitError"
    assert "max_iterations=5" in cause.message


async def test_undeliverable_message_fails_without_retrying(client: Client, workflow_id: str) -> None:
    cause = await _failure(client, "it_undeliverable", "hello", workflow_id)
    assert cause.type == "ExecutorFailedError"
    assert "'talker'" in cause.message and "superstep 1" in cause.message
    assert cause.message.count("UndeliverableMessageError") == 1 and "'listener'" in cause.message
    history = await _history(client, workflow_id)
    started = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert all(e.activity_task_started_event_attributes.attempt == 1 for e in started)


async def test_handler_non_retryable_error_fails_the_run(client: Client, workflow_id: str) -> None:
    cause = await _failure(client, "it_fatal", "order-7", workflow_id)
    assert "'refuse'" in cause.message and "Refused" in cause.message and "order-7" in cause.message


async def test_unknown_workflow_name_fails_clearly(client: Client, workflow_id: str) -> None:
    cause = await _failure(client, "no_such_graph", "x", workflow_id)
    assert cause.type == "UnknownGraph" or "no graph named 'no_such_graph'" in str(cause)


async def test_wrong_start_input_type_fails_naming_the_start_executor(client: Client, workflow_id: str) -> None:
    cause = await _failure(client, "it_big_state", "not a blob", workflow_id)
    assert "'fill'" in cause.message and "superstep 1" in cause.message


async def test_idempotency_key_is_stable_across_retries(client: Client, workflow_id: str) -> None:
    handle = await client.start_workflow("it_flaky", {"message": workflow_id}, id=workflow_id, task_queue=TASK_QUEUE)
    result = await handle.result()
    calls = graphs.SIDE_EFFECTS[workflow_id]
    assert [a for a, _ in calls] == [1, 2]
    assert calls[0][1] == calls[1][1] == result["outputs"][0]
    assert workflow_id in calls[0][1]


async def test_large_state_is_not_copied_into_every_step(client: Client, workflow_id: str) -> None:
    size, steps = 1_000_000, 6
    handle = await client.start_workflow(
        "it_big_state", {"message": {"size": size, "steps": steps}}, id=workflow_id, task_queue=TASK_QUEUE
    )
    result = await handle.result()
    assert result["outputs"] == [size]
    history = await _history(client, workflow_id)
    history_bytes = sum(e.ByteSize() for e in history.events)
    # The blob is in history once (the diff that wrote it), not once per reading step.
    assert history_bytes < 1.5 * size, history_bytes


async def test_cli_run_prints_progress_and_outputs(temporal_address: str, workflow_id: str) -> None:
    from examples import research

    research_input = json.dumps(encode(research.SAMPLE_INPUT).data)
    code, text, err = await run_cli(
        temporal_address,
        *("run", "examples.research:workflow", "--input", research_input),
        *("--id", workflow_id, "--task-queue", TASK_QUEUE),
    )
    assert code == 0, err
    assert f"started {workflow_id}" in text
    assert [line for line in text.splitlines() if line.startswith("superstep")] == [
        "superstep 1: running planner",
        f"superstep 2: running {', '.join(research.RESEARCHERS)}",
        "superstep 3: running writer",
    ]
    local = await research.build().run(research.SAMPLE_INPUT)
    printed = json.loads(text[text.index("\n[\n") :])
    assert printed == [encode(o).data for o in local.get_outputs()]

    code, out, err = await run_cli(temporal_address, "status", workflow_id)
    assert code == 0, err
    status = json.loads(out)
    assert status["temporal_status"] == "COMPLETED" and status["status"] == "completed"


async def test_worker_process_serves_runs_and_stops_on_sigterm(client: Client, temporal_address: str) -> None:
    queue = f"proc-{uuid.uuid4().hex[:6]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        "--workflow",
        "examples.research:workflow",
        "--task-queue",
        queue,
        "--address",
        temporal_address,
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
        assert b"hosting: research" in line
        from examples import research

        handle = await start_run(client, "research", research.SAMPLE_INPUT, task_queue=queue)
        result = await asyncio.wait_for(handle.result(), timeout=60)
        assert result["status"] == "completed"
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 0
        assert b"shutting down" in rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
