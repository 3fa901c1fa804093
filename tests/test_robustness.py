"""Issue 23, in process and the pure parts the Temporal host shares: cause chains, long ids, large state."""

from __future__ import annotations

import json

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

from temporal_workflows._engine.ids import MAX_ID_BYTES, bounded_id
from temporal_workflows._engine.limits import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    OMITTED_KEY,
    STATE_PAYLOADS,
    TRUNCATED_KEY,
    StateSizes,
    state_entry_size,
    truncated_requests,
    truncated_state,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.errors import ExecutorFailedError, PayloadTooLargeError
from temporal_workflows.events import ExecutorFailedEvent
from temporal_workflows.temporal._converter import json_data_converter
from temporal_workflows.temporal._failures import (
    MAX_CAUSE_CHAIN,
    CycleSafeFailureConverterWithEncodedAttributes,
    sever_cause_cycles,
)
from temporal_workflows.temporal._protocol import state_from_text, state_page_text, step_activity_name
from tests.integration import robust_graphs
from tests.integration.agent_graphs import AVAILABLE, GRAPHS


def _chain(e: BaseException | None) -> list[str]:
    """The messages of a failure's cause chain, as the SDK would convert it (raises RecursionError on a loop)."""
    assert e is not None
    failure = Failure()
    DataConverter.default.failure_converter.to_failure(e, DataConverter.default.payload_converter, failure)
    messages: list[str] = []
    node: Failure | None = failure
    while node is not None and node.message:
        messages.append(node.message)
        node = node.cause if node.HasField("cause") else None
    return messages


@pytest.mark.parametrize("kind", ["cause", "context", "deep"])
def test_the_sdk_converts_a_looping_or_deep_cause_chain_once_it_is_severed(kind: str) -> None:
    error = robust_graphs.looping_error(kind)
    with pytest.raises(RecursionError):
        _chain(robust_graphs.looping_error(kind))  # what the SDK did with the raw error
    chain = _chain(sever_cause_cycles(error))
    assert chain[0] == str(error)
    assert len(chain) <= MAX_CAUSE_CHAIN + 1


@pytest.mark.parametrize("encoded", [False, True])
@pytest.mark.parametrize("kind", ["cause", "context", "deep"])
def test_the_plugins_failure_converters_report_a_looping_chain_as_its_error(kind: str, encoded: bool) -> None:
    converter = CycleSafeFailureConverterWithEncodedAttributes() if encoded else json_data_converter.failure_converter
    error = robust_graphs.looping_error(kind)
    failure = Failure()
    converter.to_failure(error, DataConverter.default.payload_converter, failure)
    back = converter.from_failure(failure, DataConverter.default.payload_converter)
    assert isinstance(back, ApplicationError) and back.message == str(error)


def test_severing_leaves_a_short_chain_as_it_is() -> None:
    inner = OSError("disk")
    outer = RuntimeError("save failed")
    outer.__cause__ = inner
    assert sever_cause_cycles(outer) is outer
    assert outer.__cause__ is inner and _chain(outer) == ["save failed", "disk"]


@pytest.mark.parametrize(
    ("kind", "error_type", "detail"),
    [
        ("cause", "ValueError", "its own cause"),
        ("context", "ApplicationError", "a looping context"),
        ("deep", "RuntimeError", "the top"),
    ],
)
async def test_a_step_error_with_a_looping_cause_chain_is_reported_as_itself(
    kind: str, error_type: str, detail: str
) -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await robust_graphs.cause_cycles.run(kind)
    assert info.value.executor_id == "looping"
    assert info.value.error_type == error_type and info.value.detail.startswith(detail)


@pytest.mark.skipif(not AVAILABLE, reason="needs the agent extras")
async def test_an_agents_model_error_is_reported_with_its_own_type_and_message_and_is_not_its_own_cause() -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await GRAPHS["exploding"].run("zz-exploding hello")
    error = info.value
    assert error.executor_id == "volatile"
    assert (error.error_type, error.detail) == ("UpstreamModelError", "the upstream model exploded")
    assert error.original is not None and error.original.__cause__ is not error.original


# -- ids within Temporal's limit (item 2) -------------------------------------------------------


