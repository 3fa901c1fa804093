"""The ``deliver`` signal and ``confirm_delivery``: a reused id, a null delivery, and an old confirmation.

Issue #23, item 10. A second ``deliver`` reusing an id with other content was
dropped without a word while ``confirm_delivery`` said "accepted"; a ``deliver``
with a null argument was dropped without a word; and after 200 later
deliveries, confirming an accepted one answered "no delivery ... reached this
run", which invites sending it twice. docs/bad-input.md has the row.
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from temporal_workflows import WorkflowEvent
from temporal_workflows.errors import DeliveryForgottenError
from temporal_workflows.events import WorkflowWarningEvent
from temporal_workflows.temporal import RunHandle
from temporal_workflows.temporal._failures import library_error
from temporal_workflows.temporal._workflow.inbox import DELIVERED_CARRIED, FORGOTTEN_KEPT, Deliveries
from tests.integration.streams import events_until
from tests.integration.test_task_budget import finish, keep_alive

pytestmark = pytest.mark.usefixtures("worker")


async def _refusal(handle_update: object) -> ApplicationError:
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle_update  # type: ignore[misc]
    assert isinstance(refused.value.cause, ApplicationError)
    return refused.value.cause


def _deliver_warning(e: WorkflowEvent) -> bool:
    return isinstance(e, WorkflowWarningEvent) and e.message.startswith("signal 'deliver'")


async def _warnings(handle: RunHandle, n: int) -> list[str]:
    """The first ``n`` warnings about ``deliver`` signals in the run's event stream."""
    seen = 0

    def enough(e: WorkflowEvent) -> bool:
        nonlocal seen
        seen += _deliver_warning(e)
        return seen == n

    events = await events_until(handle, enough)
    return [e.message for e in events if isinstance(e, WorkflowWarningEvent) and _deliver_warning(e)]


async def test_a_reused_delivery_id_with_other_content_and_a_null_delivery_are_warnings(
    client: Client, workflow_id: str
) -> None:
    handle = await keep_alive(client, workflow_id)
    first = {"id": "d1", "send": {"executor_id": "measure", "message": "first"}}
    await handle.handle.signal("deliver", first)
    assert await handle.handle.execute_update("confirm_delivery", {"id": "d1"}) == {
        "executor_id": "measure",
        "accepted": True,
    }
    await handle.handle.signal("deliver", first)  # the same delivery again: its outcome stands, no warning
    await handle.handle.signal("deliver", {"id": "d1", "send": {"executor_id": "measure", "message": "other"}})
    await handle.handle.signal("deliver", None)
    warnings = await _warnings(handle, 2)
    assert warnings == [
        "signal 'deliver' ignored: delivery id 'd1' was already used for other input; give each delivery its own id",
        "signal 'deliver' ignored: it needs a delivery (id, and send or respond), not null",
    ]
    # The confirmation answers for what was delivered under that id: the first.
    assert await handle.handle.execute_update("confirm_delivery", {"id": "d1"}) == {
        "executor_id": "measure",
        "accepted": True,
    }
    await finish(handle, [len("first")])


async def test_confirming_a_delivery_older_than_the_kept_outcomes_says_so_not_never_arrived(
    client: Client, workflow_id: str
) -> None:
    handle = await keep_alive(client, workflow_id)
    await handle.handle.signal("deliver", {"id": "old", "send": {"executor_id": "measure", "message": "kept"}})
    assert (await handle.handle.execute_update("confirm_delivery", {"id": "old"}))["accepted"] is True
    # Later deliveries (refused at once: no such executor) push the first one's outcome out.
    later = [{"id": f"later-{i}", "send": {"executor_id": "nobody", "message": i}} for i in range(DELIVERED_CARRIED)]
    await asyncio.gather(*(handle.handle.signal("deliver", d) for d in later))
    last = await _refusal(handle.handle.execute_update("confirm_delivery", {"id": f"later-{DELIVERED_CARRIED - 1}"}))
    assert last.type == "UndeliverableMessageError"
    old = await _refusal(handle.handle.execute_update("confirm_delivery", {"id": "old"}))
    assert old.type == "DeliveryForgottenError"
    assert "reached this run and was processed" in old.message and "do not send it again" in old.message
    error = library_error(WorkflowUpdateFailedError(old))
    assert isinstance(error, DeliveryForgottenError)
    never = await _refusal(handle.handle.execute_update("confirm_delivery", {"id": "never-sent"}))
    assert never.type == "UnknownDeliveryError" and "no delivery 'never-sent' reached this run" in never.message
    # Sent again under its old id, it is not delivered twice.
    await handle.handle.signal("deliver", {"id": "old", "send": {"executor_id": "measure", "message": "kept"}})
    (warning,) = await _warnings(handle, 1)
    assert "delivery 'old' reached this run before" in warning
    await finish(handle, [len("kept")])


def test_forgotten_delivery_ids_are_bounded_and_carried() -> None:
    deliveries = Deliveries([])
    for i in range(DELIVERED_CARRIED + 3):
        deliveries.begin(f"d{i}", "digest")
        deliveries.settle(f"d{i}", {"accepted": True})
    assert deliveries.forgotten("d0") and deliveries.forgotten("d2") and not deliveries.forgotten("d3")
    assert deliveries.digest_of(f"d{DELIVERED_CARRIED}") == "digest"
    carried = Deliveries(deliveries.carry(), deliveries.carry_forgotten(), deliveries.forgotten_count)
    assert carried.forgotten("d0") and carried.known(f"d{DELIVERED_CARRIED + 2}") and not carried.lost_track
    # What another execution hands over is bounded again as it is read (a forged start input).
    forged = Deliveries([], ["x" * 10_000, *(f"{i:012x}" for i in range(FORGOTTEN_KEPT * 2))], 5)
    assert len(forged.carry_forgotten()) == FORGOTTEN_KEPT and forged.lost_track is False
