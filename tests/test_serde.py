"""Serialization: what may cross a superstep boundary, and that it comes back with its type.

Messages, state values, requests and outputs are plain JSON, pydantic models,
dataclasses, enums, named tuples, tuples, sets, dicts with any hashable keys,
the standard types JSON has no form for (datetime, UUID, Decimal, bytes, ...)
and plain classes whose ``__init__`` takes their attributes, nested in any way;
each comes back as the same type. What cannot round-trip (open files, locks,
functions, a class whose constructor does not match its attributes) is refused
where user code hands it over, naming its type, where it sits and the executor.
The encoding is specified in docs/values.md; the tests of its exact form are
below.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import logging
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel, ConfigDict, Field

from temporal_workflows import (
    Executor,
    FileCheckpointStorage,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    register_checkpoint_type,
    register_type,
    response_handler,
)
from temporal_workflows._engine.serde import Envelope, decode, encode, type_key, validate_as
from temporal_workflows.errors import InvalidResponseError, NotSerializableError
from temporal_workflows.events import WorkflowOutputEvent


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


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


class Planet(enum.Enum):
    """Members whose values are tuples (JSON would make them lists)."""

    EARTH = (5.97e24, 6.37e6)


class Pair(NamedTuple):
    left: int
    right: Color


class Money:
    """A plain class: its constructor takes exactly the attributes it keeps."""

    def __init__(self, amount: Decimal, currency: str = "EUR") -> None:
        self.amount = amount
        self.currency = currency

    def __eq__(self, other: object) -> bool:
        return type(other) is Money and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]


@dataclasses.dataclass
class Ledger:
    """A dataclass holding what plain JSON loses: int-keyed dicts of enums, tuples, sets, a plain class."""

    by_id: dict[int, Color]
    moves: list[tuple[str, int]]
    seen: frozenset[Level]
    total: Money
    extra: Any = None


class Report(BaseModel):
    """A model whose declared fields pydantic restores itself, and ``Any`` fields that need tags."""

    levels: set[Level]
    by_color: dict[Color, list[tuple[int, int]]]
    when: datetime
    anything: Any = None
    either: int | str | tuple[int, ...] = 0


class Measure(BaseModel):
    """pydantic leaves NaN in a float field as a float, which JSON writers turn into null."""

    value: float
    limit: float | None = None


@dataclasses.dataclass
class Reading:
    value: float


WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
SHAPE = Shape("triangle", [Point(0, 0), Point(1, 0), Point(0.5, 1)], WHEN)
ITEMS = [Item(name="a", n=1, when=WHEN, tags={"x", "y"}), Item(name="b", n=2)]
LEDGER = Ledger({1: Color.RED, 2: Color.BLUE}, [("in", 5), ("out", 2)], frozenset({Level.LOW}), Money(Decimal("3.50")))
REPORT = Report(
    levels={Level.HIGH},
    by_color={Color.BLUE: [(1, 2)]},
    when=WHEN,
    anything=(Color.RED, {1: {"a", "b"}}, Money(Decimal(1)), [ITEMS[1]]),
    either=(1, 2),
)
PARIS = datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Paris"))  # the second 02:30 that night

ALWAYS_CARRIED: list[Any] = [
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
]
"""What the engine always carried (compared with ``==``: pydantic makes ``Point(0, 0)``'s ints floats, as declared)."""

ORDINARY: list[Any] = [
    Color.RED,
    Level.HIGH,
    Mode.FAST,
    Perm.READ | Perm.WRITE,
    Planet.EARTH,
    (1, "a", None),
    ((1, 2), [3, (4,)]),
    (),
    {1, 2, 3},
    frozenset({"x", (1, 2)}),
    {1: "one", 2: "two"},
    {Color.RED: 1, Color.BLUE: 2},
    {(1, 2): "pair", None: "none", 1.5: "float", True: "bool"},
    {"one": Color.RED, "two": Color.BLUE},
    [(1, 2), (3, 4)],
    [Color.RED, 1, "x", (2,), ITEMS[0]],
    WHEN,
    datetime(2024, 1, 2, 3, 4, 5),
    PARIS,
    date(2024, 2, 29),
    time(23, 59, 59, 999999),
    timedelta(days=-3, seconds=5, microseconds=7),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    Decimal("1.10"),
    Decimal("-0E+3"),
    b"\x00\xff binary",
    bytearray(b"mutable"),
    Path("/srv/data/file.txt"),
    complex(1.5, -2),
    math.inf,
    -math.inf,
    Pair(1, Color.BLUE),
    [Pair(1, Color.RED), Pair(2, Color.BLUE)],
    Money(Decimal("9.99"), "USD"),
    LEDGER,
    REPORT,
    Measure(value=math.nan, limit=-math.inf),
    Measure(value=1.5),
    Reading(math.inf),
    {"$ref": "#/definitions/x"},  # plain JSON that looks like a tag stays plain at the top
    [{"$ref": "x"}, (1,)],  # ... and is escaped inside a tagged value
    {"a": {"$not-a-tag": [1, (2,)]}},
]


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down (``1 == 1.0 == True`` and ``(1,) != [1]`` matter here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return (
            len(a) == len(b)
            and all(k in b and same(v, b[k]) for k, v in a.items())
            and [type(k) for k in a] == [type(k) for k in b]
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (set, frozenset)):
        return a == b and sorted(map(repr, a)) == sorted(map(repr, b))
    if isinstance(a, BaseModel):
        return all(same(getattr(a, f), getattr(b, f)) for f in type(a).model_fields)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, datetime):  # pydantic gives a declared field a TzInfo(0), not timezone.utc: same offset
        return a == b and a.utcoffset() == b.utcoffset() and a.fold == b.fold and a.isoformat() == b.isoformat()
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if type(a) is Money:
        return same(vars(a), vars(b))
    return bool(a == b)


def through_json(value: Any) -> Any:
    env = encode(value)
    wire = json.loads(json.dumps({"type": env.type, "data": env.data}, allow_nan=False))  # a checkpoint file
    return decode(Envelope(wire["type"], wire["data"]))


@pytest.mark.parametrize("value", ALWAYS_CARRIED, ids=lambda v: type(v).__name__)
def test_values_round_trip_through_json_with_their_type(value: Any) -> None:
    back = through_json(value)
    assert back == value and type(back) is type(value)
    if isinstance(value, list) and value:
        assert [type(v) for v in back] == [type(v) for v in value]
    if isinstance(value, dict) and value:
        assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in value.items()}


