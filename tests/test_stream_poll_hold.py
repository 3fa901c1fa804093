"""A run's stream polls (``temporal/_workflow/readers.py``): refused while one of the run's local activities is
in flight (accepted then, the SDK could record one before that activity's result and replay it after), and
past ``MAX_STREAM_POLLS`` in flight (each reader's long poll holds one of the 10 updates Temporal lets an
execution hold; the rest stays for input). Both refusals are the stream's own "draining" type, which every
reader takes as "poll again later"; the second says ``POLLS_FULL``, by which this library's reader reads by
query meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio import workflow
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.contrib.workflow_streams._types import STREAM_DRAINING_ERROR_TYPE
from temporalio.exceptions import ApplicationError

from temporal_workflows.temporal._workflow import readers
from temporal_workflows.temporal._workflow.locals import LocalActivities


class _Stream:
    def __init__(self) -> None:
        self.validated: list[Any] = []

    def _validate_poll(self, payload: Any) -> None:
        self.validated.append(payload)


def _install(monkeypatch: pytest.MonkeyPatch, handler: Any) -> tuple[dict[str, Any], _Stream, LocalActivities, Any]:
    registered: dict[str, Any] = {}
    monkeypatch.setattr(workflow, "get_update_handler", lambda name: handler if name == readers.STREAM_POLL else None)
    monkeypatch.setattr(
        workflow, "set_update_handler", lambda name, h, *, validator: registered.update(name=name, h=h, v=validator)
    )
    stream, counter = _Stream(), LocalActivities()
    polls = readers.admit_stream_polls(stream, counter)  # type: ignore[arg-type]
    assert registered["name"] == "__temporal_workflow_stream_poll"
    return registered, stream, counter, polls


def test_a_poll_is_refused_as_draining_while_a_local_activity_runs_and_validated_as_before_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def handler(payload: PollInput) -> PollResult:
        return PollResult()

    registered, stream, counter, _ = _install(monkeypatch, handler)
    counter.in_flight = 1
    with pytest.raises(ApplicationError) as refused:
        registered["v"]("poll 1")
    assert refused.value.type == STREAM_DRAINING_ERROR_TYPE == readers.STREAM_DRAINING
    assert readers.POLLS_FULL not in refused.value.details
    assert stream.validated == []

    counter.in_flight = 0
    registered["v"]("poll 2")
    assert stream.validated == ["poll 2"]  # the stream's own check (continue-as-new draining) still runs


async def test_polls_past_the_cap_are_refused_so_input_keeps_its_room(monkeypatch: pytest.MonkeyPatch) -> None:
    release = asyncio.Event()

    async def handler(payload: PollInput) -> PollResult:
        await release.wait()  # a waiting run: nothing new to answer with
        return PollResult(next_offset=payload.from_offset)

    registered, stream, _, polls = _install(monkeypatch, handler)
    held = []
    for i in range(readers.MAX_STREAM_POLLS):
        registered["v"](PollInput(from_offset=i))  # validated, then its handler starts at once, as the SDK does
        held.append(asyncio.ensure_future(registered["h"](PollInput(from_offset=i))))
        await asyncio.sleep(0)
    assert polls.in_flight == readers.MAX_STREAM_POLLS == 4
    with pytest.raises(ApplicationError) as refused:
        registered["v"](PollInput())
    assert refused.value.type == readers.STREAM_DRAINING and refused.value.details == (readers.POLLS_FULL,)
    assert "input always has room" in refused.value.message
    release.set()
    assert [r.next_offset for r in await asyncio.gather(*held)] == [0, 1, 2, 3]
    assert polls.in_flight == 0
    registered["v"](PollInput(from_offset=9))  # room again
    assert stream.validated[-1].from_offset == 9
