"""``temporal-workflows console``: the web console (and the codec endpoints) in one process.

    temporal-workflows console [--workflow MODULE:ATTR ...] [--port 8080] [--host 127.0.0.1] [--token-file FILE]
                               [--allowed-origin ORIGIN ...]

Loopback only by default. Listening on any other address needs
``--token-file`` (the console refuses to start without one): every request
then needs the token, as a bearer header or the session cookie its login
page sets. With ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` set it decrypts what
it shows, and serves ``/decode`` for the Temporal Web UI too. Each graph given
with ``--workflow`` is also an AG-UI endpoint, ``POST /ag-ui/<name>``
(``docs/ag-ui.md``); front ends on other origins need ``--allowed-origin``.
"""

from __future__ import annotations

import argparse
from typing import IO

from temporal_workflows._cli._errors import EXIT_USAGE, CliError, load_graph
from temporal_workflows._cli._options import add_server_arguments, add_workflow_argument

__all__ = ["add_console_arguments", "run_console"]


def add_console_arguments(p: argparse.ArgumentParser) -> None:
    add_workflow_argument(
        p, help="a graph to show pictures of and start runs of (repeatable); runs of others are listed and answered"
    )
    add_server_arguments(
        p,
        port=8080,
        task_queue_help="where runs started from the console go",
        token_help="require this token (bearer header, or the login page's cookie); needed off loopback",
        origin_help="Web UI origin allowed to call /decode",
    )
    p.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a front end's origin (e.g. https://app.example.com) allowed to call the AG-UI endpoints "
        "/ag-ui/<name> from the browser, with CORS (repeatable; others are refused)",
    )


def run_console(args: argparse.Namespace, out: IO[str]) -> int:
    """Serve until Ctrl-C. Blocks (uvicorn runs its own loop)."""
    try:
        from temporal_workflows._console.app import ConsoleSettings, make_app
        from temporal_workflows._console.guard import Guard, GuardConfigError, is_loopback, read_token_file
        from temporal_workflows._console.server import ServerHandle, bind
    except ImportError as e:
        raise CliError(
            f"the console needs its extra ({e.name})", hint="pip install 'temporal-workflows[console]'", code=EXIT_USAGE
        ) from None
    from temporalio.client import Client

    from temporal_workflows.temporal._client.codec_server import DEFAULT_CODEC_ORIGINS
    from temporal_workflows.temporal._client.connect import ConnectionConfig
    from temporal_workflows.temporal._codec import EncryptionCodec
    from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin

    token = None
    if args.token_file:
        try:
            token = read_token_file(args.token_file)
        except GuardConfigError as e:
            raise CliError(str(e), code=EXIT_USAGE) from None
    if token is None and not is_loopback(args.host):
        raise CliError(
            f"the console on {args.host} would let anyone who reaches it answer and reset runs",
            hint="give --token-file FILE (every request then needs the token), or keep the default --host 127.0.0.1",
            code=EXIT_USAGE,
        )
    graphs = {}
    for spec in args.workflow:
        wf = load_graph(spec)
        graphs[wf.name] = wf
    codec = EncryptionCodec.from_env()
    config = ConnectionConfig.from_args(args)
    settings = ConsoleSettings(
        graphs=graphs, task_queue=args.task_queue or DEFAULT_TASK_QUEUE, codec=codec, allow_encode=args.allow_encode
    )
    try:
        sock = bind(args.host, args.port)
    except OSError as e:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {e}", code=EXIT_USAGE) from None
    try:
        guard = Guard.make(
            token,
            (args.host, int(sock.getsockname()[1])),
            allowed_hosts=args.allowed_host,
            origins=args.origin or DEFAULT_CODEC_ORIGINS,
            app_origins=args.allowed_origin,
        )
    except GuardConfigError as e:
        sock.close()
        raise CliError(str(e), code=EXIT_USAGE) from None

    async def connect() -> Client:
        return await config.connect(plugins=[TemporalWorkflowsPlugin(list(graphs.values()))])

    server = ServerHandle(make_app(guard, settings, connect), sock, settings.limits)
    host = f"[{args.host}]" if ":" in args.host else args.host
    extra = ("; token required" if token else "") + ("; /decode for the Web UI" if codec else "")
    if graphs:
        extra += f"; AG-UI at /ag-ui/<name> for {', '.join(sorted(graphs))}"
    print(f"console on http://{host}:{server.server_port} ({config.describe()}{extra})", file=out, flush=True)
    if not is_loopback(args.host) and not args.allowed_host:
        print(
            "note: requests must name this server as it is bound (Host header); add the names clients use "
            "with --allowed-host (e.g. --allowed-host console.example.com)",
            file=out,
            flush=True,
        )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
