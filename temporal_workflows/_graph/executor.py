"""Executors: the nodes of a graph, and the decorators that declare their handlers.

The surface is Microsoft Agent Framework's (``Executor`` + ``@handler``,
``@executor`` functions, ``@response_handler``) so a MAF graph ports by
changing imports. Handler signatures are read once, when the class or function
is defined, so a bad signature fails at import time, not mid-run.
"""

from __future__ import annotations

import asyncio
import collections.abc
import inspect
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, get_args, get_origin, overload

from temporalio.common import RetryPolicy

from temporal_workflows._engine.machine import StateWrite, StepResult, executor_hook_key
from temporal_workflows._engine.serde import Envelope, decode, encode, validate_as
from temporal_workflows._errors import WorkflowError, describe
from temporal_workflows._graph.typecheck import AcceptsTable, accepts, caller_locals, flatten, type_name

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "DEFAULT_RETRY_POLICY",
    "DEFAULT_START_TO_CLOSE_TIMEOUT",
    "Executor",
    "ExecutorOptions",
    "FunctionExecutor",
    "HandlerSpec",
    "ResponseHandlerSpec",
    "checkpoint_hooks",
    "executor",
    "handler",
    "response_handler",
]


DEFAULT_START_TO_CLOSE_TIMEOUT = timedelta(minutes=5)
"""Longest one attempt of a step may run on Temporal unless its executor says otherwise."""

DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
"""How long a step on Temporal may go without a heartbeat unless its executor says otherwise.

Every step heartbeats automatically while it runs (every third of this), so a
worker that dies mid-step (``kill -9``, a lost host) is noticed within this
time, not after the whole :data:`DEFAULT_START_TO_CLOSE_TIMEOUT`, and a
cancelled run's cancel reaches every step."""

DEFAULT_RETRY_POLICY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3)
"""How a step is retried on Temporal unless its executor gives a ``retry_policy``: at most 3
attempts, 1 s then 2 s apart (Temporal's own default would retry for ever)."""


@dataclass(frozen=True)
class ExecutorOptions:
    """How an executor's steps run when the graph is hosted on Temporal.

    In process they are ignored (but ``concurrent``): a failing handler fails the run at once. On
    Temporal each step is an activity and these become its options (in one
    place, ``temporal_workflows.temporal._workflow.options``), so a flaky model call
    retries per its policy and a slow step gets its own worker pool.

    Attributes:
        start_to_close_timeout: Longest a single attempt may run
            (default :data:`DEFAULT_START_TO_CLOSE_TIMEOUT`, 5 minutes).
        heartbeat_timeout: An attempt that sends no heartbeat for this long
            is failed and retried (default :data:`DEFAULT_HEARTBEAT_TIMEOUT`,
            30 seconds). Every step heartbeats automatically, every third of
            it, while its handler runs, also while the handler awaits: that is
            how a worker that died mid-step is noticed and how a cancel reaches
            a running step, without the handler calling ``ctx.heartbeat()``.
            A handler that blocks the event loop (CPU-bound work, blocking I/O)
            sends none meanwhile: run such work with ``asyncio.to_thread``, or
            raise this. ``None`` or ``timedelta(0)``: no heartbeat timeout and
            no automatic heartbeats (what steps had before this default); a
            dead worker is then noticed only after ``start_to_close_timeout``,
            and a cancel reaches the step only through heartbeats it sends
            itself (the run does not wait for it to stop). Local steps never
            heartbeat.
        task_queue: Run this executor's steps on another worker pool.
        retry_policy: A ``temporalio.common.RetryPolicy``; ``None`` means
            :data:`DEFAULT_RETRY_POLICY` (at most 3 attempts).
        local: Run as a local activity: for cheap, fast steps, fewer history events.
        concurrent: Handle the messages one sender sends this executor in one
            superstep side by side, not one after another. By default they
            are handled in the order they were sent, each to its end before
            the next (Agent Framework's order: a handler that collects what it
            receives in its attributes sees it in send order); turn this on
            for an executor that takes many independent items through one
            edge (a wide fan-out), where running them concurrently is the
            point. Unlike the options above it applies in process too.
    """

    start_to_close_timeout: timedelta = DEFAULT_START_TO_CLOSE_TIMEOUT
    heartbeat_timeout: timedelta | None = DEFAULT_HEARTBEAT_TIMEOUT
    task_queue: str | None = None
    retry_policy: RetryPolicy | None = None
    local: bool = False
    concurrent: bool = False


