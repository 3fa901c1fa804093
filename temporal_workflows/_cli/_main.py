"""The ``temporal-workflows`` command: host graphs, start runs on Temporal, watch them, answer them.

    temporal-workflows dev [--workflow MODULE:ATTR ...]          a dev server (and a worker) on this machine
    temporal-workflows worker --workflow MODULE:ATTR [--dev]     a worker hosting graphs
    temporal-workflows run MODULE:ATTR --input JSON [--follow | --json] [--id ID] [--no-wait]
    temporal-workflows status ID | events ID [--json] [--internal] | requests ID
    temporal-workflows respond ID REQUEST_ID JSON [--signal]
    temporal-workflows send-event ID EVENT_CLASS JSON [--step STEP] [--signal]   (a LlamaIndex run)
    temporal-workflows send ID EXECUTOR_ID JSON [--signal] [--policy enqueue|reject|interrupt|rollback] | close ID
    temporal-workflows checkpoint ID [--label L] | checkpoints ID
    temporal-workflows reset ID [--to CHECKPOINT_ID | --input JSON] | fork CHECKPOINT_ID --from ID --id NEW_ID
    temporal-workflows schedule create MODULE:ATTR --cron "0 9 * * 1-5" --input JSON [--overlap skip]
    temporal-workflows schedule list | describe ID | pause ID | unpause ID | trigger ID | delete ID
    temporal-workflows graph MODULE:ATTR [--format mermaid|dot|html|svg|png] [-o FILE]
    temporal-workflows codec-server [--port 8081] [--origin URL]
    temporal-workflows console [--workflow MODULE:ATTR ...] [--port 8080]   a web console for people in the loop

Also ``python -m temporal_workflows ...``. A run needs a worker hosting its
graph on its task queue (``worker``, or ``dev --workflow ...``). MODULE:ATTR may
also name a LlamaIndex ``workflows.Workflow``: it runs on ``TemporalRuntime``,
and every command reads and answers its runs too. Connection
flags (``--address --namespace --profile --config-file --tls --tls-cert
--tls-key --tls-ca --tls-server-name --api-key --grpc-meta``) go before or
after the command; they override the ``TEMPORAL_*`` environment variables,
which override the TOML profile (``~/.config/temporalio/temporal.toml``), as
for the ``temporal`` CLI. Payloads are encrypted when
``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` is set (docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import IO, Any, NoReturn

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._cli._console import add_console_arguments, run_console
from temporal_workflows._cli._errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PIPE,
    EXIT_USAGE,
    CliError,
    colon_for_dot,
    connection_failure,
    load_graph,
)
from temporal_workflows._cli._llama import load_llama, start_llama
from temporal_workflows._cli._options import add_server_arguments
from temporal_workflows._cli._render import CompactView, DetailedView, JsonView, View, watch
from temporal_workflows._cli._schedules import add_schedule_arguments, schedule_command, schedule_input
from temporal_workflows._cli._worker import add_dev_arguments, add_worker_arguments, serve
from temporal_workflows._engine.inbound import CONCURRENT_INPUT
from temporal_workflows._errors import (
    InvalidRunInputError,
    RunClosedError,
    UnknownGraphError,
    WorkflowError,
    library_account,
)
from temporal_workflows._graph.checkstart import check_start_message
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows._version import __version__
from temporal_workflows.temporal._client.client import RunHandle, fork, get_run, start_run
from temporal_workflows.temporal._client.connect import ConnectionConfig, ConnectionConfigError
from temporal_workflows.temporal._client.devserver import DevServerError
from temporal_workflows.temporal._client.llama import LlamaRunFailedError
from temporal_workflows.temporal._client.schedules import SCHEDULED_BY_ATTRIBUTE
from temporal_workflows.temporal._codec import EncryptionCodec, EncryptionError
from temporal_workflows.temporal._telemetry.config import Role, configure_telemetry, flush_tracing
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin

__all__ = ["hard_exit", "main", "parser", "program_name"]

GRAPH_FORMATS = ("mermaid", "dot", "html", "svg", "png")


def program_name() -> str:
    """How the user invoked us, for hints: ``temporal-workflows`` or ``python -m temporal_workflows``."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "python -m temporal_workflows" if name in ("__main__.py", "-m", "-c", "") else "temporal-workflows"


