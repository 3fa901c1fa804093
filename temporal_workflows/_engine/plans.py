"""Which fields of a model or dataclass pydantic's JSON cannot restore exactly.

A model or dataclass is stored as pydantic dumps it, so its JSON stays what
its users know; a field whose annotation cannot bring the exact value back
(``Any``, a union of several types, a bare ``tuple``, a plain class, ...) is
stored as a tagged node instead. The plan for a class is worked out once.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, PlainSerializer, RootModel, TypeAdapter, WrapSerializer

from temporal_workflows._engine.registry import class_kind

__all__ = ["Plan", "adapter", "is_std", "plan_of"]


@lru_cache(maxsize=1024)
def adapter(tp: Any) -> TypeAdapter[Any]:  # annotations are hashable
    return TypeAdapter(tp)


@dataclass(frozen=True, slots=True)
class Plan:
    """How a model or dataclass is stored.

    Attributes:
        open: ``(attribute, JSON key)`` of each field stored as a tagged value
            rather than by pydantic, because its annotation cannot restore the
            exact value (``Any``, unions, bare containers, plain classes, ...).
        floats: ``(attribute, JSON key)`` of each ``float`` field: pydantic
            leaves a NaN or infinity in it as a float, which JSON writers turn
            into ``null``; such a value is stored tagged instead.
        fields: A dataclass pydantic has no schema for (a field of a plain
            class, say): every ``init`` field is stored tagged and the class is
            rebuilt by calling it.
    """

    open: tuple[tuple[str, str], ...] = ()
    floats: tuple[tuple[str, str], ...] = ()
    fields: bool = False


_PLANS: dict[type, Plan] = {}
_EXACT_LEAVES: frozenset[Any] = frozenset(
    {str, int, float, bool, type(None), None, datetime, date, time, timedelta, Decimal}
)
_SEQUENCES = (list, set, frozenset)
_UNIONS = (typing.Union, types.UnionType)
_SERIALIZERS = (PlainSerializer, WrapSerializer)


def is_std(tp: Any, module: str, name: str) -> bool:
    return isinstance(tp, type) and any(k.__module__ == module and k.__name__ == name for k in tp.__mro__)


def _exact(tp: Any, stack: frozenset[type]) -> bool:
    """Whether pydantic, given this annotation, restores exactly the value it dumped."""
    try:
        if tp in _EXACT_LEAVES:
            return True
    except TypeError:  # an unhashable annotation
        return False
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return any(isinstance(m, _SERIALIZERS) for m in args[1:]) or _exact(args[0], stack)
    if origin is Literal:
        return True
    if origin in _UNIONS:
        members = [a for a in args if a is not type(None)]
        return len(members) == 1 and _exact(members[0], stack)
    if origin in _SEQUENCES:
        return len(args) == 1 and _exact(args[0], stack)
    if origin is tuple:
        return bool(args) and args != ((),) and all(a is Ellipsis or _exact(a, stack) for a in args)
    if origin is dict:
        return len(args) == 2 and _exact_key(args[0]) and _exact(args[1], stack)
    if origin is not None or not isinstance(tp, type):
        return False
    if is_std(tp, "uuid", "UUID") or is_std(tp, "pathlib", "Path"):
        return tp.__module__ in ("uuid", "pathlib")
    kind = class_kind(tp)
    if kind == "enum":
        return all(type(m.value) in (str, int) for m in typing.cast(type[enum.Enum], tp))
    if kind in ("model", "dataclass"):
        if tp in stack:
            return True  # a recursive model: judged by its other fields
        plan = plan_of(tp, stack)
        return not plan.open and not plan.fields
    if kind == "namedtuple":
        try:
            hints = typing.get_type_hints(tp)
        except Exception:
            return False
        return all(_exact(h, stack) for h in hints.values())
    return False


def _exact_key(tp: Any) -> bool:
    if tp in (str, int):
        return True
    if get_origin(tp) is Literal:
        return all(type(a) in (str, int) for a in get_args(tp))
    if class_kind(tp) == "enum":
        return all(type(m.value) in (str, int) for m in tp)
    return is_std(tp, "uuid", "UUID")


def _is_float(tp: Any) -> bool:
    """``float``, ``float | None`` or an ``Annotated`` one of them."""
    if get_origin(tp) is typing.Annotated:
        return _is_float(get_args(tp)[0])
    if get_origin(tp) in _UNIONS:
        return [a for a in get_args(tp) if a is not type(None)] == [float]
    return tp is float


def _library_fields(tp: type[BaseModel]) -> set[str]:
    """Fields declared by this library's own models (events carry JSON in their ``data: Any`` on purpose)."""
    names: set[str] = set()
    for base in tp.__mro__:
        if base.__module__.startswith("temporal_workflows.") and isinstance(base, type) and issubclass(base, BaseModel):
            names.update(vars(base).get("__annotations__", {}))
    return names


def plan_of(tp: type, stack: frozenset[type] = frozenset()) -> Plan:
    found = _PLANS.get(tp)
    if found is not None:
        return found
    stack = stack | {tp}
    found = _model_plan(tp, stack) if issubclass(tp, BaseModel) else _dataclass_plan(tp, stack)
    _PLANS[tp] = found
    return found


def _model_plan(tp: type[BaseModel], stack: frozenset[type]) -> Plan:
    decorators = tp.__pydantic_decorators__
    if issubclass(tp, RootModel) or decorators.model_serializers:
        return Plan()  # the model says how it is stored
    custom = {f for d in decorators.field_serializers.values() for f in d.info.fields}
    if "*" in custom:
        return Plan()
    ours = _library_fields(tp)
    by_alias = bool(tp.model_config.get("serialize_by_alias"))
    open_fields, floats = [], []
    for name, f in tp.model_fields.items():
        if name in custom or name in ours or f.discriminator is not None:
            continue
        if any(isinstance(m, _SERIALIZERS) for m in f.metadata):
            continue
        key = (f.serialization_alias or f.alias or name) if by_alias else name
        if _is_float(f.annotation):
            floats.append((name, key))
        elif not _exact(f.annotation, stack):
            open_fields.append((name, key))
    return Plan(open=tuple(open_fields), floats=tuple(floats))


def _dataclass_plan(tp: type, stack: frozenset[type]) -> Plan:
    try:
        adapter(tp)
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception:  # pydantic has no schema for a field's type (a plain class, say)
        return Plan(fields=True)
    fields = [f for f in dataclasses.fields(tp) if f.init]
    return Plan(
        open=tuple((f.name, f.name) for f in fields if not _exact(hints.get(f.name, Any), stack)),
        floats=tuple((f.name, f.name) for f in fields if _is_float(hints.get(f.name))),
    )
