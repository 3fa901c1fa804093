"""Events a run emits, run states, and the result of an in-process run.

Events are pydantic models with a ``type`` discriminator, so the same objects
stream from the in-process runner and (as JSON) out of a Temporal run. They
read as Microsoft Agent Framework's do: every event has ``type`` and ``data``
(``WorkflowEvent[T]`` is generic in its data), ``str()``/``repr()`` print
``WorkflowEvent(type='output', executor_id='a', data=...)`` as MAF prints them,
and MAF's attribute names (``iteration``, ``details``, ``origin``,
``executor_id``, ``state``, ``request_id``, ...) read on every event (``None``
where an event has no such thing). The subclasses (``WorkflowOutputEvent``,
``ExecutorInvokedEvent``, ...) are this library's earlier, still supported
names for the same events; ``isinstance`` checks and ``event.type == "output"``
checks both work.
"""

from __future__ import annotations

import builtins
import enum
import sys
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Self

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer, model_validator
from typing_extensions import TypeVar

from temporal_workflows._engine.registry import library_types

__all__ = [
    "ExecutorCompletedEvent",
    "ExecutorFailedEvent",
    "ExecutorInvokedEvent",
    "RequestInfoEvent",
    "SuperStepCompletedEvent",
    "SuperStepStartedEvent",
    "WorkflowErrorDetails",
    "WorkflowEvent",
    "WorkflowEventSource",
    "WorkflowFailedEvent",
    "WorkflowIntermediateEvent",
    "WorkflowInterruptedEvent",
    "WorkflowOutputEvent",
    "WorkflowResetEvent",
    "WorkflowRunResult",
    "WorkflowRunState",
    "WorkflowStartedEvent",
    "WorkflowStatusEvent",
    "WorkflowWarningEvent",
]

DataT = TypeVar("DataT", default=Any)


class WorkflowRunState(enum.StrEnum):
    """Where a run is. Members, values and ``str()`` (``WorkflowRunState.IDLE``) match Agent Framework's."""

    STARTED = "STARTED"
    IN_PROGRESS = "IN_PROGRESS"
    IN_PROGRESS_PENDING_REQUESTS = "IN_PROGRESS_PENDING_REQUESTS"
    IDLE = "IDLE"
    IDLE_WITH_PENDING_REQUESTS = "IDLE_WITH_PENDING_REQUESTS"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class WorkflowEventSource(enum.StrEnum):
    """Who made an event (Agent Framework's ``origin``): the framework, or an executor's own ``add_event``."""

    FRAMEWORK = "FRAMEWORK"
    EXECUTOR = "EXECUTOR"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


@dataclass(frozen=True)
class WorkflowErrorDetails:
    """What failed, as Agent Framework's ``event.details`` gives it (failed and executor_failed events).

    Unlike Agent Framework (which shows only the error's type unless sensitive
    data is enabled), ``message`` is the error's message: both graph hosts report it
    the same way, and error messages built by this library name no values.
    """

    error_type: str
    message: str
    traceback: str | None = None
    executor_id: str | None = None
    extra: dict[str, Any] | None = None


_MAF_ATTRIBUTES = frozenset({"state", "executor_id", "request_id", "source_executor_id", "response_type"})
"""Agent Framework attributes every event has (``None`` where it has no such thing); some subclasses
have them as fields, so the base answers them only when a field does not."""


