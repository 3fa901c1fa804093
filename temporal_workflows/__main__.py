"""Command line: start graph runs on Temporal, watch them, answer them.

    python -m temporal_workflows run examples.research:workflow --input '{"topic": "bees"}' [--id ID] [--follow]
    python -m temporal_workflows status ID
    python -m temporal_workflows events ID
    python -m temporal_workflows requests ID
    python -m temporal_workflows respond ID REQUEST_ID '{"approved": true}' [--signal]
    python -m temporal_workflows send ID EXECUTOR_ID '"hello"' [--signal]
    python -m temporal_workflows close ID
    python -m temporal_workflows checkpoint ID [--label LABEL] [--signal]
    python -m temporal_workflows checkpoints ID
    python -m temporal_workflows reset ID [--to CHECKPOINT_ID | --input JSON] [--signal]
    python -m temporal_workflows fork CHECKPOINT_ID --from ID --id NEW_ID
    python -m temporal_workflows codec-server [--port 8081] [--origin URL]

A worker hosting the graph must be running (``python worker.py --workflow ...``).
Connection flags (``--address --namespace --tls --tls-cert --tls-key --tls-ca
--tls-server-name --api-key``) go before the command and override the
``TEMPORAL_*`` environment variables; payloads are encrypted when
``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` is set (docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from temporal_workflows._errors import WorkflowError
from temporal_workflows._events import (
    RequestInfoEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowWarningEvent,
)
from temporal_workflows._graph.workflow import load_workflow
from temporal_workflows.temporal._client import RunHandle, fork, get_run, start_run
from temporal_workflows.temporal._codec import EncryptionCodec, EncryptionError
from temporal_workflows.temporal._codec_server import DEFAULT_CODEC_ORIGINS, make_codec_server
from temporal_workflows.temporal._connect import ConnectionConfig, ConnectionConfigError
from temporal_workflows.temporal._plugin import DEFAULT_TASK_QUEUE, TemporalWorkflowsPlugin
from temporal_workflows.temporal._tracing import flush_tracing


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m temporal_workflows", description=__doc__.split("\n")[0])
    ConnectionConfig.add_arguments(p)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start a run and print its progress per superstep")
    run.add_argument("workflow", help="module:attribute of a built Workflow, or a graph name")
    run.add_argument("--input", default=None, help="start message as JSON (optional with --keep-alive)")
    run.add_argument("--id", default=None, help="workflow id (default: <name>-<random>)")
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    run.add_argument("--keep-alive", action="store_true", help="stay open when idle, for `send` (end with `close`)")
    run.add_argument("--follow", action="store_true", help="print every event as it happens")
    run.add_argument("--no-wait", action="store_true", help="print the id and return at once")
    for name, text in (
        ("status", "print a run's status"),
        ("events", "print a run's events, from the start, until it closes"),
        ("requests", "list pending requests with the JSON schema of the expected response"),
        ("close", "let a keep-alive run complete once idle"),
    ):
        sub.add_parser(name, help=text).add_argument("id")
    respond = sub.add_parser("respond", help="answer a pending request")
    respond.add_argument("id")
    respond.add_argument("request_id")
    respond.add_argument("response", help="the response as JSON")
    respond.add_argument("--signal", action="store_true", help="signal instead of update: do not wait for acceptance")
    send = sub.add_parser("send", help="send a message to an executor of a running or keep-alive run")
    send.add_argument("id")
    send.add_argument("executor_id")
    send.add_argument("message", help="the message as JSON")
    send.add_argument("--signal", action="store_true", help="signal instead of update: do not wait for acceptance")
    checkpoint = sub.add_parser("checkpoint", help="take a checkpoint at the next superstep boundary")
    checkpoint.add_argument("id")
    checkpoint.add_argument("--label", default=None)
    checkpoint.add_argument("--signal", action="store_true", help="signal instead of update: do not wait")
    sub.add_parser("checkpoints", help="list a run's checkpoints, oldest first").add_argument("id")
    reset = sub.add_parser("reset", help="start a run again: clean, with new input, or from a checkpoint")
    reset.add_argument("id")
    to = reset.add_mutually_exclusive_group()
    to.add_argument("--to", default=None, metavar="CHECKPOINT_ID", help="go back to this checkpoint")
    to.add_argument("--input", default=None, help="start again with this message (JSON)")
    reset.add_argument("--allow-signature-mismatch", action="store_true", help="restore a checkpoint of another graph")
    reset.add_argument("--signal", action="store_true", help="signal instead of update: do not wait for acceptance")
    fork_cmd = sub.add_parser("fork", help="start a new run from a checkpoint of another run")
    fork_cmd.add_argument("checkpoint_id")
    fork_cmd.add_argument("--from", dest="source", required=True, metavar="ID", help="the run the checkpoint is of")
    fork_cmd.add_argument("--id", required=True, dest="new_id", help="workflow id of the new run")
    fork_cmd.add_argument("--task-queue", default=None, help="default: the source run's task queue")
    fork_cmd.add_argument("--allow-signature-mismatch", action="store_true")
    codec = sub.add_parser(
        "codec-server", help="decrypt payloads for the Web UI and `temporal --codec-endpoint` (keys from the env)"
    )
    codec.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    codec.add_argument("--port", type=int, default=8081)
    codec.add_argument(
        "--origin",
        action="append",
        default=None,
        help=f"Web UI origin allowed to call it (repeatable; default: {' '.join(DEFAULT_CODEC_ORIGINS)})",
    )
    codec.add_argument("--allow-encode", action="store_true", help="also serve /encode (encrypts whatever it is sent)")
    codec.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a further name clients reach it by, e.g. behind a proxy (repeatable)",
    )
    codec.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="require 'Authorization: Bearer <token>' with the token in FILE (or set TEMPORAL_WORKFLOWS_CODEC_TOKEN)",
    )
    return p


def describe_event(ev: WorkflowEvent) -> str | None:
    """One line for the events a person watching a run wants; ``None`` for the rest."""
    if isinstance(ev, SuperStepStartedEvent):
        return f"superstep {ev.superstep}: running {', '.join(ev.executor_ids)}"
    if isinstance(ev, WorkflowOutputEvent):
        return f"  output from {ev.executor_id}: {_json(ev.data)}"
    if isinstance(ev, RequestInfoEvent):
        return f"  request {ev.request_id} from {ev.source_executor_id}: {_json(ev.data)} (expects {ev.response_type})"
    if isinstance(ev, WorkflowWarningEvent):
        return f"  warning: {ev.message}"
    if isinstance(ev, WorkflowResetEvent):
        to = f"checkpoint {ev.checkpoint_id} (superstep {ev.superstep})" if ev.checkpoint_id else "a clean start"
        return f"reset to {to}"
    if isinstance(ev, WorkflowFailedEvent):
        return f"failed in superstep {ev.superstep}: {ev.error}"
    return None


def _json(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, default=str)


async def follow(handle: RunHandle, out: Any = sys.stdout, *, every_event: bool = False) -> dict[str, Any]:
    """Print the run's progress from its event stream as it happens; return its result."""
    async for ev in handle.events():
        if every_event:
            print(f"[{ev.type}] {_json(ev.model_dump(mode='json', exclude={'type'}))}", file=out, flush=True)
            continue
        line = describe_event(ev)
        if line is not None:
            print(line, file=out, flush=True)
        if isinstance(ev, RequestInfoEvent):
            hint = f"python -m temporal_workflows respond {handle.id} {ev.request_id} '<JSON>'"
            print(f"  waiting for an answer: {hint}", file=out, flush=True)
    result: dict[str, Any] = await handle.result()
    print(f"{result['status']} after {result['superstep']} supersteps", file=out, flush=True)
    return result


