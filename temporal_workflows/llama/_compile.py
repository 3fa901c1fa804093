"""A LlamaIndex workflow class compiled to a graph the engine (and a Temporal worker) runs.

Each ``@step`` becomes an executor whose id is the step's name; events are
routed by type in the sending step (to every step whose accepted events
match, as LlamaIndex does); every step executor is ``Topology.batched``, so
the events a step gets in one superstep are one task that runs them ``num_workers``
at a time. The topology is pure data, pinned by a Temporal run like any graph's,
and its signature hash covers every step's name, accepted and returned types
and concurrency, so a changed workflow is noticed as a changed graph.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from temporal_workflows._engine.machine import PendingRequest, Topology
from temporal_workflows._engine.serde import Envelope, decode, encode, register_type, type_key, validate_as
from temporal_workflows._engine.serde import _resolve as resolve_type
from temporal_workflows._errors import InvalidResponseError, UndeliverableMessageError, describe
from temporal_workflows._graph.edges import EdgeGroup
from temporal_workflows._graph.executor import Executor, ExecutorOptions, HandlerSpec, ResponseHandlerSpec
from temporal_workflows._graph.graph import EventRoute, Graph
from temporal_workflows._graph.workflow import Workflow as GraphWorkflow
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows.llama._invocations import Invocation
from temporal_workflows.llama._routing import Wait, route_event, unhandled
from temporal_workflows.llama._run_objects import event_json, run_objects
from temporal_workflows.llama._runtime import LlamaStreamEvent, WaitRequest, waits_of_requests
from temporal_workflows.llama._scheduling import run_task
from temporal_workflows.llama.decorators import StepConfig
from temporal_workflows.llama.errors import WorkflowRuntimeError
from temporal_workflows.llama.events import Event, StartEvent, StopEvent

if TYPE_CHECKING:
    from temporal_workflows._graph.context import WorkflowContext
    from temporal_workflows.llama.workflow import Workflow

__all__ = ["MAX_SUPERSTEPS", "Compiled", "StepExecutor", "StepInfo", "compile_workflow"]

MAX_SUPERSTEPS = 1_000_000
"""Supersteps a run may take per activation: LlamaIndex has no such limit (its ``timeout`` bounds a run)."""

DEFAULT_STEP_TIMEOUT = timedelta(hours=1)
"""Longest one attempt of a step may run on Temporal when the workflow has no ``timeout``."""

STEP_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
"""A step's heartbeat timeout on Temporal: it heartbeats every third of it, so a step cancelled because
another returned the run's ``StopEvent`` first (LlamaIndex cancels the losers of a race) stops within
seconds, and a lost worker is noticed as soon."""


@dataclass(frozen=True)
class StepInfo:
    """One step of a workflow instance: its name, the callable (bound for methods) and its config."""

    name: str
    func: Any
    config: StepConfig


async def _unused(*_: Any) -> None:  # pragma: no cover - the executor dispatches itself
    raise AssertionError("a step executor dispatches its tasks itself")


class StepExecutor(Executor):
    """The executor a step compiles to: it takes any event and runs the step (see ``_runtime``)."""

    def __init__(self, compiled: Compiled, info: StepInfo, options: ExecutorOptions) -> None:
        super().__init__(info.name, options=options)
        self.compiled = compiled
        self.info = info
        self._handler_specs = (HandlerSpec("run", _unused, Any, (), ()),)
        self._response_specs = (ResponseHandlerSpec("resume", _unused, WaitRequest, Any),)

    @property
    def input_types(self) -> list[Any]:
        return list(self.info.config.accepted_events)

    async def _invoke(self, spec: HandlerSpec, message: Any, ctx: Any) -> None:
        wctx: WorkflowContext[Any, Any] = ctx
        triggers = message if wctx._task.kind in ("batch", "fan_in") else [message]
        await run_task(self.compiled, self.info, wctx, wctx._committed, triggers, None, run_objects(wctx.run_id))

    async def _invoke_response(self, spec: ResponseHandlerSpec, request: Any, response: Any, ctx: Any) -> None:
        wctx: WorkflowContext[Any, Any] = ctx
        task = wctx._task
        assert task.request is not None
        await run_task(
            self.compiled,
            self.info,
            wctx,
            wctx._committed,
            (),
            (task.request, task.messages[0]),
            run_objects(wctx.run_id),
        )


START_DISPATCH = "__start__"
"""Executor id of the dispatcher a workflow gets when several steps take its start event."""


class StartDispatcher(Executor):
    """Hands the start event to every step that takes it (only when more than one does)."""

    def __init__(self, targets: tuple[str, ...], options: ExecutorOptions) -> None:
        super().__init__(START_DISPATCH, options=options)
        self.targets = targets
        self._handler_specs = (HandlerSpec("dispatch", _unused, Any, (), ()),)

    async def _invoke(self, spec: HandlerSpec, message: Any, ctx: Any) -> None:
        from temporal_workflows._engine.machine import RoutedMessage

        wctx: WorkflowContext[Any, Any] = ctx
        for env in wctx._task.messages:
            for target in self.targets:
                wctx._result.sent.append(RoutedMessage.one(target, env, START_DISPATCH))


class LlamaGraph(Graph):
    """A compiled workflow's graph: outside events are checked against what the steps accept and await."""

    compiled: Compiled
    events_on: dict[str, tuple[str, ...]]
    """Per edge group id, the events its source step returns that its targets accept (for pictures)."""

    def edge_labels(self, group: EdgeGroup) -> tuple[str, ...]:
        """The events that travel along a group's edges (a step's picture shows what it emits)."""
        events_on: dict[str, tuple[str, ...]] = getattr(self, "events_on", {})
        return events_on.get(group.id, ())

    def validate_message(self, executor_id: str, message: Envelope) -> Envelope:
        """An event sent to a step from outside (the ``send`` signal/update), typed as the step accepts it."""
        info = self.compiled.steps.get(executor_id)
        if info is None:
            raise UndeliverableMessageError(
                f"no step {executor_id!r} in workflow {self.name!r}; steps: {sorted(self.compiled.steps)}",
                source_id="<input>",
                type_name=message.type or "json",
                targets=[executor_id],
            )
        value = decode(message)
        accepted = info.config.accepted_events
        names = [getattr(t, "__name__", str(t)) for t in accepted]
        if isinstance(value, Event):
            if not self.compiled.accepts(info, value):
                raise UndeliverableMessageError(
                    f"step {executor_id!r} does not accept a {type(value).__name__}; it accepts {names}",
                    source_id="<input>",
                    type_name=type(value).__name__,
                    targets=[executor_id],
                )
            return encode(value, what=f"event for step {executor_id!r}")
        errors: list[str] = []
        for tp in accepted:
            try:
                return encode(validate_as(tp, value, strict=True), what=f"event for step {executor_id!r}")
            except (ValueError, TypeError) as e:
                errors.append(f"{getattr(tp, '__name__', tp)}: {e}")
        raise UndeliverableMessageError(
            f"step {executor_id!r} accepts {names}; the message is none of them ({'; '.join(errors)})",
            source_id="<input>",
            type_name=describe(value),
            targets=[executor_id],
        )

    def route_event(
        self, event: Envelope, step: str | None, pending: Sequence[PendingRequest], *, busy: bool
    ) -> EventRoute:
        """An event sent into the run, routed by LlamaIndex's rule (``_routing``) over the pending waits.

        ``event``'s type key names its class; without one (plain JSON from
        the ``temporal`` CLI) it is the first class that validates of the
        awaited events, then the events ``step`` (or any step) accepts.
        ``busy``: the run has work queued (so it is not idle if nothing takes
        the event).

        Raises:
            UndeliverableMessageError: It is not an event of this workflow, or ``step`` does not take it.
        """
        compiled = self.compiled
        waits = waits_of_requests(pending)
        value = self._as_event(event, step, waits)
        if step is not None:
            try:
                compiled.check_target(step, value)
            except WorkflowRuntimeError as e:
                raise UndeliverableMessageError(
                    str(e), source_id="<input>", type_name=type(value).__name__, targets=[step]
                ) from None
        route = route_event(compiled, value, waits, step)
        typed = encode(value, what=f"event {type(value).__name__} sent into the run")
        notice = None
        if not route.handled:
            found = unhandled(value, step, idle=not busy)
            if found is not None:
                notice = encode(LlamaStreamEvent(event=event_json(found, None, "notice")))
        return EventRoute(typed, route.answers, route.targets, notice)

    def _as_event(self, event: Envelope, step: str | None, waits: Sequence[Wait]) -> Event:
        compiled = self.compiled
        if event.type is not None:
            tp = compiled.event_class(event.type)
            if tp is None and ":" not in event.type:  # a class name alone (the CLI user's shorthand)
                tp = compiled.event_class_named(event.type)
                if tp is not None:
                    return tp.model_validate(event.data)
            if tp is None:
                raise UndeliverableMessageError(
                    f"{event.type!r} is not an event class of workflow {self.name!r}",
                    source_id="<input>",
                    type_name=event.type,
                    targets=[step] if step else [],
                )
            value = decode(event)
            return value if isinstance(value, tp) else tp.model_validate(value)
        candidates: list[type[Event]] = []
        for w in waits:
            tp = compiled.event_class(w.event_type)
            if tp is not None and tp not in candidates:
                candidates.append(tp)
        infos = [compiled.steps[step]] if step in compiled.steps else list(compiled.steps.values())
        for info in infos:
            for tp in info.config.accepted_events:
                if isinstance(tp, type) and issubclass(tp, Event) and tp not in candidates:
                    candidates.append(tp)
        errors: list[str] = []
        for tp in candidates:
            try:
                return tp.model_validate(event.data, strict=True)
            except (ValueError, TypeError) as e:
                errors.append(f"{tp.__name__}: {e}")
        raise UndeliverableMessageError(
            f"the event is none of the events workflow {self.name!r} awaits or accepts"
            + (f" ({'; '.join(errors)})" if errors else "")
            + "; name its class with event_type",
            source_id="<input>",
            type_name="json",
            targets=[step] if step else [],
        )

    def validate_response(self, request: PendingRequest, value: Any) -> Envelope:
        """An event answering a ``wait_for_event``: of the awaited class, with the required field values."""
        rid = request.request_id
        if isinstance(value, RequestTimedOut):
            raise InvalidResponseError(
                rid, request.executor_id, "RequestTimedOut is what the run delivers when the deadline passes"
            )
        wait = decode(request.data)
        if not isinstance(wait, WaitRequest):
            raise InvalidResponseError(rid, request.executor_id, "the request is not a wait_for_event")
        tp = self.compiled.event_class(wait.event_type)
        if tp is None:
            raise InvalidResponseError(
                rid, request.executor_id, f"the awaited event type {wait.event_type} is unknown here"
            )
        try:
            event = value if isinstance(value, tp) else validate_as(tp, value)
        except (ValueError, TypeError) as e:
            raise InvalidResponseError(rid, request.executor_id, f"expected a {tp.__name__}: {e}") from None
        missing = {k: v for k, v in wait.requirements.items() if getattr(event, k, None) != v}
        if missing:
            raise InvalidResponseError(
                rid, request.executor_id, f"the {tp.__name__} does not have the required values of {sorted(missing)}"
            )
        return encode(event, what=f"response to request {rid!r}")


