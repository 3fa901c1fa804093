"""Serialization: what may cross a superstep boundary, and that it comes back with its type.

Messages, state values, requests and outputs are pydantic models, dataclasses or
JSON values (or lists/dicts of one model type); anything else is refused where
user code hands it over, naming what it was.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from temporal_workflows import (
    Executor,
    FileCheckpointStorage,
    InvalidResponseError,
    NotSerializableError,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    register_type,
    response_handler,
)
from temporal_workflows._engine.serde import Envelope, decode, encode, type_key, validate_as


class Item(BaseModel):
    name: str
    n: int
    when: datetime | None = None
    tags: set[str] = set()


class Basket(BaseModel):
    owner: str
    items: list[Item]


@dataclasses.dataclass
class Point:
    x: float
    y: float


@dataclasses.dataclass
class Shape:
    name: str
    points: list[Point]
    created: datetime


class Opaque(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: object


WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
SHAPE = Shape("triangle", [Point(0, 0), Point(1, 0), Point(0.5, 1)], WHEN)
ITEMS = [Item(name="a", n=1, when=WHEN, tags={"x", "y"}), Item(name="b", n=2)]


@pytest.mark.parametrize(
    "value",
    [
        ITEMS[0],
        Basket(owner="o", items=ITEMS),
        SHAPE,
        ITEMS,
        {"first": ITEMS[0], "second": ITEMS[1]},
        [SHAPE, SHAPE],
        {"nested": [1, "two", None, 3.5, True, {"deep": []}], "empty": {}},
        [],
        {},
        "text ✓",
        0,
        -(2**70),
        None,
        False,
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_round_trip_through_json_with_their_type(value: Any) -> None:
    env = encode(value)
    wire = json.loads(json.dumps({"type": env.type, "data": env.data}))  # what a checkpoint file holds
    back = decode(Envelope(wire["type"], wire["data"]))
    assert back == value and type(back) is type(value)
    if isinstance(value, list) and value:
        assert [type(v) for v in back] == [type(v) for v in value]
    if isinstance(value, dict) and value:
        assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in value.items()}


def test_a_tuple_travels_as_a_json_list() -> None:
    assert decode(encode((1, "a"))) == [1, "a"]
    assert decode(encode((ITEMS[0],))) == [ITEMS[0]]


def test_decoded_values_are_fresh_copies() -> None:
    env = encode({"list": [1, 2]})
    first = decode(env)
    first["list"].append(3)
    assert decode(env) == {"list": [1, 2]}
    model_env = encode(ITEMS[0])
    decode(model_env).tags.add("mutated")
    assert decode(model_env).tags == {"x", "y"}


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({1, 2}, "set"),
        (object(), "builtins.object"),
        (WHEN, "datetime.datetime"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        ({1: "int key"}, "non-string key"),
        ([ITEMS[0], 1], "Item"),
        ({"ok": [1, {2}]}, "set"),
        (b"bytes", "bytes"),
        (Opaque(thing=object()), "Opaque"),
    ],
    ids=lambda v: repr(v)[:20],
)
def test_encode_refuses_what_json_cannot_carry_and_names_it(value: Any, named: str) -> None:
    with pytest.raises(NotSerializableError) as info:
        encode(value, what="state key 'k'")
    assert named in str(info.value) and "state key 'k'" in str(info.value)
    assert isinstance(info.value, TypeError)  # also a TypeError, as json.dumps would raise


def test_decode_never_imports_a_module_or_builds_an_unregistered_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "tw_payload_module.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('side effect')\n"
        "from pydantic import BaseModel\n"
        "class Evil(BaseModel):\n"
        "    x: int = 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(NotSerializableError, match="not registered"):
        decode(Envelope("tw_payload_module:Evil", {}))
    assert "tw_payload_module" not in sys.modules and not marker.exists()
    with pytest.raises(NotSerializableError):
        decode(Envelope("json:JSONDecoder", {}))  # imported, but neither a model nor a dataclass
    with pytest.raises(NotSerializableError):
        decode(Envelope("list[os:system]", [{}]))


def test_register_type_takes_only_models_and_dataclasses() -> None:
    register_type(Item)
    register_type(Point)
    with pytest.raises(TypeError):
        register_type(dict)


def test_strict_json_validation_coerces_objects_into_models_but_never_changes_json_types() -> None:
    item = validate_as(Item, {"name": "a", "n": 1, "when": WHEN.isoformat(), "tags": ["x"]}, strict=True)
    assert item == Item(name="a", n=1, when=WHEN, tags={"x"})
    assert validate_as(Shape, encode(SHAPE).data, strict=True) == SHAPE
    for tp, value in ((int, "5"), (bool, 1), (str, 5), (Item, {"name": "a", "n": "1"})):
        with pytest.raises(ValueError):
            validate_as(tp, value, strict=True)
    assert validate_as(int, "5") == 5  # responses from people keep pydantic's lax mode


# -- at the call site ---------------------------------------------------------------------------


BAD_VALUES = {"set": {1, 2}, "object": object(), "datetime": WHEN, "nan": math.nan}


class Careless(Executor):
    """Tries every way of handing over each bad value; records each refusal and carries on."""

    @handler
    async def run(self, msg: str, ctx: WorkflowContext[Any, Any]) -> None:
        errors: dict[str, str] = {}
        for name, bad in BAD_VALUES.items():
            for how, hand_over in {
                "send_message": lambda v: ctx.send_message(v),
                "yield_output": lambda v: ctx.yield_output(v),
                "request_info": lambda v: ctx.request_info(v, str),
            }.items():
                try:
                    await hand_over(bad)
                except NotSerializableError as e:
                    errors[f"{how}/{name}"] = str(e)
            try:
                ctx.set_state(name, bad)
            except NotSerializableError as e:
                errors[f"set_state/{name}"] = str(e)
        ctx.set_state("errors", errors)

    @response_handler
    async def on(self, request: Any, response: str, ctx: WorkflowContext) -> None:
        pass


async def test_unserializable_values_are_refused_at_the_call_that_hands_them_over() -> None:
    result = await WorkflowBuilder(start_executor=Careless("careless")).build().run("go")
    errors = result.state["errors"]
    assert set(errors) == {
        f"{how}/{name}" for how in ("send_message", "yield_output", "request_info", "set_state") for name in BAD_VALUES
    }
    assert "executor 'careless'" in errors["send_message/set"] and "message" in errors["send_message/set"]
    assert (
        "state key 'datetime'" in errors["set_state/datetime"] and "datetime.datetime" in errors["set_state/datetime"]
    )
    assert "output" in errors["yield_output/object"] and "builtins.object" in errors["yield_output/object"]
    assert "request" in errors["request_info/nan"] and "nan" in errors["request_info/nan"]
    assert set(result.state) == {"errors"}  # nothing bad was written
    assert result.get_outputs() == [] and result.get_request_info_events() == []


# -- a full round trip through a checkpoint file ------------------------------------------------


@dataclasses.dataclass
class Batch:
    shapes: list[Shape]
    label: str


class Observed(BaseModel):
    """What the consumer saw after the resume (several types in one output need a model)."""

    batch: Batch
    item: Item
    shape: Shape
    items: list[Item]
    by_name: dict[str, Item]
    plain: dict[str, Any]


class Answered(BaseModel):
    request: Basket
    response: Shape
    basket: Basket


class Producer(Executor):
    @handler
    async def produce(self, msg: str, ctx: WorkflowContext[Batch, Item]) -> None:
        ctx.set_state("item", ITEMS[0])
        ctx.set_state("shape", SHAPE)
        ctx.set_state("items", ITEMS)
        ctx.set_state("by_name", {i.name: i for i in ITEMS})
        ctx.set_state("plain", {"nested": [1, "x", None, 1.5, True]})
        ctx.set_executor_state("basket", Basket(owner=msg, items=ITEMS))
        await ctx.request_info(Basket(owner=msg, items=ITEMS[:1]), Shape)
        await ctx.yield_output(ITEMS[1])
        await ctx.send_message(Batch(shapes=[SHAPE], label=msg))

    @response_handler
    async def on_shape(self, request: Basket, response: Shape, ctx: WorkflowContext[Batch, Answered]) -> None:
        basket = ctx.get_executor_state("basket")
        await ctx.yield_output(Answered(request=request, response=response, basket=basket))


class Consumer(Executor):
    @handler
    async def consume(self, batch: Batch, ctx: WorkflowContext[None, Observed]) -> None:
        seen = {key: ctx.get_state(key) for key in ("item", "shape", "items", "by_name", "plain")}
        assert type(batch) is Batch and type(seen["shape"]) is Shape and type(seen["items"][1]) is Item
        await ctx.yield_output(Observed(batch=batch, **seen))


def typed_graph(storage: FileCheckpointStorage | None = None) -> Workflow:
    producer = Producer("producer")
    return (
        WorkflowBuilder(start_executor=producer, name="typed", checkpoint_storage=storage)
        .add_edge(producer, Consumer("consumer"))
        .build()
    )


async def test_everything_round_trips_through_a_checkpoint_file_into_a_fresh_workflow(tmp_path: Path) -> None:
    storage = FileCheckpointStorage(tmp_path)
    first = await typed_graph(storage).run("owner-1")
    assert first.get_outputs()[0] == ITEMS[1] and type(first.get_outputs()[0]) is Item
    (cp,) = [c for c in await storage.list_checkpoints(workflow_name="typed") if c.superstep == 1]
    raw = json.loads((tmp_path / f"{cp.checkpoint_id}.json").read_text())
    assert raw["state"]["item"]["type"] == type_key(Item)
    assert raw["state"]["items"]["type"] == f"list[{type_key(Item)}]"
    assert raw["messages"][0]["messages"][0]["type"] == type_key(Batch)

    fresh = typed_graph()  # built again from the same function, sharing nothing with the first run
    resumed = await fresh.run(checkpoint_id=cp.checkpoint_id, checkpoint_storage=FileCheckpointStorage(tmp_path))
    (out,) = resumed.get_outputs()
    assert out == Observed(
        batch=Batch(shapes=[SHAPE], label="owner-1"),
        item=ITEMS[0],
        shape=SHAPE,
        items=ITEMS,
        by_name={"a": ITEMS[0], "b": ITEMS[1]},
        plain={"nested": [1, "x", None, 1.5, True]},
    )
    assert type(out.batch.shapes[0].points[0]) is Point and out.item.when == WHEN
    assert resumed.state["by_name"]["a"].tags == {"x", "y"}
    assert set(resumed.state) == {"item", "shape", "items", "by_name", "plain"}  # no private keys

    (req,) = fresh.pending_requests
    assert req.data == Basket(owner="owner-1", items=ITEMS[:1]) and type(req.data.items[0]) is Item
    answer = json.loads(json.dumps(encode(SHAPE).data))  # a JSON answer, e.g. from a CLI
    final = await fresh.run(responses={req.request_id: answer})
    expected = Answered(request=req.data, response=SHAPE, basket=Basket(owner="owner-1", items=ITEMS))
    assert final.get_outputs() == [expected]


# -- decoding resolves registered types only, and messages never quote values --------------------

VALUE_SECRET = "tw-secret-value-5d21c0"


def run_fresh(code: str) -> str:
    """Run ``code`` in a new interpreter (nothing imported, encoded or registered yet); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1]
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def models_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path]:
    """An imported module of models, none registered yet, whose lazy ``__getattr__`` leaves a marker when called."""
    marker = tmp_path / "getattr-called"
    name = f"tw_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import dataclasses
            import pathlib
            from pydantic import BaseModel

            class Registered(BaseModel):
                x: int = 0

            class Sibling(BaseModel):
                y: int = 0

            class Outer:
                @dataclasses.dataclass
                class Inner:
                    z: int = 0

            def __getattr__(name):
                pathlib.Path({str(marker)!r}).write_text(name)
                return type(name, (BaseModel,), {{"__module__": __name__, "__qualname__": name}})
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return __import__(name), marker


