"""Record run histories for the replay tests.

    python -m tests.integration.record_histories [NAME ...]

New recordings go to ``tests/histories/patches_1/`` (runs recorded with the
``patches-1`` bundle marker every run records at its start today); the files
directly in ``tests/histories/`` were recorded by older versions and are never
written again: they prove that runs started then still replay. Re-record only
on purpose: a replay failure of a committed history means a change would break
executions that are running in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows import SqliteCheckpointStorage
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import (
    RunHandle,
    TemporalWorkflowsPlugin,
    get_run,
    send_or_start,
    start_dev_server,
    start_run,
)
from tests.integration import graphs, subgraphs

HISTORIES = Path(__file__).parents[1] / "histories"
RECORDED_INTO = HISTORIES / "patches_1"
"""Where new recordings go: runs that record the ``patches-1`` bundle (``temporal/_workflow/patches.py``)."""


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


async def drive_pin_waits(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """A run started from graph version B while only a worker of version A polls its queue: the local
    pinning is refused, the regular one waits until a worker of B comes; then both versions' workers poll
    while the run asks for a word and finishes on B's edges (a step that lands on A is refused, retried)."""
    from tests.integration.test_versioning import pending_id, version

    a, b = version("finish_a"), version("finish_b")
    target = client.service_client.config.target_host
    mixed = f"{queue}-mixed"
    client_a = await Client.connect(target, plugins=[TemporalWorkflowsPlugin([a])])
    client_b = await Client.connect(target, plugins=[TemporalWorkflowsPlugin([b])])
    async with Worker(client_a, task_queue=mixed):
        handle = await start_run(client_b, b, "topic", id=workflow_id, task_queue=mixed)
        while not (await handle.status())["warnings"]:
            await asyncio.sleep(0.1)
        async with Worker(client_b, task_queue=mixed):
            request_id = await pending_id(handle)
            await handle.respond(request_id, "word")
            assert (await handle.result())["outputs"] == ["finish_b:word"]
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


async def drive_answer_mid_step(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """Under concurrent load: eight runs at once, a reader polling every run's status and requests in a loop and
    an events reader on each, each run answered while its other branch's step runs (superstep 3; by update or
    signal, in turn), so the answer is taken at the boundary after it. The run recorded is the first."""
    from tests.integration import graphs

    ids = [workflow_id, *(f"{workflow_id}-{i}" for i in range(1, 8))]
    holds = {i: graphs.Hold(0) for i in ids}
    graphs.HOLDS.update(holds)
    handles = await asyncio.gather(
        *(start_run(client, graphs.answer_mid_step, f"topic {k}", id=i, task_queue=queue) for k, i in enumerate(ids))
    )
    stop = asyncio.Event()

    async def poll() -> int:
        polls = 0
        while not stop.is_set():
            for handle in handles:
                await handle.status()
                await handle.pending_requests()
                polls += 1
        return polls

    async def read(handle: RunHandle) -> int:
        return len([e async for e in handle.events()])

    async def answer(k: int, handle: RunHandle) -> dict[str, object]:
        hold = holds[handle.id]
        await asyncio.wait_for(hold.reached.wait(), 120)  # superstep 3 runs; the request of superstep 2 waits
        (asked,) = await handle.pending_requests()
        await handle.respond(asked.request_id, {"text": f"ok {k}"}, wait=k % 2 == 0)
        hold.release.set()
        return await handle.result()

    poller = asyncio.create_task(poll())
    readers = [asyncio.create_task(read(h)) for h in handles]
    try:
        results = await asyncio.gather(*(answer(k, h) for k, h in enumerate(handles)))
    finally:
        stop.set()
        assert await poller
    assert all(await asyncio.gather(*readers))
    for k, result in enumerate(results):
        assert result["outputs"] == [[f"polished draft of topic {k}", f"review=ok {k}"]], result
    for i in ids:
        graphs.HOLDS.pop(i, None)
    return handles[0]


async def drive_deliver_interrupt(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """As the AG-UI endpoint gives a thread's run its messages: a keep-alive, streamed run started by a
    delivered message (signal-with-start, confirmed), a second delivery with policy interrupt while the
    first one's step runs, the turns query saying which turn each message's work ended in, then close."""
    from temporal_workflows.ag_ui._graph import GraphKind
    from tests.conformance import scenarios as sc

    kind = GraphKind(sc.busy)
    first, second = f"a {workflow_id}", f"b {workflow_id}"
    assert await kind.deliver(client, workflow_id, first, f"{workflow_id}:1", task_queue=queue)
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, first).wait(), 60)
    assert await kind.deliver(client, workflow_id, second, f"{workflow_id}:2", task_queue=queue, policy="interrupt")
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, second).wait(), 60)
    sc.busy_gate(sc.GATES, second).set()
    handle = get_run(client, workflow_id)
    keys = [f"delivery:{workflow_id}:1", f"delivery:{workflow_id}:2"]
    async with asyncio.timeout(60):
        while True:
            turns = await kind.turns(client, workflow_id, keys)
            assert turns is not None
            if all(t is not None and t["done_at"] is not None for t in turns.values()):
                break
            await asyncio.sleep(0.05)
    interrupted, answered = (turns[k] for k in keys)
    assert interrupted["interrupted"] and not answered["interrupted"] and interrupted["done_at"] < answered["done_at"]
    await handle.close()
    await handle.result()
    return handle


