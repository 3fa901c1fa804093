"""Replay recorded histories with the current code: a change that would break
running executions (non-determinism) fails here, in CI, before it deploys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from temporal_workflows.temporal import TemporalWorkflowsPlugin
from tests.conftest import TASK_QUEUE, hosted_workflows
from tests.integration.record_histories import FLOWS

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def _replayer() -> Replayer:
    return Replayer(workflows=[], plugins=[TemporalWorkflowsPlugin(hosted_workflows())])


def test_recorded_histories_exist() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "research",
        "counter_loop",
        "approval_signals_and_updates",
        "chat_keep_alive",
        "checkpoint_reset",
    }


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(f"recorded-{path.stem}", json.loads(path.read_text()))
    result = await _replayer().replay_workflow(history)
    assert result.replay_failure is None


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("flow", ["research", "approval_signals_and_updates", "chat_keep_alive", "checkpoint_reset"])
async def test_fresh_history_replays(client: Client, workflow_id: str, flow: str) -> None:
    handle = await FLOWS[flow](client, workflow_id, TASK_QUEUE)
    for run_id in (handle.handle.first_execution_run_id, None):  # the first execution and the last
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        result = await _replayer().replay_workflow(history)
        assert result.replay_failure is None
