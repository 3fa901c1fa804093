"""Agent Framework parity on Temporal: a run's events print the same lines as in process (issue #16 item 2).

The conformance suite compares the two hosts' events as JSON; this compares
what a MAF program prints (``print(event)``), so the types that travel as
JSON (a step's sent model next to its yielded string, a fan-in's list) must
come back as the objects on a Temporal run's stream too.
"""

from __future__ import annotations

import pytest
from temporalio.client import Client

from temporal_workflows._errors import step_error
from temporal_workflows.errors import ExecutorFailedError
from temporal_workflows.temporal import start_run
from tests.conformance import scenarios as sc
from tests.conftest import TASK_QUEUE

pytestmark = pytest.mark.usefixtures("worker")

EXPECTED = """\
WorkflowEvent(type='started')
WorkflowEvent(type='status', state=IN_PROGRESS)
WorkflowEvent(type='superstep_started', iteration=1)
WorkflowEvent(type='executor_invoked', executor_id='split', data='hi')
WorkflowEvent(type='executor_completed', executor_id='split', data=['HI'])
WorkflowEvent(type='superstep_completed', iteration=1)
WorkflowEvent(type='superstep_started', iteration=2)
WorkflowEvent(type='executor_invoked', executor_id='left', data='HI')
WorkflowEvent(type='output', executor_id='left', data='left:HI')
WorkflowEvent(type='cf_progress', step='left', length=2)
WorkflowEvent(type='executor_completed', executor_id='left', data=[Part(n=1), 'left:HI'])
WorkflowEvent(type='executor_invoked', executor_id='right', data='HI')
WorkflowEvent(type='output', executor_id='right', data='right:HI')
WorkflowEvent(type='executor_completed', executor_id='right', data=[Part(n=2), 'right:HI'])
WorkflowEvent(type='superstep_completed', iteration=2)
WorkflowEvent(type='superstep_started', iteration=3)
WorkflowEvent(type='executor_invoked', executor_id='join_parts', data=[Part(n=1), Part(n=2)])
WorkflowEvent(type='output', executor_id='join_parts', data='joined:1,2')
WorkflowEvent(type='executor_completed', executor_id='join_parts', data=['joined:1,2'])
WorkflowEvent(type='superstep_completed', iteration=3)
WorkflowEvent(type='status', state=IDLE)"""


async def test_a_runs_events_print_the_same_lines_in_process_and_on_temporal(client: Client, workflow_id: str) -> None:
    local = [str(ev) async for ev in sc.typed_fan.run("hi", stream=True)]
    assert "\n".join(local) == EXPECTED
    handle = await start_run(client, sc.typed_fan, "hi", id=workflow_id, task_queue=TASK_QUEUE)
    remote = [str(ev) async for ev in handle.events()]
    assert remote == local
    assert await handle.outputs() == ["left:HI", "right:HI", "joined:1,2"]


async def test_a_steps_own_exception_is_what_the_run_raises_on_both_hosts(client: Client, workflow_id: str) -> None:
    """``except QuotaExceeded`` catches a failed run as in Agent Framework: in process, from the durable twin
    (awaited and streamed) and from ``RunHandle.result()``; it is also the library's ``ExecutorFailedError``
    (docs/maf.md, "where we differ")."""
    with pytest.raises(sc.QuotaExceeded) as in_process:
        await sc.own_error.run("ann")
    handle = await start_run(client, sc.own_error, "ann", id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(sc.QuotaExceeded) as on_temporal:
        await handle.result()
    twin = sc.own_error.on_temporal(client, task_queue=TASK_QUEUE)
    with pytest.raises(sc.QuotaExceeded) as awaited:
        await twin.run("ann")
    with pytest.raises(sc.QuotaExceeded) as streamed:
        async for _ in twin.run("ann", stream=True):
            pass
    for caught in (in_process.value, on_temporal.value, awaited.value, streamed.value):
        assert isinstance(caught, ExecutorFailedError) and type(caught).__name__ == "QuotaExceeded"
        assert str(caught) == "quota exceeded for 'ann'"
        assert caught.summary == "executor 'call_model' failed in superstep 1: QuotaExceeded: quota exceeded for 'ann'"
        assert caught.error_class == "tests.conformance.scenarios.QuotaExceeded"
        assert (caught.executor_id, caught.superstep) == ("call_model", 1)
        assert type(caught.original) is sc.QuotaExceeded and str(caught.original) == "quota exceeded for 'ann'"
        assert step_error(caught) is caught.original
    assert awaited.value.result is not None and awaited.value.result[-1].type == "failed"
