"""A streamed run goes no further than its reader: the durable twin's ``run(..., stream=True)``, as in process.

An in-process run streamed to a caller (Agent Framework's ``workflow.run(...,
stream=True)``) is a generator: it goes on only as its reader asks for more,
and a reader that leaves the stream (``break``) leaves the run where it
stopped reading; Agent Framework's ``checkpoint_with_resume`` sample relies on
that to "simulate an interruption" and resume from the latest checkpoint. A
run on Temporal goes on by itself, ahead of any reader. So a streamed call of
the durable twin names itself (a reader token, :attr:`RunInput.reader` or the
``pace`` update) and the run waits, at the points where an in-process
stream's reader would stop it (before a superstep's steps run, before a
checkpoint is saved), until that reader has read every event published so
far. Its position is the offset of its stream polls: the twin's reader adds a
topic of its own (:data:`READER_TOPIC_PREFIX`) to them, which tells its polls
from any other reader's (the console, the CLI), and they cost nothing more:
a reader polls for the next events anyway.

What ends the pacing:

- the reader reads on to where the run waits for input or ends (its call
  returns; the next call names a new reader);
- the caller is cancelled (Ctrl-C, a cancelled task): it stops following and
  says so (``release``), and the run goes on, as a cancelled caller of the
  twin only ever stopped following;
- the reader leaves the stream (``break``, ``aclose()``, dropping it): it says
  ``stop``, and then cancels the run, which is waiting where the reader left
  it: nothing more runs, commits or is checkpointed, so the run resumes from
  its checkpoints as an in-process run would (``run(checkpoint_id=...)``);
- the reader stops polling without a word (its process crashed): after
  :data:`READER_LAPSE` of waiting the run goes on without it, so a crash of the
  caller never leaves a run waiting for good.

A run that nobody paces (``start_run``, the twin's awaited ``run()``, a run
recorded before pacing) never waits here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from temporalio import workflow

from temporal_workflows.temporal._protocol import READER_LAPSE, READER_TOPIC_PREFIX

__all__ = ["ReaderPace"]


class ReaderPace:
    """The reader a run goes no further than (``None``: nobody paces it), and how far it has read."""

    def __init__(self, reader: str | None, warn: Callable[[str], None]) -> None:
        self.reader = reader
        self.read_to = 0
        """The stream offset the reader's latest poll asked from: it has read every event before it."""
        self.polls = 0
        self.waiting = False
        self._warn = warn
        self._watch: asyncio.Task[None] | None = None

    def paces(self, topics: Sequence[str]) -> bool:
        """Whether a stream poll with these topics is the pacing reader's (the run waits for it)."""
        return self.reader is not None and READER_TOPIC_PREFIX + self.reader in topics

    def polled(self, topics: Sequence[str], from_offset: int) -> None:
        """A stream poll was accepted (its update's handler): the pacing reader's says how far it has read."""
        if self.paces(topics):
            self.read_to = max(self.read_to, from_offset)
            self.polls += 1

    def act(self, reader: str, action: str) -> bool:
        """The ``pace`` update: ``follow`` (this reader paces the run from now), ``release`` or ``stop``.

        Returns whether ``reader`` paces the run (after ``follow``; before ``release`` and ``stop``).
        A ``release`` or ``stop`` of a reader that no longer paces it (a newer call's reader does, after
        a reset) changes nothing.
        """
        if action == "follow":
            self.reader, self.read_to = reader, 0
            return True
        if reader != self.reader:
            return False
        if action == "release":
            self.reader = None  # the run goes on (a cancelled caller only stopped following)
        # "stop": the run stays where it waits; its caller cancels it there (see the module)
        return True

    def idle(self) -> None:
        """The run waits for input (or ends): its reader read on to here, and its call returned."""
        self.reader = None

    async def caught_up(self, offset: int, interrupted: Callable[[], bool]) -> None:
        """Return once the reader has read up to ``offset`` (or nobody paces the run, or ``interrupted()``)."""
        if self.reader is None or self.read_to >= offset:
            return
        self.waiting = True
        if self._watch is None or self._watch.done():
            self._watch = asyncio.ensure_future(self._watchdog())
        try:
            await workflow.wait_condition(lambda: self.reader is None or self.read_to >= offset or interrupted())
        finally:
            self.waiting = False

    async def _watchdog(self) -> None:
        """Let the run go on when its reader stopped polling while it waited (one timer per lapse, while paced)."""
        while self.reader is not None:
            polls = self.polls
            await workflow.sleep(READER_LAPSE, summary="lapse of a paced reader")
            if not self.waiting:
                return  # a later wait starts another
            if self.polls == polls and self.reader is not None:
                self._warn(
                    f"the caller reading this run's events has not read on for {READER_LAPSE.total_seconds():.0f} s; "
                    "the run goes on without waiting for it"
                )
                self.reader = None


def stream_offset(stream: Any) -> int:
    """The stream's global offset: what a reader that has read everything published polls from next."""
    offset: Callable[[], int] = stream._on_offset  # the stream's own offset query (workflow_streams)
    return offset()