@pytest.mark.parametrize("value", ORDINARY, ids=lambda v: type(v).__name__)
def test_ordinary_python_values_round_trip_with_every_type_restored(value: Any) -> None:
    """Issue #16 item 3: what Agent Framework passes in process comes back as it was, nested types too."""
    assert same(through_json(value), value)


def test_a_datetime_keeps_its_time_zone_and_fold() -> None:
    back = through_json([PARIS, WHEN])
    assert (
        back[0].tzinfo is ZoneInfo("Europe/Paris") and back[0].fold == 1 and back[0].utcoffset() == timedelta(hours=1)
    )
    assert back[1].tzinfo is UTC


def test_nan_round_trips_too() -> None:
    back = through_json([math.nan, (math.nan,)])
    assert math.isnan(back[0]) and type(back[1]) is tuple and math.isnan(back[1][0])


def test_ordinary_json_stays_plain_and_only_what_json_would_lose_is_tagged() -> None:
    """The wire forms of docs/values.md, which the temporal CLI and any JSON reader see."""
    key = type_key(Color)
    assert encode({"a": [1, {"b": None}], "c": 1.5}) == Envelope(None, {"a": [1, {"b": None}], "c": 1.5})
    assert encode({"$ref": "x"}) == Envelope(None, {"$ref": "x"})
    assert encode((1, "a")) == Envelope("tuple", [1, "a"])
    assert encode(Color.RED) == Envelope(key, "red")
    assert encode([Color.RED, Color.BLUE]) == Envelope(f"list[{key}]", ["red", "blue"])
    assert encode({"x": (1, 2)}) == Envelope("dict[tuple]", {"x": [1, 2]})
    assert encode([1, (2, 3)]) == Envelope("list[*]", [1, {"$tuple": [2, 3]}])
    assert encode({1: "a", Color.RED: "b"}) == Envelope("dict", [[1, "a"], [{f"${key}": "red"}, "b"]])
    assert encode({"when": WHEN}) == Envelope("dict[datetime]", {"when": "2024-05-06T07:08:09.123456+00:00"})
    assert encode(PARIS) == Envelope("datetime", "2024-10-27T02:30:00+01:00[Europe/Paris]")
    assert encode({3, 1, 2}) == Envelope("set", [1, 2, 3])  # sorted: the same bytes in every process
    assert encode(b"\x00\xff") == Envelope("bytes", "AP8=")
    assert encode(timedelta(minutes=90)) == Envelope("timedelta", "PT1H30M")
    assert encode([{"$ref": "x"}, (1,)]) == Envelope("list[*]", [{"$dict": [["$ref", "x"]]}, {"$tuple": [1]}])
    assert encode(Money(Decimal("2"))) == Envelope(type_key(Money), {"amount": {"$decimal": "2"}, "currency": "EUR"})
    assert encode(Pair(1, Color.RED)) == Envelope(type_key(Pair), [1, {f"${key}": "red"}])
    # A model keeps pydantic's JSON for what it declares; only fields that cannot restore the value are tagged.
    data = encode(REPORT).data
    assert (
        data["levels"] == [2]
        and data["by_color"] == {"blue": [[1, 2]]}
        and data["when"] == "2024-05-06T07:08:09.123456Z"
    )
    assert data["either"] == {"$tuple": [1, 2]} and data["anything"]["$tuple"][0] == {f"${key}": "red"}
    assert encode(ITEMS[0]).data == ITEMS[0].model_dump(mode="json")  # nothing to tag: exactly as before


