"""A run's timeline in the console: its JSON route, read from the run's history, and its panel in Chromium.

No collector is involved: supersteps, steps, their durations, attempts and the
worker that ran each come from what the run records. The browser is Debian's
Chromium driven by Playwright with the system browser (never a download).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from examples import research
from temporal_workflows._console.app import ConsoleSettings, make_app
from temporal_workflows._http.guard import Guard
from temporal_workflows._http.server import ServerHandle, bind
from temporal_workflows.temporal import start_run
from tests.conftest import TASK_QUEUE
from tests.integration import graphs

CHROMIUM = os.environ.get("TW_CHROMIUM", "/usr/bin/chromium")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"

pytestmark = pytest.mark.usefixtures("worker")


@pytest.fixture(scope="module")
async def console_url(client: Client) -> AsyncIterator[str]:
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    settings = ConsoleSettings(graphs={research.workflow.name or "research": research.workflow}, task_queue=TASK_QUEUE)

    async def connect() -> Client:
        return client

    server = ServerHandle(make_app(Guard.make(None, ("127.0.0.1", port)), settings, connect), sock, settings.limits)
    task = asyncio.create_task(server.serve())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server._server.should_exit = True
        await asyncio.wait_for(task, 15)


async def _timeline(url: str, workflow_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{url}/api/runs/{workflow_id}/timeline")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_the_timeline_route_reads_supersteps_steps_attempts_and_workers_from_history(
    client: Client, console_url: str, workflow_id: str
) -> None:
    handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    await handle.result()
    t = await _timeline(console_url, workflow_id)
    assert t["graph"] == "research" and len(t["segments"]) == 1 and t["segments"][0]["status"] == "completed"
    assert [(s["superstep"], sorted(x["executor"] for x in s["steps"])) for s in t["supersteps"]] == [
        (1, ["planner"]),
        (2, sorted(research.RESEARCHERS)),
        (3, ["writer"]),
    ]
    identity = client.identity  # the test's worker shares its client's identity: <pid>@<host>
    for superstep in t["supersteps"]:
        assert superstep["start"] is not None and superstep["end"] >= superstep["start"]
        for step in superstep["steps"]:
            assert step["outcome"] == "completed" and step["attempts"] == 1 and step["worker"] == identity
            assert step["scheduled"] <= step["started"] <= step["ended"]
    # Supersteps follow one another: each starts once the one before has committed.
    ends = [s["end"] for s in t["supersteps"]]
    starts = [s["start"] for s in t["supersteps"]]
    assert all(starts[i + 1] >= ends[i] for i in range(len(ends) - 1))
    assert t["workers"] == [identity]

    # A step that needed two attempts says so, and why the first one failed.
    flaky_id = f"{workflow_id}-flaky"
    flaky = await start_run(client, graphs.flaky_graph, flaky_id, id=flaky_id, task_queue=TASK_QUEUE)
    await flaky.result()
    (step,) = (await _timeline(console_url, flaky_id))["supersteps"][0]["steps"]
    assert step["executor"] == "flaky" and step["attempts"] == 2 and step["outcome"] == "completed"
    assert step["failure"]


async def test_the_timeline_of_a_running_step_shows_its_worker_and_attempt(
    client: Client, console_url: str, workflow_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration import telemetry_graphs

    release = tmp_path / "release"
    monkeypatch.setenv(telemetry_graphs.ENV_RELEASE, str(release))
    queue = f"tl-{workflow_id}"
    async with Worker(client, task_queue=queue):
        handle = await start_run(
            client, telemetry_graphs.workflow, "Write about bikes", id=workflow_id, task_queue=queue
        )
        async with asyncio.timeout(60):
            while not (pending := await handle.pending_requests()):
                await asyncio.sleep(0.1)
        await handle.respond(pending[0].request_id, pending[0].data.to_function_approval_response(approved=True))

        async def archive_running() -> dict[str, Any] | None:
            t = await _timeline(console_url, workflow_id)
            steps = [s for ss in t["supersteps"] for s in ss["steps"] if s["executor"] == "archive"]
            return steps[0] if steps and steps[0]["outcome"] == "running" else None

        async with asyncio.timeout(60):
            while (step := await archive_running()) is None:
                await asyncio.sleep(0.1)
        assert step["worker"] == client.identity and step["ended"] is None and step["attempts"] == 1
        release.write_text("")
        await handle.result()
    t = await _timeline(console_url, workflow_id)
    assert [s["superstep"] for s in t["supersteps"]] == [1, 2, 3, 4]
    assert all(s["outcome"] == "completed" for ss in t["supersteps"] for s in ss["steps"])


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium): the console's browser tests need one")
    playwright = pytest.importorskip("playwright.async_api")
    async with playwright.async_playwright() as p:
        b = await p.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield b
        finally:
            await b.close()


async def test_the_run_page_draws_the_timeline_with_durations_attempts_and_workers(
    client: Client, console_url: str, browser: Any, workflow_id: str
) -> None:
    handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    await handle.result()
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        await page.goto(f"{console_url}/#/run/{workflow_id}")
        await page.locator('#timeline .tl-bar[data-executor="writer"]').wait_for()
        groups = page.locator("#timeline .tl-superstep")
        assert [await g.get_attribute("data-superstep") for g in await groups.all()] == ["1", "2", "3"]
        bars = page.locator("#timeline .tl-bar")
        assert await bars.count() == 5
        for bar in await bars.all():
            assert await bar.get_attribute("data-worker") == client.identity
            assert await bar.get_attribute("data-attempts") == "1"
            assert await bar.get_attribute("data-outcome") == "completed"
            assert int(await bar.get_attribute("data-duration-ms") or "-1") >= 0
            box = await bar.bounding_box()
            assert box is not None and box["width"] >= 1  # drawn, not collapsed
        label = await page.locator("#timeline .tl-superstep[data-superstep='2'] .tl-label").first.inner_text()
        assert client.identity in label and ("ms" in label or " s" in label)
        assert client.identity in await page.locator("#timeline .tl-workers").inner_text()
        await page.locator("#timeline").scroll_into_view_if_needed()
        folder = DOCS if os.environ.get("TW_UPDATE_SCREENSHOTS") else Path(os.environ.get("TMPDIR", "/tmp"))
        folder.mkdir(parents=True, exist_ok=True)
        await page.locator("#timeline").screenshot(path=str(folder / "timeline.png"))
    finally:
        await context.close()
    assert not errors, errors