def _connection_flags() -> argparse.ArgumentParser:
    """The connection flags once more, for after the command; unset ones do not touch the global ones."""
    parent = argparse.ArgumentParser(add_help=False)
    ConnectionConfig.add_arguments(parent)
    parent.add_argument("--debug", action="store_true", help="print tracebacks")
    for action in parent._actions:
        action.default = argparse.SUPPRESS
    return parent


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The whole command line (every subcommand), as ``--help`` shows it."""
    prog = prog or program_name()
    p = argparse.ArgumentParser(
        prog=prog,
        description="\n\n".join((__doc__ or "").split("\n\n")[:2])
        .replace("``", "`")
        .replace("temporal-workflows", prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"`{prog} COMMAND --help` for a command's flags. Docs: https://pypi.org/project/temporal-workflows/",
    )
    p.add_argument("--version", action="version", version=f"temporal-workflows {__version__}")
    p.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    ConnectionConfig.add_arguments(p)
    after = [_connection_flags()]
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = sub.add_parser(
        "dev", parents=after, help="start a dev server on this machine (and a worker, with --workflow)"
    )
    add_worker_arguments(dev, required=False)
    add_dev_arguments(dev)
    worker = sub.add_parser("worker", parents=after, help="run a worker hosting graphs (what `worker.py` runs)")
    add_worker_arguments(worker)
    worker.add_argument("--dev", action="store_true", help="start a dev server here first (as `dev`)")
    add_dev_arguments(worker, prefix="dev-")

    run = sub.add_parser("run", parents=after, help="start a run and show its progress until it ends")
    run.add_argument("workflow", help="module:attribute of a built graph (checked here), or a graph name")
    run.add_argument("--input", default=None, help="start message as JSON (optional with --keep-alive)")
    run.add_argument("--id", default=None, help="workflow id (default: <name>-<random>)")
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    run.add_argument("--keep-alive", action="store_true", help="stay open when idle, for `send` (end with `close`)")
    run.add_argument(
        "--concurrent-input",
        choices=CONCURRENT_INPUT,
        default=None,
        help="what a message sent while the run is busy does by default (send --policy overrides it)",
    )
    view = run.add_mutually_exclusive_group()
    view.add_argument("--follow", action="store_true", help="show every event with times, durations and retries")
    view.add_argument("--json", action="store_true", help="every event as a JSON line (for programs)")
    view.add_argument("--no-wait", action="store_true", help="print the id and return at once")
    run.add_argument("--plain", action="store_true", help="plain lines even on a terminal with rich installed")
    events = sub.add_parser("events", parents=after, help="show a run's events from its start until it closes")
    events.add_argument("id")
    events.add_argument("--json", action="store_true", help="one JSON object per line")
    events.add_argument("--plain", action="store_true", help="plain lines even on a terminal with rich installed")
    events.add_argument(
        "--internal",
        action="store_true",
        help="a LlamaIndex run: also LlamaIndex's internal events (StepStateChanged, ...), as expose_internal=True",
    )
    for name, text in (
        ("status", "print a run's status as JSON"),
        ("requests", "list pending requests with the JSON schema of the expected response"),
        ("close", "let a keep-alive run complete once idle (its pending requests answered; new messages refused)"),
    ):
        sub.add_parser(name, parents=after, help=text).add_argument("id")
    respond = sub.add_parser("respond", parents=after, help="answer a pending request")
    respond.add_argument("id")
    respond.add_argument("request_id")
    respond.add_argument("response", help="the response as JSON")
    respond.add_argument("--signal", action="store_true", help="signal instead of update: do not wait for acceptance")
    send_event = sub.add_parser(
        "send-event",
        parents=after,
        help="send a LlamaIndex run an event by class name and JSON, as handler.ctx.send_event (checked by the run)",
    )
    send_event.add_argument("id")
    send_event.add_argument("event_type", metavar="EVENT_CLASS", help="the event's class: Name, or module.Name")
    send_event.add_argument("event", help="its fields as a JSON object")
    send_event.add_argument("--step", default=None, help="only this step gets it (send_event(ev, step=...))")
    send_event.add_argument("--signal", action="store_true", help="signal instead of update: do not wait")
    send = sub.add_parser("send", parents=after, help="send a message to an executor of a running or keep-alive run")
    send.add_argument("id")
    send.add_argument("executor_id")
    send.add_argument("message", help="the message as JSON")
    send.add_argument("--signal", action="store_true", help="signal instead of update: do not wait for acceptance")
    send.add_argument(
        "--policy",
        choices=CONCURRENT_INPUT,
        default=None,
        help="if the run is busy: enqueue (wait for the next boundary), reject, interrupt (cancel the running "
        "superstep, take this at once) or rollback (and go back to before the turn's input); default: the run's",
    )
    checkpoint = sub.add_parser("checkpoint", parents=after, help="take a checkpoint at the next superstep boundary")
    checkpoint.add_argument("id")
    checkpoint.add_argument("--label", default=None)
    checkpoint.add_argument("--signal", action="store_true", help="signal instead of update: do not wait")
    sub.add_parser("checkpoints", parents=after, help="list a run's checkpoints, oldest first").add_argument("id")
    reset = sub.add_parser(
        "reset", parents=after, help="start a run again: clean, with new input, or from a checkpoint"
    )
    reset.add_argument("id")
    to = reset.add_mutually_exclusive_group()
    to.add_argument("--to", default=None, metavar="CHECKPOINT_ID", help="go back to this checkpoint")
    to.add_argument("--input", default=None, help="start again with this message (JSON)")
    reset.add_argument("--allow-signature-mismatch", action="store_true", help="restore a checkpoint of another graph")
    reset.add_argument("--signal", action="store_true", help="signal instead of update: do not wait for acceptance")
    fork_cmd = sub.add_parser("fork", parents=after, help="start a new run from a checkpoint of another run")
    fork_cmd.add_argument("checkpoint_id")
    fork_cmd.add_argument("--from", dest="source", required=True, metavar="ID", help="the run the checkpoint is of")
    fork_cmd.add_argument("--id", required=True, dest="new_id", help="workflow id of the new run")
    fork_cmd.add_argument("--task-queue", default=None, help="default: the source run's task queue")
    fork_cmd.add_argument("--allow-signature-mismatch", action="store_true")
    schedule = sub.add_parser(
        "schedule", parents=after, help="runs on a Temporal Schedule: create, list, describe, pause, trigger, delete"
    )
    add_schedule_arguments(schedule, after)
    graph = sub.add_parser(
        "graph", parents=after, help="draw a graph: Mermaid or DOT text, an HTML page, or an SVG/PNG picture (Graphviz)"
    )
    graph.add_argument("workflow", help="module:attribute of a built graph")
    graph.add_argument("--format", "-f", choices=GRAPH_FORMATS, default="mermaid")
    graph.add_argument(
        "--output",
        "-o",
        default=None,
        metavar="FILE",
        help="default: stdout (mermaid, dot, html), <name>.<format> (svg, png)",
    )
    codec = sub.add_parser(
        "codec-server",
        parents=after,
        help="decrypt payloads for the Web UI and `temporal --codec-endpoint` (keys from the env)",
    )
    add_server_arguments(
        codec,
        port=8081,
        token_help=(
            "require 'Authorization: Bearer <token>' with the token in FILE (or set TEMPORAL_WORKFLOWS_CODEC_TOKEN)"
        ),
        origin_help="Web UI origin allowed to call it",
    )
    console = sub.add_parser(
        "console", parents=after, help="a web console: runs live, graphs, requests answered in a browser"
    )
    add_console_arguments(console)
    return p


async def _failure_of(handle: RunHandle) -> dict[str, Any]:
    """What failed a closed run, as the library's error for it says: type, message, executor and superstep."""
    try:
        await handle.result()
    except WorkflowError as e:
        name, message = library_account(e)  # a step's own exception: ExecutorFailedError, naming the executor
        failure: dict[str, Any] = {"error": name, "message": message}
        for name in ("executor_id", "superstep", "error_type", "detail"):
            value = getattr(e, name, None)
            if value is not None:
                failure[name] = value
        return failure
    except WorkflowFailureError as e:
        cause = e.cause
        return {"error": type(cause).__name__, "message": str(cause)}
    return {}