def test_decoded_values_are_fresh_copies() -> None:
    env = encode({"list": [1, 2]})
    first = decode(env)
    first["list"].append(3)
    assert decode(env) == {"list": [1, 2]}
    model_env = encode(ITEMS[0])
    decode(model_env).tags.add("mutated")
    assert decode(model_env).tags == {"x", "y"}
    tagged = encode({"a": [(1,), [2]]})
    decode(tagged)["a"][1].append(3)
    assert decode(tagged) == {"a": [(1,), [2]]}


def test_set_order_is_the_same_in_every_process() -> None:
    """Sets have no order and str hashes differ per process; stored data (and history) must not."""
    code = (
        "from temporal_workflows._engine.serde import encode; "
        "print(encode({'pear', 'apple', 'fig', ('x', 1), 3}).data, encode(frozenset('abcdefgh')).data, "
        "encode({frozenset({'a'}), frozenset({'b'}), frozenset({'c', 'd'})}).data)"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=Path(__file__).parents[1],
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1, outputs


class Mismatch:
    """Keeps an attribute its constructor does not take: rebuilding it from its attributes would fail."""

    def __init__(self, items: list[int]) -> None:
        self.items = items
        self.count = len(items)


class Variadic:
    def __init__(self, *parts: str) -> None:
        self.parts = parts


class Slotted:
    __slots__ = ("x",)

    def __init__(self, x: int) -> None:
        self.x = x


def _generator() -> Any:
    yield 1


@pytest.mark.parametrize(
    ("value", "named", "reason"),
    [
        (object(), "is a builtins.object", "not an ordinary Python class"),
        (threading.Lock(), "is a _thread.lock", "belongs to this process"),
        (lambda: 0, "is a builtins.function", "functions are code"),
        (_generator(), "is a builtins.generator", "generator"),
        (Slotted(1), "is a tests.test_serde.Slotted", "no attributes in a __dict__"),
        ({"ok": [1, {"deep": threading.Lock()}]}, "holds a _thread.lock at builtins.dict['ok'][1]['deep']", "process"),
        (Opaque(thing=object()), "holds a builtins.object at tests.test_serde.Opaque.thing", "ordinary"),
        (
            dataclasses.replace(LEDGER, extra=[_generator]),
            "holds a builtins.function at tests.test_serde.Ledger.extra[0]",
            "functions",
        ),
        (
            {(1, Slotted(1)): 1},
            "holds a tests.test_serde.Slotted at builtins.dict[<key <builtins.tuple>>][1]",
            "__dict__",
        ),
        (Money(threading.Lock()), "holds a _thread.lock at tests.test_serde.Money.amount", "process"),  # type: ignore[arg-type]
    ],
    ids=lambda v: repr(v)[:24],
)
def test_encode_refuses_what_cannot_round_trip_and_says_what_and_where(value: Any, named: str, reason: str) -> None:
    with pytest.raises(NotSerializableError) as info:
        encode(value, what="state key 'k' written by executor 'a'")
    message = str(info.value)
    assert message.startswith(f"state key 'k' written by executor 'a' {named}, which cannot round-trip"), message
    assert reason in message
    assert isinstance(info.value, TypeError)  # also a TypeError, as json.dumps would raise


def test_open_files_and_sockets_are_refused() -> None:
    with open(__file__) as f, socket.socket() as s:
        for value in (f, s, [1, f]):
            with pytest.raises(NotSerializableError, match="belongs to this process"):
                encode(value, what="output")


def test_a_value_that_contains_itself_is_refused_not_a_crash() -> None:
    loop: list[Any] = [(1,)]
    loop.append(loop)
    with pytest.raises(NotSerializableError, match="message contains itself"):
        encode(loop, what="message")


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
    for env in (
        Envelope("tw_payload_module:Evil", {}),
        Envelope("list[*]", [1, {"$tw_payload_module:Evil": {}}]),
        Envelope("tuple", [{"$dict": [[{"$tw_payload_module:Evil": {}}, 1]]}]),
        Envelope("dict[tw_payload_module:Evil]", {"a": {}}),
    ):
        with pytest.raises(NotSerializableError, match="not registered"):
            decode(env)
    assert "tw_payload_module" not in sys.modules and not marker.exists()
    for key in ("json:JSONDecoder", "subprocess:Popen", "os:system", "builtins:eval", "threading:Thread"):
        with pytest.raises(NotSerializableError):
            decode(Envelope(key, {}))  # imported, but never registered
        with pytest.raises(NotSerializableError):
            decode(Envelope("list[*]", [{f"${key}": {"args": ["true"]}}]))
    with pytest.raises(NotSerializableError):
        decode(Envelope("list[os:system]", [{}]))


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (Envelope("datetime", "tw-secret"), "not an ISO 8601 datetime"),
        (Envelope("datetime", "2024-01-01T00:00:00+00:00[Not/AZone]"), "unknown time zone name"),
        (Envelope("tuple", "tw-secret"), "a tuple is stored as a JSON array"),
        (Envelope("bytes", "tw-secret!"), "not base64"),
        (Envelope("decimal", "tw-secret"), "not a decimal number"),
        (Envelope("uuid", "tw-secret"), "ValueError"),
        (Envelope("float", "tw-secret"), "'nan', 'inf' or '-inf'"),
        (Envelope("dict", [["tw-secret"]]), "[key, value] pairs"),
        (Envelope("set", [[1, "tw-secret"]]), "TypeError"),  # a list is not hashable
        (Envelope(type_key(Color), "tw-secret"), "no member of Color has this value"),
        (Envelope(type_key(Item), {"name": "tw-secret", "n": "tw-secret"}), "n: Input should be a valid integer"),
        (Envelope("list[*]", "tw-secret"), "stored as a JSON array"),
    ],
    ids=lambda v: v.type if isinstance(v, Envelope) else None,
)
def test_decode_refuses_data_that_does_not_fit_without_quoting_it(env: Envelope, says: str) -> None:
    for t in (Color, Money, Item):
        register_type(t)
    with pytest.raises(NotSerializableError) as info:
        decode(env)
    assert says in str(info.value) and "tw-secret" not in str(info.value.args), str(info.value)


