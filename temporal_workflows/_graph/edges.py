"""Edge groups: how a sent message chooses its targets.

Routing runs in the sending step (in process, or inside its Temporal
activity), because conditions and selection functions are user code and the
workflow runs none. The step hands the engine already-routed messages (``RoutedMessage``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from temporal_workflows._errors import WorkflowError

if TYPE_CHECKING:
    pass

__all__ = ["Case", "Default", "EdgeGroup", "EdgeKind", "label_of"]

EdgeKind = Literal["single", "fan_out", "fan_in", "switch_case", "multi_selection"]


@dataclass(frozen=True)
class Case:
    """A branch of a switch-case edge group: taken when ``condition(message)`` is true."""

    condition: Callable[[Any], bool]
    target: Any  # Executor | str


@dataclass(frozen=True)
class Default:
    """The branch of a switch-case edge group taken when no ``Case`` matches."""

    target: Any  # Executor | str


def label_of(fn: Callable[..., Any] | None) -> str | None:
    """A readable label for a condition in graph exports."""
    if fn is None:
        return None
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "condition" if name == "<lambda>" else name


@dataclass
class EdgeGroup:
    """One call to an ``add_*`` method of the builder.

    Attributes:
        id: Stable id (``"<kind>:<sources>-><targets>"``), used for fan-in buffers.
        kind: The routing rule.
        sources / targets: Executor ids.
        condition: For ``single`` edges.
        cases: For ``switch_case``: ``(condition, target)``; ``None`` condition is the default.
        selection: For ``multi_selection``: ``selection(message, target_ids) -> ids``.
    """

    id: str
    kind: EdgeKind
    sources: list[str]
    targets: list[str]
    condition: Callable[[Any], Any] | None = None
    cases: list[tuple[Callable[[Any], Any] | None, str]] = field(default_factory=list)
    selection: Callable[[Any, list[str]], Sequence[str]] | None = None

    def candidates(self, message: Any) -> list[str]:
        """The targets this group routes ``message`` to, before type filtering."""
        if self.kind == "single":
            if self.condition is None or _truthy(self.condition, message, self.id):
                return list(self.targets)
            return []
        if self.kind in ("fan_out", "fan_in"):
            return list(self.targets)
        if self.kind == "switch_case":
            for cond, target in self.cases:
                if cond is None or _truthy(cond, message, self.id):
                    return [target]
            return []
        if self.kind == "multi_selection":
            assert self.selection is not None
            chosen = self.selection(message, list(self.targets))
            if inspect.isawaitable(chosen):
                raise WorkflowError(f"selection function of edge group {self.id!r} must be synchronous")
            chosen = list(chosen)
            unknown = [c for c in chosen if c not in self.targets]
            if unknown:
                raise WorkflowError(
                    f"selection function of edge group {self.id!r} chose {unknown}, "
                    f"which are not among its targets {self.targets}"
                )
            return [t for t in self.targets if t in chosen]
        raise WorkflowError(f"unknown edge kind {self.kind!r}")

    def describe(self) -> dict[str, Any]:
        """Pure-data form for the topology, signature and graph exports."""
        d: dict[str, Any] = {"id": self.id, "kind": self.kind, "sources": self.sources, "targets": self.targets}
        if self.kind == "single" and self.condition is not None:
            d["label"] = label_of(self.condition)
        if self.kind == "switch_case":
            d["labels"] = [label_of(c) if c is not None else "default" for c, _ in self.cases]
        if self.kind == "multi_selection":
            d["label"] = label_of(self.selection)
        return d


def _truthy(cond: Callable[[Any], Any], message: Any, group_id: str) -> bool:
    result = cond(message)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise WorkflowError(f"edge condition of {group_id!r} must be synchronous, not a coroutine function")
    return bool(result)
