"""Telemetry an operator reads, exactly once, on a real dev server.

The first test is the operator's view: three worker processes started as
users start them (``temporal-workflows worker``), configured by the standard
``OTEL_*`` variables alone and pointed at a real OTLP/HTTP receiver on
loopback, one of them with its workflow cache off; an agent graph with a
tool call and a human request; status queries and an event-stream reader
throughout; the worker running a step killed with ``kill -9``. What arrives
is decoded from protobuf and checked: the span tree, the attributes, who ran
what, and every span and count exactly once.

Then one test per kind of forced replay, each with queries and readers
arriving during workflow tasks: a worker with no workflow cache, a worker
restarted mid-run, and a run that continues as new.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.worker import Worker

from examples import research
from temporal_workflows.temporal import RunHandle, get_run, start_run
from tests.integration import telemetry_graphs
from tests.integration.cli import ROOT, cli_env, run_cli
from tests.integration.waits import DEADLINE, until, until_async
from tests.otlp_receiver import Receiver, Span, serve

pytestmark = pytest.mark.usefixtures("worker")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serve()


@contextlib.asynccontextmanager
async def readers(handle: RunHandle, *, pollers: int = 2) -> AsyncIterator[list[int]]:
    """Status queries in a loop and one event-stream reader, for as long as the block runs: they reach the run
    while its workflow tasks run (on a worker with no cache, each rebuilds the run)."""
    counts = [0] * (pollers + 1)
    stop = asyncio.Event()

    async def poll(i: int) -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):
                await handle.status()
                counts[i] += 1

    async def read() -> None:
        with contextlib.suppress(Exception):
            async for _ in handle.events():
                counts[-1] += 1
                if stop.is_set():
                    return

    tasks = [asyncio.create_task(poll(i)) for i in range(pollers)] + [asyncio.create_task(read())]
    try:
        yield counts
    finally:
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- worker processes, as users start them ---------------------------------------------------


class CliWorkers:
    """``temporal-workflows worker`` processes on one queue; any still running are killed on exit."""

    def __init__(self, address: str, queue: str, env: dict[str, str], tmp: Path) -> None:
        self.address, self.queue, self.env, self.tmp = address, queue, env, tmp
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, name: str, *flags: str) -> int:
        err = (self.tmp / f"{name}.stderr").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "temporal_workflows", "worker"),
            *("--workflow", "tests.integration.telemetry_graphs:workflow", "--task-queue", self.queue),
            *flags,
            env=cli_env(self.address, self.env),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        err.close()
        self.procs[name] = proc
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), DEADLINE)
        assert line.startswith(b"worker on task queue"), f"{name}: {line!r} {self.stderr(name)}"
        return proc.pid

    def stderr(self, name: str) -> str:
        return (self.tmp / f"{name}.stderr").read_text(errors="replace")[-3000:]

    async def kill(self, pid: int) -> None:
        name = next(n for n, p in self.procs.items() if p.pid == pid)
        self.procs[name].send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(self.procs[name].wait(), DEADLINE) == -signal.SIGKILL

    async def close(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _children(spans: Sequence[Span], parent: Span, name: str | None = None, prefix: str = "") -> list[Span]:
    return sorted(
        (s for s in spans if s.parent_id == parent.span_id and (s.name == name if name else s.name.startswith(prefix))),
        key=lambda s: s.start,
    )


def _one(spans: Sequence[Span], parent: Span, name: str) -> Span:
    found = _children(spans, parent, name)
    names = sorted(s.name for s in spans if s.parent_id == parent.span_id)
    assert len(found) == 1, f"{parent.name} has {names}, want one {name!r}"
    return found[0]


async def test_three_workers_export_the_agent_run_over_otlp_exactly_once_through_a_kill(
    temporal_address: str, client: Client, receiver: Receiver, tmp_path: Path
) -> None:
    got = receiver.received
    queue = f"otel-{uuid.uuid4().hex[:8]}"
    workflow_id = f"otel-run-{uuid.uuid4().hex[:8]}"
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    env = {
        **receiver.env("tw-worker"),
        telemetry_graphs.ENV_MARKERS: str(markers),
        telemetry_graphs.ENV_RELEASE: str(release),
    }
    workers = CliWorkers(temporal_address, queue, env, tmp_path)
    try:
        pids = await asyncio.gather(
            workers.start("a", "--max-cached-workflows", "0"), workers.start("b"), workers.start("c")
        )
        code, _, err = await run_cli(
            temporal_address,
            *("run", "tests.integration.telemetry_graphs:workflow", "--input", json.dumps("Write about bikes")),
            *("--id", workflow_id, "--task-queue", queue, "--no-wait"),
            env=receiver.env("tw-cli"),
        )
        assert code == 0, err
        handle = get_run(client, workflow_id)
        async with readers(handle) as read:
            pending = await until_async("the approval request", handle.pending_requests)
            approval = pending[0].data.to_function_approval_response(approved=True)
            code, _, err = await run_cli(
                temporal_address,
                *("respond", workflow_id, pending[0].request_id, json.dumps(approval.to_dict())),
                env=receiver.env("tw-cli"),
            )
            assert code == 0, err
            first = await until("archive's first attempt", lambda: sorted(markers.iterdir()))
            victim = int(first[0].name.split("-")[1])
            assert first[0].name.startswith("1-") and victim in pids
            victim_instance = next(s.instance for s in got.span_list() if s.resource.get("process.pid") == victim)
            # What the victim had to say before it died has arrived (it exports every half second).
            await got.until(
                "the victim's count of archive's first attempt",
                lambda: got.by_instance("temporal_workflows.steps.started", **{"executor.id": "archive"}).get(
                    victim_instance
                ),
            )
            await got.until("archive's StartActivity", lambda: got.named("StartActivity:otel_agents.archive"))
            await workers.kill(victim)
            try:
                await until(
                    "a retry on another worker", lambda: any(m.name.startswith("2-") for m in markers.iterdir())
                )
            except AssertionError as e:
                # Say what the server and the survivors knew, so a rare miss can be read from the CI log.
                described = await client.get_workflow_handle(workflow_id).describe()
                pending = [
                    (a.activity_type.name, a.attempt, a.state, str(a.last_failure.message))
                    for a in described.raw_description.pending_activities
                ]
                raise AssertionError(
                    f"{e}; markers {sorted(m.name for m in markers.iterdir())}; pending activities {pending}; "
                    + "; ".join(f"{n}: {workers.stderr(n)[-1500:]}" for n in workers.procs if n)
                ) from None
            release.write_text("")
            result = await handle.result()
        assert result["outputs"][-1] == "archived: Published it."
        assert read[0] + read[1] > 0 and read[2] > 0  # queries and the stream reader were served meanwhile
        await got.until("the run's end", lambda: got.named("RunWorkflow:otel_agents"), timeout=30)
        await got.until(
            "the run's last counts",
            lambda: (
                got.total(
                    "temporal_workflows.runs",
                    **{"workflow.name": "otel_agents", "temporal_workflows.status": "completed"},
                )
                >= 1
                and got.total("temporal_workflows.steps.completed", **{"executor.id": "archive"}) >= 1
            ),
        )
    finally:
        await workers.close()

    spans = got.span_list()
    # -- exactly once: no span arrived twice, from whichever worker and however often the run was rebuilt
    ids = Counter(s.span_id for s in spans)
    assert [(s.name, n) for s in spans if (n := ids[s.span_id]) > 1] == []
    assert not [s for s in spans if "__temporal_workflow_stream" in s.name]  # stream traffic is not traced

    # -- the tree: the CLI's start, the run, its supersteps, steps, agents and the request
    (start,) = got.named("StartWorkflow:otel_agents")
    assert start.resource["service.name"] == "tw-cli"
    trace = [s for s in spans if s.trace_id == start.trace_id]
    run = _one(trace, _one(trace, start, "RunWorkflow:otel_agents"), "workflow.run")
    assert run.attributes["workflow.name"] == "otel_agents" and run.attributes["workflow.id"] == workflow_id
    supersteps = _children(trace, run, prefix="superstep ")
    assert [s.name for s in supersteps] == [f"superstep {n}" for n in (1, 2, 3, 4)]

    def step(superstep: Span, executor: str, attempt: int = 1) -> Span:
        started = _one(trace, superstep, f"StartActivity:otel_agents.{executor}")
        runs = _children(trace, started, f"RunActivity:otel_agents.{executor}")
        processed = [p for r in runs for p in _children(trace, r, f"executor.process {executor}")]
        (this,) = [p for p in processed if p.attributes["temporal_workflows.attempt"] == attempt]
        return this

    writer = step(supersteps[0], "writer")
    assert writer.attributes["executor.id"] == "writer" and writer.attributes["executor.type"] == "AgentExecutor"
    assert writer.attributes["message.type"] == "standard" and writer.attributes["message.payload_type"] == "str"
    agent = _one(trace, writer, "invoke_agent writer")
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    chats = _children(trace, agent, "chat scripted")
    assert len(chats) == 2
    for chat, reason in zip(chats, ("tool_calls", "stop"), strict=True):
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "temporal_workflows.scripted"
        assert a["gen_ai.request.model"] == "scripted" and a["gen_ai.response.model"] == "scripted"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert json.loads(a["gen_ai.response.finish_reasons"]) == [reason]
        assert "gen_ai.input.messages" not in a  # no content unless the user opts in
    tool = _one(trace, agent, "execute_tool lookup")
    assert tool.attributes["gen_ai.tool.name"] == "lookup" and tool.attributes["gen_ai.tool.call.id"]
    send = _one(trace, writer, "message.send")
    assert send.attributes["message.type"] == "AgentExecutorResponse"
    group = _one(trace, send, "edge_group.process SingleEdgeGroup")
    assert group.attributes["edge_group.delivery_status"] == "delivered"
    assert group.attributes["message.target_id"] == "publisher"

    assert step(supersteps[1], "publisher").attributes["message.payload_type"] == "AgentExecutorResponse"
    request = _one(trace, supersteps[1], f"request {pending[0].request_id}")
    assert request.attributes["temporal_workflows.request.outcome"] == "answered"
    assert request.attributes["executor.id"] == "publisher"
    answered = step(supersteps[2], "publisher")
    assert answered.attributes["message.type"] == "response"
    assert _one(trace, _one(trace, answered, "invoke_agent publisher"), "execute_tool publish")
    # The answer, sent by another process, sits in the run's trace under the run's start.
    (update,) = got.named("StartWorkflowUpdate:submit_response")
    assert update.trace_id == start.trace_id and update.parent_id == start.span_id
    assert _children(trace, update, "HandleUpdate:submit_response")

    retry = step(supersteps[3], "archive", attempt=2)
    assert retry.attributes["temporal_workflows.retry"] is True
    assert retry.instance != victim_instance  # another worker ran it

    # -- who ran it: every worker says which process on which host it is
    workers_seen = {s.instance: s.resource for s in spans if s.resource.get("service.name") == "tw-worker"}
    assert len(workers_seen) >= 2
    for instance, resource in workers_seen.items():
        assert resource["host.name"] and resource["process.pid"] in pids
        assert instance == f"{resource['process.pid']}@{resource['host.name']}"

    # -- metrics, each counted once across the three workers
    def total(metric: str, **attributes: Any) -> float:
        return got.total(metric, **attributes)

    graph = {"workflow.name": "otel_agents"}
    assert total("temporal_workflows.runs", **graph, **{"temporal_workflows.status": "started"}) == 1
    assert total("temporal_workflows.runs", **graph, **{"temporal_workflows.status": "completed"}) == 1
    for executor, n in (("writer", 1), ("publisher", 2), ("archive", 1)):
        assert total("temporal_workflows.steps.completed", **graph, **{"executor.id": executor}) == n, executor
    assert total("temporal_workflows.steps.started", **graph, **{"executor.id": "archive"}) == 2
    assert total("temporal_workflows.steps.retried", **graph, **{"executor.id": "archive"}) == 1
    assert total("temporal_workflows.requests.pending", **graph) == 0
    assert got.histogram_count("temporal_workflows.superstep.duration", **graph) == 4
    for executor, n in (("writer", 1), ("publisher", 2), ("archive", 1)):  # the killed attempt never ended
        assert got.histogram_count("temporal_workflows.step.duration", **graph, **{"executor.id": executor}) == n
    assert total("temporal_workflows.live_events.published", **graph, **{"executor.id": "writer"}) > 0
    assert got.histogram_count("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"}) == 4
    assert got.histogram_count("gen_ai.client.token.usage", **{"gen_ai.token.type": "output"}) == 4


# -- forced replays, in process: spans and counts read from this process's own exporters ----------------


def _counts(reader: InMemoryMetricReader) -> Counter[tuple[str, tuple[tuple[str, Any], ...]]]:
    """Every counter's cumulative value and every histogram's count, by metric and attributes."""
    out: Counter[tuple[str, tuple[tuple[str, Any], ...]]] = Counter()
    data = reader.get_metrics_data()
    if data is None:
        return out
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for dp in m.data.data_points:
                    key = (m.name, tuple(sorted((dp.attributes or {}).items())))
                    if isinstance(dp, NumberDataPoint):
                        out[key] += int(dp.value)
                    elif isinstance(dp, HistogramDataPoint):
                        out[key] += dp.count
    return out


def _delta(before: Counter[Any], after: Counter[Any], graph: str) -> dict[str, int]:
    """What the instruments recorded for ``graph`` between two readings, by metric and status / executor."""
    out: dict[str, int] = {}
    for (name, attrs), value in after.items():
        a = dict(attrs)
        if a.get("workflow.name") != graph or value == before.get((name, attrs), 0):
            continue
        label = name + "".join(f"[{a[k]}]" for k in ("temporal_workflows.status", "executor.id") if k in a)
        out[label] = out.get(label, 0) + value - before.get((name, attrs), 0)
    return out


def _once(exporter: InMemorySpanExporter, workflow_id: str) -> list[ReadableSpan]:
    """This run's spans; each exported once."""
    mine = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes is not None
        and workflow_id in (s.attributes.get("temporalWorkflowID"), s.attributes.get("temporal_workflows.workflow_id"))
    ]
    ids = Counter(s.context.span_id for s in mine if s.context is not None)
    assert [s.name for s in mine if s.context is not None and ids[s.context.span_id] > 1] == []
    return mine


