"""The web console on the real dev server: its JSON routes, its security, and the page in a real browser.

The browser is Debian's Chromium, driven by Playwright's Python package with
the system browser (``executable_path``; never ``playwright install``). Each
page the tests visit is saved under ``docs/console/`` and checked non-blank.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import uuid
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows._console.app import ConsoleSettings, make_app
from temporal_workflows._graph.shape import GraphShape
from temporal_workflows._graph.viz import to_mermaid
from temporal_workflows._http.gate import ACTION_HEADER
from temporal_workflows._http.guard import COOKIE_NAME, Guard
from temporal_workflows._http.server import ServerHandle, bind
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, get_run, start_dev_server, start_run
from tests.conftest import TASK_QUEUE
from tests.integration import console_graphs
from tests.integration.agent_graphs import GRAPHS

CONSOLE_QUEUE = "tw-console-tests"
TOKEN = "console-test-token-7f3a9c1e5b"
CHROMIUM = os.environ.get("TW_CHROMIUM", "/usr/bin/chromium")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
ACTION = {ACTION_HEADER: "1"}


@dataclass
class Console:
    url: str
    client: Client
    server: ServerHandle


@pytest.fixture(scope="module")
async def console_client(temporal_address: str) -> Client:
    return await Client.connect(
        temporal_address, plugins=[TemporalWorkflowsPlugin(console_graphs.all_workflows(), tracing=False)]
    )


@pytest.fixture(scope="module")
async def console_worker(console_client: Client) -> AsyncIterator[Worker]:
    async with Worker(console_client, task_queue=CONSOLE_QUEUE) as w:
        yield w


async def _serve(client: Client, token: str | None, given: bool = True) -> AsyncIterator[Console]:
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    graphs = {wf.name: wf for wf in console_graphs.all_workflows()} if given else {}
    if given and "approval" in GRAPHS:  # the agent tool-approval graph (hosted by the test worker): its picture too
        graphs[GRAPHS["approval"].name] = GRAPHS["approval"]
    settings = ConsoleSettings(graphs=graphs, task_queue=CONSOLE_QUEUE)

    async def connect() -> Client:
        return client

    server = ServerHandle(make_app(Guard.make(token, ("127.0.0.1", port)), settings, connect), sock, settings.limits)
    task = asyncio.create_task(server.serve())
    try:
        yield Console(f"http://127.0.0.1:{port}", client, server)
    finally:
        server._server.should_exit = True
        await asyncio.wait_for(task, 15)


@pytest.fixture(scope="module")
async def console(console_client: Client, console_worker: Worker, worker: Worker) -> AsyncIterator[Console]:
    """A console on loopback without a token (the default), over the console graphs' worker and the test worker."""
    async for c in _serve(console_client, None):
        yield c


@pytest.fixture(scope="module")
async def bare(console_client: Client, console_worker: Worker) -> AsyncIterator[Console]:
    """A console given no graph (no ``--workflow``): every picture it shows is the one the run keeps."""
    async for c in _serve(console_client, None, given=False):
        yield c


@pytest.fixture(scope="module")
async def locked(console_client: Client, console_worker: Worker) -> AsyncIterator[Console]:
    """A console that needs its token."""
    async for c in _serve(console_client, TOKEN):
        yield c


async def _review(client: Client, topic: str = "bees") -> RunHandle:
    handle = await start_run(client, console_graphs.review, console_graphs.Draft(topic=topic), task_queue=CONSOLE_QUEUE)
    await _until(lambda: _pending(handle))
    return handle


async def _pending(handle: RunHandle) -> bool:
    return bool(await handle.pending_requests())


async def _until(check: Any, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.1)


# -- the JSON routes ----------------------------------------------------------------------------


