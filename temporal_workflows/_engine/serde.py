"""JSON envelopes for every value that crosses a superstep boundary.

Messages, state values, requests, responses and outputs are stored by the
engine as :class:`Envelope` objects: plain JSON data plus the name of the type
to restore. The same envelopes go into checkpoints, Temporal payloads and
workflow history, so everything the engine holds is JSON and nothing is
pickled.

Values are encoded where user code hands them over, so a value that cannot
round-trip is an error at the ``send_message``/``set_state`` call that made it.
Decoding constructs only pydantic models and dataclasses that are registered:
every type named in a graph's annotations, every type this process encoded,
types passed to :func:`register_type`, and this library's own events and
``RequestTimedOut``; and the other models and dataclasses *defined in a module
that defines a registered type* (an application's own model module: a state
value's type usually sits next to its message types). A type key is looked up
in the registry, then in such a module's namespace (``vars(module)``), never
through ``getattr``: a payload can never make the process import a module (not
even through a module's lazy ``__getattr__``, as ``pydantic:RootModel`` would)
nor construct a class of a module it has no registered type from.

Error messages built here name types, fields and JSON paths, never the values
themselves: validation errors leave out pydantic's ``input_value=...``, so a
rejected secret does not reach a log line or an (unencrypted) error message.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import types
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from temporal_workflows._errors import NotSerializableError

__all__ = [
    "Envelope",
    "decode",
    "encode",
    "register_type",
    "register_value_type",
    "type_key",
    "validate_as",
    "validation_message",
]


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
_MODULES: set[str] = set()
"""Modules that define a registered type: their other models and dataclasses decode too."""
_VALUE_TYPES: dict[type, None] = {}
"""Classes that are neither models nor dataclasses but travel by type key (``register_value_type``)."""


def type_key(tp: type) -> str:
    """The stable name a type is stored under."""
    return f"{tp.__module__}:{tp.__qualname__}"


def is_structured_type(tp: object) -> bool:
    """Whether ``tp`` is a class the envelope can carry by name."""
    return isinstance(tp, type) and (issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp) or tp in _VALUE_TYPES)


def register_value_type(tp: type) -> None:
    """Let instances of ``tp``, a class pydantic can validate and serialize, travel by type key.

    For classes of other libraries that are neither models nor dataclasses but
    define ``__get_pydantic_core_schema__`` (the agent layer gives Agent
    Framework's messages one): their values, and models and dataclasses with
    fields of their type, then cross boundaries like any model. Registering
    is also what lets a payload name the class, as :func:`register_type`.
    """
    if not isinstance(tp, type) or not hasattr(tp, "__get_pydantic_core_schema__"):
        raise TypeError(f"{tp!r} defines no pydantic schema (__get_pydantic_core_schema__)")
    _VALUE_TYPES[tp] = None
    register_type(tp)


def register_type(tp: type) -> None:
    """Allow envelopes naming ``tp`` to be decoded in this process.

    Graph building registers every model and dataclass its annotations name
    (and with them the others their modules define); call this for types
    defined elsewhere that appear only inside ``Any``-typed values or state.
    """
    if not is_structured_type(tp):
        raise TypeError(f"only pydantic models and dataclasses can be registered, not {tp!r}")
    _REGISTRY[type_key(tp)] = tp
    _MODULES.add(tp.__module__)


def _registered(tp: type) -> None:
    """Register a type this process encodes (unless a type of its name already is)."""
    if _REGISTRY.setdefault(type_key(tp), tp) is tp:
        _MODULES.add(tp.__module__)


def _register_library_types() -> None:
    """Register the library's own types that travel in envelopes (events, ``RequestTimedOut``).

    They are registered when encoded, but a process that only decodes them (a
    client reading a run's event stream) may never have encoded one. Imported
    statically and lazily (the modules are the package's own, already loaded by
    ``temporal_workflows``), never by a name taken from a payload.
    """
    from temporal_workflows import _events, _requests

    for module in (_events, _requests):
        for obj in list(vars(module).values()):
            if is_structured_type(obj) and obj.__module__ == module.__name__:
                _registered(obj)


_library_types_registered = False


def _sibling(key: str) -> type | None:
    """The model or dataclass ``key`` names in a module that defines a registered type, if it defines one.

    Read from the module's (and enclosing classes') ``__dict__``, never with
    ``getattr``, so no lazy ``__getattr__`` runs; the class found must be
    defined there under that very name (not imported into the module).
    """
    module_name, sep, qualname = key.partition(":")
    module = sys.modules.get(module_name) if sep and module_name in _MODULES else None
    if type(module) is not types.ModuleType:  # not loaded, or a lazy module that would load on access
        return None
    namespace: Any = vars(module)
    found: object = None
    for part in qualname.split("."):
        found = namespace.get(part)
        if not isinstance(found, type):
            return None
        namespace = vars(found)
    if isinstance(found, type) and is_structured_type(found) and type_key(found) == key:
        return found
    return None


def _resolve(key: str) -> type:
    """The type ``key`` names, if decoding may build it (see the module docstring); never imports anything."""
    global _library_types_registered
    tp = _REGISTRY.get(key)
    if tp is not None:
        return tp
    if not _library_types_registered:
        _library_types_registered = True
        _register_library_types()
        tp = _REGISTRY.get(key)
    if tp is None:
        tp = _sibling(key)
    if tp is None:
        raise NotSerializableError(
            f"cannot decode a value of type {key!r}: the type is not registered in this process (build or "
            "import the graph that names it, or call temporal_workflows.register_type(<the class>))"
        )
    _REGISTRY[key] = tp
    return tp


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
                raise NotSerializableError(
                    f"{path} has a non-string key (a {type(k).__qualname__}); JSON object keys are strings"
                )
            out[k] = _json_copy(v, f"{path}[{k!r}]")
        return out
    raise NotSerializableError(
        f"{path} is a {type(value).__module__}.{type(value).__qualname__}, which cannot round-trip through "
        "JSON; use a pydantic model, a dataclass or plain JSON values (models and dataclasses may also be "
        "the items of a list or the values of a dict, but not mixed with other types inside a list or dict)"
    )


def _dump(value: Any, warn: Literal["error", "none"]) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", warnings=warn)
    return _adapter(type(value)).dump_python(value, mode="json", warnings=warn)  # type: ignore[arg-type]


def _dump_structured(value: Any, what: str) -> Any:
    """The JSON form of a model or dataclass instance, or ``NotSerializableError`` naming ``what``.

    pydantic warns when a field holds a value of another type than declared
    (assigned without validation), quoting the value; that warning would put
    it in logs, so it is replaced by one naming only the type.
    """
    tp = type(value)
    try:
        try:
            return _dump(value, "error")
        except PydanticSerializationError as e:
            if not str(e).startswith("Pydantic serializer warnings"):
                raise
        data = _dump(value, "none")
    except Exception as e:  # pydantic raises several types here
        raise NotSerializableError(f"{what} of type {tp.__qualname__} cannot be serialized: {e}") from e
    warnings.warn(
        f"{what} of type {tp.__qualname__} has a field holding a value of another type than declared (assigned "
        "without validation); it was serialized as it is and may not decode",
        stacklevel=3,
    )
    return data


def encode(value: Any, *, what: str = "value") -> Envelope:
    """Turn a user value into an envelope, or fail naming ``what`` it was."""
    tp = type(value)
    if (
        isinstance(value, BaseModel)
        or (dataclasses.is_dataclass(value) and not isinstance(value, type))
        or tp in _VALUE_TYPES
    ):
        _registered(tp)
        return Envelope(type_key(tp), _dump_structured(value, what))
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
    try:
        if issubclass(tp, BaseModel):
            return tp.model_validate(data)
        return _adapter(tp).validate_python(data)  # type: ignore[arg-type]
    except ValidationError as e:
        raise NotSerializableError(f"cannot decode a value of type {key!r}: {validation_message(e)}") from None


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
    """Validate (and coerce JSON into) ``tp``; raises ``ValueError`` with pydantic's detail, without the input.

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
        raise ValueError(validation_message(e)) from None


# pydantic messages whose context quotes the input; rebuilt without it.
_WITHOUT_INPUT = {
    "union_tag_invalid": (
        "Input tag found using {discriminator} does not match any of the expected tags: {expected_tags}"
    ),
    "timezone_offset": "Timezone offset of {tz_expected} required",
    "uuid_parsing": "Input should be a valid UUID",
}
_ERRORS_LISTED = 10


def validation_message(e: ValidationError) -> str:
    """pydantic's message for ``e``, on one line, without the input: type, and per error its field, message, kind.

    ``str(e)`` quotes every rejected value (``input_value='...'``), which then
    reaches logs and error messages in plaintext even when payloads are
    encrypted. This names the type validated, each error's location (field
    names, list indexes, dict keys), what was expected and the error type.
    Messages raised by an application's own validators are kept as written.
    """
    errors = e.errors(include_input=False, include_url=False)
    parts = []
    for err in errors[:_ERRORS_LISTED]:
        msg = err["msg"]
        template = _WITHOUT_INPUT.get(err["type"])
        if template is not None:
            try:
                msg = template.format(**err.get("ctx", {}))
            except (KeyError, IndexError):
                msg = template.split("{", 1)[0].strip()
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc + ': ' if loc else ''}{msg} [type={err['type']}]")
    more = f"; and {len(errors) - _ERRORS_LISTED} more" if len(errors) > _ERRORS_LISTED else ""
    count = f"{len(errors)} validation error{'' if len(errors) == 1 else 's'}"
    return f"{count} for {e.title}: {'; '.join(parts)}{more}"


def json_schema(tp: Any) -> dict[str, Any]:
    """JSON schema of ``tp`` for clients that answer requests (empty if it has none)."""
    try:
        return _adapter(tp).json_schema()
    except Exception:
        return {}
