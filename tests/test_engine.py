"""Unit tests of the pure superstep engine (``temporal_workflows._engine.machine``), driven by hand.

No executors run here: the tests play the host, handing the engine the results
steps would have produced, so each rule (delivery timing, commit order,
conflicts, reducers, fan-in release, requests, snapshots, the limit) is pinned
down independently of the runners.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields, replace
from typing import Any

import pytest

from temporal_workflows._engine.machine import (
    Engine,
    EngineSnapshot,
    FanInGroup,
    PendingRequest,
    RoutedMessage,
    StateWrite,
    StepResult,
    Topology,
    apply_builtin_reducer,
    check_snapshot,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._events import WorkflowRunState
from temporal_workflows.errors import StateConflictError, SuperstepLimitError, UnknownRequestError, WorkflowError


def topology(
    executors: tuple[str, ...] = ("a", "b", "c", "d"),
    *,
    fan_ins: dict[str, FanInGroup] | None = None,
    reducers: dict[str, str] | None = None,
    max_iterations: int = 100,
) -> Topology:
    return Topology(
        name="t",
        start_executor_id=executors[0],
        executor_ids=executors,
        fan_in_groups=fan_ins or {},
        reducers=reducers or {},
        max_iterations=max_iterations,
        signature_hash="sig",
    )


def env(value: Any) -> Envelope:
    return Envelope(None, value)


def send(target: str, value: Any, source: str, fan_in: str | None = None) -> RoutedMessage:
    return RoutedMessage.one(target, env(value), source, fan_in)


def write(key: str, value: Any) -> StateWrite:
    return StateWrite(key, None if value is None else env(value))


def request(rid: str, executor_id: str = "a", superstep: int = 1) -> PendingRequest:
    return PendingRequest(rid, executor_id, env({"q": rid}), "str", {}, superstep)


def step(engine: Engine, *results: StepResult, reduced: dict[str, Envelope] | None = None) -> None:
    """Run one superstep whose tasks produce ``results`` (in task order)."""
    engine.begin_superstep()
    engine.apply_commit(engine.prepare_commit(list(results)), reduced)


def state(engine: Engine) -> dict[str, Any]:
    return {k: v.data for k, v in engine.state.items()}


# -- delivery and superstep boundaries --------------------------------------------


def test_messages_sent_in_superstep_k_are_tasks_of_superstep_k_plus_1() -> None:
    engine = Engine(topology())
    engine.start(env("go"))
    tasks = engine.begin_superstep()
    assert [(t.superstep, t.executor_id, t.kind) for t in tasks] == [(1, "a", "message")]
    assert tasks[0].messages == (env("go"),) and tasks[0].source_ids == (None,)
    engine.apply_commit(engine.prepare_commit([StepResult(sent=[send("b", 1, "a"), send("c", 2, "a")])]))
    assert engine.superstep == 1 and engine.run_state() is WorkflowRunState.IN_PROGRESS

    tasks = engine.begin_superstep()
    assert [(t.superstep, t.index, t.executor_id) for t in tasks] == [(2, 0, "b"), (2, 1, "c")]
    assert [t.messages[0].data for t in tasks] == [1, 2]
    assert [t.source_ids for t in tasks] == [("a",), ("a",)]
    assert tasks[1].step_key == "2.1.c"


def test_one_task_per_delivered_message_even_to_the_same_executor() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", i, "a") for i in range(3)]))
    tasks = engine.begin_superstep()
    assert [(t.executor_id, t.messages[0].data) for t in tasks] == [("b", 0), ("b", 1), ("b", 2)]


def test_run_is_idle_once_nothing_is_sent() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult())
    assert not engine.has_work()
    assert engine.run_state() is WorkflowRunState.IDLE


def test_send_to_unknown_executor_is_an_error() -> None:
    engine = Engine(topology())
    with pytest.raises(WorkflowError, match="'ghost'"):
        engine.send("ghost", env(1))


def test_a_second_superstep_cannot_begin_before_the_first_is_committed() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    engine.begin_superstep()
    with pytest.raises(WorkflowError, match="already running"):
        engine.begin_superstep()
    with pytest.raises(WorkflowError, match="expected 1 step results, got 0"):
        engine.prepare_commit([])


# -- commit: isolation, conflicts, reducers -----------------------------------------


def test_state_is_committed_only_at_the_boundary() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    engine.begin_superstep()
    plan = engine.prepare_commit([StepResult(writes=[write("k", 1)])])
    assert engine.state == {}  # prepared, not yet visible
    engine.apply_commit(plan)
    assert state(engine) == {"k": 1}


def test_two_steps_writing_one_key_is_a_conflict_naming_key_and_both_executors() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 1, "a"), send("c", 1, "a")]))
    engine.begin_superstep()
    with pytest.raises(StateConflictError) as info:
        engine.prepare_commit([StepResult(writes=[write("owner", "b")]), StepResult(writes=[write("owner", "c")])])
    err = info.value
    assert err.key == "owner" and err.executor_ids == ("b", "c") and err.superstep == 2
    assert "'owner'" in str(err) and "'b'" in str(err) and "'c'" in str(err) and "superstep 2" in str(err)


def test_a_delete_and_a_write_of_one_key_also_conflict() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult(writes=[write("k", 1)], sent=[send("b", 1, "a"), send("c", 1, "a")]))
    engine.begin_superstep()
    with pytest.raises(StateConflictError):
        engine.prepare_commit([StepResult(writes=[write("k", None)]), StepResult(writes=[write("k", 2)])])


def test_one_step_writing_a_key_twice_keeps_its_last_write() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult(writes=[write("k", 1), write("k", 2), write("gone", 1), write("gone", None)]))
    assert state(engine) == {"k": 2}


def test_aborted_superstep_commits_nothing_and_can_be_rerun() -> None:
    engine = Engine(topology())
    engine.start(env("go"))
    step(engine, StepResult(writes=[write("k", 1)], sent=[send("b", 1, "a")]))
    before = engine.begin_superstep()
    engine.abort_superstep()
    assert state(engine) == {"k": 1} and engine.superstep == 1
    assert engine.begin_superstep() == before


@pytest.mark.parametrize(
    ("kind", "committed", "writes", "expected"),
    [
        ("append", [0], [[1], [2, 3], [4]], [0, 1, 2, 3, 4]),
        ("sum", 10, [1, 2, 3], 16),
        ("merge", {"x": 0, "keep": 1}, [{"x": 1, "y": 1}, {"x": 2}, {"z": 3}], {"x": 2, "keep": 1, "y": 1, "z": 3}),
    ],
)
def test_builtin_reducers_combine_writes_in_task_order(
    kind: str, committed: Any, writes: list[Any], expected: Any
) -> None:
    names = tuple(f"w{i}" for i in range(len(writes)))
    engine = Engine(topology(("start", *names), reducers={"k": kind}))
    engine.start(env(0))
    step(engine, StepResult(writes=[write("k", committed)], sent=[send(n, 0, "start") for n in names]))
    step(engine, *(StepResult(writes=[write("k", w)]) for w in writes))
    assert state(engine)["k"] == expected


def test_append_order_follows_task_order_not_the_order_results_were_produced() -> None:
    engine = Engine(topology(reducers={"log": "append"}))
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 0, "a"), send("c", 0, "a"), send("d", 0, "a")]))
    tasks = engine.begin_superstep()
    # The host may collect results in any completion order, but hands them over by task index.
    by_completion = {t.index: StepResult(writes=[write("log", [t.executor_id])]) for t in reversed(tasks)}
    engine.apply_commit(engine.prepare_commit([by_completion[i] for i in range(len(tasks))]))
    assert state(engine)["log"] == ["b", "c", "d"]


def test_callable_reducer_is_handed_back_to_the_host_with_writes_in_task_order() -> None:
    engine = Engine(topology(reducers={"best": "callable"}))
    engine.start(env(0))
    step(
        engine,
        StepResult(writes=[write("best", 5)], sent=[send("b", 0, "a"), send("c", 0, "a")]),
        reduced={"best": env(5)},
    )
    engine.begin_superstep()
    plan = engine.prepare_commit([StepResult(writes=[write("best", 7)]), StepResult(writes=[write("best", 3)])])
    assert [(r.key, r.committed, [w.data for w in r.writes]) for r in plan.reductions] == [("best", env(5), [7, 3])]
    with pytest.raises(WorkflowError, match="'best'"):
        engine.apply_commit(plan)  # the host did not run the reducer
    engine.apply_commit(plan, {"best": env(7)})
    assert state(engine) == {"best": 7}


def test_a_delete_resets_a_reduced_key_and_later_writes_reduce_onto_nothing() -> None:
    engine = Engine(topology(reducers={"log": "append"}))
    engine.start(env(0))
    step(engine, StepResult(writes=[write("log", [1])], sent=[send("b", 0, "a"), send("c", 0, "a")]))
    step(engine, StepResult(writes=[write("log", None)]), StepResult(writes=[write("log", [2])]))
    assert state(engine) == {"log": [2]}


def test_builtin_reducer_errors_name_the_key() -> None:
    with pytest.raises(WorkflowError, match="'items'"):
        apply_builtin_reducer("append", "items", Envelope("list[pkg:A]", [{"x": 1}]), [Envelope("list[pkg:B]", [{}])])
    with pytest.raises(WorkflowError, match="'total'"):
        apply_builtin_reducer("sum", "total", env(1e308), [env(1e308)])
    with pytest.raises(WorkflowError, match="unknown reducer"):
        apply_builtin_reducer("max", "k", None, [env(1)])


# -- fan-in ------------------------------------------------------------------------------


def fan_in_engine() -> Engine:
    group = FanInGroup("join", ("b", "c"), "d")
    return Engine(topology(fan_ins={"join": group}))


def test_fan_in_fires_only_once_every_source_has_sent_with_messages_in_source_order() -> None:
    engine = fan_in_engine()
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 0, "a")]))  # c is not sent anything yet
    step(engine, StepResult(sent=[send("d", "from-b", "b", fan_in="join")]))
    assert not engine.has_work()  # d must not run with only b's message
    assert {s: [m.data for m in ms] for s, ms in engine.fan_in_buffers["join"].items()} == {"b": ["from-b"]}

    engine.send("c", env(0))
    step(engine, StepResult(sent=[send("d", "from-c", "c", fan_in="join")]))
    tasks = engine.begin_superstep()
    assert [(t.executor_id, t.kind) for t in tasks] == [("d", "fan_in")]
    assert [m.data for m in tasks[0].messages] == ["from-b", "from-c"]
    assert tasks[0].source_ids == ("b", "c")
    assert engine.fan_in_buffers == {}


def test_fan_in_released_in_the_superstep_after_the_last_source_sent_keeps_every_message() -> None:
    engine = fan_in_engine()
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 0, "a"), send("c", 0, "a")]))
    # c completes first in wall-clock terms; the list is still in source order.
    step(
        engine,
        StepResult(sent=[send("d", "b1", "b", fan_in="join"), send("d", "b2", "b", fan_in="join")]),
        StepResult(sent=[send("d", "c1", "c", fan_in="join")]),
    )
    (task,) = engine.begin_superstep()
    assert task.superstep == 3 and [m.data for m in task.messages] == ["b1", "b2", "c1"]


# -- human requests ------------------------------------------------------------------


def test_requests_idle_the_run_and_a_response_becomes_a_task_next_superstep() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult(requests=[request("r1"), request("r2")]))
    assert engine.run_state() is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert set(engine.pending_requests) == {"r1", "r2"}

    with pytest.raises(UnknownRequestError) as info:
        engine.respond("nope", env("x"))
    assert info.value.request_id == "nope" and sorted(info.value.pending) == ["r1", "r2"]
    assert "'nope'" in str(info.value) and "r1" in str(info.value)

    answered = engine.respond("r2", env("yes"))
    assert answered.request_id == "r2"
    assert engine.run_state() is WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS
    (task,) = engine.begin_superstep()
    assert task.kind == "response" and task.executor_id == "a" and task.superstep == 2
    assert task.request is not None and task.request.request_id == "r2" and task.messages == (env("yes"),)
    engine.apply_commit(engine.prepare_commit([StepResult()]))
    assert set(engine.pending_requests) == {"r1"}
    with pytest.raises(UnknownRequestError):
        engine.respond("r2", env("again"))  # answered once


# -- snapshots -----------------------------------------------------------------------


def test_snapshot_restore_continues_identically_with_buffers_requests_and_responses() -> None:
    engine = fan_in_engine()
    engine.start(env(0))
    step(engine, StepResult(writes=[write("k", {"v": 1})], sent=[send("b", 0, "a")], requests=[request("r1")]))
    step(engine, StepResult(sent=[send("d", "from-b", "b", fan_in="join")], requests=[request("r2", "b", 2)]))
    engine.respond("r1", env("answer"))
    engine.send("c", env(1))
    snap = engine.snapshot()

    # Built straight into the frozen dataclass: the same object its constructor makes, fields in order.
    assert snap == EngineSnapshot(**vars(snap)) and list(vars(snap)) == [f.name for f in fields(EngineSnapshot)]
    with pytest.raises(FrozenInstanceError):
        snap.superstep = 9  # type: ignore[misc]
    clone = Engine(engine.topology, snap)
    assert clone.snapshot() == snap
    assert clone.run_state() is engine.run_state()
    assert list(clone.pending_requests) == ["r2"]  # r1 is answered, not pending
    for e in (engine, clone):
        tasks = e.begin_superstep()
        e.apply_commit(
            e.prepare_commit(
                [
                    StepResult(sent=[send("d", "from-c", "c", fan_in="join")]) if t.executor_id == "c" else StepResult()
                    for t in tasks
                ]
            )
        )
    assert engine.snapshot() == clone.snapshot()
    (task,) = clone.begin_superstep()
    assert [m.data for m in task.messages] == ["from-b", "from-c"]


def test_snapshot_is_refused_mid_superstep() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    engine.begin_superstep()
    with pytest.raises(WorkflowError, match="middle of a superstep"):
        engine.snapshot()


def test_snapshot_is_not_affected_by_later_commits() -> None:
    engine = Engine(topology())
    engine.start(env(0))
    step(engine, StepResult(writes=[write("k", 1)], sent=[send("b", 0, "a")]))
    snap = engine.snapshot()
    step(engine, StepResult(writes=[write("k", 2)]))
    assert snap.state["k"].data == 1 and snap.superstep == 1


def consistent_snapshot() -> EngineSnapshot:
    """A snapshot with something of every kind: state, a fan-in buffer, a pending and an answered request."""
    engine = fan_in_engine()
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 0, "a")], requests=[request("r1"), request("r2", "c")]))
    step(engine, StepResult(writes=[write("k", 1)], sent=[send("d", "from-b", "b", fan_in="join")]))
    engine.respond("r1", env("answer"))
    return engine.snapshot()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        # A response to a request the snapshot does not hold (a forged Temporal run input).
        ({"responses": (("ghost", env("x")),)}, ["a response answers request 'ghost'", "'r1', 'r2'"]),
        ({"responses": (("r1", env("x")), ("r1", env("y")))}, ["request 'r1' is answered twice"]),
        ({"pending": (send("nobody", 0, "a"),)}, ["message 0 (for 'nobody')", "does not have"]),
        ({"pending": (RoutedMessage("b", (), ()),)}, ["message 0 (for 'b') holds no message"]),
        ({"pending": (send("d", 0, "b", fan_in="nope"),)}, ["fan-in group 'nope'"]),
        ({"pending": (send("c", 0, "b", fan_in="join"),)}, ["fan-in group 'join', whose target is 'd'"]),
        ({"fan_in_buffers": {"nope": {"b": (env(0),)}}}, ["fan-in buffer 'nope'"]),
        ({"fan_in_buffers": {"join": {"a": (env(0),)}}}, ["fan-in buffer 'join' holds messages from 'a'", "'b', 'c'"]),
        ({"pending_requests": {"r1": request("r1"), "r9": request("r2", "c")}}, ["stored as 'r9' has the id 'r2'"]),
        ({"pending_requests": {"r1": request("r1"), "r2": request("r2", "zed")}}, ["'r2'", "executor 'zed'"]),
        ({"superstep": -1}, ["superstep is -1"]),
        ({"iterations": -1}, ["iteration count is -1"]),
    ],
)
def test_restore_refuses_an_inconsistent_snapshot_naming_what_is_inconsistent(
    change: dict[str, Any], named: list[str]
) -> None:
    snap = consistent_snapshot()
    engine = fan_in_engine()
    with pytest.raises(WorkflowError) as info:
        engine.restore(replace(snap, **change))
    message = str(info.value)
    assert message.startswith("the snapshot is inconsistent with graph 't': ")
    for text in named:
        assert text in message, (text, message)
    # Nothing was restored: the engine is as it was.
    assert engine.superstep == 0 and not engine.has_work() and engine.state == {}
    with pytest.raises(WorkflowError):
        Engine(engine.topology, replace(snap, **change))  # the constructor restores the same way


def test_restore_takes_a_consistent_snapshot_and_runs_its_answered_request() -> None:
    snap = consistent_snapshot()
    check_snapshot(fan_in_engine().topology, snap)
    engine = Engine(fan_in_engine().topology, snap)
    tasks = engine.begin_superstep()
    assert [(t.kind, t.executor_id) for t in tasks] == [("response", "a")]
    assert tasks[0].request is not None and tasks[0].request.request_id == "r1"
    assert list(engine.pending_requests) == ["r2"] and engine.fan_in_buffers == {"join": {"b": [env("from-b")]}}


def test_an_inconsistent_snapshot_names_a_few_problems_and_quotes_names_by_prefix() -> None:
    long_id = "x" * 10_000
    snap = replace(
        consistent_snapshot(),
        responses=tuple((f"{i}{long_id}", env(i)) for i in range(8)),
    )
    with pytest.raises(WorkflowError) as info:
        fan_in_engine().restore(snap)
    message = str(info.value)
    assert len(message) < 2_000
    assert "(10,001 characters)" in message and "; and 3 more" in message


# -- the superstep limit ---------------------------------------------------------------


def test_superstep_limit_names_the_limit_and_the_waiting_targets() -> None:
    engine = Engine(topology(max_iterations=2))
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 0, "a")]))
    step(engine, StepResult(sent=[send("c", 0, "b")]))
    with pytest.raises(SuperstepLimitError) as info:
        engine.begin_superstep()
    assert info.value.limit == 2 and info.value.superstep == 3
    assert "max_iterations=2" in str(info.value) and "'c'" in str(info.value)


def test_a_response_to_an_idle_run_starts_a_new_activation_of_the_limit() -> None:
    engine = Engine(topology(max_iterations=2))
    engine.start(env(0))
    step(engine, StepResult(sent=[send("b", 0, "a")]))
    step(engine, StepResult(requests=[request("r", "b", 2)]))
    engine.respond("r", env("ok"))
    step(engine, StepResult(sent=[send("c", 0, "b")]))
    step(engine, StepResult())
    assert engine.superstep == 4 and not engine.has_work()


def test_one_status_vocabulary_maps_every_event_state_and_keeps_its_wire_values() -> None:
    from pydantic_core import to_json

    from temporal_workflows._engine.driver import RunStatus

    # The values are what the status query, the GraphRunStatus search attribute and run results hold.
    assert [s.value for s in RunStatus] == [
        "starting",
        "running",
        "idle",
        "waiting_for_input",
        "completed",
        "failed",
        "continued_as_new",
    ]
    assert to_json({"status": RunStatus.WAITING_FOR_INPUT}) == b'{"status":"waiting_for_input"}'
    assert f"{RunStatus.IDLE}" == "idle" and RunStatus.IDLE == "idle"
    assert {state: RunStatus.of(state) for state in WorkflowRunState} == {
        WorkflowRunState.STARTED: RunStatus.STARTING,
        WorkflowRunState.IN_PROGRESS: RunStatus.RUNNING,
        WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS: RunStatus.RUNNING,
        WorkflowRunState.IDLE: RunStatus.IDLE,
        WorkflowRunState.IDLE_WITH_PENDING_REQUESTS: RunStatus.WAITING_FOR_INPUT,
        WorkflowRunState.FAILED: RunStatus.FAILED,
        WorkflowRunState.CANCELLED: RunStatus.FAILED,
    }
    assert RunStatus.of(WorkflowRunState.IDLE_WITH_PENDING_REQUESTS, finished=True) is RunStatus.COMPLETED
    assert [s for s in RunStatus if s.closed] == [RunStatus.COMPLETED, RunStatus.FAILED]
