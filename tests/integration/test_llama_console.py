"""LlamaIndex runs (``TemporalRuntime``) in the web console, in Chromium, on the dev server.

The console and the worker are processes as a team runs them (``temporal-workflows console --workflow
app:Flow`` and ``temporal-workflows worker --workflow app:Flow``); the page is driven by Playwright with the
system's Chromium. LlamaIndex's documented human-in-the-loop example is started from the console's form and
answered in its request form; a run waiting for a typed response shows the run's refusals, takes an event
from the event form, and is forked from its context.
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

from temporal_workflows.temporal import get_run
from tests.integration import llama_tools_app as app
from tests.integration import test_console as console_tests
from tests.integration.ag_ui_support import Processes

browser = console_tests.browser  # the console tests' Chromium (module-scoped) and page fixtures
page = console_tests.page
_shot = console_tests._shot

APP = "tests.integration.llama_tools_app"
HITL = "tests.integration.llama_docs_examples.HumanInTheLoopWorkflow"
ACTION = {"X-TW-Console": "1"}


@dataclass
class Served:
    url: str
    queue: str


@pytest.fixture(scope="module")
async def served(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    queue = f"llama-console-{uuid.uuid4().hex[:8]}"
    hosted = [arg for spec in app.SPECS for arg in ("--workflow", spec)]
    async with Processes(temporal_address, tmp_path_factory.mktemp("llama-console")) as procs:
        _, url = await asyncio.gather(
            procs.worker("worker", *hosted, "--task-queue", queue),
            procs.console("console", "--workflow", f"{APP}:hitl", "--workflow", f"{APP}:review", "--task-queue", queue),
        )
        yield Served(url, queue)


async def _start(served: Served, name: str, message: dict[str, Any]) -> str:
    async with httpx.AsyncClient(timeout=60) as http:
        r = await http.post(f"{served.url}/api/start", json={"graph": name, "message": message}, headers=ACTION)
        assert r.status_code == 200, r.text
        started: str = r.json()["started"]
        return started


async def test_the_docs_human_in_the_loop_example_started_and_answered_in_the_browser(
    served: Served, page: Any, client: Any
) -> None:
    await page.goto(f"{served.url}/#/start")
    await page.get_by_label("Graph").select_option(HITL)
    await page.locator("textarea").fill("{}")  # LlamaIndex's plain StartEvent: run()'s keyword arguments
    await page.get_by_role("button", name="Start").click()
    await page.wait_for_url("**/#/run/**")
    run_id = page.url.split("#/run/", 1)[1]

    # Waiting for input, as the runs list and the run's page say; its picture drawn from its steps, lit.
    await page.locator("h1 .badge[data-status=waiting_for_input]").wait_for()
    await page.locator('#graph g.node[data-executor="step1"][data-state="done"]').wait_for()
    assert await page.locator('#graph g.node[data-executor="step2"]').get_attribute("data-state") == "idle"
    assert await page.locator("#run-graph").inner_text() == HITL
    box = page.locator('[data-request="input-1"]')
    await box.wait_for()
    assert "Enter a number: " in await box.inner_text()
    await _shot(page, "llama-run-waiting")
    await page.goto(f"{served.url}/#/")
    row = page.locator(f'tr[data-run="{run_id}"]')
    await row.locator(".badge[data-status=waiting_for_input]").wait_for()
    assert HITL in await row.inner_text()
    assert run_id in await _listed(served, "waiting_for_input") and run_id not in await _listed(served, "running")

    await page.goto(f"{served.url}/#/run/{run_id}")
    box = page.locator('[data-request="input-1"]')
    await box.get_by_role("button", name="Send answer").click()
    assert "required" in await box.locator('[data-error-for="response"]').inner_text()  # checked in the page
    await box.get_by_label("Response *").fill("42")
    await box.get_by_role("button", name="Send answer").click()
    await page.locator("h1 .badge[data-status=completed]").wait_for()  # live
    await page.locator('#graph g.node[data-executor="step2"][data-state="done"]').wait_for()
    await page.locator("#outputs pre").wait_for()
    assert await page.locator("#outputs").inner_text() == '"42"'  # what `await handler` returned
    assert await page.locator("#no-requests").count() == 1
    events = await page.locator("#events").inner_text()
    assert 'InputRequiredEvent {"prefix":"Enter a number: "}' in events and 'StopEvent {"result":"42"}' in events
    assert await get_run(client, run_id).outputs() == ["42"]
    assert run_id in await _listed(served, "completed") and run_id not in await _listed(served, "waiting_for_input")


async def _listed(served: Served, status: str) -> list[str]:
    """The ids the runs list's status filter finds (a LlamaIndex run sets no search attribute)."""
    async with httpx.AsyncClient(timeout=60) as http:
        r = await http.get(f"{served.url}/api/runs", params={"status": status, "page_size": 200})
        assert r.status_code == 200, r.text
        return [row["id"] for row in r.json()["runs"]]


async def test_a_typed_answer_refused_an_event_sent_and_a_fork_in_the_browser(
    served: Served, page: Any, client: Any
) -> None:
    run_id = await _start(served, "tests.integration.llama_tools_app.ReviewWorkflow", {"topic": "kites"})
    await page.goto(f"{served.url}/#/run/{run_id}")
    box = page.locator('[data-request="input-1"]')
    await box.wait_for()
    await page.locator("#state").get_by_text('"topic": "kites"').wait_for()  # the store, as state
    # The form is the typed response's (Approval's fields and bounds).
    await box.get_by_label("Approved").check()
    await box.get_by_label("Score *").fill("9")
    await box.get_by_role("button", name="Send answer").click()
    assert "at most 5" in await box.locator('[data-error-for="score"]').inner_text()

    form = page.locator("#send-event form")
    await form.get_by_label("Event class").fill("Approvl")
    await form.get_by_label("Fields (JSON object)").fill('{"approved": true, "score": 2}')
    await form.get_by_role("button", name="Send event").click()
    alert = form.get_by_role("alert")
    await alert.get_by_text("is not one this run accepts").wait_for()  # the run's own refusal
    assert "tests.integration.llama_tools_app.Approval" in await alert.inner_text()

    # Fork from its context: a new run that goes on from where this one waits.
    fork_id = f"{run_id}-fork"
    page.once("dialog", lambda d: asyncio.ensure_future(d.accept(fork_id)))
    await page.locator('#checkpoints tr[data-checkpoint="now"] [data-action=fork]').click()
    await page.wait_for_url(f"**/#/run/{fork_id}")
    assert await page.locator('#checkpoints [data-action="reset"]').is_hidden()
    fork_form = page.locator("#send-event form")
    await fork_form.get_by_label("Event class").fill("Approval")
    await fork_form.get_by_label("Fields (JSON object)").fill('{"approved": false, "score": 2}')
    await fork_form.get_by_role("button", name="Send event").click()
    await page.locator("h1 .badge[data-status=completed]").wait_for()
    await page.locator("#outputs pre").wait_for()
    assert await page.locator("#outputs").inner_text() == '"rejected (2/5)"'

    source = get_run(client, run_id)
    assert (await source.status())["status"] == "waiting_for_input"  # untouched by the fork
    await source.respond("input-1", {"approved": True, "score": 5})
    assert await source.outputs() == ["approved (5/5)"]
