"""Outside input (responses, messages) from arrival to the engine, at superstep boundaries only.

Signals queue their input as it came (it is checked at the next boundary; bad
input becomes a warning). Updates check theirs before accepting it (bad
input is refused, the caller told why) and queue it checked. Either way the
engine sees input only at a boundary, in arrival order, so a superstep always
reads the state and inputs of the boundary it started at.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

from pydantic_core import to_json
from temporalio.exceptions import ApplicationError

from temporal_workflows._engine.inbound import Inbound, InboundKind, Unanswerable, apply, open_request
from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import Engine, PendingRequest
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._failures import refuse
from temporal_workflows.temporal._protocol import (
    FAILURE_ALREADY_ANSWERED,
    FAILURE_INPUT_TOO_LONG,
    FAILURE_INVALID_RESPONSE,
    FAILURE_UNDELIVERABLE,
    FAILURE_UNKNOWN_REQUEST,
    MAX_ID_CHARS,
    MAX_TYPE_NAME_CHARS,
    CarriedInbox,
    CarriedInput,
    DeliveryOutcome,
    RespondAllInput,
    RespondInput,
    SendInput,
    Validated,
    too_long,
)
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.status import StatusBoard, quote

__all__ = [
    "DELIVERED_CARRIED",
    "FORGOTTEN_KEPT",
    "MAX_OUTCOME_CHARS",
    "Deliveries",
    "Inbox",
    "delivery_digest",
    "oversized_respond",
    "oversized_send",
    "refuse",
]

DELIVERED_CARRIED = 200
"""Answered request ids carried across continue-as-new, to say "already answered"."""

FORGOTTEN_KEPT = 2000
"""Delivery ids (as 12-character digests) whose outcomes were let go, remembered to answer "too old"."""

MAX_OUTCOME_CHARS = 2000
"""Characters of a refusal's message a delivery outcome keeps (it is carried across continue-as-new)."""

