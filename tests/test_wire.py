"""The step wire format: exact round trips, older payloads still decode, defaults left out."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import to_json
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.workflow import ActivityCancellationType

from temporal_workflows import Executor, ExecutorOptions, WorkflowBuilder, WorkflowContext, handler
from temporal_workflows._engine.machine import (
    FanInGroup,
    PendingRequest,
    RoutedMessage,
    StateWrite,
    StepResult,
    StepTask,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._converter import PayloadConverter, _adapter
from temporal_workflows.temporal._protocol import RunInput, StepInput
from temporal_workflows.temporal._wire import (
    SHARED_MIN_CHARS,
    decode_step_input,
    decode_step_result,
    encode_step_input,
    encode_step_result,
)
from temporal_workflows.temporal._workflow.options import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_RETRY_POLICY,
    DEFAULT_START_TO_CLOSE_TIMEOUT,
    activity_options,
    step_options,
)

GROUPS = {
    "fan_in:a,b->j": FanInGroup("fan_in:a,b->j", ("a", "b"), "j"),
    "fan_in:a,c->j": FanInGroup("fan_in:a,c->j", ("a", "c"), "j"),  # a reaches j through two groups
    "fan_in:b,c->k": FanInGroup("fan_in:b,c->k", ("b", "c"), "k"),
}
IDS = st.sampled_from(["a", "b", "c", "j", "k"])
json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
json_value = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
)
envelopes = st.builds(Envelope, st.none() | st.sampled_from(["m:Typed", "m:Other"]), json_value)
maybe_float = st.none() | st.floats(0, 1e9, allow_nan=False)


def requests(executor: st.SearchStrategy[str], superstep: st.SearchStrategy[int]) -> st.SearchStrategy[PendingRequest]:
    return st.builds(
        PendingRequest,
        request_id=st.text(min_size=1, max_size=6),
        executor_id=executor,
        data=envelopes,
        response_type=st.sampled_from(["str", "m:Answer"]),
        response_schema=st.sampled_from([{}, {"type": "string"}]),
        superstep=superstep,
        timeout=maybe_float,
        on_timeout=st.sampled_from(["respond", "fail"]),
        created_at=maybe_float,
        deadline=maybe_float,
    )


@st.composite
def tasks(draw: st.DrawFn) -> StepTask:
    executor = draw(IDS)
    kind = draw(st.sampled_from(["message", "fan_in", "response"]))
    messages = tuple(draw(st.lists(envelopes, min_size=1, max_size=3)))
    sources = draw(
        st.sampled_from(["none", "ids", "empty"]).map(
            lambda how: {"none": (None,) * len(messages), "ids": ("a",) * len(messages), "empty": ()}[how]
        )
    )
    request = draw(st.none() | requests(IDS, st.integers(1, 50))) if kind == "response" else None
    return StepTask(
        draw(st.integers(1, 10_000)), draw(st.integers(0, 5000)), executor, kind, messages, sources, request
    )


@st.composite
def results(draw: st.DrawFn, task: StepTask) -> StepResult:
    routed = st.builds(
        RoutedMessage,
        target_id=IDS,
        messages=st.lists(envelopes, min_size=1, max_size=2).map(tuple),
        source_ids=st.sampled_from([(task.executor_id,), ("b",), (None,), ()]),
        fan_in=st.none() | st.sampled_from(sorted(GROUPS)),
    )
    return StepResult(
        writes=draw(st.lists(st.builds(StateWrite, st.text(max_size=5), st.none() | envelopes), max_size=3)),
        sent=draw(st.lists(routed, max_size=3)),
        outputs=draw(st.lists(envelopes, max_size=2)),
        requests=draw(
            st.lists(requests(st.sampled_from([task.executor_id, "k"]), st.just(task.superstep) | st.integers(1, 9)))
        ),
        events=draw(st.lists(envelopes, max_size=2)),
    )


def _through_json(value: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(to_json(value))
    return decoded


@given(envelopes)
def test_an_envelope_has_one_json_form_and_reads_back_from_either(env: Envelope) -> None:
    # The full form is what pydantic makes of an Envelope anywhere it is nested (journals,
    # snapshots, activity inputs); the compact one leaves out a plain value's type (step payloads).
    assert env.to_json() == _adapter(Envelope).dump_python(env)
    assert Envelope.from_json(env.to_json()) == env
    assert Envelope.from_json(json.loads(json.dumps(env.to_json(compact=True)))) == env
    assert ("type" in env.to_json(compact=True)) is (env.type is not None)


@given(tasks(), st.none() | st.dictionaries(st.text(max_size=4), envelopes, max_size=3), st.integers(0, 3))
def test_step_input_round_trips_exactly(task: StepTask, state: dict[str, Envelope] | None, epoch: int) -> None:
    inp = StepInput(task, "run-1:7" if state is None else "", state, epoch)
    assert decode_step_input(_through_json(encode_step_input(inp)), task.executor_id) == inp


@given(st.data())
def test_step_result_round_trips_exactly_even_where_fan_in_is_ambiguous(data: st.DataObject) -> None:
    task = data.draw(tasks())
    result = data.draw(results(task))
    assert decode_step_result(_through_json(encode_step_result(result, task, GROUPS)), task, GROUPS) == result


@given(st.data(), st.booleans())
def test_step_result_round_trips_exactly_when_long_strings_are_shared(data: st.DataObject, share: bool) -> None:
    task = data.draw(tasks())
    result = data.draw(results(task))
    long = st.sampled_from(["a" * SHARED_MIN_CHARS, "b" * 300, "c" * (SHARED_MIN_CHARS - 1)])
    # Values that hold the same long strings several times, beside data that looks like the encoding's own.
    result.outputs.append(Envelope(None, {"shared": [0, [0]], "x": [data.draw(long), 0, data.draw(long)]}))
    result.writes.append(StateWrite("k", Envelope(None, [data.draw(long), {"result": data.draw(long)}])))
    encoded = _through_json(encode_step_result(result, task, GROUPS, share=share))
    assert decode_step_result(encoded, task, GROUPS) == result
    if not share:
        assert "shared" not in encoded


def test_a_tool_output_an_agent_step_holds_three_times_is_recorded_once() -> None:
    """An agent turn writes the tool's output to its conversation and yields a response holding it twice
    (Agent Framework's ``function_result``: as ``result`` and as a text item): the result records it once."""
    task = StepTask(4, 0, "assistant", "message", (Envelope(None, "question 4"),), ("assistant",))
    document = "document 4: " + "0123456789 " * 500
    conversation = [{"parts": [{"part_kind": "tool-return", "content": document}]}]
    response = {"messages": [{"contents": [{"type": "function_result", "result": document, "items": [document]}]}]}
    result = StepResult(
        writes=[StateWrite("conversation:assistant", Envelope(None, conversation))],
        outputs=[Envelope("agent_framework._types:AgentResponse", response)],
    )
    encoded = encode_step_result(result, task, GROUPS, share=True)
    assert len(json.dumps(encoded)) < len(document) + 1000  # once, not three times
    assert decode_step_result(_through_json(encoded), task, GROUPS) == result
    assert result.outputs[0].data["messages"][0]["contents"][0]["result"] == document  # the step's own: untouched


def test_a_step_shares_strings_only_with_a_workflow_that_asks() -> None:
    task = StepTask(1, 0, "e", "message", (Envelope(None, 1),), (None,))
    for share in (False, True):
        raw = _through_json(encode_step_input(StepInput(task, "", {}, share=share)))
        assert ("share" in raw) is share
        assert decode_step_input(raw, "e").share is share


def test_older_fully_spelled_out_payloads_still_decode() -> None:
    """Runs recorded before the compact format replay, and old workers' steps still run."""
    task = StepTask(3, 1, "j", "fan_in", (Envelope(None, 1), Envelope("m:T", {"x": 2})), ("a", "b"))
    request = PendingRequest("r1", "j", Envelope(None, "q"), "str", {"type": "string"}, 3, 60.0, "fail")
    result = StepResult(
        writes=[StateWrite("k", Envelope(None, [1])), StateWrite("gone", None)],
        sent=[
            RoutedMessage.one("j", Envelope(None, 5), "j", "fan_in:a,b->j"),
            RoutedMessage.one("k", Envelope(None, 6), "j"),
        ],
        outputs=[Envelope(None, "done")],
        requests=[request],
        events=[Envelope("m:Note", {"n": 1})],
    )
    old_result = json.loads(to_json(result))  # what the activity returned before: every field spelled out
    assert old_result["sent"][1]["fan_in"] is None and old_result["requests"][0]["created_at"] is None
    assert decode_step_result(old_result, task, GROUPS) == result

    old_input = json.loads(
        to_json({"graph": "g", "task": task, "run_id": "wf-1", "state_version": "0", "state": {}, "epoch": 2})
    )
    assert decode_step_input(old_input, "j") == StepInput(task, "0", {}, 2)
    old_input["state"] = None
    assert decode_step_input(old_input, "j").state is None


def test_a_plain_step_spells_out_nothing_the_other_side_knows() -> None:
    task = StepTask(4, 2, "w", "message", (Envelope(None, 7),), ("start",))
    assert encode_step_input(StepInput(task, "", {}, 0)) == {
        "superstep": 4,
        "index": 2,
        "messages": [{"data": 7}],
        "source_ids": ["start"],
    }
    groups = {"g": FanInGroup("g", ("w", "v"), "join")}
    result = StepResult(sent=[RoutedMessage.one("join", Envelope(None, 8), "w", "g")])
    assert encode_step_result(result, task, groups) == {"sent": [{"target_id": "join", "messages": [{"data": 8}]}]}
    assert encode_step_result(StepResult(), task, groups) == {}


def test_a_loop_step_names_the_type_it_sends_on_by_its_inputs_and_its_index_0_not_at_all() -> None:
    task = StepTask(5, 0, "tick", "message", (Envelope("m:Tick", {"n": 1}),), ("tick",))
    assert encode_step_input(StepInput(task, "", {}, 0)) == {
        "superstep": 5,
        "messages": [{"type": "m:Tick", "data": {"n": 1}}],
        "source_ids": ["tick"],
    }
    result = StepResult(
        sent=[RoutedMessage.one("tick", Envelope("m:Tick", {"n": 2}), "tick")], outputs=[Envelope("m:Stop", 1)]
    )
    raw = encode_step_result(result, task, {})
    assert raw["sent"] == [{"target_id": "tick", "messages": [{"type": 0, "data": {"n": 2}}]}]
    assert raw["outputs"] == [{"type": "m:Stop", "data": 1}]
    assert decode_step_result(_through_json(raw), task, {}) == result
    assert decode_step_input(_through_json(encode_step_input(StepInput(task, "", {}, 0))), "tick").task == task


def test_only_where_the_sends_sit_among_the_events_goes_unrecorded() -> None:
    # A send publishes no event of its own, so the order is recorded only when events, outputs or requests move.
    task = StepTask(5, 0, "tick", "message", (Envelope(None, 1),), ("tick",))
    sent, events = [RoutedMessage.one("tick", Envelope(None, 2), "tick")], [Envelope("m:E", 1), Envelope("m:E", 2)]
    assert "emitted" not in encode_step_result(StepResult(sent=sent, events=events, emitted=["e", "s1", "e"]), task, {})
    moved = StepResult(sent=sent, outputs=[Envelope(None, 3)], events=events, emitted=["e", "o", "s1", "e"])
    assert encode_step_result(moved, task, {})["emitted"] == ["e", "o", "s1", "e"]


class _Echo(Executor):
    @handler
    async def run(self, text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text)


def test_step_options_are_pinned_beside_the_topology_and_become_activity_options_in_one_place() -> None:
    plain = _Echo(id="plain")
    tuned = _Echo(
        id="tuned",
        options=ExecutorOptions(
            start_to_close_timeout=timedelta(seconds=30),
            task_queue="gpu",
            heartbeat_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=7),
        ),
    )
    fast = _Echo(id="fast", options=ExecutorOptions(local=True))
    quiet = _Echo(id="quiet", options=ExecutorOptions(heartbeat_timeout=None))
    wf = (
        WorkflowBuilder(start_executor=plain, name="opts")
        .add_edge(plain, tuned)
        .add_edge(plain, fast)
        .add_edge(plain, quiet)
        .build()
    )
    # Executor options are a Temporal concern: the engine's topology does not carry them.
    assert not hasattr(wf.topology, "executor_options")
    # Only what differs from the defaults is pinned.
    assert step_options(plain.options) == {}
    spec = step_options(tuned.options)
    assert spec["start_to_close_timeout"] == 30.0 and spec["task_queue"] == "gpu" and spec["heartbeat_timeout"] == 10.0
    # The defaults the docs promise are the ones a step gets: 5 minutes, at most 3 attempts, and a
    # 30 s heartbeat timeout (the step activity heartbeats by itself), so a cancel waits for the step.
    local, defaults = activity_options(step_options(plain.options))
    assert not local
    assert (
        defaults["start_to_close_timeout"] == DEFAULT_START_TO_CLOSE_TIMEOUT == ExecutorOptions().start_to_close_timeout
    )
    assert defaults["retry_policy"] == DEFAULT_RETRY_POLICY and DEFAULT_RETRY_POLICY.maximum_attempts == 3
    assert defaults["task_queue"] is None
    assert defaults["heartbeat_timeout"] == DEFAULT_HEARTBEAT_TIMEOUT == ExecutorOptions().heartbeat_timeout
    assert timedelta(seconds=30) == DEFAULT_HEARTBEAT_TIMEOUT
    assert defaults["cancellation_type"] == ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
    local, options = activity_options(spec)
    assert not local and options["task_queue"] == "gpu" and options["retry_policy"].maximum_attempts == 7
    assert options["heartbeat_timeout"] == timedelta(seconds=10)
    assert options["cancellation_type"] == ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
    local, options = activity_options(step_options(fast.options))
    assert local and "task_queue" not in options and "heartbeat_timeout" not in options
    # Heartbeats off (None or timedelta(0)): pinned as 0, no timeout, and a cancel is only tried.
    assert step_options(quiet.options) == {"heartbeat_timeout": 0.0}
    assert step_options(ExecutorOptions(heartbeat_timeout=timedelta(0))) == {"heartbeat_timeout": 0.0}
    local, options = activity_options(step_options(quiet.options))
    assert not local and options["heartbeat_timeout"] is None
    assert options["cancellation_type"] == ActivityCancellationType.TRY_CANCEL


def test_payloads_match_the_pydantic_converter_byte_for_byte() -> None:
    ours = PayloadConverter()
    theirs = pydantic_data_converter.payload_converter
    values: list[Any] = [
        RunInput(message={"q": [1, 2.5, None]}, keep_alive=True),
        {"a": None},
        "text",
        [1, 2],
        None,
        dataclasses.asdict(RunInput()),
    ]
    assert ours.to_payloads(values) == theirs.to_payloads(values)
    assert ours.from_payloads(theirs.to_payloads(values[:1]), [RunInput]) == values[:1]


def test_type_adapters_are_built_once_per_process_not_per_converter() -> None:
    payload = PayloadConverter().to_payloads([RunInput(message=1)])
    PayloadConverter().from_payloads(payload, [RunInput])
    hits = _adapter.cache_info().hits
    PayloadConverter().from_payloads(payload, [RunInput])  # a new converter: as in a new workflow run
    assert _adapter.cache_info().hits == hits + 1
