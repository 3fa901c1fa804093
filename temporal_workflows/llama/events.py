"""LlamaIndex's event classes, with the same names and behaviour as ``workflows.events``.

Events are pydantic models whose undeclared keyword arguments land in a
private dict (``ev.topic``, ``ev.get("topic")``, ``ev["topic"]``), exactly as
in LlamaIndex, so ``print(ev)`` and ``repr(ev)`` read the same. What differs is
only their JSON form, which this engine needs for every event that crosses a
superstep (and every Temporal payload): undeclared keys are written next to
the declared fields (``{"topic": "pirates"}``, what a ``temporal`` CLI user
types), and a ``StopEvent``'s ``result`` keeps its model or dataclass type
(``"result_type"``) so a Temporal client gets the object back, not a dict.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import to_jsonable_python

from temporal_workflows._engine.serde import Envelope, decode, encode, register_type

__all__ = [
    "CollectionReleaseEvent",
    "DictLikeModel",
    "Event",
    "EventType",
    "HumanResponseEvent",
    "IdleReleasedEvent",
    "InputRequiredEvent",
    "InternalDispatchEvent",
    "SerializableEvent",
    "SerializableException",
    "StartEvent",
    "StepFailedEvent",
    "StepState",
    "StepStateChanged",
    "StopEvent",
    "UnhandledEvent",
    "UnreconstructedException",
    "WorkflowCancelledEvent",
    "WorkflowFailedEvent",
    "WorkflowIdleEvent",
    "WorkflowTimedOutEvent",
]

_DATA_KEY = "_data"


class DictLikeModel(BaseModel):
    """A pydantic model that also keeps undeclared keys, readable as attributes and as a mapping.

    Declared fields behave as usual; any other keyword argument is kept in a
    private dict (``_data``), so ``StartEvent(topic="x").topic`` works, as in
    LlamaIndex.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _data: dict[str, Any] = PrivateAttr(default_factory=dict)
    _JSON_PRIVATE: ClassVar[dict[str, str]] = {}
    """Private attributes written to (and read from) JSON under a public key (``StopEvent``: ``result``)."""

    def __init__(self, **params: Any) -> None:
        fields: dict[str, Any] = {}
        private: dict[str, Any] = {}
        data: dict[str, Any] = {}
        declared = type(self).model_fields
        for k, v in params.items():
            if k in declared:
                fields[k] = v
            elif k in self.__private_attributes__:
                private[k] = v
            else:
                data[k] = v
        super().__init__(**fields)
        for k, v in private.items():
            super().__setattr__(k, v)
        if data:
            self._data.update(data)

    @model_validator(mode="wrap")
    @classmethod
    def _read_json(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Validate the JSON form: undeclared keys (and a LlamaIndex-style ``_data`` dict) become ``_data``."""
        if not isinstance(value, dict):
            return handler(value)
        declared = cls.model_fields
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        private: dict[str, Any] = {}
        for k, v in value.items():
            if k in declared:
                known[k] = v
            elif k == _DATA_KEY and isinstance(v, dict):
                extra.update(v)
            elif k in cls._JSON_PRIVATE:
                private[cls._JSON_PRIVATE[k]] = v
            else:
                extra[k] = v
        instance = handler(known)
        if extra:
            instance._data.update(extra)
        for name, v in private.items():
            instance._set_private_from_json(name, v, value)
        return instance

    def _set_private_from_json(self, name: str, value: Any, raw: dict[str, Any]) -> None:
        object.__setattr__(self, "__pydantic_private__", {**(self.__pydantic_private__ or {}), name: value})

    @model_serializer(mode="wrap")
    def _write_json(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self._data:
            return data
        if not info.mode_is_json():
            data[_DATA_KEY] = self._data  # LlamaIndex's Python form
            return data
        for k, v in self._data.items():  # JSON: next to the declared fields, as a CLI user writes them
            if k not in data:
                data[k] = to_jsonable_python(v)
        return data

    def __getattr__(self, name: str) -> Any:
        if name in self.__private_attributes__ or name in type(self).model_fields:
            return super().__getattr__(name)  # type: ignore[misc]
        data = self.__pydantic_private__.get("_data") if self.__pydantic_private__ else None
        if data is None or name not in data:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return data[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__private_attributes__ or name in type(self).model_fields:
            super().__setattr__(name, value)
        else:
            self._data[name] = value

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        """An undeclared key's value, or ``default``."""
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def keys(self) -> Any:
        return self._data.keys()

    def values(self) -> Any:
        return self._data.values()

    def items(self) -> Any:
        return self._data.items()

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Any:  # type: ignore[override]
        return iter(self._data)

    def to_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The undeclared keys (as LlamaIndex's ``to_dict`` returns them)."""
        return self._data

    def __bool__(self) -> bool:
        """An event is always truthy (``if event:``), even with no undeclared keys."""
        return True


class Event(DictLikeModel):
    """Base class of every workflow event: a typed, serializable payload routed by its class."""


class StartEvent(Event):
    """The event ``Workflow.run(**kwargs)`` starts a run with (its keyword arguments become its keys)."""


class StopEvent(Event):
    """Ends the run; its ``result`` is what awaiting the run returns (a subclass: the event itself)."""

    _result: Any = PrivateAttr(default=None)
    _JSON_PRIVATE: ClassVar[dict[str, str]] = {"result": "_result"}

    def __init__(self, result: Any = None, **kwargs: Any) -> None:
        super().__init__(_result=result, **kwargs)

    def _set_private_from_json(self, name: str, value: Any, raw: dict[str, Any]) -> None:
        result_type = raw.get("result_type")
        if name == "_result" and isinstance(result_type, str):
            value = decode(Envelope(result_type, value))
        super()._set_private_from_json(name, value, raw)

    def _get_result(self) -> Any:
        """The run's result; subclasses may override it."""
        return self._result

    @property
    def result(self) -> Any:
        return self._get_result()

    @model_serializer(mode="wrap")
    def _write_json(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for k, v in self._data.items():
            if k not in data:
                data[k] = to_jsonable_python(v) if info.mode_is_json() else v
        if self._result is not None:
            if info.mode_is_json():
                env = encode(self._result, what="the StopEvent's result")
                data["result"] = env.data
                if env.type is not None:
                    data["result_type"] = env.type
            else:
                data["result"] = self._result
        return data

    def __repr__(self) -> str:
        items: dict[str, Any] = dict(self._data)
        items.update({k: getattr(self, k) for k in type(self).model_fields})
        if self._result is not None:
            items["result"] = self._result
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in items.items())})"

    def __str__(self) -> str:
        return str(self._result)


