"""Agent Framework's samples on Temporal: the durable twin prints what the in-process run prints.

A representative subset of ``tests/maf_sample_ports.py`` (a chain, a streamed run, executor
I/O events, a typed fan-in, an agent in a loop, a switch-case over structured output, human
input over several calls) runs with ``durable=``: each workflow the sample builds is hosted
by a worker of its own (a task queue per workflow, in this process, so executors keep their
attributes as in the sample) and the sample's ``run`` calls go to its durable twin
(``workflow.on_temporal``). ``tests/test_maf_samples.py`` shows the in-process lines are
Agent Framework's.
"""

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

import temporal_workflows
from temporal_workflows.temporal import TemporalWorkflowsPlugin
from tests import maf_sample_ports as ports

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b")
"""Ids, masked: UUIDs, and a Temporal run's checkpoint ids (opaque, 32 hex digits there)."""
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?|datetime\.datetime\([\d, ]+\)")


class Twin:
    """A built workflow whose ``run`` calls go to its durable twin, hosted on first use."""

    def __init__(self, host: "Host", workflow: Any) -> None:
        self.host, self.workflow, self.name = host, workflow, workflow.name
        self.durable: Any = None

    async def ready(self) -> Any:
        if self.durable is None:
            plugin = TemporalWorkflowsPlugin([self.workflow], tracing=False)
            client = await Client.connect(self.host.address, plugins=[plugin])
            queue = f"maf-sample-{uuid.uuid4().hex[:8]}"
            await self.host.stack.enter_async_context(Worker(client, task_queue=queue))
            self.durable = self.workflow.on_temporal(client, task_queue=queue)
        return self.durable

    def run(self, *args: Any, stream: bool = False, **kwargs: Any) -> Any:
        if stream:

            async def events() -> AsyncIterator[Any]:
                durable = await self.ready()
                async for event in durable.run(*args, stream=True, **kwargs):
                    yield event

            return events()

        async def result() -> Any:
            return await (await self.ready()).run(*args, **kwargs)

        return result()


class Host:
    def __init__(self, address: str, stack: AsyncExitStack) -> None:
        self.address, self.stack = address, stack

    def __call__(self, workflow: Any) -> Twin:
        return Twin(self, workflow)


SUBSET = [
    ports.first_graph_workflow,
    ports.executors_and_edges,
    ports.sequential_executors,
    ports.sequential_streaming,
    ports.executor_io_observation,
    ports.aggregate_results_of_different_types,
    ports.simple_loop,
    ports.switch_case_edge_group,
    ports.guessing_game_with_human_input,
    ports.state_with_agents,
    ports.multi_selection_edge_group,
    ports.agents_in_a_workflow,
    ports.agents_streaming,
    ports.custom_agent_executors,
    ports.intermediate_vs_terminal_outputs,
    ports.sub_workflow_request_interception,
]


@pytest.mark.parametrize("program", SUBSET, ids=[p.__name__ for p in SUBSET])
async def test_the_sample_prints_on_temporal_what_it_prints_in_process(
    program: Any, temporal_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    await program(temporal_workflows)
    local = UUID.sub("<uuid>", capsys.readouterr().out).splitlines()
    async with AsyncExitStack() as stack:
        await program(temporal_workflows, durable=Host(temporal_address, stack))
        remote = UUID.sub("<uuid>", capsys.readouterr().out).splitlines()
    assert local
    assert remote == local


async def test_the_checkpointed_review_sample_resumes_on_temporal_as_in_process(
    temporal_address: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "remote").mkdir()
    capsys.readouterr()
    await ports.checkpoint_with_human_in_the_loop(temporal_workflows, tmp_path / "local")
    local = capsys.readouterr().out.splitlines()
    async with AsyncExitStack() as stack:
        await ports.checkpoint_with_human_in_the_loop(
            temporal_workflows, tmp_path / "remote", durable=Host(temporal_address, stack)
        )
        remote = capsys.readouterr().out.splitlines()
    assert remote == local


async def test_the_expert_fan_out_sample_ends_with_the_same_frame_and_output_on_temporal(
    temporal_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Live agent updates on Temporal come in batches (docs/agents.md, "Live updates").

    Consecutive text deltas that wait for one batch arrive merged, so there are fewer
    intermediate frames; the last frame and the consolidated output are the same.
    """
    capsys.readouterr()
    await ports.fan_out_fan_in_edges(temporal_workflows)
    local = capsys.readouterr().out.splitlines()
    async with AsyncExitStack() as stack:
        await ports.fan_out_fan_in_edges(temporal_workflows, durable=Host(temporal_address, stack))
        remote = capsys.readouterr().out.splitlines()
    frame = max(i for i, line in enumerate(local) if "=== Expert Streams (Live) ===" in line)
    assert remote[-(len(local) - frame) :] == local[frame:]
    assert set(remote) <= set(local)


async def test_the_sub_workflow_checkpoint_sample_resumes_on_temporal_as_in_process(
    temporal_address: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def masked(text: str) -> list[str]:
        return TIMESTAMP.sub("<time>", UUID.sub("<uuid>", text)).splitlines()

    (tmp_path / "local").mkdir()
    (tmp_path / "remote").mkdir()
    capsys.readouterr()
    await ports.sub_workflow_checkpoint(temporal_workflows, tmp_path / "local")
    local = masked(capsys.readouterr().out)
    async with AsyncExitStack() as stack:
        await ports.sub_workflow_checkpoint(
            temporal_workflows, tmp_path / "remote", durable=Host(temporal_address, stack)
        )
        remote = masked(capsys.readouterr().out)
    assert remote == local


async def test_the_map_reduce_sample_prints_on_temporal_what_it_prints_in_process(
    temporal_address: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def masked(text: str) -> list[str]:
        return re.sub(r" at 0x[0-9a-f]+>", " at <address>>", text).splitlines()

    capsys.readouterr()
    await ports.map_reduce_and_visualization(temporal_workflows, tmp_path)
    local = masked(capsys.readouterr().out)
    async with AsyncExitStack() as stack:
        await ports.map_reduce_and_visualization(temporal_workflows, tmp_path, durable=Host(temporal_address, stack))
        remote = masked(capsys.readouterr().out)
    assert any(line.startswith("Final Output: [") for line in local)
    assert remote == local
