"""``Workflow``: a LlamaIndex workflow class, run in process or hosted on Temporal.

Subclass it and declare ``@step`` methods; ``handler = MyFlow().run(**kw)``
runs it in this process (``await handler`` for the result). The same
instance passed to ``TemporalWorkflowsPlugin([MyFlow()])`` is hosted by a
worker, as the graph it compiles to; its workflow type is the class name
(or ``name=``).
"""

from __future__ import annotations

import inspect
import logging
import secrets
import string
from typing import Any, get_args

from pydantic import ValidationError

from temporal_workflows._graph.workflow import Workflow as GraphWorkflow
from temporal_workflows.llama.decorators import StepConfig, WorkflowGraphCheck, step_config
from temporal_workflows.llama.errors import WorkflowConfigurationError, WorkflowRuntimeError, WorkflowValidationError
from temporal_workflows.llama.events import (
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    StartEvent,
    StepFailedEvent,
    StopEvent,
)
from temporal_workflows.llama.resource import ResourceManager

__all__ = ["Workflow"]

_log = logging.getLogger(__name__)
_ALPHABET = string.ascii_letters + string.digits


def _is_subclass(tp: Any, parents: type | tuple[type, ...]) -> bool:
    return isinstance(tp, type) and issubclass(tp, parents)


class _WorkflowMeta(type):
    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> None:
        super().__init__(name, bases, ns)
        cls._step_functions: dict[str, Any] = {}  # type: ignore[misc]


