"""JSON envelopes for every value that crosses a superstep boundary.

Messages, state values, requests, responses and outputs are stored by the
engine as :class:`Envelope` objects: JSON data plus the name of the type to
restore. The same envelopes go into checkpoints, Temporal payloads and
workflow history, so everything the engine holds is JSON and nothing is
pickled. The encoding is specified in ``docs/values.md``; in short:

* Plain JSON values (str, int, float, bool, None, lists, dicts with str keys)
  are stored as they are, with no type (``Envelope(None, data)``), so what the
  ``temporal`` CLI sends and what a reader sees stays plain JSON.
* Anything plain JSON would lose the type of is stored *tagged*: at the top
  level the envelope's ``type`` names it (``"tuple"``, ``"datetime"``,
  ``"module:QualName"`` of a class, ``"list[<tag>]"`` of several), and inside
  a value a one-member object ``{"$<tag>": <data>}`` does. Tuples, sets,
  frozensets, dicts with non-str keys, ``datetime``/``date``/``time``/
  ``timedelta``, ``UUID``, ``Decimal``, ``bytes``, ``Path``, ``complex`` and
  non-finite floats have built-in tags; enums, named tuples, pydantic models,
  dataclasses and plain classes (ordinary classes keeping their attributes
  in a ``__dict__``) are tagged with their type key.
* Models and dataclasses keep pydantic's JSON; only a field whose annotation
  cannot restore the exact value (``Any``, a union, a bare ``tuple``, a plain
  class, ...) holds a tagged value.

Values are encoded where user code hands them over, so a value that cannot
round-trip is an error at the ``send_message``/``set_state`` call that made it,
naming the value's type, where in the value it sits and the executor.
Decoding builds built-in types from a fixed table and classes only through the
registry (``registry.resolve``): a payload can never make the process import a
module (not even through a module's lazy ``__getattr__``) nor construct a
class this process did not declare, register or encode.

Error messages built here name types, fields and JSON paths, never the values
themselves: validation errors leave out pydantic's ``input_value=...``, so a
rejected secret does not reach a log line or an (unencrypted) error message.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from temporal_workflows._engine.plans import adapter, is_std, plan_of
from temporal_workflows._engine.refusals import BadData, Refused, refusal, why_not
from temporal_workflows._engine.registry import (
    Kind,
    PlainSignature,
    class_kind,
    is_structured_type,
    plain_signature,
    register_type,
    register_value_type,
    registered,
    resolve,
    type_key,
)
from temporal_workflows._engine.stdtypes import SCALAR_DECODERS, SCALAR_ENCODERS, as_array, tagged
from temporal_workflows._errors import NotSerializableError

__all__ = [
    "Envelope",
    "decode",
    "encode",
    "is_structured_type",
    "json_schema",
    "node_envelope",
    "register_type",
    "register_value_type",
    "type_key",
    "validate_as",
    "validation_message",
]

_resolve = resolve  # the name earlier code and tests use


@dataclass(frozen=True, slots=True)
class Envelope:
    """A value as the engine stores it.

    Attributes:
        type: ``None`` for a plain JSON value (str, int, float, bool, None,
            list, dict with str keys), read as it is; otherwise how to read
            ``data``: a built-in tag (``"tuple"``, ``"datetime"``, ...), a
            class's ``"module:QualName"``, ``"list[<tag>]"`` / ``"dict[<tag>]"``
            for a list / str-keyed dict of such values, or ``"list[*]"`` /
            ``"dict[*]"`` for one whose items are tagged where needed
            (``docs/values.md``).
        data: The JSON form of the value. Never mutated after creation.
    """

    type: str | None
    data: Any

    def to_json(self, *, compact: bool = False) -> dict[str, Any]:
        """The envelope as stored data: ``{"type": ..., "data": ...}``, the form pydantic gives it too.

        ``compact`` leaves out ``"type"`` for plain JSON (``{"data": ...}``),
        as step payloads carry it. :meth:`from_json` reads both forms. Every
        place that keeps an envelope as JSON (journals, snapshots, stream
        items, checkpoint rows) goes through this pair, so there is one form.
        """
        if compact and self.type is None:
            return {"data": self.data}
        return {"type": self.type, "data": self.data}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Envelope:
        """An envelope from :meth:`to_json`'s JSON (either form: a missing ``"type"`` is plain JSON)."""
        return cls(raw.get("type"), raw.get("data"))


# -- built-in tags -----------------------------------------------------------------------------------


def _sort_key(node: Any) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"))


