"""LlamaIndex programs print what they print on llama-index-workflows 2.26.1, in process and on Temporal.

Each test runs one program of ``llama_peer_programs`` three ways: on
LlamaIndex itself (the same source, its imports swapped), on this library in
process, and on Temporal (hosted by the session's worker), and compares what
a user's code sees: the events it streams, the result or the error.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import Client

from temporal_workflows.errors import ExecutorFailedError
from temporal_workflows.llama import start_run
from tests.conftest import TASK_QUEUE
from tests.integration import llama_peer_programs as ours

pytestmark = pytest.mark.usefixtures("worker")

LIMIT = 60.0

Send = Callable[[Any], Awaitable[None]]


def peer() -> types.ModuleType:
    pytest.importorskip("workflows")
    return ours.on_llamaindex()


def _seen(ev: Any) -> tuple[Any, ...] | None:
    """What a user's loop over the stream looks at; ``None`` for what this comparison leaves out."""
    name = type(ev).__name__
    if name == "UnhandledEvent":
        return (name, ev.event_type, ev.qualified_name.rsplit(".", 1)[1], ev.step_name, ev.idle)
    if name in ("InputRequiredEvent", "StopEvent"):
        return (name,)
    if name == "WorkflowFailedEvent":
        elapsed = ev.elapsed_seconds is not None and ev.elapsed_seconds >= 0
        return (name, ev.step_name, type(ev.exception).__name__, str(ev.exception), ev.attempts, elapsed)
    if name == "WorkflowTimedOutEvent":
        return (name, ev.timeout, ev.active_steps)
    return None


async def _in_process(
    m: types.ModuleType, wf: Any, on_input: Callable[[types.ModuleType, Send], Awaitable[None]] | None, **start: Any
) -> tuple[list[Any], Any]:
    handler = wf.run(**start)
    seen: list[Any] = []

    async def send(ev: Any) -> None:
        handler.ctx.send_event(ev)

    async def read() -> None:
        async for ev in handler.stream_events(expose_internal=True):
            if (s := _seen(ev)) is not None:
                seen.append(s)
            if type(ev).__name__ == "InputRequiredEvent" and on_input is not None:
                await on_input(m, send)

    await asyncio.wait_for(read(), LIMIT)
    try:
        return seen, ("result", await handler)
    except Exception as e:
        return seen, ("raised", type(e).__name__, str(e))


async def _on_temporal(
    client: Client,
    workflow_id: str,
    wf: Any,
    on_input: Callable[[types.ModuleType, Send], Awaitable[None]] | None,
    **start: Any,
) -> tuple[list[Any], Any]:
    run = await start_run(client, wf, id=workflow_id, task_queue=TASK_QUEUE, **start)
    seen: list[Any] = []

    async def read() -> None:
        async for ev in run.events(expose_internal=True):
            if (s := _seen(ev)) is not None:
                seen.append(s)
            if type(ev).__name__ == "InputRequiredEvent" and on_input is not None:
                await on_input(ours, run.send_event)

    await asyncio.wait_for(read(), LIMIT)
    try:
        return seen, ("result", await run.result())
    except Exception as e:
        return seen, ("raised", type(e).__name__, str(e))


async def _three_ways(
    client: Client,
    workflow_id: str,
    name: str,
    on_input: Callable[[types.ModuleType, Send], Awaitable[None]] | None = None,
    make: Callable[[type], Any] = lambda cls: cls(),
    **start: Any,
) -> tuple[Any, Any, Any]:
    p = peer()
    on_peer = await _in_process(p, make(getattr(p, name)), on_input, **start)
    in_process = await _in_process(ours, make(getattr(ours, name)), on_input, **start)
    temporal = await _on_temporal(client, workflow_id, make(getattr(ours, name)), on_input, **start)
    return on_peer, in_process, temporal


async def _stray_then_ping(m: types.ModuleType, send: Send) -> None:
    await send(m.Stray(n=1))
    await send(m.Ping(text="hi"))


async def test_an_event_nothing_takes_publishes_unhandled_event_as_llamaindex_does(
    client: Client, workflow_id: str
) -> None:
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "UnhandledProbe", _stray_then_ping)
    assert on_peer == (
        [("InputRequiredEvent",), ("UnhandledEvent", "Stray", "Stray", None, True), ("StopEvent",)],
        ("result", "pong hi"),
    )
    assert in_process == on_peer
    assert temporal == on_peer


async def test_a_step_that_fails_for_good_reports_its_own_error_and_its_attempts_as_llamaindex_does(
    client: Client, workflow_id: str
) -> None:
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "FailsAfterRetries", what="boom")
    failed = ("WorkflowFailedEvent", "explode", "ValueError", "cannot handle 'boom'", 2, True)
    assert on_peer == ([failed], ("raised", "ValueError", "cannot handle 'boom'"))
    assert in_process == on_peer
    assert temporal == on_peer


