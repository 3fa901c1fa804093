"""The Temporal run adapter's task order, without a server: which done task the loop gets is decided by
the order the adapter started the tasks (workers before the mailbox pull), never by set or hash order."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from workflows.runtime.types.named_task import PendingPull, PendingWorker, PullTask, WorkerTask
from workflows.runtime.types.step_id import StepId

from temporal_workflows._llama_runtime._protocol import RunInput
from temporal_workflows._llama_runtime._workflow import WorkflowRunAdapter


async def _value(v: Any) -> Any:
    return v


def _adapter() -> WorkflowRunAdapter:
    from temporal_workflows._llama_runtime._options import StepOptions

    adapter = WorkflowRunAdapter(None, None, None, RunInput(workflow_name="x"), StepOptions())  # type: ignore[arg-type]
    adapter.releasing = True  # no idle release here: that asks Temporal whether history is long
    return adapter


async def test_the_first_started_done_worker_is_reduced_first_whatever_the_list_order() -> None:
    for reverse in (False, True):
        adapter = _adapter()
        pending: list[Any] = [PendingWorker(StepId.root(f"s{i}"), i, _value(i)) for i in range(5)]
        pending.append(PendingPull(0, _value(None)))
        first = await adapter.wait_for_next_task([], pending, None)
        assert isinstance(first.completed, asyncio.Task)
        await asyncio.sleep(0)  # every task is done now
        started = first.started
        assert first.completed is started[0].task
        running = [nt for nt in started if nt.task is not first.completed]
        order = []
        while running:
            handed = list(reversed(running)) if reverse else running
            result = await adapter.wait_for_next_task(handed, [], None)
            done = next(nt for nt in running if nt.task is result.completed)
            order.append(done.key)
            running.remove(done)
        assert order == ["s1:1", "s2:2", "s3:3", "s4:4", "__pull__:0"]
        assert isinstance(started[-1], PullTask) and isinstance(started[0], WorkerTask)


async def test_settled_tasks_just_started_are_done_at_the_same_pick() -> None:
    """With ``PATCH_SETTLE_STARTED`` the adapter lets the tasks it starts take their first step before it
    picks (as the default runtime's ``asyncio.wait`` does): one that finishes there (a step answered from
    run-ahead) is handed back at once, even when the loop asks not to wait (``timeout=0``); without it,
    it is done only at the next pick."""
    for settle in (False, True):
        adapter = _adapter()
        adapter.settle = settle
        got = await adapter.wait_for_next_task([], [PendingWorker(StepId.root("a"), 0, _value(1))], 0)
        if settle:
            assert got.completed is got.started[0].task
        else:
            assert got.completed is None
            await asyncio.sleep(0)
            again = await adapter.wait_for_next_task(got.started, [], 0)
            assert again.completed is got.started[0].task


def test_the_build_id_carries_the_workflows_version_and_changes_with_the_steps() -> None:
    from workflows import Workflow, step
    from workflows.events import StartEvent, StopEvent

    from temporal_workflows.llama import TemporalRuntime

    class One(Workflow):
        @step
        async def only(self, ev: StartEvent) -> StopEvent:
            return StopEvent()

    class Two(Workflow):
        @step
        async def only(self, ev: StartEvent) -> StopEvent:
            return StopEvent()

        @step(num_workers=2)
        async def more(self, ev: StopEvent) -> None:
            return None

    a, b, c = TemporalRuntime(), TemporalRuntime(), TemporalRuntime()
    One(runtime=a)
    One(runtime=b)
    Two(runtime=c)
    assert a.build_id().startswith("llama-2.26.1-")
    assert a.build_id() == b.build_id() != c.build_id()
    One(timeout=5, runtime=b)
    assert b.build_id() != a.build_id()


def test_an_in_process_worker_gets_a_queue_of_its_own_and_a_client_the_shared_one() -> None:
    from temporal_workflows.llama import TemporalRuntime

    hosted = TemporalRuntime(worker=True)
    assert hosted.task_queue.startswith("llama-index-workflows-")
    assert hosted.task_queue == TemporalRuntime(worker=True).task_queue  # one program, one queue
    assert TemporalRuntime().task_queue == "llama-index-workflows"  # where production workers poll
    assert TemporalRuntime(worker=True, task_queue="q").task_queue == "q"


_QUEUE_PROGRAM = """
import sys
from workflows import Context, Workflow, step
from workflows.events import StartEvent, StopEvent
from temporal_workflows.llama import TemporalRuntime

