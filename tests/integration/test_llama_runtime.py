"""``TemporalRuntime``: unchanged LlamaIndex programs on a real dev server give what the default runtime gives."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import workflows as llama
from temporalio.client import WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from workflows import Workflow
from workflows import events as llama_events
from workflows.errors import WorkflowCancelledByUser, WorkflowTimeoutError

from temporal_workflows._llama_runtime._workflow import LlamaIndexRun
from temporal_workflows.llama import TemporalRuntime
from temporal_workflows.temporal import ConnectionConfig, get_run
from temporal_workflows.temporal._worker.plugin import data_converter
from tests.integration import llama_runtime_workflows as lw
from tests.integration import record_llama_runtime_histories


@pytest.fixture(scope="module")
async def runtime(temporal_address: str) -> AsyncIterator[TemporalRuntime]:
    rt = TemporalRuntime(
        worker=True,
        task_queue=f"llama-rt-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
    )
    yield rt
    await rt.destroy()


async def _run_both(cls: type[Workflow], rt: TemporalRuntime, **kwargs: Any) -> tuple[Any, Any]:
    """(default runtime's (result, events), TemporalRuntime's (result, events)) of one program."""
    outs = []
    for runtime in (None, rt):
        wf = cls(timeout=30) if runtime is None else cls(timeout=30, runtime=runtime)
        handler = wf.run(**kwargs)
        events = [e async for e in handler.stream_events()]
        outs.append((await handler, lw.describe(events)))
    return outs[0], outs[1]


async def test_chain_result_stream_and_store_match_the_default_runtime(runtime: TemporalRuntime) -> None:
    default, temporal = await _run_both(lw.Chain, runtime, x=41)
    assert temporal == default
    assert temporal[0] == "done 42"
    wf = lw.Chain(timeout=30, runtime=runtime)
    handler = wf.run(x=1)
    await handler
    assert await handler.ctx.store.get("seen") == ["a", "b"]


async def test_a_result_json_would_change_comes_back_as_the_default_runtime_returns_it(
    runtime: TemporalRuntime,
) -> None:
    default, temporal = await _run_both(lw.PythonResult, runtime)
    assert temporal[0] == default[0] == ((1, ["a"]), {1: "one", 2: (2,)}, {3}, b"x", lw.Progress(msg="in"))
    assert repr(temporal[0]) == repr(default[0])  # what print() shows


async def test_tuples_sets_bytes_and_int_keys_reach_steps_and_the_store_as_they_were(
    runtime: TemporalRuntime,
) -> None:
    default, temporal = await _run_both(lw.PythonValues, runtime, pair=(1, 2), keys={1: "x"})
    assert temporal == default
    assert default[0] == ("b sees (1, 2) {1: (2,), 's': frozenset({5})} ((1, 2), {3}, b'x', {4: 'four'})")
    handler = lw.PythonValues(timeout=30, runtime=runtime).run(pair=(1, 2), keys={1: "x"})
    await handler
    assert await handler.ctx.store.get("kept") == ((1, 2), {3}, b"x", {4: "four"})


async def test_each_run_is_a_temporal_workflow_and_each_step_an_activity(runtime: TemporalRuntime) -> None:
    handler = lw.Chain(timeout=30, runtime=runtime).run(x=1)
    await handler
    client = await runtime.client()
    history = await client.get_workflow_handle(handler.run_id).fetch_history()
    types = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    name = lw.Chain(timeout=30).workflow_name
    assert types == [f"{name}.a", f"{name}.b"]


async def test_registering_builds_workflows_on_the_runtime(runtime: TemporalRuntime) -> None:
    with runtime.registering():
        wf = lw.Chain(timeout=30)
    assert wf.runtime is runtime
    assert await wf.run(x=2) == "done 3"


async def test_fan_out_num_workers_and_collect_events(runtime: TemporalRuntime) -> None:
    default, temporal = await _run_both(lw.FanOut, runtime, n=8)
    assert temporal == default
    assert temporal[0] == [i * i for i in range(8)]


async def test_typed_state(runtime: TemporalRuntime) -> None:
    default, temporal = await _run_both(lw.TypedState, runtime)
    assert temporal == default == ({"count": 11, "log": ["one", "two"]}, [("StopEvent", temporal[1][0][1])])


async def test_human_input_by_send_event(runtime: TemporalRuntime) -> None:
    for rt in (None, runtime):
        wf = lw.HumanInLoop(timeout=None) if rt is None else lw.HumanInLoop(timeout=None, runtime=rt)
        handler = wf.run(topic="cats")
        seen = []
        async for ev in handler.stream_events():
            seen.append(type(ev).__name__)
            if isinstance(ev, lw.Ask):
                assert ev.question == "name for cats?"
                handler.ctx.send_event(lw.Answer(text="Tom"))
        assert await handler == "got Tom"
        assert seen == ["Ask", "StopEvent"]


async def test_wait_for_event(runtime: TemporalRuntime) -> None:
    for rt in (None, runtime):
        wf = lw.WaitsForEvent(timeout=None) if rt is None else lw.WaitsForEvent(timeout=None, runtime=rt)
        handler = wf.run()
        async for ev in handler.stream_events():
            if isinstance(ev, lw.Ask):
                handler.ctx.send_event(lw.Answer(text="yes"))
        assert await handler == "waited yes"


async def test_step_error_raises_what_the_default_runtime_raises(runtime: TemporalRuntime) -> None:
    for rt in (None, runtime):
        wf = lw.Fails(timeout=30) if rt is None else lw.Fails(timeout=30, runtime=rt)
        with pytest.raises(lw.Boom, match="step exploded"):
            await wf.run()


async def test_llama_retry_policy_retries_the_step(runtime: TemporalRuntime) -> None:
    key = uuid.uuid4().hex
    assert await lw.Flaky(timeout=30, runtime=runtime).run(key=key) == 3


async def test_timeout_raises_workflow_timeout_error(runtime: TemporalRuntime) -> None:
    with pytest.raises(WorkflowTimeoutError):
        await lw.Slow(timeout=1, runtime=runtime).run()


async def test_cancel_run(runtime: TemporalRuntime) -> None:
    handler = lw.Slow(timeout=60, runtime=runtime).run()
    await asyncio.sleep(0)  # let the start go out
    await handler.cancel_run()
    with pytest.raises(WorkflowCancelledByUser):
        await handler


async def test_bad_signal_is_dropped_and_the_run_goes_on(runtime: TemporalRuntime) -> None:
    handler = lw.HumanInLoop(timeout=None, runtime=runtime).run(topic="dogs")
    client = await runtime.client()
    async for ev in handler.stream_events():
        if isinstance(ev, lw.Ask):
            wf_handle = client.get_workflow_handle(handler.run_id)
            await wf_handle.signal("llama_tick", "not a tick")
            await wf_handle.signal("llama_tick", 42)
            handler.ctx.send_event(lw.Answer(text="Rex"))
    assert await handler == "got Rex"


async def test_bad_tick_and_store_patch_signals_are_dropped_with_a_warning(
    runtime: TemporalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/bad-input.md: ``llama_tick``, ``llama_store_patch``, ``llama_step_stream`` and ``llama_step_send``
    signals the run cannot use are dropped with a warning; the run's store and stream are unchanged and the
    run takes the next good input."""
    handler = lw.AskWithStore(timeout=None, runtime=runtime).run(topic="cats")
    client = await runtime.client()
    caplog.set_level(logging.WARNING)
    async for ev in handler.stream_events():
        if isinstance(ev, lw.Ask):
            wf = client.get_workflow_handle(handler.run_id)
            for bad_tick in ("not a tick", 42, {"type": "no_such_tick"}, ["a", "list"]):
                await wf.signal("llama_tick", bad_tick)
            missing = [{"op": "replace", "path": "/state_data/_data/nope/x", "value": 1}]
            for bad_patch in ("not a list", [1, 2], [{"op": "bogus", "path": "/x"}], {"op": "add"}, missing):
                await wf.signal("llama_store_patch", bad_patch)
            for bad_write in ("not a write", {"invocation": 1, "index": 0, "event": "x"}):
                await wf.signal("llama_step_stream", bad_write)
            # A well-formed write of no running step (a late or forged one) is dropped quietly.
            await wf.signal("llama_step_stream", {"invocation": "nope", "index": 0, "event": "{}"})
            for bad_sends in (
                "not sends",
                {"invocation": "x", "sends": [{"index": "0", "tick": 1}], "store_patch": []},
            ):
                await wf.signal("llama_step_send", bad_sends)
            # Sends of no running step (late or forged): dropped quietly, store untouched.
            forged = [{"op": "add", "path": "/state_data/_data/forged", "value": 1}]
            await wf.signal("llama_step_send", {"invocation": "nope", "sends": [], "store_patch": forged})
            # A good patch after the bad ones still applies: the run read every signal.
            await wf.signal("llama_store_patch", [{"op": "add", "path": "/state_data/_data/late", "value": "ok"}])
            store = await wf.query("llama_state")
            assert store["state_data"]["_data"]["topic"] == "cats"
            assert store["state_data"]["_data"]["late"] == "ok"
            assert "forged" not in store["state_data"]["_data"]
            handler.ctx.send_event(lw.Answer(text="Tom"))
    assert await handler == "cats: Tom"
    dropped = [r.getMessage() for r in caplog.records if "dropped a" in r.getMessage()]
    assert sum("llama_tick" in m for m in dropped) == 4, dropped
    assert sum("llama_store_patch" in m for m in dropped) == 5, dropped
    assert sum("llama_step_stream" in m for m in dropped) == 2, dropped
    assert sum("llama_step_send" in m for m in dropped) == 2, dropped


