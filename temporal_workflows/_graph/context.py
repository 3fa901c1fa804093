"""What a handler sees: ``WorkflowContext``, and the function that runs one step.

A step reads the state committed at the last superstep boundary plus its own
writes, and records everything it does (writes, messages, outputs, requests,
events) in a :class:`StepResult`. Nothing becomes visible to other steps until
the engine commits the superstep, which is what makes concurrent steps safe
and the commit deterministic.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, Never, Protocol

from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic_core import to_json
from typing_extensions import TypeVar

from temporal_workflows._engine.limits import check_step_result
from temporal_workflows._engine.machine import (
    EXECUTOR_STATE_PREFIX,
    PendingRequest,
    RoutedMessage,
    StateWrite,
    StepResult,
    StepTask,
    apply_builtin_reducer,
    executor_hook_key,
    is_shared_key,
)
from temporal_workflows._engine.serde import Envelope, decode, encode, json_schema
from temporal_workflows._errors import NotSerializableError, UndeliverableMessageError, WorkflowError, describe
from temporal_workflows._events import WorkflowEvent
from temporal_workflows._graph.executor import checkpoint_hooks
from temporal_workflows._graph.typecheck import accepts, type_name
from temporal_workflows._live import (
    MAX_LIVE_EVENT_BYTES,
    LiveCommittedEvent,
    LiveEvent,
    LiveOmittedEvent,
    StepRetryEvent,
)
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows._telemetry import Attr, tracer

if TYPE_CHECKING:  # import cycle at runtime
    from temporal_workflows._graph.graph import Graph

__all__ = ["LiveSink", "StateView", "WorkflowContext", "payload_type", "run_step"]

T_Out = TypeVar("T_Out", default=Never)
T_W_Out = TypeVar("T_W_Out", default=Never)

_MISSING = object()

Heartbeat = Callable[..., None]
"""How a host records a step's heartbeat (with its details); a no-op in process."""


def _no_heartbeat(*details: Any) -> None:
    """In process there is no server to tell, and a step runs in the caller's own task."""


_log = logging.getLogger(__name__)


class LiveSink(Protocol):
    """Where a host sends the live events a running step publishes (in process: the caller's stream;
    on Temporal: the run's workflow stream, batched)."""

    def publish(self, event: LiveEvent, data: bytes) -> None:
        """Take one stamped live event (``data``: its envelope as JSON); must not block (a host batches or
        queues it)."""

    async def room(self) -> None:
        """Return once the sink can take more: a step that publishes faster than its events can be sent
        waits here (backpressure) instead of growing a backlog without bound."""


class StateView:
    """Dict-like access to shared (or one executor's private) state, with commit rules."""

    def __init__(self, ctx: WorkflowContext[Any, Any], prefix: str) -> None:
        self._ctx = ctx
        self._prefix = prefix

    def get(self, key: str, default: Any = None) -> Any:
        return self._ctx._get(self._prefix + key, default)

    def set(self, key: str, value: Any) -> None:
        self._ctx._set(self._prefix + key, value)

    def has(self, key: str) -> bool:
        return self._ctx._get(self._prefix + key, _MISSING) is not _MISSING

    def delete(self, key: str) -> None:
        self._ctx._delete(self._prefix + key)

    def __contains__(self, key: str) -> bool:
        return self.has(key)

    def __getitem__(self, key: str) -> Any:
        v = self._ctx._get(self._prefix + key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)


