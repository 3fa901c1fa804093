"""What crosses Temporal between LlamaIndex's loop (workflow code) and its steps (activities).

Everything is plain JSON built with the workflow's own LlamaIndex serializer
(``Runtime.get_serializer``): events travel as that serializer's strings,
step outputs as LlamaIndex's own pydantic result models, so a payload reads
the same in the Web UI and the ``temporal`` CLI as in ``ctx.to_dict()``.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import json
import math
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from workflows.context.serializers import BaseSerializer, JsonSerializer
from workflows.context.state_store import DictState, InMemoryStateStore, decode_seed_state
from workflows.context.utils import get_qualified_name, import_module_from_qualified_name
from workflows.errors import WorkflowRuntimeError
from workflows.events import Event, StopEvent
from workflows.runtime.types.results import (
    AddCollectedEvent,
    AddWaiter,
    DeleteCollectedEvent,
    DeleteWaiter,
    RetryAttempt,
    SentEvent,
    StepWorkerFailed,
    StepWorkerOutput,
    StepWorkerResult,
    StepWorkerState,
    StepWorkerWaiter,
)

from temporal_workflows._engine.serde import Envelope, decode, encode
from temporal_workflows._llama_runtime._llama_private import (
    deserialize_exception,
    deserialize_release_payload,
    event_dump_serializer,
    in_memory_store,
    serialize_exception,
    serialize_release_payload,
)
from temporal_workflows._llama_runtime._store_values import check_store_value

__all__ = [
    "decode_event",
    "decode_outputs",
    "EXACT_KEY",
    "TAGGED_KEY",
    "add_exact_forms",
    "decode_result",
    "decode_retry",
    "decode_state",
    "encode_event",
    "encode_outputs",
    "encode_result",
    "exact_form",
    "from_exact_form",
    "from_tagged_form",
    "RunStateStore",
    "run_store",
    "tagged_form",
    "encode_retry",
    "exception_fields",
    "restore_exception_fields",
    "encode_state",
    "event_record",
    "plain_key",
]

_OUTPUT_KINDS: dict[str, type[BaseModel]] = {
    "result": StepWorkerResult,
    "failed": StepWorkerFailed,
    "add_collected": AddCollectedEvent,
    "delete_collected": DeleteCollectedEvent,
    "add_waiter": AddWaiter[Event],
    "delete_waiter": DeleteWaiter,
    "sent": SentEvent,
}


EncodeMemo = dict[Any, tuple[Event, str]]
"""Events already encoded, by ``id`` (the event is held too, so its id is not reused): a fan-in buffer's
events go into every invocation's input, and encoding each once keeps a wide fan-in linear. With the
runtime's own serializer, plain events also by :func:`plain_key` (an equal event in another object, such
as a step's trigger event and the copy it buffered, is encoded once)."""

MAX_MEMO = 4096
"""A memo holding more events than this is cleared before it grows further."""


def encode_event(serializer: BaseSerializer, event: Event, memo: EncodeMemo | None = None) -> str:
    if memo is not None:
        hit = memo.get(id(event))
        if hit is not None and hit[0] is event:
            return hit[1]
    from temporal_workflows._llama_runtime._registry import note_type

    note_type(event)
    key = plain_key(event) if memo is not None and getattr(serializer, "reads_exact_form", False) else None
    same = memo.get(key) if memo is not None and key is not None else None
    data = same[1] if same is not None else serializer.serialize(event)
    if memo is not None:
        if len(memo) >= MAX_MEMO:
            memo.clear()
        memo[id(event)] = (event, data)
        if key is not None and same is None:
            memo[key] = (event, data)
    return data


def decode_event(serializer: BaseSerializer, data: str) -> Event:
    with serializer.validation_context():
        event = serializer.deserialize(data)
    if not isinstance(event, Event):
        raise TypeError(f"expected a LlamaIndex Event, got {type(event).__name__}")
    return event


def _resolve_class(serializer: BaseSerializer, qualified_name: str) -> Any:
    resolve = getattr(serializer, "resolve_class", None)
    if resolve is not None:
        return resolve(qualified_name)
    return import_module_from_qualified_name(qualified_name)