async def test_fan_out_histories_replay(runtime: TemporalRuntime) -> None:
    """Several activities completing together are reduced in a fixed order: the history replays."""
    handler = lw.FanOut(timeout=30, runtime=runtime).run(n=12)
    assert await handler == [i * i for i in range(12)]
    await _replays(runtime, handler.run_id)


async def test_connects_from_the_environment_and_survives_two_asyncio_runs(temporal_address: str) -> None:
    """...and ends cleanly: its in-process worker is shut down before the interpreter finalizes (an exit
    hook registered first runs last, and finds no worker thread), so no poll of the worker's can complete
    into a finalizing interpreter and abort the process (status -6, seen once in CI)."""
    program = textwrap.dedent(
        """
        import asyncio, atexit, threading
        from temporal_workflows.llama import TemporalRuntime
        from tests.integration.llama_runtime_workflows import Chain

        atexit.register(lambda: print("at exit", [t.name for t in threading.enumerate() if "llama-worker" in t.name]))

        with TemporalRuntime(worker=True, task_queue={!r}).registering():
            wf = Chain(timeout=30)

        async def main(x):
            return await wf.run(x=x)

        print(asyncio.run(main(1)))
        print(asyncio.run(main(2)))
        """.format(f"llama-rt-env-{uuid.uuid4().hex[:8]}")
    )
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address}
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["done 2", "done 3", "at exit []"]


