"""Readers of a run's event stream: the long polls the run holds for them, bounded so input always has room.

A reader of a run's events (``RunHandle.events()``, the console, the CLI)
long-polls the run's stream (``temporalio.contrib.workflow_streams``) with an
update that the run answers when it publishes something new. On a run
waiting for a person nothing is published for hours, so each such poll
stays in flight, and Temporal allows 10 updates in flight per execution
(the server's ``history.maxInFlightUpdates``): ten readers would leave no
room for the answer they wait for, or for a message, checkpoint or reset,
which all travel by update.

So the run holds at most :data:`MAX_STREAM_POLLS` polls at once. The poll
update's validator refuses one more, which leaves no trace in history, with
the stream's own "draining" type (so any reader polls again later rather
than failing; an earlier version of this library's reader, or the SDK's own
``subscribe``, keeps working) and :data:`POLLS_FULL` as its detail, by which
this library's reader (``temporal/_client/feed.py``) switches to reading by
query, which takes no update room at all, until a poll is welcome again.
The rest of the room, six updates, is input's.

The poll handler is wrapped only to count: it awaits the stream's own
handler and issues no command, so histories recorded before this replay
unchanged and no patch is needed. The count is rebuilt by replay (handlers
run on replay, validators do not), so it is right after a worker restart.
The poll is also refused while one of the run's local activities is in flight
(``locals.py`` says why), as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStream
from temporalio.exceptions import ApplicationError

from temporal_workflows.temporal._protocol import MAX_STREAM_POLLS, STREAM_POLL, STREAM_POLLS_FULL
from temporal_workflows.temporal._workflow.locals import LocalActivities

__all__ = ["MAX_STREAM_POLLS", "POLLS_FULL", "STREAM_DRAINING", "STREAM_POLL", "StreamPolls", "admit_stream_polls"]

STREAM_DRAINING = "StreamDraining"
"""The refusal type its readers poll again after (``workflow_streams._types.STREAM_DRAINING_ERROR_TYPE``)."""
POLLS_FULL = STREAM_POLLS_FULL


class StreamPolls:
    """How many stream polls the run holds now (handlers running, accepted and not yet answered)."""

    def __init__(self) -> None:
        self.in_flight = 0


def admit_stream_polls(stream: WorkflowStream, locals_: LocalActivities) -> StreamPolls:
    """Wrap the stream's poll update: count the polls in flight and refuse one past :data:`MAX_STREAM_POLLS`,
    or while one of the run's local activities is in flight; otherwise the stream's own validator decides."""
    polls = StreamPolls()
    handler: Callable[[PollInput], Awaitable[PollResult]] | None = workflow.get_update_handler(STREAM_POLL)
    own: Callable[[Any], None] | None = getattr(stream, "_validate_poll", None)
    if handler is None:
        return polls
    inner = handler

    async def poll(payload: PollInput) -> PollResult:
        # Counted from the handler's first line: the SDK runs a validator and its handler's start in one
        # step, so a second poll validated in the same activation already sees this one.
        polls.in_flight += 1
        try:
            return await inner(payload)
        finally:
            polls.in_flight -= 1

    def validate(payload: PollInput) -> None:
        if not locals_.idle:
            raise ApplicationError(
                "the run is busy with a local activity of its own; poll again shortly", type=STREAM_DRAINING
            )
        if polls.in_flight >= MAX_STREAM_POLLS:
            raise ApplicationError(
                f"the run holds {polls.in_flight} polls of its event stream already, the most it holds so that "
                "input always has room; read it by query meanwhile",
                POLLS_FULL,
                type=STREAM_DRAINING,
            )
        if own is not None:
            own(payload)

    workflow.set_update_handler(STREAM_POLL, poll, validator=validate)
    return polls