def _set_items(v: Any) -> list[Any]:
    """A set's items as nodes, in an order that is the same in every process (sets have none).

    Strings and numbers are sorted by value; anything else (tuples, enums,
    frozensets, mixed types, NaN), whose iteration order may follow per-process
    string hashes and whose ``<`` may be partial, by its JSON.
    """
    items = list(v)
    if all(type(x) is str for x in items) or all(type(x) in (int, float) and x == x for x in items):
        return [_node(x) for x in sorted(items)]
    return sorted((_node(x) for x in items), key=_sort_key)


def _pairs(v: dict[Any, Any]) -> list[list[Any]]:
    return [[_node(k), _node(x)] for k, x in v.items()]


_BUILTIN_ENCODERS: dict[type, Callable[[Any], Any]] = {
    tuple: lambda v: {"$tuple": [_node(x) for x in v]},
    set: lambda v: {"$set": _set_items(v)},
    frozenset: lambda v: {"$frozenset": _set_items(v)},
    complex: lambda v: {"$complex": [_node(v.real), _node(v.imag)]},
    **{tp: tagged(tag, data) for tp, (tag, data) in SCALAR_ENCODERS.items()},
}


def _decode_pairs(data: Any) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for pair in as_array(data, "dict with non-str keys"):
        if type(pair) is not list or len(pair) != 2:
            raise BadData("a dict with non-str keys is stored as an array of [key, value] pairs")
        out[_decode_node(pair[0])] = _decode_node(pair[1])
    return out


def _decode_complex(data: Any) -> complex:
    parts = as_array(data, "complex number")
    if len(parts) != 2:
        raise BadData("a complex number is stored as [real, imag]")
    real, imag = (_decode_node(p) for p in parts)
    if not all(type(p) in (int, float) for p in (real, imag)):
        raise BadData("a complex number is stored as [real, imag]")
    return complex(real, imag)


_BUILTIN_DECODERS: dict[str, Callable[[Any], Any]] = {
    "tuple": lambda d: tuple(_decode_node(x) for x in as_array(d, "tuple")),
    "set": lambda d: {_decode_node(x) for x in as_array(d, "set")},
    "frozenset": lambda d: frozenset(_decode_node(x) for x in as_array(d, "frozenset")),
    "dict": _decode_pairs,
    "complex": _decode_complex,
    **SCALAR_DECODERS,
}


def _dump(value: Any, warn: Literal["error", "none"], exclude: set[str] | None) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", warnings=warn, exclude=exclude)
    return adapter(type(value)).dump_python(  # type: ignore[arg-type]  # classes are hashable
        value, mode="json", warnings=warn, exclude=exclude
    )


def _dump_structured(value: Any, exclude: set[str] | None) -> Any:
    """The JSON form pydantic gives a model or dataclass instance.

    pydantic warns when a field holds a value of another type than declared
    (assigned without validation), quoting the value; that warning would put
    it in logs, so it is replaced by one naming only the type.
    """
    tp = type(value)
    try:
        try:
            return _dump(value, "error", exclude)
        except PydanticSerializationError as e:
            if not str(e).startswith("Pydantic serializer warnings"):
                raise
        data = _dump(value, "none", exclude)
    except Exception as e:  # pydantic raises several types here
        raise Refused(value, f"pydantic cannot serialize it: {e}") from e
    warnings.warn(
        f"{_WHAT.get()} of type {tp.__qualname__} has a field holding a value of another type than declared (assigned "
        "without validation); it was serialized as it is and may not decode",
        stacklevel=5,
    )
    return data


# -- encoding -------------------------------------------------------------------------------------------


_WHAT: contextvars.ContextVar[str] = contextvars.ContextVar("temporal_workflows_encoding", default="value")
"""What ``encode`` is encoding (``"state key 'k' written by executor 'a'"``), for ``_dump_structured``'s warning."""


class _NotPlain(Exception):
    """Raised inside :func:`_plain` at the first value plain JSON cannot carry as it is."""


def _plain(v: Any) -> Any:
    """A copy of ``v`` if it is plain JSON (exact types: a str subclass such as a StrEnum is not)."""
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        if math.isfinite(v):
            return v
        raise _NotPlain
    if t is list:
        return [_plain(x) for x in v]
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _NotPlain
            out[k] = _plain(x)
        return out
    raise _NotPlain


def _node(v: Any) -> Any:
    """The JSON form of ``v`` inside a value: plain where plain JSON keeps its type, else ``{"$<tag>": data}``."""
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$float": "nan" if v != v else "inf" if v > 0 else "-inf"}
    if t is list:
        return [_node(x) for x in v]
    if t is dict:
        if all(type(k) is str for k in v) and not (len(v) == 1 and next(iter(v)).startswith("$")):
            return {k: _node(x) for k, x in v.items()}
        return {"$dict": _pairs(v)}  # non-str keys, or a one-member object that would read as a tag
    encoder = _ENCODERS.get(t)
    if encoder is None:
        encoder = _encoder_for(t)
    return encoder(v)