async def _replays(runtime: TemporalRuntime, run_id: str) -> None:
    """The run's history, fetched from the server, replays without a nondeterminism error."""
    client = await runtime.client()
    history = await client.get_workflow_handle(run_id).fetch_history()
    replayer = Replayer(workflows=[LlamaIndexRun], data_converter=data_converter(None))
    await replayer.replay_workflow(WorkflowHistory.from_json(run_id, history.to_json()))


async def _history_events(runtime: TemporalRuntime, run_id: str) -> list[Any]:
    client = await runtime.client()
    return list((await client.get_workflow_handle(run_id).fetch_history()).events)


async def test_one_timer_for_the_root_timeout_not_one_per_iteration(runtime: TemporalRuntime) -> None:
    handler = lw.FanOut(timeout=45, runtime=runtime).run(n=6)
    assert await handler == [i * i for i in range(6)]
    events = await _history_events(runtime, handler.run_id)
    timers = [e for e in events if e.HasField("timer_started_event_attributes")]
    assert len(timers) == 1  # the 45 s root timeout, kept across the loop's ~20 iterations


async def test_losers_are_cancelled_in_the_order_they_started(runtime: TemporalRuntime) -> None:
    """The three racers run as three activities: the winner's result comes back when it wins (its slow siblings
    are cancelled, not waited for 30 s), and the run issues their cancels in start order."""
    for _ in range(3):
        began = time.monotonic()
        handler = lw.FirstWins(timeout=60, runtime=runtime).run()
        assert await handler == "winner 0"
        assert time.monotonic() - began < 20
        events = await _history_events(runtime, handler.run_id)
        cancelled = [
            e.activity_task_cancel_requested_event_attributes.scheduled_event_id
            for e in events
            if e.HasField("activity_task_cancel_requested_event_attributes")
        ]
        assert cancelled == sorted(cancelled)


_invocations: dict[str, list[str]] = {}


