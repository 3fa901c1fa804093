"""Outside input on Temporal, admitted in one place: check, accept, take.

Every response and message a client sends a graph run passes three steps
here, whichever way it came (an update, a signal, a ``deliver`` signal):

- **check** (an update's validator; no trace in history): can this input be
  taken at all? For a response, ``_engine/inbound.open_request`` says (pending,
  or answered already, or unknown); the refusal is worded by
  ``Unanswerable.text`` (the words of ``AlreadyAnsweredError`` /
  ``UnknownRequestError``, as in process);
- **accept** (the update's handler): the value type-checked against its
  request or executor in a regular activity (:meth:`Admission.validate_update`;
  the types are user code), then queued, checked, in the inbox (``inbox.py``);
- **take** (at a boundary, :meth:`Admission.take`): queued input, in arrival
  order, each item a signal brought checked now (a local activity,
  :meth:`Admission.validate`; bad input becomes a warning), then applied by
  the engine's one rule (``inbound.apply``).

The validate activities live here too, so a line of this module tells from
its own room who validates what, and how: the run's other parts (a reset's
start message, a sub-workflow child's answers) borrow :meth:`Admission.validate`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from temporal_workflows._engine.inbound import Inbound, Unanswerable, apply, open_request
from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import Engine, PendingRequest, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import UndeliverableMessageError
from temporal_workflows.temporal._failures import refuse
from temporal_workflows.temporal._protocol import (
    ACTIVITY_VALIDATE,
    FAILURE_ALREADY_ANSWERED,
    FAILURE_INPUT_TOO_LONG,
    FAILURE_INVALID_RESPONSE,
    FAILURE_RUN_BUSY,
    FAILURE_UNDELIVERABLE,
    FAILURE_UNKNOWN_REQUEST,
    MAX_ID_CHARS,
    VALIDATE_INLINE_BYTES,
    RespondAllInput,
    RespondInput,
    SendInput,
    Validated,
    ValidateInput,
    quote,
    too_long,
)
from temporal_workflows.temporal._workflow.budget import TaskBudget
from temporal_workflows.temporal._workflow.inbox import Inbox, oversized_send
from temporal_workflows.temporal._workflow.locals import LocalActivities, execute_local_activity
from temporal_workflows.temporal._workflow.patches import PATCH_TASK_BUDGET, PATCH_VALIDATE_IN_ACTIVITY, RunPatches
from temporal_workflows.temporal._workflow.pinning import elsewhere, local_first, refusal, waiting_note
from temporal_workflows.temporal._workflow.status import StatusBoard
from temporal_workflows.temporal._workflow.turns import request_key

__all__ = ["Admission", "Validate", "unanswerable"]

Validate = Callable[[str, Envelope, PendingRequest | None], Awaitable[Validated]]
"""Type-checks a value for an executor (a message) or against a request (a response): the validate activity."""


def unanswerable(why: Unanswerable) -> ApplicationError:
    """The refusal of an answer that cannot answer its request, in its error's words (read back as that error)."""
    if why.answered:
        return refuse(FAILURE_ALREADY_ANSWERED, why.text(quote), request_id=why.request_id)
    pending = list(why.pending)
    return refuse(FAILURE_UNKNOWN_REQUEST, why.text(quote), request_id=why.request_id, pending=pending)


