"""Replay recorded histories with the current code: a change that would break
running executions (non-determinism) fails here, in CI, before it deploys.

The graph workflow runs outside Temporal's sandbox in production (it never runs
user code, and the sandbox costs more per workflow task than the workflow
itself), so every replay is also done inside the sandbox with its default
restrictions and this project's modules *not* passed through: a clock, random,
I/O or other non-deterministic call creeping into workflow code fails here."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from examples import research
from temporal_workflows._llama_runtime._protocol import WORKFLOW_TYPE as LLAMA_RUNTIME_WORKFLOW_TYPE
from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run
from temporal_workflows.temporal._workflow.patches import (
    BUNDLED,
    BUNDLED_2,
    LATER,
    PATCH_CLOSE_WAITS,
    PATCH_CONCURRENT_INPUT,
    PATCH_VALIDATE_IN_ACTIVITY,
    PATCHES,
    PATCHES_AT_START,
    PATCHES_BUNDLE,
    PATCHES_BUNDLE_2,
)
from temporal_workflows.temporal.integration import ENCRYPTED_ENCODING
from tests.conftest import TASK_QUEUE, hosted_workflows
from tests.integration.record_histories import FLOWS, RECORDED_NOW

ROOT = Path(__file__).parents[1] / "histories"
# Runs recorded by older versions (directly in histories/: never written again), and runs recorded with the
# patches-1 bundle (histories/patches_1/, record_histories.RECORDED_INTO).
HISTORIES = sorted(ROOT.glob("*.json")) + sorted((ROOT / "patches_1").glob("*.json"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).with_suffix("").as_posix()


HISTORIES_BY_NAME = {_name(p): p for p in HISTORIES}


RUNNERS = ["unsandboxed", "sandbox-restricted"]


def _replayer(runner: str) -> Replayer:
    if runner == "unsandboxed":  # as workers run it
        return Replayer(workflows=[], plugins=[TemporalWorkflowsPlugin(hosted_workflows())])
    # The workflow opts out of the sandbox, so it runs in the "unsandboxed" runner: make that one
    # the sandbox, with the SDK's default restrictions and nothing of ours passed through.
    # debug_mode turns off the SDK's 2-second deadlock timer: this checks determinism, not speed, and a
    # sandbox's first activation (re-importing modules, building pydantic schemas) can pass 2 s on a busy
    # CI machine; workers run the workflow unsandboxed, where it does not.
    return Replayer(
        workflows=[],
        plugins=[TemporalWorkflowsPlugin(hosted_workflows())],
        unsandboxed_workflow_runner=SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default),
        debug_mode=True,
    )


def test_recorded_histories_exist() -> None:
    assert set(HISTORIES_BY_NAME) >= {
        "research",
        "counter_loop",
        "approval_signals_and_updates",
        "chat_keep_alive",
        "checkpoint_reset",
        "subworkflow_nested",
        # A keep-alive run closed while two requests waited, recorded by the version before close waited for
        # answers (it completed at once, listing them in unanswered_requests): it replays as it ran.
        "close_with_pending_requests_before",
        *(f"patches_1/{name}" for name in RECORDED_NOW),
    }


def _patches(history: WorkflowHistory) -> list[str]:
    markers = [
        e.marker_recorded_event_attributes for e in history.events if e.HasField("marker_recorded_event_attributes")
    ]
    return [
        json.loads(m.details["patch-data"].payloads[0].data)["id"] for m in markers if m.marker_name == "core_patch"
    ]


@pytest.mark.parametrize("name", RECORDED_NOW)
def test_histories_recorded_now_carry_the_bundle(name: str) -> None:
    # What they are for: replaying runs as every run records itself today (the bundle at its start, then the
    # patches asked where their behaviour starts), beside the older histories that prove older runs replay.
    path = HISTORIES_BY_NAME[f"patches_1/{name}"]
    patches = _patches(WorkflowHistory.from_json(name, json.loads(path.read_text())))
    # A run started with its first input (update- or signal-with-start) asks, in that input's handler, before
    # its first line asks for the bundle.
    with_start = [PATCH_VALIDATE_IN_ACTIVITY] if name in ("chat_keep_alive", "deliver_interrupt_keep_alive") else []
    later = {
        "concurrent_input_rollback_interrupt": [PATCH_CONCURRENT_INPUT],
        "deliver_interrupt_keep_alive": [PATCH_CONCURRENT_INPUT, PATCH_CLOSE_WAITS],
        "close_waits_for_answers": [PATCH_CLOSE_WAITS],
        "chat_keep_alive": [PATCH_CLOSE_WAITS],
        "concurrent_updates": [PATCH_CLOSE_WAITS],
    }
    assert patches == [*with_start, PATCHES_BUNDLE, *later.get(name, [])], patches


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("path", HISTORIES, ids=_name)
async def test_recorded_history_replays(path: Path, runner: str) -> None:
    history = WorkflowHistory.from_json(f"recorded-{path.stem}", json.loads(path.read_text()))  # its own id
    result = await _replayer(runner).replay_workflow(history)
    assert result.replay_failure is None


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize(
    "flow",
    [
        "research",
        "approval_signals_and_updates",
        "chat_keep_alive",
        "checkpoint_reset",
        "subworkflow_nested",
        "answer_mid_step_under_load",
        "deliver_interrupt_keep_alive",
        "close_waits_for_answers",
    ],
)
async def test_fresh_history_replays(client: Client, workflow_id: str, flow: str) -> None:
    handle = await FLOWS[flow](client, workflow_id, TASK_QUEUE)
    for run_id in (handle.handle.first_execution_run_id, None):  # the first execution and the last
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        for runner in RUNNERS:
            result = await _replayer(runner).replay_workflow(history)
            assert result.replay_failure is None, runner


async def test_sandbox_replay_catches_a_non_deterministic_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard above must be able to fail. Inject a wall-clock read into workflow code
    # through temporalio.workflow.info (the SDK module is shared with the sandbox, ours
    # is re-imported there): unsandboxed it replays, the sandbox refuses it.
    original = workflow.info

    def info_reading_the_clock() -> workflow.Info:
        import datetime

        datetime.datetime.now()
        return original()

    recorded = HISTORIES_BY_NAME["counter_loop"]
    history = WorkflowHistory.from_json("recorded-counter_loop", json.loads(recorded.read_text()))
    monkeypatch.setattr(workflow, "info", info_reading_the_clock)
    assert (await _replayer("unsandboxed").replay_workflow(history)).replay_failure is None
    result = await _replayer("sandbox-restricted").replay_workflow(history, raise_on_replay_failure=False)
    assert "datetime.datetime.now" in str(result.replay_failure)


def _encrypted(history: WorkflowHistory) -> bool:
    payloads = history.events[0].workflow_execution_started_event_attributes.input.payloads
    return any(p.metadata.get("encoding") == ENCRYPTED_ENCODING for p in payloads)


async def test_runs_queried_from_their_first_moment_replay(client: Client, worker: object) -> None:
    # A status query polled right after start reached runs while their first workflow task ran the
    # topology activity; the SDK then completed that task with the activity's result alone, and the
    # run's patch marker, asked for after it, no longer replayed (nor did the queries that followed).
    # Runs now ask for every patch at their start (temporal/_workflow/patches.py). It happened to about one run
    # in eight here, so several runs are made.
    for i in range(8):
        handle = await start_run(
            client,
            research.workflow,
            research.SAMPLE_INPUT,
            id=f"queried-early-{uuid.uuid4().hex}",
            task_queue=TASK_QUEUE,
        )
        for _ in range(20):
            await handle.status()
        await handle.result()
        history = await handle.handle.fetch_history()
        result = await _replayer("unsandboxed").replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (i, str(result.replay_failure)[:300])


async def test_a_new_run_records_one_patch_marker_for_every_patch(client: Client, worker: object) -> None:
    # Each patch asked costs a marker and an upsert of TemporalChangeVersion (a sixth of a short run's history for
    # the nine a run used to ask at its start): a new run records the bundle alone, and behaves as with every patch.
    handle = await start_run(
        client, research.workflow, research.SAMPLE_INPUT, id=f"bundle-{uuid.uuid4().hex}", task_queue=TASK_QUEUE
    )
    await handle.result()
    history = await handle.handle.fetch_history()
    assert _patches(history) == [PATCHES_BUNDLE_2]  # which stands for the first bundle's and the later ones
    assert set(BUNDLED_2) >= {PATCHES_AT_START, *PATCHES, *BUNDLED, *LATER} and PATCHES_BUNDLE not in LATER
    # A run recorded before the bundle (its nine markers) still replays: approval_patches_at_start.json;
    # so do those recorded with the first bundle (tests/histories/patches_1/ and the *_patches_1 ones).
    assert "approval_patches_at_start" in HISTORIES_BY_NAME


@pytest.mark.after_all_runs
async def test_every_run_of_the_session_replays_in_the_sandbox(client: Client) -> None:
    # Runs last (see conftest): every run the other tests made on the session's
    # server, whatever path it took (timeouts, continue-as-new, cancellation, bad
    # input, resets), replayed in the sandbox with the default restrictions. Runs
    # encrypted under the encryption tests' own keys are left out: without the
    # keys their payloads do not decode. So are the runs of LlamaIndex's own loop
    # (TemporalRuntime): their workflow replays the user's LlamaIndex workflows,
    # which only the runtime that registered them knows, and the runtime's
    # replay tests replay its recorded histories with them
    # (tests/integration/test_llama_runtime.py, tests/histories/llama_runtime/).
    replayed: dict[str, WorkflowHistory] = {}  # run id -> its history, to name and keep a run that fails
    query = f"WorkflowType != '{LLAMA_RUNTIME_WORKFLOW_TYPE}'"

    async def histories() -> AsyncIterator[WorkflowHistory]:
        async for history in client.list_workflows(query).map_histories():
            if not _encrypted(history):
                replayed[history.run_id] = history
                yield history

    results = await _replayer("sandbox-restricted").replay_workflows(histories(), raise_on_replay_failure=False)
    if not replayed:
        pytest.skip("no other test ran a workflow in this session")
    if results.replay_failures:
        # The session's server goes with the session: keep each failing history to replay it again.
        kept = Path(tempfile.mkdtemp(prefix="replay-failures-"))
        for run_id in results.replay_failures:
            (kept / f"{replayed[run_id].workflow_id}.json").write_text(replayed[run_id].to_json())
        pytest.fail(
            f"histories kept in {kept}: "
            + repr(
                {
                    f"{replayed[run_id].workflow_id} ({run_id})": str(e)[:300]
                    for run_id, e in results.replay_failures.items()
                }
            )
        )
