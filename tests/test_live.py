"""Live events in process: a running step's live events reach run(stream=True) while it runs, tagged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from temporal_workflows import WorkflowBuilder, WorkflowContext, WorkflowEvent, executor
from temporal_workflows._engine.machine import StepTask
from temporal_workflows._engine.serde import Envelope, decode
from temporal_workflows._graph.context import run_step
from temporal_workflows.errors import ExecutorFailedError
from temporal_workflows.events import (
    ExecutorCompletedEvent,
    ExecutorInvokedEvent,
    LiveCommittedEvent,
    LiveEvent,
    StepProgressEvent,
    StepRetryEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowStartedEvent,
)
from temporal_workflows.temporal._client.client import _CommittedView, _LiveView


class Delta(LiveEvent):
    """A text delta that merges with the next one (as agent updates do)."""

    type: str = "delta"
    text: str

    def merge(self, later: LiveEvent) -> LiveEvent | None:
        return self.model_copy(update={"text": self.text + later.text}) if isinstance(later, Delta) else None


async def test_live_events_reach_the_stream_while_the_step_is_still_running() -> None:
    seen_by_caller = asyncio.Event()

    @executor(id="talker")
    async def talker(msg: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.add_event(StepProgressEvent(message="thinking"))
        # Only a caller that got the event while this step runs can let it finish.
        await asyncio.wait_for(seen_by_caller.wait(), 10)
        await ctx.yield_output("said")

    wf = WorkflowBuilder(start_executor=talker).build()
    events: list[WorkflowEvent] = []
    async for ev in wf.run("go", stream=True):
        events.append(ev)
        if isinstance(ev, StepProgressEvent):
            seen_by_caller.set()
    # The live item arrives while the step runs; the step's committed events follow at the superstep's
    # commit, in the order it produced them, the marker of its live items first.
    types = [e.type for e in events]
    assert types.index("progress") < types.index("executor_invoked")
    assert types[types.index("executor_invoked") + 1 : types.index("executor_completed") + 1] == [
        "live_committed",
        "output",
        "executor_completed",
    ]
    progress = next(e for e in events if isinstance(e, StepProgressEvent))
    assert (progress.executor_id, progress.superstep, progress.index, progress.attempt, progress.seq) == (
        "talker",
        1,
        0,
        1,
        1,
    )
    marker = next(e for e in events if isinstance(e, LiveCommittedEvent))
    assert (marker.executor_id, marker.attempt, marker.items) == ("talker", 1, 1)


async def test_a_step_without_live_events_streams_exactly_as_before() -> None:
    @executor(id="quiet")
    async def quiet(msg: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(msg)

    result = await WorkflowBuilder(start_executor=quiet).build().run("x")
    assert not [e for e in result if isinstance(e, (LiveEvent, LiveCommittedEvent))]


async def test_parallel_steps_tag_their_items_with_their_own_step() -> None:
    @executor(id="fan")
    async def fan(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message("a")
        await ctx.send_message("b")

    @executor(id="echo")
    async def echo(msg: str, ctx: WorkflowContext[None, str]) -> None:
        for i in range(2):
            await ctx.add_event(Delta(text=f"{msg}{i}"))
            await asyncio.sleep(0)
        await ctx.yield_output(msg)

    result = await WorkflowBuilder(start_executor=fan).add_edge(fan, echo).build().run("go")
    deltas = [e for e in result if isinstance(e, Delta)]
    by_step = {(e.index, e.seq): e.text for e in deltas}
    # In process nothing is merged: one item per event, numbered per step.
    assert by_step == {(0, 1): "a0", (0, 2): "a1", (1, 1): "b0", (1, 2): "b1"}
    markers = [e for e in result if isinstance(e, LiveCommittedEvent)]
    assert [(m.index, m.items) for m in markers] == [(0, 2), (1, 2)]


async def test_a_live_event_that_cannot_round_trip_fails_the_step_when_published() -> None:
    class Bad(LiveEvent):
        data: Any = None

    @executor(id="bad")
    async def bad(msg: str, ctx: WorkflowContext) -> None:
        await ctx.add_event(Bad(data=object()))

    with pytest.raises(ExecutorFailedError) as info:
        await WorkflowBuilder(start_executor=bad).build().run("x")
    assert "live event from executor 'bad'" in str(info.value)


async def test_a_retried_attempt_first_publishes_a_retry_marker() -> None:
    @executor(id="again")
    async def again(msg: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.add_event(StepProgressEvent(message="one"))

    wf = WorkflowBuilder(start_executor=again).build()
    published: list[LiveEvent] = []

    class Sink:
        def publish(self, event: LiveEvent, data: bytes) -> None:
            published.append(event)

        async def room(self) -> None:
            pass

    task = StepTask(1, 0, "again", "message", (Envelope(None, "x"),))
    result = await run_step(wf.graph, task, {}, run_id="r", attempt=3, live=Sink())
    assert [(type(e).__name__, e.attempt, e.seq) for e in published] == [
        ("StepRetryEvent", 3, 0),
        ("StepProgressEvent", 3, 1),
    ]
    committed = decode(result.events[0])
    assert isinstance(committed, LiveCommittedEvent) and (committed.attempt, committed.items) == (3, 1)


def _item(kind: type[LiveEvent], attempt: int, seq: int, index: int = 0, **kw: Any) -> LiveEvent:
    return kind(executor_id="x", superstep=1, index=index, attempt=attempt, seq=seq, **kw)


def _stream_of_a_retried_step() -> list[WorkflowEvent]:
    return [
        WorkflowStartedEvent(run_id="r"),
        SuperStepStartedEvent(superstep=1, executor_ids=["x"]),
        ExecutorInvokedEvent(executor_id="x", superstep=1),
        _item(Delta, 1, 1, text="Hel"),
        _item(StepRetryEvent, 2, 0),
        _item(Delta, 2, 1, text="Hello"),
        _item(Delta, 1, 2, text="lo wor"),  # the timed-out first attempt, still running somewhere
        _item(Delta, 2, 3, text=" world"),
        LiveCommittedEvent(executor_id="x", superstep=1, attempt=2, items=3),
        ExecutorCompletedEvent(executor_id="x", superstep=1),
        SuperStepCompletedEvent(superstep=1),
        _item(Delta, 1, 3, text="ld"),  # and again, after the step completed
    ]


def test_the_live_view_drops_items_of_superseded_attempts() -> None:
    view = _LiveView()
    shown = [e for ev in _stream_of_a_retried_step() for e in view.feed(ev)]
    texts = [(e.attempt, e.text) if isinstance(e, Delta) else e.type for e in shown]
    assert texts[3:] == [
        (1, "Hel"),
        "step_retry",
        (2, "Hello"),
        (2, " world"),
        "live_committed",
        "executor_completed",
        "superstep_completed",
    ]


def test_the_committed_view_shows_only_the_completed_attempt_at_its_marker() -> None:
    view = _CommittedView()
    shown = [e for ev in _stream_of_a_retried_step() for e in view.feed(ev)]
    assert [e.type if not isinstance(e, Delta) else e.text for e in shown] == [
        "started",
        "superstep_started",
        "executor_invoked",
        "Hello",
        " world",
        "live_committed",
        "executor_completed",
        "superstep_completed",
    ]


def test_the_committed_view_drops_a_steps_items_when_its_superstep_ends_without_its_marker() -> None:
    view = _CommittedView()
    stream: list[WorkflowEvent] = [
        _item(Delta, 1, 1, text="lost"),
        _item(StepRetryEvent, 2, 0),
        ExecutorCompletedEvent(executor_id="x", superstep=1),
        SuperStepCompletedEvent(superstep=1),
        SuperStepStartedEvent(superstep=2, executor_ids=["x"]),
        Delta(executor_id="x", superstep=2, attempt=1, seq=1, text="next"),
        LiveCommittedEvent(executor_id="x", superstep=2, attempt=1, items=1),
    ]
    shown = [e for ev in stream for e in view.feed(ev)]
    assert [getattr(e, "text", e.type) for e in shown] == [
        "executor_completed",
        "superstep_completed",
        "superstep_started",
        "next",
        "live_committed",
    ]


def test_a_live_event_of_a_class_this_process_lacks_keeps_its_tags() -> None:
    from temporal_workflows.temporal._client.client import RawEvent, _event
    from temporal_workflows.temporal.integration import RawLiveEvent

    tags = {"executor_id": "x", "superstep": 2, "index": 1, "attempt": 3, "seq": 4}
    event = _event(Envelope("elsewhere.module:Update", {"type": "update", **tags, "text": "hi"}))
    assert isinstance(event, RawLiveEvent) and isinstance(event, LiveEvent)
    assert (event.executor_id, event.superstep, event.index, event.attempt, event.seq) == ("x", 2, 1, 3, 4)
    assert event.event_type == "elsewhere.module:Update" and event.data["text"] == "hi"
    plain = _event(Envelope("elsewhere.module:Note", {"type": "note"}))
    assert isinstance(plain, RawEvent) and not isinstance(plain, LiveEvent)


async def test_a_live_event_over_the_limit_is_replaced_by_a_note_with_its_tags_as_on_temporal() -> None:
    from temporal_workflows._live import MAX_LIVE_EVENT_BYTES
    from temporal_workflows.events import LiveOmittedEvent

    @executor(id="dumper")
    async def dumper(msg: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.add_event(StepProgressEvent(message="small"))
        await ctx.add_event(StepProgressEvent(message="big", data="x" * (MAX_LIVE_EVENT_BYTES + 1)))
        await ctx.add_event(StepProgressEvent(message="after"))
        await ctx.yield_output("done")

    wf = WorkflowBuilder(start_executor=dumper).build()
    live = [e async for e in wf.run("go", stream=True) if isinstance(e, LiveEvent)]
    assert [(type(e).__name__, e.seq) for e in live] == [
        ("StepProgressEvent", 1),
        ("LiveOmittedEvent", 2),
        ("StepProgressEvent", 3),
    ]
    note = live[1]
    assert isinstance(note, LiveOmittedEvent) and note.executor_id == "dumper"
    assert note.event_class == "temporal_workflows._live:StepProgressEvent" and note.size > MAX_LIVE_EVENT_BYTES
    assert "not streamed" in note.note


async def test_an_awaited_run_has_the_streamed_runs_events_in_the_same_order() -> None:
    """An awaited ``run()`` drives the driver in the caller's task (no queue): the same events, same order."""

    @executor(id="fan")
    async def fan(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message("a")
        await ctx.send_message("b")

    @executor(id="echo")
    async def echo(msg: str, ctx: WorkflowContext[str, str]) -> None:
        for i in range(2):
            await ctx.add_event(Delta(text=f"{msg}{i}"))
            await asyncio.sleep(0)
        if msg == "b!":
            raise ValueError("no")
        await ctx.yield_output(msg)
        if not msg.endswith("!"):
            await ctx.send_message(msg + "!")

    def seen(events: list[WorkflowEvent]) -> list[tuple[str, str, str]]:
        kept = [e for e in events if e.type not in ("started", "status")]
        return [(type(e).__name__, e.type, repr(e.data)) for e in kept]

    wf = WorkflowBuilder(start_executor=fan).add_edge(fan, echo).add_edge(echo, echo).build()
    with pytest.raises(ExecutorFailedError) as awaited:
        await wf.run("go")
    assert awaited.value.result is not None
    streamed: list[WorkflowEvent] = []
    with pytest.raises(ExecutorFailedError):
        async for event in wf.run("go", stream=True):
            streamed.append(event)
    assert seen(list(awaited.value.result)) == seen(streamed)
    assert [e.type for e in streamed].count("delta") == 8 and streamed[-1].type in ("failed", "status")


async def test_an_awaited_checkpointed_run_has_the_streamed_runs_events_and_checkpoints() -> None:
    """An awaited ``run()`` gets its events a superstep at a time: the same events, checkpoints and order."""
    from temporal_workflows import InMemoryCheckpointStorage

    @executor(id="hop")
    async def hop(n: int, ctx: WorkflowContext[int, int]) -> None:
        await ctx.add_event(Delta(text=str(n)))
        ctx.set_state("n", n)
        if n < 3:
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(n)

    def seen(events: list[WorkflowEvent]) -> list[tuple[str, str, Any]]:
        return [(type(e).__name__, e.type, getattr(e, "superstep", None)) for e in events if e.type != "started"]

    runs: list[tuple[list[WorkflowEvent], list[str | None], int]] = []
    for stream in (False, True):
        storage = InMemoryCheckpointStorage()
        wf = WorkflowBuilder(start_executor=hop, checkpoint_storage=storage).add_edge(hop, hop).build()
        if stream:
            events = [e async for e in wf.run(0, stream=True)]
        else:
            events = list(await wf.run(0, include_status_events=True))
        ids = [e.checkpoint_id for e in events if isinstance(e, SuperStepCompletedEvent)]
        saved = {c.checkpoint_id for c in await storage.list_checkpoints(workflow_name=wf.name)}
        assert set(ids) < saved  # every superstep's checkpoint is stored, and the entry checkpoint
        runs.append((events, ids, len(saved)))
    (awaited, _, awaited_saved), (streamed, _, streamed_saved) = runs
    assert seen(awaited) == seen(streamed) and awaited_saved == streamed_saved == 5
    assert [e.text for e in awaited if isinstance(e, Delta)] == ["0", "1", "2", "3"]


def test_a_live_event_reaches_an_in_process_reader_as_its_step_published_it() -> None:
    """Awaited or streamed, in process a live event is the object the step published (never restored)."""
    from temporal_workflows._graph.runs import materialize

    event = StepProgressEvent(data={"k": 1}, data_type="list[x:Y]")
    assert materialize(event) is event
