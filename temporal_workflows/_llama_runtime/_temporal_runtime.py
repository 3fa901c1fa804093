"""``TemporalRuntime``: a ``workflows`` (llama-index-workflows) runtime plugin that runs on Temporal.

An unchanged LlamaIndex program becomes durable by passing the runtime::

    from workflows import Workflow, step
    from temporal_workflows.llama import TemporalRuntime

    with TemporalRuntime(worker=True).registering():
        wf = MyWorkflow(timeout=60)
    result = await wf.run(topic="...")

Each run is one Temporal workflow execution (workflow id = the LlamaIndex run
id) running LlamaIndex's own control loop (``_workflow.LlamaIndexRun``); each
step invocation is an activity (``_activity.llama_step``). This module is the
client side: it starts runs, signals events in, reads the event stream and the
result, and (``worker=True``) hosts the workflow and activities in this process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Generator
from datetime import timedelta
from typing import Any, TypeVar

from llama_index_instrumentation.dispatcher import active_instrument_tags
from temporalio import activity as temporal_activity
from temporalio import workflow as temporal_workflow
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    TerminatedError,
    TimeoutError,
    WorkflowAlreadyStartedError,
)
from temporalio.plugin import SimplePlugin
from temporalio.runtime import LogForwardingConfig, LoggingConfig, TelemetryConfig, TelemetryFilter
from temporalio.runtime import Runtime as SdkRuntime
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from workflows.context.context_types import SerializedContext
from workflows.context.serializers import BaseSerializer, JsonSerializer
from workflows.context.state_store import InMemoryStateStore, StateStore, infer_state_type, is_durable_serialized_state
from workflows.context.utils import import_module_from_qualified_name
from workflows.errors import WorkflowCancelledByUser, WorkflowRuntimeError
from workflows.events import Event, StartEvent, StopEvent
from workflows.runtime.types.internal_state import BrokerState
from workflows.runtime.types.plugin import (
    ExternalRunAdapter,
    InternalRunAdapter,
    RegisteredWorkflow,
    Runtime,
    SnapshottableAdapter,
    V2RuntimeCompatibilityShim,
    WeakIdentityKeyDictionary,
    WorkflowSet,
)
from workflows.runtime.types.results import RetryAttempt, StepWorkerOutput, StepWorkerState
from workflows.runtime.types.step_function import StepWorkerFunction
from workflows.runtime.types.ticks import TickCancelRun, WorkflowTick
from workflows.workflow import Workflow

from temporal_workflows._llama_runtime import _registry, _wire
from temporal_workflows._llama_runtime._activity import llama_step
from temporal_workflows._llama_runtime._llama_private import (
    allowed_type_names,
    num_concurrent_runs,
    step_functions,
    step_functions_version,
    workflow_timeout,
)
from temporal_workflows._llama_runtime._options import StepOptions
from temporal_workflows._llama_runtime._program import program_task_queue
from temporal_workflows._llama_runtime._protocol import (
    DEFAULT_TASK_QUEUE,
    EVENTS_TOPIC,
    RESULT_ERROR_TYPE,
    SNAPSHOT_QUERY,
    STATE_QUERY,
    STORE_PATCH_SIGNAL,
    TICK_SIGNAL,
    WORKFLOW_TYPE,
    RunInput,
    RunOutput,
)
from temporal_workflows._llama_runtime._recovery import recover_queue, recover_run
from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer
from temporal_workflows._llama_runtime._server import is_server_runtime, mirror_into_server
from temporal_workflows._llama_runtime._versioning import build_id_for, signature
from temporal_workflows._llama_runtime._workflow import LlamaIndexRun, WorkflowRunAdapter, decode_tick
from temporal_workflows.temporal._client.connect import ConnectionConfig
from temporal_workflows.temporal._client.pollers import LLAMA_SERVE_HINT, check_pollers
from temporal_workflows.temporal._client.starting import start_workflow
from temporal_workflows.temporal._exit import end_cleanly
from temporal_workflows.temporal._worker.versioning import WorkerVersioning

__all__ = ["TemporalRuntime"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

SYNC_CALL_TIMEOUT_SECONDS = 5.0
"""How long a synchronous LlamaIndex call that needs the server (``ctx.to_dict()`` while a run goes) waits."""


def _not_a_run_function(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("a TemporalRuntime run starts with run_workflow, on Temporal")


def _step_stub(step_name: str) -> StepWorkerFunction:
    """The step the loop calls: in the Temporal workflow, an activity; anywhere else, a clear error."""

    async def stub(
        state: StepWorkerState,
        step_name: str,
        event: Event,
        workflow: Workflow,
        bound_events: dict[str, Event] | None = None,
        retry: RetryAttempt = RetryAttempt(),  # noqa: B008 (LlamaIndex's own signature)
    ) -> list[StepWorkerOutput]:
        adapter = _registry.current_adapter.get()
        if not temporal_workflow.in_workflow() or not isinstance(adapter, WorkflowRunAdapter):
            raise WorkflowRuntimeError(f"step {step_name!r} of a TemporalRuntime workflow runs only inside its run")
        return await adapter.run_step(state, step_name, event, bound_events, retry)

    stub.__name__ = step_name
    return stub


class _RunStore:
    """``handler.ctx.store``: reads query the run (its store as of its last completed step); writes go
    to the run as a JSON patch it applies at once. After the run, the final store."""

    def __init__(self, adapter: TemporalExternalAdapter) -> None:
        self._adapter = adapter

    async def get_state(self) -> Any:
        return await (await self._adapter.current_store()).get_state()

    async def get(self, path: str, default: Any = Ellipsis) -> Any:
        store = await self._adapter.current_store()
        return await (store.get(path) if default is Ellipsis else store.get(path, default))

    async def _write(self, edit: Any) -> None:
        store = await self._adapter.current_store()
        before = store.checkpoint()
        await edit(store)
        after = store.checkpoint()
        await self._adapter.write_store(after.diff(before), after.to_dict())

    async def set(self, path: str, value: Any) -> None:
        await self._write(lambda s: s.set(path, value))

    async def set_state(self, state: Any) -> None:
        await self._write(lambda s: s.set_state(state))

    async def clear(self) -> None:
        await self._write(lambda s: s.clear())

    @contextlib.asynccontextmanager
    async def edit_state(self) -> AsyncIterator[Any]:
        store = await self._adapter.current_store()
        before = store.checkpoint()
        async with store.edit_state() as state:
            yield state
        after = store.checkpoint()
        await self._adapter.write_store(after.diff(before), after.to_dict())

    def to_dict(self, serializer: BaseSerializer) -> dict[str, Any]:
        self._adapter.live_snapshot()  # while the run goes, its store now (and the state to_dict writes next)
        data = self._adapter._store
        assert data is not None
        return InMemoryStateStore.from_dict(data, self._adapter._serializer).to_dict(serializer)


class _LoopState:
    """The client of one event loop (a program may ``asyncio.run`` several times)."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.connecting: asyncio.Lock = asyncio.Lock()
        self.run_limits: WeakIdentityKeyDictionary[Workflow, asyncio.Semaphore] = WeakIdentityKeyDictionary()
        """``num_concurrent_runs``: per workflow instance, as ``BasicRuntime`` keeps them."""
        self.releasing: set[asyncio.Task[None]] = set()