@pytest.fixture
def invocations(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Every step invocation the in-process worker runs, by run id: ``"<step>:<invocation id>"`` per attempt."""
    from temporal_workflows._llama_runtime import _activity

    _invocations.clear()
    real = _activity._run_one

    async def counted(inp: Any) -> Any:
        _invocations.setdefault(inp.run_id, []).append(f"{inp.step_name}:{inp.state.get('invocation_id')}")
        return await real(inp)

    monkeypatch.setattr(_activity, "_run_one", counted)
    return _invocations


async def test_each_invocation_the_loop_starts_runs_once_as_one_activity(
    runtime: TemporalRuntime, invocations: dict[str, list[str]]
) -> None:
    """A 12-way fan-out to a 4-worker step joined by ``collect_events``: the default runtime's result and stream;
    each invocation LlamaIndex's loop starts is one activity (local, once its step is seen to be short), run
    once; nothing runs that the loop did not start (12 ``work`` invocations, not one more), and the history
    replays."""
    default, temporal = await _run_both(lw.FanOut, runtime, n=12)
    assert temporal == default
    handler = lw.FanOut(timeout=30, runtime=runtime).run(n=12)
    assert await handler == [i * i for i in range(12)]
    ran = invocations[handler.run_id]
    assert len(ran) == len(set(ran)), ran  # no invocation twice
    assert sum(r.startswith("work:") for r in ran) == 12 and sum(r.startswith("start:") for r in ran) == 1
    events = await _history_events(runtime, handler.run_id)
    scheduled = [e for e in events if e.HasField("activity_task_scheduled_event_attributes")]
    local = [
        e
        for e in events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    assert len(scheduled) + len(local) == len(ran)
    assert local  # the steps seen to be short ran as local activities
    await _replays(runtime, handler.run_id)


class WritesPerItem(Workflow):
    """Queued workers that each write their own ``ctx.store`` key, joined by one that reads them all."""

    @llama.step
    async def start(self, ctx: llama.Context, ev: llama_events.StartEvent) -> lw.Item | None:
        for i in range(12):
            ctx.send_event(lw.Item(i=i))
        return None

    @llama.step(num_workers=3)
    async def work(self, ctx: llama.Context, ev: lw.Item) -> lw.Done:
        await ctx.store.set(f"w{ev.i}", ev.i * 10)
        return lw.Done(i=ev.i, square=ev.i * ev.i)

    @llama.step
    async def join(self, ctx: llama.Context, ev: lw.Done) -> llama_events.StopEvent | None:
        got = ctx.collect_events(ev, [lw.Done] * 12)
        if got is None:
            return None
        return llama_events.StopEvent(result=sorted([await ctx.store.get(f"w{d.i}") for d in got]))


async def test_store_writes_of_queued_work_reach_the_run_once(runtime: TemporalRuntime) -> None:
    """Queued workers write ``ctx.store``: each write reaches the run's store once, and the join reads every
    key, as under the default runtime."""
    default, temporal = await _run_both(WritesPerItem, runtime)
    assert temporal[0] == default[0] == [i * 10 for i in range(12)]


_busy = {"now": 0, "most": 0}


class TwoAtATime(Workflow):
    """Eight events to a ``num_workers=2`` step that counts how many of its invocations run at once."""

    @llama.step
    async def start(self, ctx: llama.Context, ev: llama_events.StartEvent) -> lw.Item | None:
        for i in range(8):
            ctx.send_event(lw.Item(i=i))
        return None

    @llama.step(num_workers=2)
    async def work(self, ev: lw.Item) -> lw.Done:
        _busy["now"] += 1
        _busy["most"] = max(_busy["most"], _busy["now"])
        await asyncio.sleep(0.2)
        _busy["now"] -= 1
        return lw.Done(i=ev.i, square=ev.i * ev.i)

    @llama.step
    async def join(self, ctx: llama.Context, ev: lw.Done) -> llama_events.StopEvent | None:
        got = ctx.collect_events(ev, [lw.Done] * 8)
        return None if got is None else llama_events.StopEvent(result=sorted(d.square for d in got))


async def test_num_workers_caps_concurrent_invocations(runtime: TemporalRuntime) -> None:
    """``num_workers=2`` (it often guards a rate-limited API): as under the default runtime, two of the eight
    invocations run at a time, never more, and the result is the same."""
    _busy["most"] = 0
    default, temporal = await _run_both(TwoAtATime, runtime)
    assert temporal == default
    handler = TwoAtATime(timeout=30, runtime=runtime).run()
    _busy["most"] = 0
    assert await handler == [i * i for i in range(8)]
    assert _busy["most"] == 2


class LiveProgress(llama_events.Event):
    n: int


_release_live = threading.Event()


class WritesThenWaits(Workflow):
    """A step that writes to the stream, then waits for the test to have read that write."""

    @llama.step
    async def work(self, ctx: llama.Context, ev: llama_events.StartEvent) -> llama_events.StopEvent:
        ctx.write_event_to_stream(LiveProgress(n=1))
        released = await asyncio.to_thread(_release_live.wait, 60)
        ctx.write_event_to_stream(LiveProgress(n=2))
        return llama_events.StopEvent(result=f"released {released}")


async def test_a_steps_stream_writes_arrive_while_it_runs(runtime: TemporalRuntime) -> None:
    """``ctx.write_event_to_stream`` reaches ``stream_events()`` while the step is still running (as under
    the default runtime), each write once, and the history replays."""
    _release_live.clear()
    handler = WritesThenWaits(timeout=90, runtime=runtime).run()
    seen: list[Any] = []
    async for ev in handler.stream_events():
        seen.append(lw.describe([ev])[0])
        if isinstance(ev, LiveProgress) and ev.n == 1:
            assert not _release_live.is_set()  # the step is still waiting for this very read
            _release_live.set()
    assert await handler == "released True"
    assert seen == [
        ("LiveProgress", {"n": 1}),
        ("LiveProgress", {"n": 2}),
        ("StopEvent", {"result": "released True"}),
    ]
    await _replays(runtime, handler.run_id)


class Sent(llama_events.Event):
    pass


class SenderFinished(llama_events.Event):
    waited: bool


class ReceiverFinished(llama_events.Event):
    seen: Any


_receiver_ran = threading.Event()


class SendsThenWaitsForItsReceiver(Workflow):
    """A step that writes the store, sends, and waits until the step its send starts has run: it can finish
    only if the send is delivered while it runs (as under the default runtime)."""

    @llama.step
    async def sender(self, ctx: llama.Context, ev: llama_events.StartEvent) -> SenderFinished | Sent:
        await ctx.store.set("n", 1)
        await ctx.store.set("shared", "sender")
        ctx.send_event(Sent())
        waited = await asyncio.to_thread(_receiver_ran.wait, 60)
        ctx.write_event_to_stream(LiveProgress(n=2))
        await ctx.store.set("after", 2)
        return SenderFinished(waited=waited)

    @llama.step
    async def receiver(self, ctx: llama.Context, ev: Sent) -> ReceiverFinished:
        seen = await ctx.store.get("n", default=None)
        ctx.write_event_to_stream(LiveProgress(n=1))
        await ctx.store.set("shared", "receiver")
        _receiver_ran.set()
        return ReceiverFinished(seen=seen)

    @llama.step
    async def join(self, ctx: llama.Context, ev: SenderFinished | ReceiverFinished) -> llama_events.StopEvent | None:
        got = ctx.collect_events(ev, [SenderFinished, ReceiverFinished])
        if got is None:
            return None
        keys = ("n", "shared", "after")
        values = [await ctx.store.get(k, default=None) for k in keys]
        return llama_events.StopEvent(result=[got[0].waited, got[1].seen, *values])


async def test_a_steps_sends_reach_the_run_while_it_runs_with_its_store_writes(runtime: TemporalRuntime) -> None:
    """``ctx.send_event`` from a step that then waits is delivered while it waits (patch
    ``llama-runtime-live-sends``): the receiver runs, reads the sender's writes made before the send, and
    its own write to a key the sender wrote earlier is not undone when the sender completes; the same
    result and stream as the default runtime, and the history replays."""
    outs = []
    for rt in (None, runtime):
        _receiver_ran.clear()
        wf = SendsThenWaitsForItsReceiver(timeout=90, runtime=rt) if rt else SendsThenWaitsForItsReceiver(timeout=90)
        handler = wf.run()
        events = [lw.describe([e])[0] async for e in handler.stream_events()]
        outs.append((await handler, events))
    assert outs[1][0] == outs[0][0] == [True, 1, 1, "receiver", 2]
    # The two steps' stream writes reach the stream by two activities' signals: the receiver's may land after
    # the sender's later one (the thread event orders them in the program, not on the wire). Same writes.
    assert sorted(map(repr, outs[1][1])) == sorted(map(repr, outs[0][1]))
    assert outs[1][1][-1] == outs[0][1][-1] == ("StopEvent", {"result": [True, 1, 1, "receiver", 2]})
    events = await _history_events(runtime, handler.run_id)
    signals = [
        e.workflow_execution_signaled_event_attributes.signal_name
        for e in events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert signals.count("llama_step_send") == 1, signals
    await _replays(runtime, handler.run_id)


async def test_a_new_run_records_one_patch_marker(runtime: TemporalRuntime) -> None:
    """Each patch asked costs a marker and a search attribute upsert: a new run records one
    (``llama-runtime-exact-1``); runs recorded before it asked the bundle or its parts, and replay so."""
    handler = lw.Chain(timeout=30, runtime=runtime).run(x=1)
    assert await handler == "done 2"
    events = await _history_events(runtime, handler.run_id)
    markers = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert markers == ["llama-runtime-exact-1"]


async def test_a_step_that_sends_and_returns_at_once_sends_with_its_result(runtime: TemporalRuntime) -> None:
    """A scatter (sends, then returns without waiting) delivers its sends with its result: no signal, so a
    fan-out costs no more history than before live sends."""
    handler = lw.FanOut(timeout=30, runtime=runtime).run(n=8)
    assert await handler == [i * i for i in range(8)]
    events = await _history_events(runtime, handler.run_id)
    assert not [
        e
        for e in events
        if e.HasField("workflow_execution_signaled_event_attributes")
        and e.workflow_execution_signaled_event_attributes.signal_name == "llama_step_send"
    ]


HISTORIES = sorted((Path(__file__).parents[1] / "histories" / "llama_runtime").glob("*.json"))


class _NoUuid:
    @staticmethod
    def uuid4() -> Any:
        raise AssertionError("uuid4 called from workflow code")


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_histories_replay_without_wall_clock_or_uuid4(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every recorded run replays with this code, and its workflow code reads neither the wall clock
    (``time.time`` returns 0 during the replay, so a decision made on it would diverge) nor ``uuid4``."""
    from workflows.runtime.types import step_function

    rt = TemporalRuntime()
    record_llama_runtime_histories.BUILD[path.stem](rt)  # this process hosts the same workflow
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    replayer = Replayer(workflows=[LlamaIndexRun], data_converter=data_converter(None))
    monkeypatch.setattr(step_function, "uuid", _NoUuid)
    monkeypatch.setattr(time, "time", lambda: 0.0)
    await replayer.replay_workflow(history)


async def _wait_for(predicate: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.05)


class _BlockingWorkers:
    """Worker processes hosting ``serve_blocking``'s workflows on one queue (steps heartbeating every 2/3 s),
    started one at a time, each killed with SIGKILL or at the end of the test."""

    def __init__(self, temporal_address: str, name: str) -> None:
        self.queue = f"llama-rt-{name}-{uuid.uuid4().hex[:8]}"
        self._root = Path(__file__).parents[2]
        self._env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "PYTHONPATH": str(self._root)}
        self._procs: list[subprocess.Popen[bytes]] = []
        self.runtime = TemporalRuntime(task_queue=self.queue, connection=ConnectionConfig(address=temporal_address))

    def start(self) -> subprocess.Popen[bytes]:
        serve = "import asyncio, sys; from tests.integration.llama_runtime_workflows import serve_blocking as s; "
        command = [sys.executable, "-c", serve + "asyncio.run(s(sys.argv[1]))", self.queue]
        self._procs.append(subprocess.Popen(command, cwd=self._root, env=self._env))
        return self._procs[-1]

    async def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.kill()  # kill -9: no shutdown, the step in flight is abandoned
        await asyncio.to_thread(proc.wait)

    def __enter__(self) -> _BlockingWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
                p.wait()