class Loud:
    def __init__(self, secret: str) -> None:
        if secret.startswith("tw-secret"):
            raise ValueError(f"refusing {secret!r}")
        self.secret = secret


def test_a_constructor_that_raises_while_decoding_is_named_without_its_message() -> None:
    register_type(Loud)
    with pytest.raises(NotSerializableError) as info:
        decode(Envelope(type_key(Loud), {"secret": "tw-secret-1"}))
    assert str(info.value) == f"cannot decode a value of type {type_key(Loud)!r}: ValueError"


def test_deeply_nested_data_is_refused_not_a_crash() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = {"$tuple": [deep]}
    with pytest.raises(NotSerializableError, match="nested too deeply"):
        decode(Envelope("list[*]", [deep]))


class SplitCompleted:
    """A marker class (Agent Framework samples send these): no fields, no ``__init__`` of its own."""


class Watched:
    """Its ``__init__`` has a side effect a rebuild must not repeat."""

    built = 0

    def __init__(self, items: list[int]) -> None:
        Watched.built += 1
        self.items = items
        self.count = len(items)


def test_plain_classes_whose_init_does_not_take_their_attributes_are_rebuilt_without_it_as_copy_does() -> None:
    for tp in (SplitCompleted, Mismatch, Variadic, Watched):
        register_type(tp)
    marker = decode(through_envelope(SplitCompleted()))
    assert type(marker) is SplitCompleted and vars(marker) == {}
    mismatch = decode(through_envelope(Mismatch([1, 2])))
    assert type(mismatch) is Mismatch and vars(mismatch) == {"items": [1, 2], "count": 2}
    variadic = decode(through_envelope(Variadic("a", "b")))
    assert type(variadic) is Variadic and variadic.parts == ("a", "b")
    watched = Watched([3])
    before = Watched.built
    copied = decode(through_envelope(watched))
    assert Watched.built == before  # __init__ not run again
    assert vars(copied) == vars(copy.copy(watched)) == {"items": [3], "count": 1}
    money = decode(through_envelope(Money(Decimal("2"))))
    assert money == Money(Decimal("2"))  # an __init__ that takes exactly the attributes still builds it
    assert encode(SplitCompleted()) == Envelope(type_key(SplitCompleted), {})
    with pytest.raises(NotSerializableError, match="dunder"):
        decode(Envelope(type_key(SplitCompleted), {"__class__": "x"}))