def _is_module(name: str) -> bool:
    """Whether ``name`` is an importable module (finding it imports its parent packages, as running it would)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _load_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(
            f"{what} is not valid JSON: {e}",
            hint='quote it for the shell, e.g. \'{"topic": "bees"}\' (strings need their own quotes: \'"hi"\')',
            code=EXIT_USAGE,
        ) from None


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _stdout() -> IO[str]:
    return sys.stdout


def _view(args: argparse.Namespace, run_id: str, prog: str, *, detailed: bool) -> View:
    out = _stdout()
    internal = bool(getattr(args, "internal", False))
    if getattr(args, "json", False):
        return JsonView(out, run_id, prog, internal=internal)
    if not detailed:
        return CompactView(out, run_id, prog, internal=internal)
    if not getattr(args, "plain", False) and out.isatty():
        try:
            from temporal_workflows._cli._rich import RichView
        except ImportError:  # rich is an optional extra: plain lines without it
            pass
        else:
            return RichView(out, run_id, prog, internal=internal)
    return DetailedView(out, run_id, prog, internal=internal)


def _run_failed(run_id: str, e: BaseException, task_queue: str | None) -> CliError:
    if isinstance(e, UnknownGraphError) and task_queue:
        return CliError(
            f"run {run_id} failed: {e}",
            hint=f"another worker on task queue {task_queue!r} took the run and does not host this graph; give each "
            "set of graphs its own task queue (--task-queue on the worker and on run), or host them all on one worker",
        )
    if isinstance(e, WorkflowFailureError):
        return CliError(f"run {run_id} failed: {e.cause or e}")
    if isinstance(e, LlamaRunFailedError):  # what LlamaIndex raised, in its words
        return CliError(f"run {run_id} failed: {e}")
    name, message = library_account(e)
    return CliError(f"run {run_id} failed: {name}: {message}")


async def _follow_run(
    args: argparse.Namespace,
    client: Client,
    handle: RunHandle,
    prog: str,
    *,
    detailed: bool,
    task_queue: str | None,
    spec: str | None,
    live: bool = True,
) -> dict[str, Any]:
    view = _view(args, handle.id, prog, detailed=detailed)
    hint = None
    if spec is not None:
        queue = f" --task-queue {task_queue}" if task_queue and task_queue != DEFAULT_TASK_QUEUE else ""
        hint = f"`{prog} worker --workflow {spec}{queue}`"
    try:
        return await watch(handle, view, client=client, worker_hint=hint, live=live)
    except asyncio.CancelledError:
        raise CliError(
            f"stopped following run {handle.id}; the run goes on",
            hint=f"follow it again: {prog} events {handle.id}   (where it is: {prog} status {handle.id}; "
            f"to stop it: temporal workflow cancel --workflow-id {handle.id})",
            code=EXIT_INTERRUPTED,
        ) from None
    except (WorkflowError, WorkflowFailureError) as e:
        raise _run_failed(handle.id, e, task_queue) from e


def _running_steps(desc: Any) -> list[dict[str, Any]]:
    """The run's activities in flight, as Temporal tracks them: which worker runs each (placement), its
    attempt, and the last attempt's failure type (no message: it may quote values)."""
    steps = []
    for pending in desc.raw_description.pending_activities:
        state = PendingActivityState.Name(pending.state).removeprefix("PENDING_ACTIVITY_STATE_").lower()
        step: dict[str, Any] = {
            "activity_id": pending.activity_id,
            "activity_type": pending.activity_type.name,
            "state": state,
            "attempt": pending.attempt,
            "worker": pending.last_worker_identity or None,
        }
        if pending.HasField("last_failure"):
            info = pending.last_failure.application_failure_info
            step["last_failure"] = info.type or pending.last_failure.WhichOneof("failure_info")
        steps.append(step)
    return steps


