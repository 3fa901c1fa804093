"""The console under load: ``python -m bench.console [--runs 2000] [--events 10000] [--burst 500] [--json]``.

On a dev server of its own (started here, on free ports), with a worker in
this process and ``temporal-workflows console`` in another, as a user runs it:

1. ``--runs`` runs, half left waiting for input and half completed, then the
   runs list through the console's JSON route: the first page unfiltered and
   under each filter, and every page (200 a page) until the list ends.
2. A run publishing ``--events`` live events from one step (in bursts of
   ``--burst``, 500 by default; ``--burst 0``: one tight loop), followed by
   the console's page in headless Chromium (the system browser): when the
   page has shown every event and the run's end, against when the run
   completed, and the events' rate through the page.

Prints one line per figure and, with ``--json``, a JSON object last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import Executor, WorkflowBuilder, WorkflowContext, executor, handler, response_handler
from temporal_workflows._live import LiveEvent
from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_dev_server, start_run

QUEUE = "bench-console"
CHROMIUM = "/usr/bin/chromium"


class Approval(BaseModel):
    approved: bool


class Asker(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info({"topic": topic}, Approval)

    @response_handler
    async def answered(self, q: dict[str, Any], a: Approval, ctx: WorkflowContext[None, bool]) -> None:
        await ctx.yield_output(a.approved)


@executor(id="done")
async def done(topic: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(topic)


class Tick(LiveEvent):
    """One live event: never merged with the next, so every one travels."""

    type: str = "tick"
    n: int = 0


BURST = 500
"""Events published back to back before a 20 ms pause, by default; ``--burst 0``: all in one tight loop (the
step's live batches are bounded, so none is dropped: ``_live_publisher``)."""


class Chat(BaseModel):
    count: int
    burst: int = BURST
    """Events between two 20 ms pauses; 0: no pause, one tight loop."""


@executor(id="chatter")
async def chatter(chat: Chat, ctx: WorkflowContext[None, int]) -> None:
    for n in range(chat.count):
        await ctx.add_event(Tick(n=n))
        if chat.burst and n % chat.burst == chat.burst - 1:
            await asyncio.sleep(0.02)
    await ctx.yield_output(chat.count)


waiting = WorkflowBuilder(start_executor=Asker("ask"), name="bench_console_wait").build()
completed = WorkflowBuilder(start_executor=done, name="bench_console_done").build()
chatty = WorkflowBuilder(start_executor=chatter, name="bench_console_chatty").build()


async def _gather_in_batches(coros: list[Any], batch: int = 100) -> None:
    for i in range(0, len(coros), batch):
        await asyncio.gather(*coros[i : i + batch])


async def _count(client: Client, query: str) -> int:
    return (await client.count_workflows(query)).count


async def bench(runs: int, events: int, browser: bool, burst: int = BURST) -> dict[str, Any]:
    report: dict[str, Any] = {"runs": runs, "events": events, "burst": burst}
    chat = Chat(count=events, burst=burst)
    env = await start_dev_server()
    try:
        client = await Client.connect(
            env.client.service_client.config.target_host,
            plugins=[TemporalWorkflowsPlugin([waiting, completed, chatty], tracing=False)],
        )
        async with Worker(client, task_queue=QUEUE, max_concurrent_activities=200):
            t0 = time.perf_counter()
            half = runs // 2
            await _gather_in_batches(
                [start_run(client, waiting, f"w{i}", task_queue=QUEUE) for i in range(half)]
                + [start_run(client, completed, f"c{i}", task_queue=QUEUE) for i in range(runs - half)]
            )
            wait_q = "WorkflowType = 'bench_console_wait' AND GraphRunStatus = 'waiting_for_input'"
            done_q = "WorkflowType = 'bench_console_done' AND ExecutionStatus = 'Completed'"
            async with asyncio.timeout(900):
                while await _count(client, wait_q) < half or await _count(client, done_q) < runs - half:
                    await asyncio.sleep(1)
            report["setup_s"] = round(time.perf_counter() - t0, 1)
            print(f"{runs} runs made in {report['setup_s']} s ({half} waiting for input)", flush=True)

            # The console as a user runs it: its own process (its decoding never shares a loop with the worker).
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            address = env.client.service_client.config.target_host
            console = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "temporal_workflows", "--address", address, "console", "--port", str(port),
                "--task-queue", QUEUE, "--workflow", "bench.console:waiting", "--workflow", "bench.console:chatty",
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert console.stdout is not None
            print((await asyncio.wait_for(console.stdout.readline(), 60)).decode().strip(), flush=True)
            url = f"http://127.0.0.1:{port}"
            try:
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    await http.get("/api/info")
                    for name, params in {
                        "first page, no filter": {},
                        "waiting for input": {"status": "waiting_for_input"},
                        "completed": {"status": "completed"},
                        "by graph": {"graph": "bench_console_wait"},
                        "by graph and status": {"graph": "bench_console_wait", "status": "waiting_for_input"},
                    }.items():
                        times = []
                        for _ in range(5):
                            t = time.perf_counter()
                            r = await http.get("/api/runs", params={**params, "page_size": "50"})
                            times.append(time.perf_counter() - t)
                            assert r.status_code == 200 and r.json()["runs"], r.text
                        ms = round(statistics.median(times) * 1000, 1)
                        report[f"list_ms[{name}]"] = ms
                        print(f"runs list, {name}: {ms} ms (median of 5, 50 a page)", flush=True)
                    t = time.perf_counter()
                    seen, token, pages = 0, None, 0
                    while True:
                        params = {"page_size": "200", "status": "waiting_for_input"}
                        if token:
                            params["next"] = token
                        page = (await http.get("/api/runs", params=params)).json()
                        seen += len(page["runs"])
                        pages += 1
                        token = page["next"]
                        if not token:
                            break
                    report["page_through_waiting_s"] = round(time.perf_counter() - t, 2)
                    report["page_through_waiting_count"] = seen
                    print(
                        f"every waiting run, {pages} pages of 200: {seen} runs in {report['page_through_waiting_s']} s"
                    )

                if browser and Path(CHROMIUM).exists():
                    from playwright.async_api import async_playwright

                    async with async_playwright() as p:
                        b = await p.chromium.launch(
                            executable_path=CHROMIUM,
                            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                        )
                        page = await b.new_page()
                        # The page is open (as a person keeps it), then the run starts and the page goes to it.
                        await page.goto(f"{url}/#/")
                        await page.locator("#runs tbody tr").first.wait_for()
                        handle = await start_run(client, chatty, chat, task_queue=QUEUE)
                        t_start = time.perf_counter()
                        await page.evaluate(f"location.hash = '#/run/{handle.id}'")
                        result_task = asyncio.create_task(handle.result())
                        await result_task
                        t_run = time.perf_counter() - t_start
                        await page.locator("#events-count", has_text="run closed").wait_for(timeout=300_000)
                        t_page = time.perf_counter() - t_start
                        shown = int(await page.locator("#events-count").get_attribute("data-count") or 0)
                        await b.close()
                    report["events_run_s"] = round(t_run, 2)
                    report["events_page_s"] = round(t_page, 2)
                    report["events_page_lag_s"] = round(t_page - t_run, 2)
                    report["events_shown"] = shown
                    print(
                        f"{events} live events: the run completed in {t_run:.2f} s; the page showed all {shown} events "
                        f"and the run's end at {t_page:.2f} s ({t_page - t_run:+.2f} s after the run; "
                        f"{shown / t_page:.0f} events/s through the page)",
                        flush=True,
                    )
                else:
                    handle = await start_run(client, chatty, chat, task_queue=QUEUE)
                    await handle.result()

                # The same, followed by a plain SSE reader instead of the page (what the browser adds).
                second = await start_run(client, chatty, chat, task_queue=QUEUE)
                t_start = time.perf_counter()
                followed, t_done = 0, asyncio.get_running_loop().create_future()

                async def follow() -> None:
                    nonlocal followed
                    async with (
                        httpx.AsyncClient(base_url=url, timeout=300) as http,
                        http.stream("GET", f"/api/runs/{second.id}/events") as resp,
                    ):
                        async for line in resp.aiter_lines():
                            if line.startswith("data:") and line[5:].strip().startswith("["):
                                followed += len(json.loads(line[5:]))
                    t_done.set_result(time.perf_counter() - t_start)

                follower = asyncio.create_task(follow())
                await second.result()
                t_run = time.perf_counter() - t_start
                await follower
                report["events_sse_live_lag_s"] = round(t_done.result() - t_run, 2)
                print(
                    f"{events} live events followed by a plain SSE reader: run {t_run:.2f} s, reader done at "
                    f"{t_done.result():.2f} s ({followed} events, {report['events_sse_live_lag_s']:+.2f} s)",
                    flush=True,
                )

                # Where the time goes, on the closed run: the client layer alone, then through the console's SSE.
                t = time.perf_counter()
                direct = 0
                async for _ in handle.events():
                    direct += 1
                report["events_client_read_s"] = round(time.perf_counter() - t, 2)
                t = time.perf_counter()
                through = 0
                async with (
                    httpx.AsyncClient(base_url=url, timeout=120) as http,
                    http.stream("GET", f"/api/runs/{handle.id}/events") as resp,
                ):
                    async for line in resp.aiter_lines():
                        if line.startswith("data:") and line[5:].strip().startswith("["):
                            through += len(json.loads(line[5:]))
                report["events_sse_read_s"] = round(time.perf_counter() - t, 2)
                print(
                    f"the closed run's {direct} events read again: "
                    f"RunHandle.events() {report['events_client_read_s']} s, "
                    f"the console's SSE ({through} events) {report['events_sse_read_s']} s",
                    flush=True,
                )
            finally:
                console.terminate()
                await asyncio.wait_for(console.wait(), 30)
    finally:
        await env.shutdown()
    return report


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--burst", type=int, default=BURST, help="events between 20 ms pauses; 0: one tight loop")
    p.add_argument("--no-browser", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    report = asyncio.run(bench(args.runs, args.events, not args.no_browser, args.burst))
    if args.json:
        print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