class Workflow(metaclass=_WorkflowMeta):
    """An event-driven workflow of ``@step`` methods (LlamaIndex's ``Workflow``).

    Args:
        timeout: Seconds a run may take before it fails with
            ``WorkflowTimeoutError`` (``None``: no limit); on Temporal the
            run's execution timeout.
        disable_validation: Skip the event-graph checks before a run.
        verbose: Print each step's start and end, and every event added.
        resource_manager: Where resources are made and cached.
        num_concurrent_runs: Accepted for compatibility (not enforced).
        runtime: Accepted for compatibility; this engine is the runtime.
        workflow_name: LlamaIndex's name for the workflow.
        skip_graph_checks: Graph checks not to apply.
        serializer: Accepted for compatibility; values are always JSON here.
        name: The Temporal workflow type (default: ``workflow_name`` if given, else the class name).
    """

    _step_functions: dict[str, Any]
    _step_functions_version: int = 0

    def __init__(
        self,
        timeout: float | None = 45.0,
        disable_validation: bool = False,
        verbose: bool = False,
        resource_manager: ResourceManager | None = None,
        num_concurrent_runs: int | None = None,
        runtime: Any = None,
        workflow_name: str | None = None,
        skip_graph_checks: set[WorkflowGraphCheck] | None = None,
        serializer: Any = None,
        *,
        name: str | None = None,
    ) -> None:
        if num_concurrent_runs is not None and (
            isinstance(num_concurrent_runs, bool)
            or not isinstance(num_concurrent_runs, int)
            or num_concurrent_runs <= 0
        ):
            raise WorkflowValidationError("num_concurrent_runs must be an integer greater than 0 or None")
        self._timeout = timeout
        self._verbose = verbose
        self._disable_validation = disable_validation
        self._num_concurrent_runs = num_concurrent_runs
        self._workflow_name = workflow_name
        self._name = name
        self._resource_manager = resource_manager or ResourceManager()
        checks = set(skip_graph_checks or ())
        unknown = checks - set(get_args(WorkflowGraphCheck))
        if unknown:
            raise WorkflowValidationError(
                f"Unknown graph check names: {', '.join(sorted(unknown))}. "
                f"Valid names are: {', '.join(sorted(get_args(WorkflowGraphCheck)))}"
            )
        self._skip_graph_checks: set[WorkflowGraphCheck] = checks
        configs = self._step_configs()
        self._start_event_class = _start_event_class(configs, type(self).__name__)
        self._stop_event_class = _stop_event_class(configs, type(self).__name__)
        self._validated_version = -1
        self._compiled_cache: Any = None

    # -- description ------------------------------------------------------------------------------------------

    @property
    def workflow_name(self) -> str:
        """LlamaIndex's name: ``workflow_name=`` if given, else ``module.QualName``."""
        if self._workflow_name is not None:
            return self._workflow_name
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def _temporal_name(self) -> str:
        return self._name or self._workflow_name or type(self).__name__

    @property
    def start_event_class(self) -> type[StartEvent]:
        return self._start_event_class

    @property
    def stop_event_class(self) -> type[StopEvent]:
        return self._stop_event_class

    @property
    def events(self) -> list[type[Event]]:
        found: list[type[Event]] = []
        for config in self._step_configs().values():
            for tp in (*config.accepted_events, *config.return_types):
                if _is_subclass(tp, Event) and tp not in found:
                    found.append(tp)
        return found

    @property
    def runtime(self) -> None:
        return None

    # -- steps ------------------------------------------------------------------------------------------------

    @classmethod
    def add_step(cls, func: Any) -> None:
        """Add a free function (decorated with ``@step(workflow=...)``) as a step of this class."""
        if step_config(func) is None:
            raise WorkflowValidationError(f"Step function {func.__name__} is missing the `@step` decorator.")
        if func.__name__ in cls._get_steps_from_class():
            raise WorkflowValidationError(
                f"A step {func.__name__} is already part of this workflow, please choose another name."
            )
        cls._step_functions[func.__name__] = func
        cls._step_functions_version += 1

    @classmethod
    def _step_methods(cls) -> dict[str, Any]:
        """Step methods by name, sorted by name (LlamaIndex's order, which decides broadcast order).

        Read from the classes' own namespaces, never with ``getattr`` on every
        member: a property of a subclass must not run just to list steps.
        """
        found: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            for name, attr in vars(klass).items():
                if inspect.isfunction(attr) and step_config(attr) is not None:
                    found[name] = attr
                elif name in found:
                    del found[name]  # overridden by something that is not a step
        return dict(sorted(found.items()))

    @classmethod
    def _get_steps_from_class(cls) -> dict[str, Any]:
        return {**cls._step_methods(), **cls._step_functions}

    def _get_steps(self) -> dict[str, Any]:
        found = {name: getattr(self, name) for name in type(self)._step_methods()}
        for klass in reversed(type(self).__mro__):
            for n, f in vars(klass).get("_step_functions", {}).items():
                found.setdefault(n, f)
        return found

    def _step_configs(self) -> dict[str, StepConfig]:
        out: dict[str, StepConfig] = {}
        for n, f in self._get_steps().items():
            config = step_config(f)
            assert config is not None
            out[n] = config
        return out

    # -- validation -------------------------------------------------------------------------------------------

    def validate(self, *, validate_resource_configs: bool = True, validate_resources: bool = False) -> bool:
        """Check the event graph; ``True`` if the workflow uses human input (InputRequired/HumanResponse events)."""
        return _validate(self._step_configs(), type(self).__name__, self._skip_graph_checks)

    def _validate(self) -> None:
        version = type(self)._step_functions_version
        if self._disable_validation or self._validated_version == version:
            return
        _validate(self._step_configs(), type(self).__name__, self._skip_graph_checks)
        self._validated_version = version

    # -- compiling --------------------------------------------------------------------------------------------

    def _compiled(self) -> Any:
        from temporal_workflows.llama._compile import Compiled

        cached = self._compiled_cache
        if cached is None or cached.version != type(self)._step_functions_version:
            cached = self._compiled_cache = Compiled(self)
        return cached

    def __temporal_workflows_graph__(self) -> GraphWorkflow:
        """The graph a Temporal worker hosts this workflow as (the plugin, worker and CLI call this)."""
        self._validate()
        graph: GraphWorkflow = self._compiled().graph
        return graph

    # -- running in process -----------------------------------------------------------------------------------

    def _start_event(self, start_event: StartEvent | None, **kwargs: Any) -> StartEvent:
        if start_event is not None:
            if not isinstance(start_event, StartEvent):
                raise ValueError("The 'start_event' argument must be an instance of 'StartEvent'.")
            if kwargs:
                _log.warning(
                    "Keyword arguments are not supported when 'run()' is invoked with the 'start_event' parameter. "
                    "These keyword arguments will be ignored: %s",
                    kwargs,
                )
            return start_event
        try:
            return self._start_event_class(**kwargs)
        except ValidationError:
            raise WorkflowRuntimeError(
                f"Failed creating a start event of type '{self._start_event_class.__name__}' with the keyword "
                f"arguments: {kwargs}"
            ) from None

    def run(self, ctx: Any = None, start_event: StartEvent | None = None, **kwargs: Any) -> Any:
        """Run in this process; returns a ``WorkflowHandler`` (await it for the result).

        Args:
            ctx: A ``Context`` to continue (its state) or resume (a running ``from_dict`` context).
            start_event: The start event; otherwise ``kwargs`` make one of the workflow's start event class.
        """
        from temporal_workflows.llama._local import LlamaLocalRun
        from temporal_workflows.llama.context import Context
        from temporal_workflows.llama.handler import WorkflowHandler

        self._validate()
        run_id = kwargs.pop("run_id", None) or "".join(secrets.choice(_ALPHABET) for _ in range(10))
        ctx = ctx if ctx is not None else Context(self)
        resuming = ctx._pre is not None and ctx._pre.is_running
        event = None if resuming else self._start_event(start_event, **kwargs)
        run = LlamaLocalRun(self, ctx, event, run_id)
        return WorkflowHandler(self, run, ctx)