Validate = Callable[[str, Envelope, PendingRequest | None], Awaitable[Validated]]


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

    Args:
        validate: Type-checks a value in a local activity (the types are user code), at a boundary.
        validate_update: Type-checks what an update or ``deliver`` signal brought, in its handler
            (a regular activity: see ``locals.py``); ``validate`` if not given.
        board: Where warnings about unusable signal input go.
        carried: What the previous execution handed over when it continued as new.
    """

    def __init__(
        self,
        validate: Validate,
        board: StatusBoard,
        carried: CarriedInbox | None,
        *,
        budget: TaskBudget | None = None,
        validate_update: Validate | None = None,
    ) -> None:
        carried = carried or CarriedInbox()
        self._validate = validate
        self._validate_update = validate_update or validate
        self._board = board
        self._budget = budget or TaskBudget()
        # (a carried item's kind was checked when the run started: ``startup._check_carried``)
        self.items: list[Inbound] = [
            Inbound(cast(InboundKind, i.kind), i.key, i.value, i.validated) for i in carried.items if i.kind != "event"
        ]
        if len(self.items) < len(carried.items):
            # An event a client sent by ``send_event`` before a deploy, carried from the execution before: no
            # graph takes events (that signal served the retired LlamaIndex front end), so it is dropped.
            board.warn("signal 'send_event' ignored: this run does not route events; send a message or respond")
        # Request ids answered (by a response taken into the inbox or the engine): a second answer is refused.
        self._answered: set[str] = {i.key for i in self.items if i.kind == "respond" and i.checked}
        # Request ids whose response reached the engine.
        self._delivered: set[str] = set(carried.delivered)
        self._delivered_order: list[str] = list(carried.delivered)
        self.deliveries = Deliveries(carried.outcomes, carried.forgotten, carried.forgotten_count)

    def __bool__(self) -> bool:
        return bool(self.items)

    def is_open(self, request_id: str) -> bool:
        """Whether a pending request still waits for an answer (none accepted yet)."""
        return request_id not in self._answered

    # -- signals: queued as they came ----------------------------------------------------

    # An id or type name over its limit is never queued: the inbox is carried across
    # continue-as-new, and what it holds is quoted in warnings.

    def respond_signal(self, inp: RespondInput) -> None:
        error = oversized_respond(inp)
        if error is not None:
            self._board.warn(f"signal 'respond' ignored: {error}", request_id=inp.request_id)
            return
        self.items.append(Inbound("respond", inp.request_id, Envelope(None, inp.response)))

    def send_signal(self, inp: SendInput, arrive: Callable[[SendInput], str] | None = None) -> None:
        error = oversized_send(inp)
        if error is not None:
            self._board.warn(f"signal 'send' ignored: {error}", executor_id=inp.executor_id)
            return
        action = arrive(inp) if arrive is not None else "take"
        if action == "refuse":
            return  # (``arrive`` warned: a busy run, policy reject)
        self.items.append(Inbound("send", inp.executor_id, inp.message, interrupts=action != "take"))

    # -- updates: checked, then queued -----------------------------------------------------

    def check_request(self, engine: Engine | None, request_id: str) -> None:
        """Refuse an answer to ``request_id`` that cannot be taken, saying why (an update's validator).

        Before the execution has its engine (the first workflow task of a run,
        or of its next execution after continue-as-new) only what the inbox
        knows is checked; the handler waits for the engine and checks the rest.
        """
        if engine is not None:
            self.pending_request(engine, request_id)
            return
        error = too_long("request id", request_id, MAX_ID_CHARS)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        if request_id in self._delivered or request_id in self._answered:
            raise refuse(
                FAILURE_ALREADY_ANSWERED, f"request {quote(request_id)} was already answered", request_id=request_id
            )

    def pending_request(self, engine: Engine, request_id: str) -> PendingRequest:
        """The pending request ``request_id``, or a refusal saying why it cannot be answered."""
        error = too_long("request id", request_id, MAX_ID_CHARS)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        req = engine.pending_requests.get(request_id)
        if request_id in self._delivered or request_id in self._answered:
            raise refuse(
                FAILURE_ALREADY_ANSWERED, f"request {quote(request_id)} was already answered", request_id=request_id
            )
        if req is None:
            pending = sorted(r for r in engine.pending_requests if r not in self._answered)
            raise refuse(
                FAILURE_UNKNOWN_REQUEST,
                f"no pending request with id {quote(request_id)}; pending request ids: {pending or 'none'}",
                request_id=request_id,
                pending=pending,
            )
        return req

    async def _validated_response(self, engine: Engine, request_id: str, response: Any) -> Envelope:
        """An answer type-checked against its request (in an activity); refused, naming both, if it does not fit."""
        req = self.pending_request(engine, request_id)
        checked = await self._validate_update(req.executor_id, Envelope(None, response), req)
        if checked.value is None:
            raise refuse(
                checked.error_type or FAILURE_INVALID_RESPONSE,
                checked.error or "invalid response",
                request_id=req.request_id,
                executor_id=req.executor_id,
            )
        return checked.value

    async def accept_response(self, engine: Engine, inp: RespondInput) -> dict[str, Any]:
        value = await self._validated_response(engine, inp.request_id, inp.response)
        # Another answer may have been accepted while this one was validated.
        req = self.pending_request(engine, inp.request_id)
        self._answered.add(req.request_id)
        self.items.append(Inbound("respond", req.request_id, value, checked=True))
        return {"request_id": req.request_id, "executor_id": req.executor_id, "accepted": True}

    def check_requests(self, engine: Engine | None, inp: RespondAllInput) -> None:
        """Refuse answers given together if any of them cannot be taken (the ``submit_responses`` validator)."""
        seen: set[str] = set()
        for r in inp.responses:
            if r.request_id in seen:
                raise refuse(
                    FAILURE_ALREADY_ANSWERED,
                    f"request {quote(r.request_id)} is answered twice in one call",
                    request_id=r.request_id,
                )
            seen.add(r.request_id)
            self.check_request(engine, r.request_id)

    async def accept_responses(self, engine: Engine, inp: RespondAllInput) -> dict[str, Any]:
        """Answers given together: each checked (its value validated) before any is queued, then all queued at
        once, so the next boundary hands every one of them to the engine (Agent Framework applies the
        responses of one ``run(responses=...)`` call together). One refused: none is taken."""
        self.check_requests(engine, inp)
        checked: list[tuple[PendingRequest, Envelope]] = []
        for r in inp.responses:
            value = await self._validated_response(engine, r.request_id, r.response)
            checked.append((self.pending_request(engine, r.request_id), value))
        # Another answer may have been accepted while these were validated: check again, then queue (no await).
        for req, _ in checked:
            self.pending_request(engine, req.request_id)
        for req, value in checked:
            self._answered.add(req.request_id)
            self.items.append(Inbound("respond", req.request_id, value, checked=True))
        return {"request_ids": [req.request_id for req, _ in checked], "accepted": True}

    async def accept_message(
        self, inp: SendInput, check_open: Callable[[], None], arrive: Callable[[SendInput], str] | None = None
    ) -> dict[str, Any]:
        checked = await self._validate_update(inp.executor_id, inp.message, None)
        if checked.value is None:
            raise refuse(checked.error_type or FAILURE_UNDELIVERABLE, checked.error or "undeliverable message")
        check_open()
        # Whether the run is busy is decided now, as the message is queued (it may have become so meanwhile).
        action = arrive(inp) if arrive is not None else "take"
        self.items.append(Inbound("send", inp.executor_id, checked.value, checked=True, interrupts=action != "take"))
        if inp.policy is None and action == "take":
            return {"executor_id": inp.executor_id, "accepted": True}
        return {"executor_id": inp.executor_id, "accepted": True, "interrupts": action != "take"}

    def charge_update(self, inp: RespondInput | RespondAllInput | SendInput) -> None:
        """Count an accepted update's input against its workflow task (called first thing in the handler).

        The SDK repeats an accepted update's input in the task that accepts it:
        room the rest of that task no longer has. (A signal's input is not
        repeated: the server records it.)
        """
        self._budget.charge(json_size(inp))

    # -- at a boundary -------------------------------------------------------------------

    async def drain(self, engine: Engine, interrupt_waits: Callable[[], bool] | None = None) -> None:
        """Hand queued input to the engine, in arrival order: each item checked (signals' input, at this
        boundary; a warning if unusable), then applied by the engine's one rule (``_engine/inbound``).

        A message that interrupts the run's turn, arriving while this boundary
        drains (``interrupt_waits()``), and what came after it, wait for the next
        boundary, where the interruption is carried out first."""
        while self.items:
            if interrupt_waits is not None and self.items[0].interrupts and interrupt_waits():
                return
            item = self.items.pop(0)
            if item.kind == "respond":
                await self._take_response(engine, item)
            else:
                await self._take_message(engine, item)

    async def _take_response(self, engine: Engine, item: Inbound) -> None:
        warn = self._board.warn
        # An update's answer accepted (and its caller told so) while this signal waited wins, whatever the order.
        found = open_request(
            engine, item.key, answered=() if item.checked else self._answered, delivered=self._delivered
        )
        if isinstance(found, Unanswerable):
            if found.answered:
                warn(f"request {quote(item.key)} was already answered; response ignored", request_id=item.key)
            else:
                pending = list(found.pending)
                warn(
                    f"no pending request with id {quote(item.key)}; pending request ids: {pending or 'none'}",
                    request_id=item.key,
                )
            return
        if not item.checked:
            checked = await self._validate(found.executor_id, item.value, found)
            if checked.value is None:
                warn(checked.error or "invalid response", request_id=found.request_id, executor_id=found.executor_id)
                return
            item = Inbound("respond", found.request_id, checked.value, checked=True)
        self._answered.discard(found.request_id)
        self._remember(apply(engine, item).answered)

    async def _take_message(self, engine: Engine, item: Inbound) -> None:
        if not item.checked:
            checked = await self._validate(item.key, item.value, None)
            if checked.value is None:
                self._board.warn(checked.error or "undeliverable message", executor_id=item.key)
                return
            item = Inbound("send", item.key, checked.value, checked=True)
        apply(engine, item)

    def reopened(self, request_ids: Iterable[str]) -> None:
        """Requests pending again after a rollback: answers to them are taken again, not "already answered"."""
        for rid in request_ids:
            if rid in self._delivered:
                self._delivered.discard(rid)
                self._delivered_order = [r for r in self._delivered_order if r != rid]

    def _remember(self, answered: tuple[str, ...]) -> None:
        for rid in answered:
            self._delivered.add(rid)
            self._delivered_order.append(rid)

    def carry(self) -> CarriedInbox:
        return CarriedInbox(
            items=[CarriedInput(i.kind, i.key, i.value, i.checked) for i in self.items],
            delivered=self._delivered_order[-DELIVERED_CARRIED:],
            outcomes=self.deliveries.carry(),
            forgotten=self.deliveries.carry_forgotten(),
            forgotten_count=self.deliveries.forgotten_count,
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
