"""OpenTelemetry traces of runs on a real dev server: shape, attributes, replay, OTLP."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.worker import Worker

from examples import research
from temporal_workflows._engine.serde import encode
from temporal_workflows.temporal import start_run
from tests.conftest import TASK_QUEUE
from tests.integration.cli import run_cli

pytestmark = pytest.mark.usefixtures("worker")


class Tree:
    """Finished spans of one trace, indexed by parent."""

    def __init__(self, spans: Sequence[ReadableSpan], trace_id: int) -> None:
        self.spans = [s for s in spans if s.context is not None and s.context.trace_id == trace_id]
        self.children: dict[int | None, list[ReadableSpan]] = defaultdict(list)
        for s in sorted(self.spans, key=lambda s: s.start_time or 0):
            self.children[s.parent.span_id if s.parent else None].append(s)

    def kids(self, span: ReadableSpan, prefix: str = "") -> list[ReadableSpan]:
        assert span.context is not None
        return [s for s in self.children[span.context.span_id] if s.name.startswith(prefix)]

    def only(self, span: ReadableSpan, name: str) -> ReadableSpan:
        found = [s for s in self.kids(span) if s.name == name]
        assert len(found) == 1, f"{span.name} has {[s.name for s in self.kids(span)]}, want one {name!r}"
        return found[0]


async def run_span_exported(exporter: InMemorySpanExporter, workflow_id: str, name: str, timeout: float = 30) -> None:
    """Wait until the run's ``name`` span has arrived: workflow-side spans are exported once their workflow task
    is known to count (the next activation, the run's eviction, or a couple of seconds later)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(
        s.name == name and s.attributes is not None and s.attributes.get("temporalWorkflowID") == workflow_id
        for s in exporter.get_finished_spans()
    ):
        assert asyncio.get_running_loop().time() < deadline, f"no {name} span for {workflow_id}"
        await asyncio.sleep(0.05)


async def _traced_run(client: Client, exporter: InMemorySpanExporter, workflow_id: str, queue: str) -> Tree:
    with trace.get_tracer("tests").start_as_current_span("client request") as root:
        handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=queue)
        await handle.result()
    await run_span_exported(exporter, workflow_id, "RunWorkflow:research")
    return Tree(exporter.get_finished_spans(), root.get_span_context().trace_id)


def _assert_research_tree(tree: Tree, workflow_id: str) -> None:
    roots = tree.children[None]
    assert [r.name for r in roots] == ["client request"]
    temporal_run = tree.only(tree.only(roots[0], "StartWorkflow:research"), "RunWorkflow:research")
    run = tree.only(temporal_run, "workflow.run")
    assert run.attributes is not None
    assert run.attributes["workflow.name"] == "research" and run.attributes["workflow.id"] == workflow_id
    supersteps = tree.kids(run, "superstep ")
    # planner, then the three researchers in parallel, then the writer: one span each, in order.
    assert [s.name for s in supersteps] == ["superstep 1", "superstep 2", "superstep 3"]
    expected = [["planner"], sorted(research.RESEARCHERS), ["writer"]]
    for number, (span, executors) in enumerate(zip(supersteps, expected, strict=True), start=1):
        assert span.attributes is not None
        assert span.attributes["temporal_workflows.superstep"] == number
        assert span.attributes["temporal_workflows.workflow_id"] == workflow_id
        starts = tree.kids(span, "StartActivity:")
        assert sorted(s.name for s in starts) == sorted(f"StartActivity:research.{e}" for e in executors)
        for start in starts:
            executor_id = start.name.removeprefix("StartActivity:research.")
            step = tree.only(tree.only(start, f"RunActivity:research.{executor_id}"), f"executor.process {executor_id}")
            assert step.attributes is not None
            attributes = dict(step.attributes)
            assert attributes.pop("temporal_workflows.run_id")
            expected_type = {1: "ResearchRequest", 2: "ResearchPlan", 3: "list[Finding]"}[number]
            assert attributes == {
                "executor.id": executor_id,
                "executor.type": attributes["executor.type"],
                "message.type": "standard",
                "message.payload_type": expected_type,
                "temporal_workflows.graph": "research",
                "temporal_workflows.executor_id": executor_id,
                "temporal_workflows.superstep": number,
                "temporal_workflows.message_type": "list[examples.research:Finding]"
                if number == 3
                else f"examples.research:{expected_type}",
                "temporal_workflows.attempt": 1,
                "temporal_workflows.workflow_id": workflow_id,
            }
        # Fan-out steps overlap: each starts before the superstep span ends and the
        # superstep lasts at least as long as its slowest step.
        assert span.end_time is not None and all(s.end_time is not None and s.end_time <= span.end_time for s in starts)


async def test_fan_out_run_has_one_span_per_superstep_and_per_step(
    client: Client, span_exporter: InMemorySpanExporter, workflow_id: str
) -> None:
    tree = await _traced_run(client, span_exporter, workflow_id, TASK_QUEUE)
    _assert_research_tree(tree, workflow_id)


async def test_replaying_every_task_exports_each_span_once(
    client: Client, span_exporter: InMemorySpanExporter, workflow_id: str
) -> None:
    queue = f"tw-nocache-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, max_cached_workflows=0):
        tree = await _traced_run(client, span_exporter, workflow_id, queue)
    _assert_research_tree(tree, workflow_id)


class _Collector(BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP trace receiver: keeps every export request it gets."""

    received: ClassVar[list[tuple[str, bytes]]] = []
    arrived = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).received.append((self.path, body))
        type(self).arrived.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Collector", (_Collector,), {"received": [], "arrived": threading.Event()})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


async def test_cli_exports_to_otlp_and_the_worker_continues_its_trace(
    temporal_address: str,
    span_exporter: InMemorySpanExporter,
    workflow_id: str,
    collector: tuple[str, type[_Collector]],
) -> None:
    endpoint, received = collector
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "tw-cli-test"}
    research_input = json.dumps(encode(research.SAMPLE_INPUT).data)
    code, _, err = await run_cli(
        temporal_address,
        *("run", "examples.research:workflow", "--input", research_input),
        *("--id", workflow_id, "--task-queue", TASK_QUEUE),
        env=otel,
    )
    assert code == 0, err
    # The CLI flushes before it exits, so the export has arrived by now.
    assert received.arrived.is_set()
    spans = []
    for path, body in received.received:
        assert path == "/v1/traces"
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            spans += [(service, s) for ss in rs.scope_spans for s in ss.spans]
    start = [s for service, s in spans if s.name == "StartWorkflow:research"]
    assert len(start) == 1 and all(service == "tw-cli-test" for service, _ in spans)
    # This process's worker ran the workflow: its run span is the CLI span's child.
    await run_span_exported(span_exporter, workflow_id, "RunWorkflow:research")
    runs = [
        s
        for s in span_exporter.get_finished_spans()
        if s.name == "RunWorkflow:research"
        and s.attributes is not None
        and s.attributes.get("temporalWorkflowID") == workflow_id
    ]
    assert len(runs) == 1 and runs[0].parent is not None and runs[0].context is not None
    assert runs[0].context.trace_id == int.from_bytes(start[0].trace_id, "big")
    assert runs[0].parent.span_id == int.from_bytes(start[0].span_id, "big")
