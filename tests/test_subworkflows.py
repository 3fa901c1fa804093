"""Sub-workflows in process: ``WorkflowExecutor`` runs a child graph as one executor of its parent.

What a user relies on: each input has a child run of its own; the child's
outputs become the executor's messages (or the parent's outputs); its
requests reach a parent executor (``SubWorkflowRequestMessage``) or whoever
runs the parent (``propagate_request``); nested children and several children
in one superstep work; a parent checkpoint holds its children, so a restore
brings back a waiting child and never asks an answered request again.
"""

from __future__ import annotations

import pytest

from temporal_workflows import (
    InMemoryCheckpointStorage,
    SubWorkflowRequestMessage,
    SubWorkflowResponseMessage,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowExecutor,
    WorkflowRunState,
    executor,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._graph.subworkflow import subworkflow_graphs
from temporal_workflows.errors import ExecutorFailedError, InvalidResponseError, UnknownRequestError, WorkflowError
from temporal_workflows.events import RequestInfoEvent, WorkflowOutputEvent, WorkflowWarningEvent
from tests.integration import subgraphs as g


def only_request(result: list[object]) -> RequestInfoEvent:
    (request,) = [e for e in result if isinstance(e, RequestInfoEvent)]
    return request


# -- several children, outputs as messages --------------------------------------------------------


async def test_each_input_runs_a_child_of_its_own_and_its_outputs_become_the_executors_messages() -> None:
    wf = g.build_basic()
    result = await wf.run(["a b", "c d e", ""])
    assert result.get_outputs() == ["'a b': 2 words", "'c d e': 3 words", "'': 0 words"]
    # three children in one superstep, then three tally steps: one per child's output
    steps = [e.executor_ids for e in result if e.type == "superstep_started"]
    assert steps == [["split"], ["counter"] * 3, ["tally"] * 3]
    assert result.get_final_state() is WorkflowRunState.IDLE
    # the children's state is their own, and a finished child leaves nothing in the parent's
    assert wf.state == {"tallied": ["a b", "c d e", ""]}
    assert not [k for k in wf._runner.engine.state if k.startswith("@counter/")]  # type: ignore[union-attr]


async def test_outputs_go_out_as_the_parents_own_with_allow_direct_output() -> None:
    child = WorkflowBuilder(start_executor=g.count).build()
    direct = WorkflowExecutor(child, "direct", allow_direct_output=True)
    wf = WorkflowBuilder(start_executor=g.split, name="direct_out").add_edge(g.split, direct).build()
    result = await wf.run(["one two"])
    (out,) = [e for e in result if isinstance(e, WorkflowOutputEvent)]
    assert out.executor_id == "direct" and out.data == g.Count(text="one two", words=2)


# -- requests ---------------------------------------------------------------------------------------


async def test_a_propagated_request_is_the_parents_and_its_answer_resumes_the_child() -> None:
    wf = g.build_propagating()
    first = await wf.run("bees")
    asked = only_request(first)
    assert asked.source_executor_id == "interview" and asked.data == g.Question(topic="bees", text="what about bees?")
    assert first.get_final_state() is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert [r.request_id for r in wf.pending_requests] == [asked.request_id]
    # the answer is validated against the child's response type, as any of the parent's requests
    with pytest.raises(InvalidResponseError):
        await wf.run(responses={asked.request_id: {"no": "text"}})
    done = await wf.run(responses={asked.request_id: {"text": "buzz"}})
    assert done.get_outputs() == ["parent got 'bees: buzz'"]
    assert wf.pending_requests == [] and done.get_final_state() is WorkflowRunState.IDLE


async def test_a_request_no_parent_executor_takes_reaches_the_outside_instead_of_being_lost() -> None:
    wf = g.build_unintercepted()  # the executor's only edge goes to an executor that takes str
    asked = only_request(await wf.run("owls"))
    assert asked.source_executor_id == "interview" and asked.data.topic == "owls"
    done = await wf.run(responses={asked.request_id: {"text": "hoot"}})
    assert done.get_outputs() == ["parent got 'owls: hoot'"]


async def test_nested_children_pass_the_innermost_request_out_and_its_answer_back_in() -> None:
    wf = g.build_nested()
    asked = only_request(await wf.run("bees"))
    assert asked.source_executor_id == "middle" and asked.data.topic == "BEES"
    done = await wf.run(responses={asked.request_id: g.Answer(text="hum")})
    assert done.get_outputs() == ["parent got '[BEES: hum]'"]


async def test_a_parent_executor_intercepts_the_childs_request_and_answers_it() -> None:
    result = await g.build_intercepting().run(["a@example.com", "b@evil.com"])
    assert result.get_outputs() == ["a@example.com accepted", "b@evil.com refused"]
    assert result.get_request_info_events() == []  # nobody outside was asked


async def test_an_intercepting_executor_may_ask_outside_itself_and_answer_the_child_later() -> None:
    wf = g.build_reviewing()
    asked = only_request(await wf.run(["owls"]))
    assert asked.source_executor_id == "reviewer"  # the parent's own request, not the child's
    done = await wf.run(responses={asked.request_id: {"text": "hoot"}})
    assert done.get_outputs() == ["owls: reviewed: hoot"]


async def test_a_response_for_a_request_no_child_waits_for_is_ignored_with_a_warning() -> None:
    @executor(id="twice")
    async def twice(request: SubWorkflowRequestMessage, ctx: WorkflowContext[SubWorkflowResponseMessage]) -> None:
        await ctx.send_message(request.create_response(g.Answer(text="first")))
        await ctx.send_message(request.create_response(g.Answer(text="again")))

    @executor(id="printer")
    async def printer(text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(text)

    interview = WorkflowExecutor(g.build_asking(), "interview")
    wf = (
        WorkflowBuilder(start_executor=interview, name="answers_twice")
        .add_edge(interview, twice)
        .add_edge(twice, interview)
        .add_edge(interview, printer)
        .build()
    )
    result = await wf.run("bees")
    assert result.get_outputs() == ["bees: first"]  # the first answer, in task order
    (warning,) = [e for e in result if isinstance(e, WorkflowWarningEvent)]
    assert warning.executor_id == "interview" and "answered already" in warning.message
    assert wf.pending_requests == []


def test_create_response_refuses_a_value_plainly_of_another_type() -> None:
    event = RequestInfoEvent(request_id="r1", source_executor_id="v", data="example.com", response_type="bool")
    request = SubWorkflowRequestMessage(source_event=event, executor_id="validation")
    assert request.create_response(True).data is True
    with pytest.raises(TypeError, match="r1"):
        request.create_response("yes")


async def test_a_response_that_does_not_validate_fails_the_executor_naming_the_request() -> None:
    @executor(id="wrong")
    async def wrong(request: SubWorkflowRequestMessage, ctx: WorkflowContext[SubWorkflowResponseMessage]) -> None:
        await ctx.send_message(SubWorkflowResponseMessage(data={"nothing": 1}, source_event=request.source_event))

    interview = WorkflowExecutor(g.build_asking(), "interview")
    wf = (
        WorkflowBuilder(start_executor=interview, name="answers_wrongly")
        .add_edge(interview, wrong)
        .add_edge(wrong, interview)
        .build()
    )
    with pytest.raises(ExecutorFailedError) as e:
        await wf.run("bees")
    assert e.value.executor_id == "interview" and e.value.error_type == "InvalidResponseError"


async def test_a_propagated_request_times_out_for_the_child_too() -> None:
    wf = g.build_deadline()
    asked = only_request(await wf.run("x"))
    assert asked.timeout == g.DEADLINE_SECONDS
    # Not synchronisation: a deadline applies at the next run() call after it has passed.
    import asyncio

    await asyncio.sleep(g.DEADLINE_SECONDS + 0.1)
    result = await wf.run(responses={})
    assert result.get_outputs() == ["timed out"]  # the child's own handler got RequestTimedOut
    assert not [e for e in result if isinstance(e, WorkflowWarningEvent)]


# -- failures -----------------------------------------------------------------------------------


async def test_a_failing_child_fails_its_executor_with_the_childs_error() -> None:
    with pytest.raises(ExecutorFailedError) as e:
        await g.build_failing().run("x")
    assert e.value.executor_id == "broken" and e.value.superstep == 2
    assert e.value.error_type == "ExecutorFailedError"
    assert "executor 'explode' failed in superstep 1: ValueError: cannot handle 'x'" in str(e.value)


# -- checkpoints --------------------------------------------------------------------------------


async def test_a_restored_checkpoint_brings_back_the_waiting_child_and_its_request() -> None:
    store = InMemoryCheckpointStorage()
    wf = g.build_propagating()
    asked = only_request(await wf.run("bees", checkpoint_storage=store))
    latest = await store.get_latest(workflow_name="sw_propagate")
    assert latest is not None and set(latest.pending_requests) == {asked.request_id}
    assert [k for k in latest.state if k.startswith("@interview/sub/")]  # the child is in the checkpoint
    done = await wf.run(responses={asked.request_id: {"text": "buzz"}}, checkpoint_storage=store)
    assert done.get_outputs() == ["parent got 'bees: buzz'"]

    # A fresh instance (another process, say) resumes the checkpoint: the child waits again.
    again = g.build_propagating()
    restored = await again.run(checkpoint_id=latest.checkpoint_id, checkpoint_storage=store)
    assert [e.request_id for e in restored.get_request_info_events()] == [asked.request_id]
    answered = await again.run(responses={asked.request_id: {"text": "drone"}}, checkpoint_storage=store)
    assert answered.get_outputs() == ["parent got 'bees: drone'"]


async def test_after_restoring_a_checkpoint_taken_after_the_answer_the_request_is_not_asked_again() -> None:
    store = InMemoryCheckpointStorage()
    wf = g.build_reviewing()
    asked = (await wf.run(["owls", "bats"], checkpoint_storage=store)).get_request_info_events()
    pending = {r.data.topic: r.request_id for r in wf.pending_requests}
    assert set(pending) == {"owls", "bats"} and {r.request_id for r in asked} == set(pending.values())
    # answer one of the two; the other child keeps waiting
    result = await wf.run(responses={pending["owls"]: {"text": "hoot"}}, checkpoint_storage=store)
    assert result.get_outputs() == ["owls: reviewed: hoot"]
    after = await store.get_latest(workflow_name="sw_review")
    assert after is not None
    fresh = g.build_reviewing()
    restored = await fresh.run(checkpoint_id=after.checkpoint_id, checkpoint_storage=store)
    # only the unanswered request is announced again, and the answered one is gone for good
    assert [e.request_id for e in restored.get_request_info_events()] == [pending["bats"]]
    with pytest.raises(UnknownRequestError):
        await fresh.run(responses={pending["owls"]: {"text": "again"}}, checkpoint_storage=store)
    done = await fresh.run(responses={pending["bats"]: {"text": "squeak"}}, checkpoint_storage=store)
    assert done.get_outputs() == ["bats: reviewed: squeak"]
    assert fresh.pending_requests == []


# -- building -------------------------------------------------------------------------------------


def test_unnamed_children_are_named_after_their_place_and_recorded_in_the_topology() -> None:
    wf = g.build_nested()
    middle = wf.executors["middle"]
    assert isinstance(middle, WorkflowExecutor)
    assert wf.topology.subworkflows == {"middle": "sw_nested.middle"}
    assert middle.workflow.topology.subworkflows == {"inner": "sw_nested.middle.inner"}
    assert [w.name for w in subworkflow_graphs([wf])] == ["sw_nested", "sw_nested.middle", "sw_nested.middle.inner"]


def test_a_changed_child_changes_the_parents_signature() -> None:
    def parent(child: Workflow) -> Workflow:
        return WorkflowBuilder(start_executor=g.split, name="p").add_edge(g.split, WorkflowExecutor(child, "x")).build()

    same = parent(WorkflowBuilder(start_executor=g.count).build()).graph_signature_hash
    assert parent(WorkflowBuilder(start_executor=g.count).build()).graph_signature_hash == same
    changed_child = WorkflowBuilder(start_executor=g.count).add_edge(g.count, g.tally).build()
    assert parent(changed_child).graph_signature_hash != same


def test_the_executor_takes_what_the_child_takes_and_sends_what_it_yields() -> None:
    x = WorkflowExecutor(g.build_asking(), "x")
    assert x.input_types == [str, SubWorkflowResponseMessage]
    assert x.output_types == [str, SubWorkflowRequestMessage]
    assert WorkflowExecutor(g.build_asking(), "y", propagate_request=True).output_types == [str]
    assert WorkflowExecutor(g.build_counting(), "z", allow_direct_output=True).output_types == []
    with pytest.raises(TypeError, match="built Workflow"):
        WorkflowExecutor(WorkflowBuilder(start_executor=g.count), "w")  # type: ignore[arg-type]


async def test_a_fan_in_starts_one_child_with_the_list_of_messages() -> None:
    @executor(id="fork")
    async def fork(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text)

    @executor(id="left")
    async def left(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"{text} left")

    @executor(id="right")
    async def right(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"{text} right")

    @executor(id="joined")
    async def joined(texts: list[str], ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(" + ".join(texts))

    join = WorkflowExecutor(WorkflowBuilder(start_executor=joined).build(), "join", allow_direct_output=True)
    wf = (
        WorkflowBuilder(start_executor=fork, name="fan_in_child")
        .add_fan_out_edges(fork, [left, right])
        .add_fan_in_edges([left, right], join)
        .build()
    )
    assert (await wf.run("go")).get_outputs() == ["go left + go right"]


def test_a_fan_in_of_mixed_types_cannot_start_a_child() -> None:
    from temporal_workflows._engine.serde import Envelope
    from temporal_workflows._engine.subworkflows import list_envelope

    assert list_envelope([Envelope(None, "a"), Envelope(None, "b")], "x") == Envelope(None, ["a", "b"])
    assert list_envelope([Envelope("m:T", {"a": 1})], "x") == Envelope("list[m:T]", [{"a": 1}])
    with pytest.raises(WorkflowError, match="different types"):
        list_envelope([Envelope(None, "a"), Envelope("m:T", {})], "x")


def test_the_example_in_docs_subworkflows_runs_and_prints_what_it_says() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "subworkflows.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['a@example.com accepted', 'b@evil.com refused']"


async def test_a_forged_child_snapshot_fails_the_executor_clearly_when_the_child_resumes() -> None:
    store = InMemoryCheckpointStorage()
    wf = g.build_propagating()
    asked = only_request(await wf.run("bees", checkpoint_storage=store))
    latest = await store.get_latest(workflow_name="sw_propagate")
    assert latest is not None
    (key,) = [k for k in latest.state if k.startswith("@interview/sub/")]
    forged_state = dict(latest.state)
    forged_state[key] = Envelope(None, {"pending_requests": {asked.request_id: {}}, "superstep": "many"})
    forged = latest.model_copy(update={"checkpoint_id": "forged", "state": forged_state})
    await store.save(forged)
    again = g.build_propagating()
    await again.run(checkpoint_id="forged", checkpoint_storage=store)
    with pytest.raises(ExecutorFailedError) as e:
        await again.run(responses={asked.request_id: {"text": "buzz"}}, checkpoint_storage=store)
    assert e.value.executor_id == "interview" and e.value.error_type == "WorkflowError"
    assert "snapshot is not a checkpoint" in str(e.value)