class _WorkerThread:
    """The in-process worker (``worker=True``), on an event loop of its own in a daemon thread.

    Not on the caller's loop: a program may ``asyncio.run`` several times, and a worker
    cancelled by the end of one ``asyncio.run`` does not always shut down (the next run
    then hangs in its own teardown). One worker serves every loop of the process.
    """

    def __init__(self, runtime: TemporalRuntime) -> None:
        self._runtime = runtime
        self._loop = asyncio.new_event_loop()
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._worker: Worker | None = None
        self._thread = threading.Thread(target=self._main, name="temporal-llama-worker", daemon=True)
        self._thread.start()
        _LIVE_WORKER_THREADS.add(self)
        end_cleanly(_stop_workers_at_exit)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        try:
            client = await self._runtime._connect()
            self._worker = self._runtime.worker(client)
        except BaseException as e:
            self._ready.set_exception(e)
            return
        self._ready.set_result(None)
        await self._worker.run()

    async def ready(self) -> None:
        await asyncio.wrap_future(self._ready)

    def wait_ready(self, timeout: float) -> None:
        """Block until the worker runs (from synchronous code: ``launch_sync()``)."""
        self._ready.result(timeout)

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_blocking, 30)

    def stop_blocking(self, timeout: float) -> None:
        """Shut the worker down and wait (at most ``timeout`` seconds) for its thread to end."""
        _LIVE_WORKER_THREADS.discard(self)
        if self._worker is None or not self._thread.is_alive():
            return
        # The thread ends when the worker's run() returns, which its shutdown makes it do.
        asyncio.run_coroutine_threadsafe(self._worker.shutdown(), self._loop)
        self._thread.join(timeout)


_LIVE_WORKER_THREADS: weakref.WeakSet[_WorkerThread] = weakref.WeakSet()
WORKER_READY_TIMEOUT_SECONDS = 60.0
"""How long a synchronous ``launch()`` waits for the in-process worker to connect and start."""


def _no_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


class _Done(Coroutine[Any, None, None]):
    """An awaitable that is already done: what ``launch()``/``destroy()`` return when called from synchronous
    code, having done their work (never a coroutine object, which would warn when not awaited)."""

    def send(self, value: None) -> Any:
        raise StopIteration

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        raise typ if val is None else val

    def close(self) -> None:
        return None

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


@contextlib.asynccontextmanager
async def _recovering(client: Client, task_queue: str) -> AsyncIterator[None]:
    """Around a worker's run: its queue's steps left running by dead processes of this host run again now."""
    task = asyncio.get_running_loop().create_task(recover_queue(client, task_queue))
    try:
        yield
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task


EXIT_SHUTDOWN_TIMEOUT_SECONDS = 10.0
"""How long a program's exit waits for each in-process worker to shut down (steps still running are cancelled)."""


def _stop_workers_at_exit() -> None:
    """Shut down the in-process workers (``worker=True``) before the interpreter finalizes.

    Their polls stay pending while the program runs, and their daemon threads are not stopped at exit: a
    poll completing into a finalizing interpreter would abort the process (``temporal._exit``). Steps
    still running are cancelled, and retried on another worker, as if this one died.
    """
    for thread in list(_LIVE_WORKER_THREADS):
        thread.stop_blocking(EXIT_SHUTDOWN_TIMEOUT_SECONDS)


_SDK_RUNTIME: list[SdkRuntime] = []
_SDK_RUNTIME_LOCK = threading.Lock()


