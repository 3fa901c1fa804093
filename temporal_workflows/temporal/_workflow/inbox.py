"""Outside input (responses, messages) waiting for a boundary, and which requests were answered.

Signals queue their input here as it came (it is checked when a boundary
takes it; bad input becomes a warning). Updates are checked and accepted by
``admission.py`` and queue theirs checked. Either way the engine sees input
only at a boundary (``Admission.take``), in arrival order, so a superstep
always reads the state and inputs of the boundary it started at. The inbox is
carried across continue-as-new, with the ``deliver`` signal's outcomes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, cast

from pydantic_core import to_json
from temporalio.exceptions import ApplicationError

from temporal_workflows._engine.inbound import Inbound, InboundKind
from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._protocol import (
    MAX_ID_CHARS,
    MAX_TYPE_NAME_CHARS,
    CarriedInbox,
    CarriedInput,
    DeliveryOutcome,
    RespondInput,
    SendInput,
    too_long,
)
from temporal_workflows.temporal._workflow.status import StatusBoard
from temporal_workflows.temporal._workflow.turns import Turns, request_key

__all__ = [
    "DELIVERED_CARRIED",
    "FORGOTTEN_KEPT",
    "MAX_OUTCOME_CHARS",
    "Deliveries",
    "Inbox",
    "delivery_digest",
    "oversized_respond",
    "oversized_send",
]

DELIVERED_CARRIED = 200
"""Answered request ids carried across continue-as-new, to say "already answered"."""

FORGOTTEN_KEPT = 2000
"""Delivery ids (as 12-character digests) whose outcomes were let go, remembered to answer "too old"."""

MAX_OUTCOME_CHARS = 2000
"""Characters of a refusal's message a delivery outcome keeps (it is carried across continue-as-new)."""


def oversized_respond(inp: RespondInput) -> str | None:
    """Why a response is refused before it is even queued: its request id is too long (else ``None``)."""
    return too_long("request id", inp.request_id, MAX_ID_CHARS)


def oversized_send(inp: SendInput) -> str | None:
    """Why a message is refused before it is even queued: its executor id or type name is too long."""
    return too_long("executor id", inp.executor_id, MAX_ID_CHARS) or too_long(
        "message type", inp.message.type, MAX_TYPE_NAME_CHARS
    )


