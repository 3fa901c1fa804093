"""A second message while a run is busy, on Temporal: the concurrent-input policies, with an agent streaming.

The in-process side is tests/test_concurrent_input.py; both graph hosts are compared event for event in
tests/conformance/test_conformance.py (``test_a_message_that_interrupts_a_busy_run_reads_the_same_on_both_hosts``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError

from temporal_workflows.errors import InvalidRunInputError, RunInProgressError
from temporal_workflows.events import WorkflowInterruptedEvent, WorkflowOutputEvent, WorkflowWarningEvent
from temporal_workflows.temporal import RunHandle, start_run
from temporal_workflows.temporal._protocol import UPDATE_SEND
from tests.conftest import TASK_QUEUE
from tests.integration.agent_graphs import AVAILABLE, GRAPHS
from tests.integration.cli import run_cli

pytestmark = [
    pytest.mark.usefixtures("worker"),
    pytest.mark.skipif(not AVAILABLE, reason="needs the agents extra"),
]


def _words(events: list[Any]) -> str:
    """Every piece of text the events carry, as JSON (to look for the story's words)."""
    return json.dumps([e.model_dump(mode="json", fallback=str) for e in events], default=str)


async def _streaming(handle: RunHandle, seen: list[Any], pieces: int = 5) -> asyncio.Task[None]:
    """Read the run's live events into ``seen``; return once the agent has streamed ``pieces`` of its story."""
    from temporal_workflows._live import LiveEvent

    ready = asyncio.Event()

    async def read() -> None:
        async for ev in handle.events():
            seen.append(ev)
            if isinstance(ev, LiveEvent) and sum(isinstance(e, LiveEvent) for e in seen) >= pieces:
                ready.set()

    task = asyncio.ensure_future(read())
    await asyncio.wait_for(ready.wait(), 60)
    return task


@pytest.mark.parametrize("policy", ["interrupt", "rollback"])
async def test_an_agent_streaming_when_the_interrupt_lands_commits_nothing_of_its_cancelled_answer(
    client: Client, workflow_id: str, policy: str
) -> None:
    handle = await start_run(client, GRAPHS["busy"], "tell me a story", id=workflow_id, task_queue=TASK_QUEUE)
    seen: list[Any] = []
    reader = await _streaming(handle, seen)
    accepted = await handle.send("teller", "a quick question", policy=policy)  # type: ignore[arg-type]
    assert accepted == {"executor_id": "teller", "accepted": True, "interrupts": True}
    result = await asyncio.wait_for(handle.result(), 60)
    await asyncio.wait_for(reader, 30)
    (interrupted,) = [e for e in seen if isinstance(e, WorkflowInterruptedEvent)]
    assert (interrupted.policy, interrupted.superstep, interrupted.cancelled) == (policy, 1, ["teller"])
    assert "story5" in _words(seen)  # the live view showed the cancelled answer as it streamed
    committed = [e async for e in handle.events(view="committed")]
    assert "story" not in _words(committed)  # ... and none of it is committed
    assert "story" not in json.dumps(result)
    assert "short answer" in json.dumps(result["outputs"])
    outputs = [e for e in committed if isinstance(e, WorkflowOutputEvent)]
    assert len(outputs) == 1 and "short answer" in _words(outputs)


async def test_enqueue_and_reject_by_update_and_by_signal(client: Client, workflow_id: str) -> None:
    handle = await start_run(
        client, GRAPHS["busy"], "tell me a story", id=workflow_id, task_queue=TASK_QUEUE, concurrent_input="reject"
    )
    seen: list[Any] = []
    reader = await _streaming(handle, seen)
    with pytest.raises(RunInProgressError, match="concurrent-input policy is 'reject'"):
        await handle.send("teller", "refused")  # the run's own policy
    await handle.send("teller", "refused by signal", wait=False)
    assert (await handle.send("teller", "queued", policy="enqueue")) == {
        "executor_id": "teller",
        "accepted": True,
        "interrupts": False,
    }
    result = await asyncio.wait_for(handle.result(), 60)
    await asyncio.wait_for(reader, 30)
    outputs = json.dumps(result["outputs"])
    assert "story399" in outputs and "short answer" in outputs  # the story, then the queued message
    assert not [e for e in seen if isinstance(e, WorkflowInterruptedEvent)]
    warnings = [e for e in seen if isinstance(e, WorkflowWarningEvent)]
    assert any("policy is 'reject'" in str(w.data) for w in warnings), warnings
    status = await handle.status()
    assert status["concurrent_input"] == "reject"


async def test_bad_policies_are_refused_and_the_run_goes_on(
    client: Client, temporal_address: str, workflow_id: str
) -> None:
    with pytest.raises(ValueError, match="concurrent_input must be one of"):
        await start_run(client, GRAPHS["busy"], "x", concurrent_input="sometimes")  # type: ignore[arg-type]
    handle = await start_run(
        client, GRAPHS["busy"], "tell me a story", id=workflow_id, task_queue=TASK_QUEUE, keep_alive=True
    )
    with pytest.raises(ValueError, match="policy must be one of enqueue, reject, interrupt, rollback"):
        await handle.send("teller", "x", policy="soon")  # type: ignore[arg-type]
    raw = client.get_workflow_handle(workflow_id)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await raw.execute_update(UPDATE_SEND, {"executor_id": "teller", "message": "x", "policy": "soon"})
    assert "policy must be one of" in str(refused.value.cause)
    await raw.signal("send", {"executor_id": "teller", "message": "x", "policy": "soon"})
    code, out, err = await run_cli(temporal_address, "send", workflow_id, "teller", '"x"', "--policy", "soon")
    assert code == 2 and "invalid choice: 'soon'" in err
    code, out, err = await run_cli(temporal_address, "send", workflow_id, "teller", '"hello"', "--policy", "interrupt")
    assert code == 0, err
    assert json.loads(out)["interrupts"] is True
    status = await handle.status()
    assert any("policy must be one of" in w["message"] for w in status["warnings"]), status["warnings"]
    await handle.close()
    result = await asyncio.wait_for(handle.result(), 60)
    assert "short answer" in json.dumps(result["outputs"]) and "story" not in json.dumps(result["outputs"])


async def test_a_raw_start_input_with_an_unknown_policy_fails_the_run_naming_it(
    client: Client, workflow_id: str
) -> None:
    handle = await client.start_workflow(
        "it_agents_busy", {"message": "x", "concurrent_input": "sometimes"}, id=workflow_id, task_queue=TASK_QUEUE
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert "concurrent_input must be one of" in str(failed.value.cause)
    from temporal_workflows.temporal import get_run

    with pytest.raises(InvalidRunInputError):
        await get_run(client, workflow_id).result()


async def test_the_durable_twin_sends_with_a_policy_as_in_process(client: Client) -> None:
    from tests.conformance import scenarios as sc

    sc.GATES.clear()
    sc.STARTED.clear()
    durable = sc.busy.on_temporal(client, task_queue=TASK_QUEUE)
    run = asyncio.ensure_future(durable.run("a", concurrent_input="rollback"))
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, "a").wait(), 60)
    sent = await durable.send("b")  # the run's policy: rollback
    assert sent["interrupts"] is True
    sc.busy_gate(sc.GATES, "b").set()
    result = await asyncio.wait_for(run, 60)
    assert result.get_outputs() == ["answered b"]
    assert result.state == {"seen": ["b"]}
    assert [e.policy for e in result if isinstance(e, WorkflowInterruptedEvent)] == ["rollback"]
