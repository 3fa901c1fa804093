"""Why a value cannot be stored, and where in the value it sits: the text of ``NotSerializableError``.

Kept apart from the encoder so its loops stay lean: a refused value raises
:class:`Refused` with a reason, and only then is the path to it found (by
identity) and the message written, naming the type, the path and what to do.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any

from pydantic import BaseModel

from temporal_workflows._engine.registry import plain_signature
from temporal_workflows._errors import NotSerializableError

__all__ = ["BadData", "Refused", "describe_type", "locate", "refusal", "why_not"]


class BadData(ValueError):
    """Stored data that does not fit its tag; the message names what was expected, never the data."""


class Refused(Exception):
    """A value inside what is being encoded cannot be stored; ``encode`` turns it into the user's error."""

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(reason)
        self.value = value
        self.reason = reason


_PROCESS_BOUND = ("_io", "io", "_thread", "threading", "socket", "_socket", "asyncio", "multiprocessing", "ssl")


def why_not(tp: type) -> str:
    """Why a value of class ``tp`` cannot be stored, in words a user can act on."""
    if issubclass(tp, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.LambdaType)):
        return "functions are code, not data; store what they need instead"
    if issubclass(tp, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
        return "a generator or coroutine in progress cannot be stored"
    if issubclass(tp, (type, types.ModuleType)):
        return "classes and modules are code, not data"
    if tp.__module__.split(".")[0] in _PROCESS_BOUND:
        return "it belongs to this process (an open file, socket, lock, thread or event loop)"
    why = plain_signature(tp)
    return why if isinstance(why, str) else "its instances do not match its __init__"


def describe_type(tp: type) -> str:
    """``module.QualName``: names the exact class, builtins included (``builtins.object``)."""
    return f"{tp.__module__}.{tp.__qualname__}"


def locate(root: Any, target: object) -> str:
    """Where ``target`` sits inside ``root`` (``[0]``, ``['key']``, ``Model.field``), found by identity.

    Only run when a value is refused, so the encoder's loops need not track paths.
    """
    seen: set[int] = set()

    def children(v: Any) -> list[tuple[str, Any]]:
        t = type(v)
        if isinstance(v, dict):
            out: list[tuple[str, Any]] = []
            for k, x in v.items():
                label = repr(k) if type(k) in (str, int, bool) else f"<{describe_type(type(k))}>"
                out += [(f"[{label}]", x), (f"[<key {label}>]", k)]
            return out
        fields = getattr(v, "_fields", None)
        if isinstance(v, tuple) and isinstance(fields, tuple):
            return [(f".{f}", x) for f, x in zip(fields, v, strict=False)]
        if isinstance(v, (list, tuple)):
            return [(f"[{i}]", x) for i, x in enumerate(v)]
        if isinstance(v, (set, frozenset)):
            return [("[<item>]", x) for x in v]
        if isinstance(v, BaseModel):
            return [(f".{f}", getattr(v, f, None)) for f in t.model_fields]
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return [(f".{f.name}", getattr(v, f.name, None)) for f in dataclasses.fields(v)]
        if isinstance(v, enum.Enum):
            return [(".value", v.value)]
        attrs = getattr(v, "__dict__", None)
        return [(f".{k}", x) for k, x in attrs.items()] if isinstance(attrs, dict) else []

    def walk(v: Any, path: str) -> str | None:
        if v is target:
            return path
        if id(v) in seen or len(seen) > 100_000:
            return None
        seen.add(id(v))
        for part, child in children(v):
            found = walk(child, path + part)
            if found is not None:
                return found
        return None

    try:
        return walk(root, "") or ""
    except RecursionError:
        return ""


def refusal(root: Any, e: Refused, what: str) -> NotSerializableError:
    """The error for refusing ``e.value``, found inside ``root``, which user code handed over as ``what``."""
    tp = type(e.value)
    path = "" if e.value is root else locate(root, e.value)
    if path:
        where = f"{what} holds a {describe_type(tp)} at {describe_type(type(root))}{path}"
    else:
        where = f"{what} is a {describe_type(tp)}"
    return NotSerializableError(
        f"{where}, which cannot round-trip through JSON: {e.reason}. Values may be plain JSON, pydantic models, "
        "dataclasses, enums, named tuples, tuples, sets, dicts with hashable keys, datetime/date/time/timedelta, "
        "UUID, Decimal, bytes, Path, or instances of ordinary classes that keep their attributes in a __dict__"
    )
