"""Which classes decoding may build: the type registry, and the classes a value may be.

A value crosses a superstep boundary as JSON that names its class by a type
key (``"module:QualName"``). Decoding turns a key back into a class only
through this registry, never by importing: see :func:`resolve`. A class gets
in by being declared (named, directly or through the fields of a declared
class, by a graph's handler annotations: :func:`declare`), by being
registered (:func:`register_type`), by being encoded in this process, or by
being one of this library's own types.

The classes a value may be, besides plain JSON and the standard types the
codec knows by name (``serde``), are its *kinds*: pydantic models,
dataclasses, ``Enum`` members, ``NamedTuple`` s, and *plain classes*: any
ordinary Python class (no custom ``__new__``, not abstract) whose instances
keep their attributes in a ``__dict__``. An instance is stored as those
attributes and rebuilt by calling the class with them when its ``__init__``
takes exactly them by name; otherwise (a marker class with no ``__init__``, an
``__init__`` that computes attributes or takes ``*args``) it is rebuilt as
``copy`` rebuilds it: ``object.__new__`` and the attributes put back, running
nothing of the class's.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import sys
import types
import typing
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from temporal_workflows._errors import NotSerializableError

__all__ = [
    "Kind",
    "PlainSignature",
    "class_kind",
    "library_types",
    "declare",
    "is_structured_type",
    "plain_signature",
    "register_checkpoint_type",
    "register_type",
    "register_value_type",
    "registered",
    "resolve",
    "type_key",
]

Kind = Literal["model", "dataclass", "enum", "namedtuple", "plain", "value"]

_REGISTRY: dict[str, type] = {}
_VALUE_TYPES: dict[type, None] = {}
"""Classes that are neither models nor dataclasses but have a pydantic schema (``register_value_type``)."""
_MODULES: set[str] = set()
"""Modules that define a registered type: their other models, dataclasses, enums and named tuples decode too."""
_SIBLING_KINDS = frozenset({"model", "dataclass", "enum", "namedtuple"})
"""Kinds a module's other classes may be to decode as siblings: constructing them runs no ``__init__`` of the
user's (pydantic validates, an enum looks its member up). Plain classes must be declared or registered."""


def type_key(tp: type) -> str:
    """The stable name a type is stored under."""
    return f"{tp.__module__}:{tp.__qualname__}"


def is_structured_type(tp: object) -> bool:
    """Whether ``tp`` is a pydantic model, a dataclass or a registered value type (what routing validates JSON into)."""
    return isinstance(tp, type) and (issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp) or tp in _VALUE_TYPES)


@dataclass(frozen=True, slots=True)
class PlainSignature:
    """What a plain class's ``__init__`` takes: every parameter, and those without a default.

    ``params`` is ``None`` when the ``__init__`` cannot be called with
    attributes by name (the class has none of its own but ``object``'s, or it
    takes ``*args``, ``**kwargs`` or positional-only parameters): instances are
    then always rebuilt without calling it.
    """

    params: frozenset[str] | None
    required: frozenset[str]

    def takes(self, names: AbstractSet[str]) -> bool:
        """Whether calling ``__init__`` with exactly these attributes, by name, is how to rebuild the instance."""
        return self.params is not None and names <= self.params and self.required <= names


_PLAIN: dict[type, PlainSignature | str] = {}


def _own_init(tp: type) -> Any:
    """The ``__init__`` instances of ``tp`` run: the first one defined along its MRO."""
    return next((vars(k)["__init__"] for k in tp.__mro__ if "__init__" in vars(k)), None)


def plain_signature(tp: type) -> PlainSignature | str:
    """The constructor of a would-be plain class, or why it is not one.

    A plain class is an ordinary Python class: not a builtin nor a standard
    library class, no custom ``__new__`` (rebuilding must run nothing of the
    class's but, at most, the ``__init__`` that takes its attributes), not
    abstract. Whether an *instance* is rebuilt by its ``__init__`` (its
    attributes are that function's named parameters) or without it is decided
    per instance, from its attribute names, the same way where it is encoded
    and where it is decoded.
    """
    cached = _PLAIN.get(tp)
    if cached is not None:
        return cached
    found: PlainSignature | str
    init = _own_init(tp)
    new: Any = tp.__new__
    if tp.__module__ == "builtins" or new is not object.__new__:
        found = "it is not an ordinary Python class"
    elif tp.__module__.partition(".")[0] in sys.stdlib_module_names:
        found = "it is a standard library class this library does not know how to store"
    elif inspect.isabstract(tp):
        found = "it is abstract"
    elif not inspect.isfunction(init):
        found = PlainSignature(None, frozenset())  # object's __init__: rebuilt without calling it
    else:
        params = list(inspect.signature(init).parameters.values())[1:]
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        if any(p.kind not in named for p in params):
            found = PlainSignature(None, frozenset())  # *args, **kwargs: rebuilt without calling it
        else:
            found = PlainSignature(
                frozenset(p.name for p in params),
                frozenset(p.name for p in params if p.default is inspect.Parameter.empty),
            )
    _PLAIN[tp] = found
    return found