async def _settled(exporter: InMemorySpanExporter, workflow_id: str, name: str) -> None:
    await until(
        f"{name} of {workflow_id}",
        lambda: any(
            s.name == name and s.attributes is not None and s.attributes.get("temporalWorkflowID") == workflow_id
            for s in exporter.get_finished_spans()
        ),
    )


async def test_a_worker_without_workflow_cache_answering_queries_exports_each_span_and_count_once(
    client: Client, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    queue = f"otel-nocache-{uuid.uuid4().hex[:6]}"
    before = _counts(metric_reader)
    # Each query that finds no workflow task in flight rebuilds the run, and runs ahead through the events
    # no task has processed yet when there are some: with four pollers, most of eight runs meet it.
    ids = [f"otel-nocache-{uuid.uuid4().hex[:8]}" for _ in range(8)]
    async with Worker(client, task_queue=queue, max_cached_workflows=0):
        for workflow_id in ids:
            handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=queue)
            async with readers(handle, pollers=4):
                await handle.result()
            await _settled(span_exporter, workflow_id, "RunWorkflow:research")
    for workflow_id in ids:
        spans = _once(span_exporter, workflow_id)
        names = Counter(s.name for s in spans if not s.name.startswith(("HandleQuery", "QueryWorkflow")))
        assert names["RunWorkflow:research"] == 1 and names["workflow.run"] == 1
        assert [names[f"superstep {n}"] for n in (1, 2, 3)] == [1, 1, 1]
        assert names["executor.process planner"] == 1 and names["executor.process writer"] == 1
    done = await until(
        "the runs' counts",
        lambda: (
            (d := _delta(before, _counts(metric_reader), "research")).get("temporal_workflows.runs[completed]") == 8
            and d
        ),
    )
    assert done["temporal_workflows.runs[started]"] == 8
    assert done["temporal_workflows.steps.completed[planner]"] == 8
    assert done["temporal_workflows.steps.completed[background]"] == 8
    assert done["temporal_workflows.steps.completed[writer]"] == 8
    assert done["temporal_workflows.superstep.duration"] == 24


