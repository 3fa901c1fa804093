"""What ``ctx.store`` can keep on Temporal: a value must reach the next step as it is, or be refused at ``set``.

Under the default runtime the store keeps any object in process. Here the store travels as JSON between
the run and its steps, recorded by the runtime's serializer (``_serializer.DeclaredTypesSerializer``: tagged
forms keep tuples, sets, bytes, dates, UUIDs, decimals and non-finite floats; models keep their class).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["StoreValueRefused", "check_store_value"]


class StoreValueRefused(ValueError):
    """A value ``ctx.store`` cannot keep on Temporal (it would not reach the next step as it is)."""


def _same(a: Any, b: Any) -> bool:
    """``b`` is ``a`` as it was: the same types all the way down, and equal values (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except Exception:
        return True  # no equality to compare by: the types matched


def check_store_value(serializer: Any, path: str, value: Any) -> None:
    """Refuse, with the reason, a ``ctx.store`` value that would not reach the next step as it is.

    Under the default runtime the store keeps any object in process. Here the store travels as JSON
    between the run and its steps: a value must be written and read back with the same type and value
    (tagged forms keep tuples, sets, bytes, dates, UUIDs, decimals and non-finite floats; models keep
    their class). A function, a lock, an open connection, or a class whose JSON reads back as something
    else is refused at ``set``, naming the key and the type, never the value.
    """
    if not getattr(serializer, "reads_exact_form", False):
        return  # a workflow's own serializer (pickle, an allow-list) decides what it keeps
    try:
        text = serializer.serialize(value)
        back = serializer.deserialize(text)
    except Exception as e:
        raise StoreValueRefused(
            f"ctx.store: the value for {path!r} (a {type(value).__name__}) cannot be kept in a TemporalRuntime "
            f"run's store, which travels as JSON between the run and its steps ({type(e).__name__}); keep such "
            "objects in a Resource or rebuild them in the step"
        ) from None
    if not _same(value, back):
        raise StoreValueRefused(
            f"ctx.store: the value for {path!r} (a {type(value).__name__}) would reach the next step as a "
            f"{type(back).__name__}, not as it is: a TemporalRuntime run's store travels as JSON between the run "
            "and its steps; store plain values, pydantic models, or the types docs/llama-runtime.md lists"
        )
