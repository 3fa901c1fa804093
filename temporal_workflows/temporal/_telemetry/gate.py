"""The replay gate: what live workflow code emits is held until its workflow task is known to count.

Workflow code runs more often than its workflow tasks count. Replays are
flagged (``is_replaying``) and emit nothing. But two other kinds of execution
look live to workflow code:

* **A query's run-ahead.** A query that reaches a worker that must rebuild the
  run (its workflow cache is off, or the run is not in it) arrives as a
  "legacy" query task carrying the whole history, including events that no
  workflow task has processed yet (an activity that just completed, a
  signal). sdk-core replays the history and then runs those events with
  ``is_replaying`` false, answers the query and throws the commands away; the
  workflow task that really processes them runs the same code again moments
  later. Spans ended and metrics recorded in the run-ahead were exported
  twice, in the same process tens of milliseconds apart, or by two workers.
* **A task that does not complete**: the worker is killed between running a
  task and reporting it, or the server refuses the completion (the task timed
  out, a new event makes its commands invalid). The next worker runs it live
  again.

So every effect of live workflow code (a span's end, a metric recording) is
handed to this gate, which holds it per workflow instance and decides from
the activations that follow:

* the next activation is a **legacy query** (sdk-core names it
  ``legacy_query``) whose history ends where the held activation's did: the
  held effects may come from its run-ahead. They are dropped if sdk-core
  then evicts the instance to keep its cache in bounds (what it does with an
  instance it built for one query when the cache is off or full; the real
  task will run them again, here or elsewhere), and released if the
  instance stays (a cached run answering a query after its task) and goes
  on to another task, is evicted for another reason (a worker shutting
  down) or waits. A legacy query whose history goes further holds at least
  the held task's completion: release;
* the next activation is a **new workflow task** (a greater history length):
  the earlier ones counted, release;
* an **eviction** says why: a failed, refused or lost task (nondeterminism, a
  failed activation, task not found, an unhandled command, a fatal error) drops
  what it held; any other (cache full, workflow ending, shutdown) releases;
* nothing arrives for :data:`HOLD_SECONDS`: release (a cached run waiting for
  input).

Queries and update validators are live operations answered once per request
even on a replaying instance, so what they emit passes straight through. A
worker killed before a release loses what it held, as it loses what its
exporters had not sent yet: telemetry is exported at most once per fact, and
exactly once unless a worker dies within seconds of it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from temporalio.bridge.proto.workflow_activation import RemoveFromCache, WorkflowActivation

__all__ = ["GATE", "HOLD_SECONDS", "LEGACY_QUERY_ID", "ReplayGate"]

HOLD_SECONDS: Final = 2.0
"""How long a cached run's effects wait for a next activation before they are released anyway."""

LEGACY_QUERY_ID: Final = "legacy_query"
"""The query id sdk-core gives a query that came as its own task (with the run's whole history)."""

_Reason = RemoveFromCache.EvictionReason
_TASK_DID_NOT_COUNT: Final = frozenset(
    {
        _Reason.NONDETERMINISM,
        _Reason.LANG_FAIL,
        _Reason.TASK_NOT_FOUND,
        _Reason.UNHANDLED_COMMAND,
        _Reason.FATAL,
        _Reason.PAGINATION_OR_HISTORY_FETCH,
    }
)
"""Evictions after which the workflow task the instance last ran will run again: what it emitted is void."""

Effect = Callable[[], None]


@dataclass
class _Held:
    """One workflow instance's held effects."""

    effects: list[Effect] = field(default_factory=list)
    history_length: int = -1
    since: float = 0.0
    after_legacy_query: bool = False


class ReplayGate:
    """Holds live workflow code's effects per workflow instance until its task is known to count (module doc)."""

    def __init__(self, hold_seconds: float = HOLD_SECONDS) -> None:
        self.hold_seconds = hold_seconds
        self._lock = threading.Lock()
        self._instances: dict[int, _Held] = {}
        self._local = threading.local()
        self._timer: threading.Thread | None = None
        self._wake = threading.Event()
        self.released = 0
        self.dropped = 0

    # -- what the gated workflow runner reports -------------------------------------------------

    @contextmanager
    def activation(self, key: int, act: WorkflowActivation) -> Iterator[None]:
        """Around one activation of the instance ``key``: settle what it held, and hold what this one emits."""
        jobs = act.jobs
        eviction = next((j.remove_from_cache for j in jobs if j.HasField("remove_from_cache")), None)
        queries = bool(jobs) and all(j.HasField("query_workflow") for j in jobs)
        holding: _Held | None = None
        with self._lock:
            held = self._instances.get(key)
            if eviction is not None:
                held = self._instances.pop(key, None)
                if held is not None:
                    ran_ahead = held.after_legacy_query and eviction.reason == _Reason.CACHE_FULL
                    if ran_ahead or eviction.reason in _TASK_DID_NOT_COUNT:
                        self._drop(held)
                    else:
                        self._release(held)
            elif queries:
                if (
                    held is not None
                    and held.effects
                    and any(j.query_workflow.query_id == LEGACY_QUERY_ID for j in jobs)
                ):
                    if act.history_length == held.history_length:
                        # The query's own history ends where the held activation did: that was its run-ahead.
                        held.after_legacy_query = True
                    else:
                        # Its history goes past the held task (at least that task's completion): it counted.
                        self._release(held)
            elif not act.is_replaying:
                if held is None:
                    held = self._instances[key] = _Held()
                elif held.effects and act.history_length != held.history_length:
                    self._release(held)  # another task reached this instance: the earlier ones counted
                held.after_legacy_query = False
                held.history_length = act.history_length
                holding = held
        previous = getattr(self._local, "held", None)
        self._local.held = holding
        try:
            yield
        finally:
            self._local.held = previous
            if holding is not None and holding.effects:
                self._ensure_timer()

    # -- what workflow code emits --------------------------------------------------------------

    def hold(self, effect: Effect) -> bool:
        """Hold ``effect`` if live workflow code of a gated instance is running on this thread; else ``False``
        (the caller applies it now)."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            return False
        with self._lock:
            if not held.effects:
                held.since = time.monotonic()
            held.effects.append(effect)
        return True

    @property
    def active(self) -> bool:
        """Whether live workflow code of a gated instance is running on this thread."""
        return getattr(self._local, "held", None) is not None

    def flush(self) -> None:
        """Release everything held now (a process about to exit, a test that reads what arrived)."""
        with self._lock:
            for held in self._instances.values():
                self._release(held)

    # -- internals --------------------------------------------------------------------------------

    def _release(self, held: _Held) -> None:
        effects, held.effects = held.effects, []
        for effect in effects:
            with contextlib.suppress(Exception):  # an exporter's problem must not reach a workflow
                effect()
        self.released += len(effects)

    def _drop(self, held: _Held) -> None:
        self.dropped += len(held.effects)
        held.effects = []

    def _ensure_timer(self) -> None:
        if self._timer is not None and self._timer.is_alive():
            return
        self._timer = threading.Thread(target=self._tick, name="temporal-workflows-telemetry-gate", daemon=True)
        self._timer.start()

    def _tick(self) -> None:
        while True:
            self._wake.wait(self.hold_seconds / 4)
            now = time.monotonic()
            with self._lock:
                waiting = False
                for held in self._instances.values():
                    if held.effects and now - held.since >= self.hold_seconds:
                        self._release(held)
                    waiting = waiting or bool(held.effects)
                if not waiting:
                    self._timer = None
                    return


GATE: Final = ReplayGate()
"""The process's gate, shared by the gated runner (activations) and the gated tracer provider and metrics."""
