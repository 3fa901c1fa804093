"""Plain-SDK reproduction of the replay failure behind issue #23 item 1 (temporalio 1.35, dev server 1.9.1).

An update handler runs a local activity; 100 updates are sent at once while two
loops query the workflow. A query that arrives while a local activity runs makes
sdk-core complete the workflow task with the activity's marker and hand its
result to the workflow only in the next activation, after that task's new
updates, so history records "update B accepted" before "update A completed";
a replay resolves the activity inside its own task and fails:

    UpdateMachine in state CompletedCommandCreated says the transition is invalid
    during event ... WorkflowExecutionUpdateAccepted

The live run then fails the same way on its next workflow task after a worker
restart, and every update and query is refused ("Workflow Task in failed state").
Measured: 3 of 3 histories unreplayable; without the query loops, 0 of 4. The
project's workaround is temporal_workflows/temporal/_workflow/locals.py. Not a test (it
shows an SDK bug, so it fails by design); run it by hand:

    .venv/bin/python -m tests.integration.sdk_update_local_activity_repro
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import WorkflowHandle
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker

from temporal_workflows.temporal import start_dev_server

RUNNER = UnsandboxedWorkflowRunner()


@activity.defn
async def check(x: str) -> str:
    return x


@workflow.defn
class Inbox:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.done)
        return len(self.items)

    @workflow.update
    async def put(self, x: str) -> int:
        checked: str = await workflow.execute_local_activity(check, x, start_to_close_timeout=timedelta(seconds=10))
        self.items.append(checked)
        return len(self.items)

    @workflow.query
    def count(self) -> int:
        return len(self.items)

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def _poll(handle: WorkflowHandle[Inbox, int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            await handle.query(Inbox.count)


async def main(rounds: int = 3, senders: int = 100) -> None:
    env = await start_dev_server()
    client = env.client
    failures = 0
    try:
        for _ in range(rounds):
            queue = f"repro-{uuid.uuid4().hex[:6]}"
            async with Worker(client, task_queue=queue, workflows=[Inbox], activities=[check], workflow_runner=RUNNER):
                handle = await client.start_workflow(Inbox.run, id=f"repro-{uuid.uuid4().hex[:6]}", task_queue=queue)
                stop = asyncio.Event()
                pollers = [asyncio.create_task(_poll(handle, stop)) for _ in range(2)]
                # (Some are refused for load, "in-flight updates (10)": the replay is what this shows.)
                updates = (handle.execute_update(Inbox.put, f"m{i}") for i in range(senders))
                await asyncio.gather(*updates, return_exceptions=True)
                stop.set()
                await asyncio.gather(*pollers)
                await handle.signal(Inbox.finish)
            history = await handle.fetch_history()
            result = await Replayer(workflows=[Inbox], workflow_runner=RUNNER).replay_workflow(
                history, raise_on_replay_failure=False
            )
            failed = result.replay_failure is not None
            failures += failed
            print("replay:", str(result.replay_failure)[:200] if failed else "OK")
    finally:
        await env.shutdown()
    print(f"unreplayable: {failures} of {rounds}")


if __name__ == "__main__":
    asyncio.run(main())
