"""Which LlamaIndex ``Workflow`` instances this process hosts, and which run adapter is current.

The Temporal workflow and the step activity are module-level, so they find
the user's ``Workflow`` here: by the exact instance a run was started from
when this process started it (instances of one class may differ in timeout,
verbosity, resources), else by ``workflow_name`` (a worker process that
built the same workflow).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from temporal_workflows._llama_runtime._options import StepOptions
from temporal_workflows._llama_runtime._protocol import PROCESS_NONCE

if TYPE_CHECKING:
    from workflows.runtime.types.plugin import InternalRunAdapter
    from workflows.workflow import Workflow

__all__ = [
    "UnknownWorkflowError",
    "current_adapter",
    "hosted",
    "in_process",
    "instance_key",
    "keep_in_process",
    "lookup",
    "note_class",
    "note_type",
    "options_for",
    "remember",
    "seen_type",
]

_lock = threading.Lock()
_by_key: dict[str, Workflow] = {}
_by_name: dict[str, Workflow] = {}
_options: dict[str, StepOptions] = {}

current_adapter: ContextVar[InternalRunAdapter | None] = ContextVar("temporal_llama_adapter", default=None)
"""The adapter of the run (workflow side) or step invocation (activity side) running in this context."""


class UnknownWorkflowError(LookupError):
    """This process hosts no LlamaIndex workflow by that name (build it with the runtime first)."""


def instance_key(workflow: Workflow) -> str:
    return f"{PROCESS_NONCE}:{id(workflow)}"


def remember(workflow: Workflow, options: StepOptions) -> None:
    with _lock:
        _by_key[instance_key(workflow)] = workflow
        _by_name[workflow.workflow_name] = workflow
        _options[instance_key(workflow)] = options


def hosted() -> list[Workflow]:
    """Every LlamaIndex workflow this process hosts (the last built of each ``workflow_name``)."""
    with _lock:
        return list(_by_name.values())


def options_for(workflow: Workflow) -> StepOptions:
    with _lock:
        return _options.get(instance_key(workflow), StepOptions())


def lookup(workflow_name: str, key: str | None) -> Workflow:
    with _lock:
        if key is not None and key in _by_key:
            return _by_key[key]
        found = _by_name.get(workflow_name)
    if found is None:
        raise UnknownWorkflowError(
            f"this worker hosts no LlamaIndex workflow named {workflow_name!r}: build it with the "
            "TemporalRuntime (MyWorkflow(runtime=rt) or inside rt.registering()) in the worker's process"
        )
    return found


_seen_types: dict[str, type[Any]] = {}


def note_type(value: object) -> None:
    """Remember the class of an event this process serialized, by the names its records carry.

    A class defined inside a function (a test, a notebook cell) cannot be imported by name; this
    process can still read the records it wrote (``_DeclaredTypesSerializer``).
    """
    note_class(type(value))


def note_class(cls: type[Any]) -> None:
    """Remember a class by the names its records carry (an event class a waiter waits for, say).

    Every class, not only those defined in a function: a program run by ``runpy`` or ``exec`` (a
    notebook's kernel, a test harness) defines its classes in a module that cannot be imported by name.
    """
    qualified = f"{cls.__module__}.{cls.__qualname__}"
    if _seen_types.get(qualified) is cls:
        return
    with _lock:
        if "<locals>" in cls.__qualname__:
            _seen_types[f"{cls.__module__}.{cls.__name__}"] = cls
        _seen_types[qualified] = cls


def seen_type(qualified_name: str) -> type[Any] | None:
    with _lock:
        return _seen_types.get(qualified_name)


def _debug_state() -> dict[str, Any]:
    return {"keys": sorted(_by_key), "names": sorted(_by_name)}


_kept: OrderedDict[str, Any] = OrderedDict()
_kept_ids = itertools.count()
MAX_KEPT = 256
"""Run results kept in process (``keep_in_process``): the oldest go first beyond this many."""


def keep_in_process(value: Any) -> str:
    """Keep a value the wire cannot carry (a run's result that is a DB connection, say) in this process,
    under a token that names the process: a caller in this process (``worker=True``) gets the very object
    back (``in_process``), as the default runtime hands it over; one elsewhere cannot."""
    token = f"{PROCESS_NONCE}:{next(_kept_ids)}"
    with _lock:
        _kept[token] = value
        while len(_kept) > MAX_KEPT:
            _kept.popitem(last=False)
    return token


def in_process(token: str) -> tuple[bool, Any]:
    """``(True, value)`` for a token ``keep_in_process`` gave in this process and still keeps."""
    with _lock:
        if token in _kept:
            return True, _kept[token]
    return False, None
