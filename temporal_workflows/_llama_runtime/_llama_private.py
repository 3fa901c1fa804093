"""Every touch of a private LlamaIndex name, in one place, checked against the pinned version at import.

``TemporalRuntime`` hosts LlamaIndex's own loop through its public runtime contract
(``workflows.runtime.types.plugin``: ``Runtime``, ``InternalRunAdapter``,
``ExternalRunAdapter``, ``run_context``, ``as_step_worker_function``, ...). A few things
that contract does not (yet) expose are read here, and only here:

* the loop's broker state while it runs (the ``status``, ``pending_requests`` and snapshot
  queries; the run's final state): ``_ControlLoopRunner`` and its ``state``;
* folding a tick into a broker state at a recorded time (continue-as-new, old histories):
  ``_reduce_tick``;
* the internal ``Context`` a run's loop is handed: ``Context._create_internal``;
* a workflow's steps, their configs, its timeout and run limit (signatures, build ids):
  ``Workflow._get_steps``, ``_step_configs``, ``_timeout``, ``_num_concurrent_runs``,
  ``_step_functions_version``; a copy with the run starter's timeout (``_timeout``, ``_broker_config``);
* a serializer's allow-list (``JsonSerializer._allowed_type_names``);
* an in-memory store built around this runtime's serializer (``InMemoryStateStore._serializer``);
* exceptions and collection payloads in LlamaIndex's own wire form (``_serialize_exception``,
  ``_deserialize_exception``, ``_serialize_release_payload_value``, ``_deserialize_release_payload_value``);
* a handler's wait for its run's result (``WorkflowHandler._result_task``), stopped by a tool that only
  starts a run (the console, an AG-UI thread): the run goes on, the process does not poll for its end;
* ``llama-agents-server``'s decorators (``_decorated``, ``_handle_status_update``) and a
  workflow's runtime under them (``Workflow._runtime``).

docs/llama-runtime.md ("LlamaIndex's private names") lists the public hooks that would make this
module unnecessary. A different ``llama-index-workflows`` version may change any of these: the module
refuses to load under another version, naming both, instead of failing later in a run.
"""

from __future__ import annotations

import copy
import threading
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

PINNED_WORKFLOWS_VERSION = "2.26.1"
"""The ``llama-index-workflows`` version this module was written against (the ``llama-runtime`` extra pins it)."""


class LlamaIndexVersionError(ImportError):
    """The installed ``llama-index-workflows`` is not the version ``TemporalRuntime`` was built for."""


def installed_workflows_version() -> str | None:
    try:
        return version("llama-index-workflows")
    except PackageNotFoundError:
        return None


def check_version(installed: str | None) -> None:
    """Raise :class:`LlamaIndexVersionError` unless ``installed`` is the pinned version."""
    if installed != PINNED_WORKFLOWS_VERSION:
        found = "not installed" if installed is None else f"{installed} is installed"
        raise LlamaIndexVersionError(
            f"TemporalRuntime runs LlamaIndex's own control loop and needs llama-index-workflows=="
            f"{PINNED_WORKFLOWS_VERSION} exactly ({found}): its loop is Temporal workflow code, and another "
            "version may reduce a recorded run differently. Install it with "
            "pip install 'temporal-workflows[llama-runtime]'."
        )


check_version(installed_workflows_version())

# Imported after the check: under another version these names may not exist.
from workflows.context.context import Context  # noqa: E402
from workflows.context.serializers import BaseSerializer, JsonSerializer  # noqa: E402
from workflows.context.state_store import InMemoryStateStore  # noqa: E402
from workflows.events import Event, _deserialize_exception, _serialize_exception  # noqa: E402
from workflows.runtime.control_loop.reduce import _reduce_tick  # noqa: E402
from workflows.runtime.control_loop.runner import _ControlLoopRunner  # noqa: E402
from workflows.runtime.types.internal_state import BrokerState  # noqa: E402
from workflows.runtime.types.plugin import WeakIdentityKeyDictionary  # noqa: E402
from workflows.runtime.types.results import (  # noqa: E402
    _deserialize_release_payload_value,
    _serialize_release_payload_value,
)
from workflows.runtime.types.ticks import WorkflowTick  # noqa: E402
from workflows.workflow import Workflow  # noqa: E402

__all__ = [
    "PINNED_WORKFLOWS_VERSION",
    "ControlLoopRunner",
    "LlamaIndexVersionError",
    "allowed_type_names",
    "check_version",
    "create_internal_context",
    "deserialize_exception",
    "deserialize_release_payload",
    "detach_handler",
    "event_dump_serializer",
    "in_memory_store",
    "installed_workflows_version",
    "num_concurrent_runs",
    "reduce_tick",
    "serialize_exception",
    "serialize_release_payload",
    "server_decorated",
    "server_status_updater",
    "set_runtime_view",
    "step_configs",
    "step_functions",
    "step_functions_version",
    "with_timeout",
    "workflow_timeout",
]