async def test_a_worker_killed_mid_step_costs_a_heartbeat_and_the_run_completes_on_another(
    temporal_address: str, tmp_path: Path
) -> None:
    with _BlockingWorkers(temporal_address, "kill") as workers:
        first = workers.start()
        handler = lw.Blocking(timeout=None, runtime=workers.runtime).run(path=str(tmp_path))
        await _wait_for(lambda: (tmp_path / f"started-{first.pid}").exists(), 60)
        await workers.kill(first)  # mid-step
        second = workers.start()
        (tmp_path / "release").touch()
        assert await asyncio.wait_for(handler, 90) == second.pid  # the step ran again on the new worker


async def test_a_worker_killed_after_a_live_send_delivers_it_and_its_write_once(
    temporal_address: str, tmp_path: Path
) -> None:
    """kill -9 of the worker running a step that already sent live (patch ``llama-runtime-live-sends``): the
    retried attempt on another worker re-sends and re-writes from the same start, yet the receiver runs
    once, and the stored list the sender appended to holds its entry once."""
    with _BlockingWorkers(temporal_address, "kill-send") as workers:
        first = workers.start()
        handler = lw.SendsThenBlocks(timeout=None, runtime=workers.runtime).run(path=str(tmp_path))
        wf = (await workers.runtime.client()).get_workflow_handle(handler.run_id)

        async def received() -> bool:
            store = await wf.query("llama_state")
            return "seen_log" in store["state_data"]["_data"]  # the receiver's result reached the run

        deadline = time.monotonic() + 60
        while not ((tmp_path / f"started-{first.pid}").exists() and await received()):
            assert time.monotonic() < deadline, "the send did not reach the receiver while the sender ran"
            await asyncio.sleep(0.05)
        await workers.kill(first)  # mid-step, after the live send
        second = workers.start()
        await _wait_for(lambda: (tmp_path / f"started-{second.pid}").exists(), 60)
        (tmp_path / "release").touch()
        result = await asyncio.wait_for(handler, 90)
        assert result == {"pid": second.pid, "log": ["sender"], "seen_log": ["sender"]}
        assert (tmp_path / "received").read_text() == "ping\n"