def _encode_waiter(serializer: BaseSerializer, w: StepWorkerWaiter[Any]) -> dict[str, Any]:
    from temporal_workflows._llama_runtime._registry import note_class

    note_class(w.waiting_for_event)  # a class defined in a function: read back by name in this process
    return {
        "waiter_id": w.waiter_id,
        "event": encode_event(serializer, w.event),
        "waiting_for_event": f"{w.waiting_for_event.__module__}.{w.waiting_for_event.__qualname__}",
        "requirements": serializer.serialize(w.requirements),
        "has_requirements": w.has_requirements,
        "resolved_event": None if w.resolved_event is None else encode_event(serializer, w.resolved_event),
        "bound_events": None
        if w.bound_events is None
        else {k: encode_event(serializer, v) for k, v in w.bound_events.items()},
        "timed_out": w.timed_out,
        "scope_path": list(w.scope_path),
        "collection_release_payload": serialize_release_payload(w.collection_release_payload),
        "work_item_id": w.work_item_id,
    }


def _decode_waiter(serializer: BaseSerializer, d: dict[str, Any]) -> StepWorkerWaiter[Any]:
    with serializer.validation_context():
        waiting_for = _resolve_class(serializer, d["waiting_for_event"])
        payload = deserialize_release_payload(d["collection_release_payload"])
        requirements = serializer.deserialize(d["requirements"])
    return StepWorkerWaiter(
        waiter_id=d["waiter_id"],
        event=decode_event(serializer, d["event"]),
        waiting_for_event=waiting_for,
        requirements=requirements,
        has_requirements=d["has_requirements"],
        resolved_event=None if d["resolved_event"] is None else decode_event(serializer, d["resolved_event"]),
        bound_events=None
        if d["bound_events"] is None
        else {k: decode_event(serializer, v) for k, v in d["bound_events"].items()},
        timed_out=d["timed_out"],
        scope_path=tuple(d["scope_path"]),
        collection_release_payload=payload,
        work_item_id=d["work_item_id"],
    )


def _encode_events(serializer: BaseSerializer, events: list[Event], memo: EncodeMemo | None) -> list[str]:
    if memo is None:
        return [encode_event(serializer, e) for e in events]
    out: list[str] = []
    for e in events:  # the memo's hits inline: a wide fan-in's buffer is read per invocation
        hit = memo.get(id(e))
        out.append(hit[1] if hit is not None and hit[0] is e else encode_event(serializer, e, memo))
    return out


def encode_state(serializer: BaseSerializer, state: StepWorkerState, memo: EncodeMemo | None = None) -> dict[str, Any]:
    """A step's ``StepWorkerState`` (its fan-in buffers, waiters, release payload) as JSON."""
    return {
        "step_name": state.step_name,
        "collected_events": {k: _encode_events(serializer, v, memo) for k, v in state.collected_events.items()},
        "collected_waiters": [_encode_waiter(serializer, w) for w in state.collected_waiters],
        "collection_release_payload": serialize_release_payload(state.collection_release_payload),
        "scope_path": list(state.scope_path),
        "work_item_id": state.work_item_id,
        "invocation_id": state.invocation_id,
    }


BufferedEvents = collections.OrderedDict[tuple[int, str, str], Event]
"""A run's fan-in buffer events decoded in this process, by (serializer, run id, record): see :func:`decode_state`."""

MAX_BUFFERED = 4096


def decode_state(
    serializer: BaseSerializer, d: dict[str, Any], buffered: BufferedEvents | None = None, run_id: str = ""
) -> StepWorkerState:
    """A step's ``StepWorkerState`` from :func:`encode_state`'s JSON.

    With ``buffered`` (``PATCH_EXACT`` runs), the events of a fan-in buffer decoded for an earlier invocation of
    the same run are handed over again, the same objects, as the default runtime hands every invocation of a
    ``collect_events`` step the buffer's own event objects (a 50-way join reads its buffer 50 times: decoding it
    each time cost the step activity most of its time). Only the buffer: the trigger event and the containers
    are each invocation's own.
    """
    with serializer.validation_context():
        payload = deserialize_release_payload(d["collection_release_payload"])

    def buffered_event(record: str) -> Event:
        if buffered is None:
            return decode_event(serializer, record)
        key = (id(serializer), run_id, record)
        found = buffered.get(key)
        if found is None:
            found = decode_event(serializer, record)
            buffered[key] = found
            while len(buffered) > MAX_BUFFERED:
                buffered.popitem(last=False)
        return found

    return StepWorkerState(
        step_name=d["step_name"],
        collected_events={k: [buffered_event(e) for e in v] for k, v in d["collected_events"].items()},
        collected_waiters=[_decode_waiter(serializer, w) for w in d["collected_waiters"]],
        collection_release_payload=payload,
        scope_path=tuple(d["scope_path"]),
        work_item_id=d["work_item_id"],
        invocation_id=d["invocation_id"],
    )


