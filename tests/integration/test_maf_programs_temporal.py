"""Agent Framework programs on the durable twin (issue #25, items 2, 4, 5): what they print in process.

Each program is written against ``run()``'s signatures and runs on the
in-process workflow and on its durable twin (``on_temporal``), against the real
dev server.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack
from typing import Any

import pytest
from temporalio.client import Client

import temporal_workflows
from temporal_workflows import WorkflowRunState
from temporal_workflows.temporal import DurableWorkflow
from tests.conformance import scenarios as sc
from tests.conftest import TASK_QUEUE
from tests.integration.test_maf_samples_temporal import Host
from tests.test_maf_programs import checkpoint_with_resume

pytestmark = pytest.mark.usefixtures("worker")


def twin(client: Client, **kwargs: Any) -> DurableWorkflow:
    return sc.human.on_temporal(client, task_queue=TASK_QUEUE, **kwargs)


# -- 5. run(checkpoint_id=...) on the durable twin ---------------------------------------------------


async def test_restoring_a_checkpoint_of_an_open_run_resets_it_and_returns_when_it_is_idle_again(
    client: Client,
) -> None:
    durable = twin(client, checkpoint_every=1)
    first = await durable.run("bees")
    (asked,) = first.get_request_info_events()
    assert durable.handle is not None
    listed = await durable.handle.checkpoints()
    entry = next(c["checkpoint_id"] for c in listed if c["superstep"] == 0)
    for _ in range(3):  # each reset continues the run as new; the update must have replied first
        again = await durable.run(checkpoint_id=entry)
        assert again.get_final_state() == WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
        (asked_again,) = again.get_request_info_events()
        assert asked_again.data == asked.data
    done = await durable.run(responses={asked_again.request_id: sc.answer_question("asker", {"text": asked.data.text})})
    assert done.get_final_state() == WorkflowRunState.IDLE and len(done.get_outputs()) == 1


async def test_a_new_object_given_only_a_checkpoint_id_finds_the_run_that_took_it(
    client: Client, checkpoint_db: Any
) -> None:
    """MAF's resume: a rebuilt workflow and ``run(checkpoint_id=cp, checkpoint_storage=storage)``, no ``id=``."""
    first = twin(client, checkpoint_every=1)
    asked = (await first.run("owls")).get_request_info_events()
    assert first.handle is not None
    taken = (await first.handle.checkpoints())[-1]["checkpoint_id"]
    rebuilt = twin(client)  # another object, as in another process: it knows no workflow id
    again = await rebuilt.run(checkpoint_id=taken, checkpoint_storage=checkpoint_db)  # the run is open: a reset
    assert rebuilt.handle is not None and rebuilt.handle.id == first.handle.id
    assert [r.data for r in again.get_request_info_events()] == [asked[0].data]
    done = await rebuilt.run(responses={again.get_request_info_events()[0].request_id: sc.Answer(text="hoot")})
    assert done.get_outputs() and done.get_final_state() == WorkflowRunState.IDLE
    third = twin(client)  # the run is closed now: started again from the checkpoint under its id
    restored = await third.run(checkpoint_id=taken, checkpoint_storage=checkpoint_db)
    assert third.handle is not None and third.handle.id == first.handle.id
    assert restored.get_final_state() == WorkflowRunState.IDLE_WITH_PENDING_REQUESTS


