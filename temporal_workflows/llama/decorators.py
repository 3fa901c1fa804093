"""``@step`` and ``@catch_error``, with the signatures and checks of LlamaIndex's ``workflows.decorators``.

A step's signature says everything about it: the event parameter's
annotation (a class or a union) is what it accepts, the return annotation
what it may emit, a parameter annotated ``Context`` (or ``Context[State]``)
gets the run's context, and ``Annotated[T, Resource(...)]`` parameters get
resources. The signature is read once, when the step is decorated, so a bad
one fails at import time.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel

from temporal_workflows._graph.typecheck import caller_locals
from temporal_workflows.llama.errors import WorkflowValidationError
from temporal_workflows.llama.events import Event, StepFailedEvent
from temporal_workflows.llama.resource import ResourceDefinition, ResourceDescriptor
from temporal_workflows.llama.retry_policy import RetryPolicy

__all__ = ["StepConfig", "StepGraphCheck", "WorkflowGraphCheck", "catch_error", "step"]

WorkflowGraphCheck = Literal["reachability", "terminal_event", "dead_end"]
StepGraphCheck = Literal["reachability", "dead_end"]
StepRole = Literal["step", "catch_error"]

F = TypeVar("F", bound=Callable[..., Any])

_STEP_ATTR = "_step_config"


@dataclasses.dataclass
class StepConfig:
    """A step as read from its signature (``func._step_config``, as in LlamaIndex).

    Attributes:
        accepted_events: Event classes the step is invoked with.
        event_name: The event parameter's name.
        return_types: Event classes (and ``NoneType``) it may return.
        context_parameter: The parameter that gets the ``Context``, if any.
        num_workers: How many of its invocations may run at once.
        retry_policy: When a failed invocation runs again.
        resources: Parameters that get resources.
        context_state_type: ``State`` of a ``Context[State]`` annotation.
        role: ``"catch_error"`` for a ``@catch_error`` handler.
    """

    accepted_events: list[Any]
    event_name: str
    return_types: list[Any]
    context_parameter: str | None
    num_workers: int
    retry_policy: RetryPolicy | None
    resources: list[ResourceDefinition]
    context_state_type: type[BaseModel] | None = None
    skip_graph_checks: list[StepGraphCheck] = dataclasses.field(default_factory=list)
    role: StepRole = "step"
    catch_error_for_steps: list[str] | None = None
    catch_error_max_recoveries: int = 1
    accept_event_subclasses: bool = False
    is_async: bool = True


_STEP_FRAMES = 4
"""How many frames around a ``@step`` lend their locals to its annotations (see ``caller_locals``)."""


def _hints(func: Callable[..., Any], localns: dict[str, Any]) -> dict[str, Any]:
    try:
        return get_type_hints(func, include_extras=True, localns=localns)
    except NameError as e:
        missing = f" Missing name: {e.name}." if getattr(e, "name", None) else ""
        raise WorkflowValidationError(
            f"Failed to resolve type annotations for {getattr(func, '__qualname__', func)}.{missing} If you are "
            "using 'from __future__ import annotations' or string annotations, ensure referenced names are "
            "available in module scope or in the scope where the @step decorator is applied."
        ) from e


def _is_event_class(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Event)


def _members(tp: Any) -> list[Any]:
    """A union's members (``None`` dropped), or the type itself."""
    if get_origin(tp) in (Union, UnionType):
        return [t for t in get_args(tp) if t is not type(None)]
    return [tp]


def _return_types(tp: Any) -> list[Any]:
    if tp is None or tp is type(None):
        return [type(None)]
    if get_origin(tp) in (Union, UnionType):
        out: list[Any] = []
        for arg in get_args(tp):
            for t in _return_types(arg):
                if t not in out:
                    out.append(t)
        return out
    if get_origin(tp) is list:
        raise WorkflowValidationError(
            "a step returning list[E] (LlamaIndex 2.x collection fan-out) is not supported by "
            "temporal_workflows.llama; send each event with ctx.send_event(...) instead"
        )
    return [tp]


