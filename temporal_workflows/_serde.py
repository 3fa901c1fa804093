"""JSON envelopes for every value that crosses a superstep boundary.

Messages, state values, requests, responses and outputs are stored by the
engine as :class:`Envelope` objects: plain JSON data plus the name of the type
to restore. The same envelopes go into checkpoints, Temporal payloads and
workflow history, so everything the engine holds is JSON and nothing is
pickled.

Values are encoded where user code hands them over, so a value that cannot
round-trip is an error at the ``send_message``/``set_state`` call that made it.
Decoding constructs only pydantic models and dataclasses that are registered
(every type named in a graph's annotations is) or already imported; a payload
can never make the process import a module or call an arbitrary constructor.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ._errors import NotSerializableError

__all__ = ["Envelope", "decode", "encode", "register_type", "type_key", "validate_as"]


@dataclass(frozen=True, slots=True)
class Envelope:
    """A value as the engine stores it.

    Attributes:
        type: ``"module:QualName"`` of a pydantic model or dataclass, or
            ``None`` for a plain JSON value (str, int, float, bool, None, list,
            dict with str keys).
        data: The JSON form of the value. Never mutated after creation.
    """

    type: str | None
    data: Any


_REGISTRY: dict[str, type] = {}


def type_key(tp: type) -> str:
    """The stable name a type is stored under."""
    return f"{tp.__module__}:{tp.__qualname__}"


def is_structured_type(tp: object) -> bool:
    """Whether ``tp`` is a class the envelope can carry by name."""
    return isinstance(tp, type) and (issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp))


def register_type(tp: type) -> None:
    """Allow envelopes naming ``tp`` to be decoded in this process.

    Graph building registers every model and dataclass its annotations name;
    call this only for types that appear solely inside ``Any``-typed values.
    """
    if not is_structured_type(tp):
        raise TypeError(f"only pydantic models and dataclasses can be registered, not {tp!r}")
    _REGISTRY[type_key(tp)] = tp


def _resolve(key: str) -> type:
    tp = _REGISTRY.get(key)
    if tp is not None:
        return tp
    module_name, _, qualname = key.partition(":")
    module = sys.modules.get(module_name)  # never import on behalf of a payload
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    if obj is None or not is_structured_type(obj):
        raise NotSerializableError(
            f"cannot decode a value of type {key!r}: the type is not registered in this process "
            "(import the module that defines it, or call temporal_workflows.register_type)"
        )
    _REGISTRY[key] = obj
    return obj  # type: ignore[no-any-return]


@lru_cache(maxsize=1024)
def _adapter(tp: Any) -> TypeAdapter[Any]:  # annotations are hashable
    return TypeAdapter(tp)


def _json_copy(value: Any, path: str) -> Any:
    """Deep-copy a JSON value, rejecting anything JSON cannot carry faithfully."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise NotSerializableError(f"{path} is {value!r}, which JSON cannot represent")
    if isinstance(value, (list, tuple)):
        return [_json_copy(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotSerializableError(f"{path} has a non-string key {k!r}; JSON object keys are strings")
            out[k] = _json_copy(v, f"{path}[{k!r}]")
        return out
    raise NotSerializableError(
        f"{path} is a {type(value).__module__}.{type(value).__qualname__}, which cannot round-trip through "
        "JSON; use a pydantic model, a dataclass or plain JSON values (models and dataclasses may also be "
        "the items of a list or the values of a dict, but not mixed with other types inside a list or dict)"
    )


def encode(value: Any, *, what: str = "value") -> Envelope:
    """Turn a user value into an envelope, or fail naming ``what`` it was."""
    tp = type(value)
    if isinstance(value, BaseModel):
        _REGISTRY.setdefault(type_key(tp), tp)
        try:
            return Envelope(type_key(tp), value.model_dump(mode="json"))
        except Exception as e:  # pydantic raises several types here
            raise NotSerializableError(f"{what} of type {tp.__qualname__} cannot be serialized: {e}") from e
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _REGISTRY.setdefault(type_key(tp), tp)
        try:
            data = _adapter(tp).dump_python(value, mode="json")  # type: ignore[arg-type]
            return Envelope(type_key(tp), data)
        except Exception as e:
            raise NotSerializableError(f"{what} of type {tp.__qualname__} cannot be serialized: {e}") from e
    if isinstance(value, (list, tuple)) and value:
        inner = _homogeneous_structured(value)
        if inner is not None:
            return Envelope(f"list[{type_key(inner)}]", [encode(v, what=what).data for v in value])
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        inner = _homogeneous_structured(list(value.values()))
        if inner is not None:
            return Envelope(f"dict[{type_key(inner)}]", {k: encode(v, what=what).data for k, v in value.items()})
    return Envelope(None, _json_copy(value, what))


def _homogeneous_structured(values: Any) -> type | None:
    """The one model/dataclass type of every item, if they share one."""
    first = type(values[0])
    if not is_structured_type(first):
        return None
    return first if all(type(v) is first for v in values) else None


def _decode_one(key: str, data: Any) -> Any:
    tp = _resolve(key)
    if issubclass(tp, BaseModel):
        return tp.model_validate(data)
    return _adapter(tp).validate_python(data)  # type: ignore[arg-type]


def decode(envelope: Envelope) -> Any:
    """Restore the value an envelope holds, as a fresh object the caller may mutate."""
    if envelope.type is None:
        data = envelope.data
        return data if data is None or isinstance(data, (str, int, float)) else _json_copy(data, "value")
    t = envelope.type
    if t.startswith("list[") and t.endswith("]"):
        return [_decode_one(t[5:-1], d) for d in envelope.data]
    if t.startswith("dict[") and t.endswith("]"):
        return {k: _decode_one(t[5:-1], d) for k, d in envelope.data.items()}
    return _decode_one(t, envelope.data)


def validate_as(tp: Any, value: Any, *, strict: bool = False) -> Any:
    """Validate (and coerce JSON into) ``tp``; raises ``ValueError`` with pydantic's detail.

    ``strict=True`` validates ``value`` as the JSON document it is, in pydantic's
    strict mode: a JSON object may become a model or dataclass and an ISO string
    a datetime field, but a string never becomes an int, nor an int a bool.
    """
    if tp is Any or tp is object:
        return value
    try:
        if strict:
            return _adapter(tp).validate_json(json.dumps(value), strict=True)
        return _adapter(tp).validate_python(value)
    except ValidationError as e:
        raise ValueError(str(e)) from None


def json_schema(tp: Any) -> dict[str, Any]:
    """JSON schema of ``tp`` for clients that answer requests (empty if it has none)."""
    try:
        return _adapter(tp).json_schema()
    except Exception:
        return {}