async def test_runs_are_listed_from_visibility_filtered_and_paged(console: Console) -> None:
    waiting = [await _review(console.client, f"list-{i}") for i in range(3)]
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:

        async def ids(**params: str) -> set[str]:
            r = await http.get("/api/runs", params=params)
            assert r.status_code == 200, r.text
            return {row["id"] for row in r.json()["runs"]}

        async def listed() -> bool:
            return {h.id for h in waiting} <= await ids(graph="console_review", status="waiting_for_input")

        await _until(listed)  # visibility is eventually consistent
        assert not {h.id for h in waiting} & await ids(status="completed")
        first = (await http.get("/api/runs", params={"graph": "console_review", "page_size": "2"})).json()
        assert len(first["runs"]) == 2 and first["next"]
        second = (
            await http.get("/api/runs", params={"graph": "console_review", "page_size": "2", "next": first["next"]})
        ).json()
        assert not {r["id"] for r in first["runs"]} & {r["id"] for r in second["runs"]}
        for params, fragment in (
            ({"status": "sleeping"}, "status: one of"),
            ({"graph": "x' OR '1'='1"}, "without quotes"),
            ({"since": "yesterday"}, "ISO 8601"),
            ({"page_size": "100000"}, "page_size"),
            ({"next": "%%%"}, "next"),
        ):
            r = await http.get("/api/runs", params=params)
            assert r.status_code == 400 and fragment in r.json()["error"], (params, r.text)


async def test_a_run_its_answer_refused_then_accepted(console: Console) -> None:
    handle = await _review(console.client, "refusals")
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        run = (await http.get(f"/api/runs/{handle.id}")).json()
        assert run["graph"] == "console_review" and run["status"]["status"] == "waiting_for_input"
        (request,) = run["pending_requests"]
        # The page gets a pending request in its one form: the request_info event's JSON, where it stands.
        assert request["source_executor_id"] == "writer" and request["type"] == "request_info"
        assert request["response_schema"]["properties"]["score"]["maximum"] == 5 and request["superstep"] >= 1
        assert run["picture"]["node_ids"]["writer"] and run["state"]["topic"] == "refusals"
        path = f"/api/runs/{handle.id}/requests/{request['request_id']}"
        refused = await http.post(path, json={"response": {"approved": False, "score": 2}}, headers=ACTION)
        assert refused.status_code == 422 and "a rejection needs a comment" in refused.json()["error"]
        assert (await http.post(path, json={"response": {"approved": True, "score": 5}})).status_code == 403  # CSRF
        ok = await http.post(path, json={"response": {"approved": True, "score": 5}}, headers=ACTION)
        assert ok.status_code == 200, ok.text
    assert (await handle.result())["outputs"] == ["refusals: approved (5/5)"]


async def test_a_run_keeps_its_graphs_picture_and_a_console_given_no_graph_draws_it(bare: Console) -> None:
    handle = await _review(bare.client, "pinned picture")
    topology = await handle.topology()
    assert topology["graph"] == "console_review" and topology["start_executor"] == "outline"
    assert topology["executor_ids"] == ["outline", "writer", "publish"] and topology["note"] is None
    assert to_mermaid(TypeAdapter(GraphShape).validate_python(topology["shape"])) == to_mermaid(
        console_graphs.review.graph
    )
    async with httpx.AsyncClient(base_url=bare.url, timeout=30) as http:
        assert (await http.get("/api/info")).json()["graphs"] == []
        run = (await http.get(f"/api/runs/{handle.id}")).json()
    picture = run["picture"]
    assert picture["from"] == "run" and picture["mermaid"] == to_mermaid(console_graphs.review.graph)
    assert picture["node_ids"] == {"outline": "outline", "writer": "writer", "publish": "publish"}
    assert run["picture_note"] is None