class InputRequiredEvent(Event):
    """Asks the caller for input; written to the event stream when a step returns it.

    Answer with a :class:`HumanResponseEvent` (``handler.ctx.send_event(...)``
    in process, ``await run.send_event(...)`` on Temporal).
    """


class HumanResponseEvent(Event):
    """A human's answer to an :class:`InputRequiredEvent`, sent into the run from outside."""


def _event_json(event: Event) -> dict[str, Any]:
    return encode(event, what="event").to_json()


def _event_from_json(value: Any) -> Event:
    if isinstance(value, Event):
        return value
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        event = decode(Envelope.from_json(value))
        if isinstance(event, Event):
            return event
    raise ValueError("expected an event as {'type': 'module:Class', 'data': {...}}")


SerializableEvent = Annotated[
    Event, PlainSerializer(_event_json, return_type=dict[str, Any]), PlainValidator(_event_from_json)
]
"""An event field of another event (``StepFailedEvent.input_event``): JSON keeps the event's class."""


class UnreconstructedException(Exception):
    """An exception read back from JSON whose class this process cannot (or may not) rebuild.

    ``str(exc)`` is the original message; ``original_type`` names its class.
    """

    def __init__(self, message: str, *, original_type: str | None = None) -> None:
        super().__init__(message)
        self.original_type = original_type


def _exception_json(exc: BaseException) -> dict[str, str]:
    return {"exception_type": f"{type(exc).__module__}.{type(exc).__qualname__}", "exception_message": str(exc)}


