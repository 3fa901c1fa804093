"""Bad input in process: refused or failed clearly, exactly as on Temporal, and nothing committed is lost.

docs/bad-input.md lists every kind of bad input, what happens and the tests
that show it; this module holds the in-process ones not shown elsewhere.
The graphs are the ones the integration tests run on Temporal
(``tests/integration/graphs.py``), built afresh, so the two hosts are held to
the same behaviour.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowRunState,
    handler,
    response_handler,
)
from temporal_workflows._engine.limits import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    ENV_MAX_PAYLOAD_BYTES,
    MIN_MAX_PAYLOAD_BYTES,
    TEMPORAL_BLOB_SIZE_LIMIT,
    check_payload,
    check_step_input,
    max_payload_bytes,
)
from temporal_workflows._engine.machine import StepTask
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.errors import (
    ExecutorFailedError,
    NotSerializableError,
    PayloadTooLargeError,
    UnknownRequestError,
    WorkflowError,
)
from tests.integration import graphs

# -- payloads larger than Temporal accepts ------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "what", "size"),
    [
        (graphs.Sizes(state=3_000_000), "state key 'report'", 3_000_002),
        (graphs.Sizes(message=3_000_000), "message to 'archive'", 3_000_002),
        (graphs.Sizes(output=3_000_000), "output", 3_000_002),
        (graphs.Sizes(state=1_200_000, keys=2), "the step's result", None),
    ],
    ids=["state", "message", "output", "total"],
)
async def test_a_step_result_over_the_limit_fails_naming_executor_and_value_and_commits_nothing(
    sizes: graphs.Sizes, what: str, size: int | None
) -> None:
    wf = graphs.sizes_graph()
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run(sizes)
    assert info.value.executor_id == "hoard" and info.value.superstep == 2
    err = info.value.__cause__
    assert isinstance(err, PayloadTooLargeError)
    assert err.executor_id == "hoard" and err.what == what and err.limit == DEFAULT_MAX_PAYLOAD_BYTES
    assert err.size > DEFAULT_MAX_PAYLOAD_BYTES and (size is None or err.size == size)
    message = str(err)
    assert message.startswith(f"executor 'hoard': {what} is {err.size:,} bytes")
    assert f"{DEFAULT_MAX_PAYLOAD_BYTES:,} bytes" in message and ENV_MAX_PAYLOAD_BYTES in message
    assert "external storage — S3/GCS/a database — and put a reference in state" in message
    if what == "the step's result":  # no single value is too large: the largest ones are named
        assert "state key 'report' (1,200,002 bytes)" in message and "state key 'report1'" in message
    # Superstep 1's commit is intact; nothing of the failed superstep was committed.
    assert wf.state == {"asked": sizes.model_dump()}
    assert info.value.result is not None and info.value.result.get_outputs() == []
    assert wf.run_state is WorkflowRunState.FAILED
    # The same workflow runs again, with data that fits.
    again = await wf.run(graphs.Sizes(state=10, message=10, output=10))
    assert again.get_outputs() == ["o" * 10, "archived 10"]
    assert again.state == {"asked": graphs.Sizes(state=10, message=10, output=10).model_dump(), "report": "r" * 10}


async def test_a_step_result_just_under_the_limit_passes() -> None:
    """Two values that add up to just under the limit, field names and all (the exact measure's path)."""
    half = (DEFAULT_MAX_PAYLOAD_BYTES - 1024) // 2
    result = await graphs.sizes_graph().run(graphs.Sizes(state=half, keys=2))
    assert len(result.state["report"]) == len(result.state["report1"]) == half


def test_the_default_limit_is_just_under_temporals() -> None:
    assert TEMPORAL_BLOB_SIZE_LIMIT - 128 * 1024 < DEFAULT_MAX_PAYLOAD_BYTES < TEMPORAL_BLOB_SIZE_LIMIT == 2 * 1024**2


async def test_the_limit_can_be_set_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_PAYLOAD_BYTES, "100000")
    assert max_payload_bytes() == 100_000
    wf = graphs.sizes_graph()
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run(graphs.Sizes(message=100_000))
    err = info.value.__cause__
    assert isinstance(err, PayloadTooLargeError) and err.limit == 100_000 and err.what == "message to 'archive'"
    assert "payload limit of 100,000 bytes" in str(err)
    assert (await wf.run(graphs.Sizes(message=99_000))).get_outputs() == ["archived 99000"]
    # Raised for a cluster that accepts more: what was too large now passes.
    monkeypatch.setenv(ENV_MAX_PAYLOAD_BYTES, str(4 * 1024**2))
    assert (await wf.run(graphs.Sizes(state=3_000_000))).state["report"] == "r" * 3_000_000


@pytest.mark.parametrize("bad", ["lots", "0", "-5", "2.5", str(MIN_MAX_PAYLOAD_BYTES - 1)])
async def test_a_limit_that_is_not_a_whole_number_of_at_least_64_kib_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv(ENV_MAX_PAYLOAD_BYTES, bad)
    with pytest.raises(WorkflowError, match=f"{ENV_MAX_PAYLOAD_BYTES}='{bad}' must be a whole number of bytes"):
        max_payload_bytes()
    # Never silently ignored: the first result big enough to need the limit says so.
    with pytest.raises(ExecutorFailedError) as info:
        await graphs.sizes_graph().run(graphs.Sizes(state=MIN_MAX_PAYLOAD_BYTES))
    assert ENV_MAX_PAYLOAD_BYTES in str(info.value) and "at least 65,536" in str(info.value)