def _load_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _UsageError(f"{what} is not valid JSON: {e}") from None


class _UsageError(Exception):
    pass


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


async def _main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return await _command(args)
    except (_UsageError, ConnectionConfigError, EncryptionError) as e:
        print(str(e), file=sys.stderr)
        return 2
    except WorkflowUpdateFailedError as e:
        print(f"refused: {e.cause or e}", file=sys.stderr)
        return 1
    except WorkflowError as e:  # the run refused an update (RunHandle raises the library's error)
        print(f"refused: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except RPCError as e:
        print(f"{args.command} failed: {e}", file=sys.stderr)
        return 1


def _codec_server(args: argparse.Namespace) -> int:
    codec = EncryptionCodec.from_env()
    if codec is None:
        raise _UsageError("codec-server needs the keys: set TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS (docs/security.md)")
    token = None
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as e:
            raise _UsageError(f"cannot read --token-file: {e}") from None
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


async def _command(args: argparse.Namespace) -> int:
    if args.command == "codec-server":
        return _codec_server(args)  # blocks the loop on purpose: nothing else runs, and Ctrl-C stops it
    client = await ConnectionConfig.from_args(args).connect(plugins=[TemporalWorkflowsPlugin()])
    if args.command == "run":
        if args.input is None and not args.keep_alive:
            raise _UsageError("--input is required (or pass --keep-alive to start idle)")
        message = _load_json(args.input, "--input")
        target: Any = load_workflow(args.workflow) if ":" in args.workflow else args.workflow
        handle = await start_run(
            client, target, message, id=args.id, task_queue=args.task_queue, keep_alive=args.keep_alive
        )
        print(f"started {handle.id}", flush=True)
        if args.no_wait:
            return 0
        try:
            result = await follow(handle, every_event=args.follow)
        except WorkflowFailureError as e:
            print(f"run {handle.id} failed: {e.cause or e}", file=sys.stderr)
            return 1
        except WorkflowError as e:
            print(f"run {handle.id} failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        print(json.dumps(result["outputs"], indent=2))
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
        if desc.status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.COMPLETED):
            info.update(await handle.status())
        _print(info)
    elif args.command == "events":
        async for ev in handle.events():
            print(f"[{ev.type}] {_json(ev.model_dump(mode='json', exclude={'type'}))}", flush=True)
    elif args.command == "requests":
        _print(await handle.pending_requests())
    elif args.command == "respond":
        response = _load_json(args.response, "the response")
        _print(await handle.respond(args.request_id, response, wait=not args.signal) or {"signalled": True})
    elif args.command == "send":
        message = _load_json(args.message, "the message")
        _print(await handle.send(args.executor_id, message, wait=not args.signal) or {"signalled": True})
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


def hard_exit(code: int) -> None:
    """Exit without interpreter finalization.

    The SDK's Rust runtime threads can abort finalization of a short-lived
    process (``PyGILState_Release`` fatal error, exit code -6) after all work
    is done; everything is flushed first, so skipping finalization loses nothing.
    """
    flush_tracing()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    hard_exit(asyncio.run(_main()))


if __name__ == "__main__":
    main()
