"""One workflow task accepts at most one payload of update input; a second large update is refused, then lands.

The SDK repeats each accepted update's input in the completion of the
workflow task that accepts it, and the server writes that completion with
the signals that arrived meanwhile in one transaction, refused over 4 MiB
(``TransactionSizeLimitError``: the task fails again and again). So the
update validators let one payload of input into a task and refuse a second
large one with the retryable ``RunBusyError`` (``Admission.check_room`` in
``temporal/_workflow/admission.py``); a client sends it again to the next task.

Made deterministic here: the run's task queue has no worker while two
updates of about 1.9 MB each are admitted by the server (waited for at the
ADMITTED stage with ``PollWorkflowExecutionUpdate``); the worker then
starts, and its first workflow task holds both updates. Without the rule both are accepted in that one task.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage
from temporalio.api.update.v1 import UpdateRef, WaitPolicy
from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from temporal_workflows._engine.limits import DEFAULT_MAX_PAYLOAD_BYTES
from temporal_workflows.temporal import RunHandle, start_run
from temporal_workflows.temporal._protocol import FAILURE_RUN_BUSY, UPDATE_SEND
from tests.integration import graphs

SIZE = DEFAULT_MAX_PAYLOAD_BYTES - 64
"""Characters of each message: its JSON is just under the payload limit, so each alone is accepted."""


async def admitted(client: Client, workflow_id: str, update_id: str) -> None:
    """Return once the server has admitted update ``update_id`` (it has it; no worker needs to have seen it).

    Asked of the server with ``PollWorkflowExecutionUpdate`` at the ADMITTED stage (the Python client
    offers no wait for it, and the server refuses that wait on the update call itself); until the update
    reaches the server, the poll answers "not found" and is asked again.
    """
    stage = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED
    request = PollWorkflowExecutionUpdateRequest(
        namespace=client.namespace,
        update_ref=UpdateRef(workflow_execution=WorkflowExecution(workflow_id=workflow_id), update_id=update_id),
        identity="test",
        wait_policy=WaitPolicy(lifecycle_stage=stage),
    )
    for _ in range(600):
        try:
            response = await client.workflow_service.poll_workflow_execution_update(request)
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.05)
            continue
        assert response.stage >= stage
        return
    raise AssertionError(f"update {update_id} was never admitted")


async def test_a_second_large_update_in_one_workflow_task_is_refused_as_busy_and_its_resend_lands(
    client: Client,
) -> None:
    queue = f"update-room-{uuid.uuid4().hex[:8]}"
    workflow_id = f"update-room-{uuid.uuid4().hex[:8]}"
    handle: RunHandle = await start_run(client, graphs.measurer, id=workflow_id, task_queue=queue, keep_alive=True)
    texts = {"first": "a" * SIZE, "second": "b" * (SIZE - 1)}
    run = client.get_workflow_handle(workflow_id)
    sent = [
        asyncio.create_task(run.execute_update(UPDATE_SEND, {"executor_id": "measure", "message": text}, id=update_id))
        for update_id, text in texts.items()
    ]
    for update_id in texts:
        await admitted(client, workflow_id, update_id)

    async with Worker(client, task_queue=queue):
        outcomes: dict[str, object] = {}
        for update_id in texts:
            try:
                outcomes[update_id] = await asyncio.wait_for(sent.pop(0), 60)
            except WorkflowUpdateFailedError as e:
                outcomes[update_id] = e.cause
        refused = [u for u, o in outcomes.items() if isinstance(o, ApplicationError)]
        assert len(refused) == 1, outcomes  # one payload of update input per workflow task
        [busy] = [outcomes[u] for u in refused]
        assert isinstance(busy, ApplicationError) and busy.type == FAILURE_RUN_BUSY  # what RunHandle sends again
        assert "send it again shortly" in str(busy)
        [taken] = [u for u in texts if u not in refused]
        assert outcomes[taken] == {"executor_id": "measure", "accepted": True}

        # The client's resend (RunHandle sends again what is refused for load) lands in a later task.
        await handle.send("measure", texts[refused[0]])
        await handle.close()
        result = await asyncio.wait_for(handle.result(), 120)
    assert sorted(result["outputs"]) == sorted(len(t) for t in texts.values())  # each delivered once