def encode_retry(retry: RetryAttempt, exact: bool = False) -> dict[str, Any]:
    """A step's ``RetryAttempt``; with ``exact`` (``PATCH_EXACT`` runs) its last exception's args and attributes
    travel too (``exception_state``), so ``ctx.retry_info().last_exception`` reads as the step raised it."""
    out = {
        "retry_number": retry.retry_number,
        "first_attempt_at": retry.first_attempt_at,
        "last_exception": None if retry.last_exception is None else serialize_exception(retry.last_exception),
        "last_failed_at": retry.last_failed_at,
        "recovery_counts": dict(retry.recovery_counts),
    }
    if exact and retry.last_exception is not None:
        state = exception_state(retry.last_exception)
        if state is not None:
            out["last_exception_state"] = state
    return out


def decode_retry(serializer: BaseSerializer, d: dict[str, Any]) -> RetryAttempt:
    with serializer.validation_context():
        exc = None if d["last_exception"] is None else deserialize_exception(d["last_exception"])
    if exc is not None and isinstance(d.get("last_exception_state"), dict):
        record = d["last_exception"]
        kind, message = str(record.get("exception_type")), str(record.get("exception_message"))
        exact = rebuild_exception(serializer, kind, message, d["last_exception_state"])
        if isinstance(exact, Exception):
            exc = exact
    return RetryAttempt(
        retry_number=d["retry_number"],
        first_attempt_at=d["first_attempt_at"],
        last_exception=exc,
        last_failed_at=d["last_failed_at"],
        recovery_counts=dict(d["recovery_counts"]),
    )


EXACT_KEY = "__exact"
"""Beside LlamaIndex's ``__is_pydantic`` record: the model's field values, tagged (see :func:`exact_form`)."""

EXCEPTIONS_KEY = "__exceptions"
"""Beside LlamaIndex's ``__is_pydantic`` record of a model with exception fields (``WorkflowFailedEvent``): each
exception's class, message, args and attributes (:func:`exception_fields`)."""


def exception_fields(model: BaseModel) -> dict[str, Any] | None:
    """The exception-valued fields of ``model`` (``WorkflowFailedEvent.exception``, say), each with what
    :func:`rebuild_exception` needs: LlamaIndex records an exception as its class name and ``str()`` only, and
    rebuilds ``cls(str(e))``, so a ``KeyError('k')`` read back from the stream would print ``"'k'"``."""
    found: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = model.__dict__.get(name)
        if isinstance(value, BaseException):
            state = exception_state(value)
            if state is not None:
                cls = type(value)
                found[name] = {"type": f"{cls.__module__}.{cls.__qualname__}", "message": str(value), "state": state}
    return found or None


def restore_exception_fields(serializer: BaseSerializer, model: Any, fields: Any) -> Any:
    """``model`` with the exceptions :func:`exception_fields` recorded put back as the step raised them."""
    if not isinstance(model, BaseModel) or not isinstance(fields, dict):
        return model
    update: dict[str, Any] = {}
    for name, record in fields.items():
        if name in type(model).model_fields and isinstance(record, dict):
            kind, message = str(record.get("type")), str(record.get("message"))
            exact = rebuild_exception(serializer, kind, message, record.get("state"))
            if exact is not None:
                update[name] = exact
    return model.model_copy(update=update) if update else model


_PLAIN_TYPES = (str, int, bool, type(None))
_EVENT_DUMP = event_dump_serializer()
_OWN_POST_INIT = (BaseModel.model_post_init.__code__, Event.model_post_init.__code__)
"""pydantic's ``model_post_init`` (a class with private attributes gets a copy of the second)."""
_plain_fields: dict[type[BaseModel], dict[str, tuple[type, ...] | None] | None] = {}