class {name}(Workflow):
    @step
    async def go(self, ctx: Context, ev: StartEvent) -> StopEvent:
        return StopEvent(result=1)

with TemporalRuntime(worker=True).registering():
    {name}()
print(TemporalRuntime(worker=True).task_queue)
"""


def test_an_in_process_worker_queue_is_the_programs_so_a_restarted_program_polls_it_again(tmp_path: Path) -> None:
    """A run stays on its queue: the same program started again gets the same queue (and so resumes its runs),
    also from another path (a workflow defined in ``__main__``); a program hosting other workflows gets another."""

    def queue_of(name: str, file: str) -> str:
        script = tmp_path / file
        script.write_text(_QUEUE_PROGRAM.format(name=name))
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
        return out.stdout.strip()

    first = queue_of("Counter", "a.py")
    assert first.startswith("llama-index-workflows-")
    assert queue_of("Counter", "a.py") == first  # restarted: the same queue
    assert queue_of("Counter", "b.py") == first  # the same workflow from a copy of the file: it resumes there
    assert queue_of("Other", "a.py") != first  # other workflows: another queue


def test_a_workflows_store_type_is_looked_up_once_until_a_step_is_added() -> None:
    """The step activity caches a workflow's store type per instance and step set (LlamaIndex reflects over
    the steps each time): the cache answers as LlamaIndex does, and a step added with ``Workflow.add_step``
    shows at once."""
    from unittest import mock

    from pydantic import BaseModel
    from workflows import Context, Workflow, step
    from workflows.context.state_store import DictState
    from workflows.events import StartEvent, StopEvent

    from temporal_workflows._llama_runtime import _reflection

    class Counter(BaseModel):
        n: int = 0

    class Steps(Workflow):
        @step
        async def first(self, ev: StartEvent) -> StopEvent:
            return StopEvent(result=1)

    wf = Steps()
    assert _reflection.state_type(wf) is DictState
    with mock.patch("temporal_workflows._llama_runtime._reflection.infer_state_type") as infer:
        for _ in range(3):
            assert _reflection.state_type(wf) is DictState
        assert infer.call_count == 0

    @step(workflow=Steps)
    async def extra(ctx: Context[Counter], ev: StopEvent) -> None:
        return None

    assert _reflection.state_type(wf) is Counter  # the class's steps changed: looked up again


def test_events_whose_dump_gives_them_back_skip_the_exact_form_check_and_others_keep_it() -> None:
    """A step start or end (``StepStateChanged``) or a plain event is recorded without validating its dump
    back; the shortcut never drops an exact form the full check would have added."""
    import enum
    import warnings
    from unittest import mock

    from pydantic import BaseModel, field_validator
    from workflows.events import Event, StartEvent, StepState, StepStateChanged, StopEvent

    from temporal_workflows._llama_runtime import _wire
    from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer as _DeclaredTypesSerializer

    class Color(enum.Enum):
        RED = 1

    class Plain(Event):
        n: int
        label: str | None = None
        ratio: float = 0.5
        flag: bool = False

    class AnyField(Event):
        value: Any = None

    class Colored(Event):
        color: Color
        count: int = 0

    class Doubling(Event):
        n: int

        @field_validator("n")
        @classmethod
        def double(cls, v: int) -> int:
            return v * 2

    class State(BaseModel):
        items: list[int] = []

    state_changed = StepStateChanged(name="s", step_state=StepState.RUNNING, worker_id="0", input_event_name="x")
    extra = Plain(n=1)
    extra._data["more"] = (1, 2)
    miscoloured = Colored(color=Color.RED)
    miscoloured.count = "7"  # type: ignore[assignment]  # assignments are not validated
    cases: list[tuple[BaseModel, bool]] = [
        (state_changed, True),
        (Plain(n=1, label="a", ratio=2.0, flag=True), True),
        (Colored(color=Color.RED), True),
        (Plain(n=1, ratio=float("inf")), False),
        (AnyField(value=(1, 2)), False),
        (AnyField(value=Color.RED), False),
        (extra, False),
        (miscoloured, False),
        (Doubling(n=2), False),
        (StartEvent(a=(1, 2)), False),
        (StopEvent(result={1: "x"}), False),
        (State(items=[1]), False),
    ]
    serializer = _DeclaredTypesSerializer([])
    for model, fast in cases:
        assert _wire._dump_gives_back(model) is fast, model
        if fast:
            # What the full check decides for it: no exact form.
            with mock.patch.object(_wire, "_dump_gives_back", return_value=False):
                assert _wire.exact_form(model, model.model_dump(mode="json"), serializer) is None, model
    # Each of these the full check does give an exact form (so the shortcut must not take them).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns that the unvalidated "7" is not an int
        for model in (AnyField(value=(1, 2)), AnyField(value=Color.RED), extra, miscoloured):
            assert _wire.exact_form(model, model.model_dump(mode="json"), serializer) is not None, model


def test_an_events_record_is_llamaindexs_own_without_probing_for_a_class_name() -> None:
    from workflows.context.serializers import JsonSerializer
    from workflows.events import Event, StartEvent, StepState, StepStateChanged, StopEvent

    from temporal_workflows._llama_runtime import _wire

    class Plain(Event):
        n: int
        tags: list[str] | None = None

    class Named(Event):
        class_name: str = "x"

    class Component(Event):
        @classmethod
        def class_name(cls) -> str:
            return "component"

    dynamic = Plain(n=1)
    dynamic._data["class_name"] = "y"  # LlamaIndex would take it for a component
    llamaindex = JsonSerializer()
    for event in (
        Plain(n=1, tags=["a"]),
        StartEvent(a=1, b=[1, 2]),
        StopEvent(result={"x": 1}),
        StepStateChanged(name="s", step_state=StepState.RUNNING, worker_id="0", input_event_name="x"),
    ):
        record = _wire.event_record(event)
        assert record == llamaindex.serialize_value(event)
        assert list(record or {}) == ["__is_pydantic", "value", "qualified_name"]  # the same JSON, key order too
    for other in (Named(), Component(), dynamic, {"a": 1}, 3):
        assert _wire.event_record(other) is None


def test_a_plain_events_key_decides_its_record() -> None:
    """Published step starts and ends are serialized once per distinct event: the key the run caches them
    under tells apart everything the record depends on (1 and True and 1.0 too)."""
    import enum

    from workflows.events import Event, StepState, StepStateChanged

    from temporal_workflows._llama_runtime import _wire
    from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer as _DeclaredTypesSerializer

    class Mode(enum.Enum):
        A = "a"

    class Value(Event):
        value: Any = None

    serializer = _DeclaredTypesSerializer([])
    events: list[Event] = [
        StepStateChanged(name="s", step_state=StepState.RUNNING, worker_id="0", input_event_name="x"),
        StepStateChanged(name="s", step_state=StepState.NOT_RUNNING, worker_id="0", input_event_name="x"),
        StepStateChanged(name="s", step_state=StepState.RUNNING, worker_id="1", input_event_name="x"),
        Value(value=1),
        Value(value=True),
        Value(value="1"),
        Value(value=Mode.A),
        Value(value=None),
    ]
    records: dict[tuple[Any, ...], str] = {}
    for event in events:
        key = _wire.plain_key(event)
        assert key is not None
        assert key not in records, event
        records[key] = serializer.serialize(event)
        again = type(event).model_validate(event.model_dump())  # an equal event, another object
        assert _wire.plain_key(again) == key and serializer.serialize(again) == records[key]
    extra = Value(value=1)
    extra._data["more"] = 1
    for other in (Value(value=1.0), Value(value=[1]), Value(value=(1,)), extra):
        assert _wire.plain_key(other) is None


def test_a_steps_store_is_built_as_llamaindex_builds_it() -> None:
    """The step activity builds a run's ctx.store per invocation (an ``InMemoryStateStore`` recording with the
    runtime's serializer): the store has the same fields, reads and writes the same, and two built from one
    payload are independent."""
    from pydantic import BaseModel
    from workflows.context.state_store import DictState, InMemoryStateStore

    from temporal_workflows._llama_runtime import _wire
    from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer as _DeclaredTypesSerializer

    class Counter(BaseModel):
        n: int = 0

    serializer = _DeclaredTypesSerializer([Counter])

    async def check() -> None:
        seed = InMemoryStateStore(DictState())
        await seed.set("k", [1, 2])
        data = seed.to_dict(serializer)
        empty = InMemoryStateStore(DictState()).to_dict(serializer)
        for payload, state_type in ((data, DictState), (None, Counter), ({}, DictState), (empty, DictState)):
            ours = _wire.run_store(serializer, payload, state_type)
            theirs = (
                InMemoryStateStore.from_dict(payload, serializer)
                if payload is not None
                else InMemoryStateStore(state_type())
            )
            assert set(vars(ours)) - {"check"} == set(vars(theirs)) and ours.state_type is theirs.state_type
            assert (await ours.get_state()).model_dump() == (await theirs.get_state()).model_dump()
        first, second = _wire.run_store(serializer, data, DictState), _wire.run_store(serializer, data, DictState)
        theirs = InMemoryStateStore.from_dict(data, serializer)
        theirs._serializer = serializer  # as run_store records with the runtime's serializer
        diffs = []
        for store in (first, theirs):
            before = store.checkpoint()
            await store.set("k", [3])
            diffs.append(store.checkpoint().diff(before))
        assert diffs[0] == diffs[1] and diffs[0]
        assert await second.get("k") == [1, 2] and await first.get("k") == [3]

    asyncio.run(check())


def test_an_equal_plain_event_in_another_object_is_encoded_once_and_the_same() -> None:
    from workflows.events import Event

    from temporal_workflows._llama_runtime import _wire
    from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer as _DeclaredTypesSerializer

    class Done(Event):
        n: int

    serializer = _DeclaredTypesSerializer([Done])
    memo: _wire.EncodeMemo = {}
    first = _wire.encode_event(serializer, Done(n=1), memo)
    with mock.patch.object(serializer, "serialize", side_effect=AssertionError("encoded again")):
        assert _wire.encode_event(serializer, Done(n=1), memo) == first
    assert _wire.encode_event(serializer, Done(n=2), memo) == serializer.serialize(Done(n=2)) != first


def test_a_run_result_json_cannot_carry_comes_back_in_process_and_fails_clearly_elsewhere() -> None:
    """A StopEvent whose result is an object (a Resource, say) stays in the process that made it: the wire
    carries a token, a caller in that process gets the object, and a token from elsewhere is a clear error."""
    import pytest
    from workflows.context.serializers import JsonSerializer
    from workflows.errors import WorkflowRuntimeError
    from workflows.events import StopEvent
    from workflows.runtime.types.results import StepWorkerResult

    from temporal_workflows._llama_runtime import _wire

    class Connection:
        pass

    conn = Connection()
    [entry] = _wire.encode_outputs([StepWorkerResult(result=StopEvent(result=conn))])
    [decoded] = _wire.decode_outputs(JsonSerializer(), [entry])
    assert isinstance(decoded, StepWorkerResult) and isinstance(decoded.result, StopEvent)
    assert _wire.resolve_in_process(decoded.result, strict=True).result is conn
    elsewhere = StopEvent(result={_wire.IN_PROCESS_KEY: "another-process:1"})
    assert _wire.resolve_in_process(elsewhere, strict=False) is elsewhere
    with pytest.raises(WorkflowRuntimeError, match="made in another process"):
        _wire.resolve_in_process(elsewhere, strict=True)


def test_the_private_names_module_refuses_another_llamaindex_version_naming_both() -> None:
    """Every private LlamaIndex name is touched in ``_llama_private``, which loads only under the pinned version:
    under another, importing the runtime fails at once with both versions named (not later, in a run)."""
    from temporal_workflows._llama_runtime import _llama_private

    assert _llama_private.installed_workflows_version() == _llama_private.PINNED_WORKFLOWS_VERSION == "2.26.1"
    _llama_private.check_version("2.26.1")
    with pytest.raises(ImportError, match=r"llama-index-workflows==2\.26\.1 exactly \(2\.27\.0 is installed\)"):
        _llama_private.check_version("2.27.0")
    with pytest.raises(_llama_private.LlamaIndexVersionError, match="not installed"):
        _llama_private.check_version(None)


def test_only_the_private_names_module_touches_llamaindex_private_names() -> None:
    """No other module of the runtime imports an underscore name from LlamaIndex, swaps a class, or reaches
    into a LlamaIndex object's private attributes by name."""
    import ast
    import re

    package = Path(__file__).parents[1] / "temporal_workflows" / "_llama_runtime"
    offenders = []
    for path in sorted(package.glob("*.py")):
        if path.name == "_llama_private.py":
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "workflows":
                offenders += [f"{path.name}: imports {a.name}" for a in node.names if a.name.startswith("_")]
        if "__class__ =" in source:
            offenders.append(f"{path.name}: assigns __class__")
        for attr in ("_get_steps", "_step_configs", "_timeout", "_num_concurrent_runs", "_step_functions_version"):
            if re.search(rf"\.{attr}\b", source):
                offenders.append(f"{path.name}: reads .{attr}")
    assert not offenders, offenders