def _sdk_runtime() -> SdkRuntime:
    """The SDK runtime of the clients (and so the in-process worker) this runtime connects itself.

    The SDK's default runtime writes its Rust core's warnings to stdout (an activity cancelled as a race's
    loser completing late, say: "Activity not found on completion"), where they would interleave with what
    the LlamaIndex program prints, which the default runtime leaves alone. Here the core's logs go to the
    Python logger ``temporalio.core`` instead (warnings and above), so they reach stderr or wherever the
    program's logging sends them. One per process: a runtime owns threads.
    """
    with _SDK_RUNTIME_LOCK:
        if not _SDK_RUNTIME:
            logging_config = LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
            )
            _SDK_RUNTIME.append(SdkRuntime(telemetry=TelemetryConfig(logging=logging_config)))
        return _SDK_RUNTIME[0]


class _SyncCalls:
    """An event loop of its own, in a daemon thread, for LlamaIndex calls that are synchronous but need
    the server: ``handler.ctx.to_dict()`` while the run goes reads the run's state by a query.

    The caller's loop is blocked for that query, as the call is synchronous; its client is this loop's.
    """

    def __init__(self, runtime: TemporalRuntime) -> None:
        self._runtime = runtime
        self._client: Client | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="temporal-llama-sync", daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[Client], Awaitable[_T]], timeout: float) -> _T:
        async def go() -> _T:
            if self._client is None:
                self._client = await self._runtime._connect()
            return await fn(self._client)

        return asyncio.run_coroutine_threadsafe(go(), self._loop).result(timeout)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