async def _command(args: argparse.Namespace, prog: str) -> int:
    if args.command == "console":
        return run_console(args, _stdout())  # blocks: uvicorn runs its own loop
    if args.command == "codec-server":
        return _codec_server(args)  # blocks the loop on purpose: nothing else runs, and Ctrl-C stops it
    if args.command == "graph":
        return _graph(args)
    if args.command in ("dev", "worker"):
        dev = args.command == "dev" or args.dev
        prefix = "" if args.command == "dev" else "dev_"
        return await serve(
            args,
            dev=dev,
            out=_stdout(),
            prog=prog,
            dev_port=getattr(args, f"{prefix}port"),
            ui_port=getattr(args, f"{prefix}ui_port"),
            db=getattr(args, f"{prefix}db"),
        )
    config = ConnectionConfig.from_args(args)
    target: Workflow | str | None = None
    if args.command == "run" and (llama := load_llama(args.workflow)) is not None:
        # A plain LlamaIndex `workflows.Workflow`: one run on TemporalRuntime (workflow type LlamaIndexRun),
        # started as the program starts one, then followed like any run.
        if args.keep_alive:
            raise CliError("--keep-alive is for graphs; a LlamaIndex run waits for events by itself", code=EXIT_USAGE)
        try:
            client, run_id, queue = await start_llama(
                llama,
                args.workflow,
                _load_json(args.input or "{}", "--input"),
                connection=config,
                task_queue=args.task_queue,
                run_id=args.id,
            )
        except RuntimeError as e:
            failure = connection_failure(e, config.describe(), prog)
            if failure is None:
                raise
            raise failure from None
        if args.json:
            print(json.dumps({"type": "run_started", "workflow_id": run_id, "task_queue": queue}), flush=True)
        else:
            print(f"started {run_id}", flush=True)
        if args.no_wait:
            return 0
        handle = get_run(client, run_id)
        spec = args.workflow
        result = await _follow_run(
            args, client, handle, prog, detailed=args.follow, task_queue=args.task_queue, spec=spec
        )
        if not args.json:  # what `await handler` returns
            print(json.dumps(result.get("result"), indent=2, ensure_ascii=False, default=str))
        return 0
    if args.command == "run":
        # Loaded before connecting: a wrong module:attr is said at once, and the start message is checked.
        spec = args.workflow
        by_name = ":" not in spec and "/" not in spec and "\\" not in spec and not spec.endswith(".py")
        if by_name and "." in spec and (_is_module(spec) or colon_for_dot(spec) is not None):
            # `examples.research` (a module) or `research_demo.workflow` (a dot for the colon): not a graph
            # name, and starting a run of that type would fail on the worker; load_graph says what to write.
            by_name = False
        target = spec if by_name else load_graph(spec, what="the graph")
        if args.input is None and not args.keep_alive:
            raise CliError("--input is required (or pass --keep-alive to start idle)", code=EXIT_USAGE)
        message = _load_json(args.input, "--input")
        if isinstance(target, Workflow) and message is not None:
            try:
                check_start_message(target, message)  # before connecting: a misspelled field is said at once
            except InvalidRunInputError as e:
                raise CliError(str(e), hint=f"the graph's shape: {prog} graph {spec}", code=EXIT_USAGE) from None
    scheduled: tuple[Any, Any] = (None, None)
    if args.command == "schedule" and args.schedule_command == "create":
        scheduled = schedule_input(args, prog)  # before connecting: a wrong graph or input is said at once
    try:
        client = await config.connect(plugins=[TemporalWorkflowsPlugin()])
    except RuntimeError as e:
        failure = connection_failure(e, config.describe(), prog)
        if failure is None:
            raise
        raise failure from None
    if args.command == "run":
        assert target is not None
        handle = await start_run(
            client,
            target,
            message,
            id=args.id,
            task_queue=args.task_queue,
            keep_alive=args.keep_alive,
            concurrent_input=args.concurrent_input,
        )
        started = f"started {handle.id}"
        if args.json:
            print(
                json.dumps({"type": "run_started", "workflow_id": handle.id, "task_queue": args.task_queue}), flush=True
            )
        else:
            print(started, flush=True)
        if args.no_wait:
            return 0
        spec = args.workflow if ":" in args.workflow else None
        result = await _follow_run(
            args, client, handle, prog, detailed=args.follow, task_queue=args.task_queue, spec=spec
        )
        if not args.json:
            print(json.dumps(result.get("outputs") or [], indent=2, ensure_ascii=False))
            if result.get("outputs_released"):
                print(
                    f"({result['outputs_released']:,} earlier outputs were released from the run's result: each was "
                    "an output event when committed; see `events`)",
                    file=sys.stderr,
                )
        return 0
    if args.command == "schedule":
        _print(await schedule_command(args, client, *scheduled, prog))
        return 0
    if args.command == "fork":
        args.id = args.source
    handle = get_run(client, args.id)
    if args.command == "status":
        desc = await handle.describe()
        info: dict[str, Any] = {
            "id": args.id,
            "workflow": desc.workflow_type,
            "temporal_status": desc.status.name if desc.status else None,
        }
        if desc.close_time is not None:
            info["closed_at"] = desc.close_time.isoformat()
        scheduled_by = desc.search_attributes.get(SCHEDULED_BY_ATTRIBUTE)
        if scheduled_by:
            info["scheduled_by"] = scheduled_by[0]
        if desc.status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.COMPLETED):
            info.update(await handle.status())
            running = _running_steps(desc)
            if running:
                info["running_steps"] = running
        elif desc.status == WorkflowExecutionStatus.FAILED:
            info["failure"] = await _failure_of(handle)
        _print(info)
    elif args.command == "events":
        desc = await handle.describe()
        live = desc.status == WorkflowExecutionStatus.RUNNING
        await _follow_run(args, client, handle, prog, detailed=True, task_queue=desc.task_queue, spec=None, live=live)
    elif args.command == "requests":
        _print([r.model_dump(mode="json") for r in await handle.pending_requests(restore=False)])
    elif args.command == "respond":
        response = _load_json(args.response, "the response")
        _print(await handle.respond(args.request_id, response, wait=not args.signal) or {"signalled": True})
    elif args.command == "send-event":
        fields = _load_json(args.event, "the event")
        sent = await handle.send_event(args.event_type, fields, step=args.step, wait=not args.signal)
        _print(sent or {"signalled": True})
    elif args.command == "send":
        message = _load_json(args.message, "the message")
        sent = await handle.send(args.executor_id, message, wait=not args.signal, policy=args.policy)
        _print(sent or {"signalled": True})
    elif args.command == "close":
        await handle.close()
        _print({"closing": args.id})
    elif args.command == "checkpoint":
        _print(await handle.checkpoint(args.label, wait=not args.signal) or {"signalled": True})
    elif args.command == "checkpoints":
        _print(await handle.checkpoints())
    elif args.command == "reset":
        kwargs: dict[str, Any] = {"allow_signature_mismatch": args.allow_signature_mismatch, "wait": not args.signal}
        if args.to is not None:
            kwargs["checkpoint_id"] = args.to
        elif args.input is not None:
            kwargs["message"] = _load_json(args.input, "--input")
        _print(await handle.reset(**kwargs) or {"signalled": True})
    elif args.command == "fork":
        new = await fork(
            client,
            args.source,
            args.checkpoint_id,
            args.new_id,
            task_queue=args.task_queue,
            allow_signature_mismatch=args.allow_signature_mismatch,
        )
        _print({"started": new.id, "forked_from": {"workflow_id": args.source, "checkpoint_id": args.checkpoint_id}})
    return 0