async def test_a_worker_restarted_mid_run_exports_each_span_and_count_once(
    client: Client, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    queue = f"otel-restart-{uuid.uuid4().hex[:6]}"
    workflow_id = f"otel-restart-{uuid.uuid4().hex[:8]}"
    before = _counts(metric_reader)
    async with Worker(client, task_queue=queue):
        handle = await start_run(
            client, telemetry_graphs.workflow, "Write about bikes", id=workflow_id, task_queue=queue
        )
        async with readers(handle):
            pending = await until_async("the approval request", handle.pending_requests)
    # The worker is gone (a deploy); the next one rebuilds the run from history, queries arriving meanwhile.
    async with Worker(client, task_queue=queue):
        async with readers(handle, pollers=3):
            await handle.respond(pending[0].request_id, pending[0].data.to_function_approval_response(approved=True))
            await handle.result()
        await _settled(span_exporter, workflow_id, "RunWorkflow:otel_agents")
    spans = _once(span_exporter, workflow_id)
    names = Counter(s.name for s in spans)
    assert names["RunWorkflow:otel_agents"] == 1 and names["workflow.run"] == 1
    assert [names[f"superstep {n}"] for n in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert names[f"request {pending[0].request_id}"] == 1
    done = await until(
        "the run's counts",
        lambda: (
            (d := _delta(before, _counts(metric_reader), "otel_agents")).get("temporal_workflows.runs[completed]") and d
        ),
    )
    assert done["temporal_workflows.runs[started]"] == 1 and done["temporal_workflows.runs[completed]"] == 1
    assert done["temporal_workflows.steps.completed[publisher]"] == 2
    assert done["temporal_workflows.steps.completed[archive]"] == 1
    assert done.get("temporal_workflows.requests.pending", 0) == 0
    assert done["temporal_workflows.superstep.duration"] == 4


async def test_a_run_continuing_as_new_exports_each_span_and_count_once(
    client: Client, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    queue = f"otel-can-{uuid.uuid4().hex[:6]}"
    workflow_id = f"otel-can-{uuid.uuid4().hex[:8]}"
    before = _counts(metric_reader)
    async with Worker(client, task_queue=queue, max_cached_workflows=0):
        handle = await start_run(
            client,
            telemetry_graphs.looping,
            telemetry_graphs.Count(n=0, upto=24),
            id=workflow_id,
            task_queue=queue,
            max_history_events=60,
        )
        async with readers(handle, pollers=3):
            assert (await handle.result())["outputs"] == [24]
        await _settled(span_exporter, workflow_id, "RunWorkflow:otel_looping")
    spans = _once(span_exporter, workflow_id)
    names = Counter(s.name for s in spans)
    segments = names["workflow.run"]
    assert segments >= 3 and names["RunWorkflow:otel_looping"] == segments
    assert sorted(s.attributes["temporal_workflows.segment"] for s in spans if s.name == "workflow.run") == list(
        range(segments)
    )
    assert [names[f"superstep {n}"] for n in range(1, 26)] == [1] * 25
    done = await until(
        "the run's counts",
        lambda: (
            (d := _delta(before, _counts(metric_reader), "otel_looping")).get("temporal_workflows.runs[completed]")
            and d
        ),
    )
    assert done["temporal_workflows.runs[started]"] == 1
    assert done["temporal_workflows.runs[continued_as_new]"] == segments - 1
    assert done["temporal_workflows.steps.completed[counter]"] == 25
    assert done["temporal_workflows.superstep.duration"] == 25


async def test_the_console_exporter_writes_to_stderr_not_into_runs_stdout(
    temporal_address: str, workflow_id: str
) -> None:
    research_input = json.dumps(research.SAMPLE_INPUT.model_dump())
    code, out, err = await run_cli(
        temporal_address,
        *("run", "examples.research:workflow", "--input", research_input, "--id", workflow_id, "--json"),
        *("--task-queue", "tw-tests"),
        env={"OTEL_TRACES_EXPORTER": "console"},
    )
    assert code == 0, err
    for line in out.splitlines():
        json.loads(line)  # stdout holds the run's events only
    assert '"name": "StartWorkflow:research"' in err