_ENCODERS: dict[type, Callable[[Any], Any]] = dict(_BUILTIN_ENCODERS)


def _encoder_for(t: type) -> Callable[[Any], Any]:
    """How values of class ``t`` are tagged (cached per class); a class that cannot be stored gets a refusal."""
    encoder = None if t.__module__ in ("uuid", "pathlib") else _class_encoder(t)
    if encoder is None:
        encoder = _fallback_encoder(t)
    _ENCODERS[t] = encoder
    return encoder


def _class_encoder(t: type) -> Callable[[Any], Any] | None:
    kind: Kind | None = class_kind(t)
    if kind is None:
        return None
    registered(t)
    tag = "$" + type_key(t)
    if kind == "enum":
        return lambda v: {tag: _node(v.value)}
    if kind == "namedtuple":
        return lambda v: {tag: [_node(x) for x in v]}
    if kind == "plain":
        return _plain_encoder(t, tag)
    if kind == "value":
        value_adapter = adapter(t)
        return lambda v: {tag: value_adapter.dump_python(v, mode="json")}
    plan = plan_of(t)
    if plan.fields:
        names = [f.name for f in dataclasses.fields(t) if f.init]
        return lambda v: {tag: {n: _node(getattr(v, n)) for n in names}}
    if not plan.open and not plan.floats:
        return lambda v: {tag: _dump_structured(v, None)}
    exclude = {name for name, _ in plan.open} or None

    def encode_open(v: Any) -> Any:
        data = _dump_structured(v, exclude)
        for name, key in plan.open:
            data[key] = _node(getattr(v, name))
        for name, key in plan.floats:
            x = getattr(v, name)
            if type(x) is float and not math.isfinite(x):
                data[key] = _node(x)
        return {tag: data}

    return encode_open


def _plain_encoder(t: type, tag: str) -> Callable[[Any], Any]:
    """A plain class's instance as its attributes; how it is rebuilt (by ``__init__`` or not) is the decoder's."""

    def encode_plain(v: Any) -> Any:
        attrs = getattr(v, "__dict__", None)
        if not isinstance(attrs, dict):
            raise Refused(v, "its instances keep no attributes in a __dict__")
        if not all(type(k) is str for k in attrs):
            raise Refused(v, "its __dict__ has keys that are not strings")
        return {tag: {k: _node(x) for k, x in attrs.items()}}

    return encode_plain


def _as(base: type) -> Callable[[Any], Any]:
    return lambda v: _node(base(v))


def _fallback_encoder(t: type) -> Callable[[Any], Any]:
    """Standard types found by module, subclasses of the built-in ones, and refusals."""
    if is_std(t, "uuid", "UUID"):
        return lambda v: {"$uuid": str(v)}
    if is_std(t, "pathlib", "Path"):
        return lambda v: {"$path": str(v)}
    for base in (datetime, date, time, timedelta, Decimal, tuple, set, frozenset, bytes, bytearray):
        if issubclass(t, base):  # a subclass of a standard type is stored as that type (as json.dumps would)
            return _BUILTIN_ENCODERS[base]
    if issubclass(t, bool):
        return bool
    for scalar in (str, int, float):
        if issubclass(t, scalar):
            return _as(scalar)
    if issubclass(t, list):
        return lambda v: _node(list(v))
    if issubclass(t, dict):
        return lambda v: _node(dict(v))
    reason = why_not(t)

    def refuse(v: Any) -> Any:
        raise Refused(v, reason)

    return refuse


def _is_tag(node: Any) -> bool:
    return type(node) is dict and len(node) == 1 and next(iter(node)).startswith("$")


def _one_tag(nodes: list[Any]) -> str | None:
    """The tag every node has, if they all have the same one (then only their data need be stored)."""
    if not nodes or not _is_tag(nodes[0]):
        return None
    (tag,) = nodes[0]
    return tag if all(type(n) is dict and len(n) == 1 and tag in n for n in nodes) else None


