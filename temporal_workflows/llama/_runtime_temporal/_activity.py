"""The step activity: LlamaIndex's own step worker (``as_step_worker_function``), in a worker process.

One activity type per step (``<workflow_name>.<step>``, readable in the Web UI
and metrics), served by one dynamic activity. The step runs exactly as under
the default runtime; only its adapter differs:

* ``ctx.send_event`` is recorded in the step's result by LlamaIndex itself
  (with an emission key the reducer de-duplicates), so the activity sends
  nothing live: a retried attempt cannot deliver an event twice. A send made
  after the step returned (no key) is carried back and queued by the run.
* ``ctx.write_event_to_stream`` is carried back and published by the run
  when the step completes, before its result is reduced.
* ``ctx.store`` is the run's store as the step started (a snapshot); what the
  step writes returns as a JSON patch (``StateCheckpoint.diff``) that the run
  applies once, when the step completes, in completion order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from temporalio import activity
from temporalio.common import RawValue
from workflows.context.serializers import BaseSerializer
from workflows.context.state_store import InMemoryStateStore, StateStore, infer_state_type
from workflows.errors import WorkflowRuntimeError
from workflows.events import Event
from workflows.runtime.types.plugin import InternalRunAdapter, WaitResult
from workflows.runtime.types.results import StepWorkerFailed
from workflows.runtime.types.step_function import StepWorkerFunction, as_step_worker_function
from workflows.runtime.types.ticks import TickAddEvent, WorkflowTick

from temporal_workflows.llama._runtime_temporal import _registry, _wire
from temporal_workflows.llama._runtime_temporal._protocol import MAX_STEP_INPUT_CHARS, StepInput, StepOutput
from temporal_workflows.llama._runtime_temporal._server import run_view

__all__ = ["StepActivityAdapter", "llama_step"]


class StepActivityAdapter(InternalRunAdapter):
    """A step's view of its run, inside the activity."""

    def __init__(self, run_id: str, serializer: BaseSerializer, store: StateStore[Any] | None) -> None:
        self._run_id = run_id
        self._serializer = serializer
        self._store = store
        self.stream: list[str] = []
        self.late_sends: list[str] = []

    @property
    def run_id(self) -> str:
        return self._run_id

    async def write_to_event_stream(self, event: Event) -> None:
        _registry.note_type(event)
        self.stream.append(self._serializer.serialize(event))

    async def get_now(self) -> float:
        return time.time()

    async def send_event(self, tick: WorkflowTick) -> None:
        if isinstance(tick, TickAddEvent):
            _registry.note_type(tick.event)
        if isinstance(tick, TickAddEvent) and tick.emission is not None:
            return  # recorded in the step's result (SentEvent), delivered from there exactly once
        self.late_sends.append(self._serializer.serialize(tick))

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
async def llama_step(args: Sequence[RawValue]) -> StepOutput:
    """Run one LlamaIndex step invocation (activity type ``<workflow_name>.<step>``)."""
    inp = activity.payload_converter().from_payload(args[0].payload, StepInput)
    llama_workflow = run_view(_registry.lookup(inp.workflow_name, inp.instance_key))
    serializer = llama_workflow.runtime.get_serializer(llama_workflow)
    if inp.store is not None:
        store: InMemoryStateStore[Any] = InMemoryStateStore.from_dict(inp.store, serializer)
    else:
        store = InMemoryStateStore(infer_state_type(llama_workflow)())
    before = store.checkpoint()
    adapter = StepActivityAdapter(inp.run_id, serializer, store)
    hb = activity.info().heartbeat_timeout
    beating = asyncio.create_task(_heartbeat(hb.total_seconds() / 3 if hb else 10.0))
    token = _registry.current_adapter.set(adapter)
    try:
        outputs = await _step_worker(llama_workflow, inp.step_name)(
            state=_wire.decode_state(serializer, inp.state),
            step_name=inp.step_name,
            event=_wire.decode_event(serializer, inp.event),
            workflow=llama_workflow,
            bound_events=None
            if inp.bound_events is None
            else {k: _wire.decode_event(serializer, v) for k, v in inp.bound_events.items()},
            retry=_wire.decode_retry(serializer, inp.retry),
        )
    finally:
        _registry.current_adapter.reset(token)
        beating.cancel()
    patch = store.checkpoint().diff(before) if inp.store is not None else []
    out = StepOutput(
        outputs=_wire.encode_outputs(outputs),
        stream=adapter.stream,
        late_sends=adapter.late_sends,
        store_patch=patch,
    )
    size = len(out.model_dump_json())
    if size > MAX_STEP_INPUT_CHARS:
        # Returned as it is, the result would be refused by Temporal and the activity retried for ever:
        # the step fails instead (its writes, sends and stream events are dropped with it).
        error = WorkflowRuntimeError(
            f"step {inp.step_name!r}: its result (events, stream writes and ctx.store changes) is {size:,} "
            f"bytes, over the {MAX_STEP_INPUT_CHARS:,} a Temporal payload allows here; keep large values out "
            "of events and the store"
        )
        out = StepOutput(outputs=_wire.encode_outputs([StepWorkerFailed(exception=error, failed_at=time.time())]))
    return out
