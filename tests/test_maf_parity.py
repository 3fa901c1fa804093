"""Agent Framework parity in process (issue #16 items 2, 5, 6, 7): events, checkpoints, builder options, reset.

Expected lines are what ``agent-framework-core`` 1.23 prints for the same graph
(run side by side while writing these tests); where this library deliberately
differs, ``docs/maf.md`` says so and the test says which line.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from temporal_workflows import (
    CheckpointStorage,
    Executor,
    FileCheckpointStorage,
    InMemoryCheckpointStorage,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    WorkflowEventSource,
    WorkflowRunState,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.errors import (
    ExecutorFailedError,
    GraphValidationError,
    PayloadTooLargeError,
    StateConflictError,
    WorkflowError,
)
from temporal_workflows.events import (
    ExecutorFailedEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowOutputEvent,
    WorkflowStatusEvent,
)

TIMEOUT = 5.0


async def wait(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), TIMEOUT)


# -- events read as MAF's ----------------------------------------------------------------------


@dataclass
class Ask:
    q: str


class Asker(Executor):
    @handler
    async def h(self, text: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output("before")
        await ctx.request_info(Ask(q=text), str, request_id="r1")
        await ctx.send_message("x")

    @response_handler
    async def on(self, req: Ask, resp: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(f"{req.q}->{resp}")


@executor(id="sink")
async def sink(t: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output("sink:" + t)


def asking() -> Workflow:
    a = Asker(id="asker")
    return WorkflowBuilder(start_executor=a, name="hil").add_edge(a, sink).build()


MAF_FIRST_CALL = """\
WorkflowEvent(type='started')
WorkflowEvent(type='status', state=IN_PROGRESS)
WorkflowEvent(type='superstep_started', iteration=1)
WorkflowEvent(type='executor_invoked', executor_id='asker', data='q?')
WorkflowEvent(type='output', executor_id='asker', data='before')
WorkflowEvent(type='request_info', request_id='r1', data=Ask(q='q?'))
WorkflowEvent(type='status', state=IN_PROGRESS_PENDING_REQUESTS)
WorkflowEvent(type='executor_completed', executor_id='asker', data=['x', 'before'])
WorkflowEvent(type='superstep_completed', iteration=1)
WorkflowEvent(type='superstep_started', iteration=2)
WorkflowEvent(type='executor_invoked', executor_id='sink', data='x')
WorkflowEvent(type='output', executor_id='sink', data='sink:x')
WorkflowEvent(type='executor_completed', executor_id='sink', data=['sink:x'])
WorkflowEvent(type='superstep_completed', iteration=2)
WorkflowEvent(type='status', state=IDLE_WITH_PENDING_REQUESTS)"""

MAF_ANSWER_CALL = """\
WorkflowEvent(type='status', state=IN_PROGRESS)
WorkflowEvent(type='superstep_started', iteration=3)
WorkflowEvent(type='executor_invoked', executor_id='asker', data='yes')
WorkflowEvent(type='output', executor_id='asker', data='q?->yes')
WorkflowEvent(type='executor_completed', executor_id='asker', data=['q?->yes'])
WorkflowEvent(type='superstep_completed', iteration=3)
WorkflowEvent(type='status', state=IDLE)"""
"""MAF's second call also starts with ``WorkflowEvent(type='started')``: here a run starts once (docs/maf.md)."""


async def test_a_streamed_run_prints_line_for_line_as_agent_framework_prints_it() -> None:
    wf = asking()
    first = [str(ev) async for ev in wf.run("q?", stream=True)]
    assert "\n".join(first) == MAF_FIRST_CALL
    second = [repr(ev) async for ev in wf.run(responses={"r1": "yes"}, stream=True)]
    assert "\n".join(second) == MAF_ANSWER_CALL


@dataclass
class Item:
    n: int


class Upper(Executor):
    @handler
    async def h(self, text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text.upper())


@executor(id="a")
async def fan_a(text: str, ctx: WorkflowContext[Item, str]) -> None:
    await ctx.yield_output("a:" + text)
    await ctx.add_event(WorkflowEvent("warning", data="custom a"))
    await ctx.send_message(Item(n=1))


@executor(id="b")
async def fan_b(text: str, ctx: WorkflowContext[Item, str]) -> None:
    await ctx.send_message(Item(n=2))
    await ctx.yield_output("b:" + text)