def _exception_from_json(value: Any) -> BaseException:
    if isinstance(value, BaseException):
        return value
    if not isinstance(value, dict):
        raise ValueError("expected an exception as {'exception_type': ..., 'exception_message': ...}")
    name = str(value.get("exception_type", ""))
    message = str(value.get("exception_message", ""))
    # Only builtin exception classes are rebuilt: a name from a payload never imports anything.
    if name.startswith("builtins."):
        cls = getattr(builtins, name.removeprefix("builtins."), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(message)
            except Exception:
                pass
    return UnreconstructedException(message, original_type=name)


SerializableException = Annotated[
    Exception, PlainSerializer(_exception_json, return_type=dict[str, str]), PlainValidator(_exception_from_json)
]
"""An exception field: JSON keeps its class name and message (builtin classes are rebuilt)."""


class WorkflowTimedOutEvent(StopEvent):
    """Streamed when the run exceeds ``Workflow(timeout=...)``, before ``WorkflowTimeoutError`` is raised."""

    timeout: float
    active_steps: list[str]


class WorkflowCancelledEvent(StopEvent):
    """Streamed when the run is cancelled, before ``WorkflowCancelledByUser`` is raised."""


class IdleReleasedEvent(StopEvent):
    """LlamaIndex's result of a run released while idle (kept for imports; this engine never releases runs)."""


class WorkflowFailedEvent(StopEvent):
    """Streamed when a step fails for good (retries exhausted), before its exception is raised."""

    step_name: str
    exception: SerializableException
    attempts: int | None = None
    elapsed_seconds: float | None = None


class CollectionReleaseEvent(Event):
    """LlamaIndex's trigger of a ``list[E]`` collect step (kept for imports; such steps are refused at build)."""

    events: list[SerializableEvent] = Field(default_factory=list)
    stream_id: str = ""
    binding_id: str = ""


class StepFailedEvent(Event):
    """What a ``@catch_error`` handler receives when a step has exhausted its retries."""

    step_name: str
    input_event: SerializableEvent
    exception: SerializableException
    attempts: int
    elapsed_seconds: float
    failed_at: datetime


class InternalDispatchEvent(Event):
    """Base of the internal events ``stream_events(expose_internal=True)`` shows."""


class WorkflowIdleEvent(InternalDispatchEvent):
    """The run went idle, waiting for an event from outside."""


class UnhandledEvent(InternalDispatchEvent):
    """An event sent into the run that no step and no waiter took."""

    event_type: str = Field(description="Class name of the unhandled event.")
    qualified_name: str = Field(description="Fully qualified name of the event type.")
    step_name: str | None = Field(default=None, description="Target step name if the event was addressed to a step.")
    idle: bool = Field(description="Whether the workflow is idle after processing.")


class StepState(Enum):
    PREPARING = "preparing"
    RUNNING = "running"
    NOT_RUNNING = "not_running"


class StepStateChanged(InternalDispatchEvent):
    """A step started or finished handling an event (``expose_internal=True``)."""

    name: str = Field(description="Name of the step")
    step_state: StepState = Field(description="State of the step")
    worker_id: str = Field(description="ID of the worker that the step is running on")
    input_event_name: str = Field(description="Name of the input event")
    output_event_name: str | None = Field(description="Name of the output event", default=None)


EventType = type[Event]

for _cls in (
    Event,
    StartEvent,
    StopEvent,
    InputRequiredEvent,
    HumanResponseEvent,
    WorkflowTimedOutEvent,
    WorkflowCancelledEvent,
    IdleReleasedEvent,
    WorkflowFailedEvent,
    CollectionReleaseEvent,
    StepFailedEvent,
    InternalDispatchEvent,
    WorkflowIdleEvent,
    UnhandledEvent,
    StepStateChanged,
):
    register_type(_cls)


def summarize_event(event: Event, max_length: int = 200) -> str:
    """One line naming an event and its values, shortened, as LlamaIndex's verbose output prints it."""

    def short(value: Any) -> str:
        if isinstance(value, str):
            return repr(value[:50] + "..." if len(value) > 50 else value)
        if isinstance(value, list) and len(value) > 3:
            return f"[{len(value)} items]"
        if isinstance(value, dict) and len(value) > 3:
            return f"{{{len(value)} keys}}"
        return repr(value)

    try:
        parts: list[str] = []
        if isinstance(event, StopEvent) and event._result is not None:
            parts.append(f"result={short(event._result)}")
        parts.extend(f"{name}={short(getattr(event, name, None))}" for name in type(event).model_fields)
        parts.extend(f"{k}={short(v)}" for k, v in event._data.items())
        text = f"{type(event).__name__}({', '.join(parts)})"
        return text if len(text) <= max_length else text[: max_length - 3] + "..."
    except Exception:
        return type(event).__name__