def encode(value: Any, *, what: str = "value") -> Envelope:
    """Turn a user value into an envelope, or fail naming ``what`` it was (and where in it the culprit is).

    Raises:
        NotSerializableError: Something in ``value`` cannot round-trip through
            JSON (an open file, a lock, a function, an instance without a
            ``__dict__``, ...), naming its type and path.
    """
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return Envelope(None, value)
    if t is list or t is dict or t is float:
        try:
            return Envelope(None, _plain(value))
        except _NotPlain:
            pass
        except RecursionError:
            raise NotSerializableError(f"{what} is nested too deeply") from None
    token = _WHAT.set(what)
    try:
        if t is list:
            nodes = [_node(x) for x in value]
            tag = _one_tag(nodes)
            return Envelope(f"list[{tag[1:]}]", [n[tag] for n in nodes]) if tag else Envelope("list[*]", nodes)
        if t is dict:
            if not all(type(k) is str for k in value):
                return Envelope("dict", _pairs(value))
            values = {k: _node(x) for k, x in value.items()}
            tag = _one_tag(list(values.values()))
            if tag:
                return Envelope(f"dict[{tag[1:]}]", {k: n[tag] for k, n in values.items()})
            return Envelope("dict[*]", values)
        node = _node(value)
    except Refused as e:
        raise refusal(value, e, what) from None
    except RecursionError:
        raise NotSerializableError(f"{what} contains itself (a reference cycle) or is nested too deeply") from None
    finally:
        _WHAT.reset(token)
    if _is_tag(node):
        ((tag, data),) = node.items()
        return Envelope(tag[1:], data)
    if type(node) is list or type(node) is dict:  # a subclass of list or dict, stored as one
        return encode(list(value) if type(node) is list else dict(value), what=what)
    return Envelope(None, node)


def node_envelope(node: Any, type_hint: str | None = None) -> Envelope:
    """The envelope of a value stored inside another one's JSON (a field of type ``Any``, say), without decoding it.

    ``{"$<tag>": data}`` is a value of that tag; a list or object holding such
    nodes keeps them (``list[*]`` / ``dict[*]``); anything else is plain JSON, of
    ``type_hint`` when the enclosing value names its type (as stored before tags).
    """
    if _is_tag(node):
        ((tag, data),) = node.items()
        return Envelope(tag[1:], data)
    if _has_tag(node):
        return Envelope("list[*]" if type(node) is list else "dict[*]", node)
    return Envelope(type_hint, node)


def _has_tag(node: Any) -> bool:
    if type(node) is list:
        return any(_is_tag(n) or _has_tag(n) for n in node)
    if type(node) is dict:
        return any(_is_tag(n) or _has_tag(n) for n in node.values())
    return False


# -- decoding -------------------------------------------------------------------------------------------


def _json_copy(value: Any) -> Any:
    """A fresh copy of plain JSON data (what an untyped envelope holds)."""
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    return value


def _decode_node(n: Any) -> Any:
    t = type(n)
    if t is list:
        return [_decode_node(x) for x in n]
    if t is dict:
        if len(n) == 1:
            ((k, data),) = n.items()
            if type(k) is str and k.startswith("$"):
                return _decoder(k[1:])(data)
        return {k: _decode_node(x) for k, x in n.items()}
    return n


_CLASS_DECODERS: dict[type, Callable[[Any], Any]] = {}


def _decoder(tag: str) -> Callable[[Any], Any]:
    """The function that rebuilds a value stored under ``tag`` from its data, failing as ``NotSerializableError``.

    A class is looked up in the registry on every call (a dict read), so a
    class registered again under its key is the one built from then on.
    """
    found = _WRAPPED_BUILTINS.get(tag)
    if found is not None:
        return found
    tp = resolve(tag)  # raises for anything not declared, registered or encoded here
    found = _CLASS_DECODERS.get(tp)
    if found is None:
        found = _CLASS_DECODERS[tp] = _guarded(tag, _class_decoder(tp, class_kind(tp)))
    return found