class TemporalRuntime(Runtime):
    """Runs LlamaIndex ``workflows`` programs on Temporal, unchanged.

    Args:
        client: The Temporal client. ``None`` (default): connect on first use,
            in whichever event loop runs the workflow, the way the ``temporal``
            CLI does (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, profiles:
            :class:`~temporal_workflows.temporal.ConnectionConfig`), with the
            project's JSON data converter.
        task_queue: The queue runs and steps go to. Default: ``llama-index-workflows``, the queue
            production workers poll; with ``worker=True``, a queue of this program's own
            (``llama-index-workflows-<digest of the main file and the workflows built>``, see
            ``_program.py``): a program killed mid-run and started again picks its runs up, and two
            programs sharing a server never pick up each other's runs.
        worker: Host every workflow built with this runtime in this process
            (development, notebooks, tests). Production workers run
            ``TemporalRuntime.worker(client)`` (or the CLI) in their own processes.
        connection: Where to connect when ``client`` is ``None`` (default: from the environment).
        step_options: Temporal options of the step activities (:class:`StepOptions`).
        default_serializer: As ``workflows.Runtime``.
        idle_release_after_ticks: Continue an idle run as new once its journal has this many ticks
            (default: when Temporal suggests it, as its history grows long). Idle: no step running,
            no timer due, e.g. a ``timeout=None`` run waiting for a human.
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        task_queue: str | None = None,
        worker: bool = False,
        connection: ConnectionConfig | None = None,
        step_options: StepOptions | None = None,
        default_serializer: BaseSerializer | None = None,
        idle_release_after_ticks: int | None = None,
    ) -> None:
        super().__init__(default_serializer=default_serializer)
        self._client = client
        if task_queue is None and not worker:
            task_queue = DEFAULT_TASK_QUEUE
        self._task_queue = task_queue
        self.hosts_worker = worker
        self._connection = connection
        self.step_options = step_options if step_options is not None else StepOptions()
        self.idle_release_after_ticks = idle_release_after_ticks
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._hosted = WorkflowSet()
        self._serializers: WeakIdentityKeyDictionary[Workflow, BaseSerializer] = WeakIdentityKeyDictionary()
        self._worker_thread: _WorkerThread | None = None
        self._sync_calls: _SyncCalls | None = None
        self._worker_lock = threading.Lock()
        self._registered: WeakIdentityKeyDictionary[Workflow, tuple[int, RegisteredWorkflow]] = (
            WeakIdentityKeyDictionary()
        )
        """Per instance: its registration, and the class's step version it was made at."""
        self._adapters: weakref.WeakValueDictionary[str, TemporalExternalAdapter] = weakref.WeakValueDictionary()
        self._server_store: Any = None

    @property
    def task_queue(self) -> str:
        """The queue this runtime's runs and steps go to (an in-process worker's: named on first use)."""
        if self._task_queue is None:
            self._task_queue = program_task_queue(_registry.hosted())
        return self._task_queue

    @task_queue.setter
    def task_queue(self, value: str) -> None:
        self._task_queue = value

    @property
    def is_launched(self) -> bool:
        return True  # nothing to launch first: the client and worker start on first use

    def get_serializer(self, workflow: Workflow) -> BaseSerializer:
        base = super().get_serializer(workflow)
        if type(base) is not JsonSerializer or allowed_type_names(base) is not None:
            return base  # the workflow chose its serializer (or an allow-list): it is used as it is
        cached = self._serializers.get(workflow)
        if cached is None:
            types: list[type[Any]] = [*workflow.events, infer_state_type(workflow)]
            cached = DeclaredTypesSerializer(types)
            self._serializers[workflow] = cached
        return cached

    # -- registration -----------------------------------------------------------------------------
    def track_workflow(self, workflow: Workflow) -> None:
        super().track_workflow(workflow)
        self._hosted.add(workflow)
        _registry.remember(workflow, self.step_options)

    def register(self, workflow: Workflow) -> RegisteredWorkflow:
        registered = RegisteredWorkflow(
            workflow=workflow,
            workflow_run_fn=_not_a_run_function,
            steps={name: _step_stub(name) for name in step_functions(workflow)},
        )
        self._registered[workflow] = (step_functions_version(workflow), registered)
        self._hosted.add(workflow)
        _registry.remember(workflow, self.step_options)
        return registered

    def get_registered(self, workflow: Workflow) -> RegisteredWorkflow | None:
        found = self._registered.get(workflow)
        if found is None or found[0] != step_functions_version(workflow):
            return None  # a step added to the class since (@step(workflow=...)): registered again, with it
        return found[1]

    # -- connection and in-process worker ---------------------------------------------------------
    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = _LoopState()
            self._loops[loop] = state
        return state

    async def client(self) -> Client:
        """The client of the running event loop (connected on first use), with the worker started if asked."""
        state = self._loop_state()
        async with state.connecting:
            if state.client is None:
                state.client = await self._connect()
        if self.hosts_worker:
            await self._worker_thread_started().ready()
        return state.client

    async def _connect(self) -> Client:
        end_cleanly()  # a client given too: no abort at the process's exit (temporal/_exit.py)
        if self._client is not None:
            return self._client
        from temporal_workflows.temporal._codec import EncryptionCodec
        from temporal_workflows.temporal._worker.plugin import data_converter

        config = self._connection if self._connection is not None else ConnectionConfig.from_env()
        return await config.connect(data_converter=data_converter(EncryptionCodec.from_env()), runtime=_sdk_runtime())

    def build_id(self) -> str:
        """This process's worker build id: the ``workflows`` version and the shapes of the workflows built
        with this runtime (``_versioning.build_id_for``)."""
        return build_id_for(self._hosted)

    def worker(
        self,
        client: Client,
        *,
        deployment_name: str | None = None,
        build_id: str | None = None,
        make_current: bool = True,
        **kwargs: Any,
    ) -> Worker:
        """A worker hosting every LlamaIndex workflow built with a ``TemporalRuntime`` in this process.

        With ``deployment_name`` the worker joins that Worker Deployment as version ``build_id`` (default
        :meth:`build_id`) and runs are pinned to the version they start on, so a worker with another
        ``workflows`` version or other steps never replays them. Unless ``make_current=False``, the worker
        makes its version the deployment's current one as it starts (retrying while the server is not ready),
        so new runs go to it: a rolling deploy, as ``TemporalWorkflowsPlugin(versioning=...)`` does for
        graphs. With ``make_current=False`` promote it yourself (``temporal worker deployment
        set-current-version``); until a version is current, no run of the queue starts.
        """
        if deployment_name is not None and "deployment_config" not in kwargs:
            versioning = WorkerVersioning(deployment_name, build_id or self.build_id(), make_current=make_current)
            kwargs["deployment_config"] = versioning.deployment_config([])
            if make_current:
                # Promoted beside the worker, as graph workers promote theirs (WorkerVersioning.promoting).
                plugin = SimplePlugin(
                    "temporal_workflows.llama.versioning", run_context=lambda: versioning.promoting(client, [])
                )
                kwargs["plugins"] = [*kwargs.get("plugins", ()), plugin]
        task_queue = kwargs.pop("task_queue", self.task_queue)
        # Steps left running by a dead worker process of this host run again at once (_recovery.py).
        recovering = SimplePlugin(
            "temporal_workflows.llama.recovery", run_context=lambda: _recovering(client, task_queue)
        )
        kwargs["plugins"] = [*kwargs.get("plugins", ()), recovering]
        return Worker(
            client,
            task_queue=task_queue,
            workflows=[LlamaIndexRun],
            activities=[llama_step],
            **kwargs,
        )

    # -- llama-agents-server, as the DBOS runtime wires it ----------------------------------------
    def create_workflow_store(self) -> Any:
        """The store a ``WorkflowServer`` keeps its handlers in (``llama_agents.server.MemoryWorkflowStore``).

        So a server written for ``llama-agents-dbos``
        (``WorkflowServer(workflow_store=rt.create_workflow_store(), runtime=rt.build_server_runtime())``)
        runs unchanged with this runtime. The runs themselves, their events and results live in Temporal.
        """
        from llama_agents.server import MemoryWorkflowStore

        if self._server_store is None:
            self._server_store = MemoryWorkflowStore()
        return self._server_store

    def build_server_runtime(self, *, idle_timeout: float = 600.0) -> Runtime:
        """The runtime to give ``WorkflowServer``: this one (the server's bridge is built in, see ``_server.py``).

        ``idle_timeout`` is accepted for ``llama-agents-dbos`` programs: an idle run here costs no worker
        resources (it waits in Temporal), and it continues as new when its history grows long.
        """
        del idle_timeout
        return self

    def launch(self) -> Coroutine[Any, Any, None]:
        """LlamaIndex's ``Runtime.launch``: a coroutine to await in async code (it waits for the in-process
        worker, ``worker=True``). Called from synchronous code, it launches at once (as ``launch_sync()`` and
        DBOS's synchronous launch do) and what it returns need not be awaited."""
        self._launch_now()
        if _no_running_loop():
            self._wait_for_worker()
            return _Done()
        return self._await_launch()

    async def _await_launch(self) -> None:
        if self.hosts_worker:
            await self.client()

    def launch_sync(self) -> None:
        self._launch_now()
        self._wait_for_worker()

    def _launch_now(self) -> None:
        """``Runtime.launch``'s own work (it awaits nothing), and the in-process worker's thread started."""
        coro = super().launch()
        try:
            coro.send(None)
        except StopIteration:
            pass
        else:  # pragma: no cover - a LlamaIndex whose launch awaits something
            coro.close()
            raise RuntimeError("Runtime.launch awaited something: launch TemporalRuntime with 'await rt.launch()'")
        if self.hosts_worker:
            self._worker_thread_started()

    def _worker_thread_started(self) -> _WorkerThread:
        with self._worker_lock:
            if self._worker_thread is None:
                self._worker_thread = _WorkerThread(self)
            return self._worker_thread

    def _wait_for_worker(self) -> None:
        if self.hosts_worker:
            self._worker_thread_started().wait_ready(WORKER_READY_TIMEOUT_SECONDS)

    def call_sync(self, fn: Callable[[Client], Awaitable[_T]], timeout: float = SYNC_CALL_TIMEOUT_SECONDS) -> _T:
        """Run ``fn(client)`` to completion from synchronous code (even inside a running event loop)."""
        with self._worker_lock:
            if self._sync_calls is None:
                self._sync_calls = _SyncCalls(self)
            calls = self._sync_calls
        return calls.call(fn, timeout)

    def destroy(self) -> Coroutine[Any, Any, None]:
        """LlamaIndex's ``Runtime.destroy``: a coroutine to await in async code. Called from synchronous code, it
        shuts the in-process worker down at once (as ``destroy_sync()``); what it returns need not be awaited."""
        if _no_running_loop():
            self.destroy_sync()
            return _Done()
        return self._destroy()

    async def _destroy(self) -> None:
        thread = self._take_resources()
        if thread is not None:
            await thread.stop()
        await super().destroy()

    def destroy_sync(self) -> None:
        thread = self._take_resources()
        if thread is not None:
            thread.stop_blocking(EXIT_SHUTDOWN_TIMEOUT_SECONDS)
        coro = super().destroy()
        try:
            coro.send(None)
        except StopIteration:
            pass
        else:  # pragma: no cover
            coro.close()

    def _take_resources(self) -> _WorkerThread | None:
        with self._worker_lock:
            calls, self._sync_calls = self._sync_calls, None
            thread, self._worker_thread = self._worker_thread, None
        if calls is not None:
            calls.stop()
        return thread

    # -- runs -------------------------------------------------------------------------------------
    def run_workflow(
        self,
        run_id: str,
        workflow: Workflow,
        init_state: BrokerState,
        start_event: StartEvent | None = None,
        serialized_state: dict[str, Any] | None = None,
        serializer: BaseSerializer | None = None,
    ) -> ExternalRunAdapter:
        self.get_or_register(workflow)
        active = serializer if serializer is not None else workflow.runtime.get_serializer(workflow)
        if serialized_state:
            if is_durable_serialized_state(serialized_state):
                raise WorkflowRuntimeError(
                    f"TemporalRuntime cannot restore the durable state store {serialized_state.get('store_type')!r}"
                )
            store = _wire.run_store(active, serialized_state, infer_state_type(workflow))
        else:
            store = _wire.run_store(active, None, infer_state_type(workflow))
        inp = RunInput(
            workflow_name=workflow.workflow_name,
            signature=signature(workflow),
            timeout=workflow_timeout(workflow),
            timeout_set=True,
            instance_key=_registry.instance_key(workflow),
            start_event=None if start_event is None else _wire.encode_event(active, start_event),
            init_state=init_state.to_serialized(active).model_dump(mode="json"),
            store=store.checkpoint().to_dict(),
            idle_release_after_ticks=self.idle_release_after_ticks,
            instrument_tags=_caller_tags(),
        )
        adapter = TemporalExternalAdapter(self, run_id, active, inp.store, init_state, workflow)
        loop = asyncio.get_running_loop()
        adapter.started = loop.create_task(self._start(run_id, inp, workflow, adapter))
        self._adapters[run_id] = adapter
        if is_server_runtime(workflow.runtime):
            # Served by llama-agents-server: its store learns the run's events from here (_server.py).
            adapter.mirror = loop.create_task(mirror_into_server(workflow, adapter))
        return adapter

    async def _start(
        self, run_id: str, inp: RunInput, workflow: Workflow, adapter: TemporalExternalAdapter
    ) -> WorkflowHandle[Any, RunOutput]:
        """Start the run; with ``num_concurrent_runs`` set, once fewer than that many runs of this
        workflow instance started here are going, as ``BasicRuntime`` holds a run back until then."""
        limit = num_concurrent_runs(workflow)
        if limit is None:
            return await self._start_execution(run_id, inp, adapter)
        state = self._loop_state()
        sem = state.run_limits.get(workflow)
        if sem is None:
            sem = asyncio.Semaphore(limit)
            state.run_limits[workflow] = sem
        await sem.acquire()
        try:
            handle = await self._start_execution(run_id, inp, adapter)
        except BaseException:
            sem.release()
            raise

        async def release_when_done() -> None:
            try:
                with contextlib.suppress(Exception):
                    await handle.result()
            finally:
                sem.release()

        task = asyncio.get_running_loop().create_task(release_when_done())
        state.releasing.add(task)
        task.add_done_callback(state.releasing.discard)
        return handle

    async def _start_execution(
        self, run_id: str, inp: RunInput, adapter: TemporalExternalAdapter
    ) -> WorkflowHandle[Any, RunOutput]:
        """Start the run; a run id that names a run already (running or ended) attaches to that run instead.

        As under DBOS, where a workflow id names one run: ``workflow.run(run_id=...)`` again after the program
        was killed goes on with the run it started (a step its dead worker was running runs again at once,
        ``_recovery.py``), and after the run ended returns its result. A run id of another workflow is refused.
        """
        client = await self.client()
        try:
            handle = await start_workflow(
                client,
                WORKFLOW_TYPE,
                inp,
                id=run_id,
                task_queue=self.task_queue,
                result_type=RunOutput,
                static_summary=inp.workflow_name,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            return await adapter._attach(expect=inp)
        if not self.hosts_worker:
            # A queue nobody polls looks like a hang: said in the log (temporal/_client/pollers.py).
            check_pollers(client, self.task_queue, run_id, LLAMA_SERVE_HINT)
        return handle

    def get_internal_adapter(self, workflow: Workflow) -> InternalRunAdapter:
        adapter = _registry.current_adapter.get()
        if adapter is None:
            raise RuntimeError("No current TemporalRuntime run: this is called from a run's loop or one of its steps")
        return adapter

    def get_external_adapter(self, run_id: str) -> ExternalRunAdapter:
        """The adapter of run ``run_id``: the one this runtime started, or any run on the server.

        A run started by another process (or by this program before it was killed) is found by its
        workflow id, as ``WorkflowHandler(workflow, runtime.get_external_adapter(run_id))`` expects to
        resume it; which workflow it runs is read from its history, and (``worker=True``) this
        process's worker takes it over.
        """
        adapter = self._adapters.get(run_id)
        if adapter is None or _failed(adapter.started):
            # (A failed attach, the server unreachable say, is not kept: the next call tries again.)
            adapter = TemporalExternalAdapter.attach(self, run_id)
            self._adapters[run_id] = adapter
        return adapter


class TemporalExternalAdapter(ExternalRunAdapter, SnapshottableAdapter, V2RuntimeCompatibilityShim):
    """The handler's view of a run: signals in, the stream topic out, the result."""

    started: asyncio.Task[WorkflowHandle[Any, RunOutput]]
    mirror: asyncio.Task[None] | None = None
    """Under llama-agents-server: the task recording the run's events in the server's store (it also
    keeps this adapter alive while the run goes, for the server's later ``get_external_adapter``)."""

    def __init__(
        self,
        runtime: TemporalRuntime,
        run_id: str,
        serializer: BaseSerializer,
        store: dict[str, Any] | None,
        init_state: BrokerState,
        workflow: Workflow,
    ) -> None:
        self._runtime = runtime
        self._workflow = workflow
        self._init_state = init_state
        self._ticks: list[WorkflowTick] = []
        self._run_id = run_id
        self._serializer = serializer
        self._store = store
        self._result: StopEvent | None = None
        self._error: BaseException | None = None
        self._done = False
        self._live: BrokerState | None = None
        self._final_read = False

    @classmethod
    def attach(cls, runtime: TemporalRuntime, run_id: str) -> TemporalExternalAdapter:
        """The adapter of a run this runtime did not start (another process, or this program before a crash).

        Which workflow it runs, its serializer, first state and store are read from the start of the
        run's current execution before anything else is done with it (``started``).
        """
        self = cls.__new__(cls)
        self._runtime = runtime
        self._run_id = run_id
        self._ticks = []
        self._result = None
        self._error = None
        self._done = False
        self._live = None
        self._final_read = False
        self._store = {}  # the run's own, once read; queried from the run while it goes
        self.started = asyncio.get_running_loop().create_task(self._attach())
        return self

    async def _attach(self, expect: RunInput | None = None) -> WorkflowHandle[Any, RunOutput]:
        """Read which workflow run ``run_id`` runs, its serializer, first state and store (its current execution's
        input); ``expect``: the input this adapter would have started it with, which must be of the same workflow."""
        client = await self._runtime.client()
        handle = client.get_workflow_handle(self._run_id, result_type=RunOutput)
        inp: RunInput | None = None
        try:
            async for event in handle.fetch_history_events(page_size=1):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                [inp] = await client.data_converter.decode(payloads, [RunInput])
                break
        except RPCError as e:
            raise RuntimeError(f"No workflow run with run_id {self._run_id!r} on the Temporal server: {e}") from None
        if not isinstance(inp, RunInput):
            raise RuntimeError(f"Workflow {self._run_id!r} is not a LlamaIndex run of TemporalRuntime")
        if expect is not None and (
            inp.workflow_name != expect.workflow_name
            or (inp.signature is not None and expect.signature is not None and inp.signature != expect.signature)
        ):
            raise WorkflowRuntimeError(
                f"run id {self._run_id!r} names a run of workflow {inp.workflow_name!r} (signature "
                f"{inp.signature}) already; this is {expect.workflow_name!r} (signature {expect.signature}): "
                "choose another run id"
            )
        # Its steps left running by a dead process of this host (the program before a kill) run again now.
        recovery = asyncio.get_running_loop().create_task(recover_run(client, self._run_id))
        _BACKGROUND.add(recovery)
        recovery.add_done_callback(_BACKGROUND.discard)
        workflow = _registry.lookup(inp.workflow_name, inp.instance_key)
        serializer = workflow.runtime.get_serializer(workflow)
        self._workflow, self._serializer = workflow, serializer
        self._init_state = BrokerState.from_serialized(
            SerializedContext.model_validate(inp.init_state), workflow, serializer
        )
        self._store = inp.store
        return handle

    @property
    def run_id(self) -> str:
        return self._run_id

    async def send_event(self, tick: WorkflowTick) -> None:
        if isinstance(tick, TickCancelRun):  # ctx.shutdown(), a cancel sent as a tick
            await self.cancel()
            return
        event = getattr(tick, "event", None)
        if isinstance(event, Event):
            # Its class may be one no step declares (what a wait_for_event waits for) and that cannot be
            # imported by name (defined in a function, or in a program run by runpy): the run reads it
            # back in this process by the name its record carries.
            _registry.note_type(event)
        await self.started
        client = await self._runtime.client()
        # By workflow id only: the run may have continued as new since it started.
        try:
            await client.get_workflow_handle(self._run_id).signal(TICK_SIGNAL, self._serializer.serialize(tick))
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND or "already completed" not in str(e):
                raise
            # Under the default runtime a run that has ended ignores what it is sent (a cancel_run() or
            # ctx.shutdown() after the result, say): so here, rather than failing the caller.
            _log.info("run %s has ended: %s not delivered", self._run_id, type(tick).__name__)

    async def stream_published_events(self) -> AsyncGenerator[Event, None]:
        await self.started
        client = await self._runtime.client()
        stream = WorkflowStreamClient.create(client, self._run_id)
        serializer = self._stream_serializer()
        async for item in stream.subscribe(
            [EVENTS_TOPIC], 0, result_type=str, poll_cooldown=timedelta(milliseconds=20)
        ):
            event = _wire.decode_event(serializer, item.data)
            if isinstance(event, StopEvent):
                event = _wire.resolve_in_process(event, strict=False)
            yield event
            if isinstance(event, StopEvent):
                return
        # The run ended without a StopEvent: it failed or was cancelled; say so as LlamaIndex would.
        await self.get_result()

    def _stream_serializer(self) -> BaseSerializer:
        """What the run's stream is read with: the run's serializer, unless it has an allow-list (as
        llama-agents-server's has, for what HTTP clients send). The stream carries only what the run
        itself wrote (LlamaIndex's own ``StepStateChanged``, ``WorkflowFailedEvent``, a step's
        ``write_event_to_stream``), which under the default runtime never leaves the process and so
        is never checked against that list; it is read with the runtime's open serializer instead."""
        if isinstance(self._serializer, JsonSerializer) and allowed_type_names(self._serializer) is not None:
            return DeclaredTypesSerializer([*self._workflow.events, infer_state_type(self._workflow)])
        return self._serializer

    def get_state_store(self, namespace: tuple[str, ...] = ()) -> StateStore[Any] | None:
        if namespace or self._store is None:
            return None
        return _RunStore(self)  # type: ignore[return-value]

    async def current_store(self) -> InMemoryStateStore[Any]:
        """The run's store now: queried from the run while it goes, else its final store."""
        if not self._done:
            await self.started
            client = await self._runtime.client()
            with contextlib.suppress(RPCError, WorkflowQueryFailedError):
                self._store = await client.get_workflow_handle(self._run_id).query(STATE_QUERY)
        assert self._store is not None
        return InMemoryStateStore.from_dict(self._store, self._serializer)

    async def write_store(self, patch: list[dict[str, Any]], written: dict[str, Any]) -> None:
        if not patch:
            return
        if self._done:
            self._store = written  # a finished run's store, as the next run with this Context starts it
            return
        client = await self._runtime.client()
        await client.get_workflow_handle(self._run_id).signal(STORE_PATCH_SIGNAL, patch)

    async def get_result(self) -> StopEvent:
        try:
            return await self._get_result()
        finally:
            # Under llama-agents-server the caller (its /run endpoint) reads the handler's status from
            # the server's store next: it is there once the mirror has recorded the run's last event.
            mirror = self.mirror
            if mirror is not None and mirror is not asyncio.current_task():
                with contextlib.suppress(Exception):
                    await asyncio.shield(mirror)

    async def _get_result(self) -> StopEvent:
        if self._done:
            if self._error is not None:
                raise self._error
            assert self._result is not None
            return self._result
        handle = await self.started
        try:
            out = await handle.result()
        except WorkflowFailureError as e:
            self._error = self._exception(e)
            self._done = True
            raise self._error from None
        self._store = out.store
        self._ticks = [decode_tick(self._serializer, t) for t in out.ticks]
        if out.init_state is not None:
            self._init_state = BrokerState.from_serialized(
                SerializedContext.model_validate(out.init_state), self._workflow, self._serializer
            )
        stop = _wire.decode_event(self._serializer, out.stop_event)
        assert isinstance(stop, StopEvent)
        if out.stop_result_typed and type(stop) is StopEvent and isinstance(self._serializer, JsonSerializer):
            with self._serializer.validation_context():
                stop = StopEvent(result=_wire.decode_result(self._serializer, out.model_dump()))
        try:
            stop = _wire.resolve_in_process(stop, strict=True)
        except WorkflowRuntimeError as e:
            self._error, self._done = e, True
            raise
        self._result, self._done = stop, True
        return stop

    def _exception(self, e: WorkflowFailureError) -> BaseException:
        cause = e.cause
        if isinstance(cause, ApplicationError) and (cause.type or "").startswith(RESULT_ERROR_TYPE):
            details = cause.details[0] if cause.details else {}
            return _rebuild(
                str(details.get("exception_type", "")),
                str(details.get("exception_message", "")),
                details.get("exception_state"),
            )
        if isinstance(cause, CancelledError):
            return WorkflowCancelledByUser()  # as LlamaIndex's loop raises it
        if isinstance(cause, TerminatedError):
            return WorkflowCancelledByUser(f"the run was terminated: {cause}")
        if isinstance(cause, TimeoutError):
            return WorkflowRuntimeError(f"the run timed out on Temporal: {cause}")
        return WorkflowRuntimeError(f"the run failed: {cause or e}")

    async def cancel(self) -> None:
        """``handler.cancel_run()``: a Temporal cancel request; the run hands LlamaIndex's loop its cancel tick
        and ends CANCELED (``WorkflowCancelledByUser`` from ``await handler``, as under the default runtime)."""
        await self.started
        client = await self._runtime.client()
        try:
            await client.get_workflow_handle(self._run_id).cancel()
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
            _log.info("run %s has ended: cancel not delivered", self._run_id)

    # -- snapshots (ctx.to_dict(), running_steps()) ------------------------------------------------
    @property
    def init_state(self) -> BrokerState:
        """The state ``replay()``'s ticks start from: while the run goes, its state now (``replay()`` is
        then empty); once it has ended, its start state or final state (see ``_get_result``)."""
        live = self.live_snapshot()
        return live if live is not None else self._init_state

    def live_snapshot(self) -> BrokerState | None:
        """While the run goes (or once it has ended with an error, whose result carries no state): its
        broker state and store now, by a query (``SNAPSHOT_QUERY``).

        Under the default runtime ``handler.ctx.to_dict()`` folds the run's live journal, so a context
        saved while a step runs (or a human is awaited) resumes there, with the steps already done not
        run again. The journal here is in the run, so the run answers a query; ``to_dict()`` is
        synchronous, so the query blocks the caller for its round trip. One ``to_dict()`` reads one
        snapshot: the store it writes and the state match. ``None`` once the run has ended, or when the
        run cannot answer (it has not started, no worker answers in time): then the start state stands.
        """
        if (self._done and (self._error is None or self._final_read)) or not hasattr(self, "_workflow"):
            return None  # a run that completed returned its final state (``_get_result``)
        if self._live is not None:
            return self._live
        if temporal_activity.in_activity():
            # A step (a nested run's handler): blocking the worker's loop for a query that loop may have
            # to answer would stall it. The start state stands, as before.
            return None
        try:
            snap = self._runtime.call_sync(
                lambda client: client.get_workflow_handle(self._run_id).query(
                    SNAPSHOT_QUERY, rpc_timeout=timedelta(seconds=SYNC_CALL_TIMEOUT_SECONDS)
                )
            )
            state = snap.get("init_state") if isinstance(snap, dict) else None
            if state is None:
                return None
            live = BrokerState.from_serialized(
                SerializedContext.model_validate(state), self._workflow, self._serializer
            )
        except Exception as e:
            _log.warning(
                "run %s: its state now could not be read (%s: %s); the start state stands",
                self._run_id,
                type(e).__name__,
                e,
            )
            return None
        if isinstance(snap.get("store"), dict):
            self._store = snap["store"]
        if self._done:
            # It ended with an error (a step's, a timeout, cancel_run()): its state is final, and kept
            # "running" by LlamaIndex's reducer so that a context saved now resumes the run.
            self._init_state, self._ticks, self._final_read = live, [], True
            return live
        self._live = live
        with contextlib.suppress(RuntimeError):  # outside a loop nothing is cached past this call
            asyncio.get_running_loop().call_soon(self._forget_live)
            return live
        self._live = None
        return live

    def _forget_live(self) -> None:
        self._live = None

    def replay(self) -> list[WorkflowTick]:
        """The run's ticks: all of them once the run has ended (a running run's journal is on the worker)."""
        return self._ticks

    # -- v2 compatibility -------------------------------------------------------------------------
    def get_result_or_none(self) -> StopEvent | None:
        if self._error is not None:
            raise self._error
        return self._result

    @property
    def is_running(self) -> bool:
        return not self._done

    def abort(self) -> None:
        async def terminate() -> None:
            handle = await self.started
            await handle.terminate("aborted from the handler")

        asyncio.get_running_loop().create_task(terminate())


_BACKGROUND: set[asyncio.Task[Any]] = set()
"""Fire-and-forget tasks (step recovery), kept alive until done."""


def _failed(task: asyncio.Task[Any]) -> bool:
    return task.done() and not task.cancelled() and task.exception() is not None


def _caller_tags() -> dict[str, Any]:
    """The LlamaIndex instrument tags around ``run()`` that plain JSON carries (the run id is the run's own)."""
    tags: dict[str, Any] = {}
    for k, v in active_instrument_tags.get().items():
        if k != "llamaindex.run_id" and isinstance(k, str) and (v is None or isinstance(v, str | int | float | bool)):
            tags[k] = v
    return tags


def _rebuild(type_name: str, message: str, state: Any = None) -> BaseException:
    """The exception the run ended with, as LlamaIndex raises it (the same class when importable, with
    the step's own args and attributes when they were recorded)."""
    exact = _wire.rebuild_exception(None, type_name, message, state)
    if exact is not None:
        return exact
    try:
        cls = import_module_from_qualified_name(type_name)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls(message)
    except Exception:
        pass
    return WorkflowRuntimeError(f"{type_name}: {message}")
