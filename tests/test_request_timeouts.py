"""Request timeouts, in process: ``ctx.request_info(..., timeout=, on_timeout=)``.

Three layers are pinned down here, none of them needing a Temporal server:

* the context: which ``request_info`` calls are accepted (a ``respond``
  timeout needs a response handler that takes a ``RequestTimedOut``);
* the pure engine: stamping deadlines at the commit, ``next_deadline`` and
  ``expire_due``, and refusing outside input mid-superstep;
* the in-process runner: a resumed run times out overdue requests before it
  matches responses. The runner's clock is ``time.time`` in
  ``temporal_workflows._local.runner``; the tests replace it, and never sleep.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    Executor,
    FileCheckpointStorage,
    RequestTimedOut,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowRunState,
    handler,
    response_handler,
)
from temporal_workflows._engine.machine import (
    REQUEST_TIMED_OUT_TYPE,
    Engine,
    PendingRequest,
    RoutedMessage,
    StepResult,
    Topology,
)
from temporal_workflows._engine.serde import Envelope, decode
from temporal_workflows.errors import (
    ExecutorFailedError,
    InvalidResponseError,
    RequestTimeoutError,
    UnknownRequestError,
    WorkflowError,
)
from temporal_workflows.events import RequestInfoEvent, WorkflowFailedEvent

T0 = 1_700_000_000.0
"""Where the fake clock starts (epoch seconds)."""


class Clock:
    """Stands in for ``time.time`` in the runner; moved by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("temporal_workflows._local.runner.time.time", fake)
    return fake


# -- the graph used in process ----------------------------------------------------


class Ask(BaseModel):
    """One request to make: its id, timeout (seconds or a timedelta) and policy."""

    id: str
    timeout: float | timedelta | None = None
    on_timeout: str = "respond"


class Approval(BaseModel):
    approved: bool


