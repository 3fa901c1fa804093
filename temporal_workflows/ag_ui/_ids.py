"""Names derived from what a client sends: the run a thread is, a message's delivery, and SSE event ids.

Everything here is a pure function of the request, so any process serving the
endpoint derives the same names: a thread's run, a message the run already
took, the place in the run's stream a reconnecting client stopped at. Nothing
is kept in the serving process.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from temporal_workflows.temporal._protocol import MAX_ID_CHARS

__all__ = ["TurnCursor", "TurnMode", "delivery_id", "thread_prefix", "thread_workflow_id"]

_SAFE = re.compile(r"[A-Za-z0-9._~-]{1,128}")
"""A thread or message id used as it is: no ``:`` or ``#`` (the separators below), short enough for any name."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def thread_workflow_id(prefix: str, name: str, thread_id: str) -> str:
    """The Temporal workflow id of AG-UI thread ``thread_id`` of workflow ``name``: ``<prefix>:<name>:<thread>``.

    A thread id of letters, digits and ``._~-`` (at most 128) is kept as it is,
    so the run is easy to find in the Web UI and the CLI; any other is
    replaced by a SHA-256 digest (``<prefix>:<name>#<digest>``: a different
    separator, so the two forms never meet). The same thread of another graph
    is another run.
    """
    safe = _SAFE.fullmatch(thread_id) is not None
    wid = f"{prefix}:{name}:{thread_id}" if safe else f"{prefix}:{name}#{_digest(thread_id)}"
    if len(wid) > MAX_ID_CHARS:
        wid = f"{prefix[:64]}#{_digest(f'{prefix}:{name}:{thread_id}')}"
    return wid


def thread_prefix(prefix: str, name: str) -> str:
    """What the workflow ids of ``name``'s threads (those kept as they are) start with."""
    return f"{prefix}:{name}:"


def delivery_id(message_id: str) -> str:
    """The id a user message is delivered to its run by: the same message is never taken twice."""
    if _SAFE.fullmatch(message_id):
        return f"ag-ui:message:{message_id}"
    return f"ag-ui:message#{_digest(message_id)}"


TurnMode = Literal["i", "r", "f"]
"""How a turn ends (kept in every event id, so a reconnect ends it the same way):

- ``i``: it gave the run input while the run was not working: it ends at the
  first rest (idle, waiting, failed) after the run took up work;
- ``r``: the run was working when the turn began: it ends at the first rest;
- ``f``: nothing to give a run at rest: it ends at once.
"""

_CURSOR = re.compile(r"([irf])(\d{1,18})\.(-1|\d{1,18})\.(\d{1,9})")


@dataclass(frozen=True)
class TurnCursor:
    """Where an event of a turn was made: the SSE id ``<mode><start>.<offset>.<n>``.

    ``start`` is the offset of the run's event stream the turn reads from,
    ``offset`` the stream item the event was made from (``-1``: before the
    first, the turn's opening), ``n`` its number among the events made from
    that item. Events a stream item makes are a pure function of the turn's
    input and the stream, so a reconnecting client (``Last-Event-ID``) gets
    exactly the events after it, made again from the run's own stream.
    """

    mode: TurnMode
    start: int
    offset: int = -1
    n: int = 0

    def __str__(self) -> str:
        return f"{self.mode}{self.start}.{self.offset}.{self.n}"

    def at(self, offset: int, n: int) -> TurnCursor:
        return TurnCursor(self.mode, self.start, offset, n)

    @classmethod
    def parse(cls, text: str) -> TurnCursor | None:
        """The cursor an SSE id names, or ``None`` if it is not one of ours."""
        m = _CURSOR.fullmatch(text.strip())
        if m is None:
            return None
        mode: TurnMode = m.group(1)  # type: ignore[assignment]
        return cls(mode, int(m.group(2)), int(m.group(3)), int(m.group(4)))

    def after(self, offset: int, n: int) -> bool:
        """Whether the event made ``n``-th from ``offset`` comes after this cursor."""
        return (offset, n) > (self.offset, self.n)