def class_kind(tp: object) -> Kind | None:
    """How a value of class ``tp`` is stored, if it can be (see the module docstring)."""
    if not isinstance(tp, type):
        return None
    if issubclass(tp, BaseModel):
        return "model"
    if tp in _VALUE_TYPES:
        return "value"
    if dataclasses.is_dataclass(tp):
        return "dataclass"
    if issubclass(tp, enum.Enum):
        return "enum"
    if issubclass(tp, tuple) and isinstance(getattr(tp, "_fields", None), tuple):
        return "namedtuple"
    if isinstance(plain_signature(tp), PlainSignature):
        return "plain"
    return None


def _add(tp: type) -> None:
    _REGISTRY[type_key(tp)] = tp
    if class_kind(tp) in _SIBLING_KINDS:
        _MODULES.add(tp.__module__)


def register_value_type(tp: type) -> None:
    """Let instances of ``tp``, a class pydantic can validate and serialize, travel by type key.

    For classes of other libraries that are neither models nor dataclasses but
    define ``__get_pydantic_core_schema__`` (the agent layer gives Agent
    Framework's messages one): their values, and models and dataclasses with
    fields of their type, then cross boundaries like any model, stored as
    pydantic dumps them and rebuilt by pydantic's validation.
    """
    if not isinstance(tp, type) or not hasattr(tp, "__get_pydantic_core_schema__"):
        raise TypeError(f"{tp!r} defines no pydantic schema (__get_pydantic_core_schema__)")
    _VALUE_TYPES[tp] = None
    register_type(tp)


def register_type(tp: type) -> None:
    """Allow values of class ``tp`` (and of the classes its fields declare) to be decoded in this process.

    Building a graph declares every class its handler annotations name, and
    the classes their fields name in turn; call this for classes that travel
    only inside ``Any``-typed values or state. ``tp`` may be a pydantic model,
    a dataclass, an ``Enum``, a ``NamedTuple`` or a plain class (an ordinary
    class whose instances keep their attributes in a ``__dict__``).

    Raises:
        TypeError: ``tp`` is none of these (the message says why), or a
            standard type that needs no registration.
    """
    if not isinstance(tp, type):
        raise TypeError(f"register_type takes a class, not {tp!r}")
    if tp.__module__ == "builtins" or tp.__module__ in ("datetime", "decimal", "uuid", "pathlib"):
        raise TypeError(
            f"{tp.__qualname__} cannot be registered: only pydantic models, dataclasses, enums, named tuples "
            "and plain classes can (the standard types that JSON loses are stored by name and need none)"
        )
    if class_kind(tp) is None:
        why = plain_signature(tp)
        raise TypeError(
            f"{tp.__module__}.{tp.__qualname__} cannot be registered: {why}; only pydantic models, dataclasses, "
            "enums, named tuples and ordinary classes (no custom __new__, not abstract) can"
        )
    declare([tp], explicit=True)


register_checkpoint_type = register_type
"""Agent Framework's name for :func:`register_type` (``agent_framework.register_checkpoint_type``)."""


def registered(tp: type) -> None:
    """Register a class this process declares or encodes; it replaces an earlier class of the same key.

    A class defined again under the same name (a graph built by a function
    called twice, a notebook cell run again) is the one the code now holds:
    values decode as instances of it, so ``isinstance`` against it holds, as
    it does in Agent Framework, which passes the objects themselves.
    """
    _REGISTRY[type_key(tp)] = tp
    if class_kind(tp) in _SIBLING_KINDS:
        _MODULES.add(tp.__module__)