def _graph(args: argparse.Namespace) -> int:
    """Mermaid, DOT or an HTML page to stdout (or a file), or an SVG/PNG picture through Graphviz's ``dot``.

    Nothing is written unless the picture is drawn: a missing ``dot`` or
    ``graphviz`` package is said before anything touches the disk.
    """
    from temporal_workflows._graph.viz import DOT_INSTALL, WorkflowViz, dot_program

    workflow = load_graph(args.workflow, what="the graph", needs_name=False)
    viz = WorkflowViz(workflow)
    fmt = args.format
    if fmt in ("mermaid", "dot", "html"):
        text = {"mermaid": viz.to_mermaid, "dot": viz.to_digraph, "html": viz.to_html}[fmt]()
        if not text.endswith("\n"):
            text += "\n"  # Agent Framework's text ends without one (print adds it); a file or a pipe wants one
        if args.output is None:
            sys.stdout.write(text)
            return 0
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}" + (" (open it in a browser)" if fmt == "html" else ""))
        return 0
    no_install = (
        f"or draw it with nothing installed: {program_name()} graph {args.workflow} --format html -o graph.html"
    )
    if dot_program() is None:
        raise CliError(
            f"drawing {fmt} needs Graphviz's `dot` program, which is not on PATH (it is not a Python package)",
            hint=f"install Graphviz ({DOT_INSTALL}); {no_install}, or --format mermaid",
        )
    if importlib.util.find_spec("graphviz") is None:
        raise CliError(
            f"drawing {fmt} needs the graphviz Python package",
            hint=f"pip install 'temporal-workflows[viz]'; {no_install}",
        )
    path = args.output or f"{workflow.name or 'workflow'}.{fmt}"
    try:
        written = viz.export(format=fmt, filename=path)
    except ImportError as e:  # `dot` vanished or failed to start after the check
        raise CliError(f"drawing {fmt} failed: {e}", hint=no_install) from None
    print(f"wrote {written or path}")
    return 0


