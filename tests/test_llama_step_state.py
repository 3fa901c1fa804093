"""``StepStateChanged`` under ``stream_events(expose_internal=True)``: what LlamaIndex shows (issue #25).

Each program runs on ``workflows`` (llama-index-workflows 2.26.1, installed) and on
``temporal_workflows.llama`` in process; the step states must be the same, but for
the module LlamaIndex's own event classes live in (``str()`` of the class, as
LlamaIndex writes ``not_running``'s names). Temporal gives the same records
(``tests/conformance/test_llama_conformance.py``).
"""

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from temporal_workflows._engine.machine import RoutedMessage, StepResult, StepTask
from temporal_workflows._engine.serde import Envelope, encode, type_key
from temporal_workflows.llama._runtime import LlamaStreamEvent
from temporal_workflows.llama.events import HumanResponseEvent, StepState, StepStateChanged, StopEvent
from temporal_workflows.temporal import _compact as compact
from temporal_workflows.temporal._wire import decode_step_result, encode_step_result
from tests import llama_sample_ports as ports

PEER = ports.namespace("workflows")
OURS = ports.namespace("temporal_workflows.llama")


async def states(make: Any, m: SimpleNamespace, answer: Any = None) -> list[tuple[Any, ...]]:
    handler = make(m)(timeout=10).run()
    seen: list[tuple[Any, ...]] = []
    async for ev in handler.stream_events(expose_internal=True):
        if isinstance(ev, m.StepStateChanged):
            names = [
                str(n).replace(m.StopEvent.__module__, "<events>") if n else n
                for n in (ev.input_event_name, ev.output_event_name)
            ]
            seen.append((ev.name, ev.step_state.value, *names, ev.worker_id))
        elif not isinstance(ev, m.InternalDispatchEvent):
            seen.append((type(ev).__name__,))
        if answer is not None and isinstance(ev, m.InputRequiredEvent):
            handler.ctx.send_event(answer(m))
    await asyncio.wait_for(handler, 10)
    return seen


