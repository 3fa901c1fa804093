"""Outside input (responses, messages) from arrival to the engine, at superstep boundaries only.

Signals queue their input as it came (it is checked at the next boundary; bad
input becomes a warning). Updates check theirs before accepting it (bad
input is refused, the caller told why) and queue it checked. Either way the
engine sees input only at a boundary, in arrival order, so a superstep always
reads the state and inputs of the boundary it started at.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

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
    RespondInput,
    SendInput,
    Validated,
    too_long,
)
from temporal_workflows.temporal._status import StatusBoard, quote
from temporal_workflows.temporal._supersteps import TaskBudget

__all__ = ["DELIVERED_CARRIED", "Inbox", "oversized_respond", "oversized_send", "refuse"]

DELIVERED_CARRIED = 200
"""Answered request ids carried across continue-as-new, to say "already answered"."""

Validate = Callable[[str, Envelope, PendingRequest | None], Awaitable[Validated]]


@dataclass
class _Input:
    kind: str  # "respond" | "send"
    key: str  # request id or executor id
    value: Envelope
    validated: bool = False


def oversized_respond(inp: RespondInput) -> str | None:
    """Why a response is refused before it is even queued: its request id is too long (else ``None``)."""
    return too_long("request id", inp.request_id, MAX_ID_CHARS)


def oversized_send(inp: SendInput) -> str | None:
    """Why a message is refused before it is even queued: its executor id or type name is too long."""
    return too_long("executor id", inp.executor_id, MAX_ID_CHARS) or too_long(
        "message type", inp.message_type, MAX_TYPE_NAME_CHARS
    )


class Inbox:
    """Outside input waiting for the next boundary, and which requests were answered.

    Args:
        validate: Type-checks a value in a local activity (the types are user code).
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
    ) -> None:
        carried = carried or CarriedInbox()
        self._validate = validate
        self._board = board
        self._budget = budget or TaskBudget()
        self.items: list[_Input] = [_Input(i.kind, i.key, i.value, i.validated) for i in carried.items]
        # Request ids answered (by a response taken into the inbox or the engine): a second answer is refused.
        self._answered: set[str] = {i.key for i in self.items if i.kind == "respond" and i.validated}
        # Request ids whose response reached the engine.
        self._delivered: set[str] = set(carried.delivered)
        self._delivered_order: list[str] = list(carried.delivered)

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
        self.items.append(_Input("respond", inp.request_id, Envelope(None, inp.response)))

    def send_signal(self, inp: SendInput) -> None:
        error = oversized_send(inp)
        if error is not None:
            self._board.warn(f"signal 'send' ignored: {error}", executor_id=inp.executor_id)
            return
        self.items.append(_Input("send", inp.executor_id, Envelope(inp.message_type, inp.message)))

    # -- updates: checked, then queued -----------------------------------------------------

    def check_request(self, engine: Engine | None, request_id: str) -> PendingRequest:
        """The pending request ``request_id``, or a refusal saying why it cannot be answered."""
        error = too_long("request id", request_id, MAX_ID_CHARS)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        req = engine.pending_requests.get(request_id) if engine else None
        if request_id in self._delivered or request_id in self._answered:
            raise refuse(
                FAILURE_ALREADY_ANSWERED, f"request {quote(request_id)} was already answered", request_id=request_id
            )
        if req is None:
            pending = sorted(r for r in (engine.pending_requests if engine else {}) if r not in self._answered)
            raise refuse(
                FAILURE_UNKNOWN_REQUEST,
                f"no pending request with id {quote(request_id)}; pending request ids: {pending or 'none'}",
                request_id=request_id,
                pending=pending,
            )
        return req

    async def accept_response(self, engine: Engine | None, inp: RespondInput) -> dict[str, Any]:
        self._accepted(inp)
        req = self.check_request(engine, inp.request_id)
        checked = await self._validate(req.executor_id, Envelope(None, inp.response), req)
        # Another answer may have been accepted while this one was validated.
        req = self.check_request(engine, inp.request_id)
        if checked.value is None:
            raise refuse(
                checked.error_type or FAILURE_INVALID_RESPONSE,
                checked.error or "invalid response",
                request_id=req.request_id,
                executor_id=req.executor_id,
            )
        self._answered.add(req.request_id)
        self.items.append(_Input("respond", req.request_id, checked.value, validated=True))
        return {"request_id": req.request_id, "executor_id": req.executor_id, "accepted": True}

    async def accept_message(self, inp: SendInput, check_open: Callable[[], None]) -> dict[str, Any]:
        self._accepted(inp)
        checked = await self._validate(inp.executor_id, Envelope(inp.message_type, inp.message), None)
        if checked.value is None:
            raise refuse(checked.error_type or FAILURE_UNDELIVERABLE, checked.error or "undeliverable message")
        check_open()
        self.items.append(_Input("send", inp.executor_id, checked.value, validated=True))
        return {"executor_id": inp.executor_id, "accepted": True}

    def _accepted(self, inp: RespondInput | SendInput) -> None:
        # The SDK repeats an accepted update's input in the workflow task that accepts it (called first
        # thing in the handler, so in that task): room the rest of the task no longer has.
        self._budget.charge(json_size(inp))

    # -- at a boundary -------------------------------------------------------------------

    async def drain(self, engine: Engine) -> None:
        """Hand queued input to the engine, in arrival order."""
        warn = self._board.warn
        while self.items:
            item = self.items.pop(0)
            if item.kind == "respond":
                if not item.validated and item.key in self._answered:
                    # An update's answer was accepted (and its caller told so) while
                    # this signal waited: the update wins, whatever the order.
                    warn(f"request {quote(item.key)} was already answered; response ignored", request_id=item.key)
                    continue
                req = engine.pending_requests.get(item.key)
                if req is None:
                    if item.key in self._delivered:
                        warn(f"request {quote(item.key)} was already answered; response ignored", request_id=item.key)
                    else:
                        pending = sorted(engine.pending_requests)
                        warn(
                            f"no pending request with id {quote(item.key)}; pending request ids: {pending or 'none'}",
                            request_id=item.key,
                        )
                    continue
                value = item.value
                if not item.validated:
                    checked = await self._validate(req.executor_id, value, req)
                    if checked.value is None:
                        warn(
                            checked.error or "invalid response", request_id=req.request_id, executor_id=req.executor_id
                        )
                        continue
                    value = checked.value
                engine.respond(req.request_id, value)
                self._answered.discard(req.request_id)
                self._delivered.add(req.request_id)
                self._delivered_order.append(req.request_id)
            else:
                value = item.value
                if not item.validated:
                    checked = await self._validate(item.key, value, None)
                    if checked.value is None:
                        warn(checked.error or "undeliverable message", executor_id=item.key)
                        continue
                    value = checked.value
                engine.send(item.key, value)

    def carry(self) -> CarriedInbox:
        return CarriedInbox(
            items=[CarriedInput(i.kind, i.key, i.value, i.validated) for i in self.items],
            delivered=self._delivered_order[-DELIVERED_CARRIED:],
        )