async def test_a_run_that_closes_between_the_check_and_the_reset_is_started_again_from_the_checkpoint(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporal_workflows.temporal._client import durable as _durable

    durable = twin(client, checkpoint_every=1, id=f"race-{uuid.uuid4().hex[:8]}")
    first = await durable.run("moths")
    assert durable.handle is not None
    taken = (await durable.handle.checkpoints())[-1]["checkpoint_id"]
    answer = sc.Answer(text="flutter")
    await durable.run(responses={first.get_request_info_events()[0].request_id: answer})  # the run completes
    checks = iter([True])  # the twin's check still sees it open (it closed just after); later checks are real

    real = _durable._is_open

    async def racing(handle: Any) -> bool:
        return next(checks, None) or await real(handle)

    monkeypatch.setattr(_durable, "_is_open", racing)
    restored = await durable.run(checkpoint_id=taken)
    assert restored.get_final_state() == WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert [r.data for r in restored.get_request_info_events()] == [r.data for r in first.get_request_info_events()]


# -- 4. run(responses=...) with several answers ------------------------------------------------------


async def answer_all(wf: Any) -> tuple[list[Any], list[list[str]], WorkflowRunState]:
    first = await wf.run("bees owls wasps")
    asked = first.get_request_info_events()
    assert len(asked) == 3
    done = await wf.run(responses={r.request_id: sc.answer_question("quiz", {"text": r.data.text}) for r in asked})
    steps = [e.executor_ids for e in done if e.type == "superstep_started"]
    return sorted(done.get_outputs()), steps, done.get_final_state()


async def test_several_answers_in_one_call_are_applied_together_and_the_call_returns_when_idle_again(
    client: Client,
) -> None:
    local = await answer_all(sc.two_questions)
    for _ in range(3):  # the race was timing-dependent: every attempt must see every output
        durable = await answer_all(sc.two_questions.on_temporal(client, task_queue=TASK_QUEUE))
        assert durable == local
    outputs, steps, state = local
    assert steps == [["quiz"] * 3, ["minutes"] * 3] and state == WorkflowRunState.IDLE and len(outputs) == 3


async def test_answers_given_together_are_refused_together(client: Client) -> None:
    from temporal_workflows.errors import InvalidResponseError, UnknownRequestError

    durable = sc.two_questions.on_temporal(client, task_queue=TASK_QUEUE)
    asked = (await durable.run("bees owls")).get_request_info_events()
    good = sc.Answer(text="buzz")
    with pytest.raises(UnknownRequestError):
        await durable.run(responses={asked[0].request_id: good, "no-such-request": good})
    with pytest.raises(InvalidResponseError):
        await durable.run(responses={asked[0].request_id: good, asked[1].request_id: {"not": "an answer"}})
    assert durable.handle is not None
    assert len(await durable.handle.pending_requests()) == 2  # neither was taken
    done = await durable.run(responses={r.request_id: good for r in asked})
    assert len(done.get_outputs()) == 2


# -- 9. structured output on Temporal --------------------------------------------------------------------


async def test_an_agents_structured_output_is_parsed_on_temporal_as_in_process(client: Client) -> None:
    from agent_framework import AgentResponse

    from tests.integration.agent_graphs import GRAPHS, Verdict

    wf = GRAPHS["structured"]
    local = (await wf.run("judge this")).get_outputs()
    durable = (await wf.on_temporal(client, task_queue=TASK_QUEUE).run("judge this")).get_outputs()
    for outputs in (local, durable):
        response, read = outputs
        assert isinstance(response, AgentResponse) and response.value == Verdict(ok=True, reason="fine")
        assert read == "Verdict Verdict(ok=True, reason='fine')"


# -- 8. a session shared between agents --------------------------------------------------------------


async def test_agents_sharing_a_session_see_one_conversation_kept_in_run_state_on_temporal(client: Client) -> None:
    from tests.integration.agent_graphs import GRAPHS

    wf = GRAPHS["session"]
    local = await wf.run("hello")
    durable = wf.on_temporal(client, task_queue=TASK_QUEUE)
    remote = await durable.run("hello")
    assert [o.text for o in remote.get_outputs()] == [o.text for o in local.get_outputs()] == ["A saw 1", "B saw 4"]
    history = remote.state["conversation:session:it-shared-session"]
    assert [(m["role"], m["contents"][0]["text"]) for m in history] == [
        ("user", "hello"),
        ("assistant", "A saw 1"),
        ("assistant", "B saw 4"),
    ]
    assert history == [m.to_dict() for m in local.state["conversation:session:it-shared-session"]]


# -- 7. streaming only when the run is streamed, on the durable twin ---------------------------------------


async def test_the_twin_streams_agents_only_in_a_streamed_run_as_in_process(client: Client) -> None:
    from agent_framework import AgentResponse, AgentResponseUpdate

    from tests.integration.agent_graphs import GRAPHS

    wf = GRAPHS["chain"]
    for runner in (wf, wf.on_temporal(client, task_queue=TASK_QUEUE)):
        awaited = await runner.run("Write a slogan")
        assert [type(o) for o in awaited.get_outputs()] == [AgentResponse, AgentResponse]
        assert not [e for e in awaited if isinstance(e.data, AgentResponseUpdate)]
        streamed = [e.data async for e in runner.run("Write a slogan", stream=True) if e.type == "output"]
        assert {type(o) for o in streamed} == {AgentResponseUpdate}
        assert "".join(o.text for o in streamed) == "Charge Ahead: affordable funMake it more playful."


# -- 2. checkpoint numbering on Temporal ------------------------------------------------------------------


async def test_a_paused_and_answered_run_is_checkpointed_as_agent_framework_numbers_it(client: Client) -> None:
    """Entry (0), superstep 1 with its request (1), the answer's entry (1), supersteps 2 and 3: MAF's 0,1,1,2,3."""
    durable = twin(client, checkpoint_every=1)
    asked = (await durable.run("bees")).get_request_info_events()
    await durable.run(responses={asked[0].request_id: sc.Answer(text="buzz")})
    assert durable.handle is not None
    listed = await durable.handle.checkpoints()
    assert [c["superstep"] for c in listed] == [0, 1, 1, 2, 3]
    assert [c["parent_id"] for c in listed[1:]] == [c["checkpoint_id"] for c in listed[:-1]]


async def test_client_kwargs_reach_the_agents_on_temporal_as_in_process(client: Client) -> None:
    from tests.integration.agent_graphs import CLIENT_KWARGS, GRAPHS

    wf = GRAPHS["kwargs"]
    for runner in (wf, wf.on_temporal(client, task_queue=TASK_QUEUE)):
        CLIENT_KWARGS.clear()
        await runner.run("hi", client_kwargs={"kw_second": {"store": True}, "__global__": {"tenant": "t1"}})
        assert CLIENT_KWARGS == [{"tenant": "t1"}, {"tenant": "t1", "store": True}]


# -- issue #39: Agent Framework's checkpoint_with_resume on the twin --------------------------------------


@pytest.mark.parametrize("interrupt", [[True, False, True], [False, True, True, True, False, True]])
async def test_the_checkpoint_with_resume_sample_runs_to_its_result_on_the_twin_as_in_process(
    temporal_address: str, interrupt: list[bool]
) -> None:
    """The sample leaves each stream after a superstep ("simulates an interruption") and resumes from the latest
    checkpoint until done. On the twin each streamed run goes no further than its reader (docs/maf.md), so the
    latest checkpoint is where the reader left, the sample resumes from there and finishes, printing what it
    prints in process (and in Agent Framework: tests/test_maf_programs.py)."""
    local = await checkpoint_with_resume(temporal_workflows, interrupt)
    async with AsyncExitStack() as stack:
        remote = await checkpoint_with_resume(temporal_workflows, interrupt, durable=Host(temporal_address, stack))
    assert remote == local
    assert local[-1].startswith("Workflow completed successfully with output: {1: []")
