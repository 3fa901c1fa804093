"""A LlamaIndex workflow run by ``TemporalRuntime``, served over AG-UI by ``temporal-workflows console --workflow
app:Flow`` as graphs are, driven by the real ``@ag-ui/client`` (npm) and by the ``ag-ui-protocol`` Python types.

The console and the worker are processes; every turn's stream passes the client's own ``verifyEvents``. The
program is LlamaIndex's documented human-in-the-loop example (its ``InputRequiredEvent`` is the turn's
interrupt, its ``HumanResponseEvent`` the ``responseSchema``), and one waiting for a typed response (a wrong
answer is a ``RUN_ERROR`` naming the field, the run untouched).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

pytest.importorskip("workflows")
pytest.importorskip("ag_ui")

from ag_ui.core import EventType, RunFinishedEvent, TextMessageContentEvent

from temporal_workflows.ag_ui._ids import thread_workflow_id
from temporal_workflows.temporal import get_run
from tests.integration import llama_tools_app as app
from tests.integration.ag_ui_support import Processes, run_client
from tests.integration.test_ag_ui import _body, _interrupts, _types, turn

APP = "tests.integration.llama_tools_app"
HITL = "tests.integration.llama_docs_examples.HumanInTheLoopWorkflow"
REVIEW = "tests.integration.llama_tools_app.ReviewWorkflow"


@dataclass
class Served:
    url: str


@pytest.fixture(scope="module")
async def served(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    queue = f"llama-ag-ui-{uuid.uuid4().hex[:8]}"
    hosted = [arg for spec in app.SPECS for arg in ("--workflow", spec)]
    given = ("--workflow", f"{APP}:hitl", "--workflow", f"{APP}:review", "--task-queue", queue)
    async with Processes(temporal_address, tmp_path_factory.mktemp("llama-ag-ui")) as procs:
        _, url = await asyncio.gather(
            procs.worker("worker", *hosted, "--task-queue", queue), procs.console("console", *given)
        )
        yield Served(url)


async def test_ag_ui_client_drives_the_docs_human_in_the_loop_example(served: Served, client: Any) -> None:
    thread = f"js-{uuid.uuid4().hex[:8]}"
    hitl, review = await asyncio.gather(
        run_client(
            {
                "mode": "turns",
                "url": f"{served.url}/ag-ui/{HITL}",
                "threadId": thread,
                "turns": [{"message": "{}"}, {"resume": {"response": "42"}}],
            }
        ),
        run_client(
            {
                "mode": "turns",
                "url": f"{served.url}/ag-ui/{REVIEW}",
                "threadId": f"{thread}-review",
                "turns": [
                    {"message": '{"topic": "kites"}'},
                    {"resume": {"approved": True, "score": 9}},  # out of bounds: refused by the run
                    {"resume": {"approved": True, "score": 5}},
                ],
            }
        ),
    )
    for t in [*hitl, *review]:
        assert t["error"] is None and t["verify"] is None, t  # the client's own verifyEvents, on each turn
        assert t["types"][0] == "RUN_STARTED"
    asked, answered = hitl
    assert asked["outcome"]["type"] == "interrupt"
    (interrupt,) = asked["outcome"]["interrupts"]
    assert interrupt["id"] == "input-1" and interrupt["reason"] == "input_required"
    assert interrupt["message"] == "Enter a number: "
    assert interrupt["responseSchema"]["properties"]["response"]["type"] == "string"
    assert interrupt["responseSchema"]["title"] == "HumanResponseEvent"  # the type the run waits for
    assert [t for t in asked["types"] if t.startswith("STEP_")] == ["STEP_STARTED", "STEP_FINISHED"]
    assert answered["outcome"] == {"type": "success"} and answered["result"] == {"outputs": ["42"]}
    assert answered["pendingInterrupts"] == []
    assert [(m["role"], m.get("content")) for m in answered["messages"]] == [("user", "{}"), ("assistant", "42")]
    run = get_run(client, thread_workflow_id("ag-ui", HITL, thread))
    assert await run.outputs() == ["42"]

    started, refused, accepted = review
    (approval,) = started["outcome"]["interrupts"]
    assert set(approval["responseSchema"]["properties"]) == {"approved", "score"}
    assert approval["responseSchema"]["title"] == "Approval"
    assert started["state"] == {"topic": "kites"}  # the store, as the run's state
    assert refused["types"] == ["RUN_STARTED", "RUN_ERROR"]
    assert "score" in refused["runError"]["message"] and refused["runError"]["code"] == "LlamaEventRefused"
    assert refused["pendingInterrupts"] == started["pendingInterrupts"]  # still waiting for the same request
    assert accepted["outcome"] == {"type": "success"} and accepted["result"] == {"outputs": ["approved (5/5)"]}
    assert accepted["state"] == {"topic": "kites", "score": 5}


async def test_python_types_reconnect_with_last_event_id_and_a_second_message_is_refused(served: Served) -> None:
    url = f"{served.url}/ag-ui/{HITL}"
    thread = f"py-{uuid.uuid4().hex[:8]}"
    messages = [{"id": f"{thread}-u1", "role": "user", "content": "{}"}]
    async with httpx.AsyncClient(timeout=120) as http:
        first = await turn(http, url, _body(thread, "t1", messages))
        assert _types(first)[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED"]
        (ask,) = _interrupts(first)
        counted = [f for f in first if f.id is not None]
        for cut in range(len(counted) - 1):  # a client that had the events up to each one in turn
            rest = await turn(http, url, _body(thread, "t1", messages), last_event_id=counted[cut].id)
            assert [(f.id, f.event) for f in rest if f.id is not None] == [(f.id, f.event) for f in counted[cut + 1 :]]
            assert rest[0].event.type == EventType.STATE_SNAPSHOT  # the state afresh, before what it missed

        again = await turn(http, url, _body(thread, "t1b", messages))  # the same request: not taken twice
        assert _types(again) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"] and _interrupts(again)[0].id == ask.id
        more = [*messages, {"id": f"{thread}-u2", "role": "user", "content": "hello?"}]
        second_message = await turn(http, url, _body(thread, "t2", more))
        assert _types(second_message) == ["RUN_STARTED", "RUN_ERROR"]
        assert "took its start message already" in second_message[1].event.message

        answer = [{"interruptId": ask.id, "status": "resolved", "payload": {"response": "7"}}]
        cancel = await turn(http, url, _body(thread, "t3", messages, resume=[{**answer[0], "status": "cancelled"}]))
        assert _types(cancel) == ["RUN_STARTED", "RUN_ERROR"] and "cannot be cancelled" in cancel[1].event.message
        last = await turn(http, url, _body(thread, "t4", messages, resume=answer))
        final = last[-1].event
        assert isinstance(final, RunFinishedEvent) and final.outcome.type == "success"
        assert final.result == {"outputs": ["7"]}
        assert "".join(f.event.delta for f in last if isinstance(f.event, TextMessageContentEvent)) == "7"
