"""Which rest of a run ends the turn that took a piece of outside input, for a client that follows it.

A front end that gives a run input and then follows the run's event stream
until the run is at rest (an AG-UI turn) must know which rest is its own. The
stream alone does not say: a run that was finishing earlier work when the
input came rests before it takes the input; a run woken by input first says
it was idle, then that it works; a run whose turn a message interrupts goes
on with that message's turn. Asking the run whether it is working when a rest
comes by is a race (the input's own work may be done by then).

So the run keeps, for input a client names (a ``deliver`` signal's message,
an answer to a request), whether it took it and the stream offset at which
the turn that took it ended: at the next rest (the driver's decision to wait,
not the "idle" a woken run says first) or at an interruption of that turn.
The ``QUERY_TURNS`` query answers it. A rest or an interruption the client
reads at that offset or later is its turn's end; one before is not.

Nothing here is a command or in history: it is rebuilt by replay, carried
across continue-as-new (bounded), and read only by the query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from temporal_workflows.temporal._protocol import TrackedInput

__all__ = ["MAX_TRACKED", "Turns", "delivery_key", "request_key"]

MAX_TRACKED = 500
"""Inputs tracked at most (the oldest whose turn has ended go first); carried across continue-as-new."""


def delivery_key(delivery_id: str) -> str:
    """The key a ``deliver`` signal's message is followed by."""
    return f"delivery:{delivery_id}"


def request_key(request_id: str) -> str:
    """The key an answer to a request is followed by."""
    return f"request:{request_id}"


class Turns:
    """Tracked input: queued, taken, and the stream offset at which the turn that took it ended.

    Args:
        offset: The run's event stream offset now (what the next published event gets).
        carried: What the execution before handed over when it continued as new.
    """

    def __init__(self, offset: Callable[[], int], carried: Iterable[TrackedInput] = ()) -> None:
        self._offset = offset
        self._by_key: dict[str, TrackedInput] = {t.key: t for t in carried}
        self._open: set[str] = {k for k, t in self._by_key.items() if t.taken and t.done_at is None}

    def queued(self, key: str) -> None:
        """Input accepted (waiting for a boundary). The same key again (a delivery retried) changes nothing."""
        if key not in self._by_key:
            self._by_key[key] = TrackedInput(key)
            self._trim()

    def taken(self, key: str) -> None:
        """The run took the input at a boundary: the turn it belongs to now goes on until it ends."""
        tracked = self._by_key.get(key)
        if tracked is None:
            tracked = self._by_key[key] = TrackedInput(key)
            self._trim()
        if not tracked.taken:
            tracked.taken = True
            self._open.add(key)

    def ended(self, *, interrupted: bool = False) -> None:
        """The current turn ended here (the run rests, or is interrupted): every input it took is done."""
        if not self._open:
            return
        at = self._offset()
        for key in self._open:
            tracked = self._by_key.get(key)
            if tracked is not None:
                tracked.done_at = at
                tracked.interrupted = interrupted
        self._open.clear()

    def where(self, keys: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """Each key's state (``None``: not known here)."""
        out: dict[str, dict[str, Any] | None] = {}
        for key in keys:
            t = self._by_key.get(key)
            out[key] = None if t is None else {"taken": t.taken, "done_at": t.done_at, "interrupted": t.interrupted}
        return out

    def carry(self) -> list[TrackedInput]:
        return list(self._by_key.values())

    def _trim(self) -> None:
        excess = len(self._by_key) - MAX_TRACKED
        if excess <= 0:
            return
        # Oldest first, those whose turn ended before those still queued or in a turn (whose client falls back
        # to asking whether the run works, as for a run that keeps no such record).
        done = [k for k, t in self._by_key.items() if t.done_at is not None][:excess]
        gone = set(done)
        rest = [k for k in self._by_key if k not in gone][: excess - len(done)]
        for key in (*done, *rest):
            del self._by_key[key]
            self._open.discard(key)