ControlLoopRunner = _ControlLoopRunner
"""LlamaIndex's control loop (``control_loop`` builds one and runs it); kept so the run can read ``.state``."""


def reduce_tick(tick: WorkflowTick, state: BrokerState, now: float, run_id: str) -> BrokerState:
    """LlamaIndex's reducer on one tick at time ``now`` (its commands are not wanted here)."""
    new_state, _ = _reduce_tick(tick, state, now, run_id=run_id)
    return new_state


def create_internal_context(workflow: Workflow) -> Context[Any]:
    """The ``Context`` LlamaIndex's own run function hands its loop (needs a current run context)."""
    return Context._create_internal(workflow=workflow)


def step_functions(workflow: Workflow) -> dict[str, Any]:
    """``{step name: step function}``: methods and free-function steps."""
    return workflow._get_steps()


def step_configs(workflow: Workflow) -> dict[str, Any]:
    """``{step name: StepConfig}`` (accepted and returned events, workers, retry policy)."""
    return workflow._step_configs()


def step_functions_version(workflow: Workflow) -> int:
    """Bumped by ``Workflow.add_step`` on the class: a registration made before it is stale."""
    return type(workflow)._step_functions_version


def workflow_timeout(workflow: Workflow) -> float | None:
    return workflow._timeout


_TIMED: WeakIdentityKeyDictionary[Workflow, dict[float | None, Workflow]] = WeakIdentityKeyDictionary()
_TIMED_LOCK = threading.Lock()


def with_timeout(workflow: Workflow, timeout: float | None) -> Workflow:
    """``workflow`` as its run's starter built it: a shallow copy with the starter's ``timeout`` (a worker may
    build the class with its defaults), sharing everything else (steps, resources, the user's attributes)."""
    if workflow._timeout == timeout:
        return workflow
    with _TIMED_LOCK:
        views = _TIMED.get(workflow)
        if views is None:
            views = {}
            _TIMED[workflow] = views
        view = views.get(timeout)
        if view is None:
            view = copy.copy(workflow)
            view._timeout = timeout
            view._broker_config = None  # built from the timeout: the copy builds its own
            view._broker_config_version = -1
            views[timeout] = view
        return view


def num_concurrent_runs(workflow: Workflow) -> int | None:
    return workflow._num_concurrent_runs


def allowed_type_names(serializer: BaseSerializer) -> frozenset[str] | None:
    """A ``JsonSerializer``'s allow-list (``None``: it resolves any class by import)."""
    if not isinstance(serializer, JsonSerializer):
        return None
    return serializer._allowed_type_names


_STORE = TypeVar("_STORE", bound=InMemoryStateStore[Any])


def in_memory_store(cls: type[_STORE], state: Any, serializer: JsonSerializer | None = None) -> _STORE:
    """``cls(state)`` (an ``InMemoryStateStore``), recording its checkpoints and diffs with ``serializer``
    (LlamaIndex's store always records with a plain ``JsonSerializer`` of its own)."""
    store = cls(state)
    if serializer is not None:
        store._serializer = serializer
    return store


def event_dump_serializer() -> Any:
    """``Event``'s own model serializer (a model whose only serializer is it dumps as pydantic does)."""
    return Event.__pydantic_decorators__.model_serializers["custom_model_dump"].func


def serialize_exception(e: Exception) -> Any:
    return _serialize_exception(e)


def deserialize_exception(data: Any) -> Exception:
    return _deserialize_exception(data)


def serialize_release_payload(value: Any) -> Any:
    return _serialize_release_payload_value(value)


def deserialize_release_payload(value: Any) -> Any:
    return _deserialize_release_payload_value(value)


def server_decorated(runtime: Any) -> Any:
    """The runtime a ``llama-agents-server`` decorator wraps, or ``None``."""
    return getattr(runtime, "_decorated", None)


def server_status_updater(runtime: Any) -> Any:
    """``llama-agents-server``'s status writer of a decorated runtime, or ``None``."""
    return getattr(runtime, "_handle_status_update", None)


def set_runtime_view(view: Workflow, runtime: Any) -> None:
    """Give a shallow copy of a workflow another runtime, without LlamaIndex's (un)tracking."""
    view._runtime = runtime


def detach_handler(handler: Any) -> None:
    """Stop ``handler`` waiting for its run's result; the run goes on (a process that only starts runs)."""
    task = getattr(handler, "_result_task", None)
    if task is not None:
        task.cancel()
