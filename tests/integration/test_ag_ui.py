"""The AG-UI endpoint on the real dev server, driven by real clients.

- ``@ag-ui/client`` (npm, run with the machine's Node) against ``temporal-workflows
  console --workflow ...`` processes, with the protocol's own event verification
  on every stream: a graph with an agent step and two human requests, over
  several turns; the resume turn served by a second console after the worker
  was replaced; ``kill -9`` of the worker (and of the console) mid-stream, the
  client reconnecting with ``Last-Event-ID``.
- The same turns through the ``ag-ui-protocol`` Python types, against the
  endpoint mounted in a FastAPI app.
- The console's rules for these routes: token, host, origins (CORS), JSON
  bodies, bounded sizes, 4xx JSON errors, SSE framing.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    Event,
    EventType,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    TextMessageContentEvent,
)
from pydantic import TypeAdapter
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from temporal_workflows._console.app import ConsoleSettings, make_app
from temporal_workflows._http.guard import Guard
from temporal_workflows._http.server import ServerHandle, bind
from temporal_workflows.ag_ui import AGUIApp, AGUISettings
from temporal_workflows.ag_ui._ids import thread_workflow_id
from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run
from tests.integration import ag_ui_graphs
from tests.integration.ag_ui_support import Processes, run_client

QUEUE = "tw-ag-ui-tests"
TOKEN = "ag-ui-test-token-5c1d9e7a3b"
PUBLISHING = "tests.integration.ag_ui_graphs:publishing"
STORY = "tests.integration.ag_ui_graphs:story"
NESTED = "tests.integration.ag_ui_graphs:nested"
FAILING = "tests.integration.ag_ui_graphs:failing"
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


# -- fixtures: an in-process worker and endpoints, for the Python-side tests -----------------------


@pytest.fixture(scope="module")
async def agui_client(temporal_address: str) -> Client:
    return await Client.connect(
        temporal_address, plugins=[TemporalWorkflowsPlugin(ag_ui_graphs.all_workflows(), tracing=False)]
    )


@pytest.fixture(scope="module")
async def agui_worker(agui_client: Client) -> AsyncIterator[Worker]:
    async with Worker(agui_client, task_queue=QUEUE) as w:
        yield w


@dataclass
class Served:
    url: str
    client: Client


async def _serve(app: Any) -> AsyncIterator[str]:
    sock = bind("127.0.0.1", 0)
    server = ServerHandle(app, sock, ConsoleSettings().limits)
    task = asyncio.create_task(server.serve())
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server._server.should_exit = True
        await asyncio.wait_for(task, 15)


@pytest.fixture(scope="module")
async def fastapi_endpoint(agui_client: Client, agui_worker: Worker) -> AsyncIterator[Served]:
    """The endpoint mounted in a FastAPI app, as a user mounts it: ``/agents/<name>``."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"ok": "yes"}

    app.mount("/agents", AGUIApp(agui_client, ag_ui_graphs.all_workflows(), settings=AGUISettings(task_queue=QUEUE)))
    async for url in _serve(app):
        yield Served(url + "/agents", agui_client)


@pytest.fixture(scope="module")
async def locked_console(agui_client: Client, agui_worker: Worker) -> AsyncIterator[Served]:
    """The console with a token and one allowed front-end origin, in process (its ASGI app under uvicorn)."""
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    graphs = {wf.name: wf for wf in ag_ui_graphs.all_workflows()}
    settings = ConsoleSettings(graphs=graphs, task_queue=QUEUE)
    guard = Guard.make(TOKEN, ("127.0.0.1", port), app_origins=["http://app.example.test:3000"])

    async def connect() -> Client:
        return agui_client

    server = ServerHandle(make_app(guard, settings, connect), sock, settings.limits)
    task = asyncio.create_task(server.serve())
    try:
        yield Served(f"http://127.0.0.1:{port}", agui_client)
    finally:
        server._server.should_exit = True
        await asyncio.wait_for(task, 15)


# -- reading a turn with the ag-ui-protocol types ----------------------------------------------------


@dataclass
class Frame:
    id: str | None
    event: Any


async def turn(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    last_event_id: str | None = None,
    on_frame: Callable[[Frame], None] | None = None,
) -> list[Frame]:
    """One turn's events, each validated as an AG-UI ``Event`` (frames split on blank lines, as clients do)."""
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    frames: list[Frame] = []
    async with http.stream("POST", url, json=body, headers=headers) as r:
        assert r.status_code == 200, (await r.aread()).decode()
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = b""
        async for chunk in r.aiter_bytes():
            assert b"\r" not in chunk, "SSE lines end with \\n only (@ag-ui/client splits frames on \\n\\n)"
            raw += chunk
            *done, raw = raw.split(b"\n\n")
            for frame in done:
                eid, data = None, None
                for line in frame.decode().split("\n"):
                    if line.startswith("id:"):
                        eid = line[3:].strip()
                    elif line.startswith("data:"):
                        data = line[5:].strip()
                if data is not None:
                    frames.append(Frame(eid, EVENTS.validate_json(data)))
                    if on_frame is not None:
                        on_frame(frames[-1])
    return frames


