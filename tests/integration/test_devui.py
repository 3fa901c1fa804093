"""Agent Framework DevUI's own page (``agent-framework-devui``, served unchanged) driving durable runs, in Chromium.

The console serves DevUI's page at ``/devui/`` and DevUI's API at the root for
the graphs it is given; each DevUI session is an AG-UI thread (one durable
run). The page starts a run, shows its agent's text and steps live, and
answers both of its requests in its own forms, to the end; a run an AG-UI
client started is listed with its pending request.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows._console.app import ConsoleSettings, make_app
from temporal_workflows._http.guard import Guard
from temporal_workflows._http.server import ServerHandle, bind
from temporal_workflows.ag_ui._devui import devui_available
from temporal_workflows.ag_ui._ids import thread_workflow_id
from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run
from tests.integration import ag_ui_graphs

QUEUE = "tw-devui-tests"
CHROMIUM = os.environ.get("TW_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "ag-ui"

pytestmark = pytest.mark.skipif(not devui_available(), reason="agent-framework-devui (the devui extra) is missing")


@pytest.fixture(scope="module")
async def devui_console(temporal_address: str) -> AsyncIterator[str]:
    client = await Client.connect(
        temporal_address, plugins=[TemporalWorkflowsPlugin(ag_ui_graphs.all_workflows(), tracing=False)]
    )
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    settings = ConsoleSettings(graphs={ag_ui_graphs.devui.name: ag_ui_graphs.devui}, task_queue=QUEUE)

    async def connect() -> Client:
        return client

    server = ServerHandle(make_app(Guard.make(None, ("127.0.0.1", port)), settings, connect), sock, settings.limits)
    async with Worker(client, task_queue=QUEUE):
        task = asyncio.create_task(server.serve())
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server._server.should_exit = True
            await asyncio.wait_for(task, 15)


@pytest.fixture(scope="module")
async def page(devui_console: str) -> AsyncIterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium): DevUI's page is tested in one")
    playwright = pytest.importorskip("playwright.async_api")
    async with playwright.async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield await browser.new_page(viewport={"width": 1400, "height": 900})
        finally:
            await browser.close()


async def test_devui_page_starts_follows_and_answers_a_durable_run(devui_console: str, page: Any) -> None:
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.post_data or "") if r.url.endswith("/v1/responses") else None)
    await page.goto(f"{devui_console}/devui/")
    await page.get_by_role("button", name="Configure & Run").click()
    await page.locator("textarea, input[type=text], input:not([type])").last.fill("bikes")
    await page.get_by_role("button", name="Run").last.click()
    # The agent's tool call needs approval: DevUI's own form, from the schema the endpoint gives.
    await page.get_by_text("Whether the tool call may run.").wait_for(timeout=60_000)
    await page.get_by_role("checkbox").first.click()
    await page.get_by_role("button", name="Submit Response").first.click()
    # The agent streamed its answer; now the person's review.
    await page.get_by_placeholder("Enter note").wait_for(timeout=60_000)
    await page.get_by_text("I published Bikes for you. It reads well and it is short.").first.wait_for()
    await page.get_by_role("checkbox").first.click()
    await page.get_by_placeholder("Enter note").fill("fine by me")
    await page.get_by_role("button", name="Submit Response").first.click()
    await page.get_by_text("Workflow Complete").wait_for(timeout=60_000)
    await page.get_by_text("review: approved (fine by me)").first.wait_for()
    # docs/ag-ui/devui-run.png is refreshed only when asked (TW_UPDATE_SCREENSHOTS=1, as for the console's
    # pictures): a test run must leave the committed files as they are.
    shots = SHOTS if os.environ.get("TW_UPDATE_SCREENSHOTS") else Path(os.environ.get("TMPDIR", "/tmp")) / "tw-devui"
    shots.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(shots / "devui-run.png"))
    assert (shots / "devui-run.png").stat().st_size > 0
    # It was a durable run: the session is its thread, and Temporal has its outputs.
    assert len(sent) == 3 and '"conversation":"devui-' in sent[0]
    thread = sent[0].split('"conversation":"')[1].split('"')[0]
    async with httpx.AsyncClient(base_url=devui_console, timeout=30) as http, asyncio.timeout(30):
        while True:  # visibility is eventually consistent
            listed = (await http.get("/v1/conversations", params={"entity_id": "ag_ui_devui"})).json()["data"]
            if thread in [c["id"] for c in listed]:
                break
            await asyncio.sleep(0.2)


async def test_devui_lists_a_run_an_ag_ui_client_started_with_its_pending_request(
    devui_console: str, page: Any, temporal_address: str
) -> None:
    thread = f"copilot-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=devui_console, timeout=60) as http:
        body = {"threadId": thread, "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "kites"}]}
        async with http.stream("POST", "/ag-ui/ag_ui_devui", json=body) as r:
            assert r.status_code == 200
            async for _ in r.aiter_bytes():
                pass
    await page.goto(f"{devui_console}/devui/")
    await page.get_by_role("combobox").last.click()
    option = page.get_by_role("option", name=thread)
    await option.wait_for(timeout=30_000)  # visibility is eventually consistent; the page lists on load
    assert "HIL" in await option.inner_text()
    await option.click()
    await page.get_by_title("View checkpoint details").click()
    await page.get_by_text("Pending HIL Requests (1)").wait_for(timeout=30_000)
    client = await Client.connect(temporal_address)
    wid = thread_workflow_id("ag-ui", "ag_ui_devui", thread)
    assert (await get_run(client, wid).status())["status"] == "waiting_for_input"


async def _responses(http: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with http.stream("POST", "/v1/responses", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                out.append(json.loads(line[6:]))
            elif line == "data: [DONE]":
                out.append({"type": "[DONE]"})
    return out


async def test_devui_api_entities_refusals_and_sessions(devui_console: str, temporal_address: str) -> None:
    async with httpx.AsyncClient(base_url=devui_console, timeout=60) as http:
        info = (await http.get("/v1/entities/ag_ui_devui/info", params={"type": "workflow"})).json()
        dump = info["workflow_dump"]
        assert dump["start_executor_id"] == "writer" and set(dump["executors"]) == {"writer", "reviewer"}
        assert {"source_id": "writer", "target_id": "reviewer"} in dump["edge_groups"][0]["edges"]
        assert info["input_schema"] == {"type": "string"}
        assert (await http.get("/v1/entities/nope/info")).status_code == 404
        session = (await http.post("/v1/conversations", json={"metadata": {"entity_id": "ag_ui_devui"}})).json()["id"]
        base = {"metadata": {"entity_id": "ag_ui_devui"}, "stream": True, "conversation": session}
        first = await _responses(http, {**base, "input": json.dumps({"input": "owls"})})
        assert [e["type"] for e in first][:2] == ["response.created", "response.in_progress"]
        assert [e["type"] for e in first][-2:] == ["response.completed", "[DONE]"]
        (asked,) = [e for e in first if e["type"] == "response.request_info.requested"]
        approve = [
            {
                "type": "message",
                "content": [{"type": "workflow_hil_response", "responses": {asked["request_id"]: {"approved": True}}}],
            }
        ]
        second = await _responses(http, {**base, "input": json.dumps(approve)})
        (review,) = [e for e in second if e["type"] == "response.request_info.requested"]
        assert review["request_data"]["draft"].startswith("I published Owls")
        bad = [
            {
                "type": "message",
                "content": [
                    {
                        "type": "workflow_hil_response",
                        "responses": {review["request_id"]: {"approved": True, "note": ""}},
                    }
                ],
            }
        ]
        refused = await _responses(http, {**base, "input": json.dumps(bad)})
        failed = refused[-2]
        assert failed["type"] == "response.failed" and "note" in failed["response"]["error"]["message"]
        client = await Client.connect(temporal_address)
        run = get_run(client, thread_workflow_id("ag-ui", "ag_ui_devui", session))
        assert [r.request_id for r in await run.pending_requests(restore=False)] == [review["request_id"]]
        # A session is a durable run others may use: DevUI does not delete it; the run goes on.
        deleted = await http.delete(f"/v1/conversations/{session}")
        assert deleted.status_code == 409 and "durable run" in deleted.json()["detail"]
        await run.respond(review["request_id"], {"approved": False, "note": "not now"})
        async with asyncio.timeout(60):
            while (await run.status())["outputs"] != ["review: rejected (not now)"]:
                await asyncio.sleep(0.1)
        r = await http.post("/v1/responses", content=b"{}", headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        deep = b'{"input":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
        r = await http.post("/v1/responses", content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "nested too deeply" in r.text, r.text