def _guarded(tag: str, build: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``build``, with whatever it raises turned into ``NotSerializableError`` naming ``tag`` but not the data."""

    def decode_tagged(data: Any) -> Any:
        try:
            return build(data)
        except NotSerializableError:
            raise
        except ValidationError as e:
            raise NotSerializableError(f"cannot decode a value of type {tag!r}: {validation_message(e)}") from None
        except RecursionError:
            raise NotSerializableError(f"cannot decode a value of type {tag!r}: it is nested too deeply") from None
        except BadData as e:
            raise NotSerializableError(f"cannot decode a value of type {tag!r}: {e}") from None
        except Exception as e:  # a user's constructor, say: its message may quote the value, so only its class
            raise NotSerializableError(f"cannot decode a value of type {tag!r}: {type(e).__name__}") from None

    return decode_tagged


_WRAPPED_BUILTINS = {tag: _guarded(tag, build) for tag, build in _BUILTIN_DECODERS.items()}


def _class_decoder(tp: type, kind: Kind | None) -> Callable[[Any], Any]:
    if kind == "enum":
        return lambda d: _enum_member(tp, _decode_node(d))
    if kind == "namedtuple":
        return lambda d: tp(*(_decode_node(x) for x in as_array(d, tp.__qualname__)))
    if kind == "plain":
        return _plain_decoder(tp)
    if kind == "value":
        value_adapter = adapter(tp)
        return lambda d: value_adapter.validate_python(d)
    if kind not in ("model", "dataclass"):
        raise NotSerializableError(f"cannot decode a value of type {type_key(tp)!r}: the type is not storable")
    plan = plan_of(tp)
    if plan.fields:
        return lambda d: tp(**{k: _decode_node(x) for k, x in _object(d, tp).items()})
    validate = _validator(tp)
    if not plan.open and not plan.floats:
        return lambda d: validate(d, strict=False, by_alias=True, by_name=True)
    open_keys = [key for _, key in plan.open]
    float_keys = [key for _, key in plan.floats]

    def decode_open(d: Any) -> Any:
        if type(d) is dict:
            copy = None  # the stored data is never changed: tagged fields are read into a copy
            for key in open_keys:
                if key in d:
                    copy = copy or dict(d)
                    copy[key] = _decode_node(d[key])
            for key in float_keys:
                x = d.get(key)
                if type(x) is dict:
                    copy = copy or dict(d)
                    copy[key] = _decode_node(x)
            if copy is not None:
                d = copy
        return validate(d, strict=False, by_alias=True, by_name=True)

    return decode_open


def _validator(tp: type) -> Callable[..., Any]:
    if issubclass(tp, BaseModel):
        return tp.model_validate
    return adapter(tp).validate_python  # type: ignore[arg-type]  # classes are hashable


def _object(data: Any, tp: type) -> dict[str, Any]:
    if type(data) is not dict:
        raise BadData(f"a {tp.__qualname__} is stored as a JSON object")
    return data


def _enum_member(tp: type, value: Any) -> Any:
    try:
        return tp(value)
    except ValueError:
        raise BadData(f"no member of {tp.__qualname__} has this value") from None


def _plain_decoder(tp: type) -> Callable[[Any], Any]:
    sig = plain_signature(tp)
    assert isinstance(sig, PlainSignature)

    def decode_plain(data: Any) -> Any:
        attrs = _object(data, tp)
        values = {k: _decode_node(x) for k, x in attrs.items()}
        if sig.takes(attrs.keys()):
            return tp(**values)
        if any(k.startswith("__") and k.endswith("__") for k in attrs):
            raise BadData("a stored attribute has a special (dunder) name")  # never an instance attribute we store
        # As copy.copy rebuilds it: no __init__ (it would not take these attributes), nothing else of the class run.
        instance: Any = object.__new__(tp)
        vars(instance).update(values)
        return instance

    return decode_plain


def decode(envelope: Envelope) -> Any:
    """Restore the value an envelope holds, as a fresh object the caller may mutate.

    Raises:
        NotSerializableError: The envelope names a type this process may not
            build (see the module docstring), or its data does not fit it;
            the message names the type, never the value.
    """
    t = envelope.type
    data = envelope.data
    if t is None:
        return data if data is None or isinstance(data, (str, int, float)) else _json_copy(data)
    if t.endswith("]"):
        if t.startswith("list["):
            inner = t[5:-1]
            items = _array_of(data, t)
            if inner == "*":
                return [_decode_node(d) for d in items]
            one = _decoder(inner)
            return [one(d) for d in items]
        if t.startswith("dict["):
            inner = t[5:-1]
            if type(data) is not dict:
                raise NotSerializableError(f"cannot decode a value of type {t!r}: it is stored as a JSON object")
            if inner == "*":
                return {k: _decode_node(d) for k, d in data.items()}
            one = _decoder(inner)
            return {k: one(d) for k, d in data.items()}
    try:
        return _decoder(t)(data)
    except RecursionError:
        raise NotSerializableError(f"cannot decode a value of type {t!r}: it is nested too deeply") from None


def _array_of(data: Any, t: str) -> list[Any]:
    if type(data) is not list:
        raise NotSerializableError(f"cannot decode a value of type {t!r}: it is stored as a JSON array")
    return data


# -- validation -------------------------------------------------------------------------------------------


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
            return adapter(tp).validate_json(json.dumps(value), strict=True)
        return adapter(tp).validate_python(value)
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
        return adapter(tp).json_schema()
    except Exception:
        return {}
