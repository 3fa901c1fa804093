"""The step activity's live-event publisher, against a stand-in stream client (no server): batches bounded by
bytes, order kept, backpressure while the backlog is large, no step held up while the stream refuses batches."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_core import to_json

from temporal_workflows import StepProgressEvent
from temporal_workflows._engine.serde import encode
from temporal_workflows.temporal._protocol import LIVE_BATCH_TYPE
from temporal_workflows.temporal._worker import live_publisher as lp


class FakeStream:
    """Records what each flush sends; refuses the first ``refuse`` flushes (as a server that is down)."""

    def __init__(self, refuse: int = 0, delay: float = 0.0) -> None:
        self.buffer: list[bytes] = []
        self.signals: list[list[bytes]] = []
        self.refuse = refuse
        self.delay = delay
        self.flushes = 0

    def topic(self, name: str) -> FakeStream:
        return self

    def publish(self, payload: Any) -> None:
        self.buffer.append(payload.data)

    async def flush(self) -> None:
        self.flushes += 1
        await asyncio.sleep(self.delay)
        if self.refuse:
            self.refuse -= 1
            raise RuntimeError("stream down")
        if self.buffer:
            self.signals.append(self.buffer)
            self.buffer = []

    def events(self) -> list[dict[str, Any]]:
        out = []
        for signal in self.signals:
            for item in signal:
                batch = json.loads(item)
                assert batch["type"] == LIVE_BATCH_TYPE
                out.extend(batch["data"])
        return out


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> FakeStream:
    fake = FakeStream()
    monkeypatch.setattr(lp.WorkflowStreamClient, "from_within_activity", staticmethod(lambda: fake))
    return fake


def _event(i: int, size: int = 0) -> tuple[StepProgressEvent, bytes]:
    event = StepProgressEvent(message=str(i), data="x" * size if size else None, seq=i + 1)
    return event, to_json(encode(event))


async def _publish(pub: lp.LivePublisher, events: list[tuple[StepProgressEvent, bytes]]) -> None:
    for event, data in events:
        pub.publish(event, data)
        await pub.room()


async def test_a_tight_loop_goes_out_in_order_in_batches_bounded_by_bytes_with_backpressure(stream: FakeStream) -> None:
    pub = lp.LivePublisher(interval=0.01, first_delay=0)
    events = [_event(i) for i in range(20_000)]
    await _publish(pub, events)
    await pub.close()
    assert [e["data"]["message"] for e in stream.events()] == [str(i) for i in range(20_000)]
    assert all(len(signal) == 1 for signal in stream.signals)  # one stream item per signal
    assert max(len(signal[0]) for signal in stream.signals) * 4 / 3 <= lp.MAX_BATCH_BYTES
    assert pub.waits > 0  # the loop waited for its backlog to drain at least once
    assert pub.largest_batch <= lp.MAX_BATCH_BYTES


async def test_an_event_larger_than_a_batch_goes_alone(stream: FakeStream) -> None:
    pub = lp.LivePublisher(interval=0.01, first_delay=0)
    await _publish(pub, [_event(0), _event(1, size=400_000), _event(2)])
    await pub.close()
    assert [e["data"]["message"] for e in stream.events()] == ["0", "1", "2"]
    sizes = [len(s[0]) for s in stream.signals]
    assert len(sizes) >= 2 and max(sizes) > lp.MAX_BATCH_BYTES  # the large one, on its own


async def test_a_stream_that_refuses_batches_holds_nobody_up_and_gets_them_all_later(
    stream: FakeStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lp, "_MAX_RETRY_PAUSE", 0.05)
    stream.refuse = 3
    pub = lp.LivePublisher(interval=0.01, first_delay=0, max_backlog_bytes=lp.MAX_BATCH_BYTES)
    events = [_event(i) for i in range(5_000)]
    await asyncio.wait_for(_publish(pub, events), 10)  # backpressure is off while batches are refused
    await asyncio.wait_for(pub.close(), 10)
    assert [e["data"]["message"] for e in stream.events()] == [str(i) for i in range(5_000)]


async def test_what_a_stream_never_takes_is_dropped_at_the_end_with_a_warning_that_counts_it(
    stream: FakeStream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(lp, "_MAX_RETRY_PAUSE", 0.01)
    stream.refuse = 10**9
    pub = lp.LivePublisher(interval=0.01, first_delay=0)
    await asyncio.wait_for(_publish(pub, [_event(i) for i in range(100)]), 10)
    with caplog.at_level("WARNING"):
        await asyncio.wait_for(pub.close(), 10)  # never raises, never hangs: the step's result is what counts
    assert stream.events() == []
    assert any("the last 100 live events of a step could not be sent" in r.getMessage() for r in caplog.records)