async def test_runs_of_nested_sub_workflows_are_drawn_too(bare: Console, client: Client, worker: Worker) -> None:
    from tests.integration import subgraphs

    nested = await start_run(client, subgraphs.nested, "bees", task_queue=TASK_QUEUE)
    await _until(lambda: _pinned(nested))
    async with httpx.AsyncClient(base_url=bare.url, timeout=30) as http:
        sub = (await http.get(f"/api/runs/{nested.id}")).json()["picture"]
    assert sub["mermaid"] == to_mermaid(subgraphs.nested.graph) and "subgraph middle" in sub["mermaid"]
    topology = await nested.topology()
    assert topology["subworkflows"] == {"middle": "sw_nested.middle"}
    assert topology["shape"]["subworkflows"]["middle"]["subworkflows"]["inner"]["start"]


async def _pinned(handle: RunHandle) -> bool:
    return (await handle.topology())["shape"] is not None


def test_a_picture_the_console_cannot_read_is_a_note_never_an_error() -> None:
    from temporal_workflows._console.app import _run_picture

    for answer, why in (
        (None, "did not answer"),
        ({"unavailable": "QueryFailed: unknown queryType topology"}, "unknown queryType topology"),
        ({"shape": None, "note": "the run has not pinned its graph yet"}, "not pinned"),
        ({"shape": {"start": 3}}, "could not be drawn"),
        ({"shape": {"name": "x", "start": "a", "executors": "a", "groups": [{"kind": "single"}]}}, "could not"),
    ):
        picture, note = _run_picture(answer)
        assert picture is None and why in note, (answer, note)


async def test_events_stream_over_sse_until_the_run_closes(console: Console) -> None:
    handle = await _review(console.client, "sse")
    (request,) = await handle.pending_requests()
    await handle.respond(request.request_id, {"approved": True, "score": 4})
    await handle.result()
    events: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(base_url=console.url, timeout=30) as http,
        http.stream("GET", f"/api/runs/{handle.id}/events") as resp,
    ):
        assert resp.headers["content-type"].startswith("text/event-stream")
        kind = None
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind == "events":
                events += json.loads(line.split(":", 1)[1])
            elif line.startswith("data:") and kind == "end":
                break
    types = [e["type"] for e in events]
    assert types[0] == "started" and "request_info" in types and "output" in types
    assert any(e.get("executor_id") == "writer" and e["type"] == "executor_invoked" for e in events)


async def test_clear_4xx_on_bad_input(console: Console) -> None:
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        assert (await http.get("/api/runs/no-such-run-here")).status_code == 404
        assert (await http.get("/api/runs/" + "x" * 2000)).status_code == 400
        bad = await http.post(
            "/api/start", content=b"{not json", headers={**ACTION, "Content-Type": "application/json"}
        )
        assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
        assert (await http.post("/api/start", json={"graph": "nope"}, headers=ACTION)).status_code == 400
        refused = await http.post(
            "/api/start", json={"graph": "console_review", "message": {"titel": "x"}}, headers=ACTION
        )
        assert refused.status_code == 422 and "titel" in refused.json()["error"]
        big = await http.post(
            "/api/start",
            content=b"{" + b" " * (5 * 1024 * 1024) + b"}",
            headers={**ACTION, "Content-Type": "application/json"},
        )
        assert big.status_code == 413
        assert (await http.get("/nowhere")).status_code == 404
        assert (await http.get("/api/runs", headers={"Host": "evil.example"})).status_code == 403
        foreign = await http.post("/api/start", json={}, headers={**ACTION, "Origin": "https://evil.example"})
        assert foreign.status_code == 403