class Approver(Executor):
    """Makes one request per ``Ask``; reports what each response handler received."""

    @handler
    async def ask(self, asks: list[Ask], ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("asked_in", ctx.superstep)
        for a in asks:
            await ctx.request_info(a, Approval, request_id=a.id, timeout=a.timeout, on_timeout=a.on_timeout)  # type: ignore[arg-type]

    @response_handler
    async def on_answer(self, ask: Ask, answer: Approval | RequestTimedOut, ctx: WorkflowContext[None, Any]) -> None:
        if isinstance(answer, RequestTimedOut):
            ctx.set_state(f"timed_out_{ask.id}", answer.model_dump(mode="json"))
            await ctx.yield_output(f"{ask.id}:timed out")
        else:
            assert isinstance(answer, Approval)
            await ctx.yield_output(f"{ask.id}:{'approved' if answer.approved else 'rejected'}")
        ctx.set_state(f"answered_in_{ask.id}", ctx.superstep)


class StrictApprover(Executor):
    """Its response handler takes only an ``Approval``: no room for a timeout response."""

    @handler
    async def ask(self, asks: list[Ask], ctx: WorkflowContext[None, str]) -> None:
        for a in asks:
            await ctx.request_info(a, Approval, request_id=a.id, timeout=a.timeout, on_timeout=a.on_timeout)  # type: ignore[arg-type]

    @response_handler
    async def on_answer(self, ask: Ask, answer: Approval, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{ask.id}:{'approved' if answer.approved else 'rejected'}")


def approver(storage: FileCheckpointStorage | None = None) -> Workflow:
    return WorkflowBuilder(start_executor=Approver("approver"), name="approvals", checkpoint_storage=storage).build()


def strict_approver() -> Workflow:
    return WorkflowBuilder(start_executor=StrictApprover("strict"), name="strict-approvals").build()


# -- the response type ------------------------------------------------------------


def test_the_timed_out_type_key_names_the_public_request_timed_out_model() -> None:
    assert f"{RequestTimedOut.__module__}:{RequestTimedOut.__qualname__}" == REQUEST_TIMED_OUT_TYPE
    assert decode(
        Envelope(REQUEST_TIMED_OUT_TYPE, {"request_id": "r", "timeout": 5, "deadline": "2024-01-01T00:00:00+00:00"})
    ) == RequestTimedOut(request_id="r", timeout=5.0, deadline=datetime(2024, 1, 1, tzinfo=UTC))


# -- request_info: which calls are accepted ------------------------------------------


async def test_a_timeout_needs_a_response_handler_that_accepts_request_timed_out(clock: Clock) -> None:
    wf = strict_approver()
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run([Ask(id="r", timeout=30)])
    cause = info.value.__cause__
    assert isinstance(cause, WorkflowError)
    message = str(cause)
    assert "'strict'" in message and "RequestTimedOut" in message and "on_timeout='fail'" in message
    assert wf.run_state is WorkflowRunState.FAILED and wf.pending_requests == []


@pytest.mark.parametrize(
    "ask",
    [Ask(id="r", timeout=30, on_timeout="fail"), Ask(id="r", timeout=None)],
    ids=["fail-on-timeout", "no-timeout"],
)
async def test_a_plain_response_annotation_is_enough_without_a_respond_timeout(clock: Clock, ask: Ask) -> None:
    wf = strict_approver()
    (req,) = (await wf.run([ask])).get_request_info_events()
    assert req.timeout == ask.timeout
    result = await wf.run(responses={"r": {"approved": True}})
    assert result.get_outputs() == ["r:approved"] and result.get_final_state() is WorkflowRunState.IDLE


@pytest.mark.parametrize("timeout", [0, -5, 0.0, timedelta(0), timedelta(seconds=-1), float("nan")])
async def test_a_timeout_that_is_not_positive_is_refused(clock: Clock, timeout: float | timedelta) -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await approver().run([Ask(id="r", timeout=timeout)])
    cause = info.value.__cause__
    assert isinstance(cause, WorkflowError) and "timeout must be positive" in str(cause)
    assert "'approver'" in str(cause)


@pytest.mark.parametrize("timeout", [30, None])
async def test_an_unknown_on_timeout_policy_is_refused(clock: Clock, timeout: float | None) -> None:
    with pytest.raises(ExecutorFailedError) as info:
        await approver().run([Ask(id="r", timeout=timeout, on_timeout="retry")])
    cause = info.value.__cause__
    assert isinstance(cause, WorkflowError) and "'retry'" in str(cause) and "'approver'" in str(cause)


@pytest.mark.parametrize(("timeout", "seconds"), [(45, 45.0), (2.5, 2.5), (timedelta(minutes=2), 120.0), (None, None)])
async def test_the_request_event_and_pending_requests_carry_the_timeout_in_seconds(
    clock: Clock, timeout: float | timedelta | None, seconds: float | None
) -> None:
    wf = approver()
    result = await wf.run([Ask(id="r", timeout=timeout)])
    assert result.get_final_state() is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    (req,) = result.get_request_info_events()
    assert isinstance(req, RequestInfoEvent)
    assert req.request_id == "r" and req.source_executor_id == "approver" and req.timeout == seconds
    (pending,) = wf.pending_requests
    assert pending.request_id == "r" and pending.timeout == seconds and pending.response_type == "Approval"


# -- the runner: timing out on resume ---------------------------------------------------


@pytest.mark.parametrize(("elapsed", "expired"), [(59.999, False), (60.0, True), (3600.0, True)])
async def test_a_request_times_out_exactly_at_its_deadline_when_the_run_is_resumed(
    clock: Clock, elapsed: float, expired: bool
) -> None:
    wf = approver()
    await wf.run([Ask(id="slow", timeout=60), Ask(id="other")])
    clock.now = T0 + elapsed
    result = await wf.run(responses={"other": {"approved": True}})
    outputs = sorted(result.get_outputs())
    if expired:
        assert outputs == ["other:approved", "slow:timed out"]
        assert wf.pending_requests == [] and result.get_final_state() is WorkflowRunState.IDLE
    else:
        assert outputs == ["other:approved"]
        assert [p.request_id for p in wf.pending_requests] == ["slow"]


async def test_the_handler_gets_a_request_timed_out_naming_the_request_timeout_and_deadline(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="slow", timeout=timedelta(minutes=5)), Ask(id="other")])
    clock.now = T0 + 301
    result = await wf.run(responses={"other": {"approved": False}})
    timed_out = RequestTimedOut.model_validate(result.state["timed_out_slow"])
    assert timed_out.request_id == "slow" and timed_out.timeout == 300.0
    assert timed_out.deadline == datetime.fromtimestamp(T0 + 300, UTC)  # created at the commit, plus the timeout
    # The timeout response and the answer given alongside it run in the same superstep, the next one.
    assert result.state["answered_in_slow"] == result.state["answered_in_other"] == result.state["asked_in"] + 1