async def drive_in_send_order(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """One sender's three messages to one executor, handled one after another (patch one-sender-in-order)."""
    from tests.conformance import scenarios

    handle = await start_run(client, scenarios.in_send_order, 3, id=workflow_id, task_queue=queue)
    await handle.result()
    return handle


async def drive_close_waits(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """close while two requests wait: the run refuses a new message and completes once both are answered (an
    update and a signal). Records the close-waits-for-pending-requests patch."""
    from temporal_workflows import WorkflowRunState
    from temporal_workflows.errors import RunClosedError
    from temporal_workflows.events import WorkflowStatusEvent

    handle = await start_run(client, graphs.two_questions, "bees", id=workflow_id, task_queue=queue, keep_alive=True)
    async for ev in handle.events():
        if isinstance(ev, WorkflowStatusEvent) and ev.state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS:
            break
    await handle.close()
    try:
        await handle.send("fan", "wasps")
        raise AssertionError("a closing run took a new message")
    except RunClosedError:
        pass
    first, second = sorted(await handle.pending_requests(), key=lambda r: r.source_executor_id)
    await handle.respond(first.request_id, {"text": "buzz"})
    await handle.respond(second.request_id, {"text": "hum"}, wait=False)
    await handle.result()
    return handle


async def drive_restore_superstep(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """A waiting run reset to its request's checkpoint runs a superstep with nothing to deliver, then is
    answered (patch superstep-after-restore; the execution after the reset is recorded)."""
    from tests.conformance import scenarios

    handle = await start_run(client, scenarios.paused, "bees", id=workflow_id, task_queue=queue, checkpoint_every=1)
    while not await handle.pending_requests():
        await asyncio.sleep(0.05)
    asked = next(c for c in await handle.checkpoints() if c["superstep"] == 1)
    await handle.reset(checkpoint_id=asked["checkpoint_id"])
    while not (pending := await handle.pending_requests()) or (await handle.status())["superstep"] < 2:
        await asyncio.sleep(0.05)
    await handle.respond(pending[0].request_id, scenarios.Answer(text="hum"))
    await handle.result()
    return handle


async def drive_paced_stream(client: Client, workflow_id: str, queue: str) -> RunHandle:
    """A streamed call of the durable twin paces its run, leaves the stream after superstep 2, and the run is
    cancelled where its reader left it (pacing.py)."""
    from temporal_workflows.events import SuperStepCompletedEvent
    from tests.conformance import scenarios

    twin = scenarios.resumable.on_temporal(client, id=workflow_id, task_queue=queue)
    events = twin.run(scenarios.Count(n=1, upto=6), stream=True)
    async for ev in events:
        if isinstance(ev, SuperStepCompletedEvent) and ev.superstep == 2:
            break
    await events.aclose()  # type: ignore[attr-defined]
    handle = twin.handle
    assert handle is not None
    with contextlib.suppress(Exception):
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
    # Recorded by the release whose runs record one marker for every patch (``patches-1``), before runs pinned
    # their starter's graph signature (``patches-2``): such runs keep replaying.
    "approval_patches_1": drive_approval,
    "subworkflow_nested_patches_1": drive_subworkflow,
    "pin_waits_for_its_graph": drive_pin_waits,
    "answer_mid_step_under_load": drive_answer_mid_step,
    "deliver_interrupt_keep_alive": drive_deliver_interrupt,
    "close_waits_for_answers": drive_close_waits,
    # Issue #39: the patches-2 bundle's behaviours.
    "in_send_order": drive_in_send_order,
    "restore_superstep": drive_restore_superstep,
    "paced_stream": drive_paced_stream,
}

AT_TOP = (
    "subworkflow_nested_shape",
    "approval_patches_1",
    "subworkflow_nested_patches_1",
    "pin_waits_for_its_graph",
    "in_send_order",
    "restore_superstep",
    "paced_stream",
)
"""Flows recorded at the top of ``tests/histories/``: ``subworkflow_nested_shape`` is ``subworkflow_nested``'s run,
recorded once a run kept its graph's shape; the ``*_patches_1`` ones with the first bundle of patches before runs
pinned their starter's graph; the others with the second bundle (``patches-2``)."""

RECORDED_NOW = [name for name in FLOWS if name not in AT_TOP]
"""The flows recorded into :data:`RECORDED_INTO`, with the ``patches-1`` bundle when they were recorded."""


LAST_EXECUTION = {"restore_superstep"}
"""Flows whose last execution is recorded (the one after a reset), not their first."""


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
            RECORDED_INTO.mkdir(exist_ok=True)
            for name in names or RECORDED_NOW:
                handle = await FLOWS[name](client, f"recorded-{name}", "record")
                # The first execution: for a run that continued as new, the part with the switch.
                run_id = None if name in LAST_EXECUTION else handle.handle.first_execution_run_id
                first = client.get_workflow_handle(handle.id, run_id=run_id)
                history = await first.fetch_history()
                path = (RECORDED_INTO if name in RECORDED_NOW else HISTORIES) / f"{name}.json"
                path.write_text(json.dumps(history.to_json_dict(), indent=1))
                print(f"wrote {path}")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
