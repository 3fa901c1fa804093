"""The Python objects of an in-process LlamaIndex run (its run objects), next to the JSON the engine keeps.

Events, results and state values keep their identity and type in process
(a tuple stays a tuple, an LLM client need not serialize): a run registers its
:class:`RunObjects`, and encoding keeps each value's Python object by its envelope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from temporal_workflows._engine.serde import Envelope, decode, encode
from temporal_workflows._errors import NotSerializableError
from temporal_workflows.llama._runtime import UNSERIALIZABLE
from temporal_workflows.llama.events import (
    Event,
)

if TYPE_CHECKING:
    from temporal_workflows.llama._invocations import Invocation

__all__ = [
    "RunObjects",
    "Parked",
    "decode_value",
    "encode_value",
    "event_json",
    "run_objects",
    "register_run_objects",
    "unregister_run_objects",
]


@dataclass
class Parked:
    """An invocation suspended in ``wait_for_event`` (in process)."""

    invocation: Invocation
    future: asyncio.Future[Any]
    task: asyncio.Task[Any]


@dataclass
class RunObjects:
    """The Python objects of one in-process run, by the envelopes that carry them."""

    values: dict[int, tuple[Envelope, Any]] = field(default_factory=dict)
    parked: dict[str, Parked] = field(default_factory=dict)
    publish: Callable[[Event], None] | None = None
    waiter_events: dict[str, Event] = field(default_factory=dict)
    """Waiter events to publish once their wait is committed, by request id."""
    """Hands a streamed event to the caller at once (the very object written), as LlamaIndex streams."""

    def put(self, env: Envelope, value: Any) -> None:
        self.values[id(env)] = (env, value)

    def get(self, env: Envelope) -> tuple[bool, Any]:
        found = self.values.get(id(env))
        if found is not None and found[0] is env:
            return True, found[1]
        return False, None

    def cancel_parked(self) -> None:
        for parked in self.parked.values():
            parked.task.cancel()
        self.parked.clear()


_RUN_OBJECTS: dict[str, RunObjects] = {}
"""In-process runs by run id (the in-process host registers its run here for the run's duration)."""


def run_objects(run_id: str) -> RunObjects | None:
    return _RUN_OBJECTS.get(run_id)


def register_run_objects(run_id: str, objects: RunObjects) -> None:
    _RUN_OBJECTS[run_id] = objects


def unregister_run_objects(run_id: str) -> None:
    objects = _RUN_OBJECTS.pop(run_id, None)
    if objects is not None:
        objects.cancel_parked()


def encode_value(value: Any, objects: RunObjects | None, what: str) -> Envelope:
    """``value`` as an envelope; in process an unserializable value is kept as an in-process object only."""
    try:
        env = encode(value, what=what)
    except NotSerializableError:
        if objects is None:
            raise
        env = Envelope(UNSERIALIZABLE, {"type": f"{type(value).__module__}.{type(value).__qualname__}"})
    if objects is not None:
        objects.put(env, value)
    return env


def decode_value(env: Envelope, objects: RunObjects | None) -> Any:
    """The value an envelope carries: the in-process object if there is one."""
    if objects is not None:
        found, value = objects.get(env)
        if found:
            return value
    if env.type == UNSERIALIZABLE:
        from temporal_workflows.llama.errors import ContextSerdeError

        raise ContextSerdeError(
            f"a value of type {env.data.get('type') if isinstance(env.data, dict) else '?'} was kept only as a "
            "Python object in the process that ran the step (it has no JSON form), and that object is gone"
        )
    return decode(env)


def event_json(event: Event, objects: RunObjects | None, what: str) -> dict[str, Any]:
    return encode_value(event, objects, what).to_json()


# -- a step task -------------------------------------------------------------------------------------------------