async def test_the_deadline_counts_from_the_commit_of_the_asking_superstep(clock: Clock) -> None:
    wf = approver()
    clock.now = T0 + 1000
    await wf.run([Ask(id="slow", timeout=60), Ask(id="other")])
    clock.now = T0 + 1059  # a deadline counted from T0 (or any earlier time) would have passed
    result = await wf.run(responses={"other": {"approved": True}})
    assert result.get_outputs() == ["other:approved"]
    assert [p.request_id for p in wf.pending_requests] == ["slow"]


async def test_a_response_in_time_is_delivered_as_the_answer(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="r", timeout=60)])
    clock.now = T0 + 30
    result = await wf.run(responses={"r": {"approved": True}})
    assert result.get_outputs() == ["r:approved"] and "timed_out_r" not in result.state
    assert result.get_final_state() is WorkflowRunState.IDLE


async def test_a_late_response_finds_no_request_and_the_handler_gets_the_timeout_instead(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="slow", timeout=60), Ask(id="other")])
    clock.now = T0 + 61
    with pytest.raises(UnknownRequestError) as info:
        await wf.run(responses={"slow": {"approved": True}})
    assert info.value.request_id == "slow" and info.value.pending == ["other"]
    result = await wf.run(responses={"other": {"approved": True}})
    assert sorted(result.get_outputs()) == ["other:approved", "slow:timed out"]  # never "slow:approved"
    assert wf.pending_requests == [] and result.get_final_state() is WorkflowRunState.IDLE


async def test_a_late_response_to_the_only_request_still_lets_the_handler_see_the_timeout(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="slow", timeout=60)])
    clock.now = T0 + 61
    with pytest.raises(UnknownRequestError):
        await wf.run(responses={"slow": {"approved": True}})
    # The refused call changed nothing: the run still waits on "slow" ...
    assert wf.run_state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    assert [r.request_id for r in wf.pending_requests] == ["slow"]
    # ... and resuming with no responses delivers the timeout.
    result = await wf.run(responses={})
    assert result.get_outputs() == ["slow:timed out"]
    assert wf.run_state is WorkflowRunState.IDLE


async def test_a_response_cannot_pose_as_a_timeout(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="q", timeout=60)])
    forged = {"request_id": "q", "timeout": 60, "deadline": "2024-01-01T00:00:00+00:00"}
    with pytest.raises(InvalidResponseError, match="RequestTimedOut"):
        await wf.run(responses={"q": forged})
    assert [r.request_id for r in wf.pending_requests] == ["q"]
    assert (await wf.run(responses={"q": {"approved": True}})).get_outputs() == ["q:approved"]


