"""The step activity: LlamaIndex's own step worker (``as_step_worker_function``), in a worker process.

One activity type per step (``<workflow_name>.<step>``, readable in the Web UI
and metrics), served by one dynamic activity. The step runs exactly as under
the default runtime; only its adapter differs:

* ``ctx.send_event`` is recorded in the step's result by LlamaIndex itself
  (with an emission key the reducer de-duplicates). While the step runs, the
  sends it made go to the run by signal once it has been running
  ``LIVE_SEND_DELAY_SECONDS`` after them (``STEP_SEND_SIGNAL``), with what it
  wrote to ``ctx.store`` until then, so a step they start reads the store as
  under the default runtime; sends still unsent when the step ends go with
  its result. A retried attempt cannot deliver an event twice (the run takes
  each emission index of an invocation once, as the reducer does). A
  send made after the step returned (no key) is carried back and queued by
  the run.
* ``ctx.write_event_to_stream`` is signalled to the run as it is made
  (``STEP_STREAM_SIGNAL``); the result carries every write too.
* ``ctx.store`` is the run's store as the step started (a snapshot); what the
  step writes returns as a JSON patch (``StateCheckpoint.diff``) that the run
  applies once, in completion order (the part a live flush carried, when the
  flush arrived).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from llama_index_instrumentation.dispatcher import active_instrument_tags, instrument_tags
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from workflows.context.serializers import BaseSerializer
from workflows.context.state_store import InMemoryStateStore, StateStore
from workflows.errors import WorkflowRuntimeError
from workflows.events import Event
from workflows.runtime.types.plugin import InternalRunAdapter, WaitResult
from workflows.runtime.types.results import (
    RetryAttempt,
    StepWorkerFailed,
    StepWorkerState,
)
from workflows.runtime.types.step_function import StepWorkerFunction, as_step_worker_function
from workflows.runtime.types.ticks import TickAddEvent, WorkflowTick

from temporal_workflows._llama_runtime import _reflection, _registry, _wire
from temporal_workflows._llama_runtime._llama_private import step_functions
from temporal_workflows._llama_runtime._protocol import (
    BATCH_TOO_LARGE,
    LIVE_SEND_DELAY_SECONDS,
    MAX_STEP_INPUT_CHARS,
    MAX_TICK_CHARS,
    SIGNATURE_MISMATCH,
    STEP_SEND_SIGNAL,
    STEP_STREAM_SIGNAL,
    StepBatchInput,
    StepBatchOutput,
    StepInput,
    StepOutput,
)
from temporal_workflows._llama_runtime._server import run_view
from temporal_workflows._llama_runtime._versioning import signature
from temporal_workflows.temporal._failures import refusal_retry_delay

__all__ = ["StepActivityAdapter", "llama_step"]


class StepActivityAdapter(InternalRunAdapter):
    """A step's view of its run, inside the activity."""

    def __init__(
        self,
        run_id: str,
        serializer: BaseSerializer,
        store: StateStore[Any] | None,
        live_invocation: str | None = None,
        live_sends: bool = False,
        store_start: Any = None,
    ) -> None:
        self._run_id = run_id
        self._serializer = serializer
        self._store = store
        self.stream: list[str] = []
        self.late_sends: list[str] = []
        self._live_invocation = live_invocation
        self._live: asyncio.Queue[tuple[int, str] | None] | None = None
        self._sender: asyncio.Task[None] | None = None
        self._sends_live = live_sends and live_invocation is not None
        self._unsent: list[dict[str, Any]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._signalling = False
        self._closed = False
        self._start = store_start
        """The store's checkpoint as the step started: each flush carries the step's writes since."""

    @property
    def run_id(self) -> str:
        return self._run_id

    async def write_to_event_stream(self, event: Event) -> None:
        _registry.note_type(event)
        data = self._serializer.serialize(event)
        self.stream.append(data)
        if self._live_invocation is not None:
            if self._live is None:
                self._live = asyncio.Queue()
                self._sender = asyncio.create_task(self._send_live())
            self._live.put_nowait((len(self.stream) - 1, data))

    async def _send_live(self) -> None:
        """Signal the run each stream write, in order; a failure only means the run publishes the rest
        when the step completes (the result carries every write)."""
        assert self._live is not None
        handle = activity.client().get_workflow_handle(self._run_id)
        while (item := await self._live.get()) is not None:
            index, data = item
            if len(data) > MAX_TICK_CHARS:
                continue  # too large for a signal: it goes with the step's result
            try:
                await handle.signal(
                    STEP_STREAM_SIGNAL, {"invocation": self._live_invocation, "index": index, "event": data}
                )
            except Exception as e:
                activity.logger.warning("stream write not sent live (it goes with the step's result): %s", e)
                return

    async def flush_live(self) -> None:
        """Wait for the live writes to be signalled (before the step's result goes)."""
        if self._live is None or self._sender is None:
            return
        self._live.put_nowait(None)
        with contextlib.suppress(Exception):
            await self._sender

    async def get_now(self) -> float:
        return time.time()

    async def send_event(self, tick: WorkflowTick) -> None:
        if isinstance(tick, TickAddEvent):
            _registry.note_type(tick.event)
        if isinstance(tick, TickAddEvent) and tick.emission is not None:
            # Recorded in the step's result (SentEvent) too: delivered from there if not live.
            if self._sends_live and not self._closed:
                self._unsent.append({"index": tick.emission.index, "tick": self._serializer.serialize(tick)})
                if self._flusher is None:
                    self._flusher = asyncio.create_task(self._flush_sends())
            return
        self.late_sends.append(self._serializer.serialize(tick))

    async def _flush_sends(self) -> None:
        """Signal the sends made so far, with the store writes made so far, once the step has gone on
        running ``LIVE_SEND_DELAY_SECONDS`` after them (it is waiting on something: the default runtime
        would start their steps now).

        A failed or oversized signal ends live sending for this step: the rest goes with its result,
        whose store patch (from the step's start, as ever) carries every write.
        """
        try:
            while self._unsent and self._sends_live and not self._closed:
                await asyncio.sleep(LIVE_SEND_DELAY_SECONDS)
                if self._closed:
                    return
                sends, self._unsent = self._unsent, []
                patch: list[dict[str, Any]] = []
                if isinstance(self._store, InMemoryStateStore) and self._start is not None:
                    patch = self._store.checkpoint().diff(self._start)
                data = {"invocation": self._live_invocation, "sends": sends, "store_patch": patch}
                if len(json.dumps(data)) > MAX_TICK_CHARS:
                    self._sends_live = False  # too large for a signal: it goes with the step's result
                    return
                self._signalling = True
                try:
                    await activity.client().get_workflow_handle(self._run_id).signal(STEP_SEND_SIGNAL, data)
                except Exception as e:
                    activity.logger.warning("sends not delivered live (they go with the step's result): %s", e)
                    self._sends_live = False
                    return
                finally:
                    self._signalling = False
        finally:
            self._flusher = None

    async def close_sends(self) -> None:
        """End live sending as the step ends: a signal on its way is waited for, a flush not begun is
        dropped (its sends go with the result)."""
        self._closed = True
        flusher = self._flusher
        if flusher is not None:
            if self._signalling:
                with contextlib.suppress(Exception):
                    await asyncio.shield(flusher)
            else:
                flusher.cancel()
                with contextlib.suppress(BaseException):
                    await flusher

    async def wait_receive(self, timeout_seconds: float | None = None) -> WaitResult:
        raise RuntimeError("a step does not read the run's mailbox")

    def get_state_store(self, namespace: tuple[str, ...] = ()) -> StateStore[Any] | None:
        return None if namespace else self._store


_workers: dict[tuple[int, str], StepWorkerFunction] = {}
_BUFFERED: _wire.BufferedEvents = collections.OrderedDict()
"""Fan-in buffer events decoded in this process (``_wire.decode_state``)."""


def _step_worker(llama_workflow: Any, step_name: str) -> StepWorkerFunction:
    key = (id(llama_workflow), step_name)
    fn = _workers.get(key)
    if fn is None:
        func = step_functions(llama_workflow)[step_name]
        fn = as_step_worker_function(getattr(func, "__func__", func))
        _workers[key] = fn
    return fn


async def _heartbeat(every: float) -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)