async def test_workflows_and_events_defined_inside_a_function(runtime: TemporalRuntime) -> None:
    from workflows import Context, step
    from workflows.events import Event, StartEvent, StopEvent

    class LocalEvent(Event):
        word: str

    class LocalProgress(Event):
        n: int

    class Local(Workflow):
        @step
        async def first(self, ctx: Context, ev: StartEvent) -> LocalEvent:
            ctx.write_event_to_stream(LocalProgress(n=1))
            return LocalEvent(word=ev.word)

        @step
        async def second(self, ev: LocalEvent) -> StopEvent:
            return StopEvent(result=ev.word.upper())

    default, temporal = await _run_both(Local, runtime, word="hi")
    assert temporal == default == ("HI", [("LocalProgress", {"n": 1}), ("StopEvent", temporal[1][1][1])])


async def test_sync_steps_resources_and_a_reused_or_restored_context(runtime: TemporalRuntime) -> None:
    default = await lw.reuse_and_restore(lw.SyncAndResources(timeout=30))
    temporal = await lw.reuse_and_restore(lw.SyncAndResources(timeout=30, runtime=runtime))
    assert temporal == default
    assert temporal[:4] == [9, 10, 13, 16]


async def test_an_event_signalled_as_plain_json_reaches_the_run(runtime: TemporalRuntime) -> None:
    """What ``temporal workflow signal --name llama_tick --input '{...}'`` sends: the tick as a JSON object."""
    handler = lw.HumanInLoop(timeout=None, runtime=runtime).run(topic="cli")
    client = await runtime.client()
    async for ev in handler.stream_events():
        if isinstance(ev, lw.Ask):
            answer = {
                "__is_pydantic": True,
                "value": {"text": "from the CLI"},
                "qualified_name": f"{lw.Answer.__module__}.Answer",
            }
            await client.get_workflow_handle(handler.run_id).signal(
                "llama_tick", {"type": "add_event", "event": answer}
            )
    assert await handler == "got from the CLI"


async def test_a_step_input_over_the_payload_limit_fails_the_run_clearly(runtime: TemporalRuntime) -> None:
    from workflows.errors import WorkflowRuntimeError

    with pytest.raises(WorkflowRuntimeError, match=r"'after': its input .* keep large values out of the store"):
        await asyncio.wait_for(lw.BigStore(timeout=60, runtime=runtime).run(size=1_000_000), 60)
    with pytest.raises(WorkflowRuntimeError, match=r"'fill': its result .* keep large values out of events"):
        await asyncio.wait_for(lw.BigStore(timeout=60, runtime=runtime).run(size=3_000_000), 60)


async def test_answers_to_several_requests_are_taken_all_or_none(runtime: TemporalRuntime) -> None:
    """``RunHandle.respond_all`` (what the console's and AG-UI's several answers use): an unknown id or an
    answer the run cannot read refuses them all, and the run still waits for both; good ones are all taken."""
    from temporalio.client import WorkflowUpdateFailedError

    from temporal_workflows.errors import UnknownRequestError

    handler = lw.TwoQuestions(timeout=60, runtime=runtime).run()
    client = await runtime.client()
    run = get_run(client, handler.run_id)

    async def two_open() -> bool:
        try:
            return len(await run.pending_requests()) == 2
        except RPCError as e:  # the start is on its way
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
            return False

    await _wait_for_async(two_open, 30)
    with pytest.raises(UnknownRequestError):
        await run.respond_all({"input-1": {"text": "a"}, "input-9": {"text": "b"}})
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.respond_all({"input-1": {"text": "a"}, "input-2": {"texts": "b"}})
    assert "event 2 of 2" in str(refused.value.cause) and "none of them was taken" in str(refused.value.cause)
    # The update itself is bounded: 1 to 1,000 events, whoever sends it.
    handle = client.get_workflow_handle(handler.run_id)
    for events in ([], [{"event": {"text": "a"}}] * 1001):
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("submit_events", {"events": events})
        assert f"submit_events takes 1 to 1000 events, not {len(events)}" in str(refused.value.cause)
    assert [r.request_id for r in await run.pending_requests()] == ["input-1", "input-2"]
    await run.respond_all({"input-1": {"text": "a"}, "input-2": {"text": "b"}})
    assert await handler == "a and b"