class Inbox:
    """Outside input waiting for the next boundary, and which requests were answered.

    What is queued here was admitted by ``admission.py`` (an update's input,
    checked) or came by signal (checked when a boundary takes it, there too).

    Args:
        board: Where warnings about unusable signal input go.
        carried: What the previous execution handed over when it continued as new.
        turns: Where input clients follow is tracked (``turns.py``); none: not tracked.
    """

    def __init__(self, board: StatusBoard, carried: CarriedInbox | None, *, turns: Turns | None = None) -> None:
        carried = carried or CarriedInbox()
        self._board = board
        # (a carried item's kind was checked when the run started: ``startup._check_carried``)
        self.items: list[Inbound] = [
            Inbound(cast(InboundKind, i.kind), i.key, i.value, i.validated, tag=i.tag)
            for i in carried.items
            if i.kind != "event"
        ]
        self.turns = turns or Turns(lambda: 0)
        if len(self.items) < len(carried.items):
            # An event a client sent by ``send_event`` before a deploy, carried from the execution before: no
            # graph takes events (that signal served the retired LlamaIndex front end), so it is dropped.
            board.warn("signal 'send_event' ignored: this run does not route events; send a message or respond")
        # Request ids answered (by a response taken into the inbox or the engine): a second answer is refused.
        self.answered: set[str] = {i.key for i in self.items if i.kind == "respond" and i.checked}
        # Request ids whose response reached the engine.
        self.delivered: set[str] = set(carried.delivered)
        self._delivered_order: list[str] = list(carried.delivered)
        self.deliveries = Deliveries(carried.outcomes, carried.forgotten, carried.forgotten_count)

    def __bool__(self) -> bool:
        return bool(self.items)

    def is_open(self, request_id: str) -> bool:
        """Whether a pending request still waits for an answer (none accepted yet)."""
        return request_id not in self.answered

    # -- signals: queued as they came ----------------------------------------------------

    # An id or type name over its limit is never queued: the inbox is carried across
    # continue-as-new, and what it holds is quoted in warnings.

    def respond_signal(self, inp: RespondInput) -> None:
        error = oversized_respond(inp)
        if error is not None:
            self._board.warn(f"signal 'respond' ignored: {error}", request_id=inp.request_id)
            return
        self.items.append(Inbound("respond", inp.request_id, Envelope(None, inp.response)))
        self.turns.queued(request_key(inp.request_id))

    def oversized_signal(self, inp: SendInput) -> bool:
        """Whether a ``send`` signal's ids are too long to queue (then it is a warning)."""
        error = oversized_send(inp)
        if error is not None:
            self._board.warn(f"signal 'send' ignored: {error}", executor_id=inp.executor_id)
        return error is not None

    def send_signal(self, inp: SendInput, action: str = "take") -> None:
        """Queue a ``send`` signal's message as it came; ``action``: what it does as it arrives (``arrival``)."""
        if action == "refuse":
            return  # (the handler warned: a busy run, policy reject)
        self.items.append(Inbound("send", inp.executor_id, inp.message, interrupts=action != "take"))

    def queue_answer(self, request_id: str, value: Envelope) -> None:
        """Queue an answer checked already (an update's, ``admission.py``): a second answer is refused from now."""
        self.answered.add(request_id)
        self.items.append(Inbound("respond", request_id, value, checked=True))
        self.turns.queued(request_key(request_id))

    def reopened(self, request_ids: Iterable[str]) -> None:
        """Requests pending again after a rollback: answers to them are taken again, not "already answered"."""
        for rid in request_ids:
            if rid in self.delivered:
                self.delivered.discard(rid)
                self._delivered_order = [r for r in self._delivered_order if r != rid]

    def remember(self, answered: tuple[str, ...]) -> None:
        """Request ids whose answer reached the engine: a later answer reads "already answered"."""
        for rid in answered:
            self.delivered.add(rid)
            self._delivered_order.append(rid)

    def carry(self) -> CarriedInbox:
        return CarriedInbox(
            items=[CarriedInput(i.kind, i.key, i.value, i.checked, i.tag) for i in self.items],
            delivered=self._delivered_order[-DELIVERED_CARRIED:],
            outcomes=self.deliveries.carry(),
            forgotten=self.deliveries.carry_forgotten(),
            forgotten_count=self.deliveries.forgotten_count,
            tracked=self.turns.carry(),
        )