async def test_a_fail_request_past_its_deadline_fails_the_resumed_run(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="must", timeout=60, on_timeout="fail"), Ask(id="other")])
    clock.now = T0 + 60
    with pytest.raises(RequestTimeoutError) as info:
        await wf.run(responses={"other": {"approved": True}})
    err = info.value
    assert err.request_id == "must" and err.executor_id == "approver"
    assert "'must'" in str(err) and "'approver'" in str(err) and "60 s" in str(err)
    assert err.result is not None and err.result.get_final_state() is WorkflowRunState.FAILED
    assert err.result.get_outputs() == []  # the answer given alongside was not delivered
    assert [e.error_type for e in err.result if isinstance(e, WorkflowFailedEvent)] == ["RequestTimeoutError"]
    assert wf.run_state is WorkflowRunState.FAILED
    with pytest.raises(WorkflowError, match="failed"):
        await wf.run(responses={"other": {"approved": True}})


async def test_a_fail_request_answered_in_time_does_not_fail(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="must", timeout=60, on_timeout="fail")])
    clock.now = T0 + 59
    result = await wf.run(responses={"must": {"approved": False}})
    assert result.get_outputs() == ["must:rejected"] and result.get_final_state() is WorkflowRunState.IDLE


async def test_a_request_without_a_timeout_never_times_out(clock: Clock) -> None:
    wf = approver()
    await wf.run([Ask(id="patient"), Ask(id="quick", timeout=1)])
    clock.now = T0 + 10 * 365 * 24 * 3600
    result = await wf.run(responses={"patient": {"approved": True}})
    assert sorted(result.get_outputs()) == ["patient:approved", "quick:timed out"]


async def test_checkpoints_keep_the_timeout_policy_and_deadline(clock: Clock, tmp_path: Any) -> None:
    storage = FileCheckpointStorage(tmp_path)
    first = await approver(storage).run([Ask(id="r", timeout=90, on_timeout="fail")])
    cp = await storage.get_latest(workflow_name="approvals", run_id=first.run_id)
    assert cp is not None
    loaded = await FileCheckpointStorage(tmp_path).load(cp.checkpoint_id)  # through JSON on disk
    req = loaded.pending_requests["r"]
    assert (req.timeout, req.on_timeout, req.created_at, req.deadline) == (90, "fail", T0, T0 + 90)
    assert Engine(approver().topology, loaded.to_snapshot()).next_deadline() == T0 + 90


@pytest.mark.parametrize(
    ("elapsed", "outputs", "announced"),
    [(61, ["r:timed out"], []), (59, [], ["r"])],
    ids=["past-the-deadline-times-out", "in-time-re-announces-the-request"],
)
async def test_resuming_a_checkpoint_keeps_the_deadline_as_it_was(
    clock: Clock, tmp_path: Any, elapsed: float, outputs: list[str], announced: list[str]
) -> None:
    storage = FileCheckpointStorage(tmp_path)
    first = await approver(storage).run([Ask(id="r", timeout=60)])
    cp = await storage.get_latest(workflow_name="approvals", run_id=first.run_id)
    assert cp is not None
    clock.now = T0 + elapsed
    resumed = await approver(storage).run(checkpoint_id=cp.checkpoint_id)
    assert resumed.get_outputs() == outputs
    assert [e.request_id for e in resumed.get_request_info_events()] == announced


# -- the engine --------------------------------------------------------------------------


def topology(executors: tuple[str, ...] = ("a", "b")) -> Topology:
    return Topology(
        name="t",
        start_executor_id=executors[0],
        executor_ids=executors,
        fan_in_groups={},
        reducers={},
        max_iterations=100,
        signature_hash="sig",
    )


def env(value: Any) -> Envelope:
    return Envelope(None, value)


def request(
    rid: str, executor_id: str = "a", *, timeout: float | None = None, on_timeout: Any = "respond"
) -> PendingRequest:
    return PendingRequest(rid, executor_id, env({"q": rid}), "str", {}, 1, timeout=timeout, on_timeout=on_timeout)


def asked(*requests: PendingRequest, now: float | None = T0) -> Engine:
    """An engine whose first superstep made ``requests``, committed at ``now``."""
    engine = Engine(topology())
    engine.start(env("go"))
    engine.begin_superstep()
    engine.apply_commit(engine.prepare_commit([StepResult(requests=list(requests))]), now=now)
    return engine