def _body(thread: str, run: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def _types(frames: list[Frame]) -> list[str]:
    return [f.event.type.value for f in frames]


def _interrupts(frames: list[Frame]) -> list[Any]:
    last = frames[-1].event
    assert isinstance(last, RunFinishedEvent), _types(frames)
    assert isinstance(last.outcome, RunFinishedInterruptOutcome), last
    return list(last.outcome.interrupts)


# -- the Python types, the endpoint mounted in FastAPI ------------------------------------------------


async def test_python_types_drive_an_agent_and_two_requests_to_completion(fastapi_endpoint: Served) -> None:
    url = f"{fastapi_endpoint.url}/ag_ui_publishing"
    thread = f"py-{uuid.uuid4().hex[:8]}"
    messages = [{"id": f"{thread}-u1", "role": "user", "content": "bikes"}]
    async with httpx.AsyncClient(timeout=120) as http:
        first = await turn(http, url, _body(thread, "t1", messages))
        assert _types(first)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
        assert first[0].event.protocol_version == "1.0"
        state = (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)
        assert all((f.id is None) == (f.event.type in state) for f in first)  # state: queried, so no id
        (approval,) = _interrupts(first)
        assert approval.reason == "tool_call" and approval.response_schema["required"] == ["approved"]
        calls = [f.event for f in first if f.event.type == EventType.TOOL_CALL_START]
        assert [c.tool_call_name for c in calls] == ["publish"] and approval.tool_call_id == calls[0].tool_call_id

        second = await turn(
            http,
            url,
            _body(
                thread,
                "t2",
                messages,
                resume=[{"interruptId": approval.id, "status": "resolved", "payload": {"approved": True}}],
            ),
        )
        text = "".join(f.event.delta for f in second if isinstance(f.event, TextMessageContentEvent))
        assert text == "I published Bikes for you. It reads well and it is short."
        assert any(f.event.type == EventType.TOOL_CALL_RESULT for f in second)
        assert any(f.event.type == EventType.STATE_DELTA for f in second)
        (review,) = _interrupts(second)
        assert review.reason == "input_required"
        assert set(review.response_schema["properties"]) == {"approved", "note"}
        expires = datetime.fromisoformat(review.expires_at.replace("Z", "+00:00"))  # the request's deadline
        assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=1)
        assert review.metadata["temporal_workflows"]["data"] == {"draft": text}

        # A bad answer: the run's refusal names the field, and the run still waits for the same request.
        refused = await turn(
            http,
            url,
            _body(
                thread,
                "t3",
                messages,
                resume=[{"interruptId": review.id, "status": "resolved", "payload": {"approved": True, "note": ""}}],
            ),
        )
        assert _types(refused) == ["RUN_STARTED", "RUN_ERROR"]
        assert isinstance(refused[1].event, RunErrorEvent) and "note" in refused[1].event.message
        run = get_run(fastapi_endpoint.client, thread_workflow_id("ag-ui", "ag_ui_publishing", thread))
        assert [r.request_id for r in await run.pending_requests()] == [review.id]

        last = await turn(
            http,
            url,
            _body(
                thread,
                "t4",
                messages,
                resume=[
                    {"interruptId": review.id, "status": "resolved", "payload": {"approved": True, "note": "fine"}}
                ],
            ),
        )
        final = last[-1].event
        assert isinstance(final, RunFinishedEvent) and final.outcome.type == "success"
        assert final.result == {"outputs": ["review: approved (fine)"]}
        assert "".join(f.event.delta for f in last if isinstance(f.event, TextMessageContentEvent)) == (
            "review: approved (fine)"
        )

        # The same request again (a client retrying): the message is not taken again; the turn ends at once.
        again = await turn(http, url, _body(thread, "t5", messages))
        assert _types(again) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
        conversation = (await run.state())["conversation:writer"]
        assert [m["role"] for m in conversation].count("user") == 2  # the message, the tool approval; not again


