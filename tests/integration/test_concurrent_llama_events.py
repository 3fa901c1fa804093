"""Many LlamaIndex ``send_event`` calls at once: each event counted once, and the history replays.

Issue #23, item 1: 1,000 concurrent ``send_event`` calls wedged a run (the same
unreplayable history as concurrent ``RunHandle.send``), most callers got raw
``RPCError``s (``consistent query buffer is full``, ``in-flight updates``), and
one run counted more events than were acknowledged. ``send_event`` is built
on the run handle's query and updates, which now retry what is refused for
load (see test_concurrent_input.py).
"""

from __future__ import annotations

import asyncio
import uuid

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows.llama import Context, Event, StartEvent, StopEvent, Workflow, step
from temporal_workflows.llama import start_run as start_llama_run
from temporal_workflows.temporal import TemporalWorkflowsPlugin
from tests.integration.test_replay import _replayer

SENDERS = 200


class Ping(Event):
    n: int


class Seen(BaseModel):
    pings: list[int] = []


class PingCounter(Workflow):
    """Counts the pings sent to it from outside, one at a time; stops with what it saw at the last one.

    (Stopping on a separate event sent after the last acknowledgement would race
    the pings still queued: an acknowledged event is accepted, not yet processed,
    and a ``StopEvent`` ends a LlamaIndex run with what is queued left unprocessed.)
    """

    @step
    async def start(self, ev: StartEvent) -> Ping | None:
        return None  # the pings come from outside (send_event)

    @step(num_workers=1)
    async def ping(self, ctx: Context[Seen], ev: Ping) -> StopEvent | None:
        async with ctx.store.edit_state() as seen:
            seen.pings.append(ev.n)
        if len(seen.pings) < SENDERS:
            return None
        return StopEvent(result=sorted(seen.pings))


async def test_concurrent_llama_events_are_each_counted_once_and_the_history_replays(temporal_address: str) -> None:
    counter = PingCounter(timeout=600)
    queue = f"llama-concurrent-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address, plugins=[TemporalWorkflowsPlugin([counter])])
    async with Worker(client, task_queue=queue):
        run = await start_llama_run(client, counter, task_queue=queue)
        sent = await asyncio.gather(*(run.send_event(Ping(n=i)) for i in range(SENDERS)), return_exceptions=True)
        failed = [e for e in sent if isinstance(e, BaseException)]
        assert not failed, [(repr(e), repr(e.__cause__), repr(getattr(e.__cause__, "cause", None))) for e in failed[:3]]
        # Each ping counted once: the run stops at the 200th it processes, with all of them.
        result = await asyncio.wait_for(run.run.result(), 120)
    assert result["outputs"] == [{"result": list(range(SENDERS))}]
    history = await run.run.handle.fetch_history()
    replayed = await _replayer("unsandboxed").replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, str(replayed.replay_failure)[:300]
