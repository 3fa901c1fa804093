"""The signal and update handlers of ``GraphWorkflow`` for outside input: responses, messages, deliveries.

Each checks what it can where it arrives (an update's validator refuses it,
leaving no trace; a signal's bad input becomes a warning) and hands the input
to the inbox (``inbox.py``), which the driver drains at the next boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
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
from temporal_workflows._engine.limits import json_size
from temporal_workflows._engine.machine import PendingRequest
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._failures import refuse
from temporal_workflows.temporal._protocol import (
    ACTIVITY_VALIDATE,
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
    UPDATE_RESET,
    UPDATE_RESPOND,
    UPDATE_RESPOND_ALL,
    UPDATE_SEND,
    VALIDATE_INLINE_BYTES,
    ConfirmInput,
    Delivery,
    RespondAllInput,
    RespondInput,
    SendInput,
    Validated,
    ValidateInput,
    quote,
    too_long,
)
from temporal_workflows.temporal._workflow.handler_base import HandlerBase
from temporal_workflows.temporal._workflow.inbox import (
    DELIVERED_CARRIED,
    delivery_digest,
    oversized_send,
)
from temporal_workflows.temporal._workflow.patches import PATCH_CONCURRENT_INPUT, PATCH_VALIDATE_IN_ACTIVITY

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
            self._inbox.respond_signal(inp)

    @workflow.signal(name=SIGNAL_SEND)
    def send_signal(self, raw: RawValue) -> None:
        """Queue a message for an executor; bad input becomes a warning."""
        inp, _ = self._signal_arg(SIGNAL_SEND, raw, SendInput)
        if inp is not None and not self._sub_workflow_ignores(SIGNAL_SEND):
            if inp.policy is not None and inp.policy not in CONCURRENT_INPUT:
                self._board.warn(f"signal 'send' ignored: {_bad_policy(inp.policy)}", executor_id=inp.executor_id)
                return
            self._inbox.send_signal(inp, lambda i: self._arrive(i, signal=True))

    # -- a message while the run is busy (concurrent_input) -----------------------------

    def _busy(self) -> bool:
        """Whether the run is in a turn (``_engine.inbound.ConcurrentInput``): work queued or running, or input
        waiting for the boundary that will give it work. Idle, or only waiting for answers, it is not."""
        engine = self._engine
        if engine is None:
            # The first task, before the engine: busy with the start message unless it starts idle.
            return self._input.message is not None or self._carried is not None or self._input.fork_from is not None
        steps = self._steps
        return engine.has_work() or bool(self._inbox) or bool(steps is not None and steps.in_flight)

    def _arrive(self, inp: SendInput, *, signal: bool) -> str:
        """What a message does as it is queued, by its policy (or the run's) and whether the run is busy.

        ``"take"``, ``"interrupt"`` or ``"rollback"`` (then the interruption waits for the next boundary, and the
        running superstep, if any, is abandoned), or ``"refuse"``: an update is refused with
        ``RunInProgressError``; a signal is a warning.
        """
        policy = check_policy(inp.policy or self._input.concurrent_input or DEFAULT_CONCURRENT_INPUT)
        action = arrival(policy, busy=self._busy())
        if action == "refuse":
            text = (
                "the run is busy with its current turn and the message's concurrent-input policy is 'reject'; "
                "send it again once the run is idle, or with policy 'enqueue', 'interrupt' or 'rollback'"
            )
            if signal:
                self._board.warn(f"signal 'send' ignored: {text}", executor_id=inp.executor_id)
                return action
            raise refuse(FAILURE_RUN_IN_PROGRESS, text, executor_id=inp.executor_id)
        if action != "take" and self.patches.get(PATCH_CONCURRENT_INPUT):
            controls = self._checkpoints.asked
            controls.interrupt = stronger(controls.interrupt, action)
            return action
        return "take"

    def _check_policy(self, inp: SendInput) -> None:
        """Refuse a send whose policy is unknown, or that a busy run refuses (its validator: no trace in history)."""
        if inp.policy is not None and inp.policy not in CONCURRENT_INPUT:
            raise refuse(FAILURE_INVALID_RUN_INPUT, _bad_policy(inp.policy))
        policy = inp.policy or self._input.concurrent_input or DEFAULT_CONCURRENT_INPUT
        if policy == "reject" and self._busy():
            self._arrive(inp, signal=False)  # raises the refusal

    @workflow.update(name=UPDATE_RESPOND)
    async def submit_response(self, inp: RespondInput) -> dict[str, Any]:
        """Answer a request; returns once accepted (delivered at the next boundary)."""
        self._continuation.updates_since_task = True
        self._check_open()
        self._inbox.charge_update(inp)
        return await self._inbox.accept_response(await self._started_engine(), inp)

    @submit_response.validator
    def _validate_submit_response(self, inp: RespondInput) -> None:
        # Rejected here, an update leaves no trace in history.
        self._check_not_busy()
        self._check_respond(inp)
        self._check_room_for(inp)

    def _check_respond(self, inp: RespondInput) -> None:
        self._check_open()
        self._inbox.check_request(self._engine, inp.request_id)

    @workflow.update(name=UPDATE_RESPOND_ALL)
    async def submit_responses(self, inp: RespondAllInput) -> dict[str, Any]:
        """Answer several requests together (all or none); returns once all are accepted, applied at one boundary."""
        self._continuation.updates_since_task = True
        self._check_open()
        self._inbox.charge_update(inp)
        accepted = await self._inbox.accept_responses(await self._started_engine(), inp)
        if inp.stream is not None and self._steps is not None:
            self._steps.streaming = inp.stream  # how the caller reads the supersteps these answers start
        if inp.invocation_kwargs is not None and self._steps is not None:
            self._steps.invocation_kwargs = inp.invocation_kwargs
        return accepted

    @submit_responses.validator
    def _validate_submit_responses(self, inp: RespondAllInput) -> None:
        self._check_not_busy()
        self._check_open()
        if not inp.responses or len(inp.responses) > MAX_RESPONSES_PER_UPDATE:
            raise refuse(
                FAILURE_INPUT_TOO_LONG,
                f"submit_responses takes 1 to {MAX_RESPONSES_PER_UPDATE} responses, not {len(inp.responses)}",
            )
        self._inbox.check_requests(self._engine, inp)
        self._check_room_for(inp)

    @workflow.update(name=UPDATE_SEND)
    async def send_message(self, inp: SendInput) -> dict[str, Any]:
        """Queue a message for an executor; returns once it is accepted."""
        self._continuation.updates_since_task = True
        self._inbox.charge_update(inp)
        return await self._inbox.accept_message(inp, self._check_open, lambda i: self._arrive(i, signal=False))

    @send_message.validator
    def _validate_send_message(self, inp: SendInput) -> None:
        self._check_not_busy()
        self._check_send(inp)
        self._check_policy(inp)
        self._check_room_for(inp)

    def _check_send(self, inp: SendInput) -> None:
        self._check_open()
        error = oversized_send(inp)
        if error is not None:
            raise refuse(FAILURE_INPUT_TOO_LONG, error)
        topology = self._topology
        if topology is not None and inp.executor_id not in topology.executor_ids:
            raise refuse(
                FAILURE_UNDELIVERABLE,
                f"no executor {quote(inp.executor_id)} in graph {workflow.info().workflow_type!r}; "
                f"executors: {sorted(topology.executor_ids)}",
            )

    @workflow.signal(name=SIGNAL_DELIVER)
    async def deliver(self, raw: RawValue) -> None:
        """Large input a client waits for: checked as its update would be, the outcome kept to confirm."""
        d, ok = self._signal_arg(SIGNAL_DELIVER, raw, Delivery)
        if d is None:
            if ok:  # (a malformed argument was warned about already)
                self._board.warn("signal 'deliver' ignored: it needs a delivery (id, and send or respond), not null")
            return
        error = too_long("delivery id", d.id, MAX_ID_CHARS)
        if error is not None or [d.send, d.respond].count(None) != 1:
            self._board.warn(f"signal 'deliver' ignored: {error or 'it needs exactly one of send or respond'}")
            return
        deliveries = self._inbox.deliveries
        digest = delivery_digest(d.send if d.send is not None else d.respond)
        if deliveries.known(d.id):
            known = deliveries.digest_of(d.id)
            if known and known != digest:
                # The same id with other content: not delivered, and confirm_delivery answers for the first.
                self._board.warn(
                    f"signal 'deliver' ignored: delivery id {quote(d.id)} was already used for other input; "
                    "give each delivery its own id"
                )
            return  # the same delivery again: its outcome stands
        if deliveries.forgotten(d.id):
            self._board.warn(
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
                outcome = await self._inbox.accept_message(
                    d.send, self._check_open, lambda i: self._arrive(i, signal=False)
                )
            else:
                assert d.respond is not None
                self._check_respond(d.respond)
                outcome = await self._inbox.accept_response(await self._started_engine(), d.respond)
        except ApplicationError as e:
            outcome = e
        deliveries.settle(d.id, outcome)

    @workflow.update(name=UPDATE_CONFIRM)
    async def confirm_delivery(self, inp: ConfirmInput) -> dict[str, Any]:
        """What became of a ``deliver`` signal: its update's result, or the same refusal."""
        deliveries = self._inbox.deliveries
        await workflow.wait_condition(lambda: deliveries.outcome(inp.id) is not None)
        outcome = deliveries.outcome(inp.id)
        assert outcome is not None
        if outcome.result is None:
            raise refuse(outcome.error_type or FAILURE_UNDELIVERABLE, outcome.error or "refused", **outcome.details)
        return outcome.result

    @confirm_delivery.validator
    def _validate_confirm_delivery(self, inp: ConfirmInput) -> None:
        self._check_not_busy()
        deliveries = self._inbox.deliveries
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
        self._board.warn(f"unknown signal {quote(name)} ignored; signals: {', '.join(SIGNALS)}")

    @workflow.update(dynamic=True)
    async def unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise AssertionError("refused by the validator")  # pragma: no cover

    @unknown_update.validator
    def _validate_unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise refuse("UnknownUpdateError", f"no update named {quote(name)} on this run; updates: {', '.join(UPDATES)}")

    async def _validate_update(self, executor_id: str, value: Envelope, request: PendingRequest | None) -> Validated:
        """Type-check input an update (or a ``deliver`` signal) brought, in a regular activity.

        A local activity here made concurrent input unreplayable (``locals.py``):
        its result can reach the run an activation late. A regular activity's
        result is a history event, delivered where it is recorded.
        """
        if not self.patches.get(PATCH_VALIDATE_IN_ACTIVITY):
            return await self._validate(executor_id, value, request)
        await self._quiet()
        name = workflow.info().workflow_type
        what = f"response to {request.request_id}" if request else f"message for {executor_id}"
        ref: str | None = None
        if json_size(value.data) > VALIDATE_INLINE_BYTES:
            # History holds it already (its update or signal): the activity reads it by query, not again.
            self._held_count += 1
            ref = f"input-{self._held_count}"
            self._held[ref] = value
            arg = ValidateInput(name, executor_id, Envelope(value.type, None), request, ref=ref)
        else:
            arg = ValidateInput(name, executor_id, value, request)
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
                del self._held[ref]
        await self._quiet()  # what the handler does next follows any local activity's result
        return result.resolved(value)