def test_the_commit_stamps_creation_time_and_deadline_on_new_requests() -> None:
    engine = asked(request("timed", timeout=30), request("open"), now=T0)
    timed, open_ = engine.pending_requests["timed"], engine.pending_requests["open"]
    assert (timed.created_at, timed.deadline, timed.timeout) == (T0, T0 + 30, 30)
    assert (open_.created_at, open_.deadline) == (T0, None)
    assert engine.next_deadline() == T0 + 30


def test_a_commit_without_a_clock_stamps_nothing() -> None:
    engine = asked(request("timed", timeout=30), now=None)
    req = engine.pending_requests["timed"]
    assert req.created_at is None and req.deadline is None and engine.next_deadline() is None


def test_next_deadline_is_the_earliest_pending_one() -> None:
    assert asked(request("open")).next_deadline() is None
    engine = asked(request("late", timeout=300), request("soon", timeout=20), request("open"))
    assert engine.next_deadline() == T0 + 20
    engine.respond("soon", env("done"))
    assert engine.next_deadline() == T0 + 300  # an answered request no longer counts


def test_expire_due_does_nothing_before_any_deadline() -> None:
    engine = asked(request("r", timeout=30))
    assert engine.expire_due(T0 + 29.5) == []
    assert list(engine.pending_requests) == ["r"] and not engine.has_work()
    assert engine.run_state() is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS


def test_expire_due_answers_due_requests_with_a_timed_out_response_oldest_deadline_first() -> None:
    engine = asked(
        request("late", "a", timeout=50),
        request("soon", "b", timeout=10),
        request("future", "a", timeout=500),
        request("open", "b"),
    )
    due = engine.expire_due(T0 + 50)  # "late" is due exactly at its deadline
    assert [r.request_id for r in due] == ["soon", "late"]
    assert set(engine.pending_requests) == {"future", "open"}
    assert engine.next_deadline() == T0 + 500

    tasks = engine.begin_superstep()
    assert [(t.kind, t.executor_id, t.superstep) for t in tasks] == [("response", "b", 2), ("response", "a", 2)]
    assert [t.request.request_id for t in tasks if t.request is not None] == ["soon", "late"]
    responses = [t.messages[0] for t in tasks]
    assert {r.type for r in responses} == {REQUEST_TIMED_OUT_TYPE}
    timed_out = [decode(r) for r in responses]
    assert timed_out == [
        RequestTimedOut(request_id="soon", timeout=10, deadline=datetime.fromtimestamp(T0 + 10, UTC)),
        RequestTimedOut(request_id="late", timeout=50, deadline=datetime.fromtimestamp(T0 + 50, UTC)),
    ]
    engine.apply_commit(engine.prepare_commit([StepResult(), StepResult()]), now=T0 + 60)
    with pytest.raises(UnknownRequestError):
        engine.respond("soon", env("too late"))  # timed out once and for all
    assert engine.expire_due(T0 + 10_000) and set(engine.pending_requests) == {"open"}


def test_a_due_fail_request_raises_naming_request_and_executor_and_answers_nothing() -> None:
    engine = asked(request("polite", "a", timeout=5), request("strict", "b", timeout=10, on_timeout="fail"))
    with pytest.raises(RequestTimeoutError) as info:
        engine.expire_due(T0 + 10)
    err = info.value
    assert err.request_id == "strict" and err.executor_id == "b" and err.superstep == 2
    assert "'strict'" in str(err) and "'b'" in str(err) and "10 s" in str(err)
    # All or nothing: the due "respond" request was not answered either.
    assert set(engine.pending_requests) == {"polite", "strict"} and not engine.has_work()


def test_a_fail_request_not_yet_due_does_not_raise() -> None:
    engine = asked(request("polite", "a", timeout=5), request("strict", "b", timeout=10, on_timeout="fail"))
    assert [r.request_id for r in engine.expire_due(T0 + 9)] == ["polite"]
    assert set(engine.pending_requests) == {"strict"}