def _fields_of(cls: type[BaseModel]) -> dict[str, tuple[type, ...] | None] | None:
    """Per field of ``cls``, the types its annotation names (``None``: something else), if ``cls`` dumps and
    validates its fields as pydantic does by default (no validators, serializers other than ``Event``'s own,
    computed fields, extras, own ``__eq__``, post-init hooks); else ``None``. Looked up once per class."""
    if cls in _plain_fields:
        return _plain_fields[cls]
    found: dict[str, tuple[type, ...] | None] | None = None
    d = cls.__pydantic_decorators__
    serializers = [s.func for s in d.model_serializers.values()]
    if (
        not (d.validators or d.field_validators or d.root_validators or d.field_serializers)
        and not (d.model_validators or d.computed_fields)
        and serializers in ([], [_EVENT_DUMP])
        and set(cls.__private_attributes__) <= {"_data"}
        and cls.model_config.get("extra") in (None, "ignore")
        and cls.__eq__ is BaseModel.__eq__
        and getattr(cls.model_post_init, "__code__", None) in _OWN_POST_INIT  # none of the class's own
        and not getattr(cls, "__pydantic_root_model__", False)
    ):
        found = {}
        for name, info in cls.model_fields.items():
            ann = info.annotation
            args = get_args(ann) if get_origin(ann) in (Union, UnionType) else (ann,)
            found[name] = args if all(isinstance(a, type) for a in args) else None
    if len(_plain_fields) < MAX_MEMO:
        _plain_fields[cls] = found
    return found


def _static_fields(model: BaseModel) -> dict[str, tuple[type, ...] | None] | None:
    """:func:`_fields_of` ``model``'s class, when the model has no dynamic fields either (pydantic extras, an
    event's ``_data``): its dump is then its declared fields alone."""
    fields = _fields_of(type(model))
    if fields is None or getattr(model, "__pydantic_extra__", None):
        return None
    private = getattr(model, "__pydantic_private__", None)
    if private and private.get("_data"):
        return None
    return fields


def _dump_gives_back(model: BaseModel) -> bool:
    """Whether :func:`exact_form` of ``model`` is surely ``None``, told without dumping or validating it.

    True when the model's dump is its field values as they are and each is plain JSON (str, int, bool,
    ``None``, a finite float): then the record is exact, or the values encode untagged. An ``Enum``
    value (LlamaIndex's ``StepStateChanged``) also qualifies when its field is annotated with its class
    and every other field's annotation names its value's exact type, so the dump validates back equal.
    Anything else (nested models, containers, ``_data`` extras) takes the full check.
    """
    fields = _static_fields(model)
    if fields is None:
        return False
    values = model.__dict__
    enums = False
    for name in fields:
        if name not in values:
            return False
        t = type(values[name])
        if t is float:
            if not math.isfinite(values[name]):
                return False
        elif t not in _PLAIN_TYPES:
            if not issubclass(t, Enum) or t not in (fields[name] or ()):
                return False
            enums = True
    if enums:
        for name, types in fields.items():
            if types is None or type(values[name]) not in types:
                return False
    return True


def plain_key(model: BaseModel) -> tuple[Any, ...] | None:
    """What alone decides this runtime's serializer's record of ``model``, or ``None``.

    For a model whose class dumps as pydantic does by default (:func:`_fields_of`), with no dynamic
    fields and every value a str, int, bool, ``None`` or an enum: its class and each value with its exact
    type. The loop publishes a ``StepStateChanged`` at every step start and end, mostly the same few over
    and over (step, state, worker slot, event name); the run records each distinct one once.
    """
    fields = _static_fields(model)
    if fields is None:
        return None
    values = model.__dict__
    key: list[Any] = [type(model)]
    for name in fields:
        if name not in values:
            return None
        value = values[name]
        t = type(value)
        if t not in _PLAIN_TYPES and not isinstance(value, Enum):
            return None
        key.append((t, value))
    return tuple(key)


_EVENT_GETATTR = Event.__getattr__
_no_class_name: dict[type, bool] = {}
"""Per class: an event class with no ``class_name`` of its own (its instances may still have a dynamic one)."""