class Compiled:
    """A workflow instance as the engine sees it: steps, routing, and the graph.

    Built once per ``Workflow`` instance (again if steps were added since), and
    shared by every run of it, in process and in a Temporal worker.
    """

    def __init__(self, workflow: Workflow) -> None:
        from temporal_workflows.llama.context import DictState

        self.workflow = workflow
        self.version = type(workflow)._step_functions_version
        steps = workflow._get_steps()
        self.steps: dict[str, StepInfo] = {}
        for name, func in steps.items():
            config: StepConfig = func._step_config
            self.steps[name] = StepInfo(name, func, config)
        self.start_event_class: type[StartEvent] = workflow.start_event_class
        self._routes: dict[type, tuple[str, ...]] = {}
        self._event_classes: dict[str, type[Event]] = {}
        state_types = {c.context_state_type for c in (i.config for i in self.steps.values()) if c.context_state_type}
        self.state_type: type[BaseModel] = state_types.pop() if len(state_types) == 1 else DictState
        for info in self.steps.values():
            for tp in (*info.config.accepted_events, *info.config.return_types):
                if isinstance(tp, type) and issubclass(tp, BaseModel):
                    register_type(tp)
                if isinstance(tp, type) and issubclass(tp, Event):
                    self._event_classes[type_key(tp)] = tp
        register_type(self.state_type)
        self.catch_all: StepInfo | None = None
        self.catch_scoped: dict[str, StepInfo] = {}
        for info in self.steps.values():
            if info.config.role == "catch_error":
                if info.config.catch_error_for_steps is None:
                    self.catch_all = info
                else:
                    for s in info.config.catch_error_for_steps:
                        self.catch_scoped[s] = info
        self.graph = self._build()

    # -- routing -------------------------------------------------------------------------------------------------

    def accepts(self, info: StepInfo, event: Event) -> bool:
        if info.config.accept_event_subclasses:
            return any(isinstance(event, t) for t in info.config.accepted_events)
        return type(event) in info.config.accepted_events

    def targets_for(self, event: Event) -> tuple[str, ...]:
        """The steps an event goes to (cached per event class)."""
        tp = type(event)
        found = self._routes.get(tp)
        if found is None:
            found = tuple(
                name
                for name, info in self.steps.items()
                if info.config.role == "step" and self.accepts(info, event) and not issubclass(tp, StopEvent)
            )
            self._routes[tp] = found
        return found

    def check_target(self, step: str, event: Event) -> None:
        info = self.steps.get(step)
        if info is None:
            raise WorkflowRuntimeError(f"Step {step} does not exist")
        if not self.accepts(info, event):
            raise WorkflowRuntimeError(f"Step {step} does not accept event of type {type(event)}")

    def event_class(self, key: str) -> type[Event] | None:
        """The event class a type key names, if decoding may build it (the serde's rules: nothing is imported)."""
        tp = self._event_classes.get(key)
        if tp is None:
            try:
                found = resolve_type(key)
            except Exception:
                return None
            if isinstance(found, type) and issubclass(found, Event):
                tp = self._event_classes[key] = found
        return tp

    def event_class_named(self, name: str) -> type[Event] | None:
        """The event class of this workflow's steps named ``name`` (its accepted and returned events)."""
        found = [tp for tp in self._event_classes.values() if tp.__name__ == name]
        return found[0] if len(found) == 1 else None

    def catch_error_for(self, step: str) -> StepInfo | None:
        if self.steps.get(step) is not None and self.steps[step].config.role == "catch_error":
            return None
        return self.catch_scoped.get(step) or self.catch_all

    # -- running a step ----------------------------------------------------------------------------------------

    def verbose_line(self, line: str) -> None:
        if self.workflow._verbose:
            print(line)

    async def call_step(self, info: StepInfo, inv: Invocation) -> Any:
        """Call the step function with its event, its context and its resources."""
        from temporal_workflows.llama.context import Context

        config = info.config
        kwargs: dict[str, Any] = {config.event_name: inv.trigger}
        if config.context_parameter is not None:
            kwargs[config.context_parameter] = Context._for_invocation(self.workflow, inv)
        for resource in config.resources:
            descriptor = resource.resource
            descriptor.set_type_annotation(resource.type_annotation)
            kwargs[resource.name] = await self.workflow._resource_manager.get(descriptor)
        if config.is_async:
            return await info.func(**kwargs)
        # A plain ``def`` step runs in a thread, as in LlamaIndex, so it cannot block the event loop.
        return await asyncio.to_thread(info.func, **kwargs)

    # -- the graph ------------------------------------------------------------------------------------------------

    def _build(self) -> GraphWorkflow:
        wf = self.workflow
        name = wf._temporal_name()
        start_steps = [
            n
            for n, i in self.steps.items()
            if i.config.role == "step" and self.start_event_class in i.config.accepted_events
        ]
        timeout = wf._timeout
        options = ExecutorOptions(
            start_to_close_timeout=timedelta(seconds=timeout) if timeout else DEFAULT_STEP_TIMEOUT,
            heartbeat_timeout=STEP_HEARTBEAT_TIMEOUT,
        )
        executors: dict[str, Executor] = {n: StepExecutor(self, i, options) for n, i in self.steps.items()}
        start_id = start_steps[0]
        if len(start_steps) > 1:
            start_id = START_DISPATCH
            executors = {START_DISPATCH: StartDispatcher(tuple(start_steps), options), **executors}
        groups: list[EdgeGroup] = []
        carried: dict[str, tuple[str, ...]] = {}
        for source, info in self.steps.items():
            targets: list[str] = []
            events: list[str] = []
            for rt in info.config.return_types:
                for target, tinfo in self.steps.items():
                    accepted = tinfo.config.accepted_events
                    takes = isinstance(rt, type) and (
                        rt in accepted
                        or (
                            tinfo.config.accept_event_subclasses
                            and any(issubclass(rt, a) for a in accepted if isinstance(a, type))
                        )
                    )
                    if takes and target not in targets:
                        targets.append(target)
                    if takes and isinstance(rt, type) and rt.__name__ not in events:
                        events.append(rt.__name__)
            if targets:
                group_id = f"fan_out:{source}->{','.join(targets)}"
                groups.append(EdgeGroup(group_id, "fan_out", [source], targets))
                carried[group_id] = tuple(events)
        shape = {
            "name": name,
            "start": start_steps,
            "steps": [
                {
                    "name": n,
                    "accepts": [type_key(t) if isinstance(t, type) else repr(t) for t in i.config.accepted_events],
                    "returns": [type_key(t) if isinstance(t, type) else repr(t) for t in i.config.return_types],
                    "num_workers": i.config.num_workers,
                    "role": i.config.role,
                }
                for n, i in self.steps.items()
            ],
        }
        digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()
        topology = Topology(
            name=name,
            start_executor_id=start_id,
            executor_ids=tuple(executors),
            fan_in_groups={},
            reducers={},
            max_iterations=MAX_SUPERSTEPS,
            signature_hash=digest,
            edges=tuple(g.describe() for g in groups),
            batched=tuple(self.steps),
            arrival_order=True,  # LlamaIndex hands a step's events on when it returns
        )
        graph = LlamaGraph(
            topology=topology,
            executors=dict(executors),
            groups=groups,
            reducer_funcs={},
            description=(type(wf).__doc__ or "").strip() or None,
        )
        graph.compiled = self
        graph.events_on = carried
        return GraphWorkflow(graph)

    def outside_targets(self, event: Event, step: str | None) -> tuple[str, ...]:
        if step is not None:
            self.check_target(step, event)
            return (step,)
        return self.targets_for(event)


def compile_workflow(workflow: Workflow) -> Compiled:
    return Compiled(workflow)


def decode_state(state: Mapping[str, Envelope]) -> dict[str, Any]:
    return {k: decode(v) for k, v in state.items() if not k.startswith("@")}
