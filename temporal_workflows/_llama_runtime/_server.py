"""The bridge that lets ``llama-agents-server``'s ``WorkflowServer`` serve runs of a ``TemporalRuntime``.

``WorkflowServer(runtime=rt)`` wraps the runtime in its ``ServerRuntimeDecorator``, whose internal
adapter records each event the run writes (and the run's status) into the server's workflow store,
inside ``write_to_event_stream``; its HTTP API reads events and statuses only from that store. Under
this runtime the loop is Temporal workflow code, possibly on another worker process, so that store
I/O must not happen there (it would be I/O in workflow code, repeated on replay, and lost on a
worker that is not the server). Instead:

* on the worker, the loop and the steps see the workflow with the runtime *under* the server's
  decorators (:func:`run_view`), so workflow and activity code never touch the server's store;
* in the server's process, a mirror task per run (:func:`mirror_into_server`) reads the run's event
  stream (the ``workflow_streams`` topic ``stream_events()`` reads) and hands each event to the
  server's own internal adapter, wrapped around a stand-in that is never replaying. The server's
  code records the event and updates the handler's status exactly as it does for its own runs.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from typing import TYPE_CHECKING, Any

from workflows.events import Event, StopEvent
from workflows.runtime.types.plugin import InternalRunAdapter, Runtime, WaitResult, WeakIdentityKeyDictionary
from workflows.runtime.types.ticks import WorkflowTick
from workflows.workflow import Workflow

from temporal_workflows._llama_runtime import _registry
from temporal_workflows._llama_runtime._llama_private import server_decorated, server_status_updater, set_runtime_view

if TYPE_CHECKING:
    from workflows.runtime.types.plugin import ExternalRunAdapter

__all__ = ["is_server_runtime", "mirror_into_server", "run_view"]

_log = logging.getLogger(__name__)

_SERVER_PACKAGE = "llama_agents.server"


def is_server_runtime(runtime: Runtime) -> bool:
    """Whether ``runtime`` is one of ``llama-agents-server``'s decorators (recorded from outside the loop)."""
    return type(runtime).__module__.startswith(_SERVER_PACKAGE)


def _under_server(runtime: Runtime) -> Runtime:
    """``runtime`` without the server's decorators on top (other decorators, e.g. ``verbose=True``'s
    printer, stay)."""
    while is_server_runtime(runtime) and isinstance(server_decorated(runtime), Runtime):
        runtime = server_decorated(runtime)
    return runtime


_views: WeakIdentityKeyDictionary[Workflow, Workflow] = WeakIdentityKeyDictionary()
_views_lock = threading.Lock()


def run_view(workflow: Workflow) -> Workflow:
    """The workflow as the run's loop and steps see it on a worker: ``workflow`` itself, unless
    llama-agents-server serves it from this process (``worker=True``), then a shallow copy whose
    runtime is the one under the server's decorators.

    LlamaIndex's loop and step wrapper take their adapter from ``workflow.runtime`` (the step's
    ``Context``, ``ctx.store``, ``write_event_to_stream``); through the server's decorator they would
    write events and the store to the server's store from workflow and activity code, and the step's
    ``ctx.store`` would not be the run's. The copy shares everything else (steps, resources, the
    user's attributes) with the served instance.
    """
    if not is_server_runtime(workflow.runtime):
        return workflow
    with _views_lock:
        view = _views.get(workflow)
        if view is None:
            view = copy.copy(workflow)
            set_runtime_view(view, _under_server(workflow.runtime))  # no (un)tracking
            _views[workflow] = view
        return view


class _MirrorAdapter(InternalRunAdapter):
    """What the server's internal adapter wraps in the mirror: a run that is never replaying and only
    receives the events the real run already wrote."""

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id

    @property
    def run_id(self) -> str:
        return self._run_id

    async def write_to_event_stream(self, event: Event) -> None:
        return None

    async def get_now(self) -> float:
        raise NotImplementedError("the server mirror of a TemporalRuntime run has no clock")

    async def send_event(self, tick: WorkflowTick) -> None:
        raise NotImplementedError("the server mirror of a TemporalRuntime run takes no ticks")

    async def wait_receive(self, timeout_seconds: float | None = None) -> WaitResult:
        raise NotImplementedError("the server mirror of a TemporalRuntime run takes no ticks")

    def is_replaying(self) -> bool:
        return False


async def mirror_into_server(workflow: Workflow, adapter: ExternalRunAdapter) -> None:
    """Record a run's events and final status in the server that serves ``workflow``.

    Runs in the server's process for as long as the run goes. Events come once each, in the order
    the run wrote them (the stream topic is exactly-once); the terminal event (``StopEvent`` or a
    failed / cancelled / timed-out one) sets the handler's status as the server does for its own runs.
    """
    token = _registry.current_adapter.set(_MirrorAdapter(adapter.run_id))
    try:
        recorder = workflow.runtime.get_internal_adapter(workflow)
    finally:
        _registry.current_adapter.reset(token)
    try:
        async for event in adapter.stream_published_events():
            await recorder.write_to_event_stream(event)
            if isinstance(event, StopEvent):
                return
    except asyncio.CancelledError:
        raise
    except Exception as e:  # the run ended without a terminal event on its stream
        _log.warning("TemporalRuntime run %s ended without a terminal event: %s", adapter.run_id, e)
        update: Any = server_status_updater(workflow.runtime)
        if update is not None:
            await update(run_id=adapter.run_id, status="failed", error=str(e))