@executor(id="c")
async def fan_c(items: list[Item], ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output("c:" + ",".join(str(i.n) for i in items))


MAF_FAN_OUT_FAN_IN = """\
WorkflowEvent(type='started')
WorkflowEvent(type='status', state=IN_PROGRESS)
WorkflowEvent(type='superstep_started', iteration=1)
WorkflowEvent(type='executor_invoked', executor_id='upper', data='hi')
WorkflowEvent(type='executor_completed', executor_id='upper', data=['HI'])
WorkflowEvent(type='superstep_completed', iteration=1)
WorkflowEvent(type='superstep_started', iteration=2)
WorkflowEvent(type='executor_invoked', executor_id='a', data='HI')
WorkflowEvent(type='output', executor_id='a', data='a:HI')
WorkflowEvent(type='warning', data='custom a')
WorkflowEvent(type='executor_completed', executor_id='a', data=[Item(n=1), 'a:HI'])
WorkflowEvent(type='executor_invoked', executor_id='b', data='HI')
WorkflowEvent(type='output', executor_id='b', data='b:HI')
WorkflowEvent(type='executor_completed', executor_id='b', data=[Item(n=2), 'b:HI'])
WorkflowEvent(type='superstep_completed', iteration=2)
WorkflowEvent(type='superstep_started', iteration=3)
WorkflowEvent(type='executor_invoked', executor_id='c', data=[Item(n=1), Item(n=2)])
WorkflowEvent(type='output', executor_id='c', data='c:1,2')
WorkflowEvent(type='executor_completed', executor_id='c', data=['c:1,2'])
WorkflowEvent(type='superstep_completed', iteration=3)
WorkflowEvent(type='status', state=IDLE)"""


async def test_a_fan_out_and_fan_in_print_as_agent_framework_prints_them_with_their_types() -> None:
    up = Upper(id="upper")
    wf = (
        WorkflowBuilder(start_executor=up)
        .add_fan_out_edges(up, [fan_a, fan_b])
        .add_fan_in_edges([fan_a, fan_b], fan_c)
        .build()
    )
    assert "\n".join([str(ev) async for ev in wf.run("hi", stream=True)]) == MAF_FAN_OUT_FAN_IN
    result = await wf.run("x")  # a new run; its result lists the events without started and status
    assert [str(e) for e in result] == [
        line.replace("HI", "X").replace("'hi'", "'x'") for line in MAF_FAN_OUT_FAN_IN.splitlines()[2:-1]
    ]


async def test_invoked_and_completed_events_carry_what_the_step_received_and_sent() -> None:
    wf = asking()
    events = [ev async for ev in wf.run("q?", stream=True)]
    invoked = [(e.executor_id, e.data) for e in events if e.type == "executor_invoked"]
    completed = [(e.executor_id, e.data) for e in events if e.type == "executor_completed"]
    assert invoked == [("asker", "q?"), ("sink", "x")]
    assert completed == [("asker", ["x", "before"]), ("sink", ["sink:x"])]
    (request,) = [e for e in events if e.type == "request_info"]
    assert request.data == Ask(q="q?") and request.request_type is Ask  # the object, not its JSON
    answered = await wf.run(responses={"r1": "yes"})
    assert [(e.executor_id, e.data) for e in answered if e.type == "executor_invoked"] == [("asker", "yes")]


def test_run_states_print_as_agent_framework_prints_them() -> None:
    assert str(WorkflowRunState.IDLE) == "WorkflowRunState.IDLE"
    assert f"{WorkflowRunState.IN_PROGRESS}" == "WorkflowRunState.IN_PROGRESS"
    assert WorkflowRunState.IDLE == "IDLE" and WorkflowRunState("IDLE") is WorkflowRunState.IDLE
    assert WorkflowRunState.STARTED.value == "STARTED"
    assert str(WorkflowStatusEvent(state=WorkflowRunState.IDLE)) == "WorkflowEvent(type='status', state=IDLE)"


@dataclass
class Saved:
    email_id: int


class DatabaseEvent(WorkflowEvent):
    """A custom event as MAF samples declare them: no fields of its own."""


async def test_a_custom_event_built_with_data_keeps_it() -> None:
    @executor(id="db")
    async def db(text: str, ctx: WorkflowContext) -> None:
        await ctx.add_event(DatabaseEvent(type="database_event", data=f"Email {text} saved to database."))
        await ctx.add_event(DatabaseEvent(type="database_row", data=Saved(email_id=7)))
        await ctx.add_event(WorkflowEvent("warning", f"{text} looked odd"))

    events = await WorkflowBuilder(start_executor=db).build().run("42")
    custom = [e for e in events if isinstance(e, DatabaseEvent)]
    assert [(e.type, e.data) for e in custom] == [
        ("database_event", "Email 42 saved to database."),
        ("database_row", Saved(email_id=7)),  # the object comes back, not its JSON
    ]
    assert str(custom[0]) == "WorkflowEvent(type='database_event', data='Email 42 saved to database.')"
    assert all(e.origin is WorkflowEventSource.EXECUTOR for e in custom)
    (warning,) = [e for e in events if e.type == "warning"]
    assert warning.data == "42 looked odd"


def test_a_keyword_an_event_has_no_field_for_is_refused_not_dropped() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'payload'"):
        DatabaseEvent(type="x", payload=1)
    with pytest.raises(TypeError, match="multiple values"):
        WorkflowEvent("a", type="b")
    with pytest.raises(TypeError, match="at most 2 positional"):
        WorkflowEvent("a", 1, 2)


def test_workflow_event_is_generic_in_its_data() -> None:
    assert WorkflowEvent[int](data=3).data == 3
    with pytest.raises(ValidationError):
        WorkflowEvent[int](data="three")
    assert WorkflowEvent(data=object).data is object  # unparametrized: anything


def test_agent_framework_attribute_names_read_on_every_event() -> None:
    started = SuperStepStartedEvent(iteration=4)  # MAF's keyword too
    assert started.superstep == started.iteration == 4
    assert SuperStepCompletedEvent(superstep=2).iteration == 2
    failed = ExecutorFailedEvent(executor_id="x", superstep=1, error_type="ValueError", error="bad")
    assert failed.details is not None and (failed.details.error_type, failed.details.message) == ("ValueError", "bad")
    assert failed.origin is WorkflowEventSource.FRAMEWORK
    status = WorkflowStatusEvent(state=WorkflowRunState.IDLE)
    assert status.executor_id is None and status.request_id is None and status.iteration is None
    output = WorkflowOutputEvent(executor_id="a", data=1)
    assert output.state is None and output.details is None
    with pytest.raises(AttributeError):
        _ = status.no_such_attribute  # type: ignore[attr-defined]


async def test_a_run_result_lists_events_without_started_and_status_as_agent_framework_does() -> None:
    wf = asking()
    result = await wf.run("q?")
    assert not [e for e in result if e.type in ("started", "status")]
    assert [e.state for e in result.status_timeline()] == [
        WorkflowRunState.IN_PROGRESS,
        WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS,
        WorkflowRunState.IDLE_WITH_PENDING_REQUESTS,
    ]
    assert result.get_final_state() is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS
    with_status = await wf.run(responses={"r1": "yes"}, include_status_events=True)
    assert [e.state for e in with_status if e.type == "status"] == [WorkflowRunState.IN_PROGRESS, WorkflowRunState.IDLE]


# -- builder: which yields are outputs ----------------------------------------------------------


@executor(id="planner")
async def planner(p: str, ctx: WorkflowContext[str, str]) -> None:
    await ctx.yield_output(f"plan {p}")
    await ctx.send_message(p)


@executor(id="researcher")
async def researcher(p: str, ctx: WorkflowContext[str, str]) -> None:
    await ctx.yield_output(f"notes {p}")
    await ctx.send_message(p)


@executor(id="answerer")
async def answerer(p: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"answer {p}")


def pipeline(**options: Any) -> Workflow:
    return WorkflowBuilder(start_executor=planner, **options).add_chain([planner, researcher, answerer]).build()


@pytest.mark.parametrize("option", ["output_from", "output_executors"])
async def test_output_from_picks_which_executors_yields_are_outputs(option: str) -> None:
    result = await pipeline(**{option: [answerer]}).run("x")
    assert result.get_outputs() == ["answer x"] and result.get_intermediate_outputs() == []
    completed = {e.executor_id: e.data for e in result if e.type == "executor_completed"}
    assert completed["planner"] == ["x", "plan x"]  # a hidden yield still shows where it was made


async def test_intermediate_outputs_are_events_but_not_outputs() -> None:
    wf = pipeline(output_from=[answerer], intermediate_output_from=[planner])
    result = await wf.run("x")
    assert result.get_outputs() == ["answer x"] and result.get_intermediate_outputs() == ["plan x"]
    (inter,) = [e for e in result if e.type == "intermediate"]
    assert str(inter) == "WorkflowEvent(type='intermediate', executor_id='planner', data='plan x')"
    assert [e.id for e in wf.get_output_executors()] == ["answerer"]
    assert [e.id for e in wf.get_intermediate_executors()] == ["planner"]
    assert wf.get_start_executor().id == "planner" and len(wf.get_executors_list()) == 3
    other = await pipeline(output_from=[answerer], intermediate_output_from="all_other").run("y")
    assert other.get_outputs() == ["answer y"] and other.get_intermediate_outputs() == ["plan y", "notes y"]
    progress_only = await pipeline(intermediate_output_from="all").run("z")
    assert progress_only.get_outputs() == [] and len(progress_only.get_intermediate_outputs()) == 3
    everything = await pipeline(output_from="all").run("w")
    assert everything.get_outputs() == ["plan w", "notes w", "answer w"]
    default = await pipeline().run("v")
    assert default.get_outputs() == ["plan v", "notes v", "answer v"]


def test_output_designations_are_checked_when_the_graph_is_built() -> None:
    with pytest.raises(TypeError, match="not both"):
        pipeline(output_from=[answerer], output_executors=[answerer])
    with pytest.raises(GraphValidationError, match="not an executor of this workflow"):
        pipeline(output_from=["nobody"])
    with pytest.raises(GraphValidationError, match="twice"):
        pipeline(output_from=[answerer, "answerer"])
    with pytest.raises(GraphValidationError, match="both output_from and intermediate_output_from"):
        pipeline(output_from=[answerer], intermediate_output_from=[answerer])
    with pytest.raises(GraphValidationError, match="name no executor"):
        pipeline(output_from=[])
    with pytest.raises(GraphValidationError, match="all_other"):
        pipeline(output_from="all_other")  # type: ignore[arg-type]

    @executor(id="answerer")
    async def impostor(p: str, ctx: WorkflowContext[None, str]) -> None:
        pass

    with pytest.raises(GraphValidationError, match="not an executor of this workflow"):
        pipeline(output_from=[impostor])  # same id, another object


# -- name, id, storage path ------------------------------------------------------------------------


def test_a_workflow_without_a_name_gets_agent_frameworks_default_one() -> None:
    builder = WorkflowBuilder(start_executor=sink)
    first, second = builder.build(), builder.build()
    assert first.name.startswith("WorkflowBuilder-") and first.name == second.name  # one name per builder
    assert first.name_is_generated and pipeline(output_from=[answerer]).name_is_generated
    assert WorkflowBuilder(start_executor=sink).build().name != first.name
    assert first.id != second.id  # MAF's Workflow.id: one per instance
    # A made-up name is no part of the graph's signature: checkpoints restore across builders.
    assert WorkflowBuilder(start_executor=sink).build().graph_signature_hash == first.graph_signature_hash
    named = WorkflowBuilder(start_executor=sink, name="named").build()
    assert named.name == "named" and not named.name_is_generated


def test_a_graph_hosted_on_temporal_needs_a_name_that_is_stable() -> None:
    from temporal_workflows.temporal._activities.steps import build_activities

    unnamed = WorkflowBuilder(start_executor=sink).build()
    with pytest.raises(WorkflowError, match=r"needs a name that is the same in every process.*WorkflowBuilder-"):
        build_activities([unnamed])


async def test_file_storage_takes_agent_frameworks_storage_path(tmp_path: Path) -> None:
    storage = FileCheckpointStorage(storage_path=tmp_path / "cps")
    assert storage.storage_path == storage.directory == tmp_path / "cps"
    wf = WorkflowBuilder(start_executor=sink, checkpoint_storage=storage).build()
    await wf.run("a")
    latest = await storage.get_latest(workflow_name=wf.name)
    assert latest is not None and latest.iteration_count == 1
    with pytest.raises(TypeError):
        FileCheckpointStorage()
    with pytest.raises(TypeError):
        FileCheckpointStorage(tmp_path, storage_path=tmp_path)


# -- the checkpoint before the first superstep ----------------------------------------------------


async def test_the_first_checkpoint_holds_the_start_message_and_restoring_it_runs_everything_again() -> None:
    storage = InMemoryCheckpointStorage()
    wf = pipeline(checkpoint_storage=storage)
    full = await wf.run("x")
    first = (await storage.list_checkpoints(workflow_name=wf.name))[0]
    assert first.iteration_count == 0 and first.previous_checkpoint_id is None and first.state == {}
    assert [m.target_id for m in first.messages] == ["planner"]
    assert isinstance(first.timestamp, str) and first.created_at.tzinfo is not None
    again = await pipeline().run(checkpoint_id=first.checkpoint_id, checkpoint_storage=storage)
    assert again.get_outputs() == full.get_outputs()
    assert [e.executor_id for e in again if e.type == "executor_invoked"] == ["planner", "researcher", "answerer"]


# -- executor checkpoint hooks ---------------------------------------------------------------------


class Counter(Executor):
    """Keeps a count in an attribute, as MAF executors may; its hooks save and restore it."""

    def __init__(self, id: str = "counter") -> None:
        super().__init__(id=id)
        self.seen: list[int] = []
        self.restored: list[dict[str, Any]] = []

    @handler
    async def count(self, n: int, ctx: WorkflowContext[int, str]) -> None:
        self.seen.append(n)
        if n > 1:
            await ctx.send_message(n - 1)
        else:
            await ctx.yield_output(f"saw {self.seen}")

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"seen": list(self.seen)}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.restored.append(state)
        self.seen = list(state["seen"])