async def test_an_idle_run_continues_as_new_and_resumes_with_its_store_and_stream(temporal_address: str) -> None:
    rt = TemporalRuntime(
        worker=True,
        task_queue=f"llama-rt-can-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
        idle_release_after_ticks=1,
    )
    try:
        cases: list[tuple[Any, dict[str, Any], str, tuple[str, str]]] = [
            (lw.HumanInLoop, {"topic": "can"}, "got after a new run", ("input-1", "name for can?")),
            (lw.AskWithStore, {"topic": "bees"}, "bees: after a new run", ("input-1", "name?")),  # ctx.store carried
            (lw.WaitsForEvent, {}, "waited after a new run", ("w1", "ok?")),  # a wait_for_event waiter carried
        ]
        client = await rt.client()
        for cls, kwargs, expected, (request_id, question) in cases:
            handler = cls(timeout=None, runtime=rt).run(**kwargs)
            seen = []
            async for ev in handler.stream_events():
                seen.append(type(ev).__name__)
                if isinstance(ev, lw.Ask):
                    handle = client.get_workflow_handle(handler.run_id)
                    await _wait_for_async(lambda h=handle: _continued(h), 30)
                    # The question published before the continue-as-new is still a request after it.
                    (request,) = await get_run(client, handler.run_id).pending_requests()
                    assert (request.request_id, request.data) == (request_id, {"question": question})
                    handler.ctx.send_event(lw.Answer(text="after a new run"))
            assert await handler == expected
            assert seen == ["Ask", "StopEvent"]  # the stream carried over: nothing lost, nothing twice
    finally:
        await rt.destroy()


async def _continued(handle: Any) -> bool:
    desc = await handle.describe()
    return bool(desc.raw_description.workflow_execution_info.first_run_id != desc.run_id)


async def _wait_for_async(predicate: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.1)


async def test_the_handler_reads_and_writes_the_store_of_a_running_run(runtime: TemporalRuntime) -> None:
    for rt in (None, runtime):
        wf = lw.StoreFromOutside(timeout=None) if rt is None else lw.StoreFromOutside(timeout=None, runtime=rt)
        handler = wf.run(topic="bees")
        async for ev in handler.stream_events():
            if isinstance(ev, lw.Ask):
                assert await handler.ctx.store.get("topic") == "bees"
                await handler.ctx.store.set("extra", "and wasps")
                handler.ctx.send_event(lw.Answer(text="Ann"))
        assert await handler == "bees and wasps Ann"
        assert await handler.ctx.store.get("extra") == "and wasps"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_histories_replay_in_the_restricted_sandbox(path: Path) -> None:
    """The workflow runs unsandboxed (LlamaIndex's loop routes on the user's own classes), so it is also
    replayed inside Temporal's sandbox with its default restrictions, with the user's module, LlamaIndex
    and this project passed through (the registry of hosted workflows must be the process's). A
    restricted call that reaches the sandbox's modules fails here: a wall-clock read put into the run
    adapter did, when tried. What passed-through modules imported before the sandbox is not re-checked;
    test_recorded_histories_replay_without_wall_clock_or_uuid4 covers the wall clock there."""
    rt = TemporalRuntime()
    record_llama_runtime_histories.BUILD[path.stem](rt)
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "workflows", "llama_index_instrumentation", "temporal_workflows", "tests", "pydantic", "opentelemetry"
    )
    replayer = Replayer(
        workflows=[LlamaIndexRun],
        data_converter=data_converter(None),
        unsandboxed_workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        debug_mode=True,
    )
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None


_RESUMABLE_PROGRAM = '''
"""LlamaIndex's DBOS counter example (examples/dbos/durable_workflow.py), on TemporalRuntime."""
import asyncio
import sys
from datetime import timedelta

from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent
from workflows.handler import WorkflowHandler

from temporal_workflows.llama import TemporalRuntime
from temporal_workflows._llama_runtime._options import StepOptions


class Tick(Event):
    count: int


class CounterResult(StopEvent):
    final_count: int


class CounterWorkflow(Workflow):
    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Tick:
        await ctx.store.set("count", 0)
        return Tick(count=0)

    @step
    async def increment(self, ctx: Context, ev: Tick) -> Tick | CounterResult:
        count = ev.count + 1
        await ctx.store.set("count", count)
        print(f"tick {count}", flush=True)
        if count >= 8:
            return CounterResult(final_count=count)
        await asyncio.sleep(0.3)
        return Tick(count=count)


runtime = TemporalRuntime(worker=True, step_options=StepOptions(heartbeat_timeout=timedelta(seconds=2)))
workflow = CounterWorkflow(runtime=runtime, timeout=None)


async def main(run_id: str, resume: bool) -> None:
    if resume:
        handler = WorkflowHandler(workflow, runtime.get_external_adapter(run_id))
    else:
        handler = workflow.run(start_event=StartEvent(), run_id=run_id)
    result = await handler
    print(f"final {result.final_count} store {await handler.ctx.store.get('count')}", flush=True)


asyncio.run(main(sys.argv[1], len(sys.argv) > 2))
'''