class WorkflowEvent(BaseModel, Generic[DataT]):
    """Base of all events, and Agent Framework's one event class: ``type`` says which event it is.

    Subclass it for custom events sent with ``ctx.add_event``, either MAF's
    way (``class Found(WorkflowEvent): ...`` then ``Found(type="found",
    data=...)``, or ``WorkflowEvent("found", data=...)``) or as a pydantic
    model with fields of its own. A keyword the event has no field for is a
    ``TypeError``, never silently dropped.

    Attributes:
        type: Which event this is (``"output"``, ``"executor_invoked"``, a custom name, ...).
        data: What the event carries (MAF's ``data``): an output, the message
            an executor received, a request, a custom event's payload.
        data_type: Type key of ``data`` when it travelled as JSON (events
            streamed from Temporal); readers restore the type from it.
        timestamp: When the run published the event: workflow time on
            Temporal (the same on every replay), so a run's events read back
            after it closed still say when each happened. ``None`` for events
            of an in-process run, which a caller sees as they happen.
    """

    model_config = ConfigDict(arbitrary_types_allowed=False)

    type: str = "custom"
    data: DataT | None = None
    data_type: str | None = None
    timestamp: datetime | None = None

    _origin: ClassVar[WorkflowEventSource] = WorkflowEventSource.EXECUTOR
    _omit_if_none: ClassVar[tuple[str, ...]] = ("data", "data_type", "item_types", "data_omitted", "timestamp")
    """Keys the event's JSON leaves out while they are ``None``."""
    _maf_repr: ClassVar[tuple[str, ...] | None] = None
    """Attributes ``repr()`` shows after ``type`` (MAF's choice per event); ``None``: ``data`` and own fields."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Accept MAF's positional form ``WorkflowEvent(type, data)`` and its ``iteration=`` keyword.

        Raises:
            TypeError: a keyword the event has no field for (it would otherwise be dropped).
        """
        if len(args) > 2:
            raise TypeError(f"{type(self).__name__}() takes at most 2 positional arguments (type, data)")
        for name, value in zip(("type", "data"), args, strict=False):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
            kwargs[name] = value
        fields = type(self).model_fields
        if "iteration" in kwargs and "superstep" in fields and "iteration" not in fields:
            kwargs["superstep"] = kwargs.pop("iteration")
        if type(self).model_config.get("extra") != "allow":
            unknown = sorted(k for k in kwargs if k not in fields)
            if unknown:
                raise TypeError(
                    f"{type(self).__name__}() got unexpected keyword argument{'s' * (len(unknown) > 1)} "
                    f"{', '.join(map(repr, unknown))}; its fields are {sorted(fields)}"
                )
        super().__init__(**kwargs)

    @model_serializer(mode="wrap")
    def _leave_out_empty_data(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Most events carry no data: leave the two empty keys out of every streamed event.
        out = handler(self)
        if isinstance(out, dict):
            for key in self._omit_if_none:
                if key in out and out[key] is None:
                    del out[key]
        return out

    # -- Agent Framework's attribute names ----------------------------------------------------

    @property
    def iteration(self) -> int | None:
        """MAF's name for the superstep of ``superstep_started`` / ``superstep_completed`` events."""
        value = self.__dict__.get("superstep")
        return value if isinstance(value, int) else None

    @property
    def origin(self) -> WorkflowEventSource:
        """``FRAMEWORK`` for the run's own events, ``EXECUTOR`` for custom ones."""
        return self._origin

    @property
    def details(self) -> WorkflowErrorDetails | None:
        """What failed, for ``failed`` and ``executor_failed`` events (``None`` for others)."""
        error_type, error = self.__dict__.get("error_type"), self.__dict__.get("error")
        if not isinstance(error_type, str) or not isinstance(error, str):
            return None
        executor_id = self.__dict__.get("executor_id")
        return WorkflowErrorDetails(
            error_type, error, executor_id=executor_id if isinstance(executor_id, str) else None
        )

    @property
    def request_type(self) -> builtins.type[Any] | None:
        """The type of a ``request_info`` event's data (``dict`` if it could not be restored), as MAF gives it."""
        return type(self.data) if self.type == "request_info" else None

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name in _MAF_ATTRIBUTES:
                return None
            return super().__getattr__(name)

        def __setattr__(self, name: str, value: Any) -> None:
            # pydantic adds an assigned field's name to the fields set in place: an event built by the
            # run shares that set with the others built the same way (``_SharedFieldNames``), so it
            # takes its own first.
            if type(getattr(self, "__pydantic_fields_set__", None)) is _SharedFieldNames:
                _own_fields_set(self)
            super().__setattr__(name, value)

    @property
    def model_fields_set(self) -> set[str]:
        """The names of the fields given when the event was made (pydantic's), the event's own set."""
        return _own_fields_set(self)

    def restored(self) -> Self:
        """This event with ``data`` turned back into its type(s), where it travelled as JSON.

        Both readers use it: the in-process runner and a Temporal run's event
        stream. A type this process cannot build leaves that value as JSON.
        """
        fields = self.__dict__
        if fields.get("data_type") is None and fields.get("item_types") is None:
            return self  # plain JSON data (most events): nothing to restore
        from temporal_workflows._engine.serde import Envelope, decode

        item_types = fields.get("item_types")
        if isinstance(item_types, list) and isinstance(self.data, list) and len(item_types) == len(self.data):
            items: list[Any] = []
            for value, key in zip(self.data, item_types, strict=True):
                try:
                    items.append(value if key is None else decode(Envelope(key, value)))
                except Exception:
                    items.append(value)
            return self.model_copy(update={"data": items})
        if self.data_type is None:
            return self
        try:
            return self.model_copy(update={"data": decode(Envelope(self.data_type, self.data))})
        except Exception:
            return self

    # -- how it reads -------------------------------------------------------------------------

    def _repr_names(self) -> tuple[str, ...]:
        if self._maf_repr is not None:
            return self._maf_repr
        own = tuple(n for n in type(self).model_fields if n not in WorkflowEvent.model_fields)
        return ("executor_id", *own, "data") if "executor_id" not in own else (*own, "data")

    def __repr__(self) -> str:
        parts = [f"type={self.type!r}"]
        for name in self._repr_names():
            value = self.details if name == "details" else getattr(self, name, None)
            if value is None:
                continue
            if name == "details":
                name = "data"
            shown = value.value if name == "state" and isinstance(value, enum.Enum) else repr(value)
            parts.append(f"{name}={shown}")
        return f"WorkflowEvent({', '.join(parts)})"

    def __str__(self) -> str:
        return repr(self)


class _FrameworkEvent(WorkflowEvent[DataT]):
    """An event the run itself emits (MAF: ``origin=FRAMEWORK``)."""

    _origin: ClassVar[WorkflowEventSource] = WorkflowEventSource.FRAMEWORK


class WorkflowStartedEvent(_FrameworkEvent[None]):
    type: Literal["started"] = "started"
    run_id: str = ""
    _maf_repr: ClassVar[tuple[str, ...] | None] = ()


class WorkflowStatusEvent(_FrameworkEvent[None]):
    type: Literal["status"] = "status"
    state: WorkflowRunState
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("state",)


class SuperStepStartedEvent(_FrameworkEvent[None]):
    type: Literal["superstep_started"] = "superstep_started"
    superstep: int
    executor_ids: list[str] = []
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("iteration",)


class SuperStepCompletedEvent(_FrameworkEvent[None]):
    type: Literal["superstep_completed"] = "superstep_completed"
    superstep: int
    state_keys_written: list[str] = []
    checkpoint_id: str | None = None
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("iteration",)


class ExecutorInvokedEvent(_FrameworkEvent[Any]):
    """A step ran: ``data`` is the message it received (a list for a fan-in, the response for a response handler)."""

    type: Literal["executor_invoked"] = "executor_invoked"
    executor_id: str
    superstep: int
    item_types: list[str | None] | None = None
    """Type key of each item of a ``data`` list whose items are of different types (JSON in transit)."""
    data_omitted: int | None = None
    """JSON bytes of the message(s), when too large to carry here (``data`` is then ``None``)."""
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("executor_id", "data", "data_omitted")


class ExecutorCompletedEvent(_FrameworkEvent[Any]):
    """A step finished: ``data`` lists the messages it sent, then the outputs it yielded (``None``: neither)."""

    type: Literal["executor_completed"] = "executor_completed"
    executor_id: str
    superstep: int
    item_types: list[str | None] | None = None
    """Type key of each item of ``data`` when they are of different types (JSON in transit)."""
    data_omitted: int | None = None
    """JSON bytes of what it sent and yielded, when too large to carry here (``data`` is then ``None``)."""
    worker: str | None = None
    """Which worker ran the step, on Temporal: the worker's identity (``<pid>@<host>`` unless the worker was
    given another). ``None`` in process."""
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("executor_id", "data", "data_omitted")


class ExecutorFailedEvent(_FrameworkEvent[Any]):
    type: Literal["executor_failed"] = "executor_failed"
    executor_id: str
    superstep: int
    error_type: str
    error: str
    worker: str | None = None
    """Which worker's attempt failed last, on Temporal (its identity); ``None`` in process, or when the step
    timed out with no worker to name."""
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("executor_id", "details")


class WorkflowOutputEvent(_FrameworkEvent[Any]):
    """A workflow output (``ctx.yield_output`` of an executor whose yields are outputs)."""

    type: Literal["output"] = "output"
    executor_id: str
    data: Any = None
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("executor_id", "data")


class WorkflowIntermediateEvent(_FrameworkEvent[Any]):
    """An intermediate output: a yield of an executor named in ``intermediate_output_from``."""

    type: Literal["intermediate"] = "intermediate"
    executor_id: str
    data: Any = None
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("executor_id", "data")


class RequestInfoEvent(_FrameworkEvent[Any]):
    """A step asked for outside input; answer it with ``run(responses={request_id: ...})``.

    It is also the one form of a request still open, in process and on Temporal
    (``Workflow.pending_requests``, ``RunHandle.pending_requests()``, the
    ``pending_requests`` query's JSON): Agent Framework's names
    (``request_id``, ``source_executor_id``, ``data``, ``request_type``,
    ``response_type``), and, only in those lists, where the request stands
    (``superstep``, ``created_at``, ``deadline``, ``on_timeout``). The event
    in a run's stream leaves those out.
    """

    type: Literal["request_info"] = "request_info"
    request_id: str
    source_executor_id: str
    data: Any = None
    response_type: str
    response_schema: dict[str, Any] = {}
    timeout: float | None = None
    """Seconds until the request times out, if it does."""
    superstep: int | None = None
    """The superstep whose step asked (pending requests only)."""
    created_at: datetime | None = None
    """When the request was committed, by the host's clock (pending requests only)."""
    deadline: datetime | None = None
    """When it times out, if it does (pending requests only)."""
    on_timeout: Literal["respond", "fail"] | None = None
    """What its timeout does, if it has one (pending requests only)."""
    request_omitted: str | None = None
    """Why ``data`` is ``None`` in a ``pending_requests`` answer cut to fit one payload (its size)."""
    _omit_if_none: ClassVar[tuple[str, ...]] = (
        *_FrameworkEvent._omit_if_none,
        "superstep",
        "created_at",
        "deadline",
        "on_timeout",
        "request_omitted",
    )
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("request_id", "data")


class WorkflowWarningEvent(_FrameworkEvent[Any]):
    """Outside input the run could not use (e.g. a bad ``respond`` signal); the run goes on unchanged.

    ``data`` is the message (MAF's warning events carry it there).
    """

    type: Literal["warning"] = "warning"
    message: str
    request_id: str | None = None
    executor_id: str | None = None
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("data",)

    @model_validator(mode="after")
    def _message_is_data(self) -> WorkflowWarningEvent:
        if self.data is None:
            self.data = self.message
        return self


class WorkflowResetEvent(_FrameworkEvent[None]):
    """The run was reset (on Temporal: it continues as new from the reset's starting point).

    ``checkpoint_id`` is the checkpoint it went back to, or ``None`` for a clean start.
    """

    type: Literal["reset"] = "reset"
    checkpoint_id: str | None = None
    superstep: int = 0
    resets: int = 1
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("checkpoint_id",)


class WorkflowInterruptedEvent(_FrameworkEvent[None]):
    """A message that arrived while the run was busy interrupted its current turn (``concurrent_input``).

    ``policy`` ``"interrupt"``: the superstep that was running (``superstep``,
    its steps ``cancelled``) committed nothing, and the turn's remaining work
    (messages queued for later supersteps, fan-in buffers) was dropped; the
    committed state stays. ``"rollback"``: besides, the run went back to where
    it was before the turn's input (state, requests and outputs), as it was
    after superstep ``rolled_back_to``. The new message is taken at this
    boundary, in the superstep after ``superstep``. The in-process and Temporal hosts emit it
    (docs/concurrent-input.md).
    """

    type: Literal["interrupted"] = "interrupted"
    policy: Literal["interrupt", "rollback"]
    superstep: int
    cancelled: list[str] = []
    rolled_back_to: int | None = None
    _maf_repr: ClassVar[tuple[str, ...] | None] = ("policy",)


class WorkflowFailedEvent(_FrameworkEvent[None]):
    type: Literal["failed"] = "failed"
    error_type: str
    error: str
    executor_id: str | None = None
    superstep: int
    _maf_repr: ClassVar[tuple[str, ...] | None] = ()


class WorkflowRunResult(list[WorkflowEvent]):
    """The events of one ``run()`` call, plus accessors for what they mean.

    As in Agent Framework it is a list of the call's events without the
    ``started`` and ``status`` events (``run(..., include_status_events=True)``
    keeps the status events in the list); :meth:`status_timeline` lists the
    status events. ``state`` is the committed shared state after the call.
    """

    def __init__(
        self,
        events: list[WorkflowEvent],
        *,
        final_state: WorkflowRunState,
        state: dict[str, Any],
        run_id: str,
        include_status_events: bool = False,
    ) -> None:
        super().__init__()
        keep = self.append
        status: list[WorkflowEvent] = []
        for e in events:  # (one pass: a run keeps every event, hundreds for a long one)
            kind = e.type
            if kind == "status":
                status.append(e)
                if include_status_events:
                    keep(e)
            elif kind != "started":
                keep(e)
        self._status_events = status
        self._final_state = final_state
        self.state = state
        self.run_id = run_id

    def get_outputs(self) -> list[Any]:
        """Values yielded as workflow outputs during this call, in commit order."""
        # Live items (an agent's streamed updates, typed "output" as Agent Framework's are) are not outputs.
        return [e.data for e in self if e.type == "output" and not getattr(e, "live", False)]

    def get_intermediate_outputs(self) -> list[Any]:
        """Values yielded by executors named in ``intermediate_output_from`` during this call."""
        return [e.data for e in self if e.type == "intermediate"]

    def get_request_info_events(self) -> list[RequestInfoEvent]:
        """Requests raised during this call (``Workflow.pending_requests`` lists every one still open)."""
        return [e for e in self if isinstance(e, RequestInfoEvent)]

    def get_final_state(self) -> WorkflowRunState:
        """The run state when this call returned (Agent Framework's meaning)."""
        return self._final_state

    def status_timeline(self) -> list[WorkflowEvent]:
        """The status events of this call, in order."""
        return list(self._status_events)

    def get_state(self) -> dict[str, Any]:
        """The committed shared state (executor-private keys excluded)."""
        return self.state


# -- events the run builds itself ---------------------------------------------------------------

_E = TypeVar("_E", bound=WorkflowEvent)
_M = TypeVar("_M", bound=BaseModel)
_UNSET: Any = object()
_set_attr = object.__setattr__
_new = object.__new__
# BaseModel's four instance slots, stored through their descriptors (cheaper than ``object.__setattr__``,
# which looks the descriptor up again on every call).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class _SharedFieldNames(set[str]):
    """The ``model_fields_set`` of every event the run builds with the same fields: one set, shared.

    A run keeps every event it made (a 200-superstep run about 800), and a
    set per event was a visible part of making and keeping them. Nothing
    changes a shared set: an event takes its own copy before an assignment
    or when ``model_fields_set`` is read, and copying or pickling an event
    gives it a plain set.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[type[set[str]], tuple[list[str]]]:
        return set, (list(self),)


def _own_fields_set(event: BaseModel) -> set[str]:
    names: set[str] = event.__pydantic_fields_set__
    if type(names) is _SharedFieldNames:
        names = set(names)
        _set_fields_set(event, names)
    return names


def _made(cls: type[_E], values: dict[str, Any], names: _SharedFieldNames) -> _E:
    """An event of ``cls`` with ``values`` (every field, in declaration order) and the given field ``names``."""
    event = _new(cls)
    _set_dict(event, values)
    _set_fields_set(event, names)
    _set_extra(event, None)
    _set_private(event, None)
    return event


def _layout(cls: type[WorkflowEvent], fields: tuple[str, ...], *given: str) -> _SharedFieldNames:
    """The shared fields set of a builder below that gives ``given``; checks the builder still fits ``cls``.

    Each builder writes out ``fields``, its class's fields in declaration
    order; a field added to the class, or a validator, must change the
    builder too (this fails at import otherwise, and
    ``tests/test_built_events.py`` compares each builder's event with the
    validated one).
    """
    template = _kept_template(cls)
    if (
        template is None
        or template.validated
        or tuple(template.values) != fields
        or not template.required <= set(given) <= set(fields)
    ):
        raise TypeError(f"{cls.__name__} can no longer be built field by field: update its builder")
    return _SharedFieldNames(given)


# The driver's events of every superstep, each with the fields the driver gives (the same objects
# ``cls(**fields)`` makes, in about a third of ``built_event``'s time).
_INVOKED_FIELDS = ("type", "data", "data_type", "timestamp", "executor_id", "superstep", "item_types", "data_omitted")
_COMPLETED_FIELDS = (*_INVOKED_FIELDS, "worker")
_STARTED_FIELDS = ("type", "data", "data_type", "timestamp", "superstep", "executor_ids")
_SUPERSTEP_COMPLETED_FIELDS = (
    "type",
    "data",
    "data_type",
    "timestamp",
    "superstep",
    "state_keys_written",
    "checkpoint_id",
)
_STATUS_FIELDS = ("type", "data", "data_type", "timestamp", "state")


def invoked_event(executor_id: str, superstep: int, data: Any, data_type: str | None) -> ExecutorInvokedEvent:
    """``ExecutorInvokedEvent(executor_id=..., superstep=..., data=..., data_type=...)``, values already valid."""
    return _made(
        ExecutorInvokedEvent,
        {
            "type": "executor_invoked",
            "data": data,
            "data_type": data_type,
            "timestamp": None,
            "executor_id": executor_id,
            "superstep": superstep,
            "item_types": None,
            "data_omitted": None,
        },
        _INVOKED_NAMES,
    )


def completed_event(
    executor_id: str, superstep: int, data: list[Any], worker: str | None = None
) -> ExecutorCompletedEvent:
    """``ExecutorCompletedEvent(data=..., executor_id=..., superstep=...[, worker=...])`` for JSON ``data``,
    values already valid."""
    return _made(
        ExecutorCompletedEvent,
        {
            "type": "executor_completed",
            "data": data,
            "data_type": None,
            "timestamp": None,
            "executor_id": executor_id,
            "superstep": superstep,
            "item_types": None,
            "data_omitted": None,
            "worker": worker,
        },
        _COMPLETED_NAMES if worker is None else _COMPLETED_WORKER_NAMES,
    )


def superstep_started_event(superstep: int, executor_ids: list[str]) -> SuperStepStartedEvent:
    """``SuperStepStartedEvent(superstep=..., executor_ids=...)``, values already valid (the list is the event's)."""
    return _made(
        SuperStepStartedEvent,
        {
            "type": "superstep_started",
            "data": None,
            "data_type": None,
            "timestamp": None,
            "superstep": superstep,
            "executor_ids": executor_ids,
        },
        _STARTED_NAMES,
    )


def superstep_completed_event(
    superstep: int, state_keys_written: list[str], checkpoint_id: str | None
) -> SuperStepCompletedEvent:
    """``SuperStepCompletedEvent(superstep=..., state_keys_written=..., checkpoint_id=...)``, values already valid."""
    return _made(
        SuperStepCompletedEvent,
        {
            "type": "superstep_completed",
            "data": None,
            "data_type": None,
            "timestamp": None,
            "superstep": superstep,
            "state_keys_written": state_keys_written,
            "checkpoint_id": checkpoint_id,
        },
        _SUPERSTEP_COMPLETED_NAMES,
    )


def status_event(state: WorkflowRunState) -> WorkflowStatusEvent:
    """``WorkflowStatusEvent(state=...)``."""
    return _made(
        WorkflowStatusEvent,
        {"type": "status", "data": None, "data_type": None, "timestamp": None, "state": state},
        _STATUS_NAMES,
    )


@dataclass(frozen=True, slots=True)
class _Template:
    values: dict[str, Any]
    """Every field, in declaration order: its default, or ``_UNSET`` for a required one."""
    required: frozenset[str]
    mutable: tuple[str, ...]
    """Fields whose default is a list or dict (each model gets its own copy, as pydantic gives it)."""
    validated: bool
    """The class has validators of its own (``built_event`` then validates)."""


_TEMPLATES: dict[type[BaseModel], _Template | None] = {}


def _template(cls: type[BaseModel]) -> _Template | None:
    """How ``cls`` is constructed field by field, or ``None`` if only pydantic's own way will do.

    That is for a class with private attributes, extra fields, a post-init
    hook, aliases, a default factory or a non-empty mutable default.
    """
    if (
        cls.__private_attributes__
        or cls.model_config.get("extra") is not None
        or cls.__pydantic_post_init__ is not None
        or cls.__new__ is not object.__new__
    ):
        return None
    values: dict[str, Any] = {}
    required: list[str] = []
    mutable: list[str] = []
    for name, field in cls.model_fields.items():
        if field.default_factory is not None or field.alias is not None or field.validation_alias is not None:
            return None
        if field.is_required():
            values[name] = _UNSET
            required.append(name)
            continue
        default = field.default
        values[name] = default
        if isinstance(default, (list, dict, set)):
            if default:
                return None
            mutable.append(name)
    decorators = cls.__pydantic_decorators__
    validated = bool(decorators.model_validators or decorators.field_validators)
    return _Template(values, frozenset(required), tuple(mutable), validated)


def _kept_template(cls: type[BaseModel]) -> _Template | None:
    template = _TEMPLATES.get(cls, _UNSET)
    if template is _UNSET:
        template = _TEMPLATES[cls] = _template(cls)
    return template  # type: ignore[no-any-return]


def _construct(cls: type[_M], template: _Template, fields: dict[str, Any]) -> _M | None:
    """The model with ``fields`` and defaults (pydantic's ``model_construct``); ``None``: a field is unknown
    or missing."""
    if not template.required <= fields.keys():
        return None
    values = template.values | fields  # declaration order; an unknown field adds a key
    if len(values) != len(template.values):
        return None
    for name in template.mutable:
        if name not in fields:
            values[name] = values[name].copy()
    model = _new(cls)  # (no class here defines __new__: ``_template``)
    _set_dict(model, values)
    _set_fields_set(model, set(fields))
    _set_extra(model, None)
    _set_private(model, None)
    return model


def constructed(cls: type[_M], /, **fields: Any) -> _M:
    """``cls.model_construct(**fields)``, for values already valid, in a fraction of its time.

    pydantic's ``model_construct`` walks every field's definition on every
    call; this copies a per-class template of the defaults instead. Same
    result: the fields in declaration order, ``model_fields_set`` the names
    given, an own copy of an empty list or dict default. A class this cannot
    build that way (private attributes, extras, post-init, aliases, factories)
    and a call with a missing or unknown field go to ``model_construct``.
    """
    template = _kept_template(cls)
    model = _construct(cls, template, fields) if template is not None else None
    return model if model is not None else cls.model_construct(**fields)


def built_event(cls: type[_E], /, **fields: Any) -> _E:
    """``cls(**fields)`` without validating ``fields``: for the events the run builds itself, every step.

    The driver makes two or more events per step from values the engine made
    (ids, superstep numbers, JSON data, run states), already of their field
    types, so validating them again only costs time. The event is the same
    object validation gives (:func:`constructed`; tested against the
    validated form for every event the driver builds). A class with
    validators of its own, and a call with a missing or unknown field, are
    built the validated way (which refuses them as it always does).
    """
    template = _TEMPLATES.get(cls, _UNSET)
    if template is _UNSET:
        template = _kept_template(cls)
    if template is None or template.validated:
        return cls(**fields)
    event = _construct(cls, template, fields)
    return event if event is not None else cls(**fields)


_INVOKED_NAMES = _layout(ExecutorInvokedEvent, _INVOKED_FIELDS, "data", "data_type", "executor_id", "superstep")
_COMPLETED_NAMES = _layout(ExecutorCompletedEvent, _COMPLETED_FIELDS, "data", "executor_id", "superstep")
_COMPLETED_WORKER_NAMES = _layout(
    ExecutorCompletedEvent, _COMPLETED_FIELDS, "data", "executor_id", "superstep", "worker"
)
_STARTED_NAMES = _layout(SuperStepStartedEvent, _STARTED_FIELDS, "superstep", "executor_ids")
_SUPERSTEP_COMPLETED_NAMES = _layout(
    SuperStepCompletedEvent, _SUPERSTEP_COMPLETED_FIELDS, "superstep", "state_keys_written", "checkpoint_id"
)
_STATUS_NAMES = _layout(WorkflowStatusEvent, _STATUS_FIELDS, "state")

library_types(sys.modules[__name__])  # decodable in a process that never encoded one
