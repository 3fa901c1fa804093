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
``--workflow`` may name a LlamaIndex ``workflows.Workflow`` too: the console
starts its runs on ``TemporalRuntime`` (the queue its workers poll) and
serves it at ``/ag-ui/<workflow_name>``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import IO, Any

from temporal_workflows._cli._errors import EXIT_USAGE, CliError, connection_failure, load_graph
from temporal_workflows._cli._llama import host as host_llama
from temporal_workflows._cli._llama import llama_task_queue, load_llama
from temporal_workflows._cli._options import add_server_arguments, add_workflow_argument

__all__ = ["add_console_arguments", "run_console"]


def add_console_arguments(p: argparse.ArgumentParser) -> None:
    add_workflow_argument(
        p,
        help="a graph (or a LlamaIndex workflow) to show pictures of and start runs of (repeatable); runs of others "
        "are listed and answered",
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


def run_console(args: argparse.Namespace, out: IO[str], prog: str = "temporal-workflows") -> int:
    """Serve until Ctrl-C. Blocks (uvicorn runs its own loop).

    Refuses to start, in one line as every command does, when the port is
    taken (naming ``--port``) or Temporal cannot be reached; once started, a
    lost server is the page's banner and the API's JSON 502s until it is back.
    """
    try:
        from temporal_workflows._console.app import ConsoleSettings, make_app
        from temporal_workflows._http.guard import Guard, GuardConfigError, is_loopback, read_token_file
        from temporal_workflows._http.server import ServerHandle, bind
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
    config = ConnectionConfig.from_args(args)
    graphs = {}
    llama: dict[str, Any] = {}
    runtime = None
    for spec in args.workflow:
        target = load_llama(spec)
        if target is not None:
            # A LlamaIndex workflow: hosted (client side) on a TemporalRuntime that starts its runs on the queue its
            # workers poll, as `run` starts them.
            if runtime is None:
                from temporal_workflows.llama import TemporalRuntime

                runtime = TemporalRuntime(task_queue=llama_task_queue(args.task_queue), connection=config)
            hosted = host_llama(target, runtime, spec)
            llama[hosted.workflow_name] = hosted
            continue
        wf = load_graph(spec)
        graphs[wf.name] = wf
    codec = EncryptionCodec.from_env()
    settings = ConsoleSettings(
        graphs=graphs,
        llama_workflows=llama,
        task_queue=args.task_queue or DEFAULT_TASK_QUEUE,
        codec=codec,
        allow_encode=args.allow_encode,
    )
    try:
        sock = bind(args.host, args.port)
    except OSError as e:
        reason = "the port is taken (another console or server?)" if e.errno in (98, 48, 10048) else str(e)
        raise CliError(
            f"cannot listen on {args.host}:{args.port}: {reason}",
            hint="choose another with --port (e.g. --port 8081), or stop what holds it",
            code=EXIT_USAGE,
        ) from None
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

    async def serve() -> None:
        # Temporal first: a console that cannot reach it says so now, not as every page's error later.
        try:
            client = await config.connect(plugins=[TemporalWorkflowsPlugin(list(graphs.values()))])
        except RuntimeError as e:
            failure = connection_failure(e, config.describe(), prog)
            if failure is None:
                raise
            raise failure from None

        async def connect() -> Client:
            return client

        server = ServerHandle(make_app(guard, settings, connect), sock, settings.limits)
        host = f"[{args.host}]" if ":" in args.host else args.host
        extra = ("; token required" if token else "") + ("; /decode for the Web UI" if codec else "")
        if graphs or llama:
            extra += f"; AG-UI at /ag-ui/<name> for {', '.join(sorted([*graphs, *llama]))}"
        print(f"console on http://{host}:{server.server_port} ({config.describe()}{extra})", file=out, flush=True)
        if not is_loopback(args.host) and not args.allowed_host:
            print(
                "note: requests must name this server as it is bound (Host header); add the names clients use "
                "with --allowed-host (e.g. --allowed-host console.example.com)",
                file=out,
                flush=True,
            )
        await server.serve()

    try:
        asyncio.run(serve())  # uvicorn handles Ctrl-C itself (this is the main thread)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    return 0
