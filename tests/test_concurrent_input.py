"""A second message while a run is busy, in process: ``Workflow.send`` with a concurrent-input policy.

The same rule on Temporal is in tests/integration/test_concurrent_input_policy.py, and both graph hosts are
compared event for event in tests/conformance (``concurrent_input``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from temporal_workflows import WorkflowBuilder, WorkflowContext, executor
from temporal_workflows.errors import RunClosedError, RunInProgressError, UndeliverableMessageError
from temporal_workflows.events import ExecutorCompletedEvent, WorkflowInterruptedEvent, WorkflowOutputEvent

GATES: dict[str, asyncio.Event] = {}
STARTED: dict[str, asyncio.Event] = {}


def _gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())


@executor(id="note")
async def note(text: str, ctx: WorkflowContext[str]) -> None:
    seen = list(ctx.get_state("seen", []))
    ctx.set_state("seen", [*seen, text])
    await ctx.send_message(text)


@executor(id="answer")
async def answer(text: str, ctx: WorkflowContext[None, str]) -> None:
    STARTED.setdefault(text, asyncio.Event()).set()
    await _gate(text).wait()  # the test lets it finish (or a message interrupts it)
    await ctx.yield_output(f"answered {text}")


def _graph() -> Any:
    return WorkflowBuilder(start_executor=note, name="ci_local").add_edge(note, answer).build()


async def _when_answering(text: str) -> None:
    await asyncio.wait_for(STARTED.setdefault(text, asyncio.Event()).wait(), 10)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    GATES.clear()
    STARTED.clear()


async def test_enqueue_takes_the_message_after_the_current_turns_work() -> None:
    wf = _graph()
    run = asyncio.ensure_future(wf.run("a"))
    await _when_answering("a")
    accepted = wf.send("b")
    assert accepted == {"executor_id": "note", "accepted": True, "policy": "enqueue", "interrupts": False}
    _gate("a").set()
    _gate("b").set()
    result = await run
    assert result.get_outputs() == ["answered a", "answered b"]
    assert result.state["seen"] == ["a", "b"]
    assert not [e for e in result if isinstance(e, WorkflowInterruptedEvent)]


async def test_reject_refuses_while_busy_and_the_run_goes_on() -> None:
    wf = _graph()
    run = asyncio.ensure_future(wf.run("a", concurrent_input="reject"))
    await _when_answering("a")
    with pytest.raises(RunInProgressError, match="policy is 'reject'"):
        wf.send("b")
    _gate("a").set()
    result = await run
    assert result.get_outputs() == ["answered a"]


async def test_interrupt_cancels_the_running_superstep_and_keeps_the_turns_commits() -> None:
    wf = _graph()
    stream = wf.run("a", stream=True)
    events: list[Any] = []

    async def read() -> None:
        async for e in stream:
            events.append(e)

    reader = asyncio.ensure_future(read())
    await _when_answering("a")
    assert wf.send("b", policy="interrupt")["interrupts"] is True
    _gate("b").set()
    await asyncio.wait_for(reader, 10)
    interrupted = [e for e in events if isinstance(e, WorkflowInterruptedEvent)]
    assert [(e.policy, e.superstep, e.cancelled, e.rolled_back_to) for e in interrupted] == [
        ("interrupt", 2, ["answer"], None)
    ]
    outputs = [e.data for e in events if isinstance(e, WorkflowOutputEvent)]
    assert outputs == ["answered b"]  # the cancelled step committed nothing
    completed = [(e.executor_id, e.superstep) for e in events if isinstance(e, ExecutorCompletedEvent)]
    assert ("answer", 2) not in completed and ("answer", 4) in completed  # superstep 2 was used up
    assert stream.done


async def test_rollback_returns_to_the_state_before_the_turns_input() -> None:
    wf = _graph()
    run = asyncio.ensure_future(wf.run("a", concurrent_input="rollback"))
    await _when_answering("a")
    wf.send("b")  # the run's policy
    _gate("b").set()
    result = await run
    interrupted = [e for e in result if isinstance(e, WorkflowInterruptedEvent)]
    assert [(e.policy, e.cancelled, e.rolled_back_to) for e in interrupted] == [("rollback", ["answer"], 0)]
    assert result.get_outputs() == ["answered b"]
    assert result.state["seen"] == ["b"]  # "a" was the turn's input: rolled back


async def test_bad_sends_are_refused_and_change_nothing() -> None:
    wf = _graph()
    with pytest.raises(RunClosedError, match="no run of this workflow is in progress"):
        wf.send("x")
    run = asyncio.ensure_future(wf.run("a"))
    await _when_answering("a")
    with pytest.raises(ValueError, match="policy must be one of enqueue, reject, interrupt, rollback, not 'soon'"):
        wf.send("b", policy="soon")  # type: ignore[arg-type]
    with pytest.raises(UndeliverableMessageError):
        wf.send(42)
    with pytest.raises(UndeliverableMessageError, match="nobody"):
        wf.send("b", executor_id="nobody")
    _gate("a").set()
    result = await run
    assert result.get_outputs() == ["answered a"]
    with pytest.raises(RunClosedError):
        wf.send("late")
    with pytest.raises(ValueError, match="concurrent_input must be one of"):
        wf.run("c", concurrent_input="sometimes")  # type: ignore[call-overload]


def test_the_arrival_rule_is_one_table() -> None:
    from temporal_workflows._engine.inbound import arrival, check_policy, stronger

    assert [arrival(p, busy=False) for p in ("enqueue", "reject", "interrupt", "rollback")] == ["take"] * 4
    assert [arrival(p, busy=True) for p in ("enqueue", "reject", "interrupt", "rollback")] == [
        "take",
        "refuse",
        "interrupt",
        "rollback",
    ]
    assert stronger(None, "interrupt") == "interrupt" and stronger("rollback", "interrupt") == "rollback"
    assert stronger("interrupt", "rollback") == "rollback"
    with pytest.raises(ValueError, match="not 'x'"):
        check_policy("x")


def test_engine_interrupt_keeps_commits_and_roll_back_restores_the_turns_start() -> None:
    from temporal_workflows._engine.machine import Engine, StepResult
    from temporal_workflows._engine.serde import Envelope, encode

    engine = Engine(_graph().graph.topology)
    start = engine.snapshot()
    engine.start(Envelope(None, "a"))
    tasks = engine.begin_superstep()
    from temporal_workflows._engine.machine import RoutedMessage, StateWrite

    plan = engine.prepare_commit(
        [
            StepResult(
                writes=[StateWrite("seen", encode(["a"]))],
                sent=[RoutedMessage.one("answer", Envelope(None, "a"), "note")],
            )
        ]
    )
    engine.apply_commit(plan, {}, now=None)
    assert tasks and engine.superstep == 1 and engine.has_work()
    engine.begin_superstep()  # superstep 2 runs ... and is interrupted
    engine.interrupt(superstep_used=True)
    assert engine.superstep == 2 and not engine.has_work() and engine.state["seen"].data == ["a"]
    engine.roll_back(start, superstep_used=False)
    assert engine.superstep == 2 and engine.state == {} and not engine.has_work()


async def test_two_messages_that_interrupt_one_superstep_interrupt_it_once() -> None:
    wf = _graph()
    run = asyncio.ensure_future(wf.run("a", concurrent_input="interrupt"))
    await _when_answering("a")
    wf.send("b")
    wf.send("c", executor_id="answer", policy="rollback")  # the stronger one is carried out
    _gate("b").set()
    _gate("c").set()
    result = await run
    interrupted = [e for e in result if isinstance(e, WorkflowInterruptedEvent)]
    assert [(e.policy, e.cancelled) for e in interrupted] == [("rollback", ["answer"])]
    assert result.get_outputs() == ["answered c", "answered b"]  # both taken at that boundary
    assert result.state["seen"] == ["b"]