@activity.defn(dynamic=True)
async def llama_step(args: Sequence[RawValue]) -> StepOutput | StepBatchOutput:
    """Run one LlamaIndex step invocation, or a batch of one step's invocations (activity type
    ``<workflow_name>.<step>``)."""
    converter = activity.payload_converter()
    raw = converter.from_payload(args[0].payload, dict)
    info = activity.info()
    hb = info.heartbeat_timeout
    # A local activity has no heartbeat (its worker running the workflow task stands for it).
    beating = None if info.is_local else asyncio.create_task(_heartbeat(hb.total_seconds() / 3 if hb else 10.0))
    try:
        if "batch" not in raw:
            return await _run_one(StepInput.model_validate(raw))
        batch = StepBatchInput.model_validate(raw)
        return await _run_batch(batch)
    finally:
        if beating is not None:
            beating.cancel()


async def _run_batch(batch: StepBatchInput) -> StepBatchOutput:
    """Run a batch's invocations (scheduled by runs recorded before ``PATCH_EXACT``) concurrently, as the
    default runtime runs a step's workers, each to its end: every invocation runs once.

    Each starts from the run's store as the batch found it and returns its own patch, applied by the run in
    the batch's order. Nothing is run ahead (``StepBatchInput.broker``, ``speculate`` are ignored): the run
    starts as activities whatever its loop asks for next.
    """
    invocations = [_unbatched(inp, batch) for inp in batch.batch]
    results: list[StepOutput | None] = list(await asyncio.gather(*(_run_one(inp) for inp in invocations)))
    out = StepBatchOutput(results=results)
    if len(out.model_dump_json()) > MAX_STEP_INPUT_CHARS:
        # Refused by Temporal, it would be retried for ever: the run runs each invocation alone.
        raise ApplicationError(
            "the batch's results are over the payload limit", type=BATCH_TOO_LARGE, non_retryable=True
        )
    return out