def test_decode_builds_only_registered_types_and_their_modules_own_models(models_module: tuple[Any, Path]) -> None:
    module, marker = models_module
    name = module.__name__
    for key in ("Registered", "Sibling", "Outer.Inner"):  # imported, yet no type of that module is registered
        with pytest.raises(NotSerializableError, match="not registered"):
            decode(Envelope(f"{name}:{key}", {}))
    with pytest.raises(NotSerializableError, match="not registered"):
        decode(Envelope("pydantic.main:BaseModel", {}))  # imported, a model, never registered
    register_type(module.Registered)  # as building a graph that names it does
    assert decode(Envelope(f"{name}:Registered", {"x": 1})) == module.Registered(x=1)
    # A state value's type usually sits next to the message types: the module's own models decode too ...
    assert decode(Envelope(f"{name}:Sibling", {"y": 2})) == module.Sibling(y=2)
    assert decode(Envelope(f"{name}:Outer.Inner", {"z": 3})) == module.Outer.Inner(z=3)
    # ... but only classes it defines, found in its namespace: not what it imported, and never via __getattr__.
    for key in ("BaseModel", "dataclasses", "pathlib", "Outer", "Missing", "Outer.Missing", "Sibling.model_fields"):
        with pytest.raises(NotSerializableError, match="not registered"):
            decode(Envelope(f"{name}:{key}", {}))
    assert not marker.exists()