def test_client_input_is_checked_up_to_and_including_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the client checks before it sends a start message, message or response."""
    monkeypatch.setenv(ENV_MAX_PAYLOAD_BYTES, str(MIN_MAX_PAYLOAD_BYTES))
    check_payload("x" * (MIN_MAX_PAYLOAD_BYTES - 2), what="start message")  # exactly the limit, quotes included
    with pytest.raises(PayloadTooLargeError) as info:
        check_payload("x" * (MIN_MAX_PAYLOAD_BYTES - 1), what="start message")
    err = info.value
    assert (err.what, err.size, err.limit, err.executor_id) == ("start message", 65_537, 65_536, None)
    assert str(err).startswith("start message is 65,537 bytes as JSON, over the payload limit of 65,536 bytes")


def test_a_step_input_adding_up_past_the_limit_is_named_before_it_is_scheduled() -> None:
    """For the hosts: each chunk fitted where it was sent, but a fan-in target gets them all in one input."""
    chunks = tuple(Envelope(None, c * 800_000) for c in "123")
    fan_in = StepTask(3, 0, "gather", "fan_in", chunks, ("chunk1", "chunk2", "chunk3"))
    with pytest.raises(PayloadTooLargeError) as info:
        check_step_input(fan_in)
    err = info.value
    assert err.executor_id == "gather" and err.size == 3 * 800_002 + 4
    assert err.what == "its fan-in input (3 messages from ['chunk1', 'chunk2', 'chunk3'])"
    check_step_input(StepTask(3, 0, "gather", "fan_in", chunks[:2], ("chunk1", "chunk2")))


# -- values JSON cannot carry ----------------------------------------------------------------------


async def test_an_unserializable_state_value_fails_naming_executor_and_key_as_on_temporal() -> None:
    sizes = graphs.Sizes(unserializable_key="tags")
    wf = graphs.sizes_graph()
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run(sizes)
    err = info.value.__cause__
    assert isinstance(err, NotSerializableError) and info.value.executor_id == "hoard"
    assert "state key 'tags'" in str(err) and "'hoard'" in str(err) and "_thread.lock" in str(err)
    assert wf.state == {"asked": sizes.model_dump()}


# -- responses ------------------------------------------------------------------------------------------


class Question(BaseModel):
    text: str


class Answer(BaseModel):
    approved: bool


class Reviewer(Executor):
    """Asks one question; the answer becomes the output."""

    @handler
    async def ask(self, text: str, ctx: WorkflowContext) -> None:
        ctx.set_state("asked", text)
        await ctx.request_info(Question(text=text), Answer)

    @response_handler
    async def answered(self, q: Question, a: Answer, ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("answers", ctx.get_state("answers", 0) + 1)
        await ctx.yield_output(f"{q.text}: {'yes' if a.approved else 'no'}")


def review() -> Workflow:
    return WorkflowBuilder(start_executor=Reviewer("reviewer")).build()


async def test_answering_a_request_twice_is_refused_naming_it_and_changes_nothing() -> None:
    wf = review()
    (req,) = (await wf.run("ship it?")).get_request_info_events()
    first = await wf.run(responses={req.request_id: {"approved": True}})
    assert first.get_outputs() == ["ship it?: yes"]
    with pytest.raises(UnknownRequestError) as info:
        await wf.run(responses={req.request_id: {"approved": False}})
    assert info.value.request_id == req.request_id and req.request_id in str(info.value)
    assert "pending request ids: none" in str(info.value)
    assert wf.state == {"asked": "ship it?", "answers": 1} and wf.run_state is WorkflowRunState.IDLE
    # The run still takes new work.
    (again,) = (await wf.run("and this?")).get_request_info_events()
    assert (await wf.run(responses={again.request_id: Answer(approved=False)})).get_outputs() == ["and this?: no"]


# -- a cycle with no exit -------------------------------------------------------------------------------


async def test_a_cycle_without_exit_stops_at_max_iterations_keeping_every_committed_lap() -> None:
    wf = graphs.laps_graph()
    with pytest.raises(WorkflowError, match="max_iterations=5"):
        await wf.run(0)
    assert wf.state == {"laps": 5} and wf.run_state is WorkflowRunState.FAILED


async def test_outputs_adding_up_past_the_limit_release_the_oldest_and_every_one_is_an_output_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule Temporal needs (a run's result is one payload) is the shared driver's: the run completes, keeps
    the newest outputs that fit and counts the others, each of which was an ``output`` event of its call."""
    from temporal_workflows import InMemoryCheckpointStorage, WorkflowBuilder

    monkeypatch.setenv(ENV_MAX_PAYLOAD_BYTES, "100000")
    storage = InMemoryCheckpointStorage()
    wf = (
        WorkflowBuilder(start_executor=graphs.emit, name="emit_outputs", checkpoint_storage=storage)
        .add_edge(graphs.emit, graphs.emit)
        .build()
    )
    result = await wf.run(graphs.Emit(n=1, upto=4, size=40_000))
    assert [o[:1] for o in result.get_outputs()] == ["1", "2", "3", "4"]  # get_outputs(): this call's events
    latest = await storage.get_latest(workflow_name="emit_outputs")
    assert latest is not None
    assert [o.value.data[:1] for o in latest.outputs] == ["3", "4"] and latest.outputs_released == 2
