# ruff: noqa: F811 - the fixtures of test_console.py, imported by name, are parameters here
"""The console as people use it (#36 items 3-5): every valid answer sent as typed, any id opens its own run,
every malformed body a JSON 4xx, pictures that fetch nothing, a page a screenshot catches drawn; and a
console that says so, in one line, when it cannot start.

On the real dev server, in Debian's Chromium (Playwright with the system browser), as test_console.py.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run, start_run
from temporal_workflows.temporal._client.devserver import free_port, temporal_cli_path
from tests.integration import console_graphs
from tests.integration.test_console import (  # noqa: F401 - fixtures, used by name
    ACTION,
    CONSOLE_QUEUE,
    Console,
    _pending,
    _png_is_not_blank,
    _review,
    _serve,
    _until,
    browser,
    console,
    console_client,
    console_worker,
    page,
)


async def _forms_run(client: Client, topic: str) -> Any:
    handle = await start_run(client, console_graphs.forms, topic, task_queue=CONSOLE_QUEUE)
    await _until(lambda: _pending(handle))
    return handle


# -- item 3: every valid answer, exactly as typed ----------------------------------------------------


async def test_browser_sends_every_valid_answer_exactly_as_typed(console: Console, page: Any) -> None:
    handle = await _forms_run(console.client, "exact answers")
    (request,) = await handle.pending_requests()
    await page.goto(f"{console.url}/#/run/{handle.id}")
    box = page.locator("[data-request]")
    await box.wait_for()
    fields = {
        "Confirm *": "Yes",  # (?i)^yes$: Python's inline flag, translated, checked in the page
        "Code *": "AB11",  # \A...(?P<n>...)(?P=n)\Z: translated too
        "Digits *": "x",  # ^\d+$: Unicode digits in Python, ASCII in JavaScript: left to the run
        "Big *": "9007199254740993",  # 2^53 + 1
        "Price *": "1.10",
        "When *": "2026-01-31",
        "At *": "2026-01-31T12:00:00+05:30",
    }
    for label, value in fields.items():
        await box.get_by_label(label).fill(value)
    await box.get_by_label("Confirm *").fill("nope")
    await box.get_by_role("button", name="Send answer").click()
    assert "must match" in await box.locator('[data-error-for="confirm"]').inner_text()  # in the page
    await box.get_by_label("Confirm *").fill("Yes")
    await box.get_by_role("button", name="Send answer").click()
    alert = box.get_by_role("alert")
    await alert.get_by_text("digits").wait_for()  # the run's own refusal of what the page could not check
    said = await alert.inner_text()
    assert said.startswith("The run refused this answer: digits:") and "pattern" in said, said
    for noise in (request.request_id, "input_value", "errors.pydantic.dev", "[type="):
        assert noise not in said, said  # the field and the reason, not the request's id or pydantic's dump
    await box.get_by_label("Digits *").fill("١٢")  # Arabic-Indic digits: \d in Python's syntax takes them
    await box.get_by_role("button", name="Send answer").click()
    await page.locator("h1 .badge[data-status=completed]").wait_for()
    assert (await handle.result())["outputs"] == [
        {
            "confirm": "Yes",
            "code": "AB11",
            "digits": "١٢",
            "big": "9007199254740993",
            "price": "1.10",
            "when": "2026-01-31",
            "at": "2026-01-31T12:00:00+05:30",
        }
    ]
    # The Outputs panel shows the output, and the integer past 2^53 reads as it is.
    outputs = page.locator("#outputs pre")
    await outputs.first.wait_for()
    shown = await outputs.first.inner_text()
    assert "[object" not in shown and '"9007199254740993"' in shown and '"1.10"' in shown, shown


async def test_the_event_log_says_what_the_badge_says(console: Console, page: Any) -> None:
    handle = await _review(console.client, "status words")
    await page.goto(f"{console.url}/#/run/{handle.id}")
    await page.locator("h1 .badge[data-status=waiting_for_input]").wait_for()
    log = page.locator("#events")
    await log.get_by_text("status: waiting for input").first.wait_for()
    text = await log.inner_text()
    assert "IDLE_WITH_PENDING_REQUESTS" not in text and "IN_PROGRESS_PENDING_REQUESTS" not in text, text
    (request,) = await handle.pending_requests()
    await handle.respond(request.request_id, {"approved": True, "score": 5})
    await log.get_by_text("status: idle").first.wait_for()
    outputs = page.locator("#outputs pre")
    await outputs.first.wait_for()
    assert (await outputs.first.inner_text()).strip() == '"status words: approved (5/5)"'


# -- item 4: ids and input --------------------------------------------------------------------------


async def test_any_id_a_run_can_have_opens_its_own_run(console: Console, page: Any) -> None:
    uid = uuid.uuid4().hex[:8]
    ids = {
        f"odd-{uid}": "plain",
        f"odd-{uid}/events": "ends in /events",
        f"q?{uid}#x%41 y": "query, fragment, percent, blank",
        f".{uid}": "starts with a dot",
        ".": "a dot",
        "..": "two dots",
        "é" * 500: "1,000 bytes",
    }
    async with httpx.AsyncClient(base_url=console.url, timeout=60) as http:
        for run_id, topic in ids.items():
            started = await http.post(
                "/api/start",
                json={"graph": "console_review", "message": {"topic": topic}, "id": run_id},
                headers=ACTION,
            )
            assert started.status_code == 200 and started.json()["started"] == run_id, (run_id, started.text)
        for run_id in ids:
            await _until(lambda r=run_id: _pending(get_run(console.client, r)))  # type: ignore[misc]
        for run_id, topic in ids.items():
            by_query = await http.get("/api/run", params={"id": run_id})
            assert by_query.status_code == 200 and by_query.json()["id"] == run_id, (run_id, by_query.text)
            assert by_query.json()["state"]["topic"] == topic
            if run_id not in (".", ".."):  # a path cannot carry these: clients resolve them away
                by_path = await http.get(f"/api/runs/{quote(run_id, safe='')}")
                assert by_path.status_code == 200 and by_path.json()["id"] == run_id, (run_id, by_path.text)
        # The run whose id ends in /events is itself, never the events of the run before the slash.
        (plain_request,) = await get_run(console.client, f"odd-{uid}").pending_requests()
        other = (await http.get(f"/api/runs/{quote(f'odd-{uid}/events', safe='')}")).json()
        assert other["state"]["topic"] == "ends in /events"
        assert other["pending_requests"][0]["request_id"] != plain_request.request_id
        # Refused: blanks, and longer than a workflow id can be (Temporal's 1,000 bytes).
        for bad, fragment in (("   ", "only blanks"), ("é" * 500 + "x", "1,000 bytes")):
            refused = await http.post(
                "/api/start", json={"graph": "console_review", "message": {"topic": "x"}, "id": bad}, headers=ACTION
            )
            assert refused.status_code == 400 and fragment in refused.json()["error"], refused.text
        assert (await http.get("/api/run", params={"id": "é" * 501})).status_code == 400
        assert (await http.get(f"/api/runs/odd-{uid}/nothing-here/at-all")).status_code == 404
        assert (await http.get("/api/run")).status_code == 400
    # Each opens in the page, answered there.
    for run_id, topic in ids.items():
        await page.goto(f"{console.url}/#/run/{quote(run_id, safe='')}")
        await page.locator("h1", has_text=run_id[:40]).wait_for()
        await page.locator("[data-request]").wait_for()
        assert topic in await page.locator("#state").inner_text()
    box = page.locator("[data-request]")  # the last one: the 1,000-byte id
    await box.get_by_label("Score *").fill("4")
    await box.get_by_label("Approved").check()
    await box.get_by_role("button", name="Send answer").click()
    await page.locator("h1 .badge[data-status=completed]").wait_for()


async def test_every_malformed_body_is_a_json_4xx(console: Console) -> None:
    handle = await _review(console.client, "malformed")
    (request,) = await handle.pending_requests()
    deep = b"[" * 5000 + b"]" * 5000  # 10 KB, nested 5,000 deep
    run = quote(handle.id, safe="")
    posts = {
        "/api/start": lambda inner: b'{"graph": "console_review", "message": ' + inner + b"}",
        f"/api/runs/{run}/requests/{request.request_id}": lambda inner: b'{"response": ' + inner + b"}",
        f"/api/runs/{run}/checkpoint": lambda inner: b'{"label": ' + inner + b"}",
        f"/api/runs/{run}/reset": lambda inner: b'{"checkpoint_id": ' + inner + b"}",
        f"/api/runs/{run}/fork": lambda inner: b'{"checkpoint_id": "c", "new_id": ' + inner + b"}",
    }
    headers = {**ACTION, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=console.url, timeout=60) as http:
        for path, body in posts.items():
            for content, fragment in (
                (body(deep), "nested too deeply"),
                (deep, "nested too deeply"),
                (b"[1, 2]", "a JSON object"),
                (b"\xff\xfe{}", "not JSON"),
                (b'{"a": 1', "not JSON"),
                (body(b"[" * 150 + b"]" * 150), "nested too deeply"),
            ):
                r = await http.post(path, content=content, headers=headers)
                assert 400 <= r.status_code < 500, (path, content[:20], r.status_code, r.text[:200])
                assert r.headers["content-type"].startswith("application/json"), (path, r.text[:200])
                assert fragment in r.json()["error"], (path, content[:20], r.text[:200])
        # A blank new id for a fork, an id of the wrong type: named.
        blank = await http.post(f"/api/runs/{run}/fork", json={"checkpoint_id": "c", "new_id": "  "}, headers=ACTION)
        assert blank.status_code == 400 and "new_id" in blank.json()["error"]
    assert await handle.pending_requests()  # nothing reached the run


# -- item 4: the picture draws labels as text ------------------------------------------------------


async def test_an_executor_id_holding_markup_is_drawn_as_text_and_fetches_nothing(console: Console, page: Any) -> None:
    handle = await start_run(console.client, console_graphs.markup, "markup", task_queue=CONSOLE_QUEUE)
    await _until(lambda: _pending(handle))
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "console-picture-fetch" in r.url else None)
    await page.goto(f"{console.url}/#/run/{handle.id}")
    await page.locator("#graph svg").wait_for()
    await page.locator("[data-request]").wait_for()
    assert await page.locator("#graph img").count() == 0  # no element made of the label
    assert await page.locator("#graph foreignObject").count() == 0  # SVG text, not HTML labels
    assert "console-picture-fetch" in await page.locator("#graph svg").inner_html()  # it reads as text
    node = page.locator("#graph g.node[data-state=waiting]")
    await node.wait_for()
    assert await node.get_attribute("data-executor") == console_graphs.MARKUP_ID
    await page.wait_for_timeout(500)  # a fetch would have started with the render
    assert fetched == []


# -- item 5: a screenshot at load, one row per run, the status filter's attribute --------------------


async def test_a_screenshot_taken_at_load_shows_the_run_not_loading(console: Console, browser: Any) -> None:
    handle = await _review(console.client, "screenshot at load")
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    try:
        for url, drawn in (
            (f"{console.url}/#/run/{handle.id}", "[data-request]"),
            (f"{console.url}/#/?graph=console_review", f'tr[data-run="{handle.id}"]'),
            (f"{console.url}/#/start", "form"),
        ):
            page = await context.new_page()  # a fresh load of the page, as a screenshot tool makes
            await page.goto(url)  # waits for the load event, as a bare screenshot does
            shot = Path("/tmp") / f"tw-load-{uuid.uuid4().hex[:6]}.png"
            await page.screenshot(path=str(shot))
            assert await page.get_attribute("html", "data-ready") == "true", url
            main = await page.locator("main").inner_text()
            assert "Loading" not in main, (url, main[:200])
            assert await page.locator(drawn).count() >= 1, url
            assert _png_is_not_blank(shot)
            shot.unlink()
            if "#/run/" in url:
                assert await page.locator("#graph svg").count() == 1  # the picture too, at load
                assert int(await page.locator("#events-count").get_attribute("data-count") or 0) > 0  # its events
            await page.close()
    finally:
        await context.close()


async def test_a_reset_run_is_one_row(console: Console) -> None:
    handle = await _review(console.client, "reset once")
    taken = await handle.checkpoint("before")
    assert taken is not None
    assert await handle.reset(checkpoint_id=taken["checkpoint_id"])

    async def both_executions_listed() -> bool:
        return (await console.client.count_workflows(f"WorkflowId = '{handle.id}'")).count == 2

    await _until(both_executions_listed)
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        rows = (await http.get("/api/runs", params={"graph": "console_review", "page_size": "200"})).json()["runs"]
        assert [r["id"] for r in rows].count(handle.id) == 1
        unfiltered = (await http.get("/api/runs", params={"page_size": "200"})).json()["runs"]
        assert [r["id"] for r in unfiltered].count(handle.id) == 1
        assert all(r["temporal_status"] != "continued_as_new" for r in unfiltered)


async def test_the_status_filter_names_the_search_attribute_it_needs() -> None:
    """On a server without GraphRunStatus (one started by hand): the filter says how to register it."""
    env = await WorkflowEnvironment.start_local(
        ip="127.0.0.1", port=free_port(), dev_server_existing_path=temporal_cli_path(), dev_server_log_level="error"
    )
    try:
        client = await Client.connect(
            env.client.service_client.config.target_host, plugins=[TemporalWorkflowsPlugin([], tracing=False)]
        )
        async for c in _serve(client, None, given=False):
            async with httpx.AsyncClient(base_url=c.url, timeout=30) as http:
                r = await http.get("/api/runs", params={"status": "waiting_for_input"})
                assert r.status_code == 400, r.text
                assert "search-attribute create --name GraphRunStatus --type Keyword" in r.json()["error"]
                assert "temporal-workflows dev" in r.json()["error"]
                assert (await http.get("/api/runs")).status_code == 200
    finally:
        await env.shutdown()


# -- issue 35 item 7: a console that cannot start says so in one line -------------------------------


def _console_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "temporal_workflows", *args], capture_output=True, text=True, timeout=120
    )


def test_the_console_refuses_to_start_without_temporal_or_with_its_port_taken(temporal_address: str) -> None:
    port = free_port()
    done = _console_cmd("--address", f"127.0.0.1:{free_port()}", "console", "--port", str(port))
    assert done.returncode != 0, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "no Temporal server is listening at 127.0.0.1:" in lines[0] and "Traceback" not in done.stderr, lines
    assert "hint: start one with `" in done.stderr and "--address" in done.stderr, done.stderr
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        done = _console_cmd("--address", temporal_address, "console", "--port", str(taken))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    assert f"cannot listen on 127.0.0.1:{taken}" in done.stderr and "--port" in done.stderr, done.stderr


async def test_a_console_whose_server_is_gone_answers_json_502s() -> None:
    """Started on a server that then stops: every API route is a JSON 502 naming Temporal, not a 500."""
    env = await WorkflowEnvironment.start_local(
        ip="127.0.0.1", port=free_port(), dev_server_existing_path=temporal_cli_path(), dev_server_log_level="error"
    )
    client = await Client.connect(
        env.client.service_client.config.target_host, plugins=[TemporalWorkflowsPlugin([], tracing=False)]
    )
    await env.shutdown()
    async for c in _serve(client, None, given=False):
        async with httpx.AsyncClient(base_url=c.url, timeout=60) as http:
            for path in ("/api/runs", "/api/run?id=gone", "/api/runs/gone/events"):
                r = await http.get(path)
                assert r.status_code == 502 and r.headers["content-type"].startswith("application/json"), (path, r)
                assert r.json()["error"].startswith("Temporal"), r.text
            r = await http.post("/api/runs/gone/checkpoint", json={}, headers=ACTION)
            assert r.status_code == 502, r.text


async def test_the_page_shows_a_banner_when_temporal_is_gone(browser: Any) -> None:
    env = await WorkflowEnvironment.start_local(
        ip="127.0.0.1", port=free_port(), dev_server_existing_path=temporal_cli_path(), dev_server_log_level="error"
    )
    client = await Client.connect(
        env.client.service_client.config.target_host, plugins=[TemporalWorkflowsPlugin([], tracing=False)]
    )
    async for c in _serve(client, None, given=False):
        context = await browser.new_context()
        try:
            page = await context.new_page()
            await page.goto(f"{c.url}/#/")
            await page.locator("#runs").wait_for()
            await env.shutdown()
            banner = page.locator("#banner")
            await banner.wait_for(state="visible", timeout=60_000)  # the list refreshes every 5 s
            assert "cannot reach Temporal" in await banner.inner_text()
        finally:
            await context.close()