def _field_annotations(tp: type, kind: Kind) -> list[Any]:
    """The annotations a class's fields (or constructor parameters) declare; none if they do not resolve."""
    try:
        if kind == "model":
            return [f.annotation for f in typing.cast(type[BaseModel], tp).model_fields.values()]
        if kind == "plain":
            init = _own_init(tp)
            if not inspect.isfunction(init):
                return []
            hints = typing.get_type_hints(init)
            hints.pop("return", None)
            return list(hints.values())
        if kind in ("dataclass", "namedtuple"):
            return list(typing.get_type_hints(tp).values())
    except Exception:  # unresolvable forward references: the class itself still registers
        return []
    return []


def declare(annotations: Iterable[Any], *, explicit: bool = False) -> None:
    """Register every class named in ``annotations``, and every class their fields name, recursively.

    What a graph declares: ``build()`` passes its handlers' message, output,
    request and response annotations. Classes that are none of the storable
    kinds are skipped (a ``WorkflowContext``, a protocol, ...). A class
    replaces one registered earlier under the same key (``registered``).
    """
    seen: set[int] = set()
    todo = list(annotations)
    while todo:
        tp = todo.pop()
        if id(tp) in seen or tp is None or isinstance(tp, (str, int, bool, bytes, enum.Enum)):
            continue
        seen.add(id(tp))
        origin = get_origin(tp)
        if origin is not None:
            if origin is not Literal:
                todo.extend(get_args(tp))
            continue
        kind = class_kind(tp)
        if kind is None or not isinstance(tp, type) or tp.__module__ == "builtins":
            continue
        if explicit:
            _add(tp)
        else:
            registered(tp)
        todo.extend(_field_annotations(tp, kind))


_LIBRARY_MODULES: list[types.ModuleType] = []


def library_types(module: types.ModuleType) -> None:
    """Name a module of the library's own types that travel in envelopes (events, ``RequestTimedOut``).

    ``_events.py`` and ``_requests.py`` name themselves when imported (the
    package's ``__init__`` imports both, so every process that decodes has
    them); the engine never imports them, which would make it depend on the
    vocabulary built on it.
    """
    _LIBRARY_MODULES.append(module)


def _register_library_types() -> None:
    """Register the library's own types that travel in envelopes (see :func:`library_types`).

    They are registered when encoded, but a process that only decodes them (a
    client reading a run's event stream) may never have encoded one. Never by
    a name taken from a payload.
    """
    for module in _LIBRARY_MODULES:
        for obj in list(vars(module).values()):
            if isinstance(obj, type) and obj.__module__ == module.__name__ and class_kind(obj) in _SIBLING_KINDS:
                registered(obj)


_library_types_registered = False


def _sibling(key: str) -> type | None:
    """The class ``key`` names in a module that defines a registered type, if that module defines one.

    Read from the module's (and enclosing classes') ``__dict__``, never with
    ``getattr``, so no lazy ``__getattr__`` runs; the class found must be
    defined there under that very name (not imported into the module), and
    be a model, dataclass, enum or named tuple.
    """
    module_name, sep, qualname = key.partition(":")
    module = sys.modules.get(module_name) if sep and module_name in _MODULES else None
    if type(module) is not types.ModuleType:  # not loaded, or a lazy module that would load on access
        return None
    namespace: Any = vars(module)
    found: object = None
    for part in qualname.split("."):
        found = namespace.get(part)
        if not isinstance(found, type):
            return None
        namespace = vars(found)
    if isinstance(found, type) and class_kind(found) in _SIBLING_KINDS and type_key(found) == key:
        return found
    return None


def resolve(key: str) -> type:
    """The class ``key`` names, if decoding may build it (see the module docstring); never imports anything.

    Raises:
        NotSerializableError: The key names no class this process declared,
            registered or encoded (nor a sibling of one).
    """
    global _library_types_registered
    tp = _REGISTRY.get(key)
    if tp is not None:
        return tp
    if not _library_types_registered:
        _library_types_registered = True
        _register_library_types()
        tp = _REGISTRY.get(key)
    if tp is None:
        tp = _sibling(key)
    if tp is None:
        raise NotSerializableError(
            f"cannot decode a value of type {key!r}: the type is not registered in this process (build or "
            "import the graph that names it, or call temporal_workflows.register_type(<the class>))"
        )
    _REGISTRY[key] = tp
    return tp
