"""Routing looks handlers up per message type (``AcceptsTable``): it must route exactly as ``accepts`` does.

The table remembers an answer only where the value's type alone decides it;
these tests ask it about many annotations and values, in orders that would
expose a remembered answer given to a value it does not fit (a ``Literal``,
a list's items, a subclass), and compare every answer with the uncached check.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Protocol, TypeVar, Union, runtime_checkable

import pytest
from pydantic import BaseModel

from temporal_workflows import Executor, WorkflowBuilder, WorkflowContext, handler
from temporal_workflows._graph.typecheck import TABLE_TYPES, AcceptsTable, accepts, decided_by_type


class Animal(BaseModel):
    name: str


class Dog(Animal):
    pass


@dataclass
class Point:
    x: int


@runtime_checkable
class Named(Protocol):
    name: str


class HasName:
    def __init__(self, named: bool) -> None:
        if named:
            self.name = "n"


class Flags(tuple[int, int]):
    pass


T = TypeVar("T")

ANNOTATIONS: list[Any] = [
    int,
    float,
    bool,
    str,
    Any,
    object,
    None,
    type(None),
    int | str,
    Optional[Animal],  # noqa: UP045
    Union[Dog, Point],  # noqa: UP007
    Animal,
    Dog,
    Point,
    Literal["a", 1],
    int | Literal["x"],
    list[int],
    list[Literal["a"]],
    list[Animal],
    list[Any],
    list,
    Sequence[int],
    dict[str, int],
    tuple[int, int],
    Annotated[int, "meta"],
    Annotated[Literal["a"], "meta"],
    Named,
    T,
]

VALUES: list[Any] = [
    1,
    0,
    True,
    1.5,
    "a",
    "b",
    "x",
    None,
    Animal(name="a"),
    Dog(name="d"),
    Point(1),
    HasName(True),
    HasName(False),
    [1],
    ["a"],
    [Animal(name="a")],
    [],
    {"a": 1},
    {"a": "b"},
    (1, 2),
    Flags((1, 2)),
]


def uncached(types: Sequence[Any], value: Any, *, item: bool = False) -> int | None:
    probe = [value] if item else value
    return next((i for i, t in enumerate(types) if accepts(t, probe)), None)


@pytest.mark.parametrize("item", [False, True], ids=["value", "fan_in_item"])
def test_every_annotation_alone_routes_as_accepts_in_any_value_order(item: bool) -> None:
    for tp in ANNOTATIONS:
        for order in (VALUES, list(reversed(VALUES))):
            table = AcceptsTable([tp], item=item)
            for _ in range(2):  # the second pass reads what the first remembered
                for v in order:
                    assert table.first(v) == uncached([tp], v, item=item), (tp, v)


@pytest.mark.parametrize("item", [False, True], ids=["value", "fan_in_item"])
def test_handler_lists_route_to_the_first_that_accepts_as_accepts_does(item: bool) -> None:
    for types in itertools.permutations([int | str, Literal["a"], Animal, Any, list[int], Named], 3):
        table = AcceptsTable(types, item=item)
        for _ in range(2):
            for v in VALUES:
                assert table.first(v) == uncached(types, v, item=item), (types, v)


def test_what_the_type_alone_does_not_decide_is_never_remembered() -> None:
    assert not decided_by_type(Literal["a"])
    assert not decided_by_type(int | Literal["a"])
    assert not decided_by_type(list[Literal["a"]])
    assert not decided_by_type(Named)  # a runtime-checkable Protocol looks at the instance
    assert all(decided_by_type(t) for t in (int, Any, object, None, Animal, int | str, list[int], dict[str, int], T))
    literal = AcceptsTable([Literal["a"]])
    assert (literal.first("a"), literal.first("b"), literal.first("a")) == (0, None, 0)
    named = AcceptsTable([Named])
    assert (named.first(HasName(True)), named.first(HasName(False))) == (0, None)
    items = AcceptsTable([list[int]])
    assert (items.first([1]), items.first(["a"]), items.first([1])) == (0, None, 0)


def test_a_subclass_is_looked_up_as_itself_not_as_its_base() -> None:
    table = AcceptsTable([Dog, Animal])
    assert table.first(Animal(name="a")) == 1
    assert table.first(Dog(name="d")) == 0
    assert table.first(Animal(name="b")) == 1
    assert AcceptsTable([float]).first(True) is None  # bool is no float, as accepts says
    assert AcceptsTable([int]).first(True) == 0


def test_the_table_stays_bounded_when_classes_are_made_on_the_fly() -> None:
    table = AcceptsTable([Any])
    for i in range(TABLE_TYPES + 50):
        assert table.first(type(f"C{i}", (), {})()) == 0
    assert len(table._by_type) == TABLE_TYPES


class Multi(Executor):
    """Handlers tried in order: a literal command, then any text, then an animal, then numbers."""

    @handler
    async def command(self, msg: Literal["stop"], ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"command {msg}")

    @handler
    async def text(self, msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"text {msg}")

    @handler
    async def animal(self, msg: Animal, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"{type(msg).__name__} {msg.name}")

    @handler
    async def number(self, msg: int | float, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"number {msg}")


class Collect(Executor):
    @handler
    async def collect(self, msg: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(msg)


def test_executor_find_handler_matches_the_uncached_choice_and_follows_new_handlers() -> None:
    ex = Multi("m")
    for _ in range(2):
        for v in [*VALUES, "stop", "go", "stop"]:
            expected = next((h for h in ex.handlers if accepts(h.input_type, v)), None)
            assert ex.find_handler(v) is expected, v
    ex._handler_specs = (Multi._handler_specs[1],)  # an instance given other handlers (as FunctionExecutor does)
    assert ex.find_handler("stop") is Multi._handler_specs[1]
    assert ex.find_handler(1) is None


async def test_a_run_routes_each_message_by_its_own_value() -> None:
    class Feed(Executor):
        @handler
        async def feed(self, msg: list[Any], ctx: WorkflowContext[Any]) -> None:
            for item in msg:
                await ctx.send_message(item)

    feed, multi, out = Feed("feed"), Multi("multi"), Collect("out")
    wf = WorkflowBuilder(start_executor=feed).add_edge(feed, multi).add_edge(multi, out).build()
    result = await wf.run(["stop", "go", Dog(name="rex"), Animal(name="cat"), 2, 2.5, "stop"])
    assert sorted(result.get_outputs()) == sorted(
        ["command stop", "text go", "Dog rex", "Animal cat", "number 2", "number 2.5", "command stop"]
    )
