"""``python -m bench.large_values [MB]``: a document of MB megabytes (default 100) through a five-step graph on a
real dev server, large values kept by reference in a directory store (the defaults: 256 KiB threshold).

Prints the run's wall time, its history's size (the bytes of its events), the number of stored references in
history and the store's size, and checks the result (sizes and digests). The graph is
``tests/integration/large_value_graphs.py``'s ``lv_document``: the document is made by the first step, kept in
state, sent through three steps that each append to it, and read by the last from its message and from state.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_dev_server, start_run
from temporal_workflows.temporal._storage import FileStorageDriver, LargeValues
from tests.integration import large_value_graphs as lvg


async def main(megabytes: int) -> None:
    size = megabytes * 1_000_000
    env = await start_dev_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "values"
            plugin = TemporalWorkflowsPlugin(
                lvg.all_workflows(),
                large_values=LargeValues(FileStorageDriver(store)),
                tracing=False,
                checkpoint_storage=None,
            )
            client = await Client.connect(env.client.service_client.config.target_host, plugins=[plugin])
            async with Worker(client, task_queue="bench-large-values", max_concurrent_activities=4):
                started = time.perf_counter()
                handle = await start_run(client, lvg.document, size, task_queue="bench-large-values")
                result = await handle.result()
                elapsed = time.perf_counter() - started
            (out,) = result["outputs"]
            assert out["state_bytes"] == size and out["message_bytes"] == size + len("|first|second|third")
            history = await client.get_workflow_handle(handle.id).fetch_history()
            history_bytes = sum(e.ByteSize() for e in history.events)
            stored = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
            files = sum(1 for p in store.rglob("*") if p.is_file())
            load = os.getloadavg()
            print(f"document: {size:,} bytes through 5 steps (lv_document), directory store, threshold 256 KiB")
            print(f"wall time: {elapsed:.1f} s")
            print(f"history: {len(history.events)} events, {history_bytes:,} bytes")
            print(f"store: {files} stored payloads, {stored:,} bytes")
            print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
