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
from workflows.context.context_types import SerializedContext
from workflows.context.serializers import BaseSerializer
from workflows.context.state_store import InMemoryStateStore, StateStore, apply_state_patch
from workflows.errors import WorkflowRuntimeError
from workflows.events import Event
from workflows.runtime.control_loop.reduce import _reduce_tick
from workflows.runtime.types.commands import CommandPublishEvent, CommandQueueEvent, CommandRunWorker
from workflows.runtime.types.internal_state import BrokerState, InternalStepWorkerState
from workflows.runtime.types.plugin import InternalRunAdapter, WaitResult
from workflows.runtime.types.results import (
    AddCollectedEvent,
    RetryAttempt,
    SentEvent,
    StepWorkerFailed,
    StepWorkerOutput,
    StepWorkerState,
)
from workflows.runtime.types.step_function import StepWorkerFunction, as_step_worker_function
from workflows.runtime.types.ticks import TickAddEvent, TickStepResult, WorkflowTick

from temporal_workflows._llama_runtime import _reflection, _registry, _wire
from temporal_workflows._llama_runtime._protocol import (
    BATCH_GRACE_MIN_SECONDS,
    BATCH_TOO_LARGE,
    LIVE_SEND_DELAY_SECONDS,
    MAX_RUN_AHEAD_RUNS,
    MAX_SPECULATED_RUNS,
    MAX_STEP_INPUT_CHARS,
    MAX_TICK_CHARS,
    RUN_AHEAD_MIN_SECONDS,
    STEP_SEND_SIGNAL,
    STEP_STREAM_SIGNAL,
    SpeculatedStep,
    StepBatchInput,
    StepBatchOutput,
    StepInput,
    StepOutput,
    speculation_key,
)
from temporal_workflows._llama_runtime._server import run_view

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


def _step_worker(llama_workflow: Any, step_name: str) -> StepWorkerFunction:
    key = (id(llama_workflow), step_name)
    fn = _workers.get(key)
    if fn is None:
        func = llama_workflow._get_steps()[step_name]
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
    hb = activity.info().heartbeat_timeout
    beating = asyncio.create_task(_heartbeat(hb.total_seconds() / 3 if hb else 10.0))
    try:
        if "batch" not in raw:
            return await _run_one(StepInput.model_validate(raw))
        batch = StepBatchInput.model_validate(raw)
        return await _run_batch(batch)
    finally:
        beating.cancel()


