"""Runtime type checks used for routing and build-time validation.

Routing delivers a message to the targets whose handler accepts its type, and
``build()`` checks that what an executor declares it sends can be handled by
its targets. Both need a small subset of ``typing`` understood at runtime:
classes, ``Any``/``object``, unions, ``Optional``, ``Literal`` and the common
generic containers.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Iterator, Sequence
from typing import Any, Literal, Union, get_args, get_origin

from temporal_workflows._engine.serde import is_structured_type

__all__ = [
    "AcceptsTable",
    "accepts",
    "caller_locals",
    "compatible",
    "decided_by_type",
    "flatten",
    "structured_types_in",
    "type_name",
]

_UNION_ORIGINS: tuple[Any, ...] = (Union, types.UnionType)


def caller_locals(depth: int, frames: int) -> dict[str, Any]:
    """Locals of ``frames`` frames from ``depth`` up (1 is the caller, 2 the caller's caller).

    A decorator (``@handler``, ``@executor``) resolves its function's
    annotations with these as ``localns``, so a type defined in a function
    body (a test, a notebook cell wrapped in a function) resolves as it would
    at module level. The nearest frame wins a name two frames define.
    """
    ns: dict[str, Any] = {}
    try:
        frame: Any = sys._getframe(depth)
    except ValueError:  # pragma: no cover - shallow stack
        return ns
    for _ in range(frames):
        if frame is None:
            break
        for k, v in frame.f_locals.items():
            ns.setdefault(k, v)
        frame = frame.f_back
    return ns


def flatten(tp: Any) -> list[Any]:
    """The members of a union (or ``[tp]``)."""
    if get_origin(tp) in _UNION_ORIGINS:
        out: list[Any] = []
        for a in get_args(tp):
            out.extend(flatten(a))
        return out
    return [tp]


def type_name(tp: Any) -> str:
    """Readable name of a type or annotation for error messages."""
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and get_origin(tp) is None:
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def accepts(tp: Any, value: Any) -> bool:
    """Whether a handler annotated with ``tp`` accepts ``value``.

    Containers are checked element by element so that a ``list[int]`` handler
    does not receive a ``list[str]``.
    """
    if tp is Any or tp is object:
        return True
    if tp is None or tp is type(None):
        return value is None
    origin = get_origin(tp)
    if origin is None:
        if isinstance(tp, type):
            if tp is float:
                return isinstance(value, (int, float)) and not isinstance(value, bool)
            return isinstance(value, tp)
        return bool(isinstance(tp, typing.TypeVar))
    if origin in _UNION_ORIGINS:
        return any(accepts(a, value) for a in get_args(tp))
    if origin is Literal:
        return value in get_args(tp)
    if origin is typing.Annotated:
        return accepts(get_args(tp)[0], value)
    args = get_args(tp)
    if origin in (list, typing.Sequence, typing.MutableSequence) or origin is getattr(typing, "Sequence", None):
        return isinstance(value, list) and (not args or all(accepts(args[0], v) for v in value))
    if origin is tuple:
        return isinstance(value, tuple)
    if origin in (dict, typing.Mapping):
        return isinstance(value, dict) and (
            not args or all(accepts(args[0], k) and accepts(args[1], v) for k, v in value.items())
        )
    if isinstance(origin, type):
        try:
            return isinstance(value, origin)
        except TypeError:
            return False
    return False


def decided_by_type(tp: Any) -> bool:
    """Whether ``accepts(tp, v)`` and ``accepts(tp, [v])`` depend only on ``type(v)``, for ``v`` not a container.

    It mirrors :func:`accepts` branch by branch: a ``Literal`` compares values,
    and a runtime-checkable ``Protocol`` looks at the instance's attributes,
    so neither is decided by the type; every other branch is an
    ``isinstance`` or a constant (a list's items are checked by their own
    annotation, so ``list[Literal[...]]`` is not decided either).
    """
    if tp is Any or tp is object or tp is None or tp is type(None):
        return True
    origin = get_origin(tp)
    if origin is None:
        return not (isinstance(tp, type) and getattr(tp, "_is_protocol", False))
    if origin in _UNION_ORIGINS:
        return all(decided_by_type(a) for a in get_args(tp))
    if origin is Literal:
        return False
    if origin is typing.Annotated:
        return decided_by_type(get_args(tp)[0])
    args = get_args(tp)
    if origin in (list, typing.Sequence, typing.MutableSequence) or origin is getattr(typing, "Sequence", None):
        return not args or decided_by_type(args[0])
    if origin is tuple or origin in (dict, typing.Mapping):
        return True
    return not (isinstance(origin, type) and getattr(origin, "_is_protocol", False))


_CONTAINERS = (list, dict, tuple)
"""Values :func:`accepts` looks into (or may): never remembered by their type."""

TABLE_TYPES = 256
"""Most value types one :class:`AcceptsTable` remembers (a program that makes classes on the fly stays bounded)."""


class AcceptsTable:
    """Which of a fixed list of annotations first accepts a value: :func:`accepts`, remembered per value type.

    Routing asks this for every message sent (per target) and every step run;
    the annotations are fixed when the graph is built, so for a value whose
    type alone decides the answer (:func:`decided_by_type`, and the value not
    a container) the answer is computed once per type and then looked up.
    Any other value (a list, a ``Literal`` annotation, ...) is checked each
    time, exactly as before. ``item=True`` asks about ``[value]`` instead
    (a fan-in target, whose handler takes the list of what its sources sent).
    A class registered as a virtual subclass of an ABC after a value of it
    was routed keeps the answer it had.
    """

    __slots__ = ("_by_type", "_decided", "_item", "types")

    def __init__(self, types: Sequence[Any], *, item: bool = False) -> None:
        self.types = tuple(types)
        self._item = item
        self._decided = all(decided_by_type(t) for t in self.types)
        self._by_type: dict[type, int | None] = {}

    def first(self, value: Any) -> int | None:
        """Index of the first annotation that accepts ``value`` (``[value]`` with ``item``); ``None``: none does."""
        cls = type(value)
        by_type = self._by_type
        if cls in by_type:
            return by_type[cls]
        probe = [value] if self._item else value
        found = next((i for i, t in enumerate(self.types) if accepts(t, probe)), None)
        if (
            self._decided
            and not issubclass(cls, _CONTAINERS)
            and getattr(value, "__class__", None) is cls
            and len(by_type) < TABLE_TYPES
        ):
            by_type[cls] = found
        return found


def compatible(out_tp: Any, in_tp: Any) -> bool:
    """Whether a value declared as ``out_tp`` may be accepted by ``in_tp``.

    Conservative towards the user: anything this function does not understand
    counts as compatible, so build-time validation never rejects a valid graph.
    """
    if in_tp is Any or in_tp is object or out_tp is Any or out_tp is object:
        return True
    outs, ins = flatten(out_tp), flatten(in_tp)
    if len(outs) > 1:
        return any(compatible(o, in_tp) for o in outs)
    o = outs[0]
    for i in ins:
        if i is Any or i is object:
            return True
        if isinstance(o, type) and isinstance(i, type) and get_origin(o) is None and get_origin(i) is None:
            if issubclass(o, i) or (i is float and o is int):
                return True
            continue
        oo, io = get_origin(o) or o, get_origin(i) or i
        if isinstance(oo, type) and isinstance(io, type):
            if not issubclass(oo, io):
                continue
            oa, ia = get_args(o), get_args(i)
            if not oa or not ia or len(oa) != len(ia):
                return True
            if all(compatible(a, b) for a, b in zip(oa, ia, strict=True)):
                return True
            continue
        return True  # Literal, TypeVar, ...: not judged
    return False


def structured_types_in(tp: Any) -> Iterator[type]:
    """Every pydantic model or dataclass named anywhere in an annotation."""
    if is_structured_type(tp):
        yield tp
        return
    for a in get_args(tp):
        if not isinstance(a, (str, int, bool)) and a is not None:
            yield from structured_types_in(a)
