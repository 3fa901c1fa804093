"""A program that follows one run with several ``RunHandle.events()`` loops, as an app's process does.

    python -m tests.integration.readers_program ADDRESS WORKFLOW_ID READERS

Prints ``ready`` once every loop has its first event, then, when the run has closed, one JSON line per loop:
the types of the events it got, in order, and how many polls this process made of the run (one reader of a
run per process, however many loops read it).
"""

from __future__ import annotations

import asyncio
import json
import sys

from temporalio.client import Client

from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run
from temporal_workflows.temporal._client import feed


async def main(address: str, workflow_id: str, readers: int) -> None:
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin([], tracing=False)])
    handle = get_run(client, workflow_id)
    first = [asyncio.Event() for _ in range(readers)]
    polls: list[int] = []

    async def read(i: int) -> list[str]:
        types: list[str] = []
        async for event in handle.events():
            types.append(event.type)
            first[i].set()
            for f in feed._feeds.values():
                polls.append(f.polls)
        return types

    tasks = [asyncio.create_task(read(i)) for i in range(readers)]
    await asyncio.gather(*(f.wait() for f in first))
    print("ready", flush=True)
    results = await asyncio.gather(*tasks)
    for types in results:
        print(json.dumps({"types": types, "polls": max(polls or [0])}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