async def _run_batch(batch: StepBatchInput) -> StepBatchOutput:
    """Run a batch's invocations concurrently, as the default runtime runs a step's workers.

    Each starts from the run's store as the batch found it and returns its own patch, applied by the
    run in the batch's order. The batch does not make a fast invocation wait for slow ones: once the
    first finishes, the others get a grace of half the time it took (at least 50 ms); those still
    running then are cancelled and reported unfinished (``None``), and the run runs each of them
    alone (steps are at-least-once). So a race's winner returns when it wins, and its losers are
    cancelled by the run as under the default runtime.
    """
    loop = asyncio.get_running_loop()
    began = loop.time()
    invocations = [_unbatched(inp, batch) for inp in batch.batch]
    raw: _RawOutputs = {}
    tasks = [asyncio.ensure_future(_run_one(inp, raw=raw)) for inp in invocations]
    try:
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            grace = max(BATCH_GRACE_MIN_SECONDS, (loop.time() - began) / 2)
            _, pending = await asyncio.wait(pending, timeout=grace)
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    results: list[StepOutput | None] = []
    for t in tasks:
        if t in pending or t.cancelled():
            results.append(None)
        else:
            results.append(t.result())  # an error here is the activity's own (a step's is in its outputs)
    speculated = await _speculate(invocations, results) if batch.speculate else []
    if batch.broker is not None:
        try:
            speculated = await _run_ahead(batch, invocations, results, loop.time() - began, raw)
        except Exception as e:
            # Running ahead is an optimisation: whatever goes wrong there, the batch's own results stand
            # and the run starts the rest as activities.
            activity.logger.warning("run-ahead stopped: %s: %s", type(e).__name__, e)
            speculated = []
    out = StepBatchOutput(results=results, speculated=speculated)
    while speculated and len(out.model_dump_json()) > MAX_STEP_INPUT_CHARS:
        # What was run ahead last is dropped first: the run asks for it again.
        speculated = speculated[: len(speculated) // 2]
        out = StepBatchOutput(results=results, speculated=speculated)
    if len(out.model_dump_json()) > MAX_STEP_INPUT_CHARS:
        # Refused by Temporal, it would be retried for ever: the run runs each invocation alone.
        raise ApplicationError(
            "the batch's results are over the payload limit", type=BATCH_TOO_LARGE, non_retryable=True
        )
    return out


_SPECULATION_SAFE_KINDS = frozenset({"result", "failed", "add_collected", "delete_collected"})
"""Output kinds a run-ahead result may hold: none of them carries the invocation's id (sends and waiters
are keyed by it, so a result with those is not kept)."""


def _added(out: StepOutput | None) -> tuple[str, dict[str, Any]] | None:
    """The one ``AddCollectedEvent`` of a ``collect_events`` invocation that only buffered its event.

    Anything else (it fired, it sent, it wrote the store or the stream, it failed) makes the loop's
    next moves unpredictable here, so the run-ahead stops.
    """
    if out is None or out.stream or out.late_sends or out.store_patch:
        return None
    adds = [o["data"] for o in out.outputs if o["kind"] == "add_collected"]
    others_idle = all(
        o["kind"] == "add_collected" or (o["kind"] == "result" and o["data"].get("result") is None) for o in out.outputs
    )
    if len(adds) != 1 or not others_idle:
        return None
    return adds[0]["event_id"], adds[0]["event"]


async def _speculate(invocations: list[StepInput], results: list[StepOutput | None]) -> list[SpeculatedStep]:
    """Run ahead the reruns LlamaIndex's reducer will ask for after this batch of ``collect_events`` calls.

    The loop hands each ``collect_events`` invocation a snapshot of the fan-in buffer. Reduced in the
    batch's order, the first one to buffer its event appends it; every later one finds the buffer
    changed since its snapshot and is rerun with the buffer as it then is, one at a time, each rerun
    an activity round trip of its own: a 50-way fan-in took ~50 rounds in sequence. This simulates that
    reduction (append if the snapshot is current, else rerun with the current buffer) and runs each
    rerun here, round after round, while every result only buffers an event. The run uses a result
    only for an invocation whose input is exactly the one it ran with (:func:`speculation_key`), so
    anything else that happened in between (another event buffered, a store write) just means an
    activity as before.
    """
    if len(invocations) < 2 or any(r is None for r in results) or _added(results[0]) is None:
        return []
    snapshots: list[dict[str, list[str]]] = [inp.state.get("collected_events") or {} for inp in invocations]
    # The loop starts a join's invocations with the buffer as it is when each starts, so they are prefixes
    # of one another, and the longest is the buffer as the batch went out (a freed worker starts the next
    # event at once); the run keeps only what matches, so a wrong guess costs nothing but the run-ahead.
    live = {k: list(v) for k, v in max(snapshots, key=lambda b: sum(len(v) for v in b.values())).items()}
    if not all(all(live.get(k, [])[: len(v)] == v for k, v in snap.items()) for snap in snapshots):
        return []
    llama_workflow = run_view(_registry.lookup(invocations[0].workflow_name, invocations[0].instance_key))
    serializer = llama_workflow.runtime.get_serializer(llama_workflow)
    pending: list[tuple[StepInput, dict[str, list[str]], StepOutput | None]] = list(
        zip(invocations, snapshots, results, strict=True)
    )
    out: list[SpeculatedStep] = []
    budget = MAX_SPECULATED_RUNS
    while pending and budget > 0:
        reruns: list[tuple[StepInput, dict[str, list[str]]]] = []
        for inp, seen, result in pending:
            if result is None or _added(result) is None:
                return out  # it fired, failed or did more: what the loop asks next is not predictable
            if seen == live:  # its snapshot is current: the reducer buffers its event
                for item in _wire.decode_outputs(serializer, result.outputs):
                    if isinstance(item, AddCollectedEvent):
                        live.setdefault(item.event_id, []).append(_wire.encode_event(serializer, item.event))
            else:  # stale: rerun with the buffer as it is now
                now = {k: list(v) for k, v in live.items()}
                # Run ahead, not asked for yet: nothing of it goes live (its result carries its writes).
                rerun = inp.model_copy(update={"state": {**inp.state, "collected_events": now}, "live_stream": False})
                reruns.append((rerun, now))
        reruns = reruns[:budget]
        budget -= len(reruns)
        ran = await asyncio.gather(*(_run_one(r) for r, _ in reruns), return_exceptions=True)
        pending = []
        for (rerun, seen), ran_one in zip(reruns, ran, strict=True):
            if isinstance(ran_one, BaseException):
                return out
            if all(o["kind"] in _SPECULATION_SAFE_KINDS for o in ran_one.outputs):
                out.append(SpeculatedStep(key=speculation_key(rerun), output=ran_one))
            pending.append((rerun, seen, ran_one))
    return out


_RUN_AHEAD_KINDS = frozenset({"result", "add_collected", "delete_collected"})
"""Output kinds a result may hold for the run-ahead to go on past it (and to be kept when it was run ahead):
none carries the invocation's id, and none is a failure (whose retry verdict needs the run's own record)."""


async def _run_ahead(
    batch: StepBatchInput,
    invocations: list[StepInput],
    results: list[StepOutput | None],
    took: float,
    raw: _RawOutputs | None = None,
) -> list[SpeculatedStep]:
    """Run ahead the invocations of this step that the loop will start once it reduces the batch's results.

    LlamaIndex's own reducer runs here over the loop's broker state as the batch went out
    (``batch.broker``), reducing the results in the order the run reduces them (the order it started the
    invocations; a result answered from run-ahead is ready at once, so it is reduced in start order too).
    Each invocation of this step that the reduction starts (a queued event getting a free worker, the rerun
    of a ``collect_events`` call whose buffer went stale) is run here, as soon as it starts, concurrently
    with the others (so ``num_workers`` bounds this as it bounds the loop), and its result is reduced in
    turn. It stops at anything it cannot predict (a send, a failure, a waiter, the run's end, another
    step's result), at ``MAX_RUN_AHEAD_RUNS``, and when its time is up. The run uses a result only for an
    invocation whose input is exactly the one run here (:func:`speculation_key`): a wrong guess costs the
    run nothing but an activity, as before.
    """
    if any(r is None for r in results) or not invocations or batch.broker is None:
        return []
    loop = asyncio.get_running_loop()
    timeout = activity.info().start_to_close_timeout
    budget = max(RUN_AHEAD_MIN_SECONDS, took)
    if timeout:
        budget = min(budget, timeout.total_seconds() / 2)
    deadline = loop.time() + budget
    first = invocations[0]
    step = first.step_name
    llama_workflow = run_view(_registry.lookup(first.workflow_name, first.instance_key))
    serializer = llama_workflow.runtime.get_serializer(llama_workflow)
    state = BrokerState.from_serialized(SerializedContext.model_validate(batch.broker), llama_workflow, serializer)
    state.__class__ = _OwnedBrokerState
    for worker_state in state.workers.values():
        if type(worker_state) is InternalStepWorkerState:
            worker_state.__class__ = _OwnedWorkerState
    step_id = next((k for k in state.workers if str(k) == step), None)
    if step_id is None:
        return []
    # The store as each run-ahead invocation will find it in the run: the batch's patches land as its
    # results arrive (before the run reduces any), and an invocation answered from run-ahead applies its
    # own as it starts, in the order they start.
    store = batch.store
    for result in results:
        if result is not None and result.store_patch and store is not None:
            store = apply_state_patch(store, result.store_patch)
    created: list[_Entry] = []
    applied = 0
    writes = any(r is not None and r.store_patch for r in results)
    # The run reduces the done task that comes first in its order (``_workflow._priority``): a work item's
    # first start, kept by its reruns. A task started by the reduction at pick ``i`` is started at pick
    # ``i + 1`` and done (answered at once) from pick ``i + 1`` when the run lets it settle first
    # (``batch.settled``, ``PATCH_SETTLE_STARTED``), else from pick ``i + 2``; when none is done, the run
    # waits and all are.
    order = batch.order if len(batch.order) == len(invocations) else list(range(len(invocations)))
    item_order: dict[tuple[str, str], int] = {}  # (step, work item) -> its first start's place
    for inp, place in zip(invocations, order, strict=True):
        item = inp.state.get("work_item_id")
        if isinstance(item, str):
            item_order.setdefault((step, item), place)
    next_place = max(order, default=0) + 1
    entries: list[_Entry] = [
        _Entry(place=place, started=-1, inp=inp, res=res, ahead=False, step_id=step_id)
        for inp, res, place in zip(invocations, results, order, strict=True)
    ]
    out: list[SpeculatedStep] = []
    first_seen: dict[str, int] = {}  # an output's JSON -> the entry that carries it
    memo: _wire.EncodeMemo = {}
    runs = 0
    pick = 0
    try:
        while entries:
            done = [e for e in entries if e.started < pick]
            entry = min(done or entries, key=lambda e: e.place)
            entries.remove(entry)
            pick += 1
            inp, res, ahead = entry.inp, entry.res, entry.ahead
            if isinstance(res, asyncio.Task):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                if not res.done():  # (a done one needs no wait, nor the loop round asyncio.wait takes)
                    await asyncio.wait({res}, timeout=remaining)
                if not res.done() or res.cancelled() or res.exception() is not None:
                    break
                res = res.result()
            if res is None or res.late_sends or any(o["kind"] not in _RUN_AHEAD_KINDS for o in res.outputs):
                break
            if ahead:
                key = speculation_key(inp, run_ahead=True)
                text = res.model_dump_json()
                if text in first_seen:
                    out.append(SpeculatedStep(key=key, same_as=first_seen[text]))
                else:
                    first_seen[text] = len(out)
                    out.append(SpeculatedStep(key=key, output=res))
            invocation = inp.state.get("invocation_id")
            workers = state.workers.get(entry.step_id)
            worker = next((w for w in workers.in_progress if w.invocation_id == invocation), None) if workers else None
            if worker is None:
                break
            kept = raw.get(id(res)) if raw is not None else None
            # The step's own result objects when it ran here (decoding its JSON again gives equal ones).
            decoded_outputs = (
                kept[1] if kept is not None and kept[0] is res else _wire.decode_outputs(serializer, res.outputs)
            )
            outputs = [o for o in decoded_outputs if not isinstance(o, SentEvent)]
            ticks: list[WorkflowTick] = [
                TickStepResult(
                    step_id=entry.step_id,
                    worker_id=worker.worker_id,
                    invocation_namespace=(),
                    event=worker.event,
                    result=outputs,  # type: ignore[arg-type]
                    invocation_id=invocation,
                    sends=[],
                )
            ]
            while ticks:
                state, commands = _reduce_tick(ticks.pop(0), state, time.time(), run_id=first.run_id)
                for command in commands:
                    if isinstance(command, CommandQueueEvent):
                        ticks.append(
                            TickAddEvent(
                                event=command.event,
                                step_id=command.step_id,
                                origin_namespace=command.origin_namespace,
                                recovery_counts=dict(command.recovery_counts),
                                scope_path=command.scope_path,
                                emission=command.emission,
                            )
                        )
                    elif isinstance(command, CommandRunWorker):
                        if command.invocation_namespace or (command.step_id != step_id and not batch.across_steps):
                            continue  # a nested workflow's (or, before across_steps, another step's): not predicted
                        if runs >= MAX_RUN_AHEAD_RUNS or loop.time() >= deadline:
                            return out
                        started = next(
                            w
                            for w in state.workers[command.step_id].in_progress
                            if w.invocation_id == command.invocation_id
                        )
                        # The invocations started before this one apply their store writes first: once the step
                        # is seen to write, wait for them (its run-ahead then goes one at a time).
                        while applied < len(created) and store is not None:
                            earlier = created[applied].res
                            if isinstance(earlier, asyncio.Task) and not earlier.done():
                                if not writes:
                                    break  # assumed to write nothing; if it does, later guesses miss
                                remaining = deadline - loop.time()
                                if remaining <= 0:
                                    return out
                                await asyncio.wait({earlier}, timeout=remaining)
                                if not earlier.done():
                                    return out
                            if isinstance(earlier, asyncio.Task):
                                if earlier.cancelled() or earlier.exception() is not None:
                                    return out
                                earlier = earlier.result()
                            if earlier is not None and earlier.store_patch:
                                writes = True
                                store = apply_state_patch(store, earlier.store_patch)
                            applied += 1
                        nxt, decoded = _ahead_input(first, serializer, started, command, store, memo)
                        runs += 1
                        if started.work_item_id is None:
                            place = next_place
                        else:
                            place = item_order.setdefault((nxt.step_name, started.work_item_id), next_place)
                        if place == next_place:
                            next_place += 1
                        task = asyncio.ensure_future(_run_one(nxt, decoded, raw))
                        # Started at the next pick; done at it when the run lets it settle first
                        # (``batch.settled``), else at the one after.
                        new = _Entry(
                            place=place,
                            started=pick - 1 if batch.settled else pick,
                            inp=nxt,
                            res=task,
                            ahead=True,
                            step_id=command.step_id,
                        )
                        entries.append(new)
                        created.append(new)
                    elif not isinstance(command, CommandPublishEvent):
                        return out  # the run ends, a timer, an idle check: what comes next is not predicted
        return out
    finally:
        pending = [e.res for e in entries + created if isinstance(e.res, asyncio.Task) and not e.res.done()]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


class _OwnedBrokerState(BrokerState):
    """The run-ahead's broker state, reduced in place.

    LlamaIndex's reducer copies the state it is handed on every tick (``BrokerState.deepcopy``: every
    worker's queue and every running invocation's fan-in snapshot), so that its caller keeps the state as
    it was. The run-ahead never reads a state again once it has reduced the next tick, so the copy is
    skipped: it was about a fifth of a 50-way fan-in's activity time. Only the copy of the state *handed
    in* is skipped; the reducer's own copies (an invocation's snapshot of its fan-in buffer) are made as
    ever. Whatever the run-ahead predicts is used only for an input the run builds identically
    (``speculation_key``), so this cannot change a result, only how many the run finds ready.
    """

    def deepcopy(self) -> BrokerState:
        return self


class _OwnedWorkerState(InternalStepWorkerState):
    """A step's worker state in the run-ahead's broker (``_OwnedBrokerState``).

    With the broker reduced in place, the reducer copies a step's worker state only to start an
    invocation, and reads just the copy's fan-in buffers and waiters (the invocation's snapshot). Those
    are copied as LlamaIndex copies them; the queue and the running invocations (each with its own
    snapshot of the buffers) are not deep-copied for a copy that is then dropped.
    """

    def _deepcopy(self) -> InternalStepWorkerState:
        return InternalStepWorkerState(
            queue=list(self.queue),
            config=self.config,
            in_progress=list(self.in_progress),
            collected_events={k: list(v) for k, v in self.collected_events.items()},
            static_collect_events=list(self.static_collect_events),
            collected_waiters=[dataclasses.replace(x) for x in self.collected_waiters],
            collect_generations=dict(self.collect_generations),
        )


@dataclasses.dataclass
class _Entry:
    """An invocation in the run-ahead: its place in the run's reduce order, the pick it starts at, its result."""

    place: int
    started: int
    inp: StepInput
    res: asyncio.Task[StepOutput] | StepOutput | None
    ahead: bool
    step_id: Any


@dataclasses.dataclass(frozen=True)
class _Decoded:
    state: StepWorkerState
    event: Event
    bound_events: dict[str, Event] | None
    retry: RetryAttempt


def _ahead_input(
    first: StepInput,
    serializer: BaseSerializer,
    worker: Any,
    command: CommandRunWorker,
    store: dict[str, Any] | None,
    memo: _wire.EncodeMemo,
) -> tuple[StepInput, _Decoded]:
    """The input the run's ``run_step`` builds for an invocation the loop starts (``_workflow.run_step``),
    and the same as objects (the step gets its own copy of the fan-in buffers, as a decoded input is)."""
    retry = RetryAttempt(
        retry_number=worker.attempts,
        first_attempt_at=worker.first_attempt_at,
        last_exception=worker.last_exception,
        last_failed_at=worker.last_failed_at,
        recovery_counts=dict(worker.recovery_counts),
    )
    shared: StepWorkerState = worker.shared_state
    inp = StepInput(
        workflow_name=first.workflow_name,
        instance_key=first.instance_key,
        run_id=first.run_id,
        step_name=str(command.step_id),
        event=_wire.encode_event(serializer, command.event, memo),
        state=_wire.encode_state(serializer, shared, memo),
        bound_events=None
        if command.bound_events is None
        else {k: _wire.encode_event(serializer, v, memo) for k, v in command.bound_events.items()},
        retry=_wire.encode_retry(retry),
        store=store,
        live_stream=False,
        instrument_tags=first.instrument_tags,
    )
    # The step gets its own containers and trigger event, as it would get decoded ones. The buffered events
    # are the reducer's own objects, as the default runtime hands them to a step (copying each for every
    # invocation would cost a wide fan-in what decoding does).
    bound = None if command.bound_events is None else {k: v.model_copy() for k, v in command.bound_events.items()}
    return inp, _Decoded(state=shared._deepcopy(), event=command.event.model_copy(), bound_events=bound, retry=retry)


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


_RawOutputs = dict[int, tuple[StepOutput, list[StepWorkerOutput]]]
"""A batch's results as the steps returned them, by ``id`` of their :class:`StepOutput` (held too, so its id
is not reused): the run-ahead reduces them without decoding what was just encoded."""


async def _run_one(inp: StepInput, decoded: _Decoded | None = None, raw: _RawOutputs | None = None) -> StepOutput:
    """Run one invocation; ``decoded`` is its state, event, bound events and retry as objects already (a
    run-ahead invocation's, which come from the reducer: decoding them again would cost a wide fan-in
    its whole buffer per invocation). With ``raw``, the step's result objects are kept there."""
    llama_workflow = run_view(_registry.lookup(inp.workflow_name, inp.instance_key))
    serializer = llama_workflow.runtime.get_serializer(llama_workflow)
    if decoded is None:
        decoded = _Decoded(
            state=_wire.decode_state(serializer, inp.state),
            event=_wire.decode_event(serializer, inp.event),
            bound_events=None
            if inp.bound_events is None
            else {k: _wire.decode_event(serializer, v) for k, v in inp.bound_events.items()},
            retry=_wire.decode_retry(serializer, inp.retry),
        )
    # The step wrapper looks the step's config up on every call: by then it is cached on the instance.
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
    elif raw is not None:
        raw[id(out)] = (out, outputs)
    return out