def counting(counter: Counter, storage: CheckpointStorage | None = None) -> Workflow:
    return (
        WorkflowBuilder(start_executor=counter, name="counting", checkpoint_storage=storage)
        .add_edge(counter, counter)
        .build()
    )


async def test_checkpoint_hooks_keep_an_executors_attributes_in_each_checkpoint_and_restore_them() -> None:
    storage = InMemoryCheckpointStorage()
    counter = Counter()
    wf = counting(counter, storage)
    assert (await wf.run(3)).get_outputs() == ["saw [3, 2, 1]"]
    assert counter.restored == []  # the instance always held what the run committed
    cps = await storage.list_checkpoints(workflow_name="counting")
    seen = [c.executor_states.get("counter", {}).get("seen") for c in cps]
    assert seen == [None, [3], [3, 2], [3, 2, 1]]
    # Time travel: back to after superstep 1; the instance holds [3, 2, 1], the checkpoint [3].
    resumed = await wf.run(checkpoint_id=cps[1].checkpoint_id)
    assert resumed.get_outputs() == ["saw [3, 2, 1]"] and counter.restored == [{"seen": [3]}]
    # Another instance (another process, in effect) resumes the same way.
    other = Counter()
    again = await counting(other).run(checkpoint_id=cps[2].checkpoint_id, checkpoint_storage=storage)
    assert again.get_outputs() == ["saw [3, 2, 1]"] and other.restored == [{"seen": [3, 2]}]