def _is_context(annotation: Any) -> tuple[bool, Any]:
    from temporal_workflows.llama.context import Context

    origin = get_origin(annotation)
    if origin is Context or (origin is not None and getattr(origin, "__name__", None) == "Context"):
        args = get_args(annotation)
        return True, (args[0] if args else None)
    if annotation is Context or getattr(annotation, "__name__", None) == "Context":
        return True, None
    return False, None


def _read_step(func: Callable[..., Any], localns: dict[str, Any]) -> StepConfig:
    if not callable(func):
        raise TypeError(f"Expected a callable object, got {type(func).__name__}")
    if inspect.isasyncgenfunction(func):
        raise WorkflowValidationError(
            "async generator steps are not supported; emit events with ctx.send_event instead"
        )
    hints = _hints(func, localns)
    accepted: dict[str, list[Any]] = {}
    context_parameter: str | None = None
    state_type: Any = None
    resources: list[ResourceDefinition] = []
    for name, param in inspect.signature(func).parameters.items():
        if name in ("self", "cls"):
            continue
        annotation = hints.get(name, param.annotation)
        is_ctx, ctx_state = _is_context(annotation)
        if is_ctx:
            context_parameter, state_type = name, ctx_state
            continue
        if get_origin(annotation) is Annotated:
            args = get_args(annotation)
            descriptor = next((a for a in args[1:] if isinstance(a, ResourceDescriptor)), None)
            if descriptor is not None:
                descriptor.set_localns(localns)
                resources.append(ResourceDefinition(name=name, resource=descriptor, type_annotation=args[0]))
            continue
        if annotation is inspect.Parameter.empty:
            continue
        if get_origin(annotation) is list and any(_is_event_class(a) for a in get_args(annotation)):
            raise WorkflowValidationError(
                f"parameter {name!r}: list[E] collect parameters (LlamaIndex 2.x collection streams) are not "
                "supported by temporal_workflows.llama; take one event and use ctx.collect_events(ev, [...])"
            )
        members = _members(annotation)
        if members and all(_is_event_class(t) for t in members):
            accepted[name] = members
    if not accepted:
        raise WorkflowValidationError("Step signature must have at least one parameter annotated as type Event")
    if len(accepted) > 1:
        raise WorkflowValidationError(
            f"step {getattr(func, '__qualname__', func)!r} declares {len(accepted)} event parameters "
            f"({', '.join(accepted)}); multi-parameter collect steps (LlamaIndex 2.x) are not supported by "
            "temporal_workflows.llama: take one event and use ctx.collect_events(ev, [...])"
        )
    if "return" not in hints:
        raise WorkflowValidationError("Return types of workflows step functions must be annotated with their type.")
    event_name, accepted_events = next(iter(accepted.items()))
    if state_type is not None and not (isinstance(state_type, type) and issubclass(state_type, BaseModel)):
        raise WorkflowValidationError(f"Context[...] takes a pydantic model as the state type, not {state_type!r}")
    return StepConfig(
        accepted_events=accepted_events,
        event_name=event_name,
        return_types=_return_types(hints["return"]),
        context_parameter=context_parameter,
        num_workers=4,
        retry_policy=None,
        resources=resources,
        context_state_type=state_type,
        is_async=inspect.iscoroutinefunction(func),
    )


def _is_free_function(qualname: str) -> bool:
    parts = qualname.split(".")
    return len(parts) == 1 or parts[-2] == "<locals>"


def _apply(
    func: Any,
    localns: dict[str, Any],
    *,
    workflow: Any,
    num_workers: int,
    retry_policy: RetryPolicy | None,
    skip_graph_checks: list[StepGraphCheck] | None,
    accept_event_subclasses: bool,
) -> Any:
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers <= 0:
        raise WorkflowValidationError("num_workers must be an integer greater than 0")
    config = _read_step(func, localns)
    config.num_workers = num_workers
    config.retry_policy = retry_policy
    config.skip_graph_checks = list(skip_graph_checks or [])
    config.accept_event_subclasses = accept_event_subclasses
    setattr(func, _STEP_ATTR, config)
    if _is_free_function(func.__qualname__):
        if workflow is None:
            raise WorkflowValidationError(
                f"To decorate {func.__name__} please pass a workflow class to the @step decorator."
            )
        workflow.add_step(func)
    return func


