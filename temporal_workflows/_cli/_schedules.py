"""``temporal-workflows schedule ...``: runs on a Temporal Schedule (``temporal/_client/schedules.py``).

temporal-workflows schedule create MODULE:ATTR --cron "0 9 * * 1-5" --input JSON [--overlap skip] [--id ID]
temporal-workflows schedule list | describe ID | pause ID [--note N] | unpause ID | trigger ID | delete ID
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta
from typing import Any

from temporalio.client import Client

from temporal_workflows._cli._errors import EXIT_USAGE, CliError, load_graph
from temporal_workflows._errors import InvalidRunInputError, PayloadTooLargeError
from temporal_workflows._graph.checkstart import check_start_message
from temporal_workflows.temporal._client.schedules import (
    OVERLAP_POLICIES,
    ScheduleError,
    ScheduleNotFoundError,
    create_schedule,
    describe_schedule,
    get_schedule,
    list_schedules,
    overlap_policy,
)
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

__all__ = ["add_schedule_arguments", "parse_every", "schedule_command", "schedule_input"]

_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> timedelta:
    """``30s``, ``5m``, ``1h``, ``1d`` as a positive interval; anything else is a usage error."""
    match = _EVERY.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise CliError(
            f"--every {text!r} is not an interval",
            hint="a number and a unit: 30s, 5m, 1h or 1d",
            code=EXIT_USAGE,
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def add_schedule_arguments(schedule: argparse.ArgumentParser, after: list[argparse.ArgumentParser]) -> None:
    """The ``schedule`` command's own subcommands (``after``: the connection flags once more)."""
    verbs = schedule.add_subparsers(dest="schedule_command", required=True, metavar="VERB")
    create = verbs.add_parser("create", parents=after, help="create a schedule that starts runs of a graph")
    create.add_argument("workflow", help="module:attribute of a built graph (its start message is checked here)")
    create.add_argument("--cron", action="append", default=[], help='a cron expression, e.g. "0 9 * * 1-5"')
    create.add_argument("--every", default=None, help="or an interval: 30s, 5m, 1h, 1d")
    create.add_argument("--input", default=None, help="each run's start message as JSON")
    create.add_argument("--overlap", default="skip", help=f"one of {', '.join(OVERLAP_POLICIES)} (default skip)")
    create.add_argument("--id", default=None, help="the schedule's id (default <graph>-schedule-<random>)")
    create.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    create.add_argument("--time-zone", default=None, help="IANA zone the cron is read in (default UTC)")
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument("--note", default=None)
    create.add_argument("--keep-alive", action="store_true", help="each run stays open when idle, for `send`")
    verbs.add_parser("list", parents=after, help="list the namespace's schedules")
    for verb, text in (
        ("describe", "a schedule, its recent and next runs, as JSON"),
        ("unpause", "start a paused schedule again"),
        ("trigger", "start one run now, whatever the calendar says"),
        ("delete", "delete a schedule (its runs go on)"),
    ):
        verbs.add_parser(verb, parents=after, help=text).add_argument("schedule_id")
    pause = verbs.add_parser("pause", parents=after, help="pause a schedule (no runs start until unpause)")
    pause.add_argument("schedule_id")
    pause.add_argument("--note", default=None)


def schedule_input(args: argparse.Namespace, prog: str) -> tuple[Any, Any]:
    """The graph and start message of ``schedule create``, checked before connecting: (graph, message)."""
    target = load_graph(args.workflow, what="the graph")
    if args.input is None and not args.keep_alive:
        raise CliError("--input is required (each run's start message, as JSON)", code=EXIT_USAGE)
    message = None
    if args.input is not None:
        try:
            message = json.loads(args.input)
        except json.JSONDecodeError as e:
            raise CliError(
                f"--input is not valid JSON: {e}",
                hint='quote it for the shell, e.g. \'{"topic": "bees"}\' (strings need their own quotes: \'"hi"\')',
                code=EXIT_USAGE,
            ) from None
        try:
            check_start_message(target, message)
        except InvalidRunInputError as e:
            raise CliError(str(e), hint=f"the graph's shape: {prog} graph {args.workflow}", code=EXIT_USAGE) from None
    if not args.cron and args.every is None:
        raise CliError("a schedule needs --cron or --every", hint='e.g. --cron "0 9 * * 1-5" or --every 1h', code=2)
    try:
        overlap_policy(args.overlap)
    except ScheduleError as e:
        raise CliError(str(e), code=EXIT_USAGE) from None
    if args.every is not None:
        parse_every(args.every)
    return target, message


async def schedule_command(args: argparse.Namespace, client: Client, target: Any, message: Any, prog: str) -> Any:
    """Carry out ``schedule VERB``; what to print as JSON."""
    verb = args.schedule_command
    try:
        if verb == "create":
            handle = await create_schedule(
                client,
                target,
                message,
                cron=args.cron or None,
                every=parse_every(args.every) if args.every is not None else None,
                id=args.id,
                overlap=args.overlap,
                task_queue=args.task_queue,
                paused=args.paused,
                note=args.note,
                time_zone=args.time_zone,
                start_options={"keep_alive": True} if args.keep_alive else None,
            )
            return await describe_schedule(client, handle.id)
        if verb == "list":
            return await list_schedules(client)
        if verb == "describe":
            return await describe_schedule(client, args.schedule_id)
        handle = await get_schedule(client, args.schedule_id)
        if verb == "pause":
            await handle.pause(note=args.note)
            return {"paused": handle.id}
        if verb == "unpause":
            await handle.unpause()
            return {"unpaused": handle.id}
        if verb == "trigger":
            await handle.trigger()
            return {"triggered": handle.id}
        if verb == "delete":
            await handle.delete()
            return {"deleted": handle.id}
    except ScheduleNotFoundError as e:
        raise CliError(str(e), hint=f"`{prog} schedule list` lists them (and check --namespace)") from None
    except ScheduleError as e:
        hint = None
        if "cron" in str(e).lower() or "spec" in str(e).lower():
            hint = 'a cron expression has 5 fields: minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5"'
        raise CliError(str(e), hint=hint, code=EXIT_USAGE) from None
    except (PayloadTooLargeError, InvalidRunInputError, ValueError) as e:
        raise CliError(str(e), code=EXIT_USAGE) from None
    raise AssertionError(verb)
