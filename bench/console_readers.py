"""Readers of one run in a process of their own, for ``python -m bench.console``'s crowds.

python -m bench.console_readers program ADDRESS WORKFLOW_ID LOOPS
    LOOPS ``RunHandle.events()`` loops in this process (an app's); prints ``ready`` once each has an event,
    then one JSON line when the run has closed: events per loop.
python -m bench.console_readers sse CONSOLE_URL WORKFLOW_ID COUNT
    COUNT server-sent-event clients of the console's events route, connecting at once; prints ``ready`` when
    every one has its first message, then one JSON line: their HTTP statuses and events per client.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from typing import Any

import httpx
from temporalio.client import Client

from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run


async def program(address: str, workflow_id: str, loops: int) -> None:
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin([], tracing=False)])
    handle = get_run(client, workflow_id)
    firsts = [asyncio.Event() for _ in range(loops)]

    async def read(i: int) -> int:
        n = 0
        async for _ in handle.events():
            n += 1
            firsts[i].set()
        return n

    tasks = [asyncio.create_task(read(i)) for i in range(loops)]
    await asyncio.gather(*(f.wait() for f in firsts))
    print("ready", flush=True)
    print(json.dumps({"events": await asyncio.gather(*tasks)}), flush=True)


async def sse(url: str, workflow_id: str, count: int) -> None:
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=0)
    firsts = [asyncio.Event() for _ in range(count)]
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600, connect=120), limits=limits) as http:

        async def read(i: int) -> tuple[int, int, bool]:
            events, ended = 0, False
            try:
                async with http.stream("GET", "/api/run/events", params={"id": workflow_id}) as resp:
                    if resp.status_code != 200:
                        firsts[i].set()
                        return resp.status_code, 0, False
                    kind = ""
                    async for line in resp.aiter_lines():
                        if line.startswith("event:"):
                            kind = line[6:].strip()
                        elif line.startswith("data:") and kind == "events":
                            events += line.count('"class"')  # every event's JSON names its class once
                            firsts[i].set()
                        elif line.startswith("data:") and kind == "end":
                            ended = True
                            break
                return 200, events, ended
            except httpx.HTTPError as e:
                firsts[i].set()
                return -1 if not isinstance(e, httpx.RemoteProtocolError) else -2, events, ended

        tasks = [asyncio.create_task(read(i)) for i in range(count)]
        await asyncio.gather(*(f.wait() for f in firsts))
        print("ready", flush=True)
        results = await asyncio.gather(*tasks)
    statuses: Counter[int] = Counter(status for status, _, _ in results)
    report: dict[str, Any] = {
        "statuses": {str(k): v for k, v in statuses.items()},
        "events": sorted({n for _, n, _ in results}),
        "ended": sum(1 for _, _, ended in results if ended),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    mode, where, workflow_id, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    asyncio.run(program(where, workflow_id, n) if mode == "program" else sse(where, workflow_id, n))