def test_decode_never_calls_a_modules_lazy_getattr(models_module: tuple[Any, Path]) -> None:
    module, marker = models_module
    for registered in (False, True):
        if registered:
            register_type(module.Registered)
        for key in (f"{module.__name__}:Anything", f"list[{module.__name__}:Anything]"):
            with pytest.raises(NotSerializableError, match="not registered"):
                decode(Envelope(key, [{}] if key.startswith("list") else {}))
    assert not marker.exists()


def test_names_pydantic_imports_lazily_decode_to_nothing_and_import_nothing() -> None:
    """``pydantic:RootModel`` was resolved by getattr(pydantic, ...), which imports pydantic.root_model."""
    out = run_fresh(
        textwrap.dedent(
            """
            import sys
            from temporal_workflows import NotSerializableError
            from temporal_workflows._engine.serde import Envelope, decode
            before = set(sys.modules)
            for key, data in [
                ("pydantic:RootModel", 5),
                ("pydantic:validate_call", {}),
                ("pydantic:BaseModel", {}),
                ("pydantic.main:BaseModel", {}),
                ("list[pydantic:RootModel]", [5]),
                ("dict[pydantic:ConfigDict]", {"a": {}}),
            ]:
                try:
                    decode(Envelope(key, data))
                except NotSerializableError:
                    continue  # refused by name
                except Exception as e:
                    print("resolved", key, type(e).__name__)  # found a type, which then failed to validate
                    continue
                print("decoded", key)
            print("imported", sorted(set(sys.modules) - before))
            """
        )
    )
    assert out.strip() == "imported []"


