"""One AG-UI turn (a ``POST`` with ``RunAgentInput``) against a durable run: input in, events out, until the run rests.

The thread is the run; the turn gives it what is new (answers in ``resume``,
the newest user message) and follows the run's event stream from where it
stood when the turn began, translated, until the run is at rest again: idle
(``RUN_FINISHED``), waiting for input (``RUN_FINISHED`` with the interrupt
outcome) or failed (``RUN_ERROR``).

Nothing about a turn is kept in the serving process: every event id says
where in the run's stream it was made (``_ids.TurnCursor``), so a client that
reconnects with ``Last-Event-ID`` (the same request again) is served by any
process, from the run's own stream, exactly the events after that id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    UserMessage,
)
from temporalio.client import Client

from temporal_workflows.ag_ui._ids import TurnCursor, TurnMode, delivery_id, thread_workflow_id
from temporal_workflows.ag_ui._kinds import Refusal, RunKind, Translator, TurnContext

__all__ = ["Made", "Turn", "new_message", "sse"]


def new_message(inp: RunAgentInput) -> tuple[str, str] | None:
    """``(message id, text)`` of the turn's new user message: the last message, if a user wrote it.

    AG-UI clients send the whole conversation every turn; only its newest
    message can be new, and the run is given it once (by its id). Earlier
    messages are the client's copy of what the run already said and took.
    """
    if not inp.messages:
        return None
    last = inp.messages[-1]
    if not isinstance(last, UserMessage):
        return None
    content = last.content
    if isinstance(content, str):
        text = content
    else:
        texts = [getattr(p, "text", None) for p in content]
        if any(t is None for t in texts):
            raise Refusal(
                f"message {last.id!r}: only text parts are taken (images, audio, video and documents are not)",
                "InvalidRunInputError",
            )
        text = "".join(t for t in texts if t)
    return last.id, text


Made = tuple[TurnCursor | None, BaseEvent]
"""An event of a turn and its id (``None``: state, which carries none)."""


def sse(made: Made) -> dict[str, Any]:
    """An event as ``EventSourceResponse`` sends it: its id (if any) and its JSON."""
    cursor, event = made
    data = event.model_dump_json(by_alias=True)
    return {"data": data} if cursor is None else {"id": str(cursor), "data": data}


class Turn:
    """One request's turn; ``events()`` is its SSE stream (dicts for ``EventSourceResponse``)."""

    def __init__(
        self,
        kind: RunKind,
        client: Client,
        inp: RunAgentInput,
        *,
        task_queue: str,
        id_prefix: str,
        last_event_id: TurnCursor | None = None,
    ) -> None:
        self.kind = kind
        self.client = client
        self.inp = inp
        self.task_queue = task_queue
        self.workflow_id = thread_workflow_id(id_prefix, kind.name, inp.thread_id)
        self.after = last_event_id
        self._cursor = TurnCursor("f", 0)
        self.ctx = TurnContext(
            thread_id=inp.thread_id,
            run_id=inp.run_id,
            workflow_id=self.workflow_id,
            input_messages=tuple(inp.messages),
        )

    def _started(self) -> RunStartedEvent:
        return RunStartedEvent(thread_id=self.inp.thread_id, run_id=self.inp.run_id, protocol_version=PROTOCOL_VERSION)

    async def _give(self) -> tuple[TurnMode, int]:
        """Give the run what is new in this turn; how the turn ends and where its stream starts.

        Raises:
            Refusal: the endpoint or the run refused the input (nothing was given).
        """
        kind, client, wid = self.kind, self.client, self.workflow_id
        # How input meets a run that is still working (double texting: refuse, queue, interrupt, roll back) is
        # the run's policy; today the run queues it. A client's choice would be read here, from forwardedProps.
        message = new_message(self.inp)
        value = kind.message_input(message[1]) if message is not None else None
        phase = await kind.phase(client, wid)
        start = await kind.head(client, wid) if phase in ("working", "resting") else 0
        took = False
        if self.inp.resume:
            asks = {a.id: a for a in await kind.asks(client, wid)} if phase in ("working", "resting") else {}
            answers = {}
            for entry in self.inp.resume:
                ask = asks.get(entry.interrupt_id)
                if ask is not None:  # not waited for: answered already (by an earlier try of this turn, or elsewhere)
                    answers[ask.id] = ask.answer(entry)
            if answers:
                await kind.respond(client, wid, answers)
                took = True
        if message is not None:
            took = await kind.deliver(client, wid, value, delivery_id(message[0]), task_queue=self.task_queue) or took
        if phase == "working":
            return "r", start
        return ("i" if took else "f"), start

    async def begin(self) -> Refusal | None:
        """Give the run the turn's input (a reconnect gives none); the refusal, if it was refused.

        Raises:
            ValueError: a reconnect's ``Last-Event-ID`` names a place the run's stream has not reached.
        """
        if self.after is not None:
            head = await self.kind.head(self.client, self.workflow_id)
            # (A turn's last events may be numbered at the head itself: a run that closed without resting.)
            if self.after.start > head or self.after.offset > head:
                raise ValueError(
                    f"Last-Event-ID {self.after}: the run's stream has not reached it (its head is {head})"
                )
            self._cursor = TurnCursor(self.after.mode, self.after.start)
            return None
        try:
            mode, start = await self._give()
        except Refusal as e:
            return e
        self._cursor = TurnCursor(mode, start)
        return None

    def made(self) -> AsyncIterator[Made]:
        """The turn's events with their ids (after :meth:`begin`)."""
        return self._follow(self._cursor)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The turn's events as SSE items (after :meth:`begin`)."""
        async for made in self._follow(self._cursor):
            yield sse(made)

    async def _follow(self, cursor: TurnCursor) -> AsyncIterator[Made]:
        after = self.after
        kind, client, wid = self.kind, self.client, self.workflow_id
        translator = await kind.translator(client, self.ctx, cursor.mode)
        owed = after is not None
        """A reconnecting client is owed the run's state afresh before the first event it has not seen: the
        deltas it missed were made from queries, which cannot be made again."""

        async def show(offset: int, made: list[tuple[bool, BaseEvent]], n: int = 0) -> list[Made]:
            """The events made from one item (numbered after ``n`` counted ones) that the client has not had."""
            nonlocal owed
            out: list[Made] = []
            for counted, event in made:
                if counted:
                    if after is None or after.after(offset, n):
                        out.append((cursor.at(offset, n), event))
                    n += 1
                else:
                    out.append((None, event))
            if out and owed:
                owed = False
                out = [(None, e) for e in await translator.snapshot()] + out
            return out

        opening: list[tuple[bool, BaseEvent]] = [(True, self._started())]
        if after is None:
            opening += [(False, e) for e in await translator.snapshot()]
        for item in await show(-1, opening):
            yield item
        if cursor.mode == "f":
            phase = await kind.phase(client, wid)
            translator.ended = "closed" if phase == "closed" else "waiting"
            async for item in self._finish(translator, cursor, -1, 1, show):
                yield item
            return
        last = cursor.start - 1
        async for offset, events in kind.read(client, wid, cursor.start):
            last = offset
            live = after is None or offset > after.offset
            if live and owed:
                owed = False
                for e in await translator.snapshot():
                    yield None, e
            made = await translator.feed(offset, events, live=live)
            for item in await show(offset, made):
                yield item
            if translator.ended is None:
                continue
            # The run was working when the turn began: this rest may come before it took the turn's input.
            recheck = cursor.mode == "r" and translator.ended != "failed" and live
            if recheck and await kind.phase(client, wid) == "working":
                translator.ended = None
                continue
            async for item in self._finish(translator, cursor, offset, sum(1 for c, _ in made if c), show):
                yield item
            return
        # The stream ended: the run closed (completed, failed, terminated) without coming to rest.
        translator.ended = "closed"
        async for item in self._finish(translator, cursor, last + 1, 0, show):
            yield item

    async def _finish(
        self, translator: Translator, cursor: TurnCursor, offset: int, n: int, show: Any
    ) -> AsyncIterator[Made]:
        """Close what is open, then the turn's last event, numbered after ``n`` events already made at ``offset``."""
        kind, client, wid = self.kind, self.client, self.workflow_id
        final: BaseEvent
        error = translator.error
        if translator.ended == "closed" and error is None:
            error = await kind.closed_outcome(client, wid)
        if error is not None:
            final = RunErrorEvent(message=error[0], code=error[1])
        else:
            asks = await kind.asks(client, wid) if translator.ended == "waiting" else []
            result = {"outputs": translator.outputs} if translator.outputs else None
            outcome: Any = (
                RunFinishedInterruptOutcome(interrupts=[a.interrupt() for a in asks])
                if asks
                else RunFinishedSuccessOutcome()
            )
            final = RunFinishedEvent(
                thread_id=self.inp.thread_id, run_id=self.inp.run_id, result=result, outcome=outcome
            )
        made: list[tuple[bool, BaseEvent]] = [(True, e) for e in translator.close()]
        made.append((True, final))
        for item in await show(offset, made, n):
            yield item
