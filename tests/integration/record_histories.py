"""Record example run histories into tests/histories/ for the replay tests.

    python -m tests.integration.record_histories

Re-record only on purpose: a replay failure of a committed history means a
change would break executions that are running in production.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_dev_server, start_run
from tests.integration.graphs import all_workflows

HISTORIES = Path(__file__).parents[1] / "histories"
RECORDED = ["research", "counter_loop"]


async def main() -> None:
    env = await start_dev_server()
    try:
        target = env.client.service_client.config.target_host
        client = await Client.connect(target, plugins=[TemporalWorkflowsPlugin(all_workflows())])
        async with Worker(client, task_queue="record"):
            for name in RECORDED:
                module = importlib.import_module(f"examples.{name}")
                handle = await start_run(
                    client, module.workflow, module.SAMPLE_INPUT, id=f"recorded-{name}", task_queue="record"
                )
                await handle.result()
                history = await handle.handle.fetch_history()
                path = HISTORIES / f"{name}.json"
                path.write_text(json.dumps(history.to_json_dict(), indent=1))
                print(f"wrote {path}")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