@overload
def step(func: F, /) -> F: ...


@overload
def step(
    *,
    workflow: type[Any] | None = None,
    num_workers: int = 4,
    retry_policy: RetryPolicy | None = None,
    skip_graph_checks: list[StepGraphCheck] | None = None,
    accept_event_subclasses: bool = False,
) -> Callable[[F], F]: ...


def step(
    func: Any = None,
    /,
    *,
    workflow: type[Any] | None = None,
    num_workers: int = 4,
    retry_policy: RetryPolicy | None = None,
    skip_graph_checks: list[StepGraphCheck] | None = None,
    accept_event_subclasses: bool = False,
) -> Any:
    """Declare a workflow step (a method, or with ``workflow=`` a free function).

    Args:
        workflow: The workflow class a free function is a step of.
        num_workers: How many events this step handles at once (default 4, as
            in LlamaIndex); events it gets in one superstep run in one step
            task (one Temporal activity), at most this many at a time.
        retry_policy: When a failing invocation runs again (see ``retry_policy``).
        skip_graph_checks: Graph checks not to apply to this step.
        accept_event_subclasses: Route subclasses of the accepted events here too.
    """
    options = {
        "workflow": workflow,
        "num_workers": num_workers,
        "retry_policy": retry_policy,
        "skip_graph_checks": skip_graph_checks,
        "accept_event_subclasses": accept_event_subclasses,
    }
    if func is not None:
        return _apply(func, caller_locals(2, _STEP_FRAMES), **options)  # type: ignore[arg-type]

    def decorate(f: F) -> F:
        return _apply(f, caller_locals(2, _STEP_FRAMES), **options)  # type: ignore[arg-type, no-any-return]

    return decorate


@overload
def catch_error(func: F, /) -> F: ...


@overload
def catch_error(*, for_steps: list[str] | None = None, max_recoveries: int = 1) -> Callable[[F], F]: ...


def catch_error(func: Any = None, /, *, for_steps: list[str] | None = None, max_recoveries: int = 1) -> Any:
    """Declare a handler for steps whose retries are exhausted; it takes a ``StepFailedEvent``.

    Args:
        for_steps: The steps it covers (``None``: every step no scoped handler covers).
        max_recoveries: How often it may run in one run before the run fails instead.
    """
    if isinstance(max_recoveries, bool) or not isinstance(max_recoveries, int) or max_recoveries < 1:
        raise WorkflowValidationError("@catch_error max_recoveries must be an integer >= 1")
    if for_steps is not None and (not isinstance(for_steps, list) or not all(isinstance(s, str) for s in for_steps)):
        raise WorkflowValidationError("@catch_error for_steps must be None or a list of step name strings")

    def apply(f: Any, localns: dict[str, Any]) -> Any:
        config = _read_step(f, localns)
        if config.accepted_events != [StepFailedEvent]:
            raise WorkflowValidationError(
                f"@catch_error handler '{getattr(f, '__name__', f)}' must accept StepFailedEvent as its event "
                "parameter."
            )
        config.num_workers = 1
        config.role = "catch_error"
        config.catch_error_for_steps = list(for_steps) if for_steps is not None else None
        config.catch_error_max_recoveries = max_recoveries
        setattr(f, _STEP_ATTR, config)
        return f

    if func is not None:
        return apply(func, caller_locals(2, _STEP_FRAMES))

    def decorate(f: F) -> F:
        return apply(f, caller_locals(2, _STEP_FRAMES))  # type: ignore[no-any-return]

    return decorate


def step_config(func: Any) -> StepConfig | None:
    """The ``StepConfig`` of a decorated function or method, if it is a step."""
    config = getattr(func, _STEP_ATTR, None)
    return config if isinstance(config, StepConfig) else None
