"""``llama-agents-server``'s ``WorkflowServer`` serving runs of a ``TemporalRuntime``, over real HTTP.

The same server and requests run once on LlamaIndex's default runtime and once on a ``TemporalRuntime``
against the real dev server; what an HTTP client sees (results, statuses, the event stream, human
input sent with ``POST /events/{handler_id}``) must be the same.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from llama_agents.server import WorkflowServer

from temporal_workflows._llama_runtime._protocol import STATE_QUERY
from temporal_workflows.llama import TemporalRuntime
from temporal_workflows.temporal import ConnectionConfig
from tests.integration import llama_runtime_workflows as lw


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _serve(runtime: TemporalRuntime | None) -> AsyncIterator[httpx.AsyncClient]:
    server = WorkflowServer(runtime=runtime) if runtime is not None else WorkflowServer()
    server.add_workflow("chain", lw.Chain(timeout=30))
    server.add_workflow("hitl", lw.HumanInLoop(timeout=None))
    server.add_workflow("fails", lw.Fails(timeout=30))
    async for c in _over_http(server):
        yield c


async def _over_http(server: WorkflowServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of ``server``, served by uvicorn on a free port for as long as the client is used."""
    port = _free_port()
    http = uvicorn.Server(uvicorn.Config(server.app, host="127.0.0.1", port=port, log_level="warning"))
    async with server.contextmanager():
        task = asyncio.create_task(http.serve())
        while not http.started:
            await asyncio.sleep(0.01)  # uvicorn has no readiness event; this only waits for the bind
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
                yield c
        finally:
            http.should_exit = True
            await task


@pytest.fixture(params=["default", "temporal"])
async def http(request: pytest.FixtureRequest, temporal_address: str) -> AsyncIterator[httpx.AsyncClient]:
    runtime = None
    if request.param == "temporal":
        runtime = TemporalRuntime(
            worker=True,
            task_queue=f"llama-srv-{uuid.uuid4().hex[:8]}",
            connection=ConnectionConfig(address=temporal_address),
        )
    async for c in _serve(runtime):
        yield c
    if runtime is not None:
        await runtime.destroy()


def _kinds(lines: list[dict[str, Any]]) -> list[str]:
    return [line["type"] for line in lines if line["type"] != "StepStateChanged"]


async def _events(c: httpx.AsyncClient, handler_id: str, until: str = "StopEvent") -> list[dict[str, Any]]:
    """The handler's event stream (NDJSON), read until an event of type ``until``."""
    out: list[dict[str, Any]] = []
    async with c.stream("GET", f"/events/{handler_id}", params={"sse": "false", "after_sequence": -1}) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.strip():
                out.append(json.loads(line))
                if out[-1]["type"] == until:
                    break
    return out


async def _handler_when_done(c: httpx.AsyncClient, handler_id: str, limit: float = 60.0) -> dict[str, Any]:
    """``GET /handlers/{id}`` once its status is no longer running (bounded by ``limit`` seconds)."""
    async with asyncio.timeout(limit):
        while True:
            r = await c.get(f"/handlers/{handler_id}")
            assert r.status_code in (200, 202), r.text  # 202 while it runs
            body: dict[str, Any] = r.json()
            if body["status"] != "running":
                return body
            await asyncio.sleep(0.05)  # polling the server's own status endpoint, as its clients do