def test_the_librarys_own_types_decode_in_a_process_that_never_encoded_one() -> None:
    """A client reading a run's event stream decodes events (and RequestTimedOut) it never encoded itself."""
    out = run_fresh(
        textwrap.dedent(
            """
            from pydantic import BaseModel
            from temporal_workflows import _events, _requests
            from temporal_workflows._engine.serde import Envelope, _resolve, decode, type_key
            types = [
                t
                for t in [*vars(_events).values(), _requests.RequestTimedOut]
                if isinstance(t, type) and issubclass(t, BaseModel) and t.__module__.startswith("temporal_workflows")
            ]
            assert len(types) > 10 and all(_resolve(type_key(t)) is t for t in types)
            started = {"superstep": 2, "executor_ids": ["a"]}
            ev = decode(Envelope("temporal_workflows._events:SuperStepStartedEvent", started))
            expired = {"request_id": "r", "timeout": 1.5, "deadline": "2025-01-01T00:00:00Z"}
            timed_out = decode(Envelope("temporal_workflows._requests:RequestTimedOut", expired))
            print(type(ev).__name__, ev.superstep, type(timed_out).__name__, timed_out.timeout)
            """
        )
    )
    assert out.split() == ["SuperStepStartedEvent", "2", "RequestTimedOut", "1.5"]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]