async def test_a_program_killed_mid_run_resumes_its_run_when_started_again(
    temporal_address: str, tmp_path: Path
) -> None:
    """``worker=True`` puts runs on a queue named after the program, so the same program started again
    polls it: ``WorkflowHandler(workflow, runtime.get_external_adapter(run_id))`` (how LlamaIndex's DBOS
    example resumes) finds the run by its id and this process's worker takes it over. The step that was
    running at the kill runs again (at least once), after its heartbeat timeout."""
    script = tmp_path / "counter.py"
    script.write_text(_RESUMABLE_PROGRAM)
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "PYTHONPATH": os.getcwd()}
    run_id = f"counter-{uuid.uuid4().hex[:8]}"
    first = subprocess.Popen(
        [sys.executable, str(script), run_id], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: list[str] = []
    try:
        assert first.stdout is not None
        while True:
            line = await asyncio.to_thread(first.stdout.readline)
            assert line, first.stderr.read() if first.stderr else "the first process ended"
            seen.append(line.strip())
            if line.strip() == "tick 3":
                break
    finally:
        first.kill()  # SIGKILL: no shutdown, the step in flight is abandoned
        first.wait(30)
    second = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(script), run_id, "--resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    lines = second.stdout.split("\n")
    assert "final 8 store 8" in lines, second.stdout
    ticks = [int(x.split()[1]) for x in lines if x.startswith("tick ")]
    assert ticks == list(range(ticks[0], 9)) and ticks[0] in (3, 4), (seen, ticks)


async def test_every_run_this_module_made_on_its_runtime_replays(runtime: TemporalRuntime) -> None:
    """Last in the file: every run the tests above made on the module's runtime, many of them while others
    ran (fan-outs, races, live sends and stream writes, cancels, failures, human input), replays from its
    history with this code. Recorded histories guard old runs; this guards the paths each test took today."""
    client = await runtime.client()
    query = f"WorkflowType = 'LlamaIndexRun' AND TaskQueue = '{runtime.task_queue}'"
    seen: list[str] = []

    async def histories() -> AsyncIterator[WorkflowHistory]:
        async for history in client.list_workflows(query).map_histories():
            seen.append(history.workflow_id)
            yield history

    replayer = Replayer(workflows=[LlamaIndexRun], data_converter=data_converter(None))
    results = await replayer.replay_workflows(histories(), raise_on_replay_failure=False)
    if not seen:
        pytest.skip("no test above ran on the module's runtime")
    assert not results.replay_failures, {k: str(v)[:300] for k, v in results.replay_failures.items()}


async def test_a_versioned_deploy_keeps_a_running_run_on_its_version_and_sends_new_runs_to_the_new_one(
    temporal_address: str,
) -> None:
    """``rt.worker(client, deployment_name=...)`` on the dev server: the worker's version becomes the
    deployment's current one as it starts, so runs start; a run waiting for a human when a version with other
    workflows is deployed stays pinned to its own and finishes there, and new runs go to the new version."""
    from temporal_workflows.temporal._worker.versioning import current_build_id

    queue = f"llama-rt-versioned-{uuid.uuid4().hex[:8]}"
    deployment = f"llama-{uuid.uuid4().hex[:8]}"
    connection = ConnectionConfig(address=temporal_address)
    old, new = (
        TemporalRuntime(task_queue=queue, connection=connection),
        TemporalRuntime(task_queue=queue, connection=connection),
    )
    ask_old = lw.HumanInLoop(timeout=None, runtime=old)
    ask_new = lw.HumanInLoop(timeout=None, runtime=new)
    lw.Chain(timeout=30, runtime=new)  # the new version hosts one more workflow: another build id
    assert old.build_id() != new.build_id()
    client = await old.client()

    async def asked(handler: Any) -> None:
        async for ev in handler.stream_events():
            if isinstance(ev, lw.Ask):
                return

    async with old.worker(client, deployment_name=deployment):
        before = ask_old.run(topic="old")
        await asyncio.wait_for(asked(before), 60)
        async with new.worker(client, deployment_name=deployment):
            deadline = time.monotonic() + 60
            while await current_build_id(client, deployment) != new.build_id():
                assert time.monotonic() < deadline, "the new version did not become current"
                await asyncio.sleep(0.1)  # polling the server, with a deadline
            after = ask_new.run(topic="new")
            await asyncio.wait_for(asked(after), 60)
            before.ctx.send_event(lw.Answer(text="one"))
            after.ctx.send_event(lw.Answer(text="two"))
            assert await asyncio.wait_for(before, 60) == "got one"
            assert await asyncio.wait_for(after, 60) == "got two"
    for handler, rt in ((before, old), (after, new)):
        described = await client.get_workflow_handle(handler.run_id).describe()
        pinned = described.raw_description.workflow_execution_info.versioning_info.deployment_version
        assert pinned.build_id == rt.build_id()
