"""The JSON Patch (RFC 6902) from one committed state to the next, as ``STATE_DELTA`` carries it.

State commits at superstep boundaries key by key, so the patch is made per
top-level key: a new key is an ``add``, a removed one a ``remove``, a changed
one a ``replace`` of its value, except a list that only grew (a conversation
under an ``append`` reducer), which is ``add`` of the new items at its end, so
a long conversation is not sent again every superstep.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["json_patch", "pointer"]


def pointer(*parts: str | int) -> str:
    """A JSON Pointer (RFC 6901) to ``parts``: ``~`` and ``/`` escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (``True`` is not ``1`` there, as it is in Python)."""
    return a is b or json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def json_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Operations that turn ``before`` into ``after`` (both JSON objects); ``[]`` when they are equal."""
    ops: list[dict[str, Any]] = []
    for key in before:
        if key not in after:
            ops.append({"op": "remove", "path": pointer(key)})
    for key, value in after.items():
        if key not in before:
            ops.append({"op": "add", "path": pointer(key), "value": value})
            continue
        old = before[key]
        if _same(old, value):
            continue
        grown = isinstance(old, list) and isinstance(value, list) and len(value) > len(old)
        if grown and _same(value[: len(old)], old):
            ops.extend({"op": "add", "path": pointer(key, "-"), "value": item} for item in value[len(old) :])
        else:
            ops.append({"op": "replace", "path": pointer(key), "value": value})
    return ops
