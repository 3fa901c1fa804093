"""Agent Framework's own workflow samples print here what they print on Agent Framework (issue #25, Checks).

Each sample in ``tests/maf_sample_ports.py`` runs twice in this test, on
``agent_framework`` (installed) and on ``temporal_workflows`` in process, and
the lines they print must be the same, with ids (UUIDs) masked.
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
    maf = await printed(ports.intermediate_vs_terminal_outputs, agent_framework, capsys)
    ours = await printed(ports.intermediate_vs_terminal_outputs, temporal_workflows, capsys)
    embedded = maf.index("=== Embedding as a sub-workflow -- intermediates bubble up ===")
    assert ours[:embedded] == maf[:embedded]
    assert (
        ours[-1] == maf[-1] == "  [output]       parent_sink: final answer to 'life, the universe, and everything': 42"
    )


@pytest.mark.xfail(
    strict=True,
    reason="gap: a sub-workflow's intermediate outputs do not bubble up as the WorkflowExecutor's "
    "intermediate events (SubWorkflowReport carries outputs and requests only; the hosts that run the child, "
    "_local and temporal/_workflow/workflow.py, and the engine's output kinds would need them)",
)
async def test_a_sub_workflows_intermediate_outputs_bubble_up_as_in_agent_framework(
    capsys: pytest.CaptureFixture[str],
) -> None:
    maf = await printed(ports.intermediate_vs_terminal_outputs, agent_framework, capsys)
    ours = await printed(ports.intermediate_vs_terminal_outputs, temporal_workflows, capsys)
    assert "  [intermediate] sub: plan: starting work on 'life, the universe, and everything'" in maf
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