async def test_a_locked_console_needs_its_token_or_its_session(locked: Console) -> None:
    handle = await _review(locked.client, "locked")
    async with httpx.AsyncClient(base_url=locked.url, timeout=30) as http:
        r = await http.get(f"/api/runs/{handle.id}")
        assert r.status_code == 401 and "locked" not in r.text  # nothing about the run, decrypted or not
        assert (await http.get("/", follow_redirects=False)).headers["location"] == "/login"
        assert (await http.get("/login")).status_code == 200  # the login page and assets are open
        assert (await http.get("/static/app.js")).status_code == 200
        assert (await http.get("/api/info", headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 200
        wrong = await http.post("/login", data={"token": "not-the-token-at-all"}, follow_redirects=False)
        assert wrong.status_code == 401 and COOKIE_NAME not in wrong.headers.get("set-cookie", "")
        signed = await http.post("/login", data={"token": TOKEN}, follow_redirects=False)
        cookie = signed.headers["set-cookie"]
        assert (
            signed.status_code == 303 and "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
        )
        assert (await http.get(f"/api/runs/{handle.id}")).json()["state"]["topic"] == "locked"
        (request,) = await handle.pending_requests()
        path = f"/api/runs/{handle.id}/requests/{request.request_id}"
        assert (await http.post(path, json={"response": {"approved": True, "score": 3}})).status_code == 403
        assert (
            await http.post(path, json={"response": {"approved": True, "score": 3}}, headers=ACTION)
        ).status_code == 200


# -- in a real browser ---------------------------------------------------------------------------


def _png_is_not_blank(path: Path) -> bool:
    """A PNG whose pixels are not all one colour (decoded with zlib: no imaging library needed)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    return len(set(raw)) > 32 and len(data) > 10_000


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium): the console's browser tests need one")
    playwright = pytest.importorskip("playwright.async_api")
    async with playwright.async_playwright() as p:
        b = await p.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    p = await context.new_page()
    p.set_default_timeout(20_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    await context.close()
    assert not errors, errors


async def _shot(page: Any, name: str) -> None:
    """Save a screenshot, checked non-blank: into docs/console/ with TW_UPDATE_SCREENSHOTS=1, else a temp folder."""
    temporary = Path(os.environ.get("TMPDIR", "/tmp")) / "tw-console"
    folder = DOCS if os.environ.get("TW_UPDATE_SCREENSHOTS") else temporary
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    await page.screenshot(path=str(path), full_page=False)
    assert _png_is_not_blank(path), path


async def test_browser_answers_a_request_with_the_runs_refusal_then_completes_live(console: Console, page: Any) -> None:
    handle = await _review(console.client, "browser")
    await page.goto(f"{console.url}/#/?graph=console_review")
    await page.locator(f'tr[data-run="{handle.id}"]').wait_for()
    await _shot(page, "runs")

    await page.goto(f"{console.url}/#/run/{handle.id}")
    box = page.locator("[data-request]")
    await box.wait_for()
    writer = page.locator('#graph g.node[data-executor="writer"]')
    await writer.wait_for()
    assert await writer.get_attribute("data-state") == "waiting"  # the waiting executor is highlighted
    await _shot(page, "run")

    await box.get_by_label("Score *").fill("9")
    await box.get_by_role("button", name="Send answer").click()
    assert "at most 5" in await box.locator('[data-error-for="score"]').inner_text()  # checked in the page
    await box.get_by_label("Score *").fill("2")
    await box.get_by_role("button", name="Send answer").click()  # approved unticked, no comment
    alert = box.get_by_role("alert")
    await alert.get_by_text("a rejection needs a comment").wait_for()  # the run's own refusal
    await _shot(page, "request-refused")
    await box.get_by_label("Comment").fill("needs sources")
    await box.get_by_role("button", name="Send answer").click()
    await page.locator("h1 .badge[data-status=completed]").wait_for()  # live, without a reload
    await page.get_by_text("browser: rejected (2/5) needs sources").first.wait_for()
    assert await page.locator("#no-requests").count() == 1


async def test_browser_draws_a_run_of_a_graph_it_was_not_given_lit_per_executor(bare: Console, page: Any) -> None:
    handle = await _review(bare.client, "not given")
    await page.goto(f"{bare.url}/#/run/{handle.id}")
    node = page.locator("#graph g.node[data-executor]")
    await page.locator('#graph g.node[data-executor="writer"][data-state="waiting"]').wait_for()
    assert await node.count() == 3 and await page.locator("#no-picture").count() == 0
    for idle in ("outline", "publish"):  # the current superstep's states: outline ran in an earlier one
        assert await page.locator(f'#graph g.node[data-executor="{idle}"]').get_attribute("data-state") == "idle"
    await _shot(page, "run-not-given")
    (request,) = await handle.pending_requests()
    await handle.respond(request.request_id, {"approved": True, "score": 5})
    await page.locator('#graph g.node[data-executor="publish"][data-state="done"]').wait_for()  # live
    await page.locator("h1 .badge[data-status=completed]").wait_for()


async def test_a_run_that_keeps_no_picture_shows_a_note_saying_why(
    bare: Console, page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporal_workflows.temporal._activities import steps

    # A run pinned by a worker before runs kept their picture records none (nor a note) ...
    monkeypatch.setattr(steps, "bounded_shape", lambda graph, max_bytes: (None, None))
    old = await _review(bare.client, "old worker")
    monkeypatch.undo()
    # ... and a graph larger than a run keeps a picture of gets a note instead.
    monkeypatch.setattr(steps, "MAX_SHAPE_BYTES", 100)
    large = await _review(bare.client, "large graph")
    async with httpx.AsyncClient(base_url=bare.url, timeout=30) as http:
        for handle, why in ((old, "kept no picture of its graph"), (large, "larger than a run keeps (100 bytes)")):
            run = (await http.get(f"/api/runs/{handle.id}")).json()
            assert run["picture"] is None and why in run["picture_note"], run["picture_note"]
            assert run["pending_requests"]  # the run itself goes on as ever
    await page.goto(f"{bare.url}/#/run/{large.id}")
    await page.locator("[data-request]").wait_for()
    note = page.locator("#no-picture")
    await note.wait_for()
    assert "No picture: the graph's picture" in await note.inner_text()
    assert await page.locator("#graph svg").count() == 0


async def test_browser_a_request_answered_elsewhere_disappears(console: Console, page: Any) -> None:
    handle = await _review(console.client, "elsewhere")
    await page.goto(f"{console.url}/#/run/{handle.id}")
    await page.locator("[data-request]").wait_for()
    (request,) = await handle.pending_requests()
    await handle.respond(request.request_id, {"approved": True, "score": 5})
    await page.locator("[data-request]").wait_for(state="detached", timeout=10_000)
    await page.locator("h1 .badge[data-status=completed]").wait_for()


async def test_browser_approves_an_agents_tool_call_in_one_click(console: Console, page: Any) -> None:
    pytest.importorskip("agent_framework")
    ticket = f"t-{uuid.uuid4().hex[:8]}"
    handle = await start_run(console.client, GRAPHS["approval"], f"{ticket} email bob", task_queue=TASK_QUEUE)
    await _until(lambda: _pending(handle), timeout=30)
    await page.goto(f"{console.url}/#/run/{handle.id}")
    approve = page.locator('[data-request] button[data-action="approve"]')
    await approve.first.wait_for()
    await page.locator("[data-request] .tool", has_text="send_email").wait_for()
    await _shot(page, "approval")
    requests = page.locator("[data-request]")
    while (left := await requests.count()) > 0:
        await approve.first.click()  # one click per tool call; the answered one goes away live

        async def fewer(left: int = left) -> bool:
            return await requests.count() < left

        await _until(fewer, timeout=30)
    await page.locator("h1 .badge[data-status=completed]").wait_for(timeout=30_000)
    assert "Emailed bob" in json.dumps((await handle.result())["outputs"])
    # The agent's answer streamed into the page as it came (live events, text deltas joined).
    await page.locator('[data-stream="mailer"]', has_text="Emailed bob").wait_for()


async def test_browser_resets_a_run_to_a_checkpoint(console: Console, page: Any) -> None:
    handle = await _review(console.client, "reset")
    taken = await handle.checkpoint("before review")
    assert taken is not None
    await page.goto(f"{console.url}/#/run/{handle.id}")
    row = page.locator(f'tr[data-checkpoint="{taken["checkpoint_id"]}"]')
    await row.wait_for()
    page.once("dialog", lambda d: asyncio.ensure_future(d.accept()))
    await row.locator('button[data-action="reset"]').click()
    await page.get_by_text("Reset accepted").wait_for()

    async def reset_done() -> bool:
        status = await handle.status()
        return status["resets"] == 1 and status["status"] == "waiting_for_input"

    await _until(reset_done)
    await page.locator("[data-request]").wait_for()
    await _shot(page, "checkpoints")


async def test_browser_starts_a_run_from_its_form(console: Console, page: Any) -> None:
    await page.goto(f"{console.url}/#/start")
    await page.get_by_label("Topic *").fill("")
    await page.get_by_role("button", name="Start").click()
    assert "required" in await page.locator('[data-error-for="topic"]').inner_text()
    await page.get_by_label("Topic *").fill("started in the browser")
    await page.get_by_label("Words").fill("250")
    await _shot(page, "start")
    await page.get_by_role("button", name="Start").click()
    await page.locator("[data-request]").wait_for()
    run_id = page.url.split("#/run/", 1)[1]
    state = await get_run(console.client, run_id.replace("%20", " ")).state()
    assert state["draft"] == "250 words on started in the browser"


async def test_browser_on_a_phone(console: Console, browser: Any) -> None:
    handle = await _review(console.client, "phone")
    context = await browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, device_scale_factor=2)
    try:
        page = await context.new_page()
        await page.goto(f"{console.url}/#/run/{handle.id}")
        await page.locator("[data-request]").wait_for()
        await page.locator('#graph g.node[data-executor="writer"][data-state="waiting"]').wait_for()
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width  # nothing wider than the screen: no sideways scrolling
        await _shot(page, "phone")
    finally:
        await context.close()


async def test_browser_follows_a_run_emitting_10000_events_without_falling_behind(browser: Any) -> None:
    """On a dev server of its own: the session-wide replay (test_replay.py) would replay this run's history,
    hundreds of stream batches, in the sandbox for minutes."""
    env = await start_dev_server()
    try:
        client = await Client.connect(
            env.client.service_client.config.target_host,
            plugins=[TemporalWorkflowsPlugin(console_graphs.all_workflows(), tracing=False)],
        )
        async with Worker(client, task_queue=CONSOLE_QUEUE):
            async for console in _serve(client, None):
                context = await browser.new_context(viewport={"width": 1280, "height": 860})
                page = await context.new_page()
                await page.goto(f"{console.url}/#/")  # the page is open, as a person keeps it
                await page.locator("#runs").wait_for()
                handle = await start_run(
                    client, console_graphs.chatty, console_graphs.Chatter(events=10_000), task_queue=CONSOLE_QUEUE
                )
                await page.evaluate(f"location.hash = '#/run/{handle.id}'")
                await asyncio.wait_for(handle.result(), 120)
                loop = asyncio.get_running_loop()
                completed = loop.time()
                count = page.locator("#events-count", has_text="run closed")
                await count.wait_for(timeout=60_000)
                behind = loop.time() - completed
                shown = int(await count.get_attribute("data-count") or 0)
                assert shown >= 10_000, shown  # every live event, plus the run's own
                assert await page.locator("#events > div").count() <= 300  # the log keeps the newest lines only
                assert behind < 30, behind  # measured figures: python -m bench.console, docs/console.md
                await context.close()
    finally:
        await env.shutdown()


async def test_reset_and_fork_are_refused_in_the_runs_own_words(console: Console) -> None:
    handle = await _review(console.client, "refused-reset")
    taken = await handle.checkpoint("kept")
    assert taken is not None
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        run_path = f"/api/runs/{handle.id}"
        unknown = await http.post(f"{run_path}/reset", json={"checkpoint_id": "no-such-checkpoint"}, headers=ACTION)
        assert unknown.status_code == 422 and "CheckpointNotFoundError" in unknown.json()["error"], unknown.text
        new_id = f"{handle.id}-fork"
        forked = await http.post(
            f"{run_path}/fork", json={"checkpoint_id": taken["checkpoint_id"], "new_id": new_id}, headers=ACTION
        )
        assert forked.status_code == 200 and forked.json()["started"] == new_id, forked.text
        again = await http.post(
            f"{run_path}/fork", json={"checkpoint_id": taken["checkpoint_id"], "new_id": new_id}, headers=ACTION
        )
        assert again.status_code == 409
    fork = get_run(console.client, new_id)
    await _until(lambda: _pending(fork))
    assert (await fork.status())["lineage"]["workflow_id"] == handle.id


async def test_the_console_serves_the_codec_endpoints_behind_its_token(console_client: Client) -> None:
    """One process for the console and the Web UI's codec: /decode with the bearer token, nothing without it."""
    from temporalio.api.common.v1 import Payload

    from temporal_workflows.temporal import EncryptionCodec, KeyRing

    codec = EncryptionCodec(KeyRing({"k1": os.urandom(32)}))
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    settings = ConsoleSettings(codec=codec)

    async def connect() -> Client:
        return console_client

    guard = Guard.make(TOKEN, ("127.0.0.1", port), origins=["http://localhost:8233"])
    server = ServerHandle(make_app(guard, settings, connect), sock, settings.limits)
    task = asyncio.create_task(server.serve())
    try:
        from google.protobuf import json_format

        (sealed,) = await codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"secret-1"')])
        body = {"payloads": [json_format.MessageToDict(sealed)]}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert (await http.post("/default/decode", json=body)).status_code == 401
            ui = {"Origin": "http://localhost:8233"}
            preflight = await http.options("/default/decode", headers=ui)
            assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == ui["Origin"]
            ok = await http.post("/default/decode", json=body, headers={**ui, "Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200 and b"secret-1" in __import__("base64").b64decode(
                ok.json()["payloads"][0]["data"]
            )
            assert (
                await http.post("/encode", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
            ).status_code == 403
    finally:
        server._server.should_exit = True
        await asyncio.wait_for(task, 15)


async def test_the_console_command_serves_the_page(temporal_address: str, tmp_path: Path) -> None:
    """`temporal-workflows console` as a user starts it: loopback, a graph given, a token file; then the page."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "temporal_workflows", "--address", temporal_address, "console",
        "--workflow", "tests.integration.console_graphs:review", "--port", str(port), "--token-file", str(token_file),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line.startswith(f"console on http://127.0.0.1:{port}") and "token required" in line, line
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert (await http.get("/api/info")).status_code == 401
            info = (await http.get("/api/info", headers={"Authorization": f"Bearer {TOKEN}"})).json()
            assert info["namespace"] == "default" and [g["name"] for g in info["graphs"]] == ["console_review"]
            assert info["graphs"][0]["start_schema"]["required"] == ["topic"]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


def test_port_is_loopback_only_by_default() -> None:
    """The console's defaults: loopback; off loopback without --token-file it refuses to start."""
    from temporal_workflows._cli._main import parser

    args = parser().parse_args(["console"])
    assert args.host == "127.0.0.1"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-m", "temporal_workflows", "console", "--host", "0.0.0.0", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--token-file" in done.stderr


def test_the_screenshots_in_the_docs_are_not_blank() -> None:
    shots = sorted(DOCS.glob("*.png"))
    assert {p.stem for p in shots} >= {"runs", "run", "request-refused", "approval", "checkpoints", "start", "phone"}
    for path in shots:
        assert _png_is_not_blank(path), path
