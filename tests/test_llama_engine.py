"""The engine primitives the LlamaIndex front end adds: batched executors, a step that halts the run, a step that
answers a pending request. Each is pure engine bookkeeping, so both hosts get it (and the wire carries it)."""

from __future__ import annotations

from typing import Any

from temporal_workflows._engine.machine import Engine, PendingRequest, RoutedMessage, StepResult, StepTask, Topology
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._wire import decode_step_result, encode_step_result


def topology(*, batched: tuple[str, ...] = ()) -> Topology:
    return Topology(
        name="t",
        start_executor_id="a",
        executor_ids=("a", "b", "c"),
        fan_in_groups={},
        reducers={},
        max_iterations=100,
        signature_hash="x",
        batched=batched,
    )


def msg(v: Any) -> Envelope:
    return Envelope(None, v)


def request(rid: str, executor: str = "b") -> PendingRequest:
    return PendingRequest(rid, executor, msg("q"), "str", {}, superstep=1)


def commit(engine: Engine, *results: StepResult) -> None:
    engine.apply_commit(engine.prepare_commit(list(results)))


def test_a_batched_executor_gets_its_messages_of_a_superstep_as_one_task_in_delivery_order() -> None:
    engine = Engine(topology(batched=("b",)))
    engine.start(msg(0))
    engine.begin_superstep()
    sent = [
        RoutedMessage.one("b", msg(1), "a"),
        RoutedMessage.one("c", msg(2), "a"),
        RoutedMessage.one("b", msg(3), "a"),
    ]
    commit(engine, StepResult(sent=sent))
    tasks = engine.begin_superstep()
    assert [(t.executor_id, t.kind, [m.data for m in t.messages], t.index) for t in tasks] == [
        ("b", "batch", [1, 3], 0),
        ("c", "message", [2], 1),  # not batched: one task per message, as for graphs
    ]


def test_a_single_message_to_a_batched_executor_is_an_ordinary_task() -> None:
    engine = Engine(topology(batched=("a", "b", "c")))
    engine.start(msg(0))
    (task,) = engine.begin_superstep()
    assert task.kind == "message"


def test_a_halting_step_drops_queued_messages_and_unanswered_requests_but_its_superstep_commits() -> None:
    engine = Engine(topology())
    engine.start(msg(0))
    engine.begin_superstep()
    commit(engine, StepResult(sent=[RoutedMessage.one("b", msg(1), "a"), RoutedMessage.one("c", msg(2), "a")]))
    engine.begin_superstep()
    commit(
        engine,
        StepResult(outputs=[msg("done")], halt=True),
        StepResult(sent=[RoutedMessage.one("a", msg(3), "c")], requests=[request("r1", "c")]),
    )
    assert engine.halted and not engine.has_work() and not engine.pending_requests
    assert [o.value.data for o in engine.outputs] == ["done"]


def test_a_step_answers_a_pending_request_and_the_first_answer_wins() -> None:
    engine = Engine(topology())
    engine.start(msg(0))
    engine.begin_superstep()
    commit(engine, StepResult(requests=[request("r1")]))
    assert list(engine.pending_requests) == ["r1"]
    engine.send("c", msg("go"))
    engine.begin_superstep()
    commit(engine, StepResult(answers=[("r1", msg("first")), ("r1", msg("second")), ("gone", msg("x"))]))
    assert not engine.pending_requests
    (task,) = engine.begin_superstep()
    assert task.kind == "response" and task.executor_id == "b" and task.messages[0].data == "first"


def test_the_wire_carries_halt_and_answers_and_leaves_them_out_when_unused() -> None:
    t = StepTask(1, 0, "a", "batch", (msg(1), msg(2)), ("x", "y"))
    result = StepResult(outputs=[msg("out")], halt=True, answers=[("r1", Envelope("m:T", {"a": 1}))])
    raw = encode_step_result(result, t, {})
    assert raw["halt"] is True and raw["answers"] == [
        {"request_id": "r1", "response": {"type": "m:T", "data": {"a": 1}}}
    ]
    back = decode_step_result(raw, t, {})
    assert back.halt and back.answers == [("r1", Envelope("m:T", {"a": 1}))]
    plain = encode_step_result(StepResult(outputs=[msg(1)]), t, {})
    assert "halt" not in plain and "answers" not in plain
