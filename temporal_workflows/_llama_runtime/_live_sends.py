"""A running step's live sends, as the run sees them (``PATCH_LIVE_SENDS``): pure, deterministic workflow code.

A step activity signals its ``ctx.send_event`` calls while it runs, each flush with the store patch of
everything the step has written so far (from the store it started with). The run keeps, per invocation,
the step's store as the last flush showed it, and applies to the run's store only the change from that
view to the new one. So:

* a step started by a live send reads the sender's writes made before it, as under the default runtime;
* the step's result carries its whole patch, as it always did; the run applies what no flush brought;
* a retried attempt (a worker lost mid-step) re-sends from the same start: its flushes and result move
  the store from the last view to its own, never applying a write twice, and each emission index is
  delivered once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workflows.context.state_store import apply_state_patch

__all__ = ["LiveSends", "apply_leniently", "json_diff"]


@dataclasses.dataclass
class LiveSends:
    """One running invocation whose sends come live: the store it started from, and its last view."""

    base: dict[str, Any] | None
    """The store the step's activity started from (its patches are from this)."""
    seen: dict[str, Any] | None = None
    """The step's store as the last flush the run took showed it (``None``: no flush yet)."""
    indices: set[int] = dataclasses.field(default_factory=set)
    """Emission indices already delivered live (the step's result skips them)."""

    def take(self, patch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The change to make to the run's store for a step view ``base + patch``: what moved since the
        view the run last took (the whole patch the first time)."""
        if self.base is None:
            return []
        target = apply_state_patch(self.base, patch)
        delta = json_diff(self.base if self.seen is None else self.seen, target)
        self.seen = target
        return delta


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_diff(a: Any, b: Any, path: str = "") -> list[dict[str, Any]]:
    """A JSON Patch from ``a`` to ``b`` (JSON values): objects key by key (insertion order, so a replay
    builds the same ops), anything else replaced whole when it differs (``1`` and ``1.0`` and ``True``
    differ: the store keeps Python types)."""
    if a is b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        ops: list[dict[str, Any]] = []
        for key, value in b.items():
            child = f"{path}/{_escape(str(key))}"
            if key in a:
                ops.extend(json_diff(a[key], value, child))
            else:
                ops.append({"op": "add", "path": child, "value": value})
        for key in a:
            if key not in b:
                ops.append({"op": "remove", "path": f"{path}/{_escape(str(key))}"})
        return ops
    if type(a) is type(b) and a == b:
        return []
    return [{"op": "replace", "path": path, "value": b}]


def apply_leniently(store: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """``apply_state_patch``, skipping an op whose path another writer removed meanwhile (two steps
    writing one key: the last to land wins, as documented) instead of failing the run."""
    try:
        return apply_state_patch(store, ops)
    except Exception:
        for op in ops:
            try:
                store = apply_state_patch(store, [op])
            except Exception:
                continue
        return store