def event_record(value: Any) -> dict[str, Any] | None:
    """LlamaIndex's ``JsonSerializer.serialize_value`` record of an event, made without its first probe.

    That method first asks ``hasattr(value, "class_name")`` (llama_index.core components); on an event
    the answer comes from ``Event.__getattr__`` raising a formatted ``AttributeError``, which cost as much
    as the rest of the record (a run records an event per step start and end). Here the same answer is
    read from the event's class, fields and dynamic fields; ``None`` (LlamaIndex's own method then) for
    anything that is not such an event or might have a ``class_name``.
    """
    cls = type(value)
    plain = _no_class_name.get(cls)
    if plain is None:
        plain = (
            issubclass(cls, Event)
            and cls.__getattr__ is _EVENT_GETATTR
            and not hasattr(cls, "class_name")
            and "class_name" not in cls.__private_attributes__
            and "class_name" not in cls.model_fields
        )
        if len(_no_class_name) < MAX_MEMO:
            _no_class_name[cls] = plain
    if not plain or "class_name" in value.__dict__:
        return None
    private = value.__pydantic_private__  # Event's _data (dynamic fields), read past its __getattr__
    if private is None or "class_name" in private.get("_data", ()):
        return None
    return {"__is_pydantic": True, "value": value.model_dump(mode="json"), "qualified_name": get_qualified_name(value)}


def exact_form(model: BaseModel, dumped: Any, serializer: JsonSerializer) -> dict[str, Any] | None:
    """The exact field values of ``model`` when its JSON dump ``dumped`` would not give it back, else ``None``.

    A field JSON cannot restore (a tuple or int-keyed dict under ``Any``, a ``StartEvent``'s keyword
    arguments) is read back from this; a model that cannot be compared or encoded keeps LlamaIndex's
    record alone, as before. Most events need no check (:func:`_dump_gives_back`): a run publishes one
    ``StepStateChanged`` per step start and end, and validating each back cost a wide fan-out ~10% of
    its workflow time.
    """
    if _dump_gives_back(model):
        return None
    try:
        with serializer.validation_context():
            if type(model).model_validate(dumped) == model:
                return None
        envelope = encode(model.model_dump(), what=f"a {type(model).__name__}")
    except Exception:
        return None
    return None if envelope.type is None else envelope.to_json()


def add_exact_forms(model: BaseModel, dumped: Any, serializer: JsonSerializer) -> None:
    """Put :func:`exact_form` beside each model-valued field's record in ``dumped`` (``model``'s JSON dump).

    LlamaIndex's tick and step-output models dump the events they carry with its own module-level
    serializer, which this runtime's cannot reach: their records get the exact form here.
    """
    if not isinstance(dumped, dict):
        return
    for name in type(model).model_fields:
        value = getattr(model, name, None)
        record = dumped.get(name)
        if isinstance(value, BaseModel) and isinstance(record, dict) and record.get("__is_pydantic"):
            exact = exact_form(value, record.get("value"), serializer)
            if exact is not None:
                record[EXACT_KEY] = exact


def from_exact_form(serializer: JsonSerializer, data: dict[str, Any]) -> BaseModel | None:
    """The model a record with :data:`EXACT_KEY` holds, or ``None`` to read the record as LlamaIndex does."""
    name = data.get("qualified_name")
    exact = data.get(EXACT_KEY)
    if not data.get("__is_pydantic") or not isinstance(name, str) or not isinstance(exact, dict):
        return None
    try:
        cls = serializer.resolve_class(name)
        values = decode(Envelope.from_json(exact))
        with serializer.validation_context():
            model = cls.model_validate(values)
    except Exception:
        return None
    return model if isinstance(model, BaseModel) else None


TAGGED_KEY = "__tagged"
"""A one-key record holding a value plain JSON would change, in the engine's tagged form."""


_SCALARS_JSON_CHANGES = frozenset(
    {datetime.datetime, datetime.date, datetime.time, datetime.timedelta, uuid.UUID, Decimal, complex}
)
"""Scalars JSON writes as strings or refuses (pydantic's JSON makes them strings, a NaN ``None``)."""