class Owner(BaseModel):
    name: str
    age: int
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    scores: dict[str, int] = {}


def test_validation_messages_name_the_field_and_the_error_but_never_the_value() -> None:
    bad = {"name": 1, "age": VALUE_SECRET, "pet": {"kind": VALUE_SECRET}}
    messages = []
    for strict in (False, True):
        with pytest.raises(ValueError) as info:
            validate_as(Owner, bad, strict=strict)
        messages.append(str(info.value))
    with pytest.raises(ValueError) as info:
        validate_as(Owner, {"name": "n", "age": 1, "pet": {"kind": "cat", "lives": VALUE_SECRET}}, strict=True)
    messages.append(str(info.value))
    with pytest.raises(ValueError) as info:
        validate_as(int, VALUE_SECRET)
    messages.append(str(info.value))
    register_type(Owner)
    with pytest.raises(NotSerializableError) as decoding:
        decode(Envelope(type_key(Owner), bad))  # e.g. a message from a client, or a checkpoint of an older model
    messages.append(str(decoding.value))
    with pytest.raises(NotSerializableError) as encoding:
        encode({(VALUE_SECRET,): 1}, what="state key 'k'")
    messages.append(str(encoding.value))
    for message in messages:
        assert VALUE_SECRET not in message and "input_value" not in message, message
    lax, strict_message, nested, plain, decoded, key = messages
    assert lax.startswith("3 validation errors for Owner: ") and "\n" not in lax
    assert "age: Input should be a valid integer" in lax and "[type=int_parsing]" in lax
    assert "pet: Input tag found using 'kind' does not match any of the expected tags: 'cat', 'dog'" in lax
    assert "name: Input should be a valid string" in strict_message
    assert "pet.cat.lives: Input should be a valid integer" in nested
    assert plain.startswith("1 validation error for int: Input should be a valid integer")
    assert decoded.startswith(f"cannot decode a value of type {type_key(Owner)!r}: 3 validation errors for Owner")
    assert "state key 'k'" in key and "non-string key (a tuple)" in key


def test_a_model_holding_a_value_of_another_type_warns_without_quoting_it() -> None:
    item = Item.model_construct(name="n", n=VALUE_SECRET)  # type: ignore[arg-type]  # n: int, never validated
    with pytest.warns(UserWarning) as record:
        env = encode(item, what="state key 'k'")
    assert env.data["n"] == VALUE_SECRET  # serialized as it is, as pydantic does
    texts = [str(w.message) for w in record]
    assert all(VALUE_SECRET not in t for t in texts)
    assert any("state key 'k'" in t and "Item" in t for t in texts)


class Approval(BaseModel):
    approved: bool
    note: str


class Approver(Executor):
    @handler
    async def ask(self, msg: str, ctx: WorkflowContext[Any, str]) -> None:
        await ctx.request_info(msg, Approval)

    @response_handler
    async def answered(self, request: str, response: Approval, ctx: WorkflowContext[Any, str]) -> None:
        await ctx.yield_output(f"{request}: {response.note}")


async def test_a_rejected_response_is_named_without_its_value_in_errors_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    wf = WorkflowBuilder(start_executor=Approver("approver")).build()
    (req,) = (await wf.run("deploy")).get_request_info_events()
    with pytest.raises(InvalidResponseError) as info:
        await wf.run(responses={req.request_id: {"approved": VALUE_SECRET, "note": [VALUE_SECRET]}})
    message = str(info.value)
    assert VALUE_SECRET not in message and VALUE_SECRET not in caplog.text
    assert "approved: Input should be a valid boolean" in message and "note: Input should be a valid string" in message
    result = await wf.run(responses={req.request_id: {"approved": True, "note": "ok"}})
    assert result.get_outputs() == ["deploy: ok"]
