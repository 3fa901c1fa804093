"""LlamaIndex Workflows' documented examples print here what they print on LlamaIndex (issue #25, Checks).

Each example in ``tests/llama_sample_ports.py`` runs twice in this test, on
``workflows`` (llama-index-workflows 2.26.1, installed) and on
``temporal_workflows.llama`` in process, and the lines they print must be the same.
"""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests import llama_sample_ports as ports

PEER = ports.namespace("workflows")
OURS = ports.namespace("temporal_workflows.llama")


async def printed(example: Any, m: Any, capsys: pytest.CaptureFixture[str], *args: Any) -> list[str]:
    capsys.readouterr()
    await asyncio.wait_for(example(m, *args), 30)
    return capsys.readouterr().out.splitlines()


DIFFERENT = (ports.parallel_flow, ports.collect_several_types, ports.streaming_internal_events)
SAME = [e for e in ports.EXAMPLES if e not in DIFFERENT]


@pytest.mark.parametrize("example", SAME, ids=[e.__name__ for e in SAME])
async def test_the_example_prints_what_it_prints_under_llamaindex(
    example: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    peer = await printed(example, PEER, capsys)
    ours = await printed(example, OURS, capsys)
    assert peer, "the example printed nothing under LlamaIndex"
    assert ours == peer


@pytest.mark.parametrize("example", [ports.resource_configs, ports.async_workflows], ids=lambda e: e.__name__)
async def test_the_example_with_files_prints_what_it_prints_under_llamaindex(
    example: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    peer = await printed(example, PEER, capsys, tmp_path)
    ours = await printed(example, OURS, capsys, tmp_path)
    assert peer, "the example printed nothing under LlamaIndex"
    assert ours == peer


async def test_collecting_several_types_prints_the_same_lines_steps_interleaved_by_superstep(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A documented difference (docs/llama.md, "Steps run in supersteps"): the same lines and result.

    LlamaIndex runs ``step_three`` as soon as each ``step_x`` returns; here the three
    ``step_x`` run in one superstep, then ``step_three`` three times in the next.
    """
    peer = await printed(ports.collect_several_types, PEER, capsys)
    ours = await printed(ports.collect_several_types, OURS, capsys)
    assert sorted(ours) == sorted(peer)
    assert ours[-2:] == peer[-2:] == ["['StepCCompleteEvent', 'StepACompleteEvent', 'StepBCompleteEvent']", "Done"]
    assert ours[:3] == ["Doing something A-ish", "Doing something B-ish", "Doing something C-ish"]


async def test_the_first_query_to_finish_is_the_result_as_in_llamaindex(capsys: pytest.CaptureFixture[str]) -> None:
    peer = await printed(ports.parallel_flow, PEER, capsys)
    assert peer[-1] == "Query 2"  # the query that sleeps 0 s; 0.3 s and 0.6 s for the others
    ours = await printed(ports.parallel_flow, OURS, capsys)
    assert ours[-1] == peer[-1]


async def test_streaming_internal_events_shows_each_steps_state_as_llamaindex_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    peer = await printed(ports.streaming_internal_events, PEER, capsys)
    ours = await printed(ports.streaming_internal_events, OURS, capsys)
    assert ours == peer
