"""What a ``run()`` call is, on either host: its arguments, its stream of events, the one run at a time.

``Workflow.run`` (in process) and ``DurableWorkflow.run`` (its Temporal twin)
take the same arguments, refuse the same calls with the same words, reserve
the workflow the same way and hand back the same kind of stream. The in-process and Temporal hosts
and the graph API import these from here, so the graph imports no host.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

from temporal_workflows._engine.driver import DriverEvent, pending_request_event
from temporal_workflows._engine.machine import PendingRequest, shared_part
from temporal_workflows._engine.serde import Envelope, decode, encode
from temporal_workflows._errors import NotSerializableError, WorkflowError
from temporal_workflows._events import RequestInfoEvent, WorkflowEvent
from temporal_workflows._live import LiveEvent

__all__ = [
    "MISSING",
    "Reservation",
    "RunStream",
    "check_run_arguments",
    "invocation_kwargs",
    "local_request_event",
    "materialize",
    "shared_state",
]

MISSING: Any = object()
"""``run()`` was given no start message (``None`` is a message)."""


def materialize(event: DriverEvent) -> WorkflowEvent:
    """An event as an in-process caller sees it: ``data`` decoded to its type (a custom event's too)."""
    if isinstance(event, Envelope):
        decoded: WorkflowEvent = decode(event)
        event = decoded
    fields = event.__dict__
    if fields.get("data_type") is None and fields.get("item_types") is None:
        return event  # nothing to restore (most events; ``restored`` says the same, one call later)
    if isinstance(event, LiveEvent):
        return event  # a step's live event, as the step published it (it never travelled as JSON)
    return event.restored()


def local_request_event(req: PendingRequest) -> RequestInfoEvent:
    """A pending request as ``Workflow.pending_requests`` lists it: the one form, its data restored."""
    event = materialize(pending_request_event(req))
    assert isinstance(event, RequestInfoEvent)
    return event


def shared_state(state: Mapping[str, Envelope]) -> dict[str, Any]:
    """Decoded committed state, without executor-private keys."""
    return {k: decode(v) for k, v in shared_part(state).items()}


async def flattened(batches: AsyncIterator[list[WorkflowEvent]]) -> AsyncIterator[WorkflowEvent]:
    """The events of ``batches`` one at a time; closing this closes ``batches`` (the run stops there)."""
    try:
        async for batch in batches:
            for event in batch:
                yield event
    finally:
        aclose = getattr(batches, "aclose", None)
        if aclose is not None:
            await aclose()


class RunStream:
    """The events of one ``run()`` call; while it is held and not finished, the workflow is reserved.

    The reservation is taken when ``run()`` is called, synchronously, so two
    calls made back to back cannot both start; it ends when the stream ends
    (or fails, or is closed), and also when the stream is dropped before it
    was read to the end: the workflow holds it only through a weak reference,
    as Agent Framework does, so a stream (or an un-awaited ``run()``) thrown
    away never leaves the workflow reserved.
    """

    def __init__(
        self,
        reservation: Reservation,
        events: AsyncIterator[WorkflowEvent],
        batches: AsyncIterator[list[WorkflowEvent]] | None = None,
    ) -> None:
        """``events`` is what a reader reads; ``batches``, if the host makes its events in batches, the same
        events a batch at a time (``events`` then flattens them): :meth:`read_all` takes them whole."""
        self._reservation = reservation
        self._events = events
        self._batches = batches
        self.done = False

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> WorkflowEvent:
        if self.done:
            raise StopAsyncIteration
        try:
            return await anext(self._events)
        except BaseException:
            self._finish()
            raise

    async def read_all(self, into: list[WorkflowEvent]) -> None:
        """Read the whole stream into ``into`` (an awaited ``run()``), before anything else reads it.

        The same events as reading it one at a time, a batch at a time where
        the host makes batches: in process a run keeps every event it made,
        and handing each over through the stream's layers one by one was a
        visible part of a step's cost.

        Raises:
            Whatever reading it raises (``into`` then holds the events before).
        """
        if self._batches is None:
            async for event in self:
                into.append(event)
            return
        if self.done:
            return
        try:
            async for batch in self._batches:
                into.extend(batch)
        finally:
            self._finish()

    async def close(self) -> None:
        """Agent Framework's name for :meth:`aclose` (its stream's ``close()``)."""
        await self.aclose()

    async def aclose(self) -> None:
        """Stop reading: the run stops at the point it reached, and the workflow is free again.

        In process, the run reaches no further boundary: nothing more is
        committed and no more checkpoints are saved (breaking out of
        ``async for`` does the same at once; this also frees the workflow at
        once). A run on Temporal (``on_temporal``) goes on there.
        """
        try:
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            self._reservation.release(self)


class Reservation:
    """The one ``run()`` a workflow runs at a time (in process, and its Temporal twin ``on_temporal``)."""

    def __init__(self) -> None:
        self._active: weakref.ref[RunStream] | None = None

    @property
    def running(self) -> bool:
        """Whether a ``run()`` holds the workflow (its stream is alive and not finished)."""
        stream = self._active() if self._active is not None else None
        return stream is not None and not stream.done

    def check(self, what: str) -> None:
        """Refuse ``what`` while a ``run()`` holds the workflow."""
        if self.running:
            raise WorkflowError(
                f"this workflow is already running; cannot {what} until the current run() is finished "
                "(await it, read its stream to the end, or close the stream)"
            )

    def take(self, events: AsyncIterator[WorkflowEvent]) -> RunStream:
        """Reserve the workflow now, for the ``run()`` whose events are ``events``."""
        self.check("start another run")
        return self._hold(RunStream(self, events))

    def take_batches(self, batches: AsyncIterator[list[WorkflowEvent]]) -> RunStream:
        """:meth:`take`, for a ``run()`` whose events come in lists (read one at a time, or whole)."""
        self.check("start another run")
        return self._hold(RunStream(self, flattened(batches), batches))

    def _hold(self, stream: RunStream) -> RunStream:
        self._active = weakref.ref(stream)
        return stream

    def release(self, stream: RunStream) -> None:
        # Only the stream that holds the reservation releases it: a stream dropped
        # earlier, finalized late, must not free a newer run's.
        if self._active is not None and self._active() is stream:
            self._active = None


def check_run_arguments(message: Any, responses: Mapping[str, Any] | None, checkpoint_id: str | None) -> None:
    """Refuse a ``run()`` call that cannot start anything (the same words in process and on Temporal)."""
    if message is not MISSING and checkpoint_id is not None:
        raise WorkflowError("pass either a start message or checkpoint_id, not both")
    if message is MISSING and checkpoint_id is None and responses is None:
        raise WorkflowError("run() needs a start message, responses=, or checkpoint_id=")


def invocation_kwargs(
    function_invocation_kwargs: Mapping[str, Any] | None, client_kwargs: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A ``run()`` call's invocation kwargs as the run keeps them (``None``: the call gives none).

    Raises:
        NotSerializableError: a value is not plain JSON (they travel to steps on Temporal).
    """
    if function_invocation_kwargs is None and client_kwargs is None:
        return None
    given: dict[str, Any] = {}
    for name, value in (("function_invocation_kwargs", function_invocation_kwargs), ("client_kwargs", client_kwargs)):
        if value is not None:
            env = encode(dict(value), what=name)
            if env.type is not None:
                raise NotSerializableError(f"{name} must be plain JSON (str keys; str, number, bool, null, list, dict)")
            given[name] = env.data
    return given