def test_an_id_that_fits_is_left_as_it_is_byte_for_byte() -> None:
    fitting = "p" * (MAX_ID_BYTES - 10) + "/x/1.0"
    assert bounded_id(fitting) == fitting
    assert bounded_id("é" * (MAX_ID_BYTES // 2)) == "é" * (MAX_ID_BYTES // 2)  # 1,000 bytes exactly


@pytest.mark.parametrize("readable", ["r" * 992 + "/child/1.0", "é" * 700 + "/x/2.0", "a/" * 3000])
def test_an_id_too_long_is_bounded_stable_distinct_and_readable_at_both_ends(readable: str) -> None:
    bounded = bounded_id(readable)
    assert len(bounded.encode()) <= MAX_ID_BYTES
    assert bounded == bounded_id(readable)  # a pure function: the same on every replay and in every process
    assert bounded != bounded_id(readable + "0") and bounded != bounded_id(readable[:-1])
    assert readable.startswith(bounded[:100]) and readable.endswith(bounded[-100:])


def test_unnamed_children_nested_deep_get_type_names_within_the_limit() -> None:
    from temporal_workflows.temporal import TemporalWorkflowsPlugin

    graphs = TemporalWorkflowsPlugin([robust_graphs.deep]).graphs
    assert len(graphs) == robust_graphs.DEPTH + 1
    assert len({g.name for g in graphs}) == len(graphs)
    for g in graphs:
        assert g.name is not None and len(g.name.encode()) <= MAX_ID_BYTES
        for eid in g.graph.executors:
            assert len(step_activity_name(g.name, eid).encode()) <= MAX_ID_BYTES


async def test_sub_workflows_nested_deep_under_long_executor_ids_run_in_process() -> None:
    assert (await robust_graphs.deep.run("hi")).get_outputs() == ["leaf:hi"]


# -- committed state past one payload (item 3) -----------------------------------------------------


async def test_state_adding_up_past_the_limit_fails_the_step_that_grows_it_and_commits_nothing() -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await robust_graphs.large_state.run(5)
    error = info.value
    assert (error.executor_id, error.superstep, error.error_type) == ("write_e", 5, "PayloadTooLargeError")
    assert isinstance(error.original, PayloadTooLargeError)
    assert error.original.what == "the run's committed state" and error.original.size > error.original.limit
    # The state as a whole may take STATE_PAYLOADS payloads (four fit: each step read them), not more.
    assert error.original.limit == STATE_PAYLOADS * DEFAULT_MAX_PAYLOAD_BYTES
    assert "'e' (1,800,037 bytes, by 'write_e'), beside 'a' (1,800,037 bytes), 'b' (1,800,037 bytes)" in error.detail
    assert error.result is not None
    failed = [e for e in error.result if isinstance(e, ExecutorFailedEvent)]
    assert [(e.executor_id, e.error_type) for e in failed] == [("write_e", "PayloadTooLargeError")]


async def test_state_that_fits_is_committed_and_a_commit_that_shrinks_state_always_passes() -> None:
    assert (await robust_graphs.large_state.run(0)).get_outputs() == ["wrote ['a', 'b', 'c', 'd', 'e']"]
    sizes = StateSizes()
    state = {k: Envelope(None, k * 1_000_000) for k in "abc"}
    sizes.sync(state)
    total, new = sizes.after({"a": Envelope(None, "small")})
    assert total < sizes.total and new["a"] < 100
    total, new = sizes.after({"d": None, "a": None})
    assert total == sizes.total - state_entry_size("a", state["a"]) and new == {"d": 0, "a": 0}


async def test_waiting_children_adding_up_past_the_limit_fail_the_step_in_process_too() -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await robust_graphs.hoarding.run(7)
    assert (info.value.executor_id, info.value.error_type) == ("hoarders", "PayloadTooLargeError")
    assert sum(f"'@hoarders/sub/2.{i}' (1,300," in info.value.detail for i in range(7)) == 5  # the five largest
    waiting = await robust_graphs.hoarding.run(6)  # six such children fit (7.8 MB)
    assert len(waiting.get_request_info_events()) == 6


def test_a_state_query_answer_too_large_is_cut_with_a_note_naming_what_it_leaves_out() -> None:
    state = {"small": 1, "a": "a" * 900_000, "b": "b" * 900_000, "c": "c" * 900_000, "tail": 2}
    answer = truncated_state(state, DEFAULT_MAX_PAYLOAD_BYTES)
    assert list(answer) == ["small", "a", "b", TRUNCATED_KEY]
    note = answer[TRUNCATED_KEY]
    assert note.startswith("2 of 5 state keys") and "'c' (900," in note
    assert len(json.dumps(answer)) <= DEFAULT_MAX_PAYLOAD_BYTES
    assert truncated_state({"a": 1}, DEFAULT_MAX_PAYLOAD_BYTES) == {"a": 1}


def test_open_requests_too_large_together_keep_every_id_and_lose_the_largest_data_first() -> None:
    requests = [
        {"request_id": f"r{i}", "data": "x" * size, "response_schema": {"type": "string"}}
        for i, size in enumerate((900_000, 950_000, 10, 900_000, 900_000))
    ]
    answer = truncated_requests(requests, DEFAULT_MAX_PAYLOAD_BYTES)
    assert [r["request_id"] for r in answer] == ["r0", "r1", "r2", "r3", "r4"]
    assert [r["data"] is None for r in answer] == [True, True, False, False, False]  # largest, then in order
    assert "950,002 bytes" in answer[1][OMITTED_KEY] and answer[1]["response_schema"] == {"type": "string"}
    assert len(json.dumps(answer)) <= DEFAULT_MAX_PAYLOAD_BYTES
    assert truncated_requests(requests[:2], DEFAULT_MAX_PAYLOAD_BYTES) == requests[:2]


def test_state_pages_are_ascii_and_carry_the_state_back_whole() -> None:
    # Offsets into the text are byte offsets (a page is a slice), whatever the state holds.
    state = {
        "conversation:librarian": Envelope(None, [{"text": 'naïve “quotes” \\ and " 📚'}] * 3),
        "when": Envelope("datetime", "2026-11-26T01:00:00+00:00"),
        "empty": Envelope(None, None),
    }
    text = state_page_text(state)
    assert text.isascii()
    pages = [text[i : i + 7] for i in range(0, len(text), 7)]
    assert state_from_text("".join(pages)) == state
    assert state_from_text(state_page_text({})) == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("count", Envelope(None, 100)),
        ('ké"y', Envelope("m.T", {"a": [1, 2.5, None, "x\u2028"]})),
        ("", Envelope(None, None)),
    ],
)
def test_a_state_entry_is_measured_as_its_key_type_and_value_as_json(key: str, value: Envelope) -> None:
    """One serialization of key and value together measures what the two measured apart did."""
    from temporal_workflows._engine.limits import _FRAMING_PER_ENTRY, json_size

    expected = json_size(key) + len(value.type or "") + json_size(value.data) + _FRAMING_PER_ENTRY
    assert state_entry_size(key, value) == expected
