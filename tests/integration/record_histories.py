"""Record run histories into tests/histories/ for the replay tests.

    python -m tests.integration.record_histories [NAME ...]

Re-record only on purpose: a replay failure of a committed history means a
change would break executions that are running in production. Histories
recorded by older versions stay, so the replay tests keep checking them.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import SqliteCheckpointStorage
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, send_or_start, start_dev_server, start_run
from tests.integration import graphs, subgraphs

HISTORIES = Path(__file__).parents[1] / "histories"


async def drive_example(client: Client, name: str, workflow_id: str, queue: str) -> RunHandle:
    module = importlib.import_module(f"examples.{name}")
    handle = await start_run(client, module.workflow, module.SAMPLE_INPUT, id=workflow_id, task_queue=queue)
    await handle.result()
    return handle


async def drive_approval(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """Human input every way: a bad signal (warning), an update, a signal."""
    from examples import approval

    handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=workflow_id, task_queue=queue)
    answered = 0
    async for ev in handle.events():
        if isinstance(ev, RequestInfoEvent):
            if answered == 0:
                await handle.respond(ev.request_id, {"approved": "maybe"}, wait=False)
                await handle.respond(ev.request_id, approval.auto_answer(ev))
            else:
                await handle.respond(ev.request_id, approval.auto_answer(ev), wait=False)
            answered += 1
    await handle.result()
    return handle


async def drive_chat(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """A keep-alive conversation: update-with-start, signal-with-start, close."""
    await send_or_start(client, graphs.conversation, "hello", id=workflow_id, task_queue=queue)
    handle = await send_or_start(client, graphs.conversation, "again", id=workflow_id, task_queue=queue, wait=False)
    async for ev in handle.events():
        if getattr(ev, "data", None) == "#2: AGAIN":
            await handle.close()
    await handle.result()
    return handle


async def drive_checkpoint_reset(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """Automatic checkpoints, a labelled one, then a reset to the first while a step runs."""
    hold = graphs.Hold(4)
    graphs.HOLDS[workflow_id] = hold
    handle = await start_run(
        client, graphs.ticker, graphs.Count(n=1, upto=5), id=workflow_id, task_queue=queue, checkpoint_every=2
    )
    await hold.reached.wait()
    await handle.checkpoint("signalled", wait=False)
    first = (await handle.checkpoints())[0]["checkpoint_id"]
    await handle.reset(checkpoint_id=first)
    hold.release.set()
    await handle.result()
    return handle


async def drive_subworkflow(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """Nested sub-workflows: the innermost child's request propagated out, answered, and back in."""
    from temporal_workflows import WorkflowRunState
    from temporal_workflows.events import WorkflowStatusEvent
    from tests.integration import subgraphs

    handle = await start_run(client, subgraphs.nested, "bees", id=workflow_id, task_queue=queue)
    async for ev in handle.events():
        if isinstance(ev, WorkflowStatusEvent) and ev.state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS:
            (asked,) = await handle.pending_requests()
            await handle.respond(asked.request_id, {"text": "hum"})
    await handle.result()
    return handle


async def drive_checkpoint_hooks(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """Agent Framework parity: the checkpoint before the first superstep, an executor's checkpoint hooks,
    per-step event order, then a reset to the checkpoint after superstep 2 and the answer."""
    from tests.conformance import scenarios

    handle = await start_run(client, scenarios.hooked, 4, id=workflow_id, task_queue=queue, checkpoint_every=1)
    answered = reset = False
    async for ev in handle.events():
        if not isinstance(ev, RequestInfoEvent):
            continue
        if not reset:
            reset = True
            second = next(c for c in await handle.checkpoints() if c["superstep"] == 2)
            await handle.reset(checkpoint_id=second["checkpoint_id"])
        elif not answered:
            answered = True
            await handle.respond(ev.request_id, scenarios.Answer(text="yes"))
    await handle.result()
    return handle


async def drive_concurrent_updates(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """12 concurrent sends (updates) and 2 signals while the status is queried (issue #23 item 1: queries
    moved a local activity's result past new updates; the run now refuses updates meanwhile, RunBusyError)."""
    handle = await start_run(client, graphs.collector, "first", id=workflow_id, task_queue=queue, keep_alive=True)
    stop = asyncio.Event()

    async def query() -> None:
        while not stop.is_set():
            await handle.status()

    poller = asyncio.create_task(query())
    await asyncio.gather(
        *(handle.send("collect", f"m{i}") for i in range(12)),
        *(handle.send("collect", f"s{i}", wait=False) for i in range(2)),
    )
    stop.set()
    await poller
    await handle.close()
    await handle.result()
    return handle


async def drive_concurrent_input(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """A message that rolls a busy run's turn back (its running superstep cancelled), then one that interrupts
    the next turn's superstep, and a reject refused (docs/concurrent-input.md; patch concurrent-input-policy)."""
    from temporal_workflows.errors import RunInProgressError
    from tests.conformance import scenarios as sc

    sc.GATES.clear()
    sc.STARTED.clear()
    handle = await start_run(client, sc.busy, "a", id=workflow_id, task_queue=queue)
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, "a").wait(), 60)
    await handle.send("busy_note", "b", policy="rollback")
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, "b").wait(), 60)
    try:
        await handle.send("busy_note", "x", policy="reject")
        raise AssertionError("a busy run took a message whose policy is reject")
    except RunInProgressError:
        pass  # refused, as the policy asks
    await handle.send("busy_note", "c", policy="interrupt")
    sc.busy_gate(sc.GATES, "c").set()
    await handle.result()
    return handle


FLOWS: dict[str, Callable[[Client, str, str], Awaitable[RunHandle]]] = {
    "research": lambda c, i, q: drive_example(c, "research", i, q),
    "counter_loop": lambda c, i, q: drive_example(c, "counter_loop", i, q),
    "approval_signals_and_updates": drive_approval,
    "chat_keep_alive": drive_chat,
    "checkpoint_reset": drive_checkpoint_reset,
    "subworkflow_nested": drive_subworkflow,
    "checkpoint_hooks": drive_checkpoint_hooks,
    "concurrent_updates": drive_concurrent_updates,
    "concurrent_input_rollback_interrupt": drive_concurrent_input,
    # The same run once runs keep their graph's shape with the pinned topology (the ``topology`` query).
    "subworkflow_nested_shape": drive_subworkflow,
}


async def main(names: list[str]) -> None:
    env = await start_dev_server()
    try:
        target = env.client.service_client.config.target_host
        storage = SqliteCheckpointStorage(":memory:")
        from tests.conformance import scenarios

        client = await Client.connect(
            target,
            plugins=[
                TemporalWorkflowsPlugin(
                    [*graphs.all_workflows(), *subgraphs.all_workflows(), *scenarios.all_workflows()],
                    checkpoint_storage=storage,
                )
            ],
        )
        async with Worker(client, task_queue="record"):
            for name in names or list(FLOWS):
                handle = await FLOWS[name](client, f"recorded-{name}", "record")
                # The first execution: for a run that continued as new, the part with the switch.
                first = client.get_workflow_handle(handle.id, run_id=handle.handle.first_execution_run_id)
                history = await first.fetch_history()
                path = HISTORIES / f"{name}.json"
                path.write_text(json.dumps(history.to_json_dict(), indent=1))
                print(f"wrote {path}")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
