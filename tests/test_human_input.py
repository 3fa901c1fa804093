"""Human input in process: ``ctx.request_info`` → idle run → ``run(responses=...)`` → ``@response_handler``."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    Executor,
    InMemoryCheckpointStorage,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowRunState,
    handler,
    response_handler,
)
from temporal_workflows.errors import ExecutorFailedError, InvalidResponseError, UnknownRequestError, WorkflowError
from temporal_workflows.events import RequestInfoEvent


class Question(BaseModel):
    text: str
    slot: int


class Answer(BaseModel):
    verdict: Literal["yes", "no"]
    note: str = ""


class Interviewer(Executor):
    """Asks one question per slot in one step; each answer is handled on its own."""

    @handler
    async def ask(self, slots: int, ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("asked_in", ctx.superstep)
        for slot in range(slots):
            await ctx.request_info(Question(text=f"question {slot}?", slot=slot), Answer)

    @response_handler
    async def on_answer(self, question: Question, answer: Answer, ctx: WorkflowContext[None, str]) -> None:
        assert isinstance(question, Question) and isinstance(answer, Answer)  # types restored
        ctx.set_state(f"answer_{question.slot}", {"verdict": answer.verdict, "superstep": ctx.superstep})
        await ctx.yield_output(f"{question.slot}:{answer.verdict}:{answer.note}")


def interview(storage: InMemoryCheckpointStorage | None = None) -> Workflow:
    return WorkflowBuilder(
        start_executor=Interviewer("interviewer"), name="interview", checkpoint_storage=storage
    ).build()


async def test_request_info_idles_the_run_with_a_typed_request_event() -> None:
    wf = interview()
    result = await wf.run(1)
    assert result.get_final_state() is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert wf.run_state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    (req,) = result.get_request_info_events()
    assert req.source_executor_id == "interviewer"
    assert req.data == Question(text="question 0?", slot=0)
    assert req.response_type == "Answer"
    assert set(req.response_schema["properties"]) == {"verdict", "note"}
    assert [p.request_id for p in wf.pending_requests] == [req.request_id]


async def test_a_response_is_validated_and_delivered_to_the_response_handler_next_superstep() -> None:
    wf = interview()
    (req,) = (await wf.run(1)).get_request_info_events()
    result = await wf.run(responses={req.request_id: {"verdict": "yes", "note": "fine"}})  # JSON → Answer
    assert result.get_outputs() == ["0:yes:fine"]
    assert result.get_final_state() is WorkflowRunState.IDLE
    assert result.state["answer_0"] == {"verdict": "yes", "superstep": result.state["asked_in"] + 1}
    assert wf.pending_requests == []


async def test_a_response_may_also_be_the_model_itself_and_may_stream() -> None:
    wf = interview()
    (req,) = (await wf.run(1)).get_request_info_events()
    events = [e async for e in wf.run(responses={req.request_id: Answer(verdict="no")}, stream=True)]
    assert [e.data for e in events if e.type == "output"] == ["0:no:"]


async def test_an_unknown_request_id_is_a_clear_error_and_the_run_stays_resumable() -> None:
    wf = interview()
    (req,) = (await wf.run(1)).get_request_info_events()
    with pytest.raises(UnknownRequestError) as info:
        await wf.run(responses={"not-a-request": {"verdict": "yes"}})
    assert info.value.request_id == "not-a-request" and info.value.pending == [req.request_id]
    assert "'not-a-request'" in str(info.value) and req.request_id in str(info.value)
    assert wf.run_state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    result = await wf.run(responses={req.request_id: {"verdict": "yes"}})
    assert result.get_outputs() == ["0:yes:"] and result.get_final_state() is WorkflowRunState.IDLE


@pytest.mark.parametrize("bad", [{"verdict": "maybe"}, {"note": "no verdict"}, "yes", None])
async def test_an_invalid_response_is_a_clear_error_and_the_run_stays_resumable(bad: Any) -> None:
    wf = interview()
    (req,) = (await wf.run(1)).get_request_info_events()
    with pytest.raises(InvalidResponseError) as info:
        await wf.run(responses={req.request_id: bad})
    assert info.value.request_id == req.request_id and info.value.executor_id == "interviewer"
    assert req.request_id in str(info.value) and "Answer" in str(info.value)
    assert [p.request_id for p in wf.pending_requests] == [req.request_id]
    result = await wf.run(responses={req.request_id: {"verdict": "no", "note": "second try"}})
    assert result.get_outputs() == ["0:no:second try"]


async def test_one_bad_response_in_a_batch_accepts_none_of_them() -> None:
    wf = interview()
    first, second = (await wf.run(2)).get_request_info_events()
    with pytest.raises(InvalidResponseError):
        await wf.run(responses={first.request_id: {"verdict": "yes"}, second.request_id: {"verdict": 3}})
    assert {p.request_id for p in wf.pending_requests} == {first.request_id, second.request_id}
    assert wf.state == {"asked_in": 1}


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
async def test_several_pending_requests_are_answered_independently_in_any_order(order: tuple[int, ...]) -> None:
    wf = interview()
    requests = (await wf.run(3)).get_request_info_events()
    assert [r.data.slot for r in requests] == [0, 1, 2]
    assert len({r.request_id for r in requests}) == 3
    outputs = []
    for n, slot in enumerate(order, 1):
        req = requests[slot]
        result = await wf.run(responses={req.request_id: {"verdict": "yes", "note": str(n)}})
        outputs += result.get_outputs()
        still = {r.request_id for r in requests if r.data.slot in order[n:]}
        assert {p.request_id for p in wf.pending_requests} == still
        expected_state = WorkflowRunState.IDLE_WITH_PENDING_REQUESTS if still else WorkflowRunState.IDLE
        assert result.get_final_state() is expected_state
    assert outputs == [f"{slot}:yes:{n}" for n, slot in enumerate(order, 1)]


async def test_answers_given_together_run_together_in_one_superstep() -> None:
    wf = interview()
    requests = (await wf.run(2)).get_request_info_events()
    result = await wf.run(responses={r.request_id: {"verdict": "no"} for r in reversed(requests)})
    assert sorted(result.get_outputs()) == ["0:no:", "1:no:"]
    assert result.state["answer_0"]["superstep"] == result.state["answer_1"]["superstep"] == 2


async def test_request_ids_are_derived_from_the_step_and_stable_on_rerun() -> None:
    """Resuming a checkpoint taken before the asking step reruns it: same request ids."""

    class Gate(Executor):
        @handler
        async def forward(self, slots: int, ctx: WorkflowContext[int]) -> None:
            await ctx.send_message(slots)

    storage = InMemoryCheckpointStorage()

    def build() -> Workflow:
        gate, asker = Gate("gate"), Interviewer("interviewer")
        return (
            WorkflowBuilder(start_executor=gate, name="gated", checkpoint_storage=storage).add_edge(gate, asker).build()
        )

    first = await build().run(2)
    ids = [r.request_id for r in first.get_request_info_events()]
    before_asking = (await storage.list_checkpoints(workflow_name="gated", run_id=first.run_id))[1]
    assert before_asking.superstep == 1 and before_asking.pending_requests == {}
    again = await build().run(checkpoint_id=before_asking.checkpoint_id)
    assert [r.request_id for r in again.get_request_info_events()] == ids
    other_run = await build().run(2)
    assert not set(ids) & {r.request_id for r in other_run.get_request_info_events()}


async def test_an_explicit_request_id_is_kept() -> None:
    class Named(Executor):
        @handler
        async def ask(self, msg: str, ctx: WorkflowContext) -> None:
            rid = await ctx.request_info(Question(text=msg, slot=0), Answer, request_id=f"ticket-{msg}")
            ctx.set_state("rid", rid)

        @response_handler
        async def on(self, q: Question, a: Answer, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output(a.verdict)

    wf = WorkflowBuilder(start_executor=Named("named")).build()
    result = await wf.run("42")
    assert [r.request_id for r in result.get_request_info_events()] == ["ticket-42"]
    assert result.state == {"rid": "ticket-42"}
    assert (await wf.run(responses={"ticket-42": {"verdict": "yes"}})).get_outputs() == ["yes"]


async def test_request_info_without_a_matching_response_handler_fails_the_step() -> None:
    class Forgetful(Executor):
        @handler
        async def ask(self, msg: str, ctx: WorkflowContext) -> None:
            question = Question(text=msg, slot=0)  # built apart from the call: build() does not judge it
            await ctx.request_info(question, Answer)

    with pytest.raises(ExecutorFailedError) as info:
        await WorkflowBuilder(start_executor=Forgetful("forgetful")).build().run("?")
    assert isinstance(info.value.__cause__, WorkflowError)
    assert "@response_handler" in str(info.value.__cause__) and "'forgetful'" in str(info.value.__cause__)


async def test_a_response_handler_can_continue_the_graph_and_ask_again() -> None:
    class Approver(Executor):
        @handler
        async def start(self, draft: str, ctx: WorkflowContext) -> None:
            await ctx.request_info(Question(text=draft, slot=1), Answer)

        @response_handler
        async def on(self, q: Question, a: Answer, ctx: WorkflowContext[str, str]) -> None:
            if a.verdict == "yes":
                await ctx.send_message(q.text)
            else:
                await ctx.request_info(Question(text=f"{q.text}+{a.note}", slot=q.slot + 1), Answer)

    class Publisher(Executor):
        @handler
        async def publish(self, text: str, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output(f"published {text}")

    approver = Approver("approver")
    wf = WorkflowBuilder(start_executor=approver).add_edge(approver, Publisher("publisher")).build()
    result = await wf.run("v1")
    for verdict in ("no", "no", "yes"):
        (req,) = result.get_request_info_events()
        assert isinstance(req, RequestInfoEvent)
        result = await wf.run(responses={req.request_id: {"verdict": verdict, "note": "fix"}})
    assert result.get_outputs() == ["published v1+fix+fix"]
    assert wf.run_state is WorkflowRunState.IDLE


async def test_a_rejected_call_leaves_the_current_run_untouched() -> None:
    """Bad responses alongside a checkpoint to resume or a new message change nothing."""
    storage = InMemoryCheckpointStorage()
    wf, other = interview(storage), interview(storage)
    first = await wf.run(1)
    (req,) = first.get_request_info_events()
    second = await other.run(1)
    elsewhere = await storage.get_latest(workflow_name="interview", run_id=second.run_id)
    assert elsewhere is not None
    with pytest.raises(UnknownRequestError):
        await wf.run(checkpoint_id=elsewhere.checkpoint_id, responses={"bogus": {"verdict": "yes"}})
    with pytest.raises(UnknownRequestError):
        await wf.run(2, responses={"bogus": {"verdict": "yes"}})
    assert [p.request_id for p in wf.pending_requests] == [req.request_id]

    result = await wf.run(responses={req.request_id: {"verdict": "yes"}})
    assert result.run_id == first.run_id and result.get_outputs() == ["0:yes:"]
    own = await storage.list_checkpoints(workflow_name="interview", run_id=first.run_id)
    # The start, superstep 1, the answer before it is processed, superstep 2: all filed under this run.
    assert [c.superstep for c in own] == [0, 1, 1, 2]
    assert own[2].responses and not own[1].responses  # the answer's own checkpoint holds it in flight


async def test_reset_drops_pending_requests_state_and_outputs() -> None:
    wf = interview()
    (req,) = (await wf.run(1)).get_request_info_events()
    wf.reset()
    assert wf.pending_requests == [] and wf.state == {} and wf.run_state is WorkflowRunState.IDLE
    with pytest.raises(WorkflowError, match="no run"):
        await wf.run(responses={req.request_id: {"verdict": "yes"}})
    fresh = await wf.run(0)  # zero questions: a run that asks nothing and yields nothing
    assert fresh.get_outputs() == [] and fresh.get_request_info_events() == []
    assert fresh.state == {"asked_in": 1} and fresh.get_final_state() is WorkflowRunState.IDLE