class Deliveries:
    """Large input sent by the ``deliver`` signal, and what became of it, for ``confirm_delivery``.

    A client waits for large input as for an update, without sending it in one
    (the SDK repeats update inputs in the task that delivers them; see
    ``UPDATE_INLINE_BYTES``): the signal's handler checks the input as the
    update would and settles its outcome here; the confirming update, small,
    waits for that outcome. Recent outcomes are carried across continue-as-new,
    so a confirmation that reaches the next execution still finds its own.
    """

    def __init__(
        self, carried: list[DeliveryOutcome], forgotten: list[str] | None = None, forgotten_count: int = 0
    ) -> None:
        self._outcomes: dict[str, DeliveryOutcome] = {}
        self._open: dict[str, str] = {}  # id -> digest of what it delivers
        # Bounded again as they are read: a forged start input must not carry more than a run keeps.
        for o in carried[-DELIVERED_CARRIED:]:
            if len(o.id) <= MAX_ID_CHARS:
                self._outcomes[o.id] = _bounded(o)
        self._forgotten: list[str] = [f for f in (forgotten or [])[-FORGOTTEN_KEPT:] if len(f) <= _DIGEST_CHARS]
        self._forgotten_set = set(self._forgotten)
        self.forgotten_count = max(len(self._forgotten), forgotten_count)

    def known(self, delivery_id: str) -> bool:
        """Whether a delivery of this id reached the run (settled or still being checked)."""
        return delivery_id in self._open or delivery_id in self._outcomes

    def digest_of(self, delivery_id: str) -> str | None:
        """The digest of what the known delivery ``delivery_id`` delivered (``None`` for one recorded before)."""
        if delivery_id in self._open:
            return self._open[delivery_id]
        outcome = self._outcomes.get(delivery_id)
        return outcome.digest if outcome is not None else None

    def forgotten(self, delivery_id: str) -> bool:
        """Whether a delivery of this id reached the run and its outcome was let go (too old to keep)."""
        return _digest(delivery_id) in self._forgotten_set

    @property
    def lost_track(self) -> bool:
        """Whether some deliveries' ids are no longer remembered at all (more were let go than are listed)."""
        return self.forgotten_count > len(self._forgotten)

    def begin(self, delivery_id: str, digest: str | None = None) -> None:
        self._open[delivery_id] = digest or ""

    def settle(self, delivery_id: str, result: dict[str, Any] | ApplicationError) -> None:
        """Keep what became of a delivery: the accepted result, or the refusal."""
        digest = self._open.pop(delivery_id, None) or None
        if isinstance(result, ApplicationError):
            details = result.details[0] if result.details and isinstance(result.details[0], dict) else {}
            outcome = DeliveryOutcome(
                delivery_id,
                error_type=result.type or "ApplicationError",
                error=result.message,
                details=details,
                digest=digest,
            )
        else:
            outcome = DeliveryOutcome(delivery_id, result=result, digest=digest)
        self._outcomes[delivery_id] = _bounded(outcome)
        while len(self._outcomes) > DELIVERED_CARRIED:
            oldest = next(iter(self._outcomes))
            del self._outcomes[oldest]
            # Remembered, to answer "too old" rather than "never arrived" (which invites a second send).
            self.forgotten_count += 1
            key = _digest(oldest)
            self._forgotten.append(key)
            self._forgotten_set.add(key)
            if len(self._forgotten) > FORGOTTEN_KEPT:
                dropped = self._forgotten.pop(0)
                if dropped not in self._forgotten:
                    self._forgotten_set.discard(dropped)

    def outcome(self, delivery_id: str) -> DeliveryOutcome | None:
        return self._outcomes.get(delivery_id)

    def carry(self) -> list[DeliveryOutcome]:
        return list(self._outcomes.values())

    def carry_forgotten(self) -> list[str]:
        return list(self._forgotten)


_DIGEST_CHARS = 12


def _digest(text: str) -> str:
    """A short, stable digest (the same on every worker and on replay)."""
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_CHARS]


def delivery_digest(content: Any) -> str:
    """The digest of what a delivery delivers (its ``send`` or ``respond`` input), to tell a reused id."""
    return _digest(to_json(content).decode())


def _bounded(o: DeliveryOutcome) -> DeliveryOutcome:
    """``o`` with every string it holds cut to :data:`MAX_OUTCOME_CHARS` (outcomes are carried and served)."""
    kept: dict[str, Any] = {}
    room = MAX_OUTCOME_CHARS
    for key, value in o.details.items():
        size = len(key) + json_size(value)
        if size <= room:
            kept[key] = value
            room -= size
    result = o.result
    if result is not None and json_size(result) > MAX_OUTCOME_CHARS:
        result = {"accepted": True}
    return DeliveryOutcome(
        o.id,
        digest=o.digest[:_DIGEST_CHARS] if o.digest else None,
        result=result,
        error_type=o.error_type[:MAX_TYPE_NAME_CHARS] if o.error_type else None,
        error=o.error[:MAX_OUTCOME_CHARS] if o.error else None,
        details=kept,
    )