def tagged_form(serializer: JsonSerializer, value: Any) -> dict[str, Any] | None:
    """``value`` (a tuple, set, bytes, a dict with non-str keys, or a scalar JSON would change: ``datetime``,
    ``date``, ``time``, ``timedelta``, ``UUID``, ``Decimal``, ``Path``, ``complex``, a NaN or infinite float) as a
    :data:`TAGGED_KEY` record, else ``None``.

    LlamaIndex's serializer leaves these to ``json.dumps``, which makes lists and str keys of them
    (or refuses sets and bytes). Their items go through ``serializer`` first (events and models keep
    LlamaIndex's records), then the container is tagged (``docs/values.md``).
    """
    t = type(value)
    inner: Any
    if t in _SCALARS_JSON_CHANGES or (t is float and not math.isfinite(value)) or isinstance(value, PurePath):
        try:
            return {TAGGED_KEY: encode(value, what=f"a {t.__name__}").to_json()}
        except Exception:
            return None
    if t is tuple:
        inner = tuple(serializer.serialize_value(x) for x in value)
    elif t is set or t is frozenset or t is bytes or t is bytearray:
        inner = value
    elif t is dict and any(type(k) is not str for k in value):
        inner = {k: serializer.serialize_value(v) for k, v in value.items()}
    else:
        return None
    try:
        return {TAGGED_KEY: encode(inner, what=f"a {t.__name__}").to_json()}
    except Exception:
        return None


def from_tagged_form(serializer: JsonSerializer, data: dict[str, Any]) -> tuple[bool, Any]:
    """``(True, value)`` for a :func:`tagged_form` record, ``(False, None)`` for anything else."""
    if len(data) != 1 or not isinstance(data.get(TAGGED_KEY), dict):
        return False, None
    try:
        value = decode(Envelope.from_json(data[TAGGED_KEY]))
    except Exception:
        return False, None
    if type(value) is tuple:
        return True, tuple(serializer.deserialize_value(x) for x in value)
    if type(value) is dict:
        return True, {k: serializer.deserialize_value(v) for k, v in value.items()}
    return True, value


_EMPTY_DICT_STATE = InMemoryStateStore(DictState()).to_dict(JsonSerializer())
"""An empty ``DictState`` store's payload (``InMemoryStateStore.to_dict``)."""
_EMPTY_DICT_TREE = InMemoryStateStore(DictState()).checkpoint().to_dict()
"""The same as the run holds it (``StateCheckpoint.to_dict``, the state tree)."""


class RunStateStore(InMemoryStateStore[Any]):
    """A step's ``ctx.store``: LlamaIndex's in-memory store, recording with the runtime's serializer, that
    refuses at ``set`` (and ``set_state``, and the end of an ``edit_state`` block) a value that would not
    reach the next step as it is (``_serializer.check_store_value``), naming the key and the type."""

    check: Any = None
    """``check(path, value)``, raising ``StoreValueRefused``; ``None``: no check."""

    async def set(self, path: str, value: Any) -> None:
        if self.check is not None:
            self.check(path, value)
        await super().set(path, value)

    async def set_state(self, state: Any) -> None:
        if self.check is not None:
            self._check_state(state)
        await super().set_state(state)

    def _check_state(self, state: Any) -> None:
        assert self.check is not None
        if isinstance(state, DictState):
            for key, value in state.items():  # DictState holds arbitrary values, each checked
                self.check(key, value)
        else:
            self.check("<state>", state)

    @contextlib.asynccontextmanager
    async def edit_state(self) -> AsyncIterator[Any]:
        async with super().edit_state() as state:
            yield state
            if self.check is not None:
                self._check_state(state)  # before the edit commits: a refused value never lands


def run_store(
    serializer: BaseSerializer, data: dict[str, Any] | None, state_type: type[Any]
) -> InMemoryStateStore[Any]:
    """A run's ``ctx.store`` from its JSON (``None``: a fresh ``state_type``), recording with ``serializer``.

    ``InMemoryStateStore`` records its checkpoints and diffs with a plain ``JsonSerializer`` of its
    own; this runtime's serializer keeps tuples, sets, bytes, dates, UUIDs, decimals and non-finite
    floats (``tagged_form``), and its store refuses at ``set`` what it cannot keep.
    """
    # None: a fresh state; else InMemoryStateStore.from_dict's decoding (an empty DictState needs none: the
    # store of a workflow that never writes it, which every invocation of a wide fan-out would decode).
    if data is None:
        state = state_type()
    elif not data or data in (_EMPTY_DICT_TREE, _EMPTY_DICT_STATE):
        state = DictState()
    else:
        state = decode_seed_state(data, serializer)
    ours = getattr(serializer, "reads_exact_form", False)
    store = in_memory_store(
        RunStateStore, state, serializer if ours and isinstance(serializer, JsonSerializer) else None
    )
    if ours:
        store.check = lambda path, value: check_store_value(serializer, path, value)
    return store


