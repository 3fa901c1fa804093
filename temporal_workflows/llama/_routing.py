"""Where an event goes in a LlamaIndex run: the front end's routing policy, written once.

LlamaIndex routes every event the same way, whoever sent it (a step's
``ctx.send_event`` or return value, or ``handler.ctx.send_event`` from
outside): it first answers every ``wait_for_event`` the event matches (its
class, and the field values the waiter requires), then delivers it to each
step that accepts it and was not woken by one of those waits; an event that
nothing took is published as an ``UnhandledEvent`` (not for an
``InputRequiredEvent``, which is meant for a human).

This module is that rule, used by every caller: a step's sends
(``_invocations.Invocation.emit``, matching the waits committed in state), outside
events in process (``_local.LlamaLocalRun.drain``) and on Temporal (the ``route``
activity the workflow calls at a boundary, matching the run's pending
requests). A wait is seen the same way from both sources (:class:`Wait`), so
there is one matching function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporal_workflows.llama.events import Event, InputRequiredEvent, UnhandledEvent

if TYPE_CHECKING:
    from temporal_workflows.llama._compile import Compiled

__all__ = ["Route", "Wait", "matching_waits", "route_event", "unhandled", "waits_of_records"]


@dataclass(frozen=True, slots=True)
class Wait:
    """A pending ``wait_for_event`` as routing sees it.

    Attributes:
        request_id: The pending request that stands for the wait.
        step: The waiting step.
        event_type: ``"module:Class"`` of the awaited event.
        requirements: Field values the event must have.
    """

    request_id: str
    step: str
    event_type: str
    requirements: Mapping[str, Any]


def waits_of_records(records: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Wait]:
    """The waits recorded in committed state (what a running step sees: ``_runtime.waiter_records``)."""
    return [
        Wait(rid, str(r.get("step", "")), str(r.get("event_type", "")), r.get("requirements") or {})
        for rid, r in records
    ]


def matching_waits(compiled: Compiled, event: Event, waits: Iterable[Wait]) -> list[Wait]:
    """The waits ``event`` answers: of the awaited class (or a subclass, if the waiting step accepts
    subclasses) and with every required field value, in the order given."""
    out: list[Wait] = []
    for wait in waits:
        tp = compiled.event_class(wait.event_type)
        info = compiled.steps.get(wait.step)
        if tp is None or info is None:
            continue
        if not (isinstance(event, tp) if info.config.accept_event_subclasses else type(event) is tp):
            continue
        if all(getattr(event, k, None) == v for k, v in wait.requirements.items()):
            out.append(wait)
    return out


@dataclass(frozen=True, slots=True)
class Route:
    """Where one event goes.

    Attributes:
        answers: Request ids of the waits it answers, in the order given.
        targets: Steps it is delivered to (none of them woken by an answered wait).
        step: The step it was addressed to, if any.
    """

    answers: tuple[str, ...]
    targets: tuple[str, ...]
    step: str | None = None

    @property
    def handled(self) -> bool:
        return bool(self.answers or self.targets)


def route_event(compiled: Compiled, event: Event, waits: Iterable[Wait], step: str | None = None) -> Route:
    """Route ``event`` as LlamaIndex does: matching waits first, then the steps that accept it.

    ``step`` addresses one step (checked by the caller: it exists and
    accepts the event); waits are answered whoever the event is addressed to,
    as in LlamaIndex.
    """
    answered = matching_waits(compiled, event, waits)
    woken = {w.step for w in answered}
    targets = (step,) if step is not None else compiled.targets_for(event)
    return Route(tuple(w.request_id for w in answered), tuple(t for t in targets if t not in woken), step)


def unhandled(event: Event, step: str | None, *, idle: bool) -> UnhandledEvent | None:
    """The ``UnhandledEvent`` LlamaIndex publishes for an event nothing took (none for an ``InputRequiredEvent``)."""
    if isinstance(event, InputRequiredEvent):
        return None
    cls = type(event)
    return UnhandledEvent(
        event_type=cls.__name__, qualified_name=f"{cls.__module__}.{cls.__name__}", step_name=step, idle=idle
    )
