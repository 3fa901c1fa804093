"""LlamaIndex-style workflows on a real Temporal dev server: the same worker, plugin, client and CLI as graphs.

The hosted workflows are in ``tests/integration/llama_workflows.py``; their
steps run in this process (the session's worker), so a test can count side
effects where they happen.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from temporal_workflows.llama import Event, HumanResponseEvent, InputRequiredEvent, LlamaRunHandle, StopEvent, start_run
from temporal_workflows.llama._runtime import LlamaFailedStreamEvent
from temporal_workflows.llama.errors import WorkflowTimeoutError
from temporal_workflows.llama.events import StepStateChanged
from tests import test_llama_docs as docs
from tests.conftest import TASK_QUEUE
from tests.integration import llama_workflows as lw

pytestmark = pytest.mark.usefixtures("worker")

LIMIT = 60.0
"""Seconds a run here may take (a hang is a failure)."""


async def _start(client: Client, wf: Any, workflow_id: str, **kwargs: Any) -> LlamaRunHandle:
    return await start_run(client, wf, id=workflow_id, task_queue=TASK_QUEUE, **kwargs)


async def _events(run: LlamaRunHandle, answer: Any = None) -> list[Event]:
    async def read() -> list[Event]:
        seen: list[Event] = []
        async for ev in run.events():
            seen.append(ev)
            if answer is not None and isinstance(ev, InputRequiredEvent):
                await answer(ev)
        return seen

    return await asyncio.wait_for(read(), LIMIT)


async def _activities(client: Client, workflow_id: str) -> list[tuple[str, str]]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        (a.activity_type.name, a.activity_id)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        for a in [e.activity_task_scheduled_event_attributes]
    ]


async def test_a_run_streams_its_events_ends_with_the_stop_event_and_each_step_is_an_activity(
    client: Client, workflow_id: str
) -> None:
    run = await _start(client, lw.LlamaJoke(), workflow_id, topic="pirates")
    events = await _events(run)
    assert [type(e).__name__ for e in events] == ["Progress", "StopEvent"]
    assert events[0].msg == "thinking about pirates"  # type: ignore[attr-defined]
    assert await run.result() == "critique of a joke about pirates (pirates)"
    assert await run.run.state() == {"topic": "pirates"}  # the store is the run's committed state
    desc = await run.run.describe()
    assert desc.workflow_type == "LlamaJoke"  # the class name
    assert await _activities(client, workflow_id) == [
        ("LlamaJoke.generate", "1.0.generate"),
        ("LlamaJoke.critique", "2.0.critique"),
    ]


async def test_a_plain_sdk_or_cli_start_with_json_input_runs_the_workflow(client: Client, workflow_id: str) -> None:
    from temporal_workflows.llama import get_run

    # What `temporal workflow start --type LlamaJoke --input '{"message": {...}, "keep_alive": true}'` sends.
    await client.start_workflow(
        "LlamaJoke", {"message": {"topic": "bees"}, "keep_alive": True}, id=workflow_id, task_queue=TASK_QUEUE
    )
    run = get_run(client, lw.LlamaJoke(), workflow_id)
    assert await asyncio.wait_for(run.result(), LIMIT) == "critique of a joke about bees (bees)"


async def test_a_human_response_sent_into_the_run_answers_an_input_required_event(
    client: Client, workflow_id: str
) -> None:
    run = await _start(client, lw.LlamaHITL(), workflow_id)

    async def answer(ev: InputRequiredEvent) -> None:
        assert ev.prefix == "Enter a number: "
        await run.send_event(HumanResponseEvent(response="42"))

    events = await _events(run, answer)
    assert [type(e).__name__ for e in events] == ["InputRequiredEvent", "StopEvent"]
    assert await run.result() == "42"


async def test_the_temporal_cli_answers_with_plain_json_by_the_send_signal(client: Client, workflow_id: str) -> None:
    run = await _start(client, lw.LlamaHITL(), workflow_id)

    async def answer(ev: InputRequiredEvent) -> None:
        # What `temporal workflow signal --name send --input '{...}'` sends: plain JSON, no type key.
        await run.run.handle.signal("send", {"executor_id": "step2", "message": {"response": "from the CLI"}})

    await _events(run, answer)
    assert await run.result() == "from the CLI"


async def test_wait_for_event_waits_durably_and_the_re_run_repeats_no_effect_but_the_steps_own(
    client: Client, workflow_id: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    run = await _start(client, lw.LlamaWaiter(timeout=None), workflow_id, tag=tag)

    async def answer(ev: InputRequiredEvent) -> None:
        status = await run.run.status()
        assert status["status"] in ("waiting_for_input", "running")
        (pending,) = await run.run.pending_requests(restore=False)
        assert pending.source_executor_id == "ask" and pending.data["requirements"] == {"kind": "name"}
        assert pending.data["waiter_event"]["data"] == {"prefix": "name?"}
        # An event that does not meet the requirements answers nothing; the matching one does.
        await run.send_event(HumanResponseEvent(response="wrong", kind="other"))
        await run.send_event(HumanResponseEvent(response="Ann", kind="name"))

    events = await _events(run, answer)
    assert await run.result() == {"reply": "Ann", "n_read": 0, "n_now": 1}
    assert [type(e).__name__ for e in events] == ["Progress", "InputRequiredEvent", "StopEvent"]
    # The step ran again from the top when the answer came (its activity had ended): its own code before the
    # wait ran twice, with the same idempotency key; what it streamed, wrote and sent before the wait, once.
    assert lw.EFFECTS[f"{tag}:before"] == 2 and lw.EFFECTS[f"{tag}:after"] == 1
    assert lw.EFFECTS[f"{tag}:jokes"] == 1
    assert len(set(lw.KEYS[tag])) == 1


async def test_the_temporal_cli_answers_a_wait_by_the_respond_signal_with_plain_json(
    client: Client, workflow_id: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    run = await _start(client, lw.LlamaWaiter(timeout=None), workflow_id, tag=tag)

    async def answer(ev: InputRequiredEvent) -> None:
        (pending,) = await run.run.pending_requests()
        await run.run.handle.signal(
            "respond", {"request_id": pending.request_id, "response": {"response": "Bo", "kind": "name"}}
        )

    await _events(run, answer)
    assert (await run.result())["reply"] == "Bo"


async def test_the_temporal_cli_sends_an_event_by_the_send_event_signal_and_the_run_routes_it(
    client: Client, workflow_id: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    run = await _start(client, lw.LlamaWaiter(timeout=None), workflow_id, tag=tag)

    async def answer(ev: InputRequiredEvent) -> None:
        # `temporal workflow signal --name send_event --input '{"event": {...}}'`: plain JSON, no type, no
        # request id: the run reads it as the event its wait awaits and answers the wait itself.
        await run.run.handle.signal("send_event", {"event": {"response": "wrong", "kind": "other"}})
        await run.run.handle.signal("send_event", {"event": {"response": "Cy", "kind": "name"}})

    await _events(run, answer)
    assert (await run.result())["reply"] == "Cy"


async def test_an_event_the_run_cannot_read_is_refused_by_the_update_and_a_warning_by_the_signal(
    client: Client, workflow_id: str
) -> None:
    from temporalio.client import WorkflowUpdateFailedError

    run = await _start(client, lw.LlamaWaiter(timeout=None), workflow_id, tag="refused")

    async def answer(ev: InputRequiredEvent) -> None:
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await run.run.handle.execute_update("submit_event", {"event": {"x": 1}, "event_type": "nowhere:Nothing"})
        assert "not an event class" in str(refused.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await run.run.handle.execute_update("submit_event", {"event": {"response": "x"}, "step": "nope"})
        assert "no step 'nope'" in str(refused.value.cause)
        await run.run.handle.signal("send_event", {"event": {"x": 1}, "event_type": "nowhere:Nothing"})
        await run.send_event(HumanResponseEvent(response="Di", kind="name"))

    await _events(run, answer)
    assert (await run.result())["reply"] == "Di"
    warnings = (await run.run.status())["warnings"]
    assert any("not an event class" in w["message"] for w in warnings)


async def test_an_event_sent_while_the_step_that_will_wait_for_it_works_is_routed_at_the_boundary(
    client: Client, workflow_id: str
) -> None:
    """The run routes the event itself, over the waits committed at the boundary that takes it: a wait the
    running superstep commits is answered, in process and on Temporal alike (a client routing on a queried
    snapshot found no wait and no step taking the event, and it was lost)."""
    from temporal_workflows._events import SuperStepStartedEvent

    handler = lw.WaitsAfterWork(timeout=120).run()
    async for ev in handler.stream_events():
        if isinstance(ev, lw.Progress):
            handler.ctx.send_event(lw.Reply(text="early"))
    assert await asyncio.wait_for(handler, LIMIT) == "early"

    run = await _start(client, lw.WaitsAfterWork(timeout=120), workflow_id)

    async def send_while_working() -> None:
        async for ev in run.run.events():
            if isinstance(ev, SuperStepStartedEvent) and ev.superstep == 1:
                await run.send_event(lw.Reply(text="early"))
                return

    await asyncio.wait_for(send_while_working(), LIMIT)
    assert await asyncio.wait_for(run.result(), LIMIT) == "early"


async def test_an_event_a_step_sends_answers_another_steps_wait(client: Client, workflow_id: str) -> None:
    from tests.test_llama import InternalWait

    run = await _start(client, InternalWait(), workflow_id)
    assert await asyncio.wait_for(run.result(), LIMIT) == "asker got 42"


async def test_events_a_step_gets_in_one_superstep_share_one_activity_and_collect_events_joins_them(
    client: Client, workflow_id: str
) -> None:
    run = await _start(client, lw.LlamaFanOut(), workflow_id, width=3)
    assert await asyncio.wait_for(run.result(), LIMIT) == ["0", "10", "20"]
    assert [t for t, _ in await _activities(client, workflow_id)] == [
        "LlamaFanOut.plan",
        "LlamaFanOut.work",
        "LlamaFanOut.gather",
    ]


async def test_a_custom_stop_event_is_the_result_with_its_types_restored(client: Client, workflow_id: str) -> None:
    run = await _start(client, lw.LlamaCustomStop(), workflow_id, text="abcd")
    result = await asyncio.wait_for(run.result(), LIMIT)
    assert isinstance(result, lw.Graded) and result.verdict == lw.Verdict(score=4, notes=["short"])


async def test_a_failing_step_raises_its_own_exception_class_without_temporal_retrying_it(
    client: Client, workflow_id: str
) -> None:
    run = await _start(client, lw.LlamaBoom(), workflow_id, what="boom")
    with pytest.raises(ValueError, match="cannot handle 'boom'"):
        await asyncio.wait_for(run.result(), LIMIT)
    assert len(await _activities(client, workflow_id)) == 1  # a step without a retry policy runs once


async def test_retry_policy_and_retry_info_work_as_in_process(client: Client, workflow_id: str) -> None:
    tag = uuid.uuid4().hex[:8]
    run = await _start(client, lw.LlamaFlaky(), workflow_id, tag=tag)
    assert await asyncio.wait_for(run.result(), LIMIT) == {"retries": 2, "last": "attempt 1 failed"}
    assert lw.EFFECTS[f"{tag}:attempts"] == 3


async def test_catch_error_rescues_a_step_whose_retries_are_exhausted(client: Client, workflow_id: str) -> None:
    tag = uuid.uuid4().hex[:8]
    run = await _start(client, lw.LlamaRescued(), workflow_id, tag=tag)
    result = await asyncio.wait_for(run.result(), LIMIT)
    assert result == {"failed": "fetch", "error": "down", "attempts": 2}


async def test_the_workflow_timeout_is_the_runs_execution_timeout(client: Client, workflow_id: str) -> None:
    run = await _start(client, lw.SLOW, workflow_id)
    with pytest.raises(WorkflowTimeoutError, match=r"Operation timed out after 3\.0 seconds"):
        await asyncio.wait_for(run.result(), LIMIT)


async def test_a_waiting_run_resets_to_its_start_and_is_answered_there(client: Client, workflow_id: str) -> None:
    run = await _start(client, lw.LlamaHITL(), workflow_id)
    asked = 0

    async def answer(ev: InputRequiredEvent) -> None:
        nonlocal asked
        asked += 1
        if asked == 1:
            await run.run.reset()  # back to the start event, as for graphs: the step asks again
        else:
            await run.send_event(HumanResponseEvent(response="after reset"))

    await _events(run, answer)
    assert await run.result() == "after reset"
    assert asked == 2


async def test_a_long_run_continues_as_new_and_keeps_its_state(client: Client, workflow_id: str) -> None:
    run = await start_run(
        client, lw.LlamaCounter(timeout=300), id=workflow_id, task_queue=TASK_QUEUE, max_history_events=60, n=30
    )
    assert await asyncio.wait_for(run.result(), LIMIT) == 30
    desc = await client.get_workflow_handle(workflow_id, run_id=None).describe()
    assert desc.run_id != run.run.handle.first_execution_run_id  # it continued as new on the way


async def test_a_checkpoint_of_a_waiting_run_forks_a_run_that_is_answered_there(
    client: Client, workflow_id: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    run = await _start(client, lw.LlamaWaiter(timeout=None), workflow_id, tag=tag)
    async for ev in run.events():
        if isinstance(ev, InputRequiredEvent):
            break
    taken = await run.run.checkpoint(label="waiting")
    assert taken is not None
    fork = LlamaRunHandle(await run.run.fork(taken["checkpoint_id"], f"{workflow_id}-fork"), lw.LlamaWaiter())
    await fork.send_event(HumanResponseEvent(response="forked", kind="name"))
    assert (await asyncio.wait_for(fork.result(), LIMIT))["reply"] == "forked"
    await run.send_event(HumanResponseEvent(response="original", kind="name"))
    assert (await asyncio.wait_for(run.result(), LIMIT))["reply"] == "original"


async def test_the_llama_examples_give_on_temporal_the_results_they_give_in_process(
    client: Client, workflow_id: str
) -> None:
    from examples import llama_demo, llama_fanout, llama_hitl, llama_loop

    loop, fanout, hitl = llama_demo.WORKFLOWS
    for i, (wf, sample) in enumerate(((loop, llama_loop.SAMPLE), (fanout, llama_fanout.SAMPLE))):
        run = await _start(client, wf, f"{workflow_id}-{i}", **sample)
        assert await asyncio.wait_for(run.result(), LIMIT) == await wf.run(**sample)
    # Its approval answers a wait *and* reaches the step taking human responses, whose copy the run drops when
    # the wait's step ends it (as in process): the client must not fail on the run having completed meanwhile.
    run = await _start(client, hitl, f"{workflow_id}-hitl", **llama_hitl.SAMPLE)
    await _events(run, lambda ev: run.send_event(llama_hitl.auto_answer(ev)))
    assert await run.result() == {"published": True, "text": "Ann on bees: bees are remarkable.", "author": "Ann"}


# -- LlamaIndex's documented examples, on Temporal ------------------------------------------------------------


@pytest.mark.parametrize(
    ("wf", "kwargs"),
    [
        (docs.ReadmeWorkflow(), {"input_msg": "Hello, world!"}),
        (docs.ConcurrentFlow(timeout=30), {}),
        (docs.StreamingWorkflow(timeout=30), {"first_input": "Start the workflow."}),
    ],
    ids=["readme", "concurrency", "streaming"],
)
async def test_documented_examples_give_the_result_and_events_they_give_in_process(
    client: Client, workflow_id: str, wf: Any, kwargs: dict[str, Any]
) -> None:
    handler = wf.run(**kwargs)
    local_events = [(type(e).__name__, e.model_dump(mode="json")) async for e in handler.stream_events()]
    local = await handler
    run = await _start(client, wf, workflow_id, **kwargs)
    remote_events = [(type(e).__name__, e.model_dump(mode="json")) for e in await _events(run)]
    assert await run.result() == local
    assert remote_events == local_events


async def test_documented_human_in_the_loop_examples_on_temporal(client: Client, workflow_id: str) -> None:
    run = await _start(client, docs.HumanInTheLoopWorkflow(timeout=None), workflow_id)
    await _events(run, lambda ev: run.send_event(HumanResponseEvent(response="42")))
    assert await run.result() == "42"
    run = await _start(client, docs.WaitWorkflow(timeout=None), f"{workflow_id}-wait")
    await _events(run, lambda ev: run.send_event(HumanResponseEvent(response="44")))
    assert await run.result() == "44"


async def test_a_custom_start_event_starts_a_run(client: Client, workflow_id: str) -> None:
    run = await start_run(
        client,
        docs.JokeFlow(timeout=60),
        docs.MyCustomStartEvent(a_string_field="pirates"),
        id=workflow_id,
        task_queue=TASK_QUEUE,
    )
    result = await asyncio.wait_for(run.result(), LIMIT)
    assert isinstance(result, docs.MyStopEvent) and result.critique == "critique of a joke about pirates"
    assert isinstance(await run.stop_event_result(), StopEvent)


async def _peer_stream(wrote_then_broke: bool) -> tuple[list[str], str]:
    """What LlamaIndex itself streams for the same workflow: the texts written, then how it ended."""
    from workflows import Context as PeerContext
    from workflows import Workflow as PeerWorkflow
    from workflows import step as peer_step
    from workflows.events import Event as PeerEvent
    from workflows.events import StartEvent as PeerStart
    from workflows.events import StopEvent as PeerStop
    from workflows.retry_policy import retry_policy as peer_retry_policy
    from workflows.retry_policy import stop_after_attempt as peer_stop
    from workflows.retry_policy import wait_fixed as peer_wait

    class Progress(PeerEvent):
        msg: str

    class Broke(PeerWorkflow):
        @peer_step
        async def go(self, ctx: PeerContext, ev: PeerStart) -> PeerStop:
            ctx.write_event_to_stream(Progress(msg="first"))
            ctx.write_event_to_stream(Progress(msg="second"))
            raise ValueError("broke after writing")

    class Retried(PeerWorkflow):
        @peer_step(retry_policy=peer_retry_policy(wait=peer_wait(0.1), stop=peer_stop(3)))
        async def go(self, ctx: PeerContext, ev: PeerStart) -> PeerStop:
            attempt = ctx.retry_info().retry_number
            ctx.write_event_to_stream(Progress(msg=f"attempt {attempt}"))
            if attempt < 2:
                raise ConnectionError(f"attempt {attempt} failed")
            return PeerStop(result="done")

    handler = (Broke(timeout=30) if wrote_then_broke else Retried(timeout=30)).run()
    texts = [ev.msg async for ev in handler.stream_events() if isinstance(ev, Progress)]
    try:
        return texts, str(await handler)
    except Exception as e:
        return texts, f"{type(e).__name__}: {e}"


async def test_stream_writes_before_a_step_fails_reach_the_reader_then_the_failure_as_in_llamaindex(
    client: Client, workflow_id: str
) -> None:
    run = await _start(client, lw.LlamaWroteThenBroke(), workflow_id)
    events = await _events(run)
    assert [e.msg for e in events if isinstance(e, lw.Progress)] == ["first", "second"]
    assert type(events[-1]).__name__ == "WorkflowFailedEvent"  # the writes come first, then the failure
    with pytest.raises(ValueError, match="broke after writing"):
        await asyncio.wait_for(run.result(), LIMIT)
    # As LlamaIndex itself, and as the same workflow in process.
    assert await _peer_stream(True) == (["first", "second"], "ValueError: broke after writing")
    handler = lw.LlamaWroteThenBroke().run()
    assert [e.msg async for e in handler.stream_events() if isinstance(e, lw.Progress)] == ["first", "second"]
    with pytest.raises(ValueError, match="broke after writing"):
        await handler
    # The writes travelled live, tagged with the step and the attempt that wrote them, between the step's
    # StepStateChanged running and not_running (shown with expose_internal=True, as LlamaIndex shows them).
    raw = [e for e in await asyncio.wait_for(_collect_raw(run), LIMIT) if isinstance(e, LlamaFailedStreamEvent)]
    assert [(e.executor_id, e.superstep, e.attempt, e.seq) for e in raw] == [("go", 1, 1, n) for n in (1, 2, 3, 4)]
    assert [e.event["type"].rsplit(":", 1)[1] for e in raw] == [
        "StepStateChanged",
        "Progress",
        "Progress",
        "StepStateChanged",
    ]
    assert not [e for e in events if isinstance(e, StepStateChanged)]  # internal: only when asked for
    internal = [e for e in await asyncio.wait_for(_internal(run), LIMIT) if isinstance(e, StepStateChanged)]
    assert [(e.name, e.step_state.value, e.output_event_name) for e in internal] == [
        ("go", "running", None),
        ("go", "not_running", None),  # a failed attempt has no output, as in LlamaIndex
    ]


async def _internal(run: LlamaRunHandle) -> list[Event]:
    return [e async for e in run.events(expose_internal=True)]


async def _collect_raw(run: LlamaRunHandle) -> list[Any]:
    return [e async for e in run.run.events()]


async def test_stream_writes_of_retried_attempts_reach_the_reader_as_in_llamaindex(
    client: Client, workflow_id: str
) -> None:
    run = await _start(client, lw.LlamaWroteThenRetried(), workflow_id)
    events = await _events(run)
    assert await asyncio.wait_for(run.result(), LIMIT) == "done"
    texts = [e.msg for e in events if isinstance(e, lw.Progress)]
    assert texts == ["attempt 0", "attempt 1", "attempt 2"]
    assert await _peer_stream(False) == (texts, "done")
