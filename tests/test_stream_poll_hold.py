"""A stream reader's poll update is refused, as the run's own updates are, while one of the run's local
activities is in flight (``temporal/_workflow/locals.py``): accepted then, the SDK could record it before that
activity's result and replay it after (a CI run's history: the status upsert after a validated response
replayed before a reader's poll). The refusal is the stream's own "draining" type, which its readers take
as "poll again shortly"."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio import workflow
from temporalio.contrib.workflow_streams._types import STREAM_DRAINING_ERROR_TYPE
from temporalio.exceptions import ApplicationError

from temporal_workflows.temporal._workflow import locals as run_locals


class _Stream:
    def __init__(self) -> None:
        self.validated: list[Any] = []

    def _validate_poll(self, payload: Any) -> None:
        self.validated.append(payload)


def test_a_poll_is_refused_as_draining_while_a_local_activity_runs_and_validated_as_before_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: dict[str, Any] = {}

    def handler(payload: Any) -> None:
        return None

    monkeypatch.setattr(
        workflow, "get_update_handler", lambda name: handler if name == run_locals._STREAM_POLL else None
    )
    monkeypatch.setattr(
        workflow, "set_update_handler", lambda name, h, *, validator: registered.update(name=name, h=h, v=validator)
    )
    stream, counter = _Stream(), run_locals.LocalActivities()
    run_locals.hold_stream_polls(stream, counter)  # type: ignore[arg-type]
    assert registered["name"] == "__temporal_workflow_stream_poll" and registered["h"] is handler

    counter.in_flight = 1
    with pytest.raises(ApplicationError) as refused:
        registered["v"]("poll 1")
    assert refused.value.type == STREAM_DRAINING_ERROR_TYPE == run_locals.STREAM_DRAINING
    assert stream.validated == []

    counter.in_flight = 0
    registered["v"]("poll 2")
    assert stream.validated == ["poll 2"]  # the stream's own check (continue-as-new draining) still runs
