"""Agent Framework's own workflow samples print here what they print on Agent Framework (issue #25, Checks).

Each sample in ``tests/maf_sample_ports.py`` runs twice in this test, on
``agent_framework`` (installed) and on ``temporal_workflows`` in process, and
the lines they print must be the same, with ids (UUIDs) masked.

The samples of Agent Framework 1.23's ``python/samples`` that run offline, and
where each is compared (in process with Agent Framework; on Temporal, through
the durable twin, with the in-process run):

=============================================  =====================================================================
workflow sample                                in process / on Temporal
=============================================  =====================================================================
01-get-started/07_first_graph_workflow         here / test_maf_samples_temporal
_start-here/step1_executors_and_edges          here / test_maf_samples_temporal
control-flow/sequential_executors              here / test_maf_samples_temporal
control-flow/sequential_streaming              here / test_maf_samples_temporal
control-flow/workflow_cancellation             here / -- (cancelling the caller of the twin's awaited run only stops
                                               following: docs/maf.md)
control-flow/intermediate_vs_terminal_outputs  here / test_maf_samples_temporal (without ``as_agent()``, not provided)
observability/executor_io_observation          here / test_maf_samples_temporal
parallelism/aggregate_results_of_different...  here / test_maf_samples_temporal (its random numbers fixed)
parallelism/map_reduce_and_visualization       here / test_maf_samples_temporal
checkpoint/checkpoint_with_resume              test_maf_programs / test_maf_programs_temporal (interruptions fixed)
checkpoint/sub_workflow_checkpoint             here / test_maf_samples_temporal
composition/sub_workflow_basics                test_maf_subworkflow_samples, both (maf_ports/text_processing)
composition/sub_workflow_parallel_requests     test_maf_subworkflow_samples, both (maf_ports/resource_requests)
composition/sub_workflow_request_interception  here / test_maf_samples_temporal (the caller's ``Email``: docs/maf.md)
=============================================  =====================================================================

The agent samples, each with a ``ScriptedChatClient`` (``agents/testing.py``) in
place of the model: ``_start-here/step2_agents_in_a_workflow``,
``step3_streaming``, ``agents/custom_agent_executors``,
``control-flow/simple_loop``, ``switch_case_edge_group``,
``multi_selection_edge_group``, ``human-in-the-loop/guessing_game_with_human_input``,
``agents_with_approval_requests`` (``maf_samples.email_approvals``),
``checkpoint/checkpoint_with_human_in_the_loop``, ``state-management/state_with_agents``,
``parallelism/fan_out_fan_in_edges`` (here and in test_maf_samples_temporal),
``agents_with_shared_session`` and a structured-output agent (test_maf_programs
and its Temporal twin).
"""

import re
from pathlib import Path
from typing import Any

import agent_framework
import pytest

import temporal_workflows
from tests import maf_sample_ports as ports

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?|datetime\.datetime\([\d, ]+\)")


ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


def masked(text: str) -> list[str]:
    return ADDRESS.sub(" at <address>>", TIMESTAMP.sub("<time>", UUID.sub("<uuid>", text))).splitlines()


async def printed(program: Any, mod: Any, capsys: pytest.CaptureFixture[str], **kwargs: Any) -> list[str]:
    capsys.readouterr()
    await program(mod, **kwargs)
    return masked(capsys.readouterr().out)


PLAIN = [
    ports.first_graph_workflow,
    ports.executors_and_edges,
    ports.sequential_executors,
    ports.sequential_streaming,
    ports.executor_io_observation,
    ports.aggregate_results_of_different_types,
    ports.simple_loop,
    ports.guessing_game_with_human_input,
    ports.workflow_cancellation,
    ports.agents_in_a_workflow,
    ports.agents_streaming,
    ports.custom_agent_executors,
]


@pytest.mark.parametrize("program", PLAIN, ids=[p.__name__ for p in PLAIN])
async def test_the_sample_prints_what_agent_framework_prints(program: Any, capsys: pytest.CaptureFixture[str]) -> None:
    maf = await printed(program, agent_framework, capsys)
    ours = await printed(program, temporal_workflows, capsys)
    assert maf, "the sample printed nothing on Agent Framework"
    assert ours == maf


@pytest.mark.parametrize("email", sorted(ports.SWITCH_EMAILS))
async def test_the_switch_case_sample_routes_each_email_as_agent_framework_does(
    email: str, capsys: pytest.CaptureFixture[str]
) -> None:
    maf = await printed(ports.switch_case_edge_group, agent_framework, capsys, email=email)
    ours = await printed(ports.switch_case_edge_group, temporal_workflows, capsys, email=email)
    # Agent Framework 1.23 yields every agent's response as an output too (no output_from= given)
    assert maf[-1].startswith("Workflow output: Email ")
    assert ours == maf


