"""Ordinary Python values on Temporal: what the client reads back, what history holds, what plain JSON starts.

The conformance scenario ``ordinary_python_values`` shows both graph hosts agree,
step by step; these check the ends a user touches: a client gets the values
back with their types, the history holds tagged JSON (no pickle), and a run
started with plain JSON (as by the ``temporal`` CLI) gets its message typed as
the start executor declares.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import get_run, start_run
from tests.conformance import scenarios as sc
from tests.conftest import TASK_QUEUE
from tests.integration.streams import events_until

pytestmark = pytest.mark.usefixtures("worker")

REPORT = (
    "dict[str: tuple[Coin(int, str), Tone], str: Tone, str: dict[Grade: tuple[str, int], Grade: tuple[str, int]], "
    "str: datetime(UTC), str: Coin(int, str)]"
)
"""What the answering step reports it saw (``scenarios.types_of``)."""


async def test_a_client_reads_ordinary_values_back_with_their_types(client: Client, workflow_id: str) -> None:
    handle = await start_run(client, sc.values, ("parcel", 3), id=workflow_id, task_queue=TASK_QUEUE)
    events = await events_until(handle, lambda e: isinstance(e, RequestInfoEvent))
    (asked,) = [e for e in events if isinstance(e, RequestInfoEvent)]
    coin, tone = asked.data
    assert type(asked.data) is tuple and type(coin) is sc.Coin and (coin.cents, coin.currency) == (300, "EUR")
    assert tone is sc.Tone.COOL
    (pending,) = await handle.pending_requests()
    # Restored, as in process and as the streamed request.
    (p_coin, p_tone) = pending.data
    assert type(pending.data) is tuple and type(p_coin) is sc.Coin and p_coin.cents == 300 and p_tone is sc.Tone.COOL
    (pending,) = await handle.pending_requests(restore=False)
    assert pending.data == [
        {"$tests.conformance.scenarios:Coin": {"cents": 300, "currency": "EUR"}},
        {"$tests.conformance.scenarios:Tone": "cool"},
    ]
    await handle.respond(asked.request_id, "warm")  # plain JSON, validated into the declared Tone
    result = await handle.result()
    assert result["output_types"] == ["tuple", None]
    first, report = await handle.outputs()
    assert report == REPORT
    assert first == (sc.Tone.WARM, sc.Tone.COOL, {sc.Grade.A: ("parcel", 3), sc.Grade.B: ("parcel", 4)}, sc.SENT)
    assert [type(k) for k in first[2]] == [sc.Grade, sc.Grade] and type(first[2][sc.Grade.A]) is tuple
    state: dict[str, Any] = await handle.state()
    assert state["sent"] == "2025-01-02T03:04:05.000678+00:00" and state["start_types"] == "tuple[str, int]"

    # History holds the values as tagged JSON: readable, and nothing a reader would have to unpickle.
    results = [
        p
        async for e in handle.handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        for p in e.activity_task_completed_event_attributes.result.payloads
    ]
    assert results and all(p.metadata["encoding"].startswith(b"json") for p in results)
    stored = b"".join(p.data for p in results)
    assert b'"$tuple"' in stored and b'"$tests.conformance.scenarios:Grade"' in stored


@pytest.mark.parametrize(
    "start",
    [{"message": ["parcel", 3]}, {"message": ["parcel", 3], "message_type": "tuple"}],
    ids=["plain", "tagged"],
)
async def test_a_run_started_with_plain_json_gets_the_types_its_start_executor_declares(
    client: Client, workflow_id: str, start: dict[str, Any]
) -> None:
    """What ``temporal workflow start --input`` sends: just JSON (or JSON with its built-in tag)."""
    await client.start_workflow("cf_values", start, id=workflow_id, task_queue=TASK_QUEUE)
    handle = get_run(client, workflow_id)
    events = await events_until(handle, lambda e: isinstance(e, RequestInfoEvent))
    (asked,) = [e for e in events if isinstance(e, RequestInfoEvent)]
    assert (await handle.state())["start_types"] == "tuple[str, int]"
    await handle.respond(asked.request_id, "warm")
    assert (await handle.outputs())[1] == REPORT