async def test_reconnect_with_last_event_id_gets_exactly_what_was_missed(fastapi_endpoint: Served) -> None:
    url = f"{fastapi_endpoint.url}/ag_ui_publishing"
    thread = f"rc-{uuid.uuid4().hex[:8]}"
    messages = [{"id": f"{thread}-u1", "role": "user", "content": "boats"}]
    async with httpx.AsyncClient(timeout=120) as http:
        first = await turn(http, url, _body(thread, "t1", messages))
        (approval,) = _interrupts(first)
        body = _body(
            thread,
            "t2",
            messages,
            resume=[{"interruptId": approval.id, "status": "resolved", "payload": {"approved": True}}],
        )
        whole = await turn(http, url, body)
        counted = [f for f in whole if f.id is not None]
        for cut in range(len(counted) - 1):  # a client that had the events up to each one in turn
            rest = await turn(http, url, body, last_event_id=counted[cut].id)
            assert [f.id for f in rest if f.id is not None] == [f.id for f in counted[cut + 1 :]]
            assert [f.event for f in rest if f.id is not None] == [f.event for f in counted[cut + 1 :]]
            assert rest[0].event.type == EventType.STATE_SNAPSHOT  # the state afresh, before what it missed
        # Nothing was given to the run again: the same answer once, the same request now pending.
        run = get_run(fastapi_endpoint.client, thread_workflow_id("ag-ui", "ag_ui_publishing", thread))
        assert len(await run.pending_requests()) == 1
        bad = await http.post(url, json=body, headers={"Last-Event-ID": "not-ours"})
        assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]
        ahead = await http.post(url, json=body, headers={"Last-Event-ID": "i999999.999999.0"})  # a forged place
        assert ahead.status_code == 400 and "has not reached it" in ahead.json()["error"]


async def test_a_sub_workflow_is_a_sub_agent_and_a_failed_run_a_run_error(fastapi_endpoint: Served) -> None:
    thread = f"sub-{uuid.uuid4().hex[:8]}"
    messages = [{"id": f"{thread}-u1", "role": "user", "content": "quiet please"}]
    async with httpx.AsyncClient(timeout=120) as http:
        frames = await turn(http, f"{fastapi_endpoint.url}/ag_ui_nested", _body(thread, "t1", messages))
        types = _types(frames)
        started = next(f.event for f in frames if f.event.type == EventType.SUBAGENT_STARTED)
        finished = next(f.event for f in frames if f.event.type == EventType.SUBAGENT_FINISHED)
        assert started.name == "ag_ui_inner" and finished.subagent_run_id == started.subagent_run_id
        assert types.index("STEP_STARTED") < types.index("SUBAGENT_STARTED") < types.index("SUBAGENT_FINISHED")
        assert types.index("SUBAGENT_FINISHED") < types.index("STEP_FINISHED")
        assert "".join(f.event.delta for f in frames if isinstance(f.event, TextMessageContentEvent)) == "QUIET PLEASE"
        assert frames[-1].event.type == EventType.RUN_FINISHED

        failed = await turn(http, f"{fastapi_endpoint.url}/ag_ui_failing", _body(thread, "t1", messages))
        error = failed[-1].event
        assert isinstance(error, RunErrorEvent), _types(failed)
        assert "broken" in error.message and "cannot handle 'quiet please'" in error.message
        assert _types(failed).count("STEP_STARTED") == _types(failed).count("STEP_FINISHED") == 1


# -- a second message while the run is busy (concurrent input, double texting) ---------------------------


def _text_of(frames: list[Frame]) -> str:
    return "".join(f.event.delta for f in frames if isinstance(f.event, TextMessageContentEvent))


def _custom(frames: list[Frame], name: str) -> list[Any]:
    return [f.event.value for f in frames if f.event.type == EventType.CUSTOM and f.event.name == name]


def _held(body: dict[str, Any], frames: list[Frame]) -> list[dict[str, Any]]:
    """What a client holds after reading ``frames`` of a turn: the messages it sent and the text it was shown."""
    held = list(body["messages"])
    texts: dict[str, str] = {}
    for f in frames:
        if f.event.type == EventType.TEXT_MESSAGE_START:
            texts[f.event.message_id] = ""
        elif isinstance(f.event, TextMessageContentEvent):
            texts[f.event.message_id] += f.event.delta
    return held + [{"id": mid, "role": "assistant", "content": text} for mid, text in texts.items()]


async def _while_streaming(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], texts: int
) -> tuple[asyncio.Task[list[Frame]], list[Frame]]:
    """A turn read in the background, returned once it has shown ``texts`` text deltas (and what it showed)."""
    shown: list[Frame] = []
    reached = asyncio.Event()

    def seen(frame: Frame) -> None:
        shown.append(frame)
        if sum(isinstance(f.event, TextMessageContentEvent) for f in shown) >= texts:
            reached.set()

    task = asyncio.create_task(turn(http, url, body, on_frame=seen))
    waiter = asyncio.create_task(reached.wait())
    await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    assert reached.is_set(), "the first turn ended before the agent streamed"
    return task, list(shown)