async def test_the_checkpointed_review_sample_resumes_from_a_chosen_checkpoint_as_in_agent_framework(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("maf", "ours"):
        (tmp_path / name).mkdir()
    maf = await printed(ports.checkpoint_with_human_in_the_loop, agent_framework, capsys, storage_dir=tmp_path / "maf")
    ours = await printed(
        ports.checkpoint_with_human_in_the_loop, temporal_workflows, capsys, storage_dir=tmp_path / "ours"
    )
    assert ours == maf


@pytest.mark.parametrize("email", sorted(ports.STATE_EMAILS))
async def test_the_shared_state_sample_prints_what_agent_framework_prints(
    email: str, capsys: pytest.CaptureFixture[str]
) -> None:
    maf = await printed(ports.state_with_agents, agent_framework, capsys, email=email)
    ours = await printed(ports.state_with_agents, temporal_workflows, capsys, email=email)
    assert len(maf) == 1 and maf[0].startswith("Final result: ")
    assert ours == maf


async def test_the_expert_fan_out_sample_ends_with_agent_frameworks_frame_and_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Documented in docs/maf.md ("When events are emitted", "Not (yet) the same").

    Agent Framework shows each expert's ``executor_completed`` as it happens, so a
    frame marks the researcher completed while the marketer still streams; here the
    experts' updates are live but their ``executor_completed`` events come when the
    superstep commits, after all three have streamed. The last frame, and the
    consolidated output, are the same.
    """
    maf = await printed(ports.fan_out_fan_in_edges, agent_framework, capsys)
    ours = await printed(ports.fan_out_fan_in_edges, temporal_workflows, capsys)
    final = maf.index("=== Final Consolidated Output ===")
    frame = max(i for i, line in enumerate(maf[:final]) if "=== Expert Streams (Live) ===" in line)
    assert ours[-(len(maf) - frame) :] == maf[frame:]
    assert sorted(set(ours)) == sorted(set(maf))  # the same frames' lines, in another order


async def test_intermediate_and_terminal_outputs_of_a_graph_print_as_in_agent_framework(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Embedded as a sub-workflow, the graph's intermediate outputs bubble up as Agent Framework's do.

    Each is an ``intermediate`` event of the ``WorkflowExecutor`` (its id, not the child's executor's),
    while the child's terminal output goes on as the executor's message.
    """
    maf = await printed(ports.intermediate_vs_terminal_outputs, agent_framework, capsys)
    ours = await printed(ports.intermediate_vs_terminal_outputs, temporal_workflows, capsys)
    assert "  [intermediate] sub: plan: starting work on 'life, the universe, and everything'" in maf
    assert ours[-1] == "  [output]       parent_sink: final answer to 'life, the universe, and everything': 42"
    assert ours == maf


@pytest.mark.parametrize("email", sorted(ports.MULTI_EMAILS))
async def test_the_multi_selection_sample_prints_what_agent_framework_prints(
    email: str, capsys: pytest.CaptureFixture[str]
) -> None:
    maf = await printed(ports.multi_selection_edge_group, agent_framework, capsys, email=email)
    ours = await printed(ports.multi_selection_edge_group, temporal_workflows, capsys, email=email)
    assert maf
    assert ours == maf


async def test_the_sub_workflow_checkpoint_sample_resumes_and_finishes_as_in_agent_framework(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("maf", "ours"):
        (tmp_path / name).mkdir()
    maf = await printed(ports.sub_workflow_checkpoint, agent_framework, capsys, storage_dir=tmp_path / "maf")
    ours = await printed(ports.sub_workflow_checkpoint, temporal_workflows, capsys, storage_dir=tmp_path / "ours")
    assert "- Approved at: <time>" in maf and "Using checkpoint <uuid> at iteration 3" in maf
    assert ours == maf


def without_drawings(lines: list[str]) -> tuple[list[str], list[str]]:
    """The lines outside the sample's two printed drawings, and the drawings' lines."""
    first_event = next(i for i, line in enumerate(lines) if line.startswith("Event: "))
    return lines[:2] + lines[first_event:], lines[2:first_event]


async def test_the_map_reduce_sample_runs_and_prints_its_events_as_in_agent_framework(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    maf = await printed(ports.map_reduce_and_visualization, agent_framework, capsys, temp_dir=tmp_path)
    ours = await printed(ports.map_reduce_and_visualization, temporal_workflows, capsys, temp_dir=tmp_path)
    (maf_run, _), (our_run, our_drawings) = without_drawings(maf), without_drawings(ours)
    assert maf_run[:2] == ["Generating workflow visualization...", "Mermaid string: "]
    assert any(line.startswith("Final Output: [") for line in maf_run) and len(maf_run) > 30
    assert our_run == maf_run
    assert sum(" --> " in line for line in our_drawings) == 16  # the same 16 edges, through two fan-in nodes


async def test_the_map_reduce_samples_drawings_read_as_agent_frameworks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    maf = await printed(ports.map_reduce_and_visualization, agent_framework, capsys, temp_dir=tmp_path)
    ours = await printed(ports.map_reduce_and_visualization, temporal_workflows, capsys, temp_dir=tmp_path)
    assert without_drawings(ours)[1] == without_drawings(maf)[1]


async def test_the_request_interception_sample_prints_what_agent_framework_prints_but_the_callers_own_object(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every line the workflow prints is Agent Framework's; the caller's own ``Email`` is not rewritten here.

    Agent Framework passes a message by reference, so the sample's orchestrator, which strips the
    recipient of the ``Email`` it received, rewrites the caller's object, and the caller prints the
    stripped address. Here a message is a copy (docs/maf.md, "Mutating a received message").
    """
    maf = await printed(ports.sub_workflow_request_interception, agent_framework, capsys)
    ours = await printed(ports.sub_workflow_request_interception, temporal_workflows, capsys)
    assert len(ours) == len(maf) == 51
    differ = [(m, o) for m, o in zip(maf, ours, strict=True) if m != o]
    assert differ == [
        ("Final result for 'user2@invalid': Blocked", "Final result for ' user2@invalid': Blocked"),
        ("Final result for 'user3@company.com': Delivered", "Final result for '  user3@company.com  ': Delivered"),
    ]