def test_snapshots_keep_deadlines() -> None:
    engine = asked(request("r", timeout=30, on_timeout="fail"), request("s", timeout=60))
    clone = Engine(engine.topology, engine.snapshot())
    assert clone.pending_requests == engine.pending_requests
    assert clone.next_deadline() == T0 + 30
    with pytest.raises(RequestTimeoutError):
        clone.expire_due(T0 + 30)


def test_send_and_respond_mid_superstep_are_refused_and_lose_nothing() -> None:
    engine = asked(request("r"), request("due", timeout=5))
    engine.send("b", env("queued"))
    engine.begin_superstep()
    with pytest.raises(WorkflowError, match="running"):
        engine.send("a", env("mid-step"))
    with pytest.raises(WorkflowError, match="running"):
        engine.start(env("mid-step"))
    with pytest.raises(WorkflowError, match="running"):
        engine.respond("r", env("mid-step"))
    with pytest.raises(WorkflowError, match="running"):
        engine.expire_due(T0 + 5)
    engine.apply_commit(engine.prepare_commit([StepResult(sent=[RoutedMessage.one("a", env("from-b"), "b")])]), now=T0)
    # The refused input is neither queued nor consumed: only the step's own message is next,
    # and both requests are still pending and answerable.
    assert [(d.target_id, d.messages[0].data) for d in engine.pending] == [("a", "from-b")]
    assert set(engine.pending_requests) == {"r", "due"}
    engine.respond("r", env("now"))
    (msg, resp) = engine.begin_superstep()
    assert (msg.kind, resp.kind, resp.messages) == ("message", "response", (env("now"),))


def test_input_is_accepted_again_after_an_aborted_superstep() -> None:
    engine = asked(request("r"))
    engine.send("b", env(1))
    engine.begin_superstep()
    with pytest.raises(WorkflowError):
        engine.respond("r", env("x"))
    engine.abort_superstep()
    engine.respond("r", env("x"))
    engine.send("a", env(2))
    assert [t.kind for t in engine.begin_superstep()] == ["message", "message", "response"]


# -- the order at a boundary: input first, then deadlines ------------------------------------------------


async def _outputs_of(stream: Any) -> list[Any]:
    return [e.data for e in [e async for e in stream] if type(e).__name__ == "WorkflowOutputEvent"]


@pytest.mark.parametrize("child", [False, True], ids=["request", "sub_workflow_request"])
async def test_an_answer_given_before_its_deadline_wins_however_late_the_boundary_that_takes_it(
    clock: Clock, child: bool
) -> None:
    from tests.integration.subgraphs import RACE_DEADLINE_SECONDS, build_race

    wf = build_race(child=child)
    first = await wf.run("bees")
    (request,) = first.get_request_info_events()
    clock.now = T0 + RACE_DEADLINE_SECONDS / 2
    stream = wf.run(responses={request.request_id: {"text": "in time"}}, stream=True)  # given before the deadline
    clock.now = T0 + RACE_DEADLINE_SECONDS * 10  # ... and the boundary that takes it comes after it
    assert await _outputs_of(stream) == ["in time"]


@pytest.mark.parametrize("child", [False, True], ids=["request", "sub_workflow_request"])
async def test_an_answer_given_after_its_deadline_finds_the_request_timed_out(clock: Clock, child: bool) -> None:
    from tests.integration.subgraphs import RACE_DEADLINE_SECONDS, build_race

    wf = build_race(child=child)
    first = await wf.run("bees")
    (request,) = first.get_request_info_events()
    clock.now = T0 + RACE_DEADLINE_SECONDS * 2
    with pytest.raises(UnknownRequestError):
        await wf.run(responses={request.request_id: {"text": "too late"}})
    assert (await wf.run(responses={})).get_outputs() == ["timed out"]