def test_a_plain_class_is_rebuilt_without_init_only_if_declared_or_registered() -> None:
    class Unregistered:
        pass

    with pytest.raises(NotSerializableError, match="not registered"):
        decode(Envelope("tests.test_serde:NeverSeen", {}))
    env = encode(Unregistered())  # encoding in this process registers it, as for every kind
    assert type(decode(env)) is Unregistered


def through_envelope(value: Any) -> Envelope:
    env = encode(value)
    return Envelope(env.type, json.loads(json.dumps(env.data)))


def test_register_type_takes_every_storable_kind_and_says_why_not_otherwise() -> None:
    for tp in (Item, Point, Color, Perm, Pair, Money, Ledger):
        register_type(tp)
    assert register_checkpoint_type is register_type  # Agent Framework's name for it
    for tp, why in (
        (dict, "standard types"),
        (datetime, "standard types"),
        (uuid.UUID, "standard types"),
        (Mismatch, None),  # its constructor looks fine: only instances can show they do not match
        (Variadic, None),
        (Slotted, None),
        (threading.Thread, "standard library"),
    ):
        if why is None:
            register_type(tp)
            continue
        with pytest.raises(TypeError, match=why.replace("*", r"\*")):
            register_type(tp)


def test_strict_json_validation_coerces_objects_into_models_but_never_changes_json_types() -> None:
    item = validate_as(Item, {"name": "a", "n": 1, "when": WHEN.isoformat(), "tags": ["x"]}, strict=True)
    assert item == Item(name="a", n=1, when=WHEN, tags={"x"})
    assert validate_as(Shape, encode(SHAPE).data, strict=True) == SHAPE
    for tp, value in ((int, "5"), (bool, 1), (str, 5), (Item, {"name": "a", "n": "1"})):
        with pytest.raises(ValueError):
            validate_as(tp, value, strict=True)
    assert validate_as(int, "5") == 5  # responses from people keep pydantic's lax mode


class Aliased(BaseModel):
    model_config = ConfigDict(strict=True)

    user_name: str = Field(alias="userName")
    at: datetime
    extra: Any = None