def encode_result(serializer: JsonSerializer, value: Any) -> dict[str, Any]:
    """A ``StopEvent``'s result for the wire, as the default runtime hands it over.

    The serializer's ``serialize_value`` keeps events and models (as tagged dicts) but leaves tuples,
    sets, bytes and dicts with non-str keys as they are, which JSON would turn into lists and str
    keys. What plain JSON keeps goes as ``stop_result`` (as before); anything else as
    ``stop_result_tagged``, the engine's tagged envelope (``docs/values.md``), read back exactly.
    """
    data = serializer.serialize_value(value)
    try:
        envelope = encode(data, what="the StopEvent's result")
    except Exception:
        return {"stop_result": data}
    if envelope.type is None:
        return {"stop_result": data}
    return {"stop_result_tagged": envelope.to_json()}


def decode_result(serializer: JsonSerializer, entry: dict[str, Any]) -> Any:
    """:func:`encode_result`'s value back (either key; results recorded before carry ``stop_result``)."""
    tagged = entry.get("stop_result_tagged")
    data = decode(Envelope.from_json(tagged)) if isinstance(tagged, dict) else entry.get("stop_result")
    return serializer.deserialize_value(data)


def encode_outputs(outputs: list[StepWorkerOutput], serializer: BaseSerializer | None = None) -> list[dict[str, Any]]:
    """A step's results and recorded sends, each LlamaIndex's own model dumped to JSON.

    A plain ``StopEvent``'s ``result`` also goes through the serializer's ``serialize_value``
    (``stop_result``): the model dump turns events and models inside it into dicts, and the default
    runtime hands the caller the objects themselves.
    """
    encoded = []
    for item in outputs:
        kind = "sent" if isinstance(item, SentEvent) else item.type
        try:
            data = item.model_dump(mode="json")
        except Exception:
            kept = _keep_result_in_process(item)
            if kept is None:
                raise
            item, data = kept, kept.model_dump(mode="json")
        entry: dict[str, Any] = {"kind": kind, "data": data}
        if getattr(serializer, "reads_exact_form", False):
            add_exact_forms(item, entry["data"], serializer)  # type: ignore[arg-type]
        if (
            isinstance(item, StepWorkerResult)
            and type(item.result) is StopEvent
            and isinstance(serializer, JsonSerializer)
            and item.result.result is not None
        ):
            entry.update(encode_result(serializer, item.result.result))
        if isinstance(item, StepWorkerFailed):
            state = exception_state(item.exception)
            if state is not None:
                entry["exception_state"] = state
        if isinstance(item, AddWaiter):
            from temporal_workflows._llama_runtime._registry import note_class

            # The class it waits for is recorded by name: one defined in a function (a test, a notebook
            # cell), which nothing else declares, is read back by that name in this process.
            note_class(item.event_type)
        if isinstance(item, AddWaiter) and item.requirements and isinstance(serializer, JsonSerializer):
            # AddWaiter's own dump writes its requirements as {} (has_requirements=True), and a waiter with
            # no requirements takes any event of its type: they go beside it, as JSON, when they can.
            try:
                requirements = serializer.serialize_value(item.requirements)
                json.dumps(requirements)
            except Exception:
                pass
            else:
                entry["requirements"] = requirements
        encoded.append(entry)
    return encoded


IN_PROCESS_KEY = "__in_process_result"
"""A ``StopEvent``'s result that JSON cannot carry, kept in the process that made it: ``{key: token}``."""


def _keep_result_in_process(item: StepWorkerOutput) -> StepWorkerResult | None:
    """A plain ``StopEvent`` whose result JSON cannot carry (LlamaIndex's feature walkthrough returns a
    ``Resource``, a DB connection): its result stays in this process, and the wire carries a token."""
    if not (isinstance(item, StepWorkerResult) and type(item.result) is StopEvent):
        return None
    from temporal_workflows._llama_runtime._registry import keep_in_process

    token = keep_in_process(item.result.result)
    return item.model_copy(update={"result": StopEvent(result={IN_PROCESS_KEY: token})})


