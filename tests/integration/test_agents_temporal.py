"""Agents as steps on the real dev server: the same answers as in process, live updates, approvals by respond."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import AgentResponse, Content
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from temporal_workflows import WorkflowEvent
from temporal_workflows._engine.limits import DEFAULT_MAX_PAYLOAD_BYTES, TRUNCATED_KEY
from temporal_workflows.agents import AgentRunUpdateEvent, conversation_key
from temporal_workflows.errors import ExecutorFailedError
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import RunHandle, start_run
from tests.agent_support import MODEL_CALLS, TOOL_CALLS
from tests.conftest import TASK_QUEUE
from tests.integration.agent_graphs import GRAPHS, PYDANTIC_AI

pytestmark = pytest.mark.usefixtures("worker")


def _ticket() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


async def _started(handle: RunHandle, timeout: float = 30) -> None:
    """Until the run has scheduled its first step (read from history, which asks the run nothing).

    A query that reaches a run while its first workflow task still runs the
    topology local activity can leave a history that does not replay (the
    local activity's marker alone in that task): seen with temporalio 1.35 for
    any graph, so these tests ask nothing of a run before its first step.
    """

    async def scan() -> None:
        async for ev in handle.handle.fetch_history_events(wait_new_event=True):
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                return

    await asyncio.wait_for(scan(), timeout)


async def _requests(handle: RunHandle, n: int, timeout: float = 30) -> list[RequestInfoEvent]:
    """The run's open requests, once there are ``n`` (polled, with a bound)."""
    await _started(handle)
    async with asyncio.timeout(timeout):
        while True:
            pending = await handle.pending_requests(restore=False)
            if len(pending) == n:
                return pending
            await asyncio.sleep(0.05)


async def _waiting_again(handle: RunHandle, after: int, timeout: float = 30) -> None:
    """Until the run has run a superstep past ``after`` and waits for input again (polled, with a bound)."""
    async with asyncio.timeout(timeout):
        while True:
            status = await handle.status()
            if status["superstep"] > after and status["status"] == "waiting_for_input" and not status["in_flight"]:
                return
            await asyncio.sleep(0.05)


def _approve(request: RequestInfoEvent, approved: bool = True) -> Content:
    return Content.from_dict(request.data).to_function_approval_response(approved=approved)


async def _events(handle: RunHandle) -> list[WorkflowEvent]:
    async def all_() -> list[WorkflowEvent]:
        return [e async for e in handle.events()]

    return await asyncio.wait_for(all_(), 60)


async def test_agents_give_the_same_answers_as_in_process_and_stream_live(client: Client, workflow_id: str) -> None:
    wf = GRAPHS["chain"]
    local = await wf.run("Write a slogan")
    handle = await start_run(client, wf, "Write a slogan", id=workflow_id, task_queue=TASK_QUEUE)
    outputs = await handle.outputs()
    assert all(isinstance(o, AgentResponse) for o in outputs)
    assert [(o.messages[0].author_name, o.text) for o in outputs] == [
        (o.messages[0].author_name, o.text) for o in local.get_outputs()
    ]
    updates = [e for e in await _events(handle) if isinstance(e, AgentRunUpdateEvent)]
    text = {ex: "".join(u.data.text for u in updates if u.executor_id == ex) for ex in ("writer", "reviewer")}
    assert text == {"writer": "Charge Ahead: affordable fun", "reviewer": "Make it more playful."}
    assert all(u.type == "output" and u.attempt == 1 for u in updates)


async def test_approvals_are_requests_answered_by_respond_and_nothing_completed_runs_again(
    client: Client, workflow_id: str
) -> None:
    ticket = _ticket()
    handle = await start_run(client, GRAPHS["approval"], f"{ticket} email bob", id=workflow_id, task_queue=TASK_QUEUE)
    first, second = await _requests(handle, 2)
    assert {Content.from_dict(r.data).function_call.name for r in (first, second)} == {"send_email", "archive"}
    assert (await handle.status())["status"] == "waiting_for_input"
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["lookup"]
    # Independent: one answer now, the other once the run has taken the first.
    superstep = (await handle.status())["superstep"]
    await handle.respond(first.request_id, _approve(first))
    await _waiting_again(handle, superstep)
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["lookup"]
    assert len(MODEL_CALLS[ticket]) == 2
    await handle.respond(second.request_id, _approve(second))
    result = await asyncio.wait_for(handle.result(), 60)
    assert result["outputs"][-1] == "mailer: Emailed bob (3 tool results)."
    assert sorted(t for t, _ in TOOL_CALLS[ticket]) == ["archive", "lookup", "send_email"]
    assert len(MODEL_CALLS[ticket]) == 3


async def test_approvals_answered_together_resume_once(client: Client, workflow_id: str) -> None:
    ticket = _ticket()
    handle = await start_run(client, GRAPHS["approval"], f"{ticket} email bob", id=workflow_id, task_queue=TASK_QUEUE)
    requests = await _requests(handle, 2)
    await asyncio.gather(*(handle.respond(r.request_id, _approve(r)) for r in requests))
    result = await asyncio.wait_for(handle.result(), 60)
    assert result["outputs"][-1] == "mailer: Emailed bob (3 tool results)."
    assert sorted(t for t, _ in TOOL_CALLS[ticket]) == ["archive", "lookup", "send_email"]
    assert len(MODEL_CALLS[ticket]) == 3


async def test_sibling_agents_approvals_are_independent_on_temporal(client: Client, workflow_id: str) -> None:
    ticket = _ticket()
    handle = await start_run(client, GRAPHS["siblings"], f"{ticket} tidy", id=workflow_id, task_queue=TASK_QUEUE)
    requests = {r.source_executor_id: r for r in await _requests(handle, 2)}
    superstep = (await handle.status())["superstep"]
    await handle.respond(requests["left"].request_id, _approve(requests["left"]))
    await _waiting_again(handle, superstep)
    assert [a["folder"] for _, a in TOOL_CALLS[ticket]] == ["left"]
    assert [o.text for o in [AgentResponse.from_dict(x) for x in (await handle.status())["outputs"]]] == ["left done"]
    await handle.respond(requests["right"].request_id, _approve(requests["right"], approved=False))
    outputs = await asyncio.wait_for(handle.outputs(), 60)
    assert sorted(o.text for o in outputs) == ["left done", "right done"]
    assert [a["folder"] for _, a in TOOL_CALLS[ticket]] == ["left"]  # the denied call never ran


async def test_a_model_refusal_fails_at_once_without_retries(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, GRAPHS["refused"], "zz-refused hello", id=workflow_id, task_queue=TASK_QUEUE)
    before = len(MODEL_CALLS["zz-refused"])
    with pytest.raises(ExecutorFailedError) as info:
        await asyncio.wait_for(handle.result(), 60)
    assert info.value.executor_id == "censored"
    assert "AgentModelError" in str(info.value) and "filtered" in str(info.value)
    assert len(MODEL_CALLS["zz-refused"]) - before <= 1  # one attempt (the model call raised at once)


async def test_each_turn_writes_only_its_new_messages_and_no_step_input_carries_the_conversation(
    client: Client, workflow_id: str
) -> None:
    ticket = _ticket()
    handle = await start_run(client, GRAPHS["conversation"], ticket, id=workflow_id, task_queue=TASK_QUEUE)
    assert (await asyncio.wait_for(handle.result(), 60))["outputs"] == ["read document 3"]
    state = await handle.state()
    assert [m["role"] for m in state[conversation_key("assistant")]] == ["user", "assistant", "tool", "assistant"] * 3

    inputs: list[str] = []
    written: list[list[str]] = []
    async for ev in handle.handle.fetch_history_events():
        if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = ev.activity_task_scheduled_event_attributes
            if attrs.activity_type.name.endswith(".assistant"):
                inputs.append(b"".join(p.data for p in attrs.input.payloads).decode())
        elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            raw = b"".join(p.data for p in ev.activity_task_completed_event_attributes.result.payloads).decode()
            result = json.loads(raw)
            writes = [w for w in result.get("writes", []) if w["key"] == conversation_key("assistant")]
            if writes:
                written.append([m["role"] for w in writes for m in w["value"]["data"]])
    assert len(inputs) == 3
    assert all("document" not in i for i in inputs)  # the conversation is read from state, not the input
    assert written == [["user", "assistant", "tool", "assistant"]] * 3  # each turn wrote only what it added


@pytest.mark.skipif(not PYDANTIC_AI, reason="pydantic-ai-slim is not installed")
async def test_a_pydantic_ai_agents_deferred_tool_is_approved_by_respond(client: Client, workflow_id: str) -> None:
    ticket = _ticket()
    handle = await start_run(client, GRAPHS["pydantic"], f"{ticket} trip", id=workflow_id, task_queue=TASK_QUEUE)
    (request,) = await _requests(handle, 1)
    assert Content.from_dict(request.data).function_call.name == "book"
    await handle.respond(request.request_id, _approve(request))
    (response,) = await asyncio.wait_for(handle.outputs(), 60)
    assert response.text == "Booked Oslo; it is sunny."
    assert [t for t, _ in TOOL_CALLS[ticket]] == ["model", "weather", "book", "model"]
    updates = [e for e in await _events(handle) if isinstance(e, AgentRunUpdateEvent) and e.data.role == "assistant"]
    assert "".join(u.data.text or "" for u in updates).endswith("Booked Oslo; it is sunny.")


async def test_the_agents_example_on_temporal_streams_and_waits_for_the_human(
    client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from examples import agents

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = io.StringIO()
    result = await asyncio.wait_for(agents.on_temporal(client, task_queue=TASK_QUEUE, run_id=workflow_id, out=out), 60)
    assert [o["messages"][-1]["author_name"] for o in result["outputs"]] == ["writer", "reviewer"]
    assert out.getvalue().splitlines() == [
        f"writer: {agents.WRITER_TEXT}",
        "approval needed: publish(title='Why bicycles are efficient')",
        "approved (the demo plays the human)",
        "reviewer: Clear and accurate; I published it as 'Why bicycles are efficient'.",
    ]


async def _converse(client: Client, workflow_id: str, turns: int, size: int) -> tuple[RunHandle, dict[str, Any]]:
    """A keep-alive conversation with the librarian (default AgentExecutor options): a send per turn, each turn
    fetching a ``size``-character document; the run's result once closed."""
    handle = await start_run(client, GRAPHS["long_chat"], None, id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True)
    for turn in range(1, turns + 1):
        await handle.send("librarian", f"question {turn} {size}")

        async def answered(expected: int = turn) -> bool:
            status = await handle.status()
            assert status["status"] != "failed", status["error"]
            return bool(status["superstep"] >= expected and status["status"] == "idle")

        async with asyncio.timeout(120):
            while not await answered():
                await asyncio.sleep(0.05)
    await handle.close()
    return handle, await asyncio.wait_for(handle.result(), 120)


@pytest.mark.skipif(not PYDANTIC_AI, reason="pydantic-ai-slim is not installed")
@pytest.mark.parametrize(
    ("turns", "size"),
    [
        (200, 5_000),
        # About 5 MB of conversation: past one payload, read by each turn's step in pages (#23 item 6).
        (50, 100_000),
    ],
    ids=["200x5KB", "50x100KB"],
)
async def test_a_long_conversation_with_default_options_completes(
    client: Client, workflow_id: str, turns: int, size: int
) -> None:
    handle, result = await _converse(client, workflow_id, turns, size)
    # Every turn's AgentResponse was delivered as an output event; the result keeps the newest that fit.
    kept = [AgentResponse.from_dict(o) for o in result["outputs"]]
    assert kept[-1].text.endswith(f"Noted document {turns}.")
    assert result.get("outputs_released", 0) + len(kept) == turns
    status = await handle.status()
    assert status["outputs_released"] == result.get("outputs_released", 0)
    if turns * size > DEFAULT_MAX_PAYLOAD_BYTES:
        # The conversation outgrew one payload: the state query cuts it, naming it with its size.
        note = (await handle.state())[TRUNCATED_KEY]
        assert "'conversation:librarian' (" in note