@dataclasses.dataclass(frozen=True)
class _Decoded:
    state: StepWorkerState
    event: Event
    bound_events: dict[str, Event] | None
    retry: RetryAttempt


def _unbatched(inp: StepInput, batch: StepBatchInput) -> StepInput:
    """One invocation of a batch as it would have come alone: the store, and its fan-in buffers."""
    state = inp.state
    ref = state.get("collected_events_ref")
    if ref is not None:
        state = {k: v for k, v in state.items() if k != "collected_events_ref"}
        state["collected_events"] = batch.buffers[ref]
    prefixes = state.get("collected_events_prefixes")
    if prefixes is not None:
        state = {k: v for k, v in state.items() if k != "collected_events_prefixes"}
        state["collected_events"] = {k: batch.lists[i][:n] for k, (i, n) in prefixes.items()}
    return inp.model_copy(update={"store": batch.store if inp.store is None else inp.store, "state": state})


async def _run_one(inp: StepInput) -> StepOutput:
    """Run one invocation: LlamaIndex's step worker on this worker's instance of the run's workflow."""
    began = time.monotonic()
    served = _registry.lookup(inp.workflow_name, inp.instance_key)
    _check_signature(inp, served)
    llama_workflow = run_view(served)
    serializer = llama_workflow.runtime.get_serializer(llama_workflow)
    decoded = _Decoded(
        state=_wire.decode_state(serializer, inp.state, _BUFFERED if inp.signature is not None else None, inp.run_id),
        event=_wire.decode_event(serializer, inp.event),
        bound_events=None
        if inp.bound_events is None
        else {k: _wire.decode_event(serializer, v) for k, v in inp.bound_events.items()},
        retry=_wire.decode_retry(serializer, inp.retry),
    )
    state_type = _reflection.state_type(llama_workflow)
    store = _wire.run_store(serializer, inp.store, state_type)
    # The patch is taken against a store of its own. LlamaIndex's checkpoint references the state without
    # copying it, store.get returns the stored value itself, and the diff skips values shared by reference:
    # a value changed in place and set back (answers = await ctx.store.get("answers"); answers.append(a);
    # await ctx.store.set("answers", answers)) read as unchanged, and the write was lost.
    before = (_wire.run_store(serializer, inp.store, state_type) if inp.store is not None else store).checkpoint()
    live = inp.state.get("invocation_id") if inp.live_stream else None
    adapter = StepActivityAdapter(
        inp.run_id, serializer, store, live, inp.live_sends, before if inp.store is not None else None
    )
    token = _registry.current_adapter.set(adapter)
    try:
        # The caller's instrument tags and the run's id, as LlamaIndex's run sets them around its loop and
        # steps (active_instrument_tags(), which its spans and events carry).
        tags = {**active_instrument_tags.get(), **(inp.instrument_tags or {}), "llamaindex.run_id": inp.run_id}
        with instrument_tags(tags):
            outputs = await _step_worker(llama_workflow, inp.step_name)(
                state=decoded.state,
                step_name=inp.step_name,
                event=decoded.event,
                workflow=llama_workflow,
                bound_events=decoded.bound_events,
                retry=decoded.retry,
            )
    except Exception as e:
        # LlamaIndex's step wrapper turns the step's own exception into a failure, but not one raised
        # around it (a Resource whose factory fails, a cycle of resources): its loop does
        # (control_loop/runner.py), so the step's retry policy and @catch_error apply. Raised out of the
        # activity instead, it would be retried by Temporal for ever.
        outputs = [StepWorkerFailed(exception=e, failed_at=time.time())]
    finally:
        _registry.current_adapter.reset(token)
        await adapter.close_sends()
        await adapter.flush_live()
    try:
        patch = store.checkpoint().diff(before) if inp.store is not None else []
        out = StepOutput(
            outputs=_wire.encode_outputs(outputs, serializer),
            stream=adapter.stream,
            late_sends=adapter.late_sends,
            store_patch=patch,
        )
        size = len(out.model_dump_json())
    except Exception as e:
        # A value JSON cannot carry (a function in ctx.store, say), which the default runtime keeps in
        # process: as an activity error it would be retried for ever, so the step fails, saying why.
        error = WorkflowRuntimeError(
            f"step {inp.step_name!r}: its result (events, stream writes and ctx.store changes) cannot be "
            f"sent to the run: {type(e).__name__}: {e}; on Temporal, keep values that cannot be serialized "
            "out of events and the store"
        )
        out = StepOutput(outputs=_wire.encode_outputs([StepWorkerFailed(exception=error, failed_at=time.time())]))
        size = 0
    if size > MAX_STEP_INPUT_CHARS:
        # Returned as it is, the result would be refused by Temporal and the activity retried for ever:
        # the step fails instead (its writes, sends and stream events are dropped with it).
        error = WorkflowRuntimeError(
            f"step {inp.step_name!r}: its result (events, stream writes and ctx.store changes) is {size:,} "
            f"bytes, over the {MAX_STEP_INPUT_CHARS:,} a Temporal payload allows here; keep large values out "
            "of events and the store"
        )
        out = StepOutput(outputs=_wire.encode_outputs([StepWorkerFailed(exception=error, failed_at=time.time())]))
    return out.model_copy(update={"took_ms": round((time.monotonic() - began) * 1000, 3)})


def _check_signature(inp: StepInput, served: Any) -> None:
    """Refuse (retryably) a step of a run started under another program's workflow of this name.

    Two programs may build a workflow of one ``workflow_name`` (a rolling deploy of a changed workflow, two
    programs on one queue): this worker must not run the run's step with its own code. The refusal is an
    activity failure Temporal retries, so a worker hosting the run's workflow takes the step; its message
    (in the Web UI's pending activity and the worker's log) says what differs.
    """
    if inp.signature is None:
        return  # a run started before signatures (PATCH_EXACT)
    mine = signature(served)
    if mine == inp.signature:
        return
    message = (
        f"workflow {inp.workflow_name!r} on this worker has signature {mine}, but run {inp.run_id!r} was started "
        f"under {inp.signature}: another program (or version) of it; step {inp.step_name!r} is left to a worker "
        "hosting the run's workflow (deploy with TemporalRuntime.worker(deployment_name=...) to route it there)"
    )
    activity.logger.warning(message)
    raise ApplicationError(
        message,
        {"run_signature": inp.signature, "worker_signature": mine},
        type=SIGNATURE_MISMATCH,
        non_retryable=False,
        next_retry_delay=refusal_retry_delay(),  # routing's pace, not the step's backoff
    )
