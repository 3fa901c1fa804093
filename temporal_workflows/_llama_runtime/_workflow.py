"""LlamaIndex's own control loop, run as Temporal workflow code.

``LlamaIndexRun`` runs ``workflows.runtime.control_loop.control_loop`` (the
loop ``BasicRuntime`` runs) unchanged; only the adapter it is handed differs.
Each step invocation is an activity (the step stubs ``TemporalRuntime.register``
returns call :meth:`WorkflowRunAdapter.run_step`). The adapter removes the
loop's determinism hazards (docs/llama-runtime.md, "Determinism"):

* completion order: when several tasks are done in one activation, the one
  reduced first is chosen by the order this adapter started them (workers
  before the mailbox pull), never by ``set`` or hash order;
* cancel order: :meth:`WorkflowRunAdapter.close` (which the loop calls before
  it cancels its worker set) cancels the step activities in start order, so the
  loop's own set-ordered cancels issue no further commands;
* no timer churn: one durable timer per wakeup deadline, reused across
  iterations instead of a new ``asyncio.wait(timeout=)`` timer per iteration;
* workflow time for ``get_now`` and ticks; no ``uuid4`` (the run function that
  calls it, ``create_workflow_run_function``, is not used).

The workflow runs unsandboxed, like the graph workflow: the user's event
classes must be the ones the loop routes on (``isinstance``), and the loop is
pure apart from the adapter. User code (steps) runs only in activities; a
custom ``RetryPolicy.next`` runs here and must be pure (as under DBOS).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.common import RetryPolicy as TemporalRetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import CancelledError as TemporalCancelledError
from temporalio.workflow import ActivityCancellationType, ActivityHandle

with workflow.unsafe.imports_passed_through():
    from workflows.context.context_types import SerializedContext
    from workflows.context.serializers import BaseSerializer, JsonSerializer
    from workflows.context.state_store import apply_state_patch
    from workflows.errors import WorkflowCancelledByUser, WorkflowRuntimeError
    from workflows.events import (
        Event,
        HumanResponseEvent,
        IdleReleasedEvent,
        InputRequiredEvent,
        StartEvent,
        StopEvent,
    )
    from workflows.runtime.runtime_decorators import BaseInternalRunAdapterDecorator
    from workflows.runtime.types.internal_state import BrokerState
    from workflows.runtime.types.named_task import NamedTask, PendingStart, PendingWorker, PullTask
    from workflows.runtime.types.plugin import (
        InternalRunAdapter,
        RunContext,
        WaitForNextTaskResult,
        WaitResult,
        WaitResultTick,
        WaitResultTimeout,
        consume_current_run,
        run_context,
    )
    from workflows.runtime.types.results import (
        EmissionKey,
        RetryAttempt,
        SentEvent,
        StepWorkerOutput,
        StepWorkerState,
    )
    from workflows.runtime.types.ticks import (
        TickAddEvent,
        TickCancelRun,
        TickIdleRelease,
        WorkflowTick,
        WorkflowTickAdapter,
    )
    from workflows.workflow import Workflow as LlamaWorkflow

    from temporal_workflows._engine.limits import DEFAULT_MAX_PAYLOAD_BYTES, MAX_ANSWERS_PER_UPDATE
    from temporal_workflows._llama_runtime import _registry, _wire
    from temporal_workflows._llama_runtime._live_sends import LiveSends, apply_leniently
    from temporal_workflows._llama_runtime._llama_private import (
        ControlLoopRunner,
        create_internal_context,
        reduce_tick,
        step_configs,
        with_timeout,
    )
    from temporal_workflows._llama_runtime._options import StepOptions
    from temporal_workflows._llama_runtime._picture import topology_answer
    from temporal_workflows._llama_runtime._protocol import (
        BATCH_TOO_LARGE,
        EVENTS_TOPIC,
        MAX_JOURNAL_CHARS,
        MAX_RUN_AHEAD_BROKER_CHARS,
        MAX_RUN_AHEAD_RUNS,
        MAX_STEP_INPUT_CHARS,
        MAX_TICK_CHARS,
        PATCH_BUNDLE,
        PATCH_COLLECT_SPECULATION,
        PATCH_EXACT,
        PATCH_LIVE_SENDS,
        PATCH_LIVE_STREAM,
        PATCH_RUN_AHEAD,
        PATCH_SETTLE_STARTED,
        PATCH_STEP_BATCHES,
        PATCH_TYPED_STOP_RESULT,
        QUERY_CONTEXT,
        QUERY_PENDING_REQUESTS,
        QUERY_STATE,
        QUERY_STATUS,
        QUERY_TOPOLOGY,
        RESULT_ERROR_TYPE,
        SIGNAL_SEND_EVENT,
        SNAPSHOT_QUERY,
        STATE_QUERY,
        STEP_SEND_SIGNAL,
        STEP_STREAM_SIGNAL,
        STORE_PATCH_SIGNAL,
        TICK_SIGNAL,
        UPDATE_SEND_EVENT,
        UPDATE_SEND_EVENTS,
        WORKFLOW_TYPE,
        EventInput,
        EventsInput,
        RunInput,
        RunOutput,
        StepBatchInput,
        StepBatchOutput,
        StepInput,
        StepOutput,
        speculation_key,
    )
    from temporal_workflows._llama_runtime._run_view import RunBoard, store_json
    from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer
    from temporal_workflows._llama_runtime._server import run_view
    from temporal_workflows._llama_runtime._versioning import signature as workflow_signature

MAX_ITEM_ORDER_KEPT = 4096
"""Work items whose place in the reduce order a run keeps (the oldest go first)."""

MAX_SPECULATED_KEPT = 256
"""Run-ahead results a run keeps for reruns not yet asked for (the oldest go first)."""

__all__ = ["LlamaIndexRun", "WorkflowRunAdapter", "decode_tick", "error_details"]


def decode_tick(serializer: BaseSerializer, data: str) -> WorkflowTick:
    """A tick as the workflow serializer wrote it (``BasicRuntime.journal``'s record format)."""
    with serializer.validation_context():
        tick: WorkflowTick = WorkflowTickAdapter.validate_python(serializer.deserialize(data))
    return tick


def error_details(e: BaseException) -> dict[str, Any]:
    """A step's exception as the run reports it: its qualified class name, its message and, when it is plain
    JSON, its state, so the caller raises the same class with the same ``args`` and attributes."""
    cls = type(e)
    details: dict[str, Any] = {"exception_type": f"{cls.__module__}.{cls.__qualname__}", "exception_message": str(e)}
    state = _wire.exception_state(e)
    if state is not None:
        details["exception_state"] = state  # the caller rebuilds the exception with it (_temporal_runtime._rebuild)
    return details


EVENT_REFUSED = "LlamaEventRefused"
"""Error type of a ``submit_event`` update refused: an unknown event name, or a shape that does not validate."""

SIGNALS = (
    TICK_SIGNAL,
    SIGNAL_SEND_EVENT,
    STORE_PATCH_SIGNAL,
    STEP_SEND_SIGNAL,
    STEP_STREAM_SIGNAL,
)
"""The signals a LlamaIndex run takes (another name is warned about)."""


class SignatureMismatchError(RuntimeError):
    """This worker hosts another program's workflow of the run's name: the workflow task fails (and is retried)."""


def _quote(text: str, limit: int = 80) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(text)


def _validation_text(e: ValidationError) -> str:
    """pydantic's errors without the values sent (``input_value=...`` may be a secret)."""
    parts = []
    for err in e.errors(include_input=False, include_url=False):
        where = ".".join(str(x) for x in err.get("loc", ())) or "(the event)"
        parts.append(f"{where}: {err.get('msg', '')}")
    return "; ".join(parts)[:1000]


def _reason(e: BaseException) -> str:
    if isinstance(e, ValidationError):
        return _validation_text(e)
    for cause in (e.__cause__, e.__context__):
        if isinstance(cause, ValidationError):
            return _validation_text(cause)
    text = str(e)
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


class WorkflowRunAdapter(InternalRunAdapter):
    """The loop's view of Temporal: workflow time, the signal mailbox, the stream topic, step activities."""

    def __init__(
        self,
        run: LlamaIndexRun,
        llama_workflow: LlamaWorkflow,
        serializer: BaseSerializer,
        inp: RunInput,
        options: StepOptions,
    ) -> None:
        self._run = run
        self._workflow = llama_workflow
        self._serializer = serializer
        self._input = inp
        self._options = options
        self._seq = 0
        self._order: dict[asyncio.Task[Any], int] = {}
        self._handles: dict[int, ActivityHandle[StepOutput]] = {}
        self._timer: tuple[int, asyncio.Task[None]] | None = None
        self.batches = False
        """Run a step's invocations made ready in one activation in one activity (``PATCH_STEP_BATCHES``)."""
        self._ready: dict[str, list[tuple[StepInput, asyncio.Future[StepOutput]]]] = {}
        self._ready_order: dict[asyncio.Future[StepOutput], int] = {}
        """Each queued invocation's place in the reduce order, sent with a run-ahead batch."""
        self.speculation = False
        self.live_stream = False
        """Steps signal their stream writes as they make them (``PATCH_LIVE_STREAM``)."""
        self.live_sends = False
        """Steps signal their ``ctx.send_event`` calls while they run (``PATCH_LIVE_SENDS``)."""
        """Ask batches to run ahead the reruns of stale ``collect_events`` calls (``PATCH_COLLECT_SPECULATION``)."""
        self._speculated: dict[str, StepOutput] = {}
        """Run-ahead results by :func:`speculation_key`, oldest first; each answers one invocation."""
        self._item_order: dict[tuple[str, str], int] = {}
        """A work item's place in the reduce order: its first invocation's (``_priority``)."""
        self._published: dict[tuple[Any, ...], str] = {}
        """Records of plain events published so far (``write_to_event_stream``), by ``_wire.plain_key``."""
        self._memo: _wire.EncodeMemo = {}
        """Events encoded so far (a fan-in buffer's go into every invocation's input): each is encoded once."""
        self.run_ahead = False
        """Send the loop's broker state with a batch so the activity runs ahead what the loop starts next
        (``PATCH_RUN_AHEAD``)."""
        self.settle = False
        """Let the tasks just started take their first step before picking a done one (``PATCH_SETTLE_STARTED``)."""
        self.runner: ControlLoopRunner | None = None
        """The loop (its broker state is what a run-ahead batch carries)."""
        self._took: dict[str, list[Any]] = {}
        self._held: list[asyncio.Task[Any]] = []
        """Tasks the loop's other done tasks wait for (``_held_back``), in start order."""
        """Per step: invocations completed in this run, and the longest took (ms): ``_short``."""
        self.exact = False
        """Each step invocation the loop starts is one activity, and nothing runs that it did not start; outside
        input is decoded only as classes the workflow declares (``PATCH_EXACT``)."""
        self.releasing = False
        self.completion_order: list[str] = []
        """Keys of the tasks in the order the loop was handed them (workers and pulls), for tests and queries."""

    # -- identity, time ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return workflow.info().workflow_id

    async def get_now(self) -> float:
        return workflow.now().timestamp()

    # -- mailbox ----------------------------------------------------------------------------------
    async def send_event(self, tick: WorkflowTick) -> None:
        self._run.mailbox.append(tick)

    async def wait_receive(self, timeout_seconds: float | None = None) -> WaitResult:
        mailbox = self._run.mailbox
        while True:
            if not mailbox:
                try:
                    await workflow.wait_condition(lambda: bool(mailbox), timeout=timeout_seconds)
                except TimeoutError:
                    return WaitResultTimeout()
            item = mailbox.pop(0)
            if not isinstance(item, str):
                self._run.delivered(item)
                return WaitResultTick(tick=item)
            if self.exact:
                tick = self._run.decode_outside_tick(item)
                if tick is None:
                    continue
                self._run.delivered(tick)
                return WaitResultTick(tick=tick)
            try:
                return WaitResultTick(tick=decode_tick(self._serializer, item))
            except Exception as e:
                # Bad input from outside never harms the run: it is dropped with a warning.
                workflow.logger.warning("dropped a %s signal that is not a LlamaIndex tick: %s", TICK_SIGNAL, e)

    def is_replaying(self) -> bool:
        return workflow.unsafe.is_replaying()

    async def on_tick(self, tick: WorkflowTick) -> None:
        # The run's journal, returned with its result: ctx.to_dict() and running_steps() on the
        # handler rebuild the broker state from it, as they do from BasicRuntime's tick log.
        # (Kept as objects: serialized only if the result carries them, see LlamaIndexRun.run.)
        self._run._tick_objects.append(tick)

    # -- stream, store ----------------------------------------------------------------------------
    async def write_to_event_stream(self, event: Event) -> None:
        _registry.note_type(event)
        if self.exact and isinstance(event, InputRequiredEvent):
            self._run.board.published(event, self._run.open_waiters())
        # This runtime's own serializer records a plain event the same way every time: each distinct one
        # is serialized once (a custom serializer is always asked).
        key = _wire.plain_key(event) if getattr(self._serializer, "reads_exact_form", False) else None
        data = self._published.get(key) if key is not None else None
        if data is None:
            data = self._serializer.serialize(event)
            if key is not None:
                if len(self._published) >= _wire.MAX_MEMO:
                    self._published.clear()
                self._published[key] = data
        self._run.publish(data)

    # -- tasks: started in order, completed in order, one timer per deadline ----------------------
    async def wait_for_next_task(
        self,
        running: list[NamedTask],
        pending: list[PendingStart],
        timeout: float | None = None,
    ) -> WaitForNextTaskResult:
        started: list[NamedTask] = []
        for p in pending:
            task: asyncio.Task[Any] = asyncio.get_event_loop().create_task(p.coro)
            self._order[task] = self._priority(p)
            self._seq += 1
            started.append(p.start(task))
            if self.exact and self._held_back(p):
                self._held.append(task)
        named = sorted(
            running + started,
            key=lambda nt: (isinstance(nt, PullTask), self._order.get(nt.task, -1)),
        )
        if not named:
            return WaitForNextTaskResult(None, started)
        if started and self.settle:
            # As the default runtime's asyncio.wait does: the new tasks take their first step, so one answered
            # from run-ahead is done now and comes in the order with the rest (deterministic: the workflow's
            # event loop runs ready callbacks in the order they were scheduled; no timer).
            await asyncio.sleep(0)
        self._maybe_release(named, timeout)
        self._held = [t for t in self._held if any(nt.task is t for nt in named)]
        # A short invocation of a collecting step just started goes first: see _held_back.
        candidates = [nt for nt in named if nt.task in self._held] if self._held else named
        done = self._first_done(candidates)
        if done is None:
            if timeout is not None and timeout <= 0:
                return WaitForNextTaskResult(None, started)
            timer = self._timer_for(timeout)
            waiter: asyncio.Future[None] = asyncio.get_event_loop().create_future()

            def wake(_: object) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            watched: list[asyncio.Future[Any]] = [nt.task for nt in candidates]
            if timer is not None:
                watched.append(timer)
            for fut in watched:
                fut.add_done_callback(wake)
            try:
                await waiter
            finally:
                for fut in watched:
                    fut.remove_done_callback(wake)
            done = self._first_done(candidates)
        if done is None:
            self._timer = None  # it fired: the loop now pops the due ticks
            return WaitForNextTaskResult(None, started)
        if done.task in self._held:
            self._held.remove(done.task)
        self.completion_order.append(done.key)
        self._order.pop(done.task, None)
        return WaitForNextTaskResult(done.task, started)

    def _held_back(self, p: PendingStart) -> bool:
        """Whether the loop's other done tasks wait for this newly started invocation (``PATCH_EXACT`` runs).

        ``collect_events`` hands each invocation of the joining step a snapshot of its buffer, and LlamaIndex's
        reducer reruns every invocation whose snapshot went stale while another was running. Under the
        default runtime a short join runs as soon as it starts, before the loop takes the next result, so
        its invocations rarely overlap; here each is a round trip, and results arriving together would start
        the join's workers all on one snapshot, then rerun all but one (a 50-way fan-out ran its join ~190
        times for 50 events). So an invocation of a step that collects events (its buffer holds some) and is
        short in this run (a local activity, ``_short``) is reduced before the loop gets any other done
        task: the loop sees the buffer grown, as in process. Nothing runs that the loop did not start, and
        no more run at once than ``num_workers`` allows; the loop only takes the short join's result first.
        """
        if not isinstance(p, PendingWorker) or p.invocation_namespace or self.runner is None:
            return False
        if not self._short(str(p.step_id)):
            return False
        worker = self.runner.state.workers.get(p.step_id)
        return worker is not None and any(worker.collected_events.values())

    def _priority(self, p: PendingStart) -> int:
        """Where a task starting now comes in the order done tasks are reduced: the order it started in,
        except that a rerun (a ``collect_events`` call whose buffer went stale, same work item) keeps the
        place of the work item's first invocation (``PATCH_RUN_AHEAD``).

        Results that arrive together are reduced in this order. Without the exception, every queued
        event started since would be reduced before a rerun and win the buffer, so the earliest events
        of a fan-in would land last; with it, they land in the order they were first started, as under
        the default runtime when steps finish one at a time.
        """
        seq = self._seq
        if not self.run_ahead or self.runner is None or not isinstance(p, PendingWorker) or p.invocation_namespace:
            return seq
        worker = self.runner.state.workers.get(p.step_id)
        current = next((w for w in worker.in_progress if w.worker_id == p.worker_id), None) if worker else None
        if current is None or current.work_item_id is None:
            return seq
        priority = self._item_order.setdefault((str(p.step_id), current.work_item_id), seq)
        while len(self._item_order) > MAX_ITEM_ORDER_KEPT:
            del self._item_order[next(iter(self._item_order))]
        return priority

    def _maybe_release(self, named: list[NamedTask], timeout: float | None) -> None:
        """Ask the loop for LlamaIndex's idle release when the run is idle and its history long.

        Idle: no step running, nothing in the mailbox, no timer due (a run waiting for a human with
        ``timeout=None``). The loop then returns ``IdleReleasedEvent`` and the run continues as new
        with its broker state, store, stream and undelivered ticks.
        """
        if self.releasing or timeout is not None or self._run.mailbox:
            return
        if any(not isinstance(nt, PullTask) for nt in named):
            return
        threshold = self._input.idle_release_after_ticks
        long_history = workflow.info().is_continue_as_new_suggested()
        if long_history or (threshold is not None and len(self._run._tick_objects) >= threshold):
            self.releasing = True
            self._run.mailbox.insert(0, TickIdleRelease())

    @staticmethod
    def _first_done(named: list[NamedTask]) -> NamedTask | None:
        for nt in named:
            if nt.task.done():
                return nt
        return None

    def _timer_for(self, timeout: float | None) -> asyncio.Task[None] | None:
        if timeout is None:
            return None
        now = workflow.now().timestamp()
        deadline_ms = math.ceil((now + timeout) * 1000)
        if self._timer is not None:
            current_deadline, current = self._timer
            if current_deadline == deadline_ms and not current.done():
                return current
            if not current.done():
                current.cancel()
        seconds = max(0.001, deadline_ms / 1000 - now)
        timer = asyncio.get_event_loop().create_task(workflow.sleep(timedelta(seconds=seconds), summary="llama wakeup"))
        self._timer = (deadline_ms, timer)
        return timer

    async def close(self) -> None:
        # The loop cancels its workers from a set right after this; cancelling the activities here,
        # in the order they started, makes the cancel commands' order deterministic (the later
        # cancels of the same handles issue nothing).
        for seq in sorted(self._handles):
            self._handles[seq].cancel()
        if self._timer is not None and not self._timer[1].done():
            self._timer[1].cancel()
        self._timer = None

    # -- steps ------------------------------------------------------------------------------------
    async def run_step(
        self,
        state: StepWorkerState,
        step_name: str,
        event: Event,
        bound_events: dict[str, Event] | None,
        retry: RetryAttempt,
    ) -> list[StepWorkerOutput]:
        s = self._serializer
        inp = StepInput(
            workflow_name=self._input.workflow_name,
            signature=self._input.signature if self.exact else None,
            instance_key=self._input.instance_key,
            run_id=self.run_id,
            step_name=step_name,
            event=_wire.encode_event(s, event, self._memo),
            state=_wire.encode_state(s, state, self._memo),
            bound_events=None
            if bound_events is None
            else {k: _wire.encode_event(s, v) for k, v in bound_events.items()},
            retry=_wire.encode_retry(retry, exact=self.exact),
            store=self._run.store,
            live_stream=self.live_stream and state.invocation_id is not None,
            live_sends=self.live_sends and self.live_stream and state.invocation_id is not None,
            instrument_tags=self._input.instrument_tags or None,
        )
        size = len(inp.model_dump_json())
        if size > MAX_STEP_INPUT_CHARS:
            # Scheduled anyway, the activity would fail the workflow task for ever (Temporal refuses
            # payloads over ~2 MB): the step fails instead, as a step error the run reports.
            raise WorkflowRuntimeError(
                f"step {step_name!r}: its input (event, fan-in buffers and ctx.store) is {size:,} bytes, over "
                f"the {MAX_STEP_INPUT_CHARS:,} a Temporal payload allows here; keep large values out of the store"
            )
        ahead = (
            self._speculated.pop(speculation_key(inp, self.run_ahead), None)
            if self._speculated and not self.exact
            else None
        )
        live = state.invocation_id if inp.live_stream else None
        sending: LiveSends | None = None
        if ahead is not None:
            # A batch already ran this very input (a rerun of a collect_events call whose buffer was stale,
            # the one the loop now asks for): its result, with no activity of its own.
            out = ahead
        else:
            if live is not None:
                self._run.live[live] = 0  # the step's stream writes published so far (signalled live)
                if inp.live_sends:
                    self._run.sending[live] = LiveSends(base=inp.store)
            try:
                task = asyncio.current_task()
                order = self._order.get(task, 0) if task is not None else 0
                out = await (self._batched(inp, order) if self.batches and not self.exact else self._single(inp))
            finally:
                published = self._run.live.pop(live, 0) if live is not None else 0
                sending = self._run.sending.pop(live, None) if live is not None else None
        # What the step did, applied in the order steps completed (deterministic): its store writes,
        # its stream writes not yet published live (before its result is reduced, so before a StopEvent),
        # sends after return.
        if ahead is not None:
            published = 0
        if sending is not None and sending.seen is not None and self._run.store is not None:
            # Live flushes brought part of its writes already: only what they did not.
            self._run.store = apply_leniently(self._run.store, sending.take(out.store_patch))
        elif out.store_patch and self._run.store is not None:
            self._run.store = apply_state_patch(self._run.store, out.store_patch)
        for written in out.stream[published:]:
            self._run.publish(written)
        outputs = _wire.decode_outputs(s, out.outputs)
        # The step's ctx.send_event calls, delivered as the default runtime delivers them live: a
        # TickAddEvent keyed by its emission, which the reducer claims exactly once.
        for item in outputs:
            if isinstance(item, SentEvent) and state.invocation_id is not None:
                if sending is not None and item.index in sending.indices:
                    continue  # delivered live while the step ran
                self._run.mailbox.append(
                    TickAddEvent(
                        event=item.event,
                        step_id=item.step_id,
                        recovery_counts=dict(item.recovery_counts),
                        emission=EmissionKey(invocation_id=state.invocation_id, index=item.index),
                    )
                )
        for tick in out.late_sends:
            self._run.mailbox.append(tick)
        return outputs

    def _start(self, step_name: str, arg: StepInput | StepBatchInput, summary: str) -> ActivityHandle[Any]:
        o = self._options
        handle: ActivityHandle[Any] = workflow.start_activity(
            f"{self._input.workflow_name}.{step_name}",
            arg,
            result_type=StepOutput if isinstance(arg, StepInput) else StepBatchOutput,
            task_queue=o.task_queue,
            start_to_close_timeout=o.start_to_close_timeout,
            heartbeat_timeout=o.heartbeat_timeout,
            retry_policy=TemporalRetryPolicy(
                initial_interval=timedelta(seconds=1),
                maximum_attempts=o.maximum_attempts,
            ),
            cancellation_type=ActivityCancellationType.TRY_CANCEL,
            summary=summary,
        )
        return handle

    async def _awaited(self, handle: ActivityHandle[Any]) -> Any:
        seq = self._seq
        self._seq += 1
        self._handles[seq] = handle
        try:
            return await handle
        except ActivityError as e:
            if isinstance(e.cause, CancelledError):
                # Cancelled by close() (the run is ending): a cancelled step, as under the default runtime,
                # not a step failure for the retry policy to see.
                raise asyncio.CancelledError() from e
            raise
        finally:
            self._handles.pop(seq, None)

    async def _single(self, inp: StepInput) -> StepOutput:
        if self.exact and self._short(inp.step_name):
            # A step seen to be short in this run: a local activity on this worker (its input stays out of
            # history, no round trip through the server). Its sends and stream writes go with its result.
            local = inp.model_copy(update={"live_stream": False, "live_sends": False})
            out: StepOutput = await self._awaited(self._start_local(inp.step_name, local))
        else:
            out = await self._awaited(self._start(inp.step_name, inp, inp.step_name))
        if self.exact:
            took = self._took.setdefault(inp.step_name, [0, 0.0])
            took[0] += 1
            took[1] = max(took[1], out.took_ms if out.took_ms is not None else math.inf)
        return out

    def _short(self, step_name: str) -> bool:
        """Whether ``step_name``'s invocations so far in this run all took less than ``StepOptions.local_below``
        (by what the run's history recorded: a replay decides the same)."""
        below = self._options.local_below
        took = self._took.get(step_name)
        return below is not None and took is not None and took[0] > 0 and took[1] < below.total_seconds() * 1000

    def _start_local(self, step_name: str, arg: StepInput) -> ActivityHandle[Any]:
        o = self._options
        handle: ActivityHandle[Any] = workflow.start_local_activity(
            f"{self._input.workflow_name}.{step_name}",
            arg,
            result_type=StepOutput,
            start_to_close_timeout=o.start_to_close_timeout,
            retry_policy=TemporalRetryPolicy(
                initial_interval=timedelta(seconds=1), maximum_attempts=o.maximum_attempts
            ),
            cancellation_type=ActivityCancellationType.TRY_CANCEL,
            summary=step_name,
        )
        return handle

    async def _batched(self, inp: StepInput, order: int = 0) -> StepOutput:
        """Queue the invocation; the invocations of one step queued in this activation go as one activity.

        The batch is sent once nothing else in the workflow can run (Temporal checks wait conditions
        only when its deterministic event loop has nothing ready): by then the loop has reduced every
        tick it already had and queued every invocation they made ready, and a replay forms the same
        batches. Results come back in the batch's order and are applied in that order.
        """
        fut: asyncio.Future[StepOutput] = asyncio.get_event_loop().create_future()
        if not self._ready:
            asyncio.get_event_loop().create_task(self._flush_when_idle())
        self._ready.setdefault(inp.step_name, []).append((inp, fut))
        self._ready_order[fut] = order
        return await fut

    async def _flush_when_idle(self) -> None:
        await workflow.wait_condition(lambda: True)
        ready, self._ready = self._ready, {}
        for step_name, queued in ready.items():
            items = [(inp, fut) for inp, fut in queued if not fut.done()]  # a cancelled step is not started
            for _, fut in queued:
                if fut.done():
                    self._ready_order.pop(fut, None)
            if items:
                asyncio.get_event_loop().create_task(self._run_batch(step_name, items))

    async def _run_batch(self, step_name: str, items: list[tuple[StepInput, asyncio.Future[StepOutput]]]) -> None:
        try:
            broker = self._broker_for(step_name, len(items))
            order = [self._ready_order.pop(fut, 0) for _, fut in items]
            arg = (
                self._batch_input(items, self.speculation and not self.run_ahead, broker)
                if len(items) > 1 or broker is not None
                else None
            )
            if arg is not None and arg.broker is not None:
                arg = arg.model_copy(update={"order": order, "settled": self.settle, "across_steps": True})
            if arg is None:
                # One invocation, or a batch over the payload limit: each alone (each was checked).
                results: list[StepOutput | None] = list(await asyncio.gather(*(self._single(inp) for inp, _ in items)))
            else:
                try:
                    out: StepBatchOutput = await self._awaited(
                        self._start(step_name, arg, f"{step_name} x{len(items)}")
                    )
                    results = out.results
                    for ahead in out.speculated:
                        output = ahead.output
                        if output is None and ahead.same_as is not None and 0 <= ahead.same_as < len(out.speculated):
                            output = out.speculated[ahead.same_as].output
                        if output is not None:
                            self._speculated[ahead.key] = output
                    kept = MAX_RUN_AHEAD_RUNS * 2 if self.run_ahead else MAX_SPECULATED_KEPT
                    while len(self._speculated) > kept:
                        del self._speculated[next(iter(self._speculated))]
                except ActivityError as e:
                    if not (isinstance(e.cause, ApplicationError) and e.cause.type == BATCH_TOO_LARGE):
                        raise
                    # The results together are over the payload limit: each alone (at least once, as ever).
                    results = list(await asyncio.gather(*(self._single(inp) for inp, _ in items)))
        except BaseException as e:
            for _, fut in items:
                if not fut.done():
                    fut.set_exception(e)
            return
        for (inp, fut), result in zip(items, results, strict=True):
            if result is None:
                # Still running when the batch returned (a slow sibling of a fast one): run alone.
                asyncio.get_event_loop().create_task(self._alone(inp, fut))
            elif not fut.done():
                fut.set_result(result)

    async def _alone(self, inp: StepInput, fut: asyncio.Future[StepOutput]) -> None:
        if fut.done():
            return
        try:
            out = await self._single(inp)
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
            return
        if not fut.done():
            fut.set_result(out)

    def _broker_for(self, step_name: str, count: int) -> dict[str, Any] | None:
        """The loop's broker state for a run-ahead batch of ``step_name`` (``PATCH_RUN_AHEAD``), or ``None``.

        Sent when the step has events queued behind its workers or the batch has several invocations
        (collect reruns), and only while it is small; the root broker only (a nested one is not run ahead).
        """
        if not self.run_ahead or self.runner is None:
            return None
        state = self.runner.state
        worker = next((w for k, w in state.workers.items() if str(k) == step_name), None)
        if worker is None or (count < 2 and not worker.queue):
            return None
        try:
            broker: dict[str, Any] = state.to_serialized(self._serializer).model_dump(mode="json")
        except Exception:
            return None  # e.g. child brokers, which to_serialized refuses: no run-ahead
        return broker if len(json.dumps(broker)) <= MAX_RUN_AHEAD_BROKER_CHARS else None

    @staticmethod
    def _batch_input(
        items: list[tuple[StepInput, asyncio.Future[StepOutput]]],
        speculate: bool = False,
        broker: dict[str, Any] | None = None,
    ) -> StepBatchInput | None:
        """The batch's activity input, each store and fan-in buffer once; ``None`` if over the limit.

        With ``speculate`` (``PATCH_COLLECT_SPECULATION``) a buffer goes once even when the invocations
        hold different lengths of it (a join's invocations start one event apart): each refers to a
        prefix of one shared list (``state["collected_events_prefixes"]``).
        """
        base = items[0][0].store
        buffers: list[dict[str, Any]] = []
        lists: list[list[str]] = []
        known: dict[str, int] = {}
        batch: list[StepInput] = []
        for inp, _ in items:
            update: dict[str, Any] = {}
            if inp.store is base or inp.store == base:
                update["store"] = None  # the batch's store (each invocation's store as it was queued)
            collected = inp.state.get("collected_events") or {}
            if collected and speculate:
                state = {k: v for k, v in inp.state.items() if k != "collected_events"}
                state["collected_events_prefixes"] = {k: _share_prefix(lists, v) for k, v in collected.items()}
                update["state"] = state
            elif collected:
                key = json.dumps(collected, sort_keys=True)
                if key not in known:
                    known[key] = len(buffers)
                    buffers.append(collected)
                state = {k: v for k, v in inp.state.items() if k != "collected_events"}
                state["collected_events_ref"] = known[key]
                update["state"] = state
            batch.append(inp.model_copy(update=update))
        # Run-ahead costs the activity nothing unless the batch's results are collect_events calls.
        arg = StepBatchInput(batch=batch, store=base, buffers=buffers, lists=lists, speculate=speculate, broker=broker)
        if broker is not None and len(arg.model_dump_json()) > MAX_STEP_INPUT_CHARS:
            arg = arg.model_copy(update={"broker": None})  # no run-ahead rather than no batch
        return arg if len(arg.model_dump_json()) <= MAX_STEP_INPUT_CHARS else None


def _share_prefix(lists: list[list[str]], events: list[str]) -> list[int]:
    """``[index, length]`` of ``events`` as a prefix of one of ``lists``, extending or adding one as needed."""
    for i, known in enumerate(lists):
        n = min(len(known), len(events))
        if known[:n] == events[:n]:
            if len(events) > len(known):
                lists[i] = list(events)
            return [i, len(events)]
    lists.append(list(events))
    return [len(lists) - 1, len(events)]


class _QuietOnReplay(BaseInternalRunAdapterDecorator):
    """The runtime's decorators (``verbose=True``'s printer, say) see ticks and stream writes once.

    While Temporal replays a run's history (a worker restarted, a cache eviction) they are bypassed:
    their side effects already happened when the history was made.
    """

    def __init__(self, decorated: InternalRunAdapter, raw: WorkflowRunAdapter) -> None:
        super().__init__(decorated)
        self._raw = raw

    async def on_tick(self, tick: WorkflowTick) -> None:
        await (self._raw if workflow.unsafe.is_replaying() else self._decorated).on_tick(tick)

    async def write_to_event_stream(self, event: Event) -> None:
        await (self._raw if workflow.unsafe.is_replaying() else self._decorated).write_to_event_stream(event)


@workflow.defn(name=WORKFLOW_TYPE, sandboxed=False)
class LlamaIndexRun:
    """One LlamaIndex run (``handler.run_id`` is the workflow id)."""

    @workflow.init
    def __init__(self, inp: RunInput) -> None:
        self.mailbox: list[WorkflowTick | str] = list(inp.mailbox)
        self.store: dict[str, Any] | None = inp.store
        self._tick_objects: list[WorkflowTick] = []
        self._stream = WorkflowStream(prior_state=inp.stream)
        self._events = self._stream.topic(EVENTS_TOPIC, type=str)
        self._adapter: WorkflowRunAdapter | None = None
        self.live: dict[str, int] = {}
        """Running step invocations that signal their stream writes: how many were published so far."""
        self.sending: dict[str, LiveSends] = {}
        """Running step invocations that signal their sends (``PATCH_LIVE_SENDS``)."""
        self._input = inp
        self._hosted: tuple[LlamaWorkflow, BaseSerializer] | None = None
        self.board = RunBoard(inp.warnings, inp.requests)
        self.cancel_requested = False
        self._closed = False

    def publish(self, data: str) -> None:
        self._events.publish(data)

    # -- what the run hosts, and outside input read against it -------------------------------------
    def hosted(self) -> tuple[LlamaWorkflow, BaseSerializer]:
        """The run's workflow as this worker hosts it (its loop's view), and its serializer."""
        if self._hosted is None:
            served = _registry.lookup(self._input.workflow_name, self._input.instance_key)
            view = run_view(served)
            self._hosted = (view, view.runtime.get_serializer(view))
        return self._hosted

    def open_waiters(self) -> list[tuple[str, Any]]:
        """``(step, StepWorkerWaiter)`` of the run's ``wait_for_event`` calls now (the root broker's)."""
        runner = self._adapter.runner if self._adapter is not None else None
        if runner is None:
            return []
        return [(str(k), w) for k, worker in runner.state.workers.items() for w in worker.collected_waiters]

    def accepted_events(self) -> list[type[Event]]:
        """Event classes the run takes from outside: those its steps accept, and those its waiters await."""
        llama_workflow, _ = self.hosted()
        found: dict[str, type[Event]] = {}
        for cfg in step_configs(llama_workflow).values():
            for t in cfg.accepted_events:
                if isinstance(t, type) and issubclass(t, Event) and not issubclass(t, StopEvent):
                    found.setdefault(f"{t.__module__}.{t.__qualname__}", t)
        for _, w in self.open_waiters():
            t = w.waiting_for_event
            if isinstance(t, type) and issubclass(t, Event):
                found.setdefault(f"{t.__module__}.{t.__qualname__}", t)
        return list(found.values())

    def response_types(self) -> list[type[Event]]:
        """The ``HumanResponseEvent`` classes the run's steps accept (what answers an ``InputRequiredEvent``)."""
        llama_workflow, _ = self.hosted()
        found: list[type[Event]] = []
        for cfg in step_configs(llama_workflow).values():
            for t in cfg.accepted_events:
                if isinstance(t, type) and issubclass(t, HumanResponseEvent) and t not in found:
                    found.append(t)
        return found or [HumanResponseEvent]

    def _closed_serializer(self) -> BaseSerializer:
        llama_workflow, serializer = self.hosted()
        if isinstance(serializer, DeclaredTypesSerializer):
            return serializer.closed([*self.accepted_events(), *llama_workflow.events])
        return serializer  # the workflow's own serializer (an allow-list, pickle): what it accepts, it decides

    def decode_outside_tick(self, data: str) -> WorkflowTick | None:
        """A tick from outside (the ``llama_tick`` signal, a step's live sends), read only as classes the workflow
        declares or awaits: ``None``, with a warning, for anything else (nothing is imported)."""
        try:
            return decode_tick(self._closed_serializer(), data)
        except Exception as e:
            self.board.warn(f"dropped a {TICK_SIGNAL} signal that is not a tick of this run: {_reason(e)}")
            return None

    def delivered(self, tick: WorkflowTick) -> None:
        """A tick reaches the loop: an outside event answers the oldest request it is a response to."""
        if isinstance(tick, TickAddEvent) and self._adapter is not None and self._adapter.exact:
            self.board.delivered(tick.event, self.response_types())

    def read_event(self, inp: EventInput) -> Event:
        """The ``submit_event`` update's (or ``send_event`` signal's) event, as one of the accepted classes.

        Raises ``ApplicationError`` (type ``LlamaEventRefused``) naming the accepted events when the name or the
        shape is not one of them; pydantic's errors are given without the values sent.
        """
        accepted = self.accepted_events()
        names = sorted(f"{t.__module__}.{t.__qualname__}" for t in accepted)
        listing = ", ".join(names) or "none"
        if inp.event_type is not None:
            wanted = inp.event_type.replace(":", ".")
            matches = [
                t
                for t in accepted
                if wanted in (f"{t.__module__}.{t.__qualname__}", f"{t.__module__}.{t.__name__}")
                or (wanted == t.__name__ or wanted == t.__qualname__)
            ]
            if not matches:
                raise ApplicationError(
                    f"event type {_quote(inp.event_type)} is not one this run accepts; accepted: {listing}",
                    type=EVENT_REFUSED,
                    non_retryable=True,
                )
            if len(matches) > 1:
                raise ApplicationError(
                    f"event type {_quote(inp.event_type)} names several accepted classes; use one of: "
                    + ", ".join(f"{t.__module__}.{t.__qualname__}" for t in matches),
                    type=EVENT_REFUSED,
                    non_retryable=True,
                )
            candidates = matches
        else:
            candidates = accepted
        if not isinstance(inp.event, dict):
            raise ApplicationError(
                f"an event is a JSON object of its fields; accepted: {listing}", type=EVENT_REFUSED, non_retryable=True
            )
        _, serializer = self.hosted()
        problems: list[str] = []
        for cls in candidates:
            try:
                with serializer.validation_context():
                    return cls.model_validate(inp.event)
            except ValidationError as e:
                problems.append(f"{cls.__module__}.{cls.__qualname__}: {_validation_text(e)}")
            except Exception as e:
                problems.append(f"{cls.__module__}.{cls.__qualname__}: {type(e).__name__}")
        raise ApplicationError(
            "the event does not validate as "
            + ("an accepted event" if inp.event_type is None else _quote(inp.event_type))
            + f" ({'; '.join(problems)[:1000]}); accepted: {listing}",
            type=EVENT_REFUSED,
            non_retryable=True,
        )

    def _outside_event(self, event: Event, step: str | None) -> None:
        self.mailbox.append(TickAddEvent(event=event, step_id=step))

    @workflow.update(name=UPDATE_SEND_EVENT)
    async def submit_event(self, inp: EventInput) -> dict[str, Any]:
        """An event from outside, by class name and JSON (the tools' ``send-event``/``respond``): applied by the
        run's loop as ``handler.ctx.send_event`` is. Returns the class it was read as."""
        event = self.read_event(inp)
        self._outside_event(event, inp.step)
        return {"accepted": f"{type(event).__module__}.{type(event).__qualname__}"}

    @submit_event.validator
    def _validate_submit_event(self, inp: EventInput) -> None:
        if self._closed:
            raise ApplicationError("the run has ended: it takes no more events", type="RunClosedError")
        self.read_event(inp)

    @workflow.update(name=UPDATE_SEND_EVENTS)
    async def submit_events(self, inp: EventsInput) -> dict[str, Any]:
        """Several events from outside (the tools' answers to several requests at once): every one is read
        before any is taken (the validator), then all go to the loop together, in order."""
        events = [self.read_event(one) for one in inp.events]
        for event, one in zip(events, inp.events, strict=True):
            self._outside_event(event, one.step)
        return {"accepted": [f"{type(e).__module__}.{type(e).__qualname__}" for e in events]}

    @submit_events.validator
    def _validate_submit_events(self, inp: EventsInput) -> None:
        if self._closed:
            raise ApplicationError("the run has ended: it takes no more events", type="RunClosedError")
        if not inp.events or len(inp.events) > MAX_ANSWERS_PER_UPDATE:
            raise ApplicationError(
                f"{UPDATE_SEND_EVENTS} takes 1 to {MAX_ANSWERS_PER_UPDATE} events, not {len(inp.events)}",
                type=EVENT_REFUSED,
                non_retryable=True,
            )
        for n, one in enumerate(inp.events):
            try:
                self.read_event(one)
            except ApplicationError as e:
                if len(inp.events) == 1:
                    raise
                raise ApplicationError(
                    f"event {n + 1} of {len(inp.events)}: {e.message} (none of them was taken)",
                    type=e.type,
                    non_retryable=True,
                ) from None

    @workflow.signal(name=SIGNAL_SEND_EVENT)
    def send_event(self, data: Any) -> None:
        """The ``submit_event`` update's input as a signal (the ``temporal`` CLI's way): a bad one is dropped with a
        warning in the worker's log (no values) and in the ``status`` query's ``warnings``."""
        try:
            inp = EventInput.model_validate(data)
            event = self.read_event(inp)
        except ApplicationError as e:
            self.board.warn(f"dropped a {SIGNAL_SEND_EVENT} signal: {e.message}")
            return
        except ValidationError as e:
            self.board.warn(f"dropped a {SIGNAL_SEND_EVENT} signal: {_validation_text(e)}")
            return
        self._outside_event(event, inp.step)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this run has no handler for (a misspelled name): a warning, never silence."""
        self.board.warn(f"unknown signal {_quote(name)} ignored; signals: {', '.join(SIGNALS)}")

    @workflow.update(dynamic=True)
    async def unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise AssertionError("refused by the validator")  # pragma: no cover

    @unknown_update.validator
    def _validate_unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        raise ApplicationError(
            f"no update named {_quote(name)} on this run; updates: {UPDATE_SEND_EVENT}, {UPDATE_SEND_EVENTS}",
            type="UnknownUpdateError",
            non_retryable=True,
        )

    # -- what the tools read ------------------------------------------------------------------------
    @workflow.query(name=QUERY_STATUS)
    def status(self) -> dict[str, Any]:
        """Where the run is (the package README lists the fields)."""
        adapter = self._adapter
        runner = adapter.runner if adapter is not None else None
        in_flight: list[str] = []
        if runner is not None:
            for key, worker in runner.state.workers.items():
                in_flight.extend(str(key) for _ in worker.in_progress)
        pending = self.pending_requests() if adapter is not None and adapter.exact else []
        status = self.board.status
        if status == "running" and pending and not in_flight:
            status = "waiting_for_input"
        return {
            "kind": "llama_index",
            "status": status,
            "workflow": self._input.workflow_name,
            "in_flight": in_flight,
            "pending_requests": len(pending),
            "warnings": list(self.board.warnings),
            "error": self.board.error,
            "error_type": self.board.error_type,
            "signature": self._input.signature,
            "continued_as_new": self._input.segment,
        }

    @workflow.query(name=QUERY_PENDING_REQUESTS)
    def pending_requests(self) -> list[dict[str, Any]]:
        """Each ``InputRequiredEvent`` out and not yet answered (and each ``wait_for_event`` waiting), oldest first,
        with the ``HumanResponseEvent`` type that answers it and that type's JSON schema."""
        if self._adapter is None or not self._adapter.exact or self._closed:
            return []
        return self.board.pending(self.open_waiters(), self.response_types(), DEFAULT_MAX_PAYLOAD_BYTES)

    @workflow.query(name=QUERY_STATE)
    def state_json(self) -> dict[str, Any]:
        """``ctx.store`` as plain JSON (``{key: value}``; cut, with a note, where it would not fit one payload)."""
        return store_json(self.store, DEFAULT_MAX_PAYLOAD_BYTES)

    @workflow.query(name=QUERY_TOPOLOGY)
    def topology(self) -> dict[str, Any]:
        """The run's picture: LlamaIndex's own representation of the workflow this worker hosts for it (its
        signature checked at the start), as graph runs answer theirs (``_picture.py``)."""
        return topology_answer(self.hosted()[0])

    @workflow.query(name=QUERY_CONTEXT)
    def context(self) -> dict[str, Any] | None:
        """What ``handler.ctx.to_dict()`` returns now: ``Context.from_dict(workflow, it)`` resumes the run there,
        or starts a new run from it (a fork). ``None`` before the loop starts, or for state ``to_dict`` refuses."""
        adapter = self._adapter
        runner = adapter.runner if adapter is not None else None
        if adapter is None or runner is None:
            return None
        try:
            data: dict[str, Any] = runner.state.to_serialized(adapter._serializer).model_dump(mode="json")
        except Exception:
            return None
        data["state"] = self.store or {}
        return data

    @workflow.signal(name=STEP_STREAM_SIGNAL)
    def step_stream(self, data: Any) -> None:
        """A running step's ``write_event_to_stream``, published at once (``PATCH_LIVE_STREAM``).

        Each index of an invocation is published once, in order: a retried attempt's repeats, and writes
        of an invocation that has completed (its result published the rest), are dropped quietly. Anything
        that is not such a write is dropped with a warning, and the run goes on.
        """
        if not (
            isinstance(data, dict)
            and isinstance(data.get("invocation"), str)
            and isinstance(data.get("index"), int)
            and isinstance(data.get("event"), str)
            and len(data["event"]) <= MAX_TICK_CHARS
        ):
            self.board.warn(f"dropped a {STEP_STREAM_SIGNAL} signal that is not a step's stream write")
            return
        invocation, index = data["invocation"], data["index"]
        if self.live.get(invocation) == index:
            self.publish(data["event"])
            self.live[invocation] = index + 1

    @workflow.signal(name=STEP_SEND_SIGNAL)
    def step_send(self, data: Any) -> None:
        """A running step's ``ctx.send_event`` calls, with its store writes so far (``PATCH_LIVE_SENDS``).

        The writes land first (moving the run's store from the step's last view to this one), then each
        send not delivered yet is queued, as the default runtime queues it when the step yields. A flush
        for an invocation that has completed (its result brought everything) is dropped quietly; anything
        that is not a flush is dropped with a warning, and the run goes on.
        """
        sends = data.get("sends") if isinstance(data, dict) else None
        if not (
            isinstance(data, dict)
            and isinstance(data.get("invocation"), str)
            and isinstance(data.get("store_patch"), list)
            and isinstance(sends, list)
            and all(
                isinstance(x, dict)
                and isinstance(x.get("index"), int)
                and isinstance(x.get("tick"), str)
                and len(x["tick"]) <= MAX_TICK_CHARS
                for x in sends
            )
        ):
            self.board.warn(f"dropped a {STEP_SEND_SIGNAL} signal that is not a step's sends")
            return
        sending = self.sending.get(data["invocation"])
        if sending is None:
            return
        if self.store is not None:
            try:
                self.store = apply_leniently(self.store, sending.take(data["store_patch"]))
            except Exception as e:
                self.board.warn(f"dropped the store writes of a {STEP_SEND_SIGNAL} signal: {_reason(e)}")
        for send in sends:
            if send["index"] not in sending.indices:
                sending.indices.add(send["index"])
                self.mailbox.append(send["tick"])

    @workflow.signal(name=TICK_SIGNAL)
    def tick(self, data: Any) -> None:
        """A tick from outside (``handler.ctx.send_event``, ``cancel_run``, the ``temporal`` CLI).

        Either the workflow serializer's string or the same JSON as an object, e.g.
        ``{"type": "add_event", "event": {"__is_pydantic": true, "value": {...},
        "qualified_name": "app.Answer"}}``. It is decoded and checked when the loop reads it; anything
        else is dropped with a warning, and the run goes on.
        """
        if isinstance(data, dict):
            data = json.dumps(data)
        if not isinstance(data, str) or len(data) > MAX_TICK_CHARS:
            self.board.warn(f"dropped a {TICK_SIGNAL} signal: not a tick of <= {MAX_TICK_CHARS} chars")
            return
        self.mailbox.append(data)

    @workflow.signal(name=STORE_PATCH_SIGNAL)
    def store_patch(self, patch: Any) -> None:
        """``handler.ctx.store`` written from outside: applied at once (steps that started earlier
        return their own patches, applied when they complete)."""
        if self.store is None:
            return
        try:
            if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
                raise TypeError("a store patch is a list of JSON Patch operations")
            if self._adapter is not None and self._adapter.exact:
                self._check_patch_classes(patch)
            self.store = apply_state_patch(self.store, patch)
        except Exception as e:
            self.board.warn(f"dropped a {STORE_PATCH_SIGNAL} signal: {_reason(e)}")

    def _check_patch_classes(self, patch: list[dict[str, Any]]) -> None:
        """Refuse a store patch from outside naming a class the workflow does not declare: a step would import
        it by that name when it reads the store."""
        reader = self._closed_serializer()
        resolve = getattr(reader, "resolve_class", None)
        if resolve is None:
            return

        def visit(value: Any) -> None:
            if isinstance(value, dict):
                name = value.get("qualified_name")
                if isinstance(name, str) and (value.get("__is_pydantic") or value.get("__is_component")):
                    resolve(name)
                for v in value.values():
                    visit(v)
            elif isinstance(value, list):
                for v in value:
                    visit(v)
            elif isinstance(value, str) and '"qualified_name"' in value:
                with contextlib.suppress(ValueError):
                    visit(json.loads(value))

        for op in patch:
            visit(op.get("value"))

    @workflow.query(name=STATE_QUERY)
    def state(self) -> dict[str, Any] | None:
        return self.store

    @workflow.query(name=SNAPSHOT_QUERY)
    def snapshot(self) -> dict[str, Any]:
        """The run's broker state as its loop holds it now, and its store: what ``handler.ctx.to_dict()``
        returns while the run goes, as the default runtime's handler folds its live journal. ``None``
        for the state before the loop starts, or when the state cannot be serialized (child brokers)."""
        adapter, state = self._adapter, None
        runner = None if adapter is None else adapter.runner
        if adapter is not None and runner is not None:
            try:
                state = runner.state.to_serialized(adapter._serializer).model_dump(mode="json")
            except Exception:
                state = None
        return {"init_state": state, "store": self.store}

    @workflow.query(name="llama_completion_order")
    def completion_order(self) -> list[str]:
        return [] if self._adapter is None else list(self._adapter.completion_order)

    @workflow.run
    async def run(self, inp: RunInput) -> RunOutput:
        served = _registry.lookup(inp.workflow_name, inp.instance_key)
        options = _registry.options_for(served)
        # Under llama-agents-server its decorators record from outside the loop (_server.py), never here.
        llama_workflow, serializer = self.hosted()
        raw = WorkflowRunAdapter(self, llama_workflow, serializer, inp, options)
        # Asked first, before any command, so a run's replay always finds its marker where it was made.
        if workflow.patched(PATCH_EXACT):
            # Each invocation the loop starts is one activity, and nothing else runs (no batches, no run-ahead).
            raw.exact = raw.live_stream = raw.live_sends = True
            typed_result = True
        elif workflow.patched(PATCH_BUNDLE):
            # A run started since the bundle: every patch of PATCHES_BUNDLED, for one marker (each patch asked
            # costs a marker and a search attribute upsert in every run's history).
            raw.batches = raw.speculation = raw.live_stream = raw.run_ahead = raw.settle = raw.live_sends = True
            typed_result = True
        else:
            raw.batches = workflow.patched(PATCH_STEP_BATCHES)
            raw.speculation = workflow.patched(PATCH_COLLECT_SPECULATION)
            raw.live_stream = workflow.patched(PATCH_LIVE_STREAM)
            typed_result = workflow.patched(PATCH_TYPED_STOP_RESULT)
            raw.run_ahead = raw.batches and workflow.patched(PATCH_RUN_AHEAD)
            # A new patch is asked after the others, so histories recorded before it replay as they were made.
            raw.settle = raw.run_ahead and workflow.patched(PATCH_SETTLE_STARTED)
            raw.live_sends = raw.live_stream and workflow.patched(PATCH_LIVE_SENDS)
        if raw.exact and inp.signature is not None:
            hosted_signature = workflow_signature(served)
            if hosted_signature != inp.signature:
                # Not this worker's program: fail the workflow task (Temporal retries it, on any worker of the
                # queue), never run the loop with another workflow's steps.
                message = (
                    f"workflow {inp.workflow_name!r} on this worker has signature {hosted_signature}, but this run "
                    f"was started under {inp.signature}: another program (or version) of it; a worker hosting "
                    "the run's workflow takes it (deploy with TemporalRuntime.worker(deployment_name=...) to "
                    "route it there)"
                )
                workflow.logger.error(message)
                raise SignatureMismatchError(message)
        hosted_workflow = llama_workflow
        if raw.exact and inp.timeout_set:
            # The run's timeout is its starter's, whatever this worker's instance was built with (a copy for the
            # loop; the hosted instance stays what the runtime registered).
            llama_workflow = with_timeout(llama_workflow, inp.timeout)
            raw._workflow = llama_workflow
        self._adapter = raw
        token = _registry.current_adapter.set(raw)
        try:
            # Through the runtime, so its decorators (verbose=True's printer) wrap the adapter as they
            # do under the default runtime.
            adapter = llama_workflow.runtime.get_internal_adapter(llama_workflow)
            if adapter is not raw:
                adapter = _QuietOnReplay(adapter, raw)
            registered = hosted_workflow.runtime.get_or_register(hosted_workflow)
            internal_ctx = create_internal_context(llama_workflow)
            init_state = BrokerState.from_serialized(
                SerializedContext.model_validate(inp.init_state), llama_workflow, serializer
            )
            start_event = None
            if inp.start_event is not None:
                # A start input is outside input too: read only as the workflow's own classes (PATCH_EXACT).
                reader = self._closed_serializer() if raw.exact else serializer
                start_event = _wire.decode_event(reader, inp.start_event)
                if not isinstance(start_event, StartEvent):
                    raise ApplicationError("the start event is not a StartEvent", non_retryable=True)
            try:
                with run_context(
                    RunContext(
                        workflow=llama_workflow,
                        run_adapter=adapter,
                        context=internal_ctx,
                        steps=registered.steps,
                    )
                ):
                    # control_loop(start_event, init_state, run_id), with the runner kept: the queries read its
                    # broker state (and a run-ahead batch of a run recorded before PATCH_EXACT carried it).
                    current = consume_current_run()
                    runner = ControlLoopRunner(
                        current.workflow, current.run_adapter, current.context, current.steps, init_state
                    )
                    raw.runner = runner
                    if raw.exact:
                        stop = await self._run_cancellable(runner, start_event)
                    else:
                        stop = await runner.run(start_event=start_event)
            except (ApplicationError, workflow.NondeterminismError):
                raise
            except (Exception, WorkflowCancelledByUser) as e:
                await self._finish()
                # What the loop raises (a step's error once its retry policy gives up, a timeout, a
                # user cancel) ends the run with that error, never a workflow-task retry for ever.
                details = error_details(e)
                self._closed = True
                self.board.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                self.board.error_type = details["exception_type"]
                if raw.exact and self.cancel_requested and isinstance(e, WorkflowCancelledByUser):
                    # Cancelled from outside (handler.cancel_run(), temporal workflow cancel): LlamaIndex's loop
                    # cancelled the run as it does its own; the execution ends CANCELED, not FAILED.
                    self.board.status = "cancelled"
                    workflow.set_current_details("cancelled")
                    raise TemporalCancelledError(str(e) or "cancelled by the user") from None
                self.board.status = "failed"
                workflow.set_current_details(f"failed: {self.board.error[:500]}")
                raise ApplicationError(
                    details["exception_message"] or details["exception_type"],
                    details,
                    type=f"{RESULT_ERROR_TYPE}:{details['exception_type']}",
                    non_retryable=True,
                ) from None
            if isinstance(stop, IdleReleasedEvent):
                await self._continue_as_new(inp, llama_workflow, serializer)
            await self._finish()
            self._closed = True
            self.board.status = "completed"
            workflow.set_current_details("completed")
            # The handler's ctx.to_dict() and running_steps() need the broker state: the final one (the
            # start state folded with the journal) is usually far smaller than the journal itself.
            try:
                # With run-ahead the loop's own state is that fold already (it reduced the same ticks at the
                # same stamps): reducing the whole journal again would double the run's reducer time.
                folded = runner.state if raw.run_ahead or raw.exact else self._fold(inp, llama_workflow, serializer)
                final = folded.to_serialized(serializer)
            except Exception:
                final = None  # e.g. child brokers, which to_serialized refuses: the journal goes instead
            typed: dict[str, Any] = {}
            if typed_result and type(stop) is StopEvent and isinstance(serializer, JsonSerializer):
                # Its result as the default runtime hands it over: events and models in it keep their classes.
                typed = {**_wire.encode_result(serializer, stop.result), "stop_result_typed": True}
            if final is not None:
                return RunOutput(
                    stop_event=serializer.serialize(stop),
                    store=self.store,
                    init_state=final.model_dump(mode="json"),
                    **typed,
                )
            # The journal rides along only while it is small: a result over Temporal's payload limit would
            # fail the workflow task for ever. Without it the handler's ctx.to_dict() shows the start state.
            journal = [serializer.serialize(t) for t in self._tick_objects]
            ticks = journal if sum(len(t) for t in journal) <= MAX_JOURNAL_CHARS else []
            return RunOutput(
                stop_event=serializer.serialize(stop),
                store=self.store,
                ticks=ticks,
                init_state=inp.init_state,
                **typed,
            )
        finally:
            with contextlib.suppress(ValueError):  # closed from another context (the worker evicting the run)
                _registry.current_adapter.reset(token)

    async def _run_cancellable(self, runner: ControlLoopRunner, start_event: Event | None) -> StopEvent:
        """Run the loop in a task of its own; a Temporal cancel request becomes LlamaIndex's own cancel tick.

        ``handler.cancel_run()`` (and ``temporal workflow cancel``) request the execution's cancellation. The
        loop is not interrupted where it waits: it gets a ``TickCancelRun``, as under the default runtime, and
        cancels its steps, publishes its cancel event and raises ``WorkflowCancelledByUser``; the run then ends
        CANCELED.
        """
        task: asyncio.Task[StopEvent] = asyncio.get_event_loop().create_task(runner.run(start_event=start_event))
        while True:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.done() or workflow.cancellation_reason() is None:
                    raise  # not a cancel request (the worker evicting the run): the loop's task goes with it
                if not self.cancel_requested:
                    self.cancel_requested = True
                    self.mailbox.append(TickCancelRun())

    def _fold(self, inp: RunInput, llama_workflow: LlamaWorkflow, serializer: BaseSerializer) -> BrokerState:
        """This run's start state folded with its journal, each tick at its recorded time (else workflow
        time): LlamaIndex's ``rebuild_state_from_ticks`` without its wall clock."""
        start = SerializedContext.model_validate(inp.init_state)
        state = BrokerState.from_serialized(start, llama_workflow, serializer)
        now = workflow.now().timestamp()
        for tick in self._tick_objects:
            if not isinstance(tick, TickIdleRelease):
                state = reduce_tick(tick, state, now, workflow.info().workflow_id)
        return state

    async def _continue_as_new(self, inp: RunInput, llama_workflow: LlamaWorkflow, serializer: BaseSerializer) -> None:
        """Continue as new after LlamaIndex's idle release, carrying everything the run needs to resume.

        The broker state is this run's start state folded with its journal, each tick at the time the
        live run stamped it (or workflow time): the rebuild LlamaIndex's ``rebuild_state_from_ticks`` does,
        without its wall clock. The new run resumes it as ``Context.from_dict`` resumes a snapshot.
        """
        state = self._fold(inp, llama_workflow, serializer)
        self._stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        pending = [t if isinstance(t, str) else serializer.serialize(t) for t in self.mailbox]
        workflow.continue_as_new(
            RunInput(
                workflow_name=inp.workflow_name,
                signature=inp.signature,
                timeout=inp.timeout,
                timeout_set=inp.timeout_set,
                warnings=list(self.board.warnings),
                requests=self.board.carried_requests(),
                segment=inp.segment + 1,
                instance_key=inp.instance_key,
                init_state=state.to_serialized(serializer).model_dump(mode="json"),
                store=self.store,
                idle_release_after_ticks=inp.idle_release_after_ticks,
                instrument_tags=inp.instrument_tags,
                stream=self._stream.get_state(),
                mailbox=[t for t in pending if '"idle_release"' not in t],
            )
        )

    async def _finish(self) -> None:
        self._stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
