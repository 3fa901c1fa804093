"""LlamaIndex's documented examples on Temporal: what they print in process, printed from a Temporal run.

A representative subset of ``tests/llama_sample_ports.py`` (collecting events of several
types, resources, config-backed and chained resources, an unbound step, sync steps and
thread pools, a typed ``StopEvent``, composed retry policies and ``catch_error``) runs with
a namespace whose ``Workflow.run`` starts the run on the real dev server
(``temporal_workflows.llama.start_run``), hosted by a worker of its own in this process,
streams its events (``stream_events(expose_internal=True)`` shows each step's
``StepStateChanged``) and awaits its result. ``tests/test_llama_samples.py`` shows the in-process lines are
LlamaIndex's.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Generator
from contextlib import AsyncExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import llama
from temporal_workflows.temporal import TemporalWorkflowsPlugin
from tests import llama_sample_ports as ports


class _Handler:
    """What ``Workflow.run`` returns in process, over a Temporal run: awaitable, and its events streamed."""

    def __init__(self, started: "asyncio.Future[llama.LlamaRunHandle]") -> None:
        self.started = started

    async def stream_events(self, expose_internal: bool = False) -> AsyncIterator[Any]:
        run = await self.started
        async for ev in run.stream_events(expose_internal=expose_internal):
            yield ev

    async def result(self) -> Any:
        return await (await self.started).result()

    def __await__(self) -> Generator[Any, Any, Any]:
        return self.result().__await__()


def on_temporal(address: str, stack: AsyncExitStack, started: list[str]) -> SimpleNamespace:
    """``temporal_workflows.llama``, but ``await SomeWorkflow().run(...)`` runs on Temporal (ids in ``started``)."""

    class Workflow(llama.Workflow):
        def run(self, ctx: Any = None, start_event: Any = None, **kwargs: Any) -> Any:
            assert ctx is None, "these examples start fresh runs"

            async def start() -> llama.LlamaRunHandle:
                plugin = TemporalWorkflowsPlugin([self], tracing=False)
                client = await Client.connect(address, plugins=[plugin])
                queue = f"llama-sample-{uuid.uuid4().hex[:8]}"
                await stack.enter_async_context(Worker(client, task_queue=queue))
                run = await llama.start_run(client, self, start_event, task_queue=queue, **kwargs)
                started.append(run.id)
                return run

            return _Handler(asyncio.ensure_future(start()))

    names = vars(ports.namespace("temporal_workflows.llama")).copy()
    names["Workflow"] = Workflow
    return SimpleNamespace(**names)


SUBSET = [
    ports.collect_several_types,
    ports.resources,
    ports.unbound_functions,
    ports.joke_flow,
    ports.retry_steps,
    ports.streaming_internal_events,  # StepStateChanged under expose_internal=True, as in process (and LlamaIndex)
]


async def printed(example: Any, m: Any, capsys: pytest.CaptureFixture[str], *args: Any) -> list[str]:
    capsys.readouterr()
    await example(m, *args)
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("example", SUBSET, ids=[e.__name__ for e in SUBSET])
async def test_the_example_prints_on_temporal_what_it_prints_in_process(
    example: Any, temporal_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    local = await printed(example, ports.namespace("temporal_workflows.llama"), capsys)
    started: list[str] = []
    async with AsyncExitStack() as stack:
        remote = await printed(example, on_temporal(temporal_address, stack, started), capsys)
    assert local and started, started
    if example in RACING:
        # Its three steps run at once: in process they finish in the order they started (none awaits),
        # on Temporal in the order their activities completed, as under LlamaIndex, whose runtime
        # prints in the order its steps finish. What the join prints (its collect_events order) is fixed.
        assert sorted(remote) == sorted(local)
        assert remote[-2:] == local[-2:]
    else:
        assert remote == local


# Examples whose concurrent steps print in the order they finish, which on Temporal is the order their
# activities complete (a loaded run printed step C's line before step B's).
RACING = {ports.collect_several_types}


@pytest.mark.parametrize("example", [ports.resource_configs, ports.async_workflows], ids=lambda e: e.__name__)
async def test_the_example_with_files_prints_on_temporal_what_it_prints_in_process(
    example: Any, temporal_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = await printed(example, ports.namespace("temporal_workflows.llama"), capsys, tmp_path)
    started: list[str] = []
    async with AsyncExitStack() as stack:
        remote = await printed(example, on_temporal(temporal_address, stack, started), capsys, tmp_path)
    assert local and started, started
    assert remote == local


async def test_a_retried_steps_states_on_temporal_are_llamaindexs(temporal_address: str) -> None:
    """Each attempt's ``running``/``not_running`` travel compactly in the step's result and read as LlamaIndex's."""
    from tests import test_llama_step_state as step_state

    peer = await step_state.states(step_state.retried, step_state.PEER)
    started: list[str] = []
    async with AsyncExitStack() as stack:
        ours = await step_state.states(step_state.retried, on_temporal(temporal_address, stack, started))
    assert started and ours == peer
    assert [s[1] for s in peer[:-1]] == ["running", "not_running"] * 3