class WorkflowContext(Generic[T_Out, T_W_Out]):
    """The handle a handler uses to act: send, yield, read/write state, ask for input.

    Type parameters (as in Agent Framework) declare what the handler sends
    (``T_Out``) and yields as workflow output (``T_W_Out``); ``build()`` checks
    them against the graph's edges.

    Attributes:
        executor_id: The executor running.
        superstep: The superstep this step belongs to.
        run_id: The run (in process: a fresh id per ``run(message)``; on Temporal:
            the workflow id).
        idempotency_key: Unique for this step and the same across its retries,
            replays and continue-as-new; pass it to external APIs so a retried
            step applies its side effect once. A reset starts a new epoch, so a
            step re-run after one gets a new key.
        attempt: The attempt number of this step (1 in process).

    The host running the step gives it ``attempt`` and ``heartbeat`` (on
    Temporal, the step activity; in process, the defaults), so this module
    knows nothing of Temporal.
    """

    def __init__(
        self,
        *,
        graph: Graph,
        task: StepTask,
        state: Mapping[str, Envelope],
        run_id: str,
        attempt: int = 1,
        epoch: int = 0,
        heartbeat: Heartbeat = _no_heartbeat,
        live: LiveSink | None = None,
        streaming: bool | None = None,
        invocation_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self._graph = graph
        self._streaming = streaming
        self._invocation_kwargs = invocation_kwargs or {}
        self._heartbeat = heartbeat
        self._live = live
        self._live_items = 0
        self._task = task
        self._committed = state
        self._result = StepResult()
        self._own: dict[str, list[StateWrite]] = {}
        self._requests = 0
        self.executor_id = task.executor_id
        self.superstep = task.superstep
        self.run_id = run_id
        self.attempt = attempt
        self._epoch = epoch
        # ``idempotency_key``, ``state`` and ``executor_state`` are made when first read (most steps never read
        # them; a step costs a few objects less), then kept as attributes.

    @functools.cached_property
    def idempotency_key(self) -> str:
        """Unique for this step, the same across its retries (see the class's attributes)."""
        run_id, epoch, key = self.run_id, self._epoch, self._task.step_key
        return f"{run_id}:{key}" if not epoch else f"{run_id}@{epoch}:{key}"

    @functools.cached_property
    def state(self) -> StateView:
        """The shared state (Agent Framework's ``ctx.state``): ``get`` / ``set`` / ``has`` / ``delete``."""
        return StateView(self, "")

    @functools.cached_property
    def executor_state(self) -> StateView:
        """This executor's private state, committed like shared state."""
        return StateView(self, f"{EXECUTOR_STATE_PREFIX}{self._task.executor_id}/")

    @property
    def workflow_name(self) -> str | None:
        return self._graph.name

    def is_streaming(self) -> bool:
        """Whether the run is being streamed (Agent Framework's ``ctx.is_streaming()``).

        In process: the ``run(..., stream=True)`` call this step belongs to.
        On Temporal: the durable twin's ``run(..., stream=True)`` call
        (``on_temporal``); a run started otherwise (``start_run``, the CLI) is
        read as a stream of events (``RunHandle.events()``), so it says ``True``.
        """
        return self._streaming is not False

    def invocation_kwargs(self, name: str) -> dict[str, Any] | None:
        """This executor's share of the run's ``function_invocation_kwargs`` or ``client_kwargs`` (``name``).

        As Agent Framework resolves them: a mapping whose keys include executor
        ids gives each its own entry (and ``"__global__"`` to all); any other
        mapping is for every executor. ``None``: the run was given none.
        """
        given = self._invocation_kwargs.get(name)
        if not isinstance(given, dict):
            return None
        ids = self._graph.executors
        if not any(k in ids for k in given):
            return dict(given)
        mine: dict[str, Any] = {}
        for part in (given.get("__global__"), given.get(self.executor_id)):
            if isinstance(part, dict):
                mine.update(part)
        return mine or None

    @property
    def stream_mode(self) -> bool | None:
        """How the run is read: ``True`` streamed, ``False`` awaited (``run()``), ``None`` not said (a Temporal
        run started by ``start_run``: its events are a stream and its outputs a result). ``AgentExecutor`` follows
        it (Agent Framework's non-streaming and streaming model calls and outputs)."""
        return self._streaming

    # -- messages and outputs -------------------------------------------------

    async def send_message(self, message: T_Out, target_id: str | None = None) -> None:
        """Send ``message`` along this executor's edges; delivered next superstep.

        Raises:
            UndeliverableMessageError: no connected target accepts its type, or
                ``target_id`` is not connected.
            NotSerializableError: the message cannot round-trip JSON.
        """
        env = encode(message, what=f"message sent by executor {self.executor_id!r}")
        attributes = {Attr.MESSAGE_TYPE: type(message).__name__, Attr.MESSAGE_SOURCE_ID: self.executor_id}
        if target_id:
            attributes[Attr.MESSAGE_DESTINATION_EXECUTOR_ID] = target_id
        with tracer().start_as_current_span(Attr.MESSAGE_SEND_SPAN, kind=SpanKind.PRODUCER, attributes=attributes):
            routed = self._graph.route(self.executor_id, message, env, target_id)
        self._result.sent.extend(routed)
        self._result.emitted.append(f"s{len(routed)}")
        if not routed:
            self._result.unrouted.append(env)  # shown in the step's executor_completed event

    def _send_to_self(self, message: Any) -> None:
        """Deliver ``message`` to this executor next superstep, without an edge.

        For the library's own executors that must look again once a
        superstep's writes are committed (the agent layer, when several
        approvals of one turn are answered in the same superstep and no step
        of it sees all of them). Users send along edges.
        """
        env = encode(message, what=f"message executor {self.executor_id!r} sent itself")
        self._result.sent.append(RoutedMessage.one(self.executor_id, env, self.executor_id))

    async def yield_output(self, output: T_W_Out) -> None:
        """Add a workflow output; it appears in the run's outputs at the commit."""
        self._result.outputs.append(encode(output, what=f"output yielded by executor {self.executor_id!r}"))
        self._result.emitted.append("o")

    async def add_event(self, event: WorkflowEvent) -> None:
        """Emit a custom event to the run's event stream.

        A :class:`~temporal_workflows.events.LiveEvent` (agent updates, progress,
        partial results) is published at once, while this step still runs,
        tagged with the step, its attempt and a sequence number; on Temporal
        it travels batched in the run's event stream and is not part of the
        step's result. Any other event joins the stream when this step
        completes, with its other results (committed).
        """
        if not isinstance(event, WorkflowEvent):
            raise NotSerializableError(
                f"executor {self.executor_id!r}: add_event takes a WorkflowEvent subclass, not {describe(event)}"
            )
        if event.data is not None and event.data_type is None:
            # The payload's own type travels with it, so readers get the object back, not its JSON.
            kind = "a live event" if isinstance(event, LiveEvent) else "an event"
            data_type = encode(event.data, what=f"data of {kind} from executor {self.executor_id!r}").type
            if data_type is not None:
                event = event.model_copy(update={"data_type": data_type})
        if isinstance(event, LiveEvent):
            self._publish_live(event)
            if self._live is not None:
                await self._live.room()
            return
        self._result.events.append(encode(event, what=f"event from executor {self.executor_id!r}"))
        self._result.emitted.append("e")

    def _publish_live(self, event: LiveEvent, *, counted: bool = True) -> None:
        what = f"live event from executor {self.executor_id!r}"
        tags = {
            "executor_id": self.executor_id,
            "superstep": self.superstep,
            "index": self._task.index,
            "attempt": self.attempt,
            "seq": self._live_items + 1 if counted else 0,
        }
        stamped = event.model_copy(update=tags)
        env = encode(stamped, what=what)  # a value that cannot round-trip JSON fails here, in process and on Temporal
        data = to_json(env)
        if len(data) > MAX_LIVE_EVENT_BYTES:
            # Too large for one signal on Temporal: a note stands in for it, in process and on Temporal alike.
            cls = type(event)
            stamped = LiveOmittedEvent(
                **tags,
                event_type=event.type,
                event_class=f"{cls.__module__}:{cls.__qualname__}",
                size=len(data),
            )
            _log.warning("%s", stamped.note)
            env = encode(stamped, what=what)
            data = to_json(env)
        if counted:
            self._live_items += 1
        if self._live is None:  # run without a live channel (a direct run_step call): keep it with the result
            self._result.events.append(env)
        else:
            self._live.publish(stamped, data)

    def heartbeat(self, *details: Any) -> None:
        """Record this step's progress; the next attempt of the step can read it.

        On Temporal a step is an activity, and every step heartbeats
        automatically while its handler runs (see ``ExecutorOptions.heartbeat_timeout``),
        so a worker that dies mid-step is noticed after the heartbeat timeout
        and the step retried elsewhere, and a cancelled run's cancel reaches the
        step as ``asyncio.CancelledError`` at its next ``await``, so it can
        clean up. Call this to attach progress to those heartbeats (the
        automatic ones repeat the last details given), or to keep a step alive
        that handles a cancel with a cleanup longer than the heartbeat timeout.
        Heartbeats are throttled by the SDK, so calling this in a tight loop is
        cheap.

        In process it does nothing: there is no server to tell, and a step
        there runs in the caller's own task. The same graph therefore runs
        unchanged in process and on Temporal.

        Args:
            *details: Progress to record with the heartbeat (JSON-serializable).
                On Temporal the next attempt of the step can read the last
                ones as ``temporalio.activity.info().heartbeat_details``, e.g.
                to resume a long job where the failed attempt left off.
        """
        self._heartbeat(*details)

    async def request_info(
        self,
        request_data: Any,
        response_type: Any,
        request_id: str | None = None,
        *,
        timeout: timedelta | float | None = None,
        on_timeout: Literal["respond", "fail"] = "respond",
    ) -> str:
        """Ask for outside input; this executor's ``@response_handler`` gets the answer next superstep.

        The run goes idle (or waits durably, on Temporal) until a response for
        the returned request id arrives. The id is derived from the step, so it
        is the same however often the step is retried or replayed.

        Args:
            request_data: What to show the person answering (JSON-serializable).
            response_type: The type a response must validate as.
            request_id: Your own id instead of the derived one.
            timeout: How long to wait (a durable timer on Temporal). ``None``
                waits for ever.
            on_timeout: On expiry, ``"respond"`` hands the response handler a
                :class:`RequestTimedOut` (its response annotation must accept
                one); ``"fail"`` fails the run with ``RequestTimeoutError``.
        """
        ex = self._graph.executors[self.executor_id]
        rname = type_name(response_type)
        spec = ex.find_response_handler(request_data, rname)
        if spec is None:
            raise WorkflowError(
                f"executor {self.executor_id!r} called request_info with a {describe(request_data)} request, "
                f"but has no @response_handler(original_request: {describe(request_data)}, response: {rname}, ctx)"
            )
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if seconds is not None and not seconds > 0:
            raise WorkflowError(f"executor {self.executor_id!r}: timeout must be positive, got {timeout!r}")
        if on_timeout not in ("respond", "fail"):
            raise WorkflowError(f"executor {self.executor_id!r}: on_timeout is 'respond' or 'fail', not {on_timeout!r}")
        probe = RequestTimedOut(request_id="", timeout=1.0, deadline=datetime.now(UTC))
        if seconds is not None and on_timeout == "respond" and not accepts(spec.response_type, probe):
            raise WorkflowError(
                f"executor {self.executor_id!r} asked with a timeout, so its response handler for "
                f"{describe(request_data)} requests gets a RequestTimedOut when nobody answers; annotate its "
                f"response as {rname} | RequestTimedOut, or pass on_timeout='fail'"
            )
        if request_id is None:
            # Derived, so a retried or replayed step asks under the same id; written as a UUID, as
            # Agent Framework's request ids are (what a reader or a log filter expects of one).
            digest = hashlib.sha256(f"{self.idempotency_key}/{self._requests}".encode()).hexdigest()
            request_id = str(uuid.UUID(digest[:32]))
        self._requests += 1
        self._result.requests.append(
            PendingRequest(
                request_id=request_id,
                executor_id=self.executor_id,
                data=encode(request_data, what=f"request from executor {self.executor_id!r}"),
                response_type=rname,
                response_schema=json_schema(response_type),
                superstep=self.superstep,
                timeout=seconds,
                on_timeout=on_timeout,
            )
        )
        self._result.emitted.append("r")
        return request_id

    # -- state ---------------------------------------------------------------

    def get_state(self, key: str, default: Any = None) -> Any:
        """Committed value of a shared key (or this step's own write of it)."""
        return self.state.get(key, default)

    def set_state(self, key: str, value: Any) -> None:
        """Write a shared key; visible to others after this superstep's commit."""
        self.state.set(key, value)

    def get_executor_state(self, key: str, default: Any = None) -> Any:
        """Per-executor private state (same commit rules as shared state)."""
        return self.executor_state.get(key, default)

    def set_executor_state(self, key: str, value: Any) -> None:
        self.executor_state.set(key, value)

    def _check_key(self, key: str) -> None:
        if not isinstance(key, str) or not key:
            raise WorkflowError(f"executor {self.executor_id!r}: state keys are non-empty strings, not {key!r}")

    def _get(self, key: str, default: Any) -> Any:
        self._check_key(key)
        own = self._own.get(key)
        committed = self._committed.get(key)
        if own is None:
            return default if committed is None else decode(committed)
        kind = self._graph.topology.reducers.get(key)
        base = committed
        vals: list[Envelope] = []
        for w in own:
            if w.value is None:
                base, vals = None, []
            else:
                vals.append(w.value)
        if kind is None:
            last = own[-1].value
            return default if last is None else decode(last)
        if not vals:
            return default if base is None else decode(base)
        if kind == "callable":
            return decode(self._graph.reduce(key, base, vals))
        return decode(apply_builtin_reducer(kind, key, base, vals))

    def _set(self, key: str, value: Any) -> None:
        self._check_key(key)
        if not is_shared_key(key) and not key.startswith(f"{EXECUTOR_STATE_PREFIX}{self.executor_id}/"):
            raise WorkflowError(
                f"executor {self.executor_id!r}: state keys starting with {EXECUTOR_STATE_PREFIX!r} are reserved "
                "for executor-private state; use ctx.set_executor_state"
            )
        self._check_not_hook_key(key)
        env = encode(value, what=f"state key {key!r} written by executor {self.executor_id!r}")
        kind = self._graph.topology.reducers.get(key)
        if kind in ("append", "merge", "sum"):
            ok = {
                "append": isinstance(env.data, list),
                "merge": isinstance(env.data, dict),
                "sum": isinstance(env.data, (int, float)) and not isinstance(env.data, bool),
            }[kind]
            if not ok or (kind == "append" and env.type is not None and not env.type.startswith("list[")):
                need = {"append": "a list", "merge": "a dict", "sum": "a number"}[kind]
                raise WorkflowError(
                    f"executor {self.executor_id!r}: state key {key!r} has the {kind!r} reducer, "
                    f"so each write must be {need}, not {describe(value)}"
                )
        w = StateWrite(key, env)
        self._own.setdefault(key, []).append(w)
        self._result.writes.append(w)

    def _check_not_hook_key(self, key: str) -> None:
        if key == executor_hook_key(self.executor_id):
            raise WorkflowError(
                f"executor {self.executor_id!r}: an empty executor state key is reserved for the executor's "
                "checkpoint state (what its on_checkpoint_save returns)"
            )

    def _delete(self, key: str) -> None:
        self._check_key(key)
        self._check_not_hook_key(key)
        w = StateWrite(key, None)
        self._own.setdefault(key, []).append(w)
        self._result.writes.append(w)


async def run_step(
    graph: Graph,
    task: StepTask,
    state: Mapping[str, Envelope],
    *,
    run_id: str,
    attempt: int = 1,
    epoch: int = 0,
    heartbeat: Heartbeat = _no_heartbeat,
    live: LiveSink | None = None,
    streaming: bool | None = None,
    invocation_kwargs: Mapping[str, Any] | None = None,
    span_attributes: Mapping[str, Any] | None = None,
) -> StepResult:
    """Run one task's handler against the committed ``state``; return what it did.

    What it did must fit in one Temporal payload: a step whose writes,
    messages or outputs are too large fails here with ``PayloadTooLargeError``
    naming them, in process as on Temporal (see ``_limits``).

    ``epoch`` counts resets of the run: a step re-run after a reset is new
    work, so its idempotency key (and the ids of requests it raises) differ.
    ``attempt`` and ``heartbeat`` come from the host (``ctx.attempt``, ``ctx.heartbeat``),
    and ``live`` is where live events go while the step runs (``_live``): a
    retried attempt first publishes a ``StepRetryEvent``, and a step that
    published live items commits a ``LiveCommittedEvent`` (before its other
    events) naming its attempt and how many it published. ``streaming`` is how
    the run is read (:meth:`WorkflowContext.is_streaming`).

    The step runs inside an ``executor.process <id>`` span (Agent Framework's
    name and attributes, plus the superstep and attempt; a host adds
    ``span_attributes``), which an agent's GenAI spans and the step's
    ``message.send`` spans nest in.
    """
    ctx: WorkflowContext[Any, Any] = WorkflowContext(
        graph=graph,
        task=task,
        state=state,
        run_id=run_id,
        attempt=attempt,
        epoch=epoch,
        heartbeat=heartbeat,
        live=live,
        streaming=streaming,
        invocation_kwargs=invocation_kwargs,
    )
    if attempt > 1 and live is not None:
        ctx._publish_live(StepRetryEvent(), counted=False)
    ex = graph.executors.get(task.executor_id)
    attributes: dict[str, Any] = {
        Attr.EXECUTOR_ID: task.executor_id,
        Attr.EXECUTOR_TYPE: type(ex).__name__ if ex is not None else "",
        Attr.MESSAGE_TYPE: "response" if task.kind == "response" else "standard",
        Attr.MESSAGE_PAYLOAD_TYPE: payload_type(task),
        Attr.GRAPH: graph.name or "",
        Attr.SUPERSTEP: task.superstep,
        Attr.ATTEMPT: attempt,
        Attr.LEGACY_EXECUTOR_ID: task.executor_id,
        Attr.LEGACY_MESSAGE_TYPE: payload_type(task, qualified=True),
    }
    if attempt > 1:
        attributes[Attr.RETRY] = True
    if span_attributes:
        attributes.update(span_attributes)
    # Agent Framework's executor span, one per attempt; what the handler does (agents, sends) nests in it.
    with tracer().start_as_current_span(
        f"{Attr.EXECUTOR_PROCESS_SPAN} {task.executor_id}",
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            result = await _run_handler(graph, task, ctx, state)
        except BaseException as e:
            if span.is_recording():
                span.set_attribute(Attr.ERROR_TYPE, type(e).__qualname__)
                span.set_status(Status(StatusCode.ERROR, f"{type(e).__name__}: {e}"[:1000]))
                if isinstance(e, Exception):
                    span.record_exception(e)
            raise
        if ctx._live_items and span.is_recording():
            span.set_attribute("temporal_workflows.live_events", ctx._live_items)
    if ctx._live_items:
        committed = LiveCommittedEvent(
            executor_id=task.executor_id,
            superstep=task.superstep,
            index=task.index,
            attempt=attempt,
            items=ctx._live_items,
        )
        result.events.insert(0, encode(committed))
        if result.emitted:
            result.emitted.insert(0, "e")  # the marker is the step's first committed event
    return check_step_result(result, executor_id=task.executor_id)


def payload_type(task: StepTask, *, qualified: bool = False) -> str:
    """The type of what a step receives, as spans name it: the message's class (``Finding``), a fan-in's list of
    them (``list[Finding]``), or the JSON kind of a plain value (``str``); ``qualified``: with its module."""
    messages = task.messages
    if not messages:
        return ""
    names: list[str] = []
    for env in messages:
        if env.type is not None:
            key = env.type.split("[", 1)[0]
            names.append(key if qualified else key.rsplit(".", 1)[-1].rsplit(":", 1)[-1])
        else:
            names.append(_json_kind(env.data))
        if len(set(names)) > 1:
            break
    one = names[0] if len(set(names)) == 1 else "object"
    return f"list[{one}]" if task.kind in ("fan_in", "batch") else one


def _json_kind(data: Any) -> str:
    if data is None:
        return "None"
    if isinstance(data, bool):
        return "bool"
    if isinstance(data, int):
        return "int"
    if isinstance(data, float):
        return "float"
    if isinstance(data, str):
        return "str"
    if isinstance(data, list):
        return "list"
    return "dict"


async def _run_handler(
    graph: Graph, task: StepTask, ctx: WorkflowContext[Any, Any], state: Mapping[str, Envelope]
) -> StepResult:
    """Find the handler ``task`` calls for, and run it."""
    ex = graph.executors.get(task.executor_id)
    if ex is None:
        raise WorkflowError(f"executor {task.executor_id!r} is not in graph {graph.name!r}")
    if task.kind == "response":
        assert task.request is not None
        request = decode(task.request.data)
        response = decode(task.messages[0])
        rspec = ex.find_response_handler(request, task.request.response_type)
        if rspec is None:
            raise WorkflowError(f"executor {ex.id!r} has no @response_handler for {describe(request)} requests")
        async with checkpoint_hooks(ex, state, ctx._result):
            await ex._invoke_response(rspec, request, response, ctx)
        return ctx._result
    if task.kind == "fan_in":
        value: Any = [decode(m) for m in task.messages]
        spec = ex.find_handler(value)
    else:
        env = task.messages[0]
        value = decode(env)
        match = ex.coerce(value) if env.type is None else None
        if match is not None:
            spec, value = match
        else:
            spec = ex.find_handler(value)
    if spec is None:
        raise UndeliverableMessageError(
            f"executor {ex.id!r} has no handler for {describe(value)}; it handles "
            f"{[type_name(t) for t in ex.input_types]}",
            source_id=str(task.source_ids[0] if task.source_ids else None),
            type_name=describe(value),
            targets=[ex.id],
        )
    if not ex.has_checkpoint_hooks:  # the common case, without a context manager's generator per step
        await ex._invoke(spec, value, ctx)
        return ctx._result
    async with checkpoint_hooks(ex, state, ctx._result):
        await ex._invoke(spec, value, ctx)
    return ctx._result