def test_models_with_aliases_and_strict_config_round_trip() -> None:
    value = Aliased(userName="u", at=WHEN, extra=(1,))
    assert same(through_json(value), value)


def test_the_librarys_events_keep_the_json_they_carry_untouched() -> None:
    """An output event's ``data`` is already stored JSON (tags and all), read with its ``data_type``."""
    inner = encode([1, (2,)])
    event = WorkflowOutputEvent(executor_id="x", data=inner.data, data_type=inner.type)
    env = encode(event)
    assert env.data["data"] == [1, {"$tuple": [2]}]
    back = decode(env)
    assert decode(Envelope(back.data_type, back.data)) == [1, (2,)]


# -- at the call site ---------------------------------------------------------------------------


BAD_VALUES = {"object": object(), "lock": threading.Lock(), "function": len, "slotted": Slotted(1)}


class Careless(Executor):
    """Tries every way of handing over each bad value; records each refusal and carries on."""

    @handler
    async def run(self, msg: str, ctx: WorkflowContext[Any, Any]) -> None:
        errors: dict[str, str] = {}
        for name, bad in BAD_VALUES.items():
            for how, hand_over in {
                "send_message": lambda v: ctx.send_message(v),
                "yield_output": lambda v: ctx.yield_output(v),
                "request_info": lambda v: ctx.request_info([v], str),
            }.items():
                try:
                    await hand_over(bad)
                except NotSerializableError as e:
                    errors[f"{how}/{name}"] = str(e)
            try:
                ctx.set_state(name, {"nested": bad})
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
    assert errors["send_message/lock"].startswith("message sent by executor 'careless' is a _thread.lock")
    assert errors["set_state/slotted"].startswith(
        "state key 'slotted' written by executor 'careless' holds a tests.test_serde.Slotted at builtins.dict['nested']"
    )
    assert errors["yield_output/object"].startswith("output yielded by executor 'careless' is a builtins.object")
    assert errors["request_info/function"].startswith(
        "request from executor 'careless' holds a builtins.builtin_function_or_method at builtins.list[0]"
    )
    assert set(result.state) == {"errors"}  # nothing bad was written
    assert result.get_outputs() == [] and result.get_request_info_events() == []


# -- routing by the restored type -------------------------------------------------------------------------


@executor(id="typed_start")
async def typed_start(pair: tuple[int, Color], ctx: WorkflowContext[dict[int, Color] | Level]) -> None:
    await ctx.send_message({pair[0]: pair[1]})
    await ctx.send_message(Level.HIGH)


class TypedSink(Executor):
    """Handlers chosen by the exact type a message arrives as."""

    @handler
    async def by_id(self, m: dict[int, Color], ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"dict {m}")

    @handler
    async def level(self, m: Level, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"level {m!r}")

    @handler
    async def when(self, m: datetime, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"when {m.isoformat()}")


async def test_messages_are_routed_by_their_restored_types_and_plain_json_is_coerced() -> None:
    wf = WorkflowBuilder(start_executor=typed_start).add_edge(typed_start, TypedSink("sink")).build()
    result = await wf.run((7, Color.BLUE))
    assert sorted(result.get_outputs()) == ["dict {7: <Color.BLUE: 'blue'>}", "level <Level.HIGH: 2>"]
    # What a CLI sends: plain JSON, validated into the start executor's declared type.
    again = await wf.run([7, "red"])
    assert "dict {7: <Color.RED: 'red'>}" in again.get_outputs()
    sink = WorkflowBuilder(start_executor=TypedSink("sink")).build()
    assert (await sink.run(WHEN.isoformat())).get_outputs() == [f"when {WHEN.isoformat()}"]
    assert (await sink.run(2)).get_outputs() == ["level <Level.HIGH: 2>"]


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