async def test_a_new_run_starts_a_hooked_executor_from_the_state_it_was_built_with() -> None:
    counter = Counter()
    wf = counting(counter)
    await wf.run(2)
    assert (await wf.run(1)).get_outputs() == ["saw [1]"]  # not [2, 1, 1]
    assert counter.restored == [{"seen": []}]


async def test_hook_state_must_be_a_dict_and_fit_in_a_payload() -> None:
    class Listy(Counter):
        async def on_checkpoint_save(self) -> dict[str, Any]:
            return self.seen  # type: ignore[return-value]

    with pytest.raises(ExecutorFailedError, match=r"on_checkpoint_save must return a dict .*, not list"):
        await counting(Listy()).run(1)

    class Huge(Counter):
        async def on_checkpoint_save(self) -> dict[str, Any]:
            return {"blob": "x" * 3_000_000} if self.seen else {}

    with pytest.raises(ExecutorFailedError) as info:
        await counting(Huge()).run(1)
    assert isinstance(info.value.__cause__, PayloadTooLargeError)
    assert "'counter'" in str(info.value) and "checkpoint state (what on_checkpoint_save returned)" in str(info.value)


async def test_two_steps_of_one_hooked_executor_in_a_superstep_run_one_at_a_time_and_may_not_both_change_state() -> (
    None
):
    inside = 0
    overlaps: list[int] = []

    class Careful(Counter):
        @handler
        async def count(self, n: int, ctx: WorkflowContext[int, str]) -> None:
            nonlocal inside
            inside += 1
            overlaps.append(inside)
            await asyncio.sleep(0)
            self.seen.append(n)
            inside -= 1

    @executor(id="twice")
    async def twice(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(n)
        await ctx.send_message(n + 1)

    wf = WorkflowBuilder(start_executor=twice).add_edge(twice, careful := Careful()).build()
    with pytest.raises(StateConflictError, match=r"executor 'counter' ran several steps in superstep 2"):
        await wf.run(1)
    assert max(overlaps) == 1  # its steps took turns at its attributes
    assert careful.restored == [{"seen": []}]  # and each started from the committed state


# -- create_checkpoint() --------------------------------------------------------------------------


async def test_a_checkpoint_taken_before_any_message_returns_the_workflow_to_its_initial_state() -> None:
    storage = InMemoryCheckpointStorage()
    wf = asking()
    with pytest.raises(WorkflowError, match="checkpoint storage"):
        await wf.create_checkpoint()
    initial = await wf.create_checkpoint(storage)
    cp = await storage.load(initial)
    assert cp.iteration_count == 0 and cp.messages == [] and cp.state == {} and cp.workflow_name == "hil"
    await wf.run("q?")
    assert [r.request_id for r in wf.pending_requests] == ["r1"] and wf.state == {}
    back = await wf.run(checkpoint_id=initial, checkpoint_storage=storage)
    assert wf.pending_requests == [] and wf.run_state is WorkflowRunState.IDLE and back.get_outputs() == []
    assert (await wf.run("again")).get_outputs() == ["before", "sink:x"]


async def test_a_checkpoint_of_an_idle_run_keeps_its_pending_requests() -> None:
    storage = InMemoryCheckpointStorage()
    a = Asker(id="asker")
    wf = WorkflowBuilder(start_executor=a, name="ask", checkpoint_storage=storage).add_edge(a, sink).build()
    await wf.run("q?")
    cid = await wf.create_checkpoint()
    cp = await storage.load(cid)
    assert cp.iteration_count == 2 and list(cp.pending_request_info_events) == ["r1"]
    assert cp.pending_request_info_events["r1"].data == Ask(q="q?")
    assert cp.previous_checkpoint_id is not None  # it continues the run's lineage
    done = await wf.run(responses={"r1": "yes"})
    assert done.get_outputs() == ["q?->yes"] and wf.pending_requests == []
    await wf.run(checkpoint_id=cid)
    assert [r.request_id for r in wf.pending_requests] == ["r1"]


# -- reset_for_new_run() ----------------------------------------------------------------------------


class Resettable(Executor):
    def __init__(self, id: str, calls: list[str], fail: bool = False) -> None:
        super().__init__(id=id)
        self.calls = calls
        self.fail = fail

    @handler
    async def go(self, text: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.request_info(Ask(q=text), str)

    @response_handler
    async def on(self, req: Ask, resp: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(resp)

    async def reset(self) -> None:
        self.calls.append(self.id)
        if self.fail:
            raise RuntimeError(f"{self.id} cannot reset")


async def test_reset_for_new_run_calls_every_executor_reset_hook_and_leaves_nothing_of_the_run() -> None:
    calls: list[str] = []
    wf = WorkflowBuilder(start_executor=Resettable("r", calls)).build()
    (req,) = (await wf.run("q")).get_request_info_events()
    await wf.reset_for_new_run()
    assert calls == ["r"] and wf.pending_requests == [] and wf.run_state is WorkflowRunState.IDLE
    with pytest.raises(WorkflowError, match="no run"):
        await wf.run(responses={req.request_id: "late"})
    await wf.reset()  # the earlier name, the same thing
    assert calls == ["r", "r"]


async def test_every_reset_hook_runs_even_if_one_raises() -> None:
    calls: list[str] = []
    a, b = Resettable("a", calls, fail=True), Resettable("b", calls)
    wf = WorkflowBuilder(start_executor=a).add_edge(a, b).build()
    with pytest.raises(WorkflowError, match=r"reset\(\) of executor 'a' failed: RuntimeError: a cannot reset"):
        await wf.reset_for_new_run()
    assert calls == ["a", "b"]


def test_a_reset_not_awaited_still_forgets_the_run_but_warns_that_the_hooks_did_not_run() -> None:
    calls: list[str] = []
    wf = WorkflowBuilder(start_executor=Resettable("r", calls)).build()
    with pytest.warns(RuntimeWarning, match=r"not awaited.*\['r'\]"):
        wf.reset()
        gc.collect()
    assert calls == []
    plain = pipeline()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain.reset()  # no executor has a hook: nothing to warn about
        gc.collect()


# -- the concurrency guard --------------------------------------------------------------------------


def gated() -> tuple[Workflow, asyncio.Event, asyncio.Event]:
    started, gate = asyncio.Event(), asyncio.Event()

    @executor(id="slow")
    async def slow(msg: str, ctx: WorkflowContext[None, str]) -> None:
        started.set()
        await wait(gate)
        await ctx.yield_output(msg)

    return WorkflowBuilder(start_executor=slow).build(), started, gate


async def test_two_runs_started_back_to_back_cannot_both_pass() -> None:
    wf, _, gate = gated()
    first = wf.run("a")  # not awaited yet: the workflow is reserved already
    assert wf.is_running
    with pytest.raises(WorkflowError, match="already running"):
        wf.run("b")
    with pytest.raises(WorkflowError, match="already running"):
        wf.run("b", stream=True)
    with pytest.raises(WorkflowError, match="already running"):
        await wf.create_checkpoint(InMemoryCheckpointStorage())
    with pytest.raises(WorkflowError, match="already running"):
        wf.reset_for_new_run()
    gate.set()
    assert (await asyncio.wait_for(first, TIMEOUT)).get_outputs() == ["a"]
    assert not wf.is_running
    assert (await wf.run("c")).get_outputs() == ["c"]


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
async def test_a_stream_or_awaitable_dropped_before_it_is_read_does_not_leave_the_workflow_reserved() -> None:
    wf, _, gate = gated()
    gate.set()
    stream = wf.run("dropped", stream=True)
    assert wf.is_running
    del stream
    assert not wf.is_running
    wf.run("dropped too")  # an awaitable never awaited
    gc.collect()
    assert not wf.is_running
    assert (await wf.run("kept")).get_outputs() == ["kept"]


async def test_a_stream_abandoned_part_way_frees_the_workflow_and_its_late_cleanup_frees_nothing_else() -> None:
    wf, _, gate = gated()
    stream = wf.run("first", stream=True)
    async for ev in stream:
        if ev.type == "superstep_started":
            break
    del stream, ev
    gc.collect()
    assert not wf.is_running
    gate.set()
    second = wf.run("second", stream=True)
    for _ in range(5):
        await asyncio.sleep(0)  # the abandoned stream's cleanup runs on the loop meanwhile
    assert wf.is_running
    with pytest.raises(WorkflowError, match="already running"):
        wf.run("third")
    assert [e.data async for e in second if e.type == "output"] == ["second"]
    assert not wf.is_running


async def test_closing_a_stream_frees_the_workflow() -> None:
    wf, _, gate = gated()
    gate.set()
    stream = wf.run("x", stream=True)
    assert (await anext(stream)).type == "started"
    await stream.aclose()
    assert not wf.is_running
    assert (await wf.run("y")).get_outputs() == ["y"]


async def test_step_events_leave_out_data_too_large_to_stream_and_say_so() -> None:
    from temporal_workflows._engine.reporting import STEP_EVENT_DATA_LIMIT

    big = "x" * (STEP_EVENT_DATA_LIMIT + 1)

    @executor(id="relay")
    async def relay(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text)

    @executor(id="measure")
    async def measure(text: str, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(len(text))

    result = await WorkflowBuilder(start_executor=relay).add_edge(relay, measure).build().run(big)
    assert result.get_outputs() == [len(big)]  # the message itself is delivered whatever its size
    invoked = [e for e in result if e.type == "executor_invoked"]
    completed = [e for e in result if e.type == "executor_completed"]
    assert [(e.data, e.data_omitted) for e in invoked] == [(None, len(big) + 3)] * 2  # its JSON, a byte per item
    assert (completed[0].data, completed[0].data_omitted) == (None, len(big) + 3)
    assert completed[1].data == [len(big)] and completed[1].data_omitted is None
    shown = f"WorkflowEvent(type='executor_invoked', executor_id='relay', data_omitted={len(big) + 3})"
    assert str(invoked[0]) == shown


def test_a_step_error_class_named_by_a_failure_is_looked_up_never_imported() -> None:
    """``step_error`` makes a failure's class again only from modules already imported, and only when it can."""
    import sys

    from temporal_workflows._errors import rebuild_error, step_error
    from temporal_workflows.errors import ExecutorFailedError

    def failure(error_class: str, detail: str, error_type: str = "X") -> ExecutorFailedError:
        details = {"error_type": error_type, "detail": detail, "error_class": error_class, "executor_id": "s"}
        error = rebuild_error("ExecutorFailedError", f"executor 's' failed in superstep 1: {detail}", details)
        assert isinstance(error, ExecutorFailedError)
        return error

    unknown = failure("tw_never_imported_module.Boom", "boom", "Boom")
    assert step_error(unknown) is unknown and unknown.original is None
    assert "tw_never_imported_module" not in sys.modules
    assert type(failure("builtins.KeyError", "'k'", "KeyError").original) is KeyError
    assert type(failure("json.decoder.JSONDecodeError", "x", "JSONDecodeError").original) is type(None)  # needs 3 args
    assert failure("temporal_workflows._errors.StateConflictError", "x").original is None  # the library's own: as is
    assert failure("builtins.KeyboardInterrupt", "x").original is None  # not an Exception
    assert failure("test_maf_parity.<locals>.Local", "x").original is None
    rebuilt = failure(f"{__name__}.Refused", "no way").original
    assert type(rebuilt) is Refused and str(rebuilt) == "no way"


class Refused(Exception):
    pass


@pytest.mark.parametrize(
    "own",
    [KeyError("missing-key"), KeyError(42), KeyError(""), OSError(2, "gone"), UnicodeError("x", 1), ValueError("bad")],
    ids=repr,
)
def test_a_steps_exception_whose_message_quotes_reads_on_temporal_as_python_shows_it(own: Exception) -> None:
    """What a Temporal client makes of a step's failure reads as the step's exception read (issue #39).

    ``str(KeyError('missing-key'))`` is ``'missing-key'``, quoted: made again from that
    message it would read ``"'missing-key'"``. The step's arguments travel with its
    failure where its message alone does not give them back.
    """
    from temporal_workflows._errors import class_path, error_args_of, failure_details, rebuild_error

    sent = ExecutorFailedError("s", 1, own, error_class=class_path(type(own)))
    details = failure_details(sent)  # what the run's failure carries (JSON)
    assert (details.get("error_args") is not None) == (type(own) is not ValueError)
    error = rebuild_error("ExecutorFailedError", str(sent), details)
    assert isinstance(error, ExecutorFailedError) and error.original is not None
    assert type(error.original) is type(own)
    assert (str(error.original), repr(error.original), error.original.args) == (str(own), repr(own), own.args)
    assert error_args_of(ValueError("bad")) is None and error_args_of(KeyError(object())) is None


def test_a_quoting_builtin_from_a_run_recorded_before_arguments_travelled_reads_as_python_shows_it() -> None:
    from temporal_workflows._errors import rebuild_error

    details = {"error_type": "KeyError", "detail": "'missing-key'", "error_class": "builtins.KeyError"}
    error = rebuild_error("ExecutorFailedError", "executor 's' failed in superstep 1: KeyError: 'missing-key'", details)
    assert isinstance(error, ExecutorFailedError) and error.original is not None
    assert str(error.original) == "'missing-key'" and error.original.args == ("missing-key",)


# -- a step's own exception, combined with ExecutorFailedError ---------------------------------------------


class DiskFull(OSError):
    pass


class Coded(Exception):
    """A class whose constructor takes other arguments, with attributes and a property named like ours."""

    def __init__(self, code: int) -> None:
        super().__init__(f"code {code}")
        self.code = code

    @property
    def detail(self) -> str:
        return f"the program's own detail {self.code}"


class Slotted(Exception):
    __slots__ = ("where",)


def _combined(own: Exception) -> ExecutorFailedError:
    from temporal_workflows._errors import peer_error

    plain = ExecutorFailedError("s", 3, own, error_class=f"{type(own).__module__}.{type(own).__qualname__}")
    combined = peer_error(plain)
    assert isinstance(combined, ExecutorFailedError)
    return combined


@pytest.mark.parametrize(
    "own",
    [
        ValueError("bad"),
        KeyError("k"),
        DiskFull(28, "No space left on device"),
        Coded(7),
        Slotted("slotted"),
        Refused("no way"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_steps_exception_of_any_class_is_raised_as_itself_and_as_executor_failed_error(own: Exception) -> None:
    import pickle
    import traceback

    error = _combined(own)
    assert isinstance(error, type(own)) and type(error).__name__ == type(own).__name__
    assert str(error) == str(own) and repr(error) == repr(own) and error.args == own.args
    assert error.original is own and (error.executor_id, error.superstep) == ("s", 3)
    assert error.summary == f"executor 's' failed in superstep 3: {type(own).__name__}: {own}"
    assert traceback.format_exception_only(error)[-1] == "executor 's' failed in superstep 3\n"
    if isinstance(own, OSError):
        assert (error.errno, error.strerror) == (28, "No space left on device")  # type: ignore[attr-defined]
    if isinstance(own, Coded):
        assert error.code == 7 and error.detail == "the program's own detail 7"  # type: ignore[attr-defined]
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(own) and again.summary == error.summary
    assert _combined(type(own)(*own.args) if not isinstance(own, Coded) else Coded(7)).__class__ is type(error)


def test_a_step_failing_with_the_librarys_or_temporals_error_stays_executor_failed_error() -> None:
    from temporalio.exceptions import ApplicationError

    from temporal_workflows._errors import UndeliverableMessageError, peer_error

    for own in (
        UndeliverableMessageError("nowhere", source_id="a", type_name="str", targets=[]),
        ApplicationError("refused", type="Refused", non_retryable=True),
    ):
        plain = ExecutorFailedError("s", 1, own)
        assert peer_error(plain) is plain and str(plain) == plain.summary


def test_a_combined_class_is_never_read_back_as_one_of_the_librarys_failure_types() -> None:
    """A failure of type ``"Refused"`` (a step's bare class name) is not the library's error, whatever was raised."""
    from temporal_workflows._errors import error_classes, rebuild_error

    _combined(Refused("no way"))
    assert "Refused" not in error_classes() and rebuild_error("Refused", "no way") is None
