"""The signal and update handlers of ``GraphWorkflow`` for outside input: responses, messages, deliveries.

Each hands its input to the run's admission (``admission.py``): an update's
validator checks it there (refused, it leaves no trace), its handler has it
accepted there (type-checked, then queued); a signal's input is queued as it
came (bad input becomes a warning). The next boundary takes what is queued.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._engine.inbound import (
    CONCURRENT_INPUT,
    DEFAULT_CONCURRENT_INPUT,
    arrival,
    check_policy,
    stronger,
)
from temporal_workflows.temporal._failures import refuse
from temporal_workflows.temporal._protocol import (
    FAILURE_DELIVERY_FORGOTTEN,
    FAILURE_INPUT_TOO_LONG,
    FAILURE_INVALID_RUN_INPUT,
    FAILURE_RUN_IN_PROGRESS,
    FAILURE_UNDELIVERABLE,
    FAILURE_UNKNOWN_DELIVERY,
    MAX_ID_CHARS,
    MAX_RESPONSES_PER_UPDATE,
    SIGNAL_CHECKPOINT,
    SIGNAL_CLOSE,
    SIGNAL_DELIVER,
    SIGNAL_RESET,
    SIGNAL_RESPOND,
    SIGNAL_SEND,
    UPDATE_CHECKPOINT,
    UPDATE_CONFIRM,
    UPDATE_PACE,
    UPDATE_RESET,
    UPDATE_RESPOND,
    UPDATE_RESPOND_ALL,
    UPDATE_SEND,
    ConfirmInput,
    Delivery,
    RespondAllInput,
    RespondInput,
    SendInput,
    quote,
    too_long,
)
from temporal_workflows.temporal._workflow.handler_base import HandlerBase
from temporal_workflows.temporal._workflow.inbox import (
    DELIVERED_CARRIED,
    delivery_digest,
)
from temporal_workflows.temporal._workflow.patches import PATCH_CONCURRENT_INPUT
from temporal_workflows.temporal._workflow.turns import delivery_key

__all__ = ["InputHandlers", "SIGNALS", "UPDATES"]


def _bad_policy(policy: object) -> str:
    return f"policy must be one of {', '.join(CONCURRENT_INPUT)}, not {quote(str(policy))}"


SIGNALS = (
    SIGNAL_RESPOND,
    SIGNAL_SEND,
    SIGNAL_CLOSE,
    SIGNAL_CHECKPOINT,
    SIGNAL_RESET,
    SIGNAL_DELIVER,
)


UPDATES = (
    UPDATE_RESPOND,
    UPDATE_RESPOND_ALL,
    UPDATE_SEND,
    UPDATE_CHECKPOINT,
    UPDATE_RESET,
    UPDATE_CONFIRM,
    UPDATE_PACE,
)


class InputHandlers(HandlerBase):
    """Outside input's signals and updates (a mixin of ``GraphWorkflow``)."""

    # -- outside input -------------------------------------------------------------

    # Signals take their argument raw and decode it (``HandlerBase._signal_arg``): a signal whose argument
    # does not decode would otherwise be dropped by the SDK with a worker log line
    # only; this way it becomes a warning in ``status`` and the event stream.

    @workflow.signal(name=SIGNAL_RESPOND)
    def respond_signal(self, raw: RawValue) -> None:
        """Answer a request; bad input becomes a warning, never a failure."""
        inp, _ = self._signal_arg(SIGNAL_RESPOND, raw, RespondInput)
        if inp is not None and not self._sub_workflow_ignores(SIGNAL_RESPOND):
            self.parts.admission.inbox.respond_signal(inp)

    @workflow.signal(name=SIGNAL_SEND)
    def send_signal(self, raw: RawValue) -> None:
        """Queue a message for an executor; bad input becomes a warning."""
        inp, _ = self._signal_arg(SIGNAL_SEND, raw, SendInput)
        if inp is not None and not self._sub_workflow_ignores(SIGNAL_SEND):
            if inp.policy is not None and inp.policy not in CONCURRENT_INPUT:
                self.parts.board.warn(f"signal 'send' ignored: {_bad_policy(inp.policy)}", executor_id=inp.executor_id)
                return
            if self.parts.closing and self.parts.close_waits:  # as the update is refused (runs closed before: queued)
                self.parts.board.warn("signal 'send' ignored: the run is closing", executor_id=inp.executor_id)
                return
            inbox = self.parts.admission.inbox
            if not inbox.oversized_signal(inp):
                inbox.send_signal(inp, self._arrive(inp, signal=True))

    # -- a message while the run is busy (concurrent_input) -----------------------------

    def _busy(self) -> bool:
        """Whether the run is in a turn (``_engine.inbound.ConcurrentInput``): work queued or running, or input
        waiting for the boundary that will give it work. Idle, or only waiting for answers, it is not."""
        engine = self.parts.engine
        if engine is None:
            # The first task, before the engine: busy with the start message unless it starts idle.
            return (
                self.parts.input.message is not None
                or self.parts.carried is not None
                or self.parts.input.fork_from is not None
            )
        steps = self.parts.steps
        return engine.has_work() or bool(self.parts.admission.inbox) or bool(steps is not None and steps.in_flight)

    def _arrive(self, inp: SendInput, *, signal: bool) -> str:
        """What a message does as it is queued, by its policy (or the run's) and whether the run is busy.

        ``"take"``, ``"interrupt"`` or ``"rollback"`` (then the interruption waits for the next boundary, and the
        running superstep, if any, is abandoned), or ``"refuse"``: an update is refused with
        ``RunInProgressError``; a signal is a warning.
        """
        policy = check_policy(inp.policy or self.parts.input.concurrent_input or DEFAULT_CONCURRENT_INPUT)
        action = arrival(policy, busy=self._busy())
        if action == "refuse":
            text = (
                "the run is busy with its current turn and the message's concurrent-input policy is 'reject'; "
                "send it again once the run is idle, or with policy 'enqueue', 'interrupt' or 'rollback'"
            )
            if signal:
                self.parts.board.warn(f"signal 'send' ignored: {text}", executor_id=inp.executor_id)
                return action
            raise refuse(FAILURE_RUN_IN_PROGRESS, text, executor_id=inp.executor_id)
        if action != "take" and self.patches.get(PATCH_CONCURRENT_INPUT):
            asks = self.parts.checkpoints.asked
            asks.interrupt = stronger(asks.interrupt, action)
            return action
        return "take"

    def _check_policy(self, inp: SendInput) -> None:
        """Refuse a send whose policy is unknown, or that a busy run refuses (its validator: no trace in history)."""
        if inp.policy is not None and inp.policy not in CONCURRENT_INPUT:
            raise refuse(FAILURE_INVALID_RUN_INPUT, _bad_policy(inp.policy))
        policy = inp.policy or self.parts.input.concurrent_input or DEFAULT_CONCURRENT_INPUT
        if policy == "reject" and self._busy():
            self._arrive(inp, signal=False)  # raises the refusal

    @workflow.update(name=UPDATE_RESPOND)
    async def submit_response(self, inp: RespondInput) -> dict[str, Any]:
        """Answer a request; returns once accepted (delivered at the next boundary)."""
        self.parts.continuation.updates_since_task = True
        self._check_open(answer=True)
        self.parts.admission.charge_update(inp)
        return await self.parts.admission.accept_response(await self._started_engine(answer=True), inp)

    @submit_response.validator
    def _validate_submit_response(self, inp: RespondInput) -> None:
        # Rejected here, an update leaves no trace in history.
        self._check_not_busy()
        self._check_respond(inp)
        self.parts.admission.check_room(inp)

    def _check_respond(self, inp: RespondInput) -> None:
        self._check_open(answer=True)
        self.parts.admission.check_request(self.parts.engine, inp.request_id)

    @workflow.update(name=UPDATE_RESPOND_ALL)
    async def submit_responses(self, inp: RespondAllInput) -> dict[str, Any]:
        """Answer several requests together (all or none); returns once all are accepted, applied at one boundary."""
        self.parts.continuation.updates_since_task = True
        self._check_open(answer=True)
        self.parts.admission.charge_update(inp)
        accepted = await self.parts.admission.accept_responses(await self._started_engine(answer=True), inp)
        if inp.stream is not None and self.parts.steps is not None:
            self.parts.steps.streaming = inp.stream  # how the caller reads the supersteps these answers start
        if inp.invocation_kwargs is not None and self.parts.steps is not None:
            self.parts.steps.invocation_kwargs = inp.invocation_kwargs
        return accepted

    @submit_responses.validator
    def _validate_submit_responses(self, inp: RespondAllInput) -> None:
        self._check_not_busy()
        self._check_open(answer=True)
        if not inp.responses or len(inp.responses) > MAX_RESPONSES_PER_UPDATE:
            raise refuse(
                FAILURE_INPUT_TOO_LONG,
                f"submit_responses takes 1 to {MAX_RESPONSES_PER_UPDATE} responses, not {len(inp.responses)}",
            )
        self.parts.admission.check_requests(self.parts.engine, inp)
        self.parts.admission.check_room(inp)

    @workflow.update(name=UPDATE_SEND)
    async def send_message(self, inp: SendInput) -> dict[str, Any]:
        """Queue a message for an executor; returns once it is accepted."""
        self.parts.continuation.updates_since_task = True
        self.parts.admission.charge_update(inp)
        return await self._accept_message(inp)

    async def _accept_message(self, inp: SendInput, tag: str | None = None) -> dict[str, Any]:
        """Type-check a message (in an activity), then queue it, as the run is when it comes back."""
        value = await self.parts.admission.checked_message(inp)
        self._check_open()
        # Whether the run is busy is decided now, as the message is queued (it may have become so meanwhile).
        return self.parts.admission.queue_message(inp, value, self._arrive(inp, signal=False), tag=tag)

    @send_message.validator
    def _validate_send_message(self, inp: SendInput) -> None:
        self._check_not_busy()
        self._check_send(inp)
        self._check_policy(inp)
        self.parts.admission.check_room(inp)

    def _check_send(self, inp: SendInput) -> None:
        self._check_open()
        self.parts.admission.check_message(inp, self.parts.topology)

    @workflow.signal(name=SIGNAL_DELIVER)
    async def deliver(self, raw: RawValue) -> None:
        """Large input a client waits for: checked as its update would be, the outcome kept to confirm."""
        d, ok = self._signal_arg(SIGNAL_DELIVER, raw, Delivery)
        if d is None:
            if ok:  # (a malformed argument was warned about already)
                self.parts.board.warn(
                    "signal 'deliver' ignored: it needs a delivery (id, and send or respond), not null"
                )
            return
        error = too_long("delivery id", d.id, MAX_ID_CHARS)
        if error is not None or [d.send, d.respond].count(None) != 1:
            self.parts.board.warn(f"signal 'deliver' ignored: {error or 'it needs exactly one of send or respond'}")
            return
        deliveries = self.parts.admission.inbox.deliveries
        digest = delivery_digest(d.send if d.send is not None else d.respond)
        if deliveries.known(d.id):
            known = deliveries.digest_of(d.id)
            if known and known != digest:
                # The same id with other content: not delivered, and confirm_delivery answers for the first.
                self.parts.board.warn(
                    f"signal 'deliver' ignored: delivery id {quote(d.id)} was already used for other input; "
                    "give each delivery its own id"
                )
            return  # the same delivery again: its outcome stands
        if deliveries.forgotten(d.id):
            self.parts.board.warn(
                f"signal 'deliver' ignored: delivery {quote(d.id)} reached this run before "
                "(its outcome is too old to be kept); give each delivery its own id"
            )
            return
        deliveries.begin(d.id, digest)
        outcome: dict[str, Any] | ApplicationError
        try:
            # As the update would, less charging the task for its input: the server records a signal's.
            if d.send is not None:
                self._check_send(d.send)
                self._check_policy(d.send)
                outcome = await self._accept_message(d.send, tag=delivery_key(d.id))
            else:
                assert d.respond is not None
                self._check_respond(d.respond)
                outcome = await self.parts.admission.accept_response(await self._started_engine(answer=True), d.respond)
        except ApplicationError as e:
            outcome = e
        deliveries.settle(d.id, outcome)

    @workflow.update(name=UPDATE_CONFIRM)
    async def confirm_delivery(self, inp: ConfirmInput) -> dict[str, Any]:
        """What became of a ``deliver`` signal: its update's result, or the same refusal."""
        deliveries = self.parts.admission.inbox.deliveries
        await workflow.wait_condition(lambda: deliveries.outcome(inp.id) is not None)
        outcome = deliveries.outcome(inp.id)
        assert outcome is not None
        if outcome.result is None:
            raise refuse(outcome.error_type or FAILURE_UNDELIVERABLE, outcome.error or "refused", **outcome.details)
        return outcome.result

    @confirm_delivery.validator
    def _validate_confirm_delivery(self, inp: ConfirmInput) -> None:
        self._check_not_busy()
        deliveries = self.parts.admission.inbox.deliveries
        if deliveries.known(inp.id):
            return
        if deliveries.forgotten(inp.id):
            # Not "never arrived": sending it again would deliver it twice.
            raise refuse(
                FAILURE_DELIVERY_FORGOTTEN,
                f"delivery {quote(inp.id)} reached this run and was processed (accepted or refused), but its "
                f"outcome is too old to be kept (the run keeps the last {DELIVERED_CARRIED}); do not send it again",
                delivery_id=inp.id,
            )
        hint = (
            f" (this run no longer remembers {deliveries.forgotten_count} older deliveries: if this one is that "
            "old, it may have been processed)"
            if deliveries.lost_track
            else ""
        )
        raise refuse(
            FAILURE_UNKNOWN_DELIVERY,
            f"no delivery {quote(inp.id)} reached this run: send it by the 'deliver' signal first{hint}",
        )

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow has no handler for (a misspelled name): a warning, never silence."""
        self.parts.board.warn(f"unknown signal {quote(name)} ignored; signals: {', '.join(SIGNALS)}")

    @workflow.update(dynamic=True)
    async def unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise AssertionError("refused by the validator")  # pragma: no cover

    @unknown_update.validator
    def _validate_unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise refuse("UnknownUpdateError", f"no update named {quote(name)} on this run; updates: {', '.join(UPDATES)}")
