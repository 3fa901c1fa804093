"""The standard types JSON has no form for, stored as tagged strings: datetimes, UUIDs, decimals, bytes, ...

Each has a fixed tag and a text form that round-trips exactly (ISO 8601 for
times, with an IANA zone name appended as RFC 9557 does; base64 for bytes;
``str`` for decimals, UUIDs and paths). Decoding reads only the data it is
given: nothing here imports a module or quotes the data in an error.
"""

from __future__ import annotations

import base64
import sys
import types
import typing
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from temporal_workflows._engine.plans import adapter
from temporal_workflows._engine.refusals import BadData

__all__ = ["SCALAR_DECODERS", "SCALAR_ENCODERS", "as_array", "as_text", "tagged"]


def _datetime_text(v: datetime) -> str:
    """ISO 8601, with an IANA zone name appended (RFC 9557) when the datetime carries one."""
    text = v.isoformat()
    tz = v.tzinfo
    if isinstance(tz, ZoneInfo) and tz.key is not None:
        return f"{text}[{tz.key}]"
    return text


def _timedelta_text(v: timedelta) -> str:
    return str(adapter(timedelta).dump_python(v, mode="json"))


def _stdlib_class(module: str, name: str) -> type:
    """A class of a standard module read from the loaded module, never importing it.

    The engine package imports no ``uuid`` or ``pathlib`` (it is workflow code
    on Temporal: nothing in it may draw random ids or touch files); decoding
    only *builds* UUIDs and paths, whose modules pydantic has already loaded.
    """
    mod = sys.modules.get(module)
    found = vars(mod).get(name) if isinstance(mod, types.ModuleType) else None
    if not isinstance(found, type):
        raise BadData(f"the {module} module is not loaded in this process")
    return found


def as_text(data: Any, what: str) -> str:
    if type(data) is not str:
        raise BadData(f"a {what} is stored as a JSON string")
    return data


def as_array(data: Any, what: str) -> list[Any]:
    if type(data) is not list:
        raise BadData(f"a {what} is stored as a JSON array")
    return data


def _decode_datetime(data: Any) -> datetime:
    text = as_text(data, "datetime")
    zone = None
    if text.endswith("]"):
        text, _, zone = text[:-1].partition("[")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise BadData("not an ISO 8601 datetime") from None
    if zone is not None:
        if value.tzinfo is None:
            raise BadData("a datetime with a zone name needs a UTC offset")
        try:
            value = value.astimezone(ZoneInfo(zone))
        except Exception:
            raise BadData("unknown time zone name") from None
    return value


def _iso(parse: Callable[[str], Any], what: str) -> Callable[[Any], Any]:
    def decode_iso(data: Any) -> Any:
        text = as_text(data, what)
        try:
            return parse(text)
        except ValueError:
            raise BadData(f"not an ISO 8601 {what}") from None

    return decode_iso


def _decode_bytes(data: Any) -> bytes:
    text = as_text(data, "bytes value")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise BadData("not base64") from None


def _decode_timedelta(data: Any) -> timedelta:
    try:
        return typing.cast(timedelta, adapter(timedelta).validate_python(data))
    except ValidationError:
        raise BadData("not an ISO 8601 duration or a number of seconds") from None


def _decode_decimal(data: Any) -> Decimal:
    try:
        return Decimal(as_text(data, "Decimal"))
    except InvalidOperation:
        raise BadData("not a decimal number") from None


def _decode_float(data: Any) -> float:
    if data not in ("nan", "inf", "-inf"):
        raise BadData("a non-finite float is stored as 'nan', 'inf' or '-inf'")
    return float(data)


def tagged(tag: str, data: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An encoder giving the node ``{"$<tag>": data(value)}``."""
    key = "$" + tag
    return lambda v: {key: data(v)}


def _b64(v: bytes | bytearray) -> str:
    return base64.b64encode(v).decode("ascii")


SCALAR_ENCODERS: dict[type, tuple[str, Callable[[Any], Any]]] = {
    bytes: ("bytes", _b64),
    bytearray: ("bytearray", _b64),
    datetime: ("datetime", _datetime_text),
    date: ("date", date.isoformat),
    time: ("time", time.isoformat),
    timedelta: ("timedelta", _timedelta_text),
    Decimal: ("decimal", str),
}
"""Class → (tag, its data) for the standard types found by class (UUID and Path are found by module)."""

SCALAR_DECODERS: dict[str, Callable[[Any], Any]] = {
    "bytes": _decode_bytes,
    "bytearray": lambda d: bytearray(_decode_bytes(d)),
    "datetime": _decode_datetime,
    "date": _iso(date.fromisoformat, "date"),
    "time": _iso(time.fromisoformat, "time"),
    "timedelta": _decode_timedelta,
    "decimal": _decode_decimal,
    "uuid": lambda d: _stdlib_class("uuid", "UUID")(as_text(d, "UUID")),
    "path": lambda d: _stdlib_class("pathlib", "Path")(as_text(d, "path")),
    "float": _decode_float,
}