def retried(m: SimpleNamespace) -> Any:
    tries = {"n": 0}

    class Retried(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step(retry_policy=m.retry_policy(wait=m.wait_fixed(0), stop=m.stop_after_attempt(3)))  # type: ignore[untyped-decorator]
        async def go(self, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            tries["n"] += 1
            if tries["n"] < 3:
                raise ValueError("not yet")
            return m.StopEvent(result="ok")

    return Retried


def waiting(m: SimpleNamespace) -> Any:
    class Waiting(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[untyped-decorator]
        async def ask(self, ctx: m.Context, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            got = await ctx.wait_for_event(m.HumanResponseEvent, waiter_event=m.InputRequiredEvent(prefix="name?"))
            return m.StopEvent(result=got.response)

    return Waiting


async def test_each_attempt_of_a_retried_step_is_running_then_not_running_as_in_llamaindex() -> None:
    peer = await states(retried, PEER)
    assert peer[-2] == ("go", "not_running", "<class '<events>.StartEvent'>", "<class '<events>.StopEvent'>", "0")
    assert len(peer) == 6 + 1
    assert await states(retried, OURS) == peer


async def test_a_wait_for_event_ends_the_attempt_and_the_answer_runs_the_step_again_as_in_llamaindex() -> None:
    peer = await states(waiting, PEER, lambda m: m.HumanResponseEvent(response="Ann"))
    assert [s[:2] for s in peer] == [
        ("ask", "running"),
        ("ask", "not_running"),
        ("InputRequiredEvent",),
        ("ask", "running"),
        ("ask", "not_running"),
        ("StopEvent",),
    ]
    assert await states(waiting, OURS, lambda m: m.HumanResponseEvent(response="Ann")) == peer


async def test_no_step_state_without_expose_internal() -> None:
    handler = retried(OURS)(timeout=10).run()
    seen = [type(ev).__name__ async for ev in handler.stream_events()]
    assert seen == ["StopEvent"]
    assert await handler == "ok"


# -- on Temporal: a step's StepStateChanged travel as a few bytes and come back the same (temporal/_compact.py) --


class Tick(OURS.Event):  # type: ignore[misc,name-defined]
    n: int


def _state(name: str, state: str, worker: str, input_name: str, output: str | None = None) -> Envelope:
    event = StepStateChanged(
        name=name,
        step_state=StepState(state),
        worker_id=worker,
        input_event_name=input_name,
        output_event_name=output,
    )
    return encode(LlamaStreamEvent(event={"type": type_key(StepStateChanged), "data": event.model_dump(mode="json")}))


def _tick_task(*types: type) -> StepTask:
    messages = tuple(encode(t(n=i)) if t is Tick else encode(t()) for i, t in enumerate(types))
    kind = "batch" if len(messages) > 1 else "message"
    return StepTask(1, 0, "tick", kind, messages, ("start",) * len(messages))  # type: ignore[arg-type]


def test_the_type_keys_the_wire_spells_are_the_llama_classes() -> None:
    assert type_key(LlamaStreamEvent) == compact.LLAMA_STREAM_EVENT
    assert type_key(StepStateChanged) == compact.STEP_STATE_CHANGED


def test_a_chain_steps_states_travel_as_a_few_bytes_and_decode_to_the_very_events() -> None:
    task = _tick_task(Tick)
    tick, stop = str(Tick), str(StopEvent)
    result = StepResult(
        sent=[RoutedMessage.one("tick", encode(Tick(n=2)), "tick")],
        events=[_state("tick", "running", "0", "Tick"), _state("tick", "not_running", "0", tick, tick)],
        emitted=["e", "e", "s1"],  # the sends' place among the events publishes nothing: left out
    )
    raw = encode_step_result(result, task, {})
    assert raw["events"] == [["r"], ["n", 0, 0, 0]] and "emitted" not in raw
    assert len(json.dumps(raw["events"], separators=(",", ":"))) < 25  # spelled out: ~650 bytes
    back = decode_step_result(json.loads(json.dumps(raw)), task, {})
    assert back.events == result.events
    # The last step: its StopEvent is an output, which the states must still precede.
    last = StepResult(
        outputs=[encode(StopEvent(result=1))],
        events=[_state("tick", "running", "0", "Tick"), _state("tick", "not_running", "0", tick, stop)],
        halt=True,
        emitted=["e", "e", "o"],
    )
    raw = encode_step_result(last, task, {})
    assert raw["events"] == [["r"], ["n", 0, 0, 1]] and raw["emitted"] == ["e", "e", "o"]
    assert decode_step_result(raw, task, {}).events == last.events


def test_every_state_of_a_fan_out_and_what_the_tuple_cannot_say_come_back_the_same() -> None:
    task = _tick_task(Tick, Tick, Tick)
    tick, none = str(Tick), "<class 'NoneType'>"
    events = [
        _state("tick", "preparing", "<enqueued>", "Tick"),
        _state("tick", "running", "1", "Tick"),
        _state("tick", "not_running", "1", tick, none),  # returned None
        _state("tick", "not_running", "12", tick),  # a failed attempt or a wait: no output
        _state("tick", "not_running", "0", tick, str(HumanResponseEvent)),  # a class nothing here names
        _state("other", "running", "0", "Tick"),  # not this step's name: spelled out
        _state("tick", "running", "07", "Tick"),  # a worker id no number spells: spelled out
        _state("tick", "running", "0", "Elsewhere"),  # a class name no message has: spelled out
        encode(LlamaStreamEvent(event={"type": type_key(StopEvent), "data": {"result": 1}})),  # not a state
    ]
    result = StepResult(events=events)
    raw = encode_step_result(result, task, {})
    assert raw["events"][:5] == [
        ["p"],
        ["r", 1],
        ["n", 1, 0, "-"],
        ["n", 12],
        ["n", 0, 0, type_key(HumanResponseEvent)],
    ]
    assert all(isinstance(e, dict) for e in raw["events"][5:])
    assert decode_step_result(json.loads(json.dumps(raw)), task, {}).events == events


def test_a_corrupted_compact_state_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="not a compact step state"):
        decode_step_result({"events": [["x"]]}, _tick_task(Tick), {})


def test_the_runtimes_ready_made_json_of_a_state_is_what_encoding_the_event_gives() -> None:
    # The runtime writes a StepStateChanged's JSON itself (no pydantic round per state): it must be the event's.
    from temporal_workflows.llama._invocations import _STEP_STATE_KEY
    from temporal_workflows.llama._run_objects import event_json

    for output in (None, "<class 'NoneType'>"):
        data = {
            "name": "go",
            "step_state": "not_running",
            "worker_id": "0",
            "input_event_name": "<class 'm.A'>",
            "output_event_name": output,
        }
        assert event_json(StepStateChanged(**data), None, "state") == {"type": _STEP_STATE_KEY, "data": data}


def test_the_runtimes_ready_made_envelope_of_a_streamed_state_is_what_encoding_the_wrapper_gives() -> None:
    from temporal_workflows.llama._invocations import _STEP_STATE_KEY, _STREAM_KEY

    data = {"name": "go", "step_state": "running", "worker_id": "1", "input_event_name": "A", "output_event_name": None}
    inner = {"type": _STEP_STATE_KEY, "data": data}
    assert encode(LlamaStreamEvent.model_construct(event=inner)) == Envelope(
        _STREAM_KEY, {"type": "llama", "event": inner}
    )
    assert encode(LlamaStreamEvent(event=inner)) == Envelope(_STREAM_KEY, {"type": "llama", "event": inner})