async def test_a_second_message_while_busy_follows_forwarded_props_policy(fastapi_endpoint: Served) -> None:
    url = f"{fastapi_endpoint.url}/ag_ui_story"
    thread = f"dt-{uuid.uuid4().hex[:8]}"
    first_body = _body(thread, "t1", [{"id": f"{thread}-u1", "role": "user", "content": "owls at night"}])
    run = get_run(fastapi_endpoint.client, thread_workflow_id("ag-ui", "ag_ui_story", thread))
    async with httpx.AsyncClient(timeout=180) as http:
        first, shown = await _while_streaming(http, url, first_body, texts=3)
        held = _held(first_body, shown)
        partial = held[-1]
        assert partial["role"] == "assistant" and partial["content"].startswith("owls0")

        # Bad values: a 400 naming the field; nothing reaches the run.
        for props, field in (
            ({"concurrentInput": "sometimes"}, "forwardedProps.concurrentInput"),
            ({"multitaskStrategy": 3}, "forwardedProps.multitaskStrategy"),
            ({"concurrentInput": "reject", "multitaskStrategy": "interrupt"}, "disagree"),
        ):
            body = _body(thread, "bad", [*held, {"id": f"{thread}-x", "role": "user", "content": "x"}])
            r = await http.post(url, json={**body, "forwardedProps": props})
            assert r.status_code == 400 and field in r.json()["error"], r.text
            assert "enqueue" in r.json()["error"] or "disagree" in r.json()["error"]

        # reject (LangGraph's name for it too): refused with the run's own words; the run is untouched.
        for n, props in enumerate(({"concurrentInput": "reject"}, {"multitaskStrategy": "reject"})):
            body = _body(thread, f"r{n}", [*held, {"id": f"{thread}-r{n}", "role": "user", "content": "not now"}])
            refused = await turn(http, url, {**body, "forwardedProps": props})
            assert _types(refused) == ["RUN_STARTED", "RUN_ERROR"], _types(refused)
            error = refused[1].event
            assert error.code == "RunInProgressError" and "'reject'" in error.message
        assert (await run.status())["status"] == "running"

        # interrupt: the running superstep is cancelled; this turn says so, takes back what the first turn showed
        # of it, and goes on with its own message.
        second_body = _body(thread, "t2", [*held, {"id": f"{thread}-u2", "role": "user", "content": "bats"}])
        second = await turn(http, url, {**second_body, "forwardedProps": {"concurrentInput": "interrupt"}})
        first_frames = await first

    (interrupted,) = _custom(second, "interrupted")
    assert interrupted["policy"] == "interrupt" and interrupted["cancelled"] == ["teller"]
    snapshot = next(f.event for f in second if isinstance(f.event, MessagesSnapshotEvent))
    kept = [m.model_dump(by_alias=True) for m in snapshot.messages]
    assert [m["id"] for m in kept] == [f"{thread}-u1", f"{thread}-u2"]  # the cancelled answer taken back
    cut = next(i for i, f in enumerate(second) if isinstance(f.event, MessagesSnapshotEvent))
    # Before it: what the cancelled answer streamed after this turn began (taken back by the snapshot); after it,
    # this turn's own answer, once, whole.
    before = {f.event.message_id for f in second[:cut] if isinstance(f.event, TextMessageContentEvent)}
    assert not before & {m["id"] for m in kept} and all(w.startswith("owls") for w in _text_of(second[:cut]).split())
    assert _text_of(second[cut:]).split() == [f"bats{i}" for i in range(ag_ui_graphs.STORY_WORDS)]
    final = second[-1].event
    assert isinstance(final, RunFinishedEvent) and final.outcome.type == "success", _types(second)

    # The first turn ends where its work was cancelled: it says so, takes back its own text, and says why it ended.
    assert _custom(first_frames, "interrupted") == [interrupted]
    last = first_frames[-1].event
    assert isinstance(last, RunFinishedEvent) and last.result["interrupted"]["policy"] == "interrupt"
    taken_back = [f.event for f in first_frames if isinstance(f.event, MessagesSnapshotEvent)][-1]
    assert [m.id for m in taken_back.messages] == [f"{thread}-u1"]
    assert "bats0" not in _text_of(first_frames)  # the second turn's answer is not the first turn's

    # The run: one interruption, and the conversation it committed holds the second message and its answer only.
    conversation = (await run.state())["conversation:teller"]
    assert [m["role"] for m in conversation] == ["user", "assistant"]
    assert "bats" in json.dumps(conversation) and "owls" not in json.dumps(conversation)