async def test_a_step_raising_the_programs_own_exception_class_raises_that_class_as_llamaindex_does(
    client: Client, workflow_id: str
) -> None:
    """``except QuotaExceeded`` catches a failed run on Temporal too: the failure names the class, rebuilt here."""
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "OwnError", who="ann")
    failed = ("WorkflowFailedEvent", "call_model", "QuotaExceeded", "quota exceeded for 'ann'", 1, True)
    assert on_peer == ([failed], ("raised", "QuotaExceeded", "quota exceeded for 'ann'"))
    assert in_process == on_peer
    assert temporal == on_peer
    run = await start_run(client, ours.OwnError(), id=f"{workflow_id}-2", task_queue=TASK_QUEUE, who="bob")
    with pytest.raises(ours.QuotaExceeded, match="quota exceeded for 'bob'") as caught:
        await run.result()
    assert type(caught.value) is ours.QuotaExceeded


async def test_an_own_exception_class_that_cannot_be_made_from_its_message_stays_a_named_error_on_temporal(
    client: Client, workflow_id: str
) -> None:
    """Documented (docs/llama.md): ``Rejected(code)`` cannot be rebuilt from its text; the error names it."""
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "OwnError", who="ann", code=7)
    assert on_peer[1] == in_process[1] == ("raised", "Rejected", "rejected with code 7")
    assert temporal[1][:2] == ("raised", "ExecutorFailedError")
    run = await start_run(client, ours.OwnError(), id=f"{workflow_id}-2", task_queue=TASK_QUEUE, who="ann", code=7)
    with pytest.raises(ExecutorFailedError) as caught:
        await run.result()
    error = caught.value
    assert error.error_type == "Rejected" and error.detail == "rejected with code 7"
    assert error.error_class == f"{ours.__name__}.Rejected"
    assert error.executor_id == "call_model"


async def test_a_timeout_names_the_steps_still_running_as_llamaindex_does(client: Client, workflow_id: str) -> None:
    on_peer, in_process, temporal = await _three_ways(
        client, workflow_id, "StillRunning", make=lambda cls: cls(timeout=2), seconds=10
    )
    assert on_peer == (
        [("WorkflowTimedOutEvent", 2.0, ["crawl"])],
        ("raised", "WorkflowTimeoutError", "Operation timed out after 2.0 seconds. Currently active steps: crawl"),
    )
    assert in_process == on_peer
    assert temporal == on_peer


def _queries(tag: str) -> list[list[Any]]:
    """Three queries started in this order, finishing in another: medium, slow, fast."""
    return [[f"{tag}-medium", 0.8], [f"{tag}-slow", 2.5], [f"{tag}-fast", 0.1]]


async def test_the_first_stop_event_returned_wins_and_the_losers_are_cancelled_as_in_llamaindex(
    client: Client, workflow_id: str
) -> None:
    tag = workflow_id[-8:]
    p = peer()
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "FirstToFinish", queries=_queries(tag))
    assert on_peer == ([("StopEvent",)], ("result", f"{tag}-fast"))
    assert in_process == on_peer
    assert temporal == on_peer
    # Nobody waited for the others: still running when the first answer came, they were cancelled.
    finished_on_peer = [n for n in p.FINISHED if n.startswith(tag)]
    assert finished_on_peer == [f"{tag}-fast"]
    assert [n for n in ours.FINISHED if n.startswith(tag)] == [f"{tag}-fast", f"{tag}-fast"]


async def test_collect_events_gets_the_events_in_the_order_they_were_emitted_as_in_llamaindex(
    client: Client, workflow_id: str
) -> None:
    tag = workflow_id[-8:]
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "CollectInOrder", queries=_queries(tag))
    assert on_peer == ([("StopEvent",)], ("result", [f"{tag}-fast", f"{tag}-medium", f"{tag}-slow"]))
    assert in_process == on_peer
    assert temporal == on_peer


async def test_events_of_different_steps_reach_collect_events_in_the_order_the_steps_returned_as_in_llamaindex(
    client: Client, workflow_id: str
) -> None:
    """Across steps of one superstep too (#25.13): the step started first but finishing last comes last."""
    tag = workflow_id[-8:]
    queries = [[f"{tag}-slow", 1.5], [f"{tag}-fast", 0.05]]
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "CollectAcrossSteps", queries=queries)
    assert on_peer == ([("StopEvent",)], ("result", [f"{tag}-fast", f"{tag}-slow"]))
    assert in_process == on_peer
    assert temporal == on_peer


async def test_a_step_returning_the_first_stop_event_cancels_the_other_running_steps_as_in_llamaindex(
    client: Client, workflow_id: str
) -> None:
    tag = workflow_id[-8:]
    p = peer()
    started = asyncio.get_running_loop().time()
    on_peer, in_process, temporal = await _three_ways(client, workflow_id, "RaceOfSteps", tag=tag)
    # Nobody waited for the tortoise (30 s a race): the three runs took seconds.
    assert asyncio.get_running_loop().time() - started < 15
    assert on_peer == ([("StopEvent",)], ("result", "hare"))
    assert in_process == on_peer
    assert temporal == on_peer
    assert [n for n in p.FINISHED if n.startswith(tag)] == [f"{tag}-hare"]
    assert [n for n in p.CANCELLED if n.startswith(tag)] == [f"{tag}-tortoise"]
    assert [n for n in ours.FINISHED if n.startswith(tag)] == [f"{tag}-hare", f"{tag}-hare"]

    async def both_cancelled() -> None:  # on Temporal the loser learns of it at its next heartbeat
        while [n for n in ours.CANCELLED if n.startswith(tag)] != [f"{tag}-tortoise"] * 2:
            await asyncio.sleep(0.1)

    await asyncio.wait_for(both_cancelled(), 15)
