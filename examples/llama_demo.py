"""The LlamaIndex-style examples, in process and on Temporal (called by ``examples.demo``).

The same workflow instances run both ways: ``Workflow.run()`` in process,
and, hosted by ``TemporalWorkflowsPlugin(WORKFLOWS)``, ``start_run`` on a
worker, where each step is an activity ``<workflow>.<step>``.
"""

from __future__ import annotations

from temporalio.client import Client

from examples import llama_fanout, llama_hitl, llama_loop
from temporal_workflows.llama import InputRequiredEvent, start_run

WORKFLOWS = [llama_loop.DraftLoop(timeout=60), llama_fanout.Research(timeout=60), llama_hitl.Approval(timeout=600)]
"""What a worker hosts for the demo (their workflow types: the class names)."""


async def in_process() -> None:
    loop, fanout, hitl = WORKFLOWS
    print(f"[DraftLoop] result: {await loop.run(**llama_loop.SAMPLE)}")
    print(f"[Research] result:\n{await fanout.run(**llama_fanout.SAMPLE)}")
    handler = hitl.run(**llama_hitl.SAMPLE)
    async for ev in handler.stream_events():
        if isinstance(ev, InputRequiredEvent):
            handler.ctx.send_event(llama_hitl.auto_answer(ev))
    print(f"[Approval] result: {await handler}")


async def on_temporal(client: Client, task_queue: str) -> None:
    loop, fanout, hitl = WORKFLOWS
    for wf, sample in ((loop, llama_loop.SAMPLE), (fanout, llama_fanout.SAMPLE)):
        run = await start_run(client, wf, task_queue=task_queue, **sample)
        print(f"\n[{type(wf).__name__}] started workflow {run.id}")
        async for ev in run.events():
            print(f"  {type(ev).__name__}: {ev!r}")
        print(f"[{type(wf).__name__}] result: {await run.result()}")
    run = await start_run(client, hitl, task_queue=task_queue, **llama_hitl.SAMPLE)
    print(f"\n[Approval] started workflow {run.id}; it waits for a human, played here by the client")
    async for ev in run.events():
        if isinstance(ev, InputRequiredEvent):
            answer = llama_hitl.auto_answer(ev)
            print(f"  {ev.prefix}{answer.response}")
            await run.send_event(answer)
    print(f"[Approval] result: {await run.result()}")