def resolve_in_process(stop: StopEvent, *, strict: bool) -> StopEvent:
    """``stop`` with a result kept in process (``_keep_result_in_process``) given back as the object.

    Made in another process (a worker elsewhere) or no longer kept, it cannot be: ``strict`` raises a
    ``WorkflowRuntimeError`` saying so (``await handler``); otherwise ``stop`` stays as it is (the stream).
    """
    result = stop.result if type(stop) is StopEvent else None
    if not (isinstance(result, dict) and len(result) == 1 and isinstance(result.get(IN_PROCESS_KEY), str)):
        return stop
    from temporal_workflows._llama_runtime._registry import in_process

    found, value = in_process(result[IN_PROCESS_KEY])
    if found:
        return StopEvent(result=value)
    if strict:
        raise WorkflowRuntimeError(
            "the run's result cannot be serialized, and it was made in another process (or too long ago): "
            "only a caller in the worker's own process (worker=True) gets such a result back; return a "
            "value JSON can carry"
        )
    return stop


def decode_outputs(serializer: BaseSerializer, data: list[dict[str, Any]]) -> list[StepWorkerOutput]:
    out: list[StepWorkerOutput] = []
    with serializer.validation_context():
        for item in data:
            model = _OUTPUT_KINDS[item["kind"]]
            decoded = model.model_validate(item["data"])
            if ("stop_result" in item or "stop_result_tagged" in item) and isinstance(serializer, JsonSerializer):
                typed = StopEvent(result=decode_result(serializer, item))
                decoded = decoded.model_copy(update={"result": typed})
            if "exception_state" in item and isinstance(decoded, StepWorkerFailed):
                exact = rebuild_exception(
                    serializer,
                    str(item["data"]["exception"]["exception_type"]),
                    str(item["data"]["exception"]["exception_message"]),
                    item["exception_state"],
                )
                if exact is not None:
                    decoded = decoded.model_copy(update={"exception": exact})
            if "requirements" in item and isinstance(serializer, JsonSerializer):
                decoded = decoded.model_copy(
                    update={"requirements": serializer.deserialize_value(item["requirements"])}
                )
            out.append(decoded)  # type: ignore[arg-type]
    return out


MAX_EXCEPTION_STATE_CHARS = 16_384
"""An exception's args and attributes travel beside LlamaIndex's record of it up to this size."""


def exception_state(e: BaseException) -> dict[str, Any] | None:
    """An exception's ``args`` and attributes when plain JSON carries them, for ``rebuild_exception``.

    LlamaIndex records an exception as its class name and ``str()`` only, and rebuilds it as
    ``cls(str(e))``: another exception when the class takes other arguments (``KeyError('k')`` reads
    ``"'k'"`` then, ``MyError(42, "bad")`` cannot be rebuilt at all and arrives as
    ``UnreconstructedException``), and without its attributes (``e.code``).
    """
    from temporal_workflows._llama_runtime._registry import note_class

    note_class(type(e))  # a class defined in a function is read back by name in this process
    try:
        state = {"args": list(e.args), "attrs": {k: v for k, v in vars(e).items() if not k.startswith("__")}}
        text = json.dumps(state)
        if len(text) > MAX_EXCEPTION_STATE_CHARS or json.loads(text) != state:
            return None
    except (TypeError, ValueError):
        return None
    return state


def rebuild_exception(
    serializer: BaseSerializer | None, type_name: str, message: str, state: Any
) -> BaseException | None:
    """The exception ``exception_state`` recorded, as the step raised it: its class, its ``args`` and its
    attributes (its ``__init__`` is not called again: it may take other arguments than it passed on),
    when the class resolves (importable, declared, or seen in this process) and the result reads as the
    recorded message. ``None`` otherwise (LlamaIndex's own rebuild then stands)."""
    if not (isinstance(state, dict) and isinstance(state.get("args"), list) and isinstance(state.get("attrs"), dict)):
        return None
    try:
        if type_name.startswith("builtins."):
            import builtins

            cls = getattr(builtins, type_name.removeprefix("builtins."))
        elif serializer is not None:
            cls = _resolve_class(serializer, type_name)
        else:
            from temporal_workflows._llama_runtime._registry import seen_type

            cls = seen_type(type_name) or import_module_from_qualified_name(type_name)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            return None
        exc = cls.__new__(cls, *state["args"])
        exc.args = tuple(state["args"])
        for k, v in state["attrs"].items():
            setattr(exc, k, v)
    except Exception:
        return None
    return exc if str(exc) == message else None