def _start_event_class(configs: dict[str, StepConfig], cls_name: str) -> type[StartEvent]:
    found: set[type[StartEvent]] = {
        t for c in configs.values() for t in c.accepted_events if _is_subclass(t, StartEvent)
    }
    if not found:
        raise WorkflowConfigurationError(
            "At least one Event of type StartEvent must be received by any step. "
            f"(Workflow '{cls_name}' has no @step that accepts StartEvent.)"
        )
    if len(found) > 1:
        raise WorkflowConfigurationError(
            f"Only one type of StartEvent is allowed per workflow, found {len(found)}: {found} in workflow "
            f"'{cls_name}'."
        )
    return found.pop()


def _stop_event_class(configs: dict[str, StepConfig], cls_name: str) -> type[StopEvent]:
    found: set[type[StopEvent]] = {t for c in configs.values() for t in c.return_types if _is_subclass(t, StopEvent)}
    if not found:
        raise WorkflowConfigurationError(
            "At least one Event of type StopEvent must be returned by any step. "
            f"(Workflow '{cls_name}' has no @step that returns StopEvent.)"
        )
    if len(found) > 1:
        raise WorkflowConfigurationError(
            f"Only one type of StopEvent is allowed per workflow, found {len(found)}: {found} in workflow '{cls_name}'."
        )
    return found.pop()


def _accepts_type(produced: Any, config: StepConfig) -> bool:
    if config.accept_event_subclasses:
        return any(_is_subclass(produced, a) for a in config.accepted_events if isinstance(a, type))
    return produced in config.accepted_events


def _validate(configs: dict[str, StepConfig], cls_name: str, skip: set[WorkflowGraphCheck]) -> bool:
    """LlamaIndex's checks: start/stop classes, produced vs consumed events, catch_error handlers, the graph."""
    if not configs:
        raise WorkflowConfigurationError(
            f"Workflow '{cls_name}' has no configured steps. Did you forget to annotate methods with @step or to "
            "register free-function steps via @step(workflow=...)?"
        )
    start = _start_event_class(configs, cls_name)
    _stop_event_class(configs, cls_name)
    accepting_stop = [n for n, c in configs.items() if any(_is_subclass(t, StopEvent) for t in c.accepted_events)]
    if accepting_stop:
        plural = "" if len(accepting_stop) == 1 else "s"
        names = "', '".join(accepting_stop)
        raise WorkflowValidationError(
            f"Step{plural} '{names}' cannot accept StopEvent. StopEvent signals the end of "
            "the workflow. Use a different Event type instead."
        )
    produced: set[Any] = {start}
    consumed: set[Any] = set()
    for c in configs.values():
        consumed.update(c.accepted_events)
        produced.update(t for t in c.return_types if t is not type(None))
    boundary_in = (InputRequiredEvent, HumanResponseEvent, StopEvent, StepFailedEvent)
    never_produced = [
        t
        for c in configs.values()
        for t in c.accepted_events
        if not _is_subclass(t, boundary_in)
        and not any((p is t) or (c.accept_event_subclasses and _is_subclass(p, t)) for p in produced)
    ]
    if never_produced:
        names = ", ".join(dict.fromkeys(t.__name__ for t in never_produced))
        raise WorkflowValidationError(f"The following events are consumed but never produced: {names}")
    boundary_out = (InputRequiredEvent, HumanResponseEvent, StopEvent)
    unused = [
        p
        for p in produced
        if not _is_subclass(p, boundary_out) and not any(_accepts_type(p, c) for c in configs.values())
    ]
    if unused:
        raise WorkflowValidationError(
            f"The following events are produced but never consumed: {', '.join(t.__name__ for t in unused)}"
        )
    _check_catch_error(configs)
    _check_graph(configs, start, skip)
    return any(_is_subclass(p, InputRequiredEvent) for p in produced) or any(
        _is_subclass(c, HumanResponseEvent) for c in consumed
    )