class Admission:
    """Where a graph run's outside input is checked, accepted and taken (see the module).

    Args:
        inbox: The queue input waits in for a boundary (and what was answered).
        board: Where warnings about unusable signal input go.
        budget: The workflow task's room (an accepted update's input counts against it).
        patches: Which behaviour the run was recorded with.
        locals: The run's own local activities in flight (``locals.py``).
        payload_limit: The run's payload limit (known once its graph is pinned).
        signature: The run's graph signature as activities check it (``None``: not pinned yet).
    """

    def __init__(
        self,
        inbox: Inbox,
        board: StatusBoard,
        *,
        budget: TaskBudget,
        patches: RunPatches,
        locals: LocalActivities,
        payload_limit: Callable[[], int],
        signature: Callable[[], str | None],
    ) -> None:
        self.inbox = inbox
        self._board = board
        self._budget = budget
        self._patches = patches
        self._locals = locals
        self._payload_limit = payload_limit
        self._signature = signature
        self._taken = (-1, 0)  # (workflow task, bytes of update input its validators let in)
        self.held: dict[str, Envelope] = {}
        """Large input being validated, by reference: the activity reads it by query (``ValidateInput.ref``)."""
        self._held_count = 0

    # -- check: an update's validator (no trace in history) -------------------------------

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
        inbox = self.inbox
        if request_id in inbox.delivered or request_id in inbox.answered:
            raise unanswerable(Unanswerable(request_id, answered=True))

    def pending_request(self, engine: Engine, request_id: str) -> PendingRequest:
        """The pending request ``request_id``, or a refusal saying why it cannot be answered."""
        error = too_long("request id", request_id, MAX_ID_CHARS)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        # An answer accepted or delivered before wins (a delivered one too, checked before the engine is asked).
        found = open_request(engine, request_id, answered=self.inbox.answered | self.inbox.delivered)
        if isinstance(found, Unanswerable):
            raise unanswerable(found)
        return found

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

    def check_message(self, inp: SendInput, topology: Topology | None) -> None:
        """Refuse a message whose ids are too long, or for an executor the run's graph does not have (once pinned)."""
        error = oversized_send(inp)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        if topology is not None and inp.executor_id not in topology.executor_ids:
            raise refuse(
                FAILURE_UNDELIVERABLE,
                UndeliverableMessageError.no_executor_text(
                    inp.executor_id, workflow.info().workflow_type, topology.executor_ids, quote
                ),
            )

    def check_room(self, inp: Any) -> None:
        """Refuse an update whose input the current workflow task has no more room for (retryable).

        The SDK repeats each accepted update's input in the completion of the
        task that accepts it, and the server writes that completion together
        with the signals that arrived meanwhile in one transaction, refused
        over 4 MiB (``TransactionSizeLimitError``; the task then fails again
        and again). So one task accepts at most one payload of update input:
        any one update fits (each is under the payload limit); a second large
        one is refused as ``RunBusyError`` and the client sends it again to the
        next task. Validators do not run on replay, and a refused update
        leaves no trace: nothing here touches history.
        """
        size = json_size(inp)
        task = workflow.info().get_current_history_length()
        seen, taken = self._taken
        if seen != task:
            taken = 0
        if taken and taken + size > self._payload_limit():
            raise refuse(
                FAILURE_RUN_BUSY,
                f"the run took {taken:,} bytes of update input in this workflow task; "
                f"this {size:,}-byte input goes to the next one: send it again shortly",
                retryable=True,
            )
        self._taken = (task, taken + size)

    # -- accept: an update's handler (type-checked, then queued checked) ------------------

    def charge_update(self, inp: RespondInput | RespondAllInput | SendInput) -> None:
        """Count an accepted update's input against its workflow task (called first thing in the handler).

        The SDK repeats an accepted update's input in the task that accepts it:
        room the rest of that task no longer has. (A signal's input is not
        repeated: the server records it.)
        """
        self._budget.charge(json_size(inp))

    async def _validated_response(self, engine: Engine, request_id: str, response: Any) -> Envelope:
        """An answer type-checked against its request (in an activity); refused, naming both, if it does not fit."""
        req = self.pending_request(engine, request_id)
        checked = await self.validate_update(req.executor_id, Envelope(None, response), req)
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
        self.inbox.queue_answer(req.request_id, value)
        return {"request_id": req.request_id, "executor_id": req.executor_id, "accepted": True}

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
            self.inbox.queue_answer(req.request_id, value)
        return {"request_ids": [req.request_id for req, _ in checked], "accepted": True}

    async def checked_message(self, inp: SendInput) -> Envelope:
        """A message type-checked for its executor (in an activity); refused, naming what it does not fit."""
        checked = await self.validate_update(inp.executor_id, inp.message, None)
        if checked.value is None:
            raise refuse(checked.error_type or FAILURE_UNDELIVERABLE, checked.error or "undeliverable message")
        return checked.value

    def queue_message(self, inp: SendInput, value: Envelope, action: str, *, tag: str | None = None) -> dict[str, Any]:
        """Queue a checked message; ``action``: what it does as it arrives (``inbound.arrival``); ``tag``: the key a
        client follows it by. Returns the update's result."""
        self.inbox.items.append(
            Inbound("send", inp.executor_id, value, checked=True, interrupts=action != "take", tag=tag)
        )
        if tag is not None:
            self.inbox.turns.queued(tag)
        if inp.policy is None and action == "take":
            return {"executor_id": inp.executor_id, "accepted": True}
        return {"executor_id": inp.executor_id, "accepted": True, "interrupts": action != "take"}

    # -- take: at a boundary -----------------------------------------------------------------

    async def take(self, engine: Engine, interrupt_waits: Callable[[], bool] | None = None) -> None:
        """Hand queued input to the engine, in arrival order: each item checked (signals' input, at this
        boundary; a warning if unusable), then applied by the engine's one rule (``_engine/inbound``).

        A message that interrupts the run's turn, arriving while this boundary
        takes input (``interrupt_waits()``), and what came after it, wait for the
        next boundary, where the interruption is carried out first."""
        inbox = self.inbox
        while inbox.items:
            if interrupt_waits is not None and inbox.items[0].interrupts and interrupt_waits():
                return
            item = inbox.items.pop(0)
            tracked = request_key(item.key) if item.kind == "respond" else item.tag
            if tracked is not None:
                inbox.turns.taken(tracked)
            if item.kind == "respond":
                await self._take_response(engine, item)
            else:
                await self._take_message(engine, item)

    async def _take_response(self, engine: Engine, item: Inbound) -> None:
        inbox = self.inbox
        # An update's answer accepted (and its caller told so) while this signal waited wins, whatever the order.
        found = open_request(
            engine, item.key, answered=() if item.checked else inbox.answered, delivered=inbox.delivered
        )
        if isinstance(found, Unanswerable):
            self._board.warn(found.text(quote) + ("; response ignored" if found.answered else ""), request_id=item.key)
            return
        if not item.checked:
            checked = await self.validate(found.executor_id, item.value, found)
            if checked.value is None:
                self._board.warn(
                    checked.error or "invalid response", request_id=found.request_id, executor_id=found.executor_id
                )
                return
            item = Inbound("respond", found.request_id, checked.value, checked=True)
        inbox.answered.discard(found.request_id)
        inbox.remember(apply(engine, item).answered)

    async def _take_message(self, engine: Engine, item: Inbound) -> None:
        if not item.checked:
            checked = await self.validate(item.key, item.value, None)
            if checked.value is None:
                self._board.warn(checked.error or "undeliverable message", executor_id=item.key)
                return
            item = Inbound("send", item.key, checked.value, checked=True)
        apply(engine, item)

    # -- the validate activities ---------------------------------------------------------------

    async def quiet(self) -> None:
        """Wait until none of the run's local activities is in flight, before issuing a command from a handler.

        A handler's command then follows the result of any such activity in
        history and on replay alike (see ``locals.py``). Runs recorded before
        ``PATCH_VALIDATE_IN_ACTIVITY`` did not wait.
        """
        if self._patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            locals_ = self._locals
            await workflow.wait_condition(lambda: locals_.idle)

    async def validate(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check outside input in a local activity, at a boundary: the types are user code."""
        name = workflow.info().workflow_type

        arg = ValidateInput(name, executor_id, value, request, signature=self._signature())
        summary = f"validate {'response to ' + request.request_id if request else 'message for ' + executor_id}"

        async def validate() -> Validated | None:
            """Checked by this worker, or ``None``: it hosts another version of the graph."""
            try:
                checked: Validated = await execute_local_activity(
                    ACTIVITY_VALIDATE,
                    arg,
                    result_type=Validated,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=local_first(RetryPolicy(maximum_attempts=3)),
                    summary=summary,
                )
            except (ActivityError, ApplicationError) as e:  # a local activity's refusal arrives unwrapped
                details = refusal(e)
                if details is None:
                    raise
                refused.append(details)
                return None
            return checked

        refused: list[dict[str, Any]] = []
        budget = self._budget
        if not self._patches.get(PATCH_TASK_BUDGET):
            result = await validate()  # recorded before: validations ran side by side
        else:
            # Its marker records the result in this workflow task: one validation at a time, with room
            # for a whole value (what a validation that changed the value returns, at most).
            async with budget.lock:
                await budget.room(self._payload_limit())
                result = await validate()
                budget.charge(json_size(result))
        if result is None:
            # A worker hosting the run's graph checks it (the types are its version's), however long that takes.
            what = f"response to request {request.request_id!r}" if request else f"message for {executor_id!r}"
            worker = refused[0].get("worker_signature")
            theirs = worker if isinstance(worker, str) else None
            note = waiting_note(f"checking the {what}", name, arg.signature or "", theirs)
            result = await elsewhere(
                ACTIVITY_VALIDATE,
                arg,
                Validated,
                board=self._board,
                note=note,
                summary=f"{summary} (on a worker hosting the run's graph)",
            )
        # The activity returns only what validation changed (the value is in history already).
        return result.resolved(value)

    async def validate_update(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check input an update (or a ``deliver`` signal) brought, in a regular activity.

        A local activity here made concurrent input unreplayable (``locals.py``):
        its result can reach the run an activation late. A regular activity's
        result is a history event, delivered where it is recorded.
        """
        if not self._patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            return await self.validate(executor_id, value, request)
        await self.quiet()
        name = workflow.info().workflow_type
        what = f"response to {request.request_id}" if request else f"message for {executor_id}"
        ref: str | None = None
        if json_size(value.data) > VALIDATE_INLINE_BYTES:
            # History holds it already (its update or signal): the activity reads it by query, not again.
            self._held_count += 1
            ref = f"input-{self._held_count}"
            self.held[ref] = value
            arg = ValidateInput(
                name, executor_id, Envelope(value.type, None), request, ref=ref, signature=self._signature()
            )
        else:
            arg = ValidateInput(name, executor_id, value, request, signature=self._signature())
        try:
            handle = await self._budget.start_activity(
                json_size(arg),
                ACTIVITY_VALIDATE,
                arg,
                result_type=Validated,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=5)),
                summary=f"validate {what}",
            )
            result: Validated = await handle
        finally:
            if ref is not None:
                del self.held[ref]
        await self.quiet()  # what the handler does next follows any local activity's result
        return result.resolved(value)