async def test_rollback_through_ag_ui_takes_back_the_rolled_back_turn(fastapi_endpoint: Served) -> None:
    url = f"{fastapi_endpoint.url}/ag_ui_story"
    thread = f"rb-{uuid.uuid4().hex[:8]}"
    one = _body(thread, "t1", [{"id": f"{thread}-u1", "role": "user", "content": "owls"}])
    async with httpx.AsyncClient(timeout=180) as http:
        done = await turn(http, url, one)
        assert done[-1].event.type == EventType.RUN_FINISHED
        two = _body(thread, "t2", [*_held(one, done), {"id": f"{thread}-u2", "role": "user", "content": "cats"}])
        busy, shown = await _while_streaming(http, url, two, texts=2)
        held = _held(two, shown)
        three = _body(thread, "t3", [*held, {"id": f"{thread}-u3", "role": "user", "content": "bats"}])
        third = await turn(http, url, {**three, "forwardedProps": {"multitaskStrategy": "rollback"}})
        second = await busy
    (rolled,) = _custom(third, "interrupted")
    assert rolled["policy"] == "rollback" and rolled["rolled_back_to"] == 1 and rolled["superstep"] == 2
    snapshot = next(f.event for f in third if isinstance(f.event, MessagesSnapshotEvent))
    ids = [m.id for m in snapshot.messages]
    # The first turn's answer stays (committed before the rolled-back turn); the second's partial answer goes.
    assert ids[:2] == [f"{thread}-u1", _held(one, done)[-1]["id"]] and held[-1]["id"] not in ids
    assert ids[-1] == f"{thread}-u3"
    assert second[-1].event.result["interrupted"]["rolledBackTo"] == 1
    assert third[-1].event.type == EventType.RUN_FINISHED
    conversation = (await get_run(fastapi_endpoint.client, thread_workflow_id("ag-ui", "ag_ui_story", thread)).state())[
        "conversation:teller"
    ]
    assert [m["role"] for m in conversation] == ["user", "assistant", "user", "assistant"]
    assert "cats" not in json.dumps(conversation)


async def test_ag_ui_client_double_texting_interrupt_reject_and_bad_values(fastapi_endpoint: Served) -> None:
    """``@ag-ui/client``: a second client on the thread sends while the first one's answer streams."""
    thread = f"jsdt-{uuid.uuid4().hex[:8]}"
    report = await run_client(
        {
            "mode": "double",
            "url": f"{fastapi_endpoint.url}/ag_ui_story",
            "threadId": thread,
            "first": "owls at night",
            "second": "bats",
            "afterTexts": 3,
            "forwardedProps": {"concurrentInput": "interrupt"},
            "reject": {"multitaskStrategy": "reject"},
            "bad": [{"concurrentInput": "later"}, {"concurrentInput": "interrupt", "multitaskStrategy": "enqueue"}],
        }
    )
    first, second, rejected = report["first"], report["second"], report["rejected"]
    for t in (first, second, rejected):
        assert t["verify"] is None, t  # the client's own verifyEvents, on each turn's stream alone
    # Bad values: HTTP 400, the JSON error naming the field; the client raises it.
    (later, disagree) = report["bad"]
    assert "HTTP 400" in later["error"] and "forwardedProps.concurrentInput" in later["error"], later
    assert "HTTP 400" in disagree["error"] and "disagree" in disagree["error"], disagree
    assert rejected["types"] == ["RUN_STARTED", "RUN_ERROR"] and rejected["runError"]["code"] == "RunInProgressError"
    # The interrupting turn: the event that says so, then its own answer; the client ends with the conversation
    # the run has: the first message, the second, and the second's answer (the cancelled answer taken back).
    interrupted = [e for e in second["events"] if e["type"] == "CUSTOM" and e["name"] == "interrupted"]
    assert [e["value"]["policy"] for e in interrupted] == ["interrupt"]
    assert second["outcome"] == {"type": "success"}
    roles = [(m["role"], m.get("content", "").split()[0] if m.get("content") else "") for m in second["messages"]]
    assert roles == [("user", "owls"), ("user", "bats"), ("assistant", "bats0")], roles
    assert second["messages"][-1]["content"].split() == [f"bats{i}" for i in range(ag_ui_graphs.STORY_WORDS)]
    # The first client's turn ended at the interruption, its partial answer taken back.
    assert first["outcome"] == {"type": "success"} and first["result"]["interrupted"]["policy"] == "interrupt"
    assert [m["role"] for m in first["messages"]] == ["user"]


