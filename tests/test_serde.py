"""Serialization: what may cross a superstep boundary, and that it comes back with its type.

Messages, state values, requests and outputs are pydantic models, dataclasses or
JSON values (or lists/dicts of one model type); anything else is refused where
user code hands it over, naming what it was.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from temporal_workflows import (
    Executor,
    FileCheckpointStorage,
    NotSerializableError,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    register_type,
    response_handler,
)
from temporal_workflows._serde import Envelope, decode, encode, type_key, validate_as


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