async def test_run_returns_the_result(http: httpx.AsyncClient) -> None:
    r = await http.post("/workflows/chain/run", json={"start_event": {"x": 41}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "completed"
    assert body["result"]["value"]["result"] == "done 42"


async def test_the_stream_shows_each_event_and_the_handler_its_result(http: httpx.AsyncClient) -> None:
    r = await http.post("/workflows/chain/run-nowait", json={"start_event": {"x": 41}})
    handler_id = r.json()["handler_id"]
    events = await _events(http, handler_id)
    assert _kinds(events) == ["Progress", "Progress", "StopEvent"]
    assert [e["value"]["msg"] for e in events if e["type"] == "Progress"] == ["a", "b after ['a']"]
    r = await http.get(f"/handlers/{handler_id}")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    assert r.json()["result"]["value"]["result"] == "done 42"


async def test_steps_store_writes_reach_the_temporal_run_not_the_servers_store(temporal_address: str) -> None:
    runtime = TemporalRuntime(
        worker=True,
        task_queue=f"llama-srv-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
    )
    try:
        async for c in _serve(runtime):
            r = await c.post("/workflows/chain/run", json={"start_event": {"x": 1}})
            assert r.json()["status"] == "completed"
            client = await runtime.client()
            store = await client.get_workflow_handle(r.json()["run_id"]).query(STATE_QUERY)
            assert store["state_data"]["_data"]["seen"] == ["a", "b"]
    finally:
        await runtime.destroy()


# On Temporal only: LlamaIndex's own server on its default runtime sometimes loses an event sent to a waiting
# run (its idle-release adapter raises "No active workflow with run_id ..." and the handler never ends), so
# that variant was no reliable reference (about 1 run in 4 on a busy machine).
@pytest.mark.parametrize("http", ["temporal"], indirect=True)
async def test_human_input_sent_over_http_reaches_the_waiting_run(http: httpx.AsyncClient) -> None:
    r = await http.post("/workflows/hitl/run-nowait", json={"start_event": {"topic": "cats"}})
    assert r.status_code == 200, r.text
    handler_id = r.json()["handler_id"]
    asked = await _events(http, handler_id, until="Ask")
    assert asked[-1]["value"]["question"] == "name for cats?"
    answer = {"type": "Answer", "value": {"text": "Tom"}}
    r = await http.post(f"/events/{handler_id}", json={"event": answer})
    assert r.status_code == 200, r.text
    # The handler's state, not a second read of its stream from the start: on LlamaIndex's default runtime
    # that second read sometimes never ended (2 of about 6 runs, in the server itself, not in our runtime).
    handler = await _handler_when_done(http, handler_id)
    assert handler["status"] == "completed", handler
    assert handler["result"]["value"]["result"] == "got Tom"


async def test_a_failing_step_marks_the_handler_failed_with_its_error(http: httpx.AsyncClient) -> None:
    r = await http.post("/workflows/fails/run", json={"start_event": {}})
    body = r.json()
    assert body["status"] == "failed"
    assert "step exploded" in body["error"]


async def test_a_server_wired_as_for_the_dbos_runtime_serves_runs_unchanged(temporal_address: str) -> None:
    """LlamaIndex's DBOS examples build their server with ``rt.create_workflow_store()`` and
    ``rt.build_server_runtime()``: the same two calls on a ``TemporalRuntime`` serve runs."""
    runtime = TemporalRuntime(
        worker=True,
        task_queue=f"llama-srv-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
    )
    assert runtime.create_workflow_store() is runtime.create_workflow_store()
    server = WorkflowServer(
        workflow_store=runtime.create_workflow_store(), runtime=runtime.build_server_runtime(idle_timeout=5.0)
    )
    server.add_workflow("chain", lw.Chain(timeout=30, runtime=runtime))
    try:
        async for c in _over_http(server):
            r = await c.post("/workflows/chain/run", json={"start_event": {"x": 41}})
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "completed"
            assert r.json()["result"]["value"]["result"] == "done 42"
            client = await runtime.client()
            description = await client.get_workflow_handle(r.json()["run_id"]).describe()
            assert description.task_queue == runtime.task_queue  # a Temporal run
    finally:
        await runtime.destroy()


@pytest.mark.parametrize("variant", ["default", "temporal"])
async def test_a_restarted_server_with_a_persistent_store_serves_the_runs_it_had(
    variant: str, temporal_address: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server with a persistent store (``SqliteWorkflowStore``) restarted while a run waits for a human:
    the new server knows the run as running, takes the answer over HTTP, and the run completes there,
    as on LlamaIndex's default runtime (which resumes it from the ticks it stored)."""
    from datetime import timedelta

    import llama_agents.server.server as server_module
    from llama_agents.server import SqliteWorkflowStore

    # The server resumes only runs older than a grace (30 s): as if it restarted later than that.
    monkeypatch.setattr(server_module, "RESUME_FRESH_HANDLER_GRACE", timedelta(0))

    queue = f"llama-srv-restart-{uuid.uuid4().hex[:8]}"
    db = str(tmp_path / "server.db")

    def server() -> tuple[WorkflowServer, TemporalRuntime | None]:
        runtime = None
        if variant == "temporal":
            runtime = TemporalRuntime(
                worker=True, task_queue=queue, connection=ConnectionConfig(address=temporal_address)
            )
        store = SqliteWorkflowStore(db)
        s = WorkflowServer(workflow_store=store, runtime=runtime) if runtime else WorkflowServer(workflow_store=store)
        s.add_workflow("hitl", lw.AskThenReport(timeout=None))
        return s, runtime

    first, rt = server()
    async for c in _over_http(first):
        r = await c.post("/workflows/hitl/run-nowait", json={"start_event": {"topic": "dogs"}})
        handler_id = r.json()["handler_id"]
        asked = await _events(c, handler_id, until="Ask")
        assert asked[-1]["value"]["question"] == "name for dogs?"
    if rt is not None:
        await rt.destroy()
    second, rt = server()
    async for c in _over_http(second):
        r = await c.get(f"/handlers/{handler_id}")
        assert r.status_code in (200, 202), r.text
        assert r.json()["status"] == "running", r.json()
        answer = {"type": "Answer", "value": {"text": "Rex"}}
        async with asyncio.timeout(60):
            while True:  # the new server resumes its runs in the background as it starts
                r = await c.post(f"/events/{handler_id}", json={"event": answer})
                if r.status_code == 200:
                    break
                await asyncio.sleep(0.1)  # polling the server's own endpoint, with a deadline
        handler = await _handler_when_done(c, handler_id)
        assert handler["status"] == "completed", handler
        assert handler["result"]["value"]["result"] == "got Rex"
        # The new server's store shows the whole run: the event before the restart and the end after it.
        assert _kinds(await asyncio.wait_for(_events(c, handler_id), 30)) == ["Ask", "Progress", "StopEvent"]
    if rt is not None:
        await rt.destroy()
