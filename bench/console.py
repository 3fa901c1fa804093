"""The console under load: ``python -m bench.console [--runs 2000] [--events 10000] [--burst 500] [--readers 0,10,100]
[--sse-readers 1000] [--only list,events,crowd,sse] [--json]``.

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
3. **A crowd on one waiting run** (``--readers``): for each number of readers,
   a run asking five questions in turn is followed by console pages in
   Chromium, SSE clients of the console, ``temporal-workflows events``
   followers and programs of ``RunHandle.events()`` loops, each in processes
   of their own; then a checkpoint, and each answer (by the console's form
   route and by ``RunHandle.respond``), is timed from sending to accepted.
4. **A crowd of SSE readers on one running run** (``--sse-readers``): that
   many clients of the console's events route connect at once (from four
   processes) to a run streaming 2,000 live events over about 10 s; how many
   are served (not evicted), whether each gets every event and the end, and
   the console process's memory (RSS) before and at its peak.

Prints one line per figure and, with ``--json``, a JSON object last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
    """Events between two pauses; 0: no pause, one tight loop."""
    pause: float = 0.02


@executor(id="chatter")
async def chatter(chat: Chat, ctx: WorkflowContext[None, int]) -> None:
    for n in range(chat.count):
        await ctx.add_event(Tick(n=n))
        if chat.burst and n % chat.burst == chat.burst - 1:
            await asyncio.sleep(chat.pause)
    await ctx.yield_output(chat.count)


class Rounds(Executor):
    """Asks its question ``rounds`` times, one after another: a run that waits for people, again and again."""

    @handler
    async def ask(self, rounds: int, ctx: WorkflowContext) -> None:
        await ctx.request_info({"round": 1, "of": rounds}, Approval)

    @response_handler
    async def answered(self, q: dict[str, Any], a: Approval, ctx: WorkflowContext[None, int]) -> None:
        if q["round"] < q["of"]:
            await ctx.request_info({"round": q["round"] + 1, "of": q["of"]}, Approval)
        else:
            await ctx.yield_output(q["of"])


waiting = WorkflowBuilder(start_executor=Asker("ask"), name="bench_console_wait").build()
completed = WorkflowBuilder(start_executor=done, name="bench_console_done").build()
chatty = WorkflowBuilder(start_executor=chatter, name="bench_console_chatty").build()
rounds = WorkflowBuilder(start_executor=Rounds("asker"), name="bench_console_rounds").build()
ANSWERS = 5
"""Answers timed per crowd (one per round of the run)."""


async def _gather_in_batches(coros: list[Any], batch: int = 100) -> None:
    for i in range(0, len(coros), batch):
        await asyncio.gather(*coros[i : i + batch])


async def _count(client: Client, query: str) -> int:
    return (await client.count_workflows(query)).count


PARTS = ("list", "events", "crowd", "sse")


async def bench(
    runs: int,
    events: int,
    browser: bool,
    burst: int = BURST,
    *,
    only: tuple[str, ...] = PARTS,
    readers: tuple[int, ...] = (0, 10, 100),
    sse_readers: int = 1000,
) -> dict[str, Any]:
    report: dict[str, Any] = {"runs": runs, "events": events, "burst": burst, "load_average": _load()}
    chat = Chat(count=events, burst=burst)
    env = await start_dev_server()
    try:
        client = await Client.connect(
            env.client.service_client.config.target_host,
            plugins=[TemporalWorkflowsPlugin([waiting, completed, chatty, rounds], tracing=False)],
        )
        async with Worker(client, task_queue=QUEUE, max_concurrent_activities=200):
            if "list" not in only:
                runs = report["runs"] = 0
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
                "--workflow", "bench.console:rounds", stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert console.stdout is not None
            print((await asyncio.wait_for(console.stdout.readline(), 60)).decode().strip(), flush=True)
            url = f"http://127.0.0.1:{port}"
            try:
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    await http.get("/api/info")
                    for name, params in (
                        {}
                        if "list" not in only
                        else {
                            "first page, no filter": {},
                            "waiting for input": {"status": "waiting_for_input"},
                            "completed": {"status": "completed"},
                            "by graph": {"graph": "bench_console_wait"},
                            "by graph and status": {"graph": "bench_console_wait", "status": "waiting_for_input"},
                        }
                    ).items():
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
                    while "list" in only:
                        params = {"page_size": "200", "status": "waiting_for_input"}
                        if token:
                            params["next"] = token
                        page = (await http.get("/api/runs", params=params)).json()
                        seen += len(page["runs"])
                        pages += 1
                        token = page["next"]
                        if not token:
                            break
                    if "list" in only:
                        report["page_through_waiting_s"] = round(time.perf_counter() - t, 2)
                        report["page_through_waiting_count"] = seen
                        print(
                            f"every waiting run, {pages} pages of 200: {seen} runs in "
                            f"{report['page_through_waiting_s']} s"
                        )

                if "events" in only:
                    report.update(await _events_phase(client, url, events, chat, browser))
                if "crowd" in only:
                    for n in readers:
                        report.update(await crowd(client, url, address, n, browser))
                if "sse" in only:
                    report.update(await sse_crowd(client, url, console.pid, sse_readers))
            finally:
                console.terminate()
                await asyncio.wait_for(console.wait(), 30)
    finally:
        await env.shutdown()
    report["load_average_after"] = _load()
    return report


async def _events_phase(client: Client, url: str, events: int, chat: Chat, browser: bool) -> dict[str, Any]:
    """A run of ``events`` live events followed by the page, by a plain SSE reader, and read again once closed."""
    report: dict[str, Any] = {}
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
            await page.locator("#runs").wait_for()
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
    return report


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _rss_mb(pid: int) -> float:
    """The resident memory of process ``pid``, in MB (``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _mix(n: int) -> dict[str, int]:
    """``n`` readers as a team has them: console pages, SSE clients, CLI followers, programs of three loops each."""
    if n == 0:
        return {"pages": 0, "sse": 0, "cli": 0, "programs": 0, "loops": 0}
    pages = min(10, max(1, n // 10))
    cli = max(1, n // 10)
    programs = max(1, min(3, n // 10))
    loops = max(1, (n * 3 // 10) // programs)
    return {
        "pages": pages,
        "sse": max(0, n - pages - cli - programs * loops),
        "cli": cli,
        "programs": programs,
        "loops": loops,
    }


async def crowd(client: Client, url: str, address: str, n: int, browser: bool) -> dict[str, Any]:
    """A checkpoint and ``ANSWERS`` answers to one waiting run while ``n`` readers follow it (see the docstring)."""
    mix = _mix(n)
    handle = await start_run(client, rounds, ANSWERS, task_queue=QUEUE)
    procs: list[asyncio.subprocess.Process] = []
    pipe = asyncio.subprocess.PIPE
    try:
        while not await handle.pending_requests():
            await asyncio.sleep(0.1)
        for _ in range(mix["programs"]):
            procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.console_readers", "program", address, handle.id, str(mix["loops"]),
                stdout=pipe, stderr=pipe,
            ))  # fmt: skip
        if mix["sse"]:
            procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.console_readers", "sse", url, handle.id, str(mix["sse"]),
                stdout=pipe, stderr=pipe,
            ))  # fmt: skip
        for _ in range(mix["cli"]):
            procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "temporal_workflows", "--address", address, "events", handle.id, "--json",
                stdout=pipe, stderr=pipe,
            ))  # fmt: skip
        for proc in procs:  # every reader has its first event: the crowd is on the run
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 300)
            assert line, (await proc.stderr.read()) if proc.stderr else b""
        pages: list[Any] = []
        playwright: Any = None
        if mix["pages"] and browser and Path(CHROMIUM).exists():
            from playwright.async_api import async_playwright

            playwright = await async_playwright().start()
            b = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
            for _ in range(mix["pages"]):
                page = await b.new_page()
                await page.goto(f"{url}/#/run/{handle.id}")
                await page.locator("[data-request]").wait_for(timeout=120_000)
                pages.append(page)
        t = time.perf_counter()
        await handle.checkpoint("under a crowd")
        checkpoint_s = time.perf_counter() - t
        latencies = []
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            for i in range(ANSWERS):
                pending: list[Any] = []
                while not pending:
                    pending = await handle.pending_requests()
                (request,) = pending
                t = time.perf_counter()
                if i % 2:
                    await handle.respond(request.request_id, {"approved": True})
                else:
                    r = await http.post(
                        "/api/run/requests",
                        params={"id": handle.id, "request_id": request.request_id},
                        json={"response": {"approved": True}},
                        headers={"X-TW-Console": "1"},
                    )
                    assert r.status_code == 200, r.text
                latencies.append(time.perf_counter() - t)
        await handle.result()
        for proc in procs:
            await asyncio.wait_for(proc.wait(), 300)
            assert proc.returncode == 0, (await proc.stderr.read()).decode()[-2000:] if proc.stderr else ""
        for page in pages:
            await page.locator("#events-count", has_text="run closed").wait_for(timeout=120_000)
        if playwright is not None:
            await playwright.stop()
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    processes = len(procs) + 1  # and the console
    row = {
        f"crowd[{n}].readers": mix,
        f"crowd[{n}].processes": processes,
        f"crowd[{n}].checkpoint_s": round(checkpoint_s, 3),
        f"crowd[{n}].answer_median_s": round(statistics.median(latencies), 3),
        f"crowd[{n}].answer_max_s": round(max(latencies), 3),
    }
    print(
        f"{n} readers ({mix['pages']} pages, {mix['sse']} SSE clients, {mix['cli']} CLI followers, "
        f"{mix['programs']} programs x {mix['loops']} loops; {processes} processes): checkpoint {checkpoint_s:.2f} s, "
        f"answers median {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s (load {_load()})",
        flush=True,
    )
    return row


async def sse_crowd(client: Client, url: str, console_pid: int, readers: int) -> dict[str, Any]:
    """``readers`` SSE clients connecting at once to one running run (2,000 live events over about 10 s)."""
    rss_before = _rss_mb(console_pid)
    handle = await start_run(client, chatty, Chat(count=2000, burst=100, pause=0.5), task_queue=QUEUE)
    per = (readers + 3) // 4
    pipe = asyncio.subprocess.PIPE
    t0 = time.perf_counter()
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.console_readers", "sse", url, handle.id, str(min(per, readers - i * per)),
            stdout=pipe, stderr=pipe,
        )
        for i in range(4)
        if readers - i * per > 0
    ]  # fmt: skip
    peak = rss_before
    done = asyncio.gather(*(p.communicate() for p in procs))
    while not done.done():
        peak = max(peak, _rss_mb(console_pid))
        await asyncio.sleep(0.5)
    outs = await done
    t_all = time.perf_counter() - t0
    await handle.result()
    total = len([e async for e in handle.events()])
    statuses: dict[str, int] = {}
    counts: set[int] = set()
    ended = 0
    for out, _ in outs:
        summary = json.loads(out.decode().splitlines()[-1])
        for k, v in summary["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
        counts |= set(summary["events"])
        ended += summary["ended"]
    row = {
        "sse_crowd.readers": readers,
        "sse_crowd.statuses": statuses,
        "sse_crowd.every_event_to_each": counts == {total},
        "sse_crowd.ended": ended,
        "sse_crowd.seconds": round(t_all, 1),
        "sse_crowd.console_rss_mb_before": rss_before,
        "sse_crowd.console_rss_mb_peak": peak,
    }
    print(
        f"{readers} SSE readers of one running run ({total} events): statuses {statuses}, every event to each: "
        f"{counts == {total}}, {ended} saw the end, all done in {t_all:.1f} s; console RSS {rss_before} MB before, "
        f"{peak} MB at its peak (load {_load()})",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--burst", type=int, default=BURST, help="events between 20 ms pauses; 0: one tight loop")
    p.add_argument("--no-browser", action="store_true")
    p.add_argument("--readers", default="0,10,100", help="crowd sizes on one waiting run (comma-separated)")
    p.add_argument("--sse-readers", type=int, default=1000, help="SSE clients of one running run")
    p.add_argument("--only", default=",".join(PARTS), help=f"which parts, of {','.join(PARTS)}")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    only = tuple(x for x in args.only.split(",") if x)
    if not set(only) <= set(PARTS):
        p.error(f"--only: some of {', '.join(PARTS)}")
    readers = tuple(int(x) for x in args.readers.split(",") if x)
    report = asyncio.run(
        bench(
            args.runs,
            args.events,
            not args.no_browser,
            args.burst,
            only=only,
            readers=readers,
            sse_readers=args.sse_readers,
        )
    )
    if args.json:
        print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