@executor(id="lap")
async def lap(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.set_state("log", [(n, Color.RED)])  # "append": tagged items of one kind append like plain ones
    ctx.set_state("seen", {f"lap{n}": frozenset({n})})  # "merge"
    if n < 3:
        await ctx.send_message(n + 1)


async def test_built_in_reducers_keep_the_types_of_what_they_combine() -> None:
    wf = (
        WorkflowBuilder(start_executor=lap)
        .add_edge(lap, lap)
        .add_state_reducer("log", "append")
        .add_state_reducer("seen", "merge")
        .build()
    )
    state = (await wf.run(1)).state
    assert same(state["log"], [(1, Color.RED), (2, Color.RED), (3, Color.RED)])
    assert same(state["seen"], {"lap1": frozenset({1}), "lap2": frozenset({2}), "lap3": frozenset({3})})


# -- ordinary values through messages, state, requests, outputs and a checkpoint file ------------------


@dataclasses.dataclass
class Order:
    number: int
    lines: list[tuple[str, int]]
    status: Color
    by_id: dict[int, Level]
    placed: datetime
    total: Money


ORDER = Order(7, [("tea", 2), ("cake", 1)], Color.BLUE, {1: Level.LOW, 2: Level.HIGH}, PARIS, Money(Decimal("12.40")))


@executor(id="take")
async def take(
    order: Order, ctx: WorkflowContext[tuple[Order, frozenset[Level]], dict[int, list[tuple[str, int]]]]
) -> None:
    ctx.set_state("ids", {order.number: order.status})
    ctx.set_state("money", order.total)
    ctx.set_state("history", [(order.placed, Perm.READ | Perm.WRITE)])
    ctx.set_state("misc", {"uuid": uuid.UUID(int=7), "raw": b"\x00", "when": date(2024, 1, 1), "left": {1.5, 2}})
    await ctx.send_message((order, frozenset({Level.LOW})))
    await ctx.yield_output({order.number: order.lines})


class Confirm(Executor):
    @handler
    async def check(self, msg: tuple[Order, frozenset[Level]], ctx: WorkflowContext[None, Any]) -> None:
        await ctx.request_info((msg[0].number, msg[1]), Color)

    @response_handler
    async def confirmed(
        self, request: tuple[int, frozenset[Level]], answer: Color, ctx: WorkflowContext[None, Any]
    ) -> None:
        seen = [ctx.get_state(k) for k in ("ids", "money", "history", "misc")]
        await ctx.yield_output(("confirmed", request, answer, *seen))


def order_graph(storage: FileCheckpointStorage | None = None) -> Workflow:
    return (
        WorkflowBuilder(start_executor=take, name="orders", checkpoint_storage=storage)
        .add_edge(take, Confirm("confirm"))
        .build()
    )


async def test_ordinary_values_survive_a_checkpoint_file_and_a_fresh_workflow(tmp_path: Path) -> None:
    storage = FileCheckpointStorage(tmp_path)
    first = await order_graph(storage).run(ORDER)
    assert same(first.get_outputs(), [{7: [("tea", 2), ("cake", 1)]}])
    (req,) = first.get_request_info_events()
    assert same(req.data, (7, frozenset({Level.LOW})))
    (cp,) = [c for c in await storage.list_checkpoints(workflow_name="orders") if c.superstep == 1]
    raw = json.loads((tmp_path / f"{cp.checkpoint_id}.json").read_text())
    assert raw["state"]["ids"] == {"type": "dict", "data": [[7, {f"${type_key(Color)}": "blue"}]]}
    assert raw["messages"][0]["messages"][0]["type"] == "tuple"

    fresh = order_graph()  # built again, sharing nothing with the first run
    resumed = await fresh.run(checkpoint_id=cp.checkpoint_id, checkpoint_storage=FileCheckpointStorage(tmp_path))
    assert resumed.get_outputs() == []
    (req,) = fresh.pending_requests
    final = await fresh.run(responses={req.request_id: "red"})  # a JSON answer, as from a CLI
    (out,) = final.get_outputs()
    expected = (
        "confirmed",
        (7, frozenset({Level.LOW})),
        Color.RED,
        {7: Color.BLUE},
        Money(Decimal("12.40")),
        [(PARIS, Perm.READ | Perm.WRITE)],
        {"uuid": uuid.UUID(int=7), "raw": b"\x00", "when": date(2024, 1, 1), "left": {1.5, 2}},
    )
    assert same(out, expected)
    assert out[5][0][0].tzinfo is ZoneInfo("Europe/Paris")
    assert same(fresh.state["ids"], {7: Color.BLUE})


def test_a_graph_declares_the_classes_its_handlers_name_and_their_fields(tmp_path: Path) -> None:
    """In a fresh process, building a graph is what lets its values decode: nothing was encoded there yet."""
    (tmp_path / "tw_declared_graph.py").write_text(
        textwrap.dedent(
            """
            import dataclasses, enum, typing
            from temporal_workflows import WorkflowBuilder, WorkflowContext, executor

            class Status(enum.Enum):
                OPEN = "open"

            class Money:
                def __init__(self, amount: int) -> None:
                    self.amount = amount

            class Span(typing.NamedTuple):
                start: int
                money: Money

            @dataclasses.dataclass
            class Order:
                status: Status
                spans: list[Span]

            class Undeclared:
                def __init__(self, x: int) -> None:
                    self.x = x

            @executor(id="take")
            async def take(order: Order, ctx: WorkflowContext[None, dict[str, Money]]) -> None:
                pass

            workflow = WorkflowBuilder(start_executor=take).build()
            """
        )
    )
    out = run_fresh(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(tmp_path)!r})
            from temporal_workflows.errors import NotSerializableError
            from temporal_workflows._engine.serde import Envelope, decode
            import tw_declared_graph as g
            money = {{"$tw_declared_graph:Money": {{"amount": 5}}}}
            order = decode(Envelope("tw_declared_graph:Order", {{  # as encoded (Money has no pydantic schema)
                "status": {{"$tw_declared_graph:Status": "open"}},
                "spans": [{{"$tw_declared_graph:Span": [1, money]}}],
            }}))
            print(type(order.status).__name__, type(order.spans[0]).__name__, order.spans[0].money.amount)
            print(decode(Envelope("tw_declared_graph:Money", {{"amount": 2}})).amount)
            try:
                decode(Envelope("tw_declared_graph:Undeclared", {{"x": 1}}))
            except NotSerializableError as e:
                print("refused", "not registered" in str(e))
            """
        )
    )
    assert out.split("\n")[:3] == ["Status Span 5", "2", "refused True"]


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
            import enum
            import pathlib
            import typing
            from pydantic import BaseModel

            class Registered(BaseModel):
                x: int = 0

            class Sibling(BaseModel):
                y: int = 0

            class Outer:
                @dataclasses.dataclass
                class Inner:
                    z: int = 0

            class Shade(enum.Enum):
                DARK = "dark"

            class Span(typing.NamedTuple):
                start: int
                end: int

            class Plain:
                def __init__(self, a):
                    pathlib.Path({str(marker)!r} + ".init").write_text("constructed")
                    self.a = a

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
    assert decode(Envelope(f"{name}:Shade", "dark")) is module.Shade.DARK  # enums and named tuples too
    assert decode(Envelope(f"{name}:Span", [1, 2])) == module.Span(1, 2)
    # A plain class runs its own __init__ when rebuilt: it must be declared or registered itself.
    with pytest.raises(NotSerializableError, match="not registered"):
        decode(Envelope(f"{name}:Plain", {"a": 1}))
    assert not Path(f"{marker}.init").exists()
    register_type(module.Plain)
    assert decode(Envelope(f"{name}:Plain", {"a": {"$tuple": [1]}})).a == (1,)
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
            from temporal_workflows.errors import NotSerializableError
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
        encode({(VALUE_SECRET,): threading.Lock()}, what="state key 'k'")
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
    assert key.startswith("state key 'k' holds a _thread.lock at builtins.dict[<builtins.tuple>]")


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


def test_a_class_defined_again_under_the_same_name_decodes_as_the_one_defined_last() -> None:
    """A graph built by a function called twice has new local classes each time (MAF passes the objects)."""

    def define() -> type:
        @dataclasses.dataclass
        class Local:
            n: int

        return Local

    first, second = define(), define()
    assert type_key(first) == type_key(second) and first is not second
    assert type(decode(encode(first(1)))) is first
    again = decode(encode(second(2)))
    assert type(again) is second and again == second(2)