def _check_catch_error(configs: dict[str, StepConfig]) -> None:
    wildcards = [n for n, c in configs.items() if c.role == "catch_error" and c.catch_error_for_steps is None]
    if len(wildcards) > 1:
        raise WorkflowValidationError(
            f"Only one wildcard @catch_error handler is allowed, found: {', '.join(wildcards)}"
        )
    claimed: dict[str, str] = {}
    for n, c in configs.items():
        if c.role != "catch_error" or c.catch_error_for_steps is None:
            continue
        for s in c.catch_error_for_steps:
            if s not in configs:
                raise WorkflowValidationError(f"@catch_error handler '{n}' names unknown step '{s}'")
            if s in claimed:
                raise WorkflowValidationError(
                    f"Step '{s}' is covered by more than one @catch_error handler: '{claimed[s]}' and '{n}'"
                )
            claimed[s] = n


def _check_graph(configs: dict[str, StepConfig], start: type, skip: set[WorkflowGraphCheck]) -> None:
    """Reachability from the start (and human responses), no dangling events, no dead ends."""
    outgoing: dict[Any, list[Any]] = {}
    event_types: set[Any] = {start}
    for n, c in configs.items():
        for rt in c.return_types:
            if rt is not type(None):
                event_types.add(rt)
                outgoing.setdefault(n, []).append(rt)
        event_types.update(c.accepted_events)
    for ev in event_types:
        for n, c in configs.items():
            allow = c.accept_event_subclasses and not _is_subclass(ev, StopEvent)
            if (ev in c.accepted_events) or (allow and any(_is_subclass(ev, a) for a in c.accepted_events)):
                outgoing.setdefault(ev, []).append(n)
    seeds: list[Any] = [start, *(e for e in event_types if _is_subclass(e, HumanResponseEvent))]
    seeds += [n for n, c in configs.items() if c.role == "catch_error"]
    forward = _reach(seeds, outgoing)
    incoming: dict[Any, list[Any]] = {}
    for s, ts in outgoing.items():
        for t in ts:
            incoming.setdefault(t, []).append(s)
    backward = _reach([e for e in event_types if _is_subclass(e, (StopEvent, InputRequiredEvent))], incoming)
    errors: list[str] = []
    if "reachability" not in skip:
        unreachable = sorted(
            n for n, c in configs.items() if n not in forward and "reachability" not in c.skip_graph_checks
        )
        if unreachable:
            errors.append(
                f"  - [reachability] Unreachable steps: {', '.join(unreachable)}\n"
                "    Steps must be reachable from StartEvent or HumanResponseEvent."
            )
    if "terminal_event" not in skip:
        dangling = sorted(
            e.__name__
            for e in event_types
            if not any(t in configs for t in outgoing.get(e, []))
            and not _is_subclass(e, (StopEvent, InputRequiredEvent))
        )
        if dangling:
            errors.append(
                f"  - [terminal_event] Events produced but never consumed: {', '.join(dangling)}\n"
                "    Only StopEvent and InputRequiredEvent may be terminal."
            )
    if "dead_end" not in skip:
        dead = sorted(
            n
            for n, c in configs.items()
            if any(isinstance(t, type) for t in outgoing.get(n, []))
            and n not in backward
            and "dead_end" not in c.skip_graph_checks
        )
        if dead:
            errors.append(
                f"  - [dead_end] Dead-end steps: {', '.join(dead)}\n"
                "    Steps must have a path to StopEvent or InputRequiredEvent."
            )
    if errors:
        raise WorkflowValidationError("Graph validation failed:\n" + "\n".join(errors))


def _reach(seeds: list[Any], adjacency: dict[Any, list[Any]]) -> set[Any]:
    seen: set[Any] = set()
    todo = list(seeds)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(t for t in adjacency.get(node, []) if t not in seen)
    return seen