def test_a_store_keeps_the_types_json_would_change_and_refuses_what_it_cannot_keep() -> None:
    """``ctx.store`` round-trips datetime, Decimal, UUID, NaN (as the default runtime keeps them in process); a
    function is refused at ``set``, naming the key and the type, never the value."""
    import datetime
    import decimal
    import math

    from workflows.context.state_store import DictState

    from temporal_workflows._llama_runtime import _wire
    from temporal_workflows._llama_runtime._serializer import DeclaredTypesSerializer
    from temporal_workflows._llama_runtime._store_values import StoreValueRefused

    serializer = DeclaredTypesSerializer([])

    async def check() -> None:
        store = _wire.run_store(serializer, None, DictState)
        before = _wire.run_store(serializer, None, DictState).checkpoint()
        values = {
            "when": datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC),
            "amount": decimal.Decimal("1.10"),
            "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "nan": float("nan"),
            "nested": {"day": [datetime.date(2024, 1, 1)]},
        }
        for key, value in values.items():
            await store.set(key, value)
        patch = store.checkpoint().diff(before)
        sent = json.loads(json.dumps(patch))  # as the JSON data converter carries it
        from workflows.context.state_store import apply_state_patch

        data = apply_state_patch(_wire.run_store(serializer, None, DictState).checkpoint().to_dict(), sent)
        back = _wire.run_store(serializer, data, DictState)
        for key, value in values.items():
            got = await back.get(key)
            assert type(got) is type(value)
            assert (math.isnan(got) and math.isnan(value)) if key == "nan" else got == value
        with pytest.raises(StoreValueRefused, match=r"the value for 'fn' \(a function\) cannot be kept"):
            await store.set("fn", lambda: None)
        assert await store.get("fn", default=None) is None

    asyncio.run(check())


def test_the_state_query_shows_the_store_as_plain_json() -> None:
    """The ``state`` query's answer from the store as the run holds it: a ``DictState``'s values as they are (a
    string that looks like a number stays a string), a model's fields, a typed state's fields; the older
    payload whose values are the serializer's strings reads the same."""
    from temporal_workflows._llama_runtime._run_view import store_json

    tree = {
        "state_data": {
            "_tree": "dict",
            "_data": {
                "a": "123",
                "b": {"x": [1]},
                "m": {"__is_pydantic": True, "value": {"n": 0}, "qualified_name": "app.S"},
            },
        }
    }
    assert store_json(tree, 1_000_000) == {"a": "123", "b": {"x": [1]}, "m": {"n": 0}}
    typed = {"state_data": {"_tree": "model", "__is_pydantic": True, "value": {"n": 2}, "qualified_name": "app.S"}}
    assert store_json(typed, 1_000_000) == {"n": 2}
    assert store_json({"state_data": {"_data": {"a": '"123"', "b": "[1]"}}}, 1_000_000) == {"a": "123", "b": [1]}
    assert store_json(None, 1_000_000) == {}