async def _until_status(run: Any, check: Callable[[dict[str, Any]], bool], timeout: float = 60) -> None:
    """Wait (polling the run's status) until ``check`` holds."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                if check(await run.status()):
                    return
            except RPCError as e:  # (not started yet)
                if e.status != RPCStatusCode.NOT_FOUND:
                    raise
            await asyncio.sleep(0.05)


async def test_a_turn_that_begins_as_the_busy_run_rests_ends_at_its_own_rest(
    fastapi_endpoint: Served, agui_client: Client
) -> None:
    """A turn that finds the run working, whose message the run takes only after it rested (its earlier work
    done), and answers before the turn reads that rest, ends at the rest after its own answer, not the one before."""
    from ag_ui.core import RunAgentInput

    from temporal_workflows.ag_ui._graph import GraphKind
    from temporal_workflows.ag_ui._turn import Turn

    thread = f"race-{uuid.uuid4().hex[:8]}"
    hold = f"hold {thread}"
    ag_ui_graphs.GATES[hold] = gate = asyncio.Event()
    run = get_run(agui_client, thread_workflow_id("ag-ui", "ag_ui_gated", thread))

    class Racing(GraphKind):
        """Delivers just after the run, found working, has rested; the turn reads on once it answered."""

        async def deliver(self, client: Client, workflow_id: str, value: Any, delivery_id: str, **kw: Any) -> bool:
            gate.set()
            await _until_status(run, lambda s: s["status"] == "idle")
            took = await super().deliver(client, workflow_id, value, delivery_id, **kw)
            await _until_status(run, lambda s: s["status"] == "idle" and "done: quick" in s["outputs"])
            return took

    url = f"{fastapi_endpoint.url}/ag_ui_gated"
    messages = [{"id": f"{thread}-u1", "role": "user", "content": hold}]
    async with httpx.AsyncClient(timeout=120) as http:
        first = asyncio.create_task(turn(http, url, _body(thread, "t1", messages)))
        await _until_status(run, lambda s: s["in_flight"] == ["gated"])
        body = _body(thread, "t2", [*messages, {"id": f"{thread}-u2", "role": "user", "content": "quick"}])
        second = Turn(
            Racing(ag_ui_graphs.gated_graph),
            agui_client,
            RunAgentInput.model_validate(body),
            task_queue=QUEUE,
            id_prefix="ag-ui",
        )
        assert await second.begin() is None
        made = [event async for _, event in second.made()]
        first_frames = await first
    texts = "".join(e.delta for e in made if isinstance(e, TextMessageContentEvent))
    # What the run did from where the turn began (the earlier answer), then its own answer: it ended at its rest.
    assert texts == f"done: {hold}done: quick", [e.type.value for e in made]
    assert isinstance(made[-1], RunFinishedEvent) and made[-1].result["outputs"][-1] == "done: quick"
    assert _text_of(first_frames) == f"done: {hold}"


# -- the console's rules for its AG-UI routes ----------------------------------------------------------


async def test_console_ag_ui_routes_need_the_token_and_a_named_origin(locked_console: Served) -> None:
    url = f"{locked_console.url}/ag-ui/ag_ui_publishing"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = _body(f"sec-{uuid.uuid4().hex[:8]}", "r1", [])
    async with httpx.AsyncClient(timeout=30, follow_redirects=False) as http:
        r = await http.post(url, json=body)
        assert r.status_code == 401 and "error" in r.json()  # JSON, not a redirect to the login page
        assert r.headers["www-authenticate"].startswith("Bearer")
        r = await http.post(url, json=body, headers={"Authorization": "Bearer wrong-token-of-length"})
        assert r.status_code == 401
        # Another origin: refused unless named; a named one gets its preflight answered (no token needed).
        r = await http.post(url, json=body, headers={**auth, "Origin": "http://evil.example.test"})
        assert r.status_code == 403 and "allowed-origin" in r.json()["error"]
        r = await http.options(
            url,
            headers={
                "Origin": "http://app.example.test:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,authorization,last-event-id",
            },
        )
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == "http://app.example.test:3000"
        assert "last-event-id" in r.headers["access-control-allow-headers"].lower()
        assert "access-control-allow-credentials" not in r.headers
        r = await http.options(
            url, headers={"Origin": "http://evil.example.test", "Access-Control-Request-Method": "POST"}
        )
        assert r.status_code == 403
        # The Host rule (DNS rebinding) holds here too.
        r = await http.post(url, json=body, headers={**auth, "Host": "attacker.example.test"})
        assert r.status_code == 403
        # Bad input: 4xx JSON naming what is wrong.
        r = await http.post(url, content=json.dumps(body), headers={**auth, "Content-Type": "text/plain"})
        assert r.status_code == 415 and "application/json" in r.json()["error"]
        r = await http.post(url, content=b"{not json", headers={**auth, "Content-Type": "application/json"})
        assert r.status_code == 400 and "not JSON" in r.json()["error"]
        r = await http.post(url, json={"threadId": "x"}, headers=auth)
        assert r.status_code == 400 and "runId" in r.json()["error"] and "messages" in r.json()["error"]
        # Nesting deeper than the parser's recursion, or than 100 levels: refused, not a 500.
        for deep in (b'{"a":' + b"[" * 200_000 + b"]" * 200_000 + b"}", b'{"a":' + b"[" * 150 + b"]" * 150 + b"}"):
            r = await http.post(url, content=deep, headers={**auth, "Content-Type": "application/json"})
            assert r.status_code == 400 and "nested too deeply" in r.json()["error"], r.text
        for empty in (b"", b"[]"):
            r = await http.post(url, content=empty, headers={**auth, "Content-Type": "application/json"})
            assert r.status_code == 400 and ("not JSON" in r.json()["error"] or "JSON object" in r.json()["error"])
        r = await http.post(
            url, content=b"{" + b" " * (5 * 1024 * 1024) + b"}", headers={**auth, "Content-Type": "application/json"}
        )
        assert r.status_code == 413 and "error" in r.json()
        r = await http.post(f"{locked_console.url}/ag-ui/nope", json=body, headers=auth)
        assert r.status_code == 404 and "ag_ui_publishing" in r.json()["error"]
        r = await http.get(url, headers=auth)
        assert r.status_code == 405 and "POST" in r.json()["error"]
        # The named origin, with the token: served, with its CORS header on the stream.
        r = await http.post(
            url, json=body, headers={**auth, "Origin": "http://app.example.test:3000", "Accept": "text/event-stream"}
        )
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "http://app.example.test:3000"
        frames = [json.loads(line[5:]) for line in r.text.split("\n") if line.startswith("data:")]
        assert [f["type"] for f in frames] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]  # no message: at rest


# -- @ag-ui/client against console processes ------------------------------------------------------------


def _texts(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_ag_ui_client_drives_a_graph_through_console_processes(temporal_address: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    queue = f"ag-ui-js-{uuid.uuid4().hex[:6]}"
    thread = f"js-{uuid.uuid4().hex[:8]}"
    graphs = ["--workflow", PUBLISHING, "--workflow", NESTED, "--workflow", FAILING, "--task-queue", queue]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with Processes(temporal_address, tmp_path) as procs:
        _, url = await asyncio.gather(
            procs.worker("worker", *graphs), procs.console("console", *graphs, "--token-file", str(token_file))
        )
        report, others = await asyncio.gather(
            run_client(
                {
                    "mode": "turns",
                    "url": f"{url}/ag-ui/ag_ui_publishing",
                    "headers": auth,
                    "threadId": thread,
                    "turns": [
                        {"message": "kites"},
                        {"resume": {"approved": True}},
                        {"resume": {"approved": True, "note": "no"}},  # too short: refused by the run
                        {"resume": {"approved": True, "note": "lovely"}},
                    ],
                }
            ),
            asyncio.gather(
                *(
                    run_client(
                        {
                            "mode": "turns",
                            "url": f"{url}/ag-ui/{name}",
                            "headers": auth,
                            "threadId": f"{thread}-{name}",
                            "turns": [{"message": "quiet please"}],
                        }
                    )
                    for name in ("ag_ui_nested", "ag_ui_failing")
                )
            ),
        )
    (nested,), (failed,) = others
    assert nested["verify"] is None and nested["error"] is None, nested
    assert "SUBAGENT_STARTED" in nested["types"] and nested["outcome"] == {"type": "success"}
    assert nested["messages"][-1]["content"] == "QUIET PLEASE"
    assert failed["verify"] is None and failed["types"][-1:] == ["RUN_ERROR"], failed
    assert "broken" in failed["runError"]["message"], failed
    for t in report:
        assert t["error"] is None, t
        assert t["verify"] is None, t  # the client's own verifyEvents, on this turn's stream alone
        assert t["types"][0] == "RUN_STARTED"
    first, second, refused, last = report
    assert first["outcome"]["type"] == "interrupt"
    (approval,) = first["outcome"]["interrupts"]
    assert approval["reason"] == "tool_call" and approval["toolCallId"]
    assert second["outcome"]["type"] == "interrupt"
    (review,) = second["outcome"]["interrupts"]
    assert review["reason"] == "input_required" and "note" in review["responseSchema"]["properties"]
    assert _texts(second["events"]) == "I published Kites for you. It reads well and it is short."
    assert refused["types"] == ["RUN_STARTED", "RUN_ERROR"] and "note" in refused["runError"]["message"]
    assert refused["pendingInterrupts"] == second["pendingInterrupts"]  # still waiting for the same request
    assert last["outcome"] == {"type": "success"} and last["result"] == {"outputs": ["review: approved (lovely)"]}
    assert last["pendingInterrupts"] == []
    # What the client holds at the end: the conversation as the run had it, each message once.
    messages = last["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "assistant"]
    assert messages[1]["toolCalls"][0]["function"]["name"] == "publish"
    assert messages[3]["content"] == "I published Kites for you. It reads well and it is short."
    assert messages[4]["content"] == "review: approved (lovely)"


async def test_resume_served_by_another_console_after_the_worker_was_replaced(
    temporal_address: str, tmp_path: Path, agui_client: Client
) -> None:
    queue = f"ag-ui-swap-{uuid.uuid4().hex[:6]}"
    thread = f"swap-{uuid.uuid4().hex[:8]}"
    async with Processes(temporal_address, tmp_path) as procs:
        _, first_url, second_url = await asyncio.gather(  # started together, as a deploy would
            procs.worker("worker-1", "--workflow", PUBLISHING, "--task-queue", queue),
            procs.console("console-1", "--workflow", PUBLISHING, "--task-queue", queue),
            procs.console("console-2", "--workflow", PUBLISHING, "--task-queue", queue),
        )
        messages = [{"id": f"{thread}-u1", "role": "user", "content": "drums"}]
        async with httpx.AsyncClient(timeout=120) as http:
            first = await turn(http, f"{first_url}/ag-ui/ag_ui_publishing", _body(thread, "t1", messages))
            (approval,) = _interrupts(first)
            await procs.kill("worker-1")
            await procs.kill("console-1")
            await procs.worker("worker-2", "--workflow", PUBLISHING, "--task-queue", queue)
            url = f"{second_url}/ag-ui/ag_ui_publishing"
            second = await turn(
                http,
                url,
                _body(
                    thread,
                    "t2",
                    messages,
                    resume=[{"interruptId": approval.id, "status": "resolved", "payload": {"approved": True}}],
                ),
            )
            (review,) = _interrupts(second)
            last = await turn(
                http,
                url,
                _body(
                    thread,
                    "t3",
                    messages,
                    resume=[
                        {
                            "interruptId": review.id,
                            "status": "resolved",
                            "payload": {"approved": False, "note": "later"},
                        }
                    ],
                ),
            )
        status = await get_run(agui_client, thread_workflow_id("ag-ui", "ag_ui_publishing", thread)).status()
    final = last[-1].event
    assert isinstance(final, RunFinishedEvent) and final.outcome.type == "success", _types(last)
    assert final.result == {"outputs": ["review: rejected (later)"]}
    assert status["status"] == "idle" and status["outputs"] == ["review: rejected (later)"]


async def test_worker_killed_mid_stream_client_reconnects_with_last_event_id(
    temporal_address: str, tmp_path: Path
) -> None:
    queue = f"ag-ui-kill-{uuid.uuid4().hex[:6]}"
    thread = f"kill-{uuid.uuid4().hex[:8]}"
    words = [f"owls{i}" for i in range(ag_ui_graphs.STORY_WORDS)]
    body = _body(thread, "t1", [{"id": f"{thread}-u1", "role": "user", "content": "owls at night"}])
    killed = asyncio.Event()
    async with Processes(temporal_address, tmp_path) as procs:
        _, first_url, second_url = await asyncio.gather(
            procs.worker("worker-1", "--workflow", STORY, "--task-queue", queue),
            procs.console("console-1", "--workflow", STORY, "--task-queue", queue),
            procs.console("console-2", "--workflow", STORY, "--task-queue", queue),
        )

        async def progress(p: dict[str, Any]) -> None:
            if p["texts"] >= 4 and not killed.is_set():
                killed.set()
                # The worker dies mid-answer, and so does the console the client reads from.
                await asyncio.gather(procs.kill("worker-1"), procs.kill("console-1"))
                await procs.worker("worker-2", "--workflow", STORY, "--task-queue", queue)

        report = await run_client(
            {
                "mode": "stream",
                "urls": [f"{first_url}/ag-ui/ag_ui_story", f"{second_url}/ag-ui/ag_ui_story"],
                "body": body,
                "timeoutMs": 150000,
            },
            on_progress=progress,
        )
        assert killed.is_set()
        async with httpx.AsyncClient(timeout=60) as http:  # the whole turn again, from its first event
            replay = await turn(
                http, f"{second_url}/ag-ui/ag_ui_story", body, last_event_id=report["connections"][0]["seen"][0]["id"]
            )
    assert report["ended"] and report["verify"] is None and report["error"] is None, report
    first, *later = report["connections"]
    assert first["seen"][-1].get("error") or first["seen"][-1]["type"] != "RUN_FINISHED"
    resumed = next(c for c in later if any("id" in s for s in c["seen"]))
    # Exactly what was missed: the ids of both connections are the turn's ids, each once, in order.
    ids = [s["id"] for c in report["connections"] for s in c["seen"] if s.get("id")]
    assert ids == [first["seen"][0]["id"], *[f.id for f in replay if f.id is not None]]
    assert resumed["seen"][0]["type"] == "STATE_SNAPSHOT"  # the state afresh, then what was missed
    # The attempt the kill ended had streamed text: taken back by a snapshot, then said again whole, once.
    events = report["events"]
    assert any(e["type"] == "CUSTOM" and e["name"] == "step_retry" for e in events)
    assert any(e["type"] == "MESSAGES_SNAPSHOT" for e in events)
    messages = report["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"], messages
    assert messages[1]["content"].split() == words
    deltas = [e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == messages[1]["id"]]
    assert "".join(d["delta"] for d in deltas).split() == words  # every delta of the answer, once
    assert isinstance(EVENTS.validate_python(events[-1]), RunFinishedEvent)
    assert all(not isinstance(EVENTS.validate_python(e), MessagesSnapshotEvent) or e["messages"] for e in events)