def _codec_server(args: argparse.Namespace) -> int:
    try:
        from temporal_workflows._http.guard import GuardConfigError, read_token_file
        from temporal_workflows.temporal._client.codec_server import DEFAULT_CODEC_ORIGINS, make_codec_server
    except ImportError as e:
        raise CliError(str(e), hint="pip install 'temporal-workflows[console]'", code=EXIT_USAGE) from None
    codec = EncryptionCodec.from_env()
    if codec is None:
        raise CliError(
            "codec-server needs the keys: set TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS (docs/security.md)", code=EXIT_USAGE
        )
    token = None
    if args.token_file:
        try:
            token = read_token_file(args.token_file)  # an empty file refuses to start (#23.8)
        except GuardConfigError as e:
            raise CliError(str(e), code=EXIT_USAGE) from None
    server = make_codec_server(
        codec,
        args.host,
        args.port,
        args.origin or DEFAULT_CODEC_ORIGINS,
        token=token,
        allow_encode=args.allow_encode,
        allowed_hosts=args.allowed_host,
    )
    keys = ", ".join(codec.key_ring.keys)
    extra = ("; token required" if server.token_required else "") + ("; /encode on" if server.encode_allowed else "")
    print(f"codec server on http://{args.host}:{server.server_port} (key ids: {keys}{extra})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _rpc_error(e: RPCError, args: argparse.Namespace) -> CliError:
    run_id = getattr(args, "id", None)
    if e.status == RPCStatusCode.NOT_FOUND and run_id and "already completed" in e.message:
        return CliError(
            f"run {run_id!r} has ended: it takes no more input ({e.message})",
            hint=f"where it ended: {program_name()} status {run_id}",
        )
    if e.status == RPCStatusCode.NOT_FOUND and run_id:
        namespace = ConnectionConfig.from_args(args).namespace
        return CliError(
            f"no run {run_id!r} in namespace {namespace!r}: {e.message}",
            hint="check the id (`temporal workflow list` lists runs) and --namespace",
        )
    if e.status == RPCStatusCode.UNAVAILABLE:
        return CliError(f"{args.command} failed: the Temporal server is unavailable: {e.message}")
    return CliError(f"{args.command} failed: {e}")


def explain(e: BaseException, args: argparse.Namespace) -> CliError | None:
    """The one-line error for ``e``, or ``None`` if it is not one a user can act on."""
    if isinstance(e, CliError):
        return e
    if isinstance(e, ConnectionConfigError | EncryptionError | DevServerError):
        return CliError(str(e), code=EXIT_USAGE)
    if isinstance(e, WorkflowUpdateFailedError):
        return CliError(f"refused: {e.cause or e}")
    if isinstance(e, RunClosedError):  # the run has ended (or is closing): it exists, and takes no input
        run_id = getattr(args, "id", None) or getattr(args, "source", None) or "<workflow-id>"
        return CliError(
            str(e),
            hint=f"`temporal-workflows status {run_id}` shows how it ended; start a new run, or fork one from its "
            f"checkpoints (`temporal-workflows checkpoints {run_id}`)",
        )
    if isinstance(e, WorkflowError):  # the run refused an update (RunHandle raises the library's error)
        return CliError(f"refused: {type(e).__name__}: {e}")
    if isinstance(e, WorkflowAlreadyStartedError):
        return CliError(
            f"a run with id {e.workflow_id!r} already exists (of {e.workflow_type!r})",
            hint=f"choose another id (--id), or see it with `temporal-workflows status {e.workflow_id}`",
        )
    if isinstance(e, RPCError):
        return _rpc_error(e, args)
    if isinstance(e, asyncio.CancelledError | KeyboardInterrupt):
        return CliError("interrupted", code=EXIT_INTERRUPTED)
    return None


def _report(error: CliError, label: str) -> None:
    print(f"{label}: {error}", file=sys.stderr)
    if error.hint:
        print(f"  hint: {error.hint}", file=sys.stderr)


async def _main_async(args: argparse.Namespace, prog: str, label: str, runner: Any = None) -> int:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        # Ctrl-C cancels the command where it is waiting, so it can say what it leaves behind
        # (a followed run goes on), instead of a KeyboardInterrupt deep in the SDK.
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        return await (runner if runner is not None else _command(args, prog))
    except BrokenPipeError:
        return _broken_pipe()
    except BaseException as e:
        if isinstance(e, SystemExit):
            raise
        error = explain(e, args)
        if error is None:
            if getattr(args, "debug", False):
                traceback.print_exc()
                return EXIT_FAILED
            print(f"{label}: unexpected error: {type(e).__name__}: {e}", file=sys.stderr)
            print("  hint: rerun with --debug for the traceback", file=sys.stderr)
            return EXIT_FAILED
        if getattr(args, "debug", False):
            traceback.print_exc()
        _report(error, label)
        return error.code


def _broken_pipe() -> int:
    """The reader of stdout went away (``status ... | head``): stop quietly, as other tools do."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_PIPE


def run_main(args: argparse.Namespace, coroutine_factory: Any, *, prog: str, label: str) -> NoReturn:
    """Run a command's coroutine with the shared error handling, then exit with its code."""
    try:
        code = asyncio.run(_main_async(args, prog, label, coroutine_factory()))
    except KeyboardInterrupt:  # before the loop took over SIGINT
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = _broken_pipe()
    hard_exit(code)


def main(argv: list[str] | None = None) -> NoReturn:
    """The ``temporal-workflows`` console script and ``python -m temporal_workflows``."""
    prog = program_name()
    args = parser(prog).parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what `worker --processes N` gives its children
    start_telemetry(
        "worker" if args.command in ("dev", "worker") else "console" if args.command == "console" else "cli",
        "temporal-workflows",
    )
    if args.command in ("codec-server", "console"):
        try:
            code = _codec_server(args) if args.command == "codec-server" else run_console(args, _stdout(), prog)
        except CliError as e:
            _report(e, "temporal-workflows")
            code = e.code
        hard_exit(code)
    run_main(args, lambda: _command(args, prog), prog=prog, label="temporal-workflows")


def start_telemetry(role: Role, label: str) -> None:
    """Traces and metrics from the standard ``OTEL_*`` variables, named for what this process is (``role``).

    Set up before anything else makes a client, so this command's spans
    (and a worker's) carry its ``service.name`` and identity. A
    configuration that cannot work (OTLP without its exporter installed)
    ends the command with its message, as a bad flag does.
    """
    try:
        configure_telemetry(role)
    except WorkflowError as e:
        _report(CliError(str(e), code=EXIT_USAGE), label)
        hard_exit(EXIT_USAGE)


def hard_exit(code: int) -> NoReturn:
    """Exit without interpreter finalization.

    The SDK's Rust runtime threads can abort finalization of a short-lived
    process (``PyGILState_Release`` fatal error, exit code -6) after all work
    is done; everything is flushed first, so skipping finalization loses nothing.
    A reader of stdout that went away (``| head``) is not an error worth a
    traceback: the exit code says it (141, as for SIGPIPE).
    """
    flush_tracing()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            if stream is sys.stdout and code == 0:
                code = _broken_pipe()
    os._exit(code)