@dataclass(frozen=True)
class HandlerSpec:
    """A message handler as read from its signature."""

    name: str
    func: Callable[..., Awaitable[Any]]
    input_type: Any
    output_types: tuple[Any, ...]
    workflow_output_types: tuple[Any, ...]
    bound: bool = True


@dataclass(frozen=True)
class ResponseHandlerSpec:
    """A ``@response_handler`` as read from its signature."""

    name: str
    func: Callable[..., Awaitable[Any]]
    request_type: Any
    response_type: Any
    output_types: tuple[Any, ...] = ()
    workflow_output_types: tuple[Any, ...] = ()


_HANDLER_FRAMES = 3
"""How many frames around a ``@handler`` lend their locals to its annotations (see ``caller_locals``)."""


def _hints(func: Callable[..., Any], localns: dict[str, Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, localns=localns)
    except Exception as e:
        raise TypeError(f"cannot resolve the type annotations of handler {func.__qualname__!r}: {e}") from e


def _context_types(ctx_annotation: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``WorkflowContext[T_Out, T_W_Out]`` → (what it sends, what it yields)."""
    args = get_args(ctx_annotation)
    if not args:
        return (), ()

    def members(tp: Any) -> tuple[Any, ...]:
        if tp is typing.Never or tp is getattr(typing, "NoReturn", None) or tp is type(None) or tp is None:
            return ()
        return tuple(m for m in flatten(tp) if m is not type(None))

    outs = members(args[0])
    wouts = members(args[1]) if len(args) > 1 else ()
    return outs, wouts


def _as_tuple(tp: Any) -> tuple[Any, ...]:
    if tp is None:
        return ()
    if isinstance(tp, (list, tuple)):
        return tuple(tp)
    return tuple(flatten(tp))


def _read_handler(
    func: Callable[..., Any],
    *,
    bound: bool,
    input: Any = None,
    output: Any = None,
    workflow_output: Any = None,
    localns: dict[str, Any],
) -> HandlerSpec:
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"handler {func.__qualname__!r} must be an async function")
    params = list(inspect.signature(func).parameters.values())
    if bound:
        params = params[1:]
    if len(params) != 2:
        raise TypeError(
            f"handler {func.__qualname__!r} must take (message, ctx){' after self' if bound else ''}; "
            f"it takes {len(params)} parameters"
        )
    hints = _hints(func, localns)
    msg_t = input if input is not None else hints.get(params[0].name)
    if msg_t is None:
        raise TypeError(
            f"handler {func.__qualname__!r}: annotate the message parameter {params[0].name!r} "
            "(or pass @handler(input=...)) so messages can be routed by type"
        )
    outs, wouts = _context_types(hints.get(params[1].name))
    if output is not None:
        outs = _as_tuple(output)
    if workflow_output is not None:
        wouts = _as_tuple(workflow_output)
    return HandlerSpec(func.__name__, func, msg_t, outs, wouts, bound)


_HANDLER_ATTR = "__temporal_workflows_handler__"
_RESPONSE_ATTR = "__temporal_workflows_response_handler__"

F = typing.TypeVar("F", bound=Callable[..., Any])


@overload
def handler(func: F, /) -> F: ...


@overload
def handler(*, input: Any = None, output: Any = None, workflow_output: Any = None) -> Callable[[F], F]: ...


def handler(func: Any = None, /, *, input: Any = None, output: Any = None, workflow_output: Any = None) -> Any:
    """Mark an ``async def h(self, msg: T, ctx: WorkflowContext[...])`` method as a handler.

    The message type comes from the annotation (or ``input=``); what the handler
    sends and yields comes from ``WorkflowContext[T_Out, T_W_Out]`` (or
    ``output=`` / ``workflow_output=``) and is checked against the graph's edges
    by ``build()``.
    """

    def wrap(f: F) -> F:
        localns = caller_locals(2, _HANDLER_FRAMES)
        spec = _read_handler(
            f, bound=True, input=input, output=output, workflow_output=workflow_output, localns=localns
        )
        setattr(f, _HANDLER_ATTR, spec)
        return f

    if func is not None:
        return wrap(func)
    return wrap


def response_handler(func: F) -> F:
    """Mark ``async def on(self, original_request: Req, response: Resp, ctx)`` as a response handler.

    It runs in the superstep after a response to a ``ctx.request_info`` call of
    this executor arrives; it is picked by the request's and response's types.
    """
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"response handler {func.__qualname__!r} must be an async function")
    params = list(inspect.signature(func).parameters.values())[1:]
    if len(params) != 3:
        raise TypeError(
            f"response handler {func.__qualname__!r} must take (original_request, response, ctx) after self"
        )
    hints = _hints(func, caller_locals(2, _HANDLER_FRAMES))
    req_t = hints.get(params[0].name, Any)
    resp_t = hints.get(params[1].name, Any)
    outs, wouts = _context_types(hints.get(params[2].name))
    setattr(func, _RESPONSE_ATTR, ResponseHandlerSpec(func.__name__, func, req_t, resp_t, outs, wouts))
    return func


class Executor:
    """A node of the graph. Subclass it and declare ``@handler`` methods.

    Keep per-executor data in ``ctx.set_executor_state`` (committed like
    shared state). An executor that keeps state in its attributes instead
    (as Agent Framework executors may) must override
    :meth:`on_checkpoint_save` and :meth:`on_checkpoint_restore`: on Temporal
    every step may run in another process, so the state the save hook
    returns after each step is committed with the superstep (and kept in
    checkpoints), and before a step the restore hook brings the instance to
    the state committed for that run (see :func:`checkpoint_hooks`).

    Args:
        id: Unique id within the graph; defaults to the class name.
        options: How its steps run as Temporal activities.
    """

    _handler_specs: tuple[HandlerSpec, ...] = ()
    _response_specs: tuple[ResponseHandlerSpec, ...] = ()

    def __init__(self, id: str | None = None, *, options: ExecutorOptions | None = None) -> None:
        self.id = id or type(self).__name__
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"executor id must be a non-empty string, not {self.id!r}")
        self.options = options or ExecutorOptions()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        handlers: dict[str, HandlerSpec] = {}
        responses: dict[str, ResponseHandlerSpec] = {}
        for klass in reversed(cls.__mro__):
            for name, attr in vars(klass).items():
                spec = getattr(attr, _HANDLER_ATTR, None)
                if isinstance(spec, HandlerSpec):
                    handlers[name] = spec
                rspec = getattr(attr, _RESPONSE_ATTR, None)
                if isinstance(rspec, ResponseHandlerSpec):
                    responses[name] = rspec
        cls._handler_specs = tuple(handlers.values())
        cls._response_specs = tuple(responses.values())

    @property
    def handlers(self) -> tuple[HandlerSpec, ...]:
        """The message handlers, in definition order (first match wins)."""
        return self._handler_specs

    @property
    def response_handlers(self) -> tuple[ResponseHandlerSpec, ...]:
        return self._response_specs

    @property
    def input_types(self) -> list[Any]:
        return [h.input_type for h in self.handlers]

    @property
    def workflow_output_types(self) -> list[Any]:
        """What its handlers yield as workflow outputs (``WorkflowContext[..., T_W_Out]``)."""
        seen: list[Any] = []
        specs: list[HandlerSpec | ResponseHandlerSpec] = [*self.handlers, *self.response_handlers]
        for h in specs:
            for t in h.workflow_output_types:
                if t not in seen:
                    seen.append(t)
        return seen

    # -- hooks (Agent Framework's) ------------------------------------------------------------

    async def on_checkpoint_save(self) -> dict[str, Any]:
        """The state this executor keeps in its attributes, as a JSON-serializable dict.

        Called after each of its steps (when overridden); what it returns is
        committed with the superstep and kept in checkpoints. Default: none.
        """
        return {}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        """Bring the attributes back to ``state`` (what :meth:`on_checkpoint_save` returned).

        Called before a step when the instance does not hold the state the run
        committed for it: after a restore from a checkpoint, on another worker,
        or after a step of another run on the same worker. A new run's first
        step gives it the state it had when it was built.
        """

    async def reset(self) -> None:
        """Forget per-run state kept in attributes; ``Workflow.reset_for_new_run()`` calls it. Default: nothing."""

    @property
    def has_checkpoint_hooks(self) -> bool:
        """Whether it overrides :meth:`on_checkpoint_save` (and so keeps state in its attributes)."""
        return type(self).on_checkpoint_save is not Executor.on_checkpoint_save

    @property
    def output_types(self) -> list[Any]:
        seen: list[Any] = []
        specs: list[HandlerSpec | ResponseHandlerSpec] = [*self.handlers, *self.response_handlers]
        for h in specs:
            for t in h.output_types:
                if t not in seen:
                    seen.append(t)
        return seen

    def find_handler(self, message: Any) -> HandlerSpec | None:
        """The first handler whose input type accepts ``message`` as it is (looked up per message type)."""
        handlers = self.handlers
        i = self._accepts_table(handlers, item=False).first(message)
        return None if i is None else handlers[i]

    def accepts_items(self, item: Any) -> bool:
        """Whether a handler takes a list holding ``item`` (a fan-in target, for one source's message)."""
        return self._accepts_table(self.handlers, item=True).first(item) is not None

    def _accepts_table(self, handlers: tuple[HandlerSpec, ...], *, item: bool) -> AcceptsTable:
        """The routing table of these handlers' input types, kept on the instance until its handlers change."""
        key = _TABLE_ITEMS if item else _TABLE
        kept: tuple[tuple[HandlerSpec, ...], AcceptsTable] | None = self.__dict__.get(key)
        if kept is not None and kept[0] is handlers:
            return kept[1]
        table = AcceptsTable([h.input_type for h in handlers], item=item)
        self.__dict__[key] = (handlers, table)
        return table

    def accepts_message(self, message: Any) -> bool:
        return self.find_handler(message) is not None

    def coerce(self, message: Any) -> tuple[HandlerSpec, Any] | None:
        """Match plain JSON (e.g. a start message from a CLI) to a handler by validating it.

        Validation is strict JSON validation, so a JSON object can become a
        model but a ``"5"`` is never delivered to an ``int`` handler: routing
        stays by type.
        """
        h = self.find_handler(message)
        if h is not None:
            return h, message
        for h in self.handlers:
            try:
                return h, validate_as(h.input_type, message, strict=True)
            except (ValueError, TypeError):
                continue
        return None

    def find_response_handler(self, request: Any, response_type_name: str | None) -> ResponseHandlerSpec | None:
        for r in self.response_handlers:
            if accepts(r.request_type, request) and (
                response_type_name is None or type_name(r.response_type) == response_type_name
            ):
                return r
        for r in self.response_handlers:  # response type named differently (e.g. Optional[...])
            if accepts(r.request_type, request):
                return r
        return None

    async def _invoke(self, spec: HandlerSpec, message: Any, ctx: Any) -> None:
        await spec.func(self, message, ctx)

    async def _invoke_response(self, spec: ResponseHandlerSpec, request: Any, response: Any, ctx: Any) -> None:
        await spec.func(self, request, response, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


class FunctionExecutor(Executor):
    """An executor made from one ``async def f(msg: T, ctx)`` by ``@executor``."""

    def __init__(
        self,
        func: Callable[..., Awaitable[Any]],
        *,
        id: str | None = None,
        input: Any = None,
        output: Any = None,
        workflow_output: Any = None,
        options: ExecutorOptions | None = None,
        localns: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(id or func.__name__, options=options)
        spec = _read_handler(
            func,
            bound=False,
            input=input,
            output=output,
            workflow_output=workflow_output,
            localns=localns or {},
        )
        self._handler_specs = (spec,)
        self._func = func
        self.__doc__ = func.__doc__

    async def _invoke(self, spec: HandlerSpec, message: Any, ctx: Any) -> None:
        await spec.func(message, ctx)

    async def __call__(self, message: Any, ctx: Any) -> None:
        """Call the wrapped function directly, e.g. from a unit test."""
        await self._func(message, ctx)


@overload
def executor(func: Callable[..., Awaitable[Any]], /) -> FunctionExecutor: ...


@overload
def executor(
    *,
    id: str | None = None,
    input: Any = None,
    output: Any = None,
    workflow_output: Any = None,
    options: ExecutorOptions | None = None,
) -> Callable[[Callable[..., Awaitable[Any]]], FunctionExecutor]: ...


def executor(
    func: Any = None,
    /,
    *,
    id: str | None = None,
    input: Any = None,
    output: Any = None,
    workflow_output: Any = None,
    options: ExecutorOptions | None = None,
) -> Any:
    """Turn ``async def f(msg: T, ctx: WorkflowContext[...])`` into an executor (id = ``id`` or its name)."""

    def wrap(f: Callable[..., Awaitable[Any]]) -> FunctionExecutor:
        return FunctionExecutor(
            f,
            id=id,
            input=input,
            output=output,
            workflow_output=workflow_output,
            options=options,
            localns=caller_locals(2, _HANDLER_FRAMES),
        )

    if func is not None:
        return wrap(func)
    return wrap


def is_list_of(tp: Any) -> Any | None:
    """The element type if ``tp`` is ``list[T]`` (a fan-in handler), else ``None``."""
    if get_origin(tp) in (list, collections.abc.Sequence):
        args = get_args(tp)
        return args[0] if args else Any
    return None


# -- checkpoint hooks around a step ---------------------------------------------------------------

_TABLE = "_temporal_workflows_accepts_table"
"""Where an executor keeps its handlers' routing table (``find_handler``), with the handlers it was made for."""
_TABLE_ITEMS = "_temporal_workflows_accepts_items_table"
"""Likewise for ``accepts_items`` (fan-in targets)."""
_INITIAL_STATE = "_temporal_workflows_initial_checkpoint_state"
_HOOK_LOCK = "_temporal_workflows_hook_lock"


async def _saved_state(ex: Executor) -> Envelope:
    """What ``on_checkpoint_save`` returns now, as an envelope (MAF's contract: a dict with string keys)."""
    state = await ex.on_checkpoint_save()
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise WorkflowError(
            f"executor {ex.id!r}: on_checkpoint_save must return a dict with string keys (the executor's "
            f"checkpoint state), not {describe(state)}"
        )
    return encode(state, what=f"checkpoint state of executor {ex.id!r} (what on_checkpoint_save returned)")


def _hook_lock(ex: Executor) -> asyncio.Lock:
    """One lock per executor instance and event loop: its steps take turns at its attributes."""
    loop = asyncio.get_running_loop()
    held: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = ex.__dict__.get(_HOOK_LOCK)
    if held is None or held[0] is not loop:
        held = (loop, asyncio.Lock())
        ex.__dict__[_HOOK_LOCK] = held
    return held[1]


@asynccontextmanager
async def checkpoint_hooks(ex: Executor, state: Mapping[str, Envelope], result: StepResult) -> AsyncIterator[None]:
    """Run one step of ``ex`` with its checkpoint hooks, the same way in process and on Temporal.

    An executor that keeps state in attributes (it overrides
    ``on_checkpoint_save``) lives in one process per worker, shared by every
    run and every retry, while its state belongs to one run. So each of its
    steps, one at a time per instance:

    1. brings the instance to the state the run committed for it (key
       :func:`executor_hook_key`, or, when the run has none yet, the state the
       instance had when first used in this process), calling
       ``on_checkpoint_restore`` only if the instance holds something else;
    2. runs the handler;
    3. records what ``on_checkpoint_save`` returns, if it changed, as a state
       write of the step: committed with the superstep, checkpointed, carried
       across continue-as-new, measured against the payload limit like any
       write (an error names the executor).

    Other executors run unchanged (and concurrently, as before).
    """
    if not ex.has_checkpoint_hooks:
        yield
        return
    async with _hook_lock(ex):
        initial: Envelope | None = ex.__dict__.get(_INITIAL_STATE)
        if initial is None:
            initial = await _saved_state(ex)
            ex.__dict__[_INITIAL_STATE] = initial
        key = executor_hook_key(ex.id)
        target = state.get(key) or initial
        if await _saved_state(ex) != target:
            await ex.on_checkpoint_restore(decode(target))
        yield
        after = await _saved_state(ex)
        if after != target:
            result.writes.append(StateWrite(key, after))
