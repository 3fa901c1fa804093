"""The replay gate decides from the activations that follow whether what live workflow code emitted counts.

Each case is the sequence of activations sdk-core sends a workflow instance
(built by hand here, as the worker receives them) and what the gate must do
with the effects the live one emitted: a query's run-ahead is dropped, a task
that completed is released once, a task that did not is dropped.
"""

from __future__ import annotations

import time

import pytest
from temporalio.bridge.proto.workflow_activation import (
    FireTimer,
    QueryWorkflow,
    RemoveFromCache,
    WorkflowActivation,
    WorkflowActivationJob,
)

from temporal_workflows.temporal._telemetry.gate import LEGACY_QUERY_ID, ReplayGate

Reason = RemoveFromCache.EvictionReason


def live(history_length: int) -> WorkflowActivation:
    return WorkflowActivation(
        is_replaying=False, history_length=history_length, jobs=[WorkflowActivationJob(fire_timer=FireTimer(seq=1))]
    )


def replaying(history_length: int) -> WorkflowActivation:
    return WorkflowActivation(
        is_replaying=True, history_length=history_length, jobs=[WorkflowActivationJob(fire_timer=FireTimer(seq=1))]
    )


def query(history_length: int, query_id: str = LEGACY_QUERY_ID) -> WorkflowActivation:
    job = WorkflowActivationJob(query_workflow=QueryWorkflow(query_id=query_id, query_type="status"))
    return WorkflowActivation(is_replaying=True, history_length=history_length, jobs=[job])


def evicted(reason: int = Reason.CACHE_FULL) -> WorkflowActivation:
    job = WorkflowActivationJob(remove_from_cache=RemoveFromCache(message="", reason=reason))  # type: ignore[arg-type]
    return WorkflowActivation(is_replaying=True, jobs=[job])


class Recorder:
    def __init__(self, gate: ReplayGate) -> None:
        self.gate = gate
        self.applied: list[str] = []

    def run(self, key: int, act: WorkflowActivation, *emits: str) -> None:
        """One activation of instance ``key``, during which workflow code emits ``emits``."""
        with self.gate.activation(key, act):
            for name in emits:
                if not self.gate.hold(lambda name=name: self.applied.append(name)):
                    self.applied.append(name)


@pytest.fixture
def rec() -> Recorder:
    return Recorder(ReplayGate(hold_seconds=60))


def test_a_querys_run_ahead_on_a_rebuilt_instance_is_dropped(rec: Recorder) -> None:
    # A worker with no cache answers a legacy query: replay, run ahead to the history's end, query, eviction.
    rec.run(1, replaying(3))
    rec.run(1, replaying(8))
    rec.run(1, live(12), "superstep 1 ended")
    rec.run(1, query(12))
    rec.run(1, evicted())
    assert rec.applied == []
    # The real workflow task, on another instance: its effects count, once.
    rec.run(2, replaying(3))
    rec.run(2, replaying(8))
    rec.run(2, live(13), "superstep 1 ended")
    rec.run(2, evicted())
    assert rec.applied == ["superstep 1 ended"]
    assert rec.gate.dropped == 1


def test_a_completed_task_on_an_uncached_worker_is_released_when_it_is_evicted(rec: Recorder) -> None:
    rec.run(1, replaying(3))
    rec.run(1, live(8), "a", "b")
    assert rec.applied == []  # held until the task is known to count
    rec.run(1, query(8, query_id="4b1f-query-in-task"))  # a query that came with the task: no verdict
    rec.run(1, evicted(Reason.CACHE_FULL))
    assert rec.applied == ["a", "b"]


def test_a_legacy_query_whose_history_goes_further_proves_the_task_completed(rec: Recorder) -> None:
    rec.run(1, live(8), "a")
    rec.run(1, query(10))  # its history holds the task's completion (and more): released at once
    assert rec.applied == ["a"]
    rec.run(1, evicted())
    assert rec.applied == ["a"]


def test_a_cached_run_going_on_to_its_next_task_releases_the_previous_one(rec: Recorder) -> None:
    rec.run(1, live(8), "a")
    rec.run(1, live(8), "b")  # the same task goes on (a local activity resolved): still held
    assert rec.applied == []
    rec.run(1, live(14), "c")
    assert rec.applied == ["a", "b"]


def test_a_run_ahead_on_a_cached_instance_that_then_goes_on_counts(rec: Recorder) -> None:
    rec.run(1, live(8), "a")
    rec.run(1, live(12), "ahead")
    rec.run(1, query(12))
    assert rec.applied == ["a"]
    rec.run(1, live(16), "next")  # the instance kept the run and took the next task: what ran ahead was real
    assert rec.applied == ["a", "ahead"]


@pytest.mark.parametrize(
    "reason", [Reason.NONDETERMINISM, Reason.LANG_FAIL, Reason.TASK_NOT_FOUND, Reason.UNHANDLED_COMMAND, Reason.FATAL]
)
def test_an_eviction_saying_the_task_did_not_complete_drops_it(rec: Recorder, reason: int) -> None:
    rec.run(1, live(8), "a")
    rec.run(1, evicted(reason))
    assert rec.applied == []


def test_a_cached_run_that_answered_a_query_and_is_then_shut_down_keeps_its_task(rec: Recorder) -> None:
    rec.run(1, replaying(3))
    rec.run(1, live(8), "a")  # a real task on an instance rebuilt after a restart
    rec.run(1, query(8))  # a status query for the cached run: nothing new in its history
    rec.run(1, evicted(Reason.LANG_REQUESTED))  # the worker shuts down
    assert rec.applied == ["a"]


def test_queries_emit_at_once(rec: Recorder) -> None:
    rec.run(1, query(8), "HandleQuery span")  # a live operation, answered once per request
    assert rec.applied == ["HandleQuery span"]


def test_what_replays_holds_nothing_and_code_outside_workflows_is_not_held(rec: Recorder) -> None:
    rec.run(1, replaying(8), "never held")  # (replaying code skips its spans before it reaches the gate)
    assert rec.applied == ["never held"]
    assert not rec.gate.hold(lambda: None)  # no activation on this thread


def test_a_cached_run_that_waits_is_released_after_the_hold() -> None:
    rec = Recorder(ReplayGate(hold_seconds=0.2))
    rec.run(1, live(8), "a")
    deadline = time.monotonic() + 10
    while not rec.applied and time.monotonic() < deadline:
        time.sleep(0.02)
    assert rec.applied == ["a"]
