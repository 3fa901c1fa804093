"""A small client layer: start a graph run on Temporal, answer it, and watch it.

Anything here can also be done with the plain SDK or the ``temporal`` CLI
(see ``docs/temporal.md``): ``client.start_workflow("<graph name>",
{"message": ...}, id=..., task_queue=...)``, the ``respond`` / ``send``
signals, the ``submit_response`` / ``send_message`` updates and the
``status`` / ``pending_requests`` / ``state`` queries.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._checkpoints.base import CheckpointId, WorkflowCheckpoint
from temporal_workflows._engine.inbound import ConcurrentInput, check_policy
from temporal_workflows._engine.limits import check_payload, json_size
from temporal_workflows._engine.reporting import pending_request_from_json
from temporal_workflows._engine.serde import Envelope, decode, encode
from temporal_workflows._errors import RunBusyError, RunClosedError, WorkflowError, WorkflowRunError, peer_error
from temporal_workflows._events import (
    ExecutorFailedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    WorkflowEvent,
    WorkflowResetEvent,
    WorkflowStartedEvent,
)
from temporal_workflows._graph.checkstart import check_start_message
from temporal_workflows._graph.runs import invocation_kwargs
from temporal_workflows._live import LiveCommittedEvent, LiveEvent, StepRetryEvent
from temporal_workflows.temporal._client import llama
from temporal_workflows.temporal._client.feed import RunFeed, feed_for
from temporal_workflows.temporal._client.routing import versioning_override
from temporal_workflows.temporal._client.starting import start_workflow, update_with_start
from temporal_workflows.temporal._failures import innermost, library_error
from temporal_workflows.temporal._protocol import (
    EVENTS_TOPIC,
    FAILURE_RUN_BUSY,
    LIVE_BATCH_TYPE,
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    MAX_STEPS_IN_FLIGHT,
    QUERY_CHECKPOINT,
    QUERY_CHECKPOINTS,
    QUERY_PENDING_REQUESTS,
    QUERY_STATE,
    QUERY_STATUS,
    QUERY_TOPOLOGY,
    READER_TOPIC_PREFIX,
    SIGNAL_CHECKPOINT,
    SIGNAL_CLOSE,
    SIGNAL_DELIVER,
    SIGNAL_RESET,
    SIGNAL_RESPOND,
    SIGNAL_SEND,
    SIGNATURE_PREFIX,
    UPDATE_CHECKPOINT,
    UPDATE_CONFIRM,
    UPDATE_INLINE_BYTES,
    UPDATE_PACE,
    UPDATE_RESET,
    UPDATE_RESPOND,
    UPDATE_RESPOND_ALL,
    UPDATE_SEND,
    CheckpointRequest,
    ConfirmInput,
    Delivery,
    ForkSource,
    PaceInput,
    ResetRequest,
    RespondAllInput,
    RespondInput,
    RunInput,
    SendInput,
    too_long,
)
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = [
    "LINEAGE_MEMO",
    "EventStream",
    "EventView",
    "RawEvent",
    "RawLiveEvent",
    "RunHandle",
    "fork",
    "get_run",
    "send_or_start",
    "start_input",
    "start_run",
]

LINEAGE_MEMO = "temporal_workflows.forked_from"
"""Memo key of a forked run: ``{"workflow_id": ..., "checkpoint_id": ...}`` of its source."""

_MISSING: Any = object()
_CAN_RETRIES = 5
BUSY_RETRY_SECONDS = 60.0
"""How long the client keeps sending what was refused for load before raising ``RunBusyError``.

Refused for load: the server's limit of updates in flight per run (``RESOURCE_EXHAUSTED``, "limit on
number of concurrent in-flight updates"), its query buffer ("consistent query buffer is full"), an update
aborted while the run's task was retried (``UNAVAILABLE``), or the run's own ``RunBusyError`` refusal.
Nothing was delivered then, and updates keep their id, so sending again never counts an input twice."""
UPDATES_IN_FLIGHT_PER_RUN = 8
"""Updates this process has in flight to one run at most; more wait here for a slot.

The server refuses an 11th update in flight to a run (``RESOURCE_EXHAUSTED``,
"limit on number of concurrent in-flight updates has been reached (10)"); 200
concurrent senders in one process would otherwise mostly retry, with backoff,
instead of queueing. Senders in other processes are still retried."""

BUSY_BACKOFF_SECONDS = (0.05, 2.0)
"""First and longest wait between two sends refused for load (doubling, with jitter)."""
_NOT_READY_RETRIES = 12
"""A pacing reader's polls retried while the run's workflow task is retried (about 8 s in all)."""
T = TypeVar("T")


class RawEvent(WorkflowEvent):
    """A streamed custom event whose class is not importable in this process."""

    type: str = "custom"
    event_type: str | None = None
    data: Any = None


class RawLiveEvent(LiveEvent):
    """A live event whose class is not importable in this process: its tags, and its JSON as ``data``."""

    type: str = "live"
    event_type: str | None = None
    data: Any = None


_LIVE_TAGS = ("executor_id", "superstep", "attempt", "seq")


def _raw(env: Envelope) -> WorkflowEvent:
    data = env.data
    if isinstance(data, dict) and all(k in data for k in _LIVE_TAGS):
        # Still a live item a view can place (its step, attempt and number), if not its class.
        with contextlib.suppress(Exception):
            tags = {k: data[k] for k in (*_LIVE_TAGS, "index") if k in data}
            return RawLiveEvent(event_type=env.type, data=data, **tags)
    return RawEvent(event_type=env.type, data=data)


def _events(env: Envelope) -> list[WorkflowEvent]:
    """The events of one stream item: one, or a step's batch of live events (``LIVE_BATCH_TYPE``)."""
    if env.type == LIVE_BATCH_TYPE and isinstance(env.data, list):
        return [_event(Envelope.from_json(d)) if isinstance(d, dict) else _raw(Envelope(None, d)) for d in env.data]
    return [_event(env)]


def _event(env: Envelope) -> WorkflowEvent:
    try:
        event = decode(env)
    except Exception:
        return _raw(env)
    if not isinstance(event, WorkflowEvent):
        return _raw(env)
    # Event data travels as JSON with its type key(s): restore the types this process can build.
    return event.restored()


EventView = Literal["live", "committed"]
"""How :meth:`RunHandle.events` treats live items: as they arrive, or only those of attempts that completed."""

_Step = tuple[int, int, str]
"""A step: its superstep, index and executor."""


def _step(event: LiveEvent | LiveCommittedEvent) -> _Step:
    return (event.superstep, event.index, event.executor_id)


class _LiveView:
    """Live items as they arrive; items of an attempt a retry has superseded are dropped.

    A retried step publishes a ``StepRetryEvent`` first, which the reader
    gets; an item of an older attempt arriving after it (a timed-out attempt
    still running somewhere), or of a step that has ended, would mislead, so
    it is not yielded.
    """

    def __init__(self) -> None:
        self._attempts: dict[_Step, int] = {}
        self._ended_below = 0
        """Every step of a superstep below this has ended."""

    def feed(self, event: WorkflowEvent) -> list[WorkflowEvent]:
        if isinstance(event, (WorkflowResetEvent, WorkflowStartedEvent)):
            self._attempts.clear()  # superstep numbers start again
            self._ended_below = 0
        elif isinstance(event, (SuperStepCompletedEvent, ExecutorFailedEvent)):
            # A superstep ends with every step of it: no live item of it is current any more.
            self._ended_below = max(self._ended_below, event.superstep + 1)
            self._attempts = {k: v for k, v in self._attempts.items() if k[0] >= self._ended_below}
        if isinstance(event, LiveEvent):
            step = _step(event)
            if event.superstep < self._ended_below or event.attempt < self._attempts.get(step, 0):
                return []
            self._attempts[step] = event.attempt
        return [event]


class _CommittedView:
    """Only live items of attempts that completed, released at their step's ``LiveCommittedEvent``.

    Items are held per step and attempt until the step's outcome is known:
    its committed marker names the attempt that completed, whose items are
    yielded in ``seq`` order, then the marker. Whatever is still held when
    the superstep ends belongs to attempts that did not complete, and is
    dropped, as are retry markers: nothing they void is shown.
    """

    def __init__(self) -> None:
        self._held: dict[_Step, dict[int, list[LiveEvent]]] = {}

    def feed(self, event: WorkflowEvent) -> list[WorkflowEvent]:
        if isinstance(event, (WorkflowResetEvent, WorkflowStartedEvent)):
            self._held.clear()
        elif isinstance(event, (SuperStepCompletedEvent, ExecutorFailedEvent)):
            self._held = {k: v for k, v in self._held.items() if k[0] > event.superstep}
        if isinstance(event, StepRetryEvent):
            return []
        if isinstance(event, LiveEvent):
            self._held.setdefault(_step(event), {}).setdefault(event.attempt, []).append(event)
            return []
        if isinstance(event, LiveCommittedEvent):
            attempts = self._held.pop(_step(event), {})
            items = sorted(attempts.get(event.attempt, []), key=lambda e: e.seq)
            return [*items, event]
        return [event]


def _check_length(what: str, value: str | None, limit: int) -> None:
    """Refuse an id or label the run would refuse (``MAX_*_CHARS`` in ``_protocol``), before sending it."""
    error = too_long(what, value, limit)
    if error is not None:
        raise ValueError(error)


_RETRY_UNAVAILABLE = ("update was aborted", "please retry")
"""``UNAVAILABLE`` messages the server means as "send it again" (an aborted update, "buffered query
cleared, please retry" when the run's workflow task failed or was reset under a query)."""


_slots: dict[tuple[int, int, str], tuple[asyncio.Semaphore, int]] = {}
"""(event loop, client, workflow id) -> its update slots and how many callers hold or wait for one."""


@contextlib.asynccontextmanager
async def _update_slot(client: object, workflow_id: str) -> AsyncIterator[None]:
    """Hold one of :data:`UPDATES_IN_FLIGHT_PER_RUN` slots for an update to ``workflow_id``."""
    key = (id(asyncio.get_running_loop()), id(client), workflow_id)
    sem, users = _slots.get(key) or (asyncio.Semaphore(UPDATES_IN_FLIGHT_PER_RUN), 0)
    _slots[key] = (sem, users + 1)
    try:
        async with sem:
            yield
    finally:
        sem, users = _slots[key]
        if users <= 1:
            del _slots[key]
        else:
            _slots[key] = (sem, users - 1)


def _backoff(attempt: int) -> float:
    """Seconds to wait before sending again what was refused for load ``attempt`` times before (with jitter)."""
    first, longest = BUSY_BACKOFF_SECONDS
    return min(longest, first * (1 << min(attempt, 16))) * random.uniform(0.5, 1.0)  # jitter spreads senders


def _busy(e: BaseException, *, idempotent: bool = True) -> str | None:
    """Why ``e`` refused input for load, to be sent again (``None``: it is not such a refusal).

    ``UNAVAILABLE`` counts only where the server says to send again (:data:`_RETRY_UNAVAILABLE`), not
    for a server that cannot be reached.
    ``DEADLINE_EXCEEDED`` (a run too busy to answer in time) counts for calls that
    can be repeated safely (``idempotent``: queries, and updates, which keep their id).
    """
    if isinstance(e, RPCError):
        if e.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            return e.message
        if e.status == RPCStatusCode.DEADLINE_EXCEEDED and idempotent:
            return e.message
        if e.status == RPCStatusCode.UNAVAILABLE and any(m in e.message for m in _RETRY_UNAVAILABLE):
            return e.message
        return None
    if isinstance(e, WorkflowUpdateFailedError):
        cause = innermost(e)
        if isinstance(cause, ApplicationError) and cause.type == FAILURE_RUN_BUSY:
            return cause.message
        # The server's own refusal of an update no workflow task took ("UnprocessedUpdate: Workflow Update
        # is rejected because it wasn't processed by worker"): never delivered, so safe to send again.
        if isinstance(cause, ApplicationError) and (
            cause.type == "UnprocessedUpdate" or cause.message.startswith("UnprocessedUpdate")
        ):
            return cause.message
    return None


def _raise_library_error(e: WorkflowFailureError | WorkflowUpdateFailedError) -> None:
    """Raise the library's own error for ``e`` if it stands for one (the SDK's error as its cause)."""
    error = library_error(e)
    if error is not None:
        raise error from e


class RunHandle:
    """A run on Temporal: a graph run, or a LlamaIndex run of ``TemporalRuntime``. ``handle`` is the SDK's own
    workflow handle.

    Signals, updates and queries go to the workflow id's latest execution, so
    the handle keeps working after the run continues as new (long runs,
    resets); :meth:`result` follows the chain to the end.

    One handle serves both kinds of run, so every tool reads and answers them
    alike: ``status``, ``pending_requests``, ``state``, ``topology``,
    ``events``, ``respond``, ``checkpoints`` and ``fork`` mean the same for a
    LlamaIndex run (its stream is what ``stream_events()`` shows, as
    :class:`~temporal_workflows.temporal._client.llama.LlamaEvent`; its
    checkpoint is its context now, ``ctx.to_dict()``); :meth:`send_event`
    sends it an event by class name. What only a graph run has (``send``,
    ``close``, ``checkpoint``, ``reset``) is refused for a LlamaIndex run with
    what to do instead. The handle learns which kind its run is once, from
    the workflow type (:meth:`is_llama`).
    """

    def __init__(self, handle: WorkflowHandle[Any, Any], client: Client | None = None) -> None:
        self.handle = handle
        self._client = client
        self._latest: WorkflowHandle[Any, Any] = (
            client.get_workflow_handle(handle.id, result_type=dict) if client is not None else handle
        )
        self._kind: str | None = None

    @property
    def id(self) -> str:
        return self.handle.id

    async def is_llama(self) -> bool:
        """Whether the run is a LlamaIndex run (``TemporalRuntime``'s workflow type ``LlamaIndexRun``), not a graph
        run; learned once (``describe``).

        Raises:
            RPCError: ``NOT_FOUND`` when there is no run with this id.
        """
        if self._kind is None:
            await self.describe()
        return self._kind == "llama_index"

    async def _retry_across_continue_as_new(self, call: Callable[[], Awaitable[T]], *, idempotent: bool = True) -> T:
        """Run ``call``, again if it met the run closing for continue-as-new, or refused for load.

        A signal or update that reaches the server just as the run continues
        as new can be refused with NOT_FOUND ("workflow execution already
        completed") although the workflow id has a new, running execution.
        Nothing was delivered then, so sending again is safe (updates keep
        their id, so the server would deduplicate a delivered one anyway).
        What is refused for load (see :data:`BUSY_RETRY_SECONDS`) is sent again
        with backoff, and ``RunBusyError`` raised if that lasts too long.
        """
        can_attempts = 0
        busy_attempts = 0
        deadline = time.monotonic() + BUSY_RETRY_SECONDS
        while True:
            try:
                return await call()
            except (RPCError, WorkflowUpdateFailedError) as e:
                reason = _busy(e, idempotent=idempotent)
                if reason is not None:
                    if time.monotonic() >= deadline:
                        raise RunBusyError(
                            f"the run {self.id!r} was still refusing input for load after "
                            f"{BUSY_RETRY_SECONDS:g} s ({reason}); send it again later"
                        ) from e
                    await asyncio.sleep(_backoff(busy_attempts))
                    busy_attempts += 1
                    continue
                if not isinstance(e, RPCError) or e.status != RPCStatusCode.NOT_FOUND:
                    raise
                can_attempts += 1
                try:
                    desc = await self._latest.describe()
                except RPCError:
                    raise e from None  # no run of this id at all
                if desc.status != WorkflowExecutionStatus.RUNNING and desc.status is not None:
                    raise RunClosedError(closed_run_message(self.id, desc.status)) from e
                if can_attempts >= _CAN_RETRIES:
                    raise
                await asyncio.sleep(0.05 * 2 ** (can_attempts - 1))  # the new execution is being created

    async def _query(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """A query of the latest execution, sent again while the server refuses it for load."""
        return await self._retry_across_continue_as_new(lambda: self._latest.query(name, *args, **kwargs))

    async def _signal(self, name: str, *args: Any) -> None:
        # Not idempotent: a signal whose call timed out may have been delivered (only refusals are sent again).
        await self._retry_across_continue_as_new(lambda: self._latest.signal(name, *args), idempotent=False)

    async def _update(self, name: str, arg: Any) -> dict[str, Any]:
        # Only sending is retried: once the run has accepted the update, its outcome is
        # read from that run, even if it has continued as new since (a retry would run it twice).
        # A refusal for load that shows in the outcome (never accepted) is sent again, as at the start.
        update_id = str(uuid.uuid4())
        async with _update_slot(self._client or self.handle, self.id):
            return await self._update_in_slot(name, arg, update_id)

    async def _update_in_slot(self, name: str, arg: Any, update_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + BUSY_RETRY_SECONDS
        for attempt in itertools.count():
            update: WorkflowUpdateHandle[dict[str, Any]] = await self._start_update(
                lambda: self._latest.start_update(
                    name, arg, id=update_id, wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=dict
                )
            )
            try:
                return await update.result()
            except WorkflowUpdateFailedError as e:
                if _busy(e) is not None and time.monotonic() < deadline:  # (never accepted)
                    await asyncio.sleep(_backoff(attempt))
                    continue
                _raise_library_error(e)
                raise
        raise AssertionError("unreachable")

    async def _update_or_deliver(self, name: str, delivery: Delivery) -> dict[str, Any]:
        """Send input the caller waits for: in an update if small, else by the ``deliver`` signal.

        The SDK repeats an update's input in the workflow task that delivers it,
        and a few megabytes of updates delivered together exceed what one task
        may record, so the server terminates the run (``UPDATE_INLINE_BYTES``).
        Large input therefore travels by signal, whose input only history
        holds, and a small ``confirm_delivery`` update returns what the update
        would have: the same result, or the same refusal.
        """
        arg = next(a for a in (delivery.send, delivery.respond) if a is not None)
        if json_size(arg) <= UPDATE_INLINE_BYTES:
            return await self._update(name, arg)
        await self._signal(SIGNAL_DELIVER, delivery)
        return await self._update(UPDATE_CONFIRM, ConfirmInput(delivery.id))

    async def _start_update(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await self._retry_across_continue_as_new(call)
        except WorkflowUpdateFailedError as e:  # refused by the update's validator
            _raise_library_error(e)
            raise

    async def result(self) -> dict[str, Any]:
        """The run's JSON result: ``outputs``, ``output_types``, ``superstep``, ``status``.

        Committed state is not in the result (it may be large); read it with :meth:`state`.

        Raises:
            WorkflowRunError: the run failed; the same class and message as the
                same failure in process (``ExecutorFailedError``,
                ``StateConflictError``, ``SuperstepLimitError``, ``ReducerError``,
                ``RequestTimeoutError``, ``CheckpointStorageError``, ...), with the
                SDK's ``WorkflowFailureError`` as its ``__cause__``. A step's
                failure is the step's own exception, also an ``ExecutorFailedError``,
                where its class is imported here and made again from its message
                (``_errors.peer_error``), as in process.
            WorkflowError: the run could not start (``InvalidRunInputError``,
                ``UnknownGraphError``, ``CheckpointNotFoundError``, ...).
        """
        if await self.is_llama():
            return await llama.result(self)
        try:
            result: dict[str, Any] = await self.handle.result()
        except WorkflowFailureError as e:
            error = library_error(e)
            if error is None:
                raise
            # A step's own exception where its class can be made again here, as in process (``peer_error``).
            raise peer_error(error) if isinstance(error, WorkflowRunError) else error from e
        return result

    async def outputs(self) -> list[Any]:
        """The outputs with their pydantic/dataclass types restored (types must be importable here)."""
        r = await self.result()
        if r.get("kind") == "llama_index":
            return [r.get("result")]  # what `await handler` returned, as JSON
        return [decode(Envelope(t, d)) for d, t in zip(r["outputs"], r.get("output_types") or [], strict=False)]

    async def status(self) -> dict[str, Any]:
        """Live status: ``status`` (running, idle, waiting_for_input, completed, failed), superstep,
        in-flight executors, pending request count, outputs so far, warnings."""
        status: dict[str, Any] = await self._query(QUERY_STATUS)
        return status

    async def pending_requests(self, *, restore: bool = True) -> list[RequestInfoEvent]:
        """Open requests, oldest first, as ``Workflow.pending_requests`` lists them in process.

        Each is a :class:`RequestInfoEvent` (``request_id``, ``source_executor_id``,
        ``data``, ``response_type``, ``response_schema``) with where it stands:
        ``superstep``, ``created_at``, ``deadline``, ``on_timeout``.

        Args:
            restore: Turn ``data`` back into its type where this process can;
                ``False`` keeps it JSON (``model_dump(mode="json")`` is then the query's answer).
        """
        if await self.is_llama():
            return await llama.pending_requests(self)  # data as JSON: nothing a run names is imported
        pending: list[dict[str, Any]] = await self._query(QUERY_PENDING_REQUESTS)
        return [pending_request_from_json(r, restore=restore) for r in pending]

    async def state(self) -> dict[str, Any]:
        """Committed shared state (JSON) from the ``state`` query."""
        state: dict[str, Any] = await self._query(QUERY_STATE)
        return state

    async def topology(self) -> dict[str, Any]:
        """The run's graph as it pinned it: ``graph``, ``start_executor``, ``executor_ids``, ``subworkflows``, and
        ``shape``, its picture as data (``temporal_workflows._graph.shape.GraphShape`` as JSON), or ``None`` with a
        ``note`` saying why (a run started by an earlier version, or a graph too large to keep a picture of).
        Draw it with ``to_mermaid(TypeAdapter(GraphShape).validate_python(shape))``."""
        if await self.is_llama():
            return await llama.topology(self)
        answer: dict[str, Any] = await self._latest.query(QUERY_TOPOLOGY)
        return answer

    async def describe(self) -> WorkflowExecutionDescription:
        desc = await self._latest.describe()
        self._kind = "llama_index" if desc.workflow_type == llama.WORKFLOW_TYPE else "graph"
        return desc

    async def respond(self, request_id: str, response: Any, *, wait: bool = True) -> dict[str, Any] | None:
        """Answer a pending request.

        Args:
            request_id: From :meth:`pending_requests` or a ``RequestInfoEvent``.
            response: A value of the request's response type (or its JSON).
            wait: Use the ``submit_response`` update: returns once the run has
                accepted the response and raises ``WorkflowUpdateFailedError``
                naming the problem if it refuses it. ``False`` sends the
                ``respond`` signal and returns at once; a bad response then
                shows up as a warning in :meth:`status` and the event stream.

        Raises:
            PayloadTooLargeError: the response is too large for one Temporal
                payload; checked here, before anything is sent (as are the
                messages of :meth:`send` and :meth:`reset`).
            ValueError: ``request_id`` is longer than any request id
                (``MAX_ID_CHARS``); so are executor and checkpoint ids in
                :meth:`send` and :meth:`reset`, and labels over
                ``MAX_LABEL_CHARS`` in :meth:`checkpoint`.
        """
        _check_length("request id", request_id, MAX_ID_CHARS)
        if await self.is_llama():
            return await llama.respond(self, request_id, response, wait=wait)
        what = f"response to request {request_id!r}"
        arg = RespondInput(request_id, encode(response, what=what).data)
        check_payload(arg.response, what=what)
        if not wait:
            await self._signal(SIGNAL_RESPOND, arg)
            return None
        return await self._update_or_deliver(UPDATE_RESPOND, Delivery(str(uuid.uuid4()), respond=arg))

    async def respond_all(
        self,
        responses: Mapping[str, Any],
        *,
        stream: bool | None = None,
        function_invocation_kwargs: Mapping[str, Any] | None = None,
        client_kwargs: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Answer several pending requests together, as ``run(responses={...})`` does in process.

        One ``submit_responses`` update carries them: the run checks every one
        (ids and values) before it accepts any, so a refused one (raised as
        :meth:`respond` raises it) leaves the run as it was, and hands them all
        to the engine at one boundary, so the superstep that follows sees every
        answer. Answers too large to share one update (over
        ``UPDATE_INLINE_BYTES`` together), or a worker that predates the update,
        get them one by one, as :meth:`respond` sends them.

        ``stream``: how the caller reads the run from here on (``RunInput.stream``;
        the durable twin's ``run(responses=..., stream=...)``); ``None`` leaves it.
        ``function_invocation_kwargs`` / ``client_kwargs`` replace the run's (as in
        Agent Framework, a call that gives none leaves them).
        """
        if await self.is_llama():
            # A LlamaIndex run takes each answer as the event its step accepts, all checked before any is taken.
            for request_id in responses:
                _check_length("request id", request_id, MAX_ID_CHARS)
            return await llama.respond_all(self, responses)
        arg = RespondAllInput(
            [], stream=stream, invocation_kwargs=invocation_kwargs(function_invocation_kwargs, client_kwargs)
        )
        for request_id, response in responses.items():
            _check_length("request id", request_id, MAX_ID_CHARS)
            what = f"response to request {request_id!r}"
            one = RespondInput(request_id, encode(response, what=what).data)
            check_payload(one.response, what=what)
            arg.responses.append(one)
        if not arg.responses:
            return {"request_ids": [], "accepted": True}
        if json_size(arg) <= UPDATE_INLINE_BYTES:
            try:
                return await self._update(UPDATE_RESPOND_ALL, arg)
            except WorkflowUpdateFailedError as e:
                if getattr(e.cause, "type", None) != "UnknownUpdateError":
                    raise
        for one in arg.responses:
            await self._update_or_deliver(UPDATE_RESPOND, Delivery(str(uuid.uuid4()), respond=one))
        return {"request_ids": [one.request_id for one in arg.responses], "accepted": True}

    async def send(
        self, executor_id: str, message: Any, *, wait: bool = True, policy: ConcurrentInput | None = None
    ) -> dict[str, Any] | None:
        """Send a message to an executor of a running or idle (keep-alive) run; see :meth:`respond` for ``wait``.

        ``policy``: what the message does if the run is busy with a turn
        (default: the run's ``concurrent_input``, set at start): ``"enqueue"``
        (wait for the next boundary), ``"reject"`` (refused:
        ``RunInProgressError``; by signal, a warning), ``"interrupt"`` (the
        running superstep's steps are cancelled and commit nothing; the
        message is taken at that boundary) or ``"rollback"`` (and the run goes
        back to where it was before the turn's input). The result then says
        ``"interrupts": true`` when it interrupted the turn
        (docs/concurrent-input.md).

        Raises:
            ValueError: an unknown policy (before anything is sent).
            RunInProgressError: the run is busy and the policy is ``"reject"``.
        """
        if await self.is_llama():
            raise llama.not_for_llama("send (a message to an executor)", "takes events: send_event(event_type, fields)")
        arg = _send_input(executor_id, message, policy)
        if not wait:
            await self._signal(SIGNAL_SEND, arg)
            return None
        return await self._update_or_deliver(UPDATE_SEND, Delivery(str(uuid.uuid4()), send=arg))

    async def send_event(
        self, event_type: str | None, event: Any, *, step: str | None = None, wait: bool = True
    ) -> dict[str, Any] | None:
        """Send a LlamaIndex run an event by class name and fields, as ``handler.ctx.send_event(...)`` does.

        The run checks it against the events its workflow accepts (those its steps take, and those its
        ``wait_for_event`` calls wait for): ``wait=True`` (the ``submit_event`` update) returns ``{"accepted":
        "module.Class"}`` or raises ``WorkflowUpdateFailedError`` naming the accepted ones, and nothing changes;
        ``wait=False`` sends the ``send_event`` signal (what the run cannot use is a warning in :meth:`status`).

        Args:
            event_type: ``"Answer"`` (when one accepted class has that name), ``"app.Answer"``; ``None``: the one
                accepted class the fields validate as.
            event: The event's fields (a JSON object).
            step: Only this step gets it (``send_event(ev, step=...)``).

        Raises:
            WorkflowError: the run is a graph run (it takes messages: :meth:`send`).
        """
        if not await self.is_llama():
            raise WorkflowError(
                "send_event is for LlamaIndex runs; a graph run takes messages: send(executor_id, message)"
            )
        return await llama.send_event(self, event_type, event, step=step, wait=wait)

    async def close(self) -> None:
        """Let a keep-alive run complete once it is idle: its work done and no request waiting for an answer.

        From now on the run refuses new messages (``RunClosedError``: "the run is closing") but still takes
        answers to its pending requests; it completes when the last one is answered (or times out). Nothing
        is dropped. ``status()`` says ``"closing": True`` meanwhile.
        """
        if await self.is_llama():
            raise llama.not_for_llama(
                "close", "ends when a step returns its StopEvent; to stop it, cancel it (temporal workflow cancel)"
            )
        await self._signal(SIGNAL_CLOSE)

    # -- checkpoints, reset, fork ----------------------------------------------------

    async def checkpoint(self, label: str | None = None, *, wait: bool = True) -> dict[str, Any] | None:
        """Take a checkpoint at the run's next superstep boundary (at once if it is idle or waiting).

        Returns ``{"checkpoint_id", "superstep", "label"}`` once it is saved
        (the ``take_checkpoint`` update); a storage failure raises
        ``WorkflowUpdateFailedError`` naming it, and the run goes on.
        ``wait=False`` sends the ``checkpoint`` signal instead (failures
        become warnings in :meth:`status`).
        """
        _check_length("label", label, MAX_LABEL_CHARS)
        if await self.is_llama():
            raise llama.not_for_llama(
                "taking a checkpoint", "has one: its context now, ctx.to_dict() (checkpoints(); fork('now', new_id))"
            )
        arg = CheckpointRequest(label=label)
        if not wait:
            await self._signal(SIGNAL_CHECKPOINT, arg)
            return None
        taken: dict[str, Any] = await self._update(UPDATE_CHECKPOINT, arg)
        return taken

    async def checkpoints(self) -> list[dict[str, Any]]:
        """The run's checkpoints, oldest first: id, superstep, label, created time, parent id.

        A LlamaIndex run has one: its context now (``ctx.to_dict()``), id ``"now"``, which :meth:`fork` starts a new
        run from (``forkable`` while the run goes, waits or has failed)."""
        if await self.is_llama():
            return await llama.checkpoints(self)
        listed: list[dict[str, Any]] = await self._query(QUERY_CHECKPOINTS)
        return listed

    async def latest_checkpoint_id(self) -> CheckpointId | None:
        """The id of the newest checkpoint of this workflow id, if any."""
        listed = await self.checkpoints()
        return listed[-1]["checkpoint_id"] if listed else None

    async def get_checkpoint(self, checkpoint_id: CheckpointId) -> WorkflowCheckpoint | None:
        """A checkpoint the run holds itself (history-only storage), whole; ``None`` otherwise (and for a
        LlamaIndex run, whose context the ``llama_context`` query answers)."""
        if await self.is_llama():
            return None
        cp: WorkflowCheckpoint | None = await self._query(
            QUERY_CHECKPOINT,
            checkpoint_id,
            result_type=WorkflowCheckpoint | None,  # type: ignore[arg-type]
        )
        return cp

    async def reset(
        self,
        *,
        checkpoint_id: CheckpointId | None = None,
        message: Any = _MISSING,
        allow_signature_mismatch: bool = False,
        wait: bool = True,
    ) -> dict[str, Any] | None:
        """Start the run again: from its start message, from ``message``, or from a checkpoint.

        The reset takes effect at the next superstep boundary (at once if the
        run is idle or waiting): steps still running are cancelled and their
        results discarded, and the run continues as new from exactly the
        checkpoint's state, messages, fan-in buffers, requests and outputs
        (or from a clean start). Request ids from before a clean reset are
        then unknown. ``wait=True`` (the ``reset_run`` update) returns once
        the reset is accepted and raises if the checkpoint is unknown or was
        taken under a different graph; ``wait=False`` sends the ``reset`` signal.
        """
        if await self.is_llama():
            raise llama.not_for_llama("reset", "goes back by a fork of its context: fork('now', new_id)")
        fields: dict[str, Any] = {"allow_signature_mismatch": True} if allow_signature_mismatch else {}
        _check_length("checkpoint id", checkpoint_id, MAX_ID_CHARS)
        if checkpoint_id is not None:
            if message is not _MISSING:
                raise ValueError("reset to a checkpoint or with a new message, not both")
            fields["checkpoint_id"] = checkpoint_id
        elif message is not _MISSING:
            env = encode(message, what="reset message")
            check_payload(env.data, what="reset message")
            fields.update(message=env.data, message_type=env.type)
        # Only the fields given: ``{}`` means a clean start, ``{"message": null}`` a start with null.
        arg = ResetRequest(**fields).model_dump(exclude_unset=True)
        if not wait:
            await self._signal(SIGNAL_RESET, arg)
            return None
        accepted: dict[str, Any] = await self._update(UPDATE_RESET, arg)
        return accepted

    async def fork(
        self,
        checkpoint_id: CheckpointId,
        new_workflow_id: str,
        *,
        task_queue: str | None = None,
        allow_signature_mismatch: bool = False,
    ) -> RunHandle:
        """Start a new run from one of this run's checkpoints; see :func:`fork`."""
        if self._client is None:
            raise RuntimeError("fork() needs the Client: build the handle with RunHandle(handle, client)")
        return await fork(
            self._client,
            self.id,
            checkpoint_id,
            new_workflow_id,
            task_queue=task_queue,
            allow_signature_mismatch=allow_signature_mismatch,
        )

    async def pace(self, reader: str, action: Literal["follow", "release", "stop"] = "follow") -> dict[str, Any]:
        """The run goes no further than ``reader`` has read (``follow``), goes on (``release``), or stays where
        its reader left it for the caller to cancel (``stop``): the durable twin's streamed calls
        (``temporal/_workflow/pacing.py``).

        Returns ``{"run_id": the execution that took it, "paced": whether reader paces it}``.
        """
        _check_length("reader", reader, MAX_ID_CHARS)
        return await self._update(UPDATE_PACE, PaceInput(reader, action))

    def events(
        self,
        *,
        after: int | None = None,
        from_offset: int = 0,
        poll_cooldown: timedelta = timedelta(milliseconds=100),
        view: EventView = "live",
        outage_timeout: timedelta | None = timedelta(minutes=5),
        reader: str | None = None,
    ) -> EventStream:
        """The run's events as they happen; ends after the run closes.

        The same event classes as an in-process ``run_stream()``: supersteps,
        executor invocations and completions, outputs, requests, warnings,
        status changes and custom ``ctx.add_event`` events. Served by
        ``temporalio.contrib.workflow_streams``, through one reader of the run
        per process however many loops read it (``temporal/_client/feed.py``):
        it long-polls the run by update while the run has room for that
        (a run holds at most ``MAX_STREAM_POLLS`` such polls, so answers and
        other input always get through), else reads by query.

        Live events (``LiveEvent`` subclasses: agent updates, progress) are
        published by steps while they run, tagged with their step, attempt
        and sequence number (docs/streaming.md).

        Returns an :class:`EventStream`: iterate it for the events; its
        ``offset`` is the stream position of the events yielded so far, and
        ``events(after=offset)`` resumes right after them, in this process or
        another, on a live run or a closed one: exactly the events a reader
        that had gone on would have got next (docs/streaming.md).

        Args:
            after: Resume after this stream position (an ``EventStream.offset``,
                or an SSE ``id`` of the console): the stream is read from its
                start so that the view is what it was there, and only the
                events after the position are yielded.
            from_offset: Read the stream's items from this offset, with a
                fresh view (without ``after``).
            poll_cooldown: How soon to poll again after a poll brought something.
            view: ``"live"``: live items as they arrive; a retried step's
                ``StepRetryEvent`` comes before its new attempt's items, and
                items of a superseded attempt that arrive late are dropped.
                ``"committed"``: only items of attempts that completed, each
                step's at its ``LiveCommittedEvent`` (so once the step is
                done), in ``seq`` order; retry markers and items of failed
                attempts never appear. Both views read the same stream, also
                after the run has ended.
            outage_timeout: How long the Temporal server may stay unreachable
                (restarting, a network cut) before the stream raises its error;
                until then it waits and resumes where it was, without loss or
                duplicates. ``None`` waits for as long as it takes.
            reader: Read as this reader (a run started or followed with it, see
                :meth:`pace`): the run goes no further than this reader has read.
                Such a reader polls the run itself, as it reads, rather than
                through the process's shared reader of the run (which reads
                ahead of its readers).
        """
        if self._client is None:
            raise RuntimeError("events() needs the Client: build the handle with RunHandle(handle, client)")
        if view not in ("live", "committed"):
            raise ValueError(f"view is 'live' or 'committed', not {view!r}")
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
            raise ValueError(f"after is a stream position (an int), not {after!r}")
        stream = EventStream(-1 if after is None else after)
        if reader is not None:
            stream._positions = self._paced_positions(
                self._client,
                reader,
                from_offset=from_offset if after is None else after + 1,
                view=view,
                cooldown=poll_cooldown,
            )
            return stream
        stream._positions = self._positions(
            self._client,
            stream,
            after=after,
            from_offset=from_offset,
            cooldown=poll_cooldown.total_seconds(),
            view=view,
            outage=None if outage_timeout is None else outage_timeout.total_seconds(),
        )
        return stream

    async def _positions(
        self,
        client: Client,
        stream: EventStream,
        *,
        after: int | None,
        from_offset: int,
        cooldown: float,
        view: EventView,
        outage: float | None,
    ) -> AsyncIterator[tuple[int, list[WorkflowEvent]]]:
        start = 0 if after is not None else from_offset
        if await self.is_llama():
            # What stream_events() shows (LlamaEvent), and what the run waits for each time it rests.
            async for offset, event in llama.events(
                self, client, from_offset=start, poll_cooldown=timedelta(seconds=cooldown)
            ):
                if after is None or offset > after:
                    yield offset, [event]
            return
        reader = _LiveView() if view == "live" else _CommittedView()
        stream._feed = feed = feed_for(client, self.id, start, _events)
        async for item in feed.read(start, cooldown=cooldown, outage_timeout=outage):
            out: list[WorkflowEvent] = []
            for one in item.events:
                out.extend(reader.feed(one))
            if after is None or item.offset > after:
                yield item.offset, out

    async def _paced_positions(
        self, client: Client, reader: str, *, from_offset: int, view: EventView, cooldown: timedelta
    ) -> AsyncIterator[tuple[int, list[WorkflowEvent]]]:
        """A pacing reader's own polls: made only as its caller reads, naming it by a topic nothing is published
        to (``temporal/_workflow/pacing.py``), so the run learns how far this caller has read."""
        viewer = _LiveView() if view == "live" else _CommittedView()
        stream = WorkflowStreamClient.create(client, self.id)
        offset, retries = from_offset, 0
        topics = [EVENTS_TOPIC, READER_TOPIC_PREFIX + reader]
        while True:
            try:
                async for item in stream.subscribe(topics, offset, result_type=Envelope, poll_cooldown=cooldown):
                    offset, retries = item.offset + 1, 0
                    out: list[WorkflowEvent] = []
                    for one in _events(item.data):
                        out.extend(viewer.feed(one))
                    yield item.offset, out
                return
            except RPCError as e:
                # The server refuses a poll while the run's workflow task is being retried (it fails one
                # itself when signals it buffered meanwhile add up to megabytes): the run is not stuck,
                # so poll again from where the stream was, a few times.
                if e.status != RPCStatusCode.FAILED_PRECONDITION or retries >= _NOT_READY_RETRIES:
                    raise
                await asyncio.sleep(min(1.0, 0.05 * 2**retries))
                retries += 1


class EventStream:
    """A run's events as they happen (:meth:`RunHandle.events`): an async iterator, and where it is.

    Events at one stream position come together (a step's batch of live
    events shares one position): ``offset`` covers a position once its last
    event has been yielded. ``batches()`` yields whole positions instead,
    ``(offset, events)``, for a reader that must resume exactly (the
    console's server-sent events do: each message's ``id`` is its position).
    """

    def __init__(self, offset: int = -1) -> None:
        self._positions: AsyncIterator[tuple[int, list[WorkflowEvent]]] = _nothing()
        self._feed: RunFeed | None = None
        self._pending: list[WorkflowEvent] = []
        self._pending_offset = offset
        self.offset = offset
        """The stream position whose events have all been yielded (``-1``: none yet); resume with
        ``RunHandle.events(after=offset)``."""

    @property
    def unreachable(self) -> BaseException | None:
        """Why the Temporal server cannot be reached right now, while the stream waits for it (else ``None``)."""
        return self._feed.outage if self._feed is not None else None

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> WorkflowEvent:
        while not self._pending:
            offset, events = await self._positions.__anext__()
            if events:
                self._pending = list(reversed(events))
                self._pending_offset = offset
            else:
                self.offset = offset
        event = self._pending.pop()
        if not self._pending:
            self.offset = self._pending_offset
        return event

    async def batches(self, *, empty: bool = False) -> AsyncIterator[tuple[int, list[WorkflowEvent]]]:
        """Whole stream positions: ``(offset, events)``, each position's events together (``empty``: also the
        positions whose events the view holds back or drops, so a reader's offset follows every item)."""
        async for offset, events in self._positions:
            self.offset = offset
            if events or empty:
                yield offset, events

    async def aclose(self) -> None:
        """Stop reading (the process's reader of the run goes on a while for others, then stops)."""
        close = getattr(self._positions, "aclose", None)
        if close is not None:
            await close()


async def _nothing() -> AsyncIterator[tuple[int, list[WorkflowEvent]]]:
    return
    yield


_CLOSED = {
    WorkflowExecutionStatus.COMPLETED: "has completed",
    WorkflowExecutionStatus.FAILED: "has failed",
    WorkflowExecutionStatus.CANCELED: "was cancelled",
    WorkflowExecutionStatus.TERMINATED: "was terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed out",
}


def closed_run_message(workflow_id: str, status: WorkflowExecutionStatus) -> str:
    """What input for a closed run is told: the run exists, and how it ended."""
    ended = _CLOSED.get(status, f"is closed ({status.name.lower()})")
    return (
        f"run {workflow_id!r} {ended}: it takes no more input (answers, messages, checkpoints, resets); its "
        "checkpoints can still be listed and forked into a new run"
    )


def _graph_name(workflow: Workflow | str) -> str:
    name = workflow if isinstance(workflow, str) else workflow.name
    if not name or (not isinstance(workflow, str) and workflow.name_is_generated):
        raise ValueError(
            "a workflow hosted on Temporal needs a name that is the same in every process: WorkflowBuilder(name=...)"
        )
    return name


def _send_input(executor_id: str, message: Any, policy: str | None = None) -> SendInput:
    _check_length("executor id", executor_id, MAX_ID_CHARS)
    if policy is not None:
        check_policy(policy, "policy")
    what = f"message for executor {executor_id!r}"
    env = encode(message, what=what)
    check_payload(env.data, what=what)
    return SendInput(executor_id=executor_id, message=env, policy=policy)


async def fork(
    client: Client,
    source_workflow_id: str,
    checkpoint_id: CheckpointId,
    new_workflow_id: str,
    *,
    task_queue: str | None = None,
    allow_signature_mismatch: bool = False,
    stream: bool | None = None,
    reader: str | None = None,
) -> RunHandle:
    """Start ``new_workflow_id`` from a checkpoint of ``source_workflow_id`` (time travel).

    The new run continues from the checkpoint's state, in-flight messages,
    fan-in buffers, pending requests and outputs, independently of the source
    (which is not touched). Its lineage is recorded in its memo
    (:data:`LINEAGE_MEMO`), its ``status`` query and its checkpoints'
    metadata. A checkpoint taken under a different graph signature fails the
    new run with ``GraphSignatureMismatchError`` unless
    ``allow_signature_mismatch``; an unknown checkpoint fails it with
    ``CheckpointNotFoundError``. The new run goes to the source's task queue
    unless ``task_queue`` says otherwise. ``stream`` is how the new run is read
    (``RunInput.stream``; the durable twin's ``run(checkpoint_id=..., stream=...)``), ``reader``
    the reader it goes no further than (as for :func:`start_run`).

    A LlamaIndex run's checkpoint is ``"now"``, its context now: the new run goes on from it as
    ``wf.run(ctx=Context.from_dict(wf, handler.ctx.to_dict()))`` would (the same workflow and signature).
    """
    _check_length("checkpoint id", checkpoint_id, MAX_ID_CHARS)
    source = client.get_workflow_handle(source_workflow_id)
    desc = await source.describe()
    graph = desc.workflow_type
    lineage = {"workflow_id": source_workflow_id, "checkpoint_id": checkpoint_id}
    if graph == llama.WORKFLOW_TYPE:
        # A LlamaIndex run: a new run from its context now (ctx.to_dict()), as wf.run(ctx=Context.from_dict(...)).
        started = await llama.fork(
            client,
            source_workflow_id,
            checkpoint_id,
            new_workflow_id,
            task_queue=task_queue,
            memo={LINEAGE_MEMO: lineage},
        )
        return RunHandle(started, client)
    queue = task_queue or desc.task_queue
    signature = None if allow_signature_mismatch else await _signature_of(source)
    override = await versioning_override(client, queue, graph, signature) if signature else None
    handle = await start_workflow(
        client,
        graph,
        RunInput(
            fork_from=ForkSource(source_workflow_id, checkpoint_id, allow_signature_mismatch),
            stream=stream,
            graph_signature=signature,
            reader=reader,
        ),
        id=new_workflow_id,
        task_queue=queue,
        result_type=dict,
        memo={LINEAGE_MEMO: lineage},
        versioning_override=override,
    )
    return _started_graph_run(handle, client, graph)


async def _signature_of(run: WorkflowHandle[Any, Any], timeout: float = 10.0) -> str | None:
    """The graph signature a run executes (its checkpoints were taken under it), if it answers in time: a
    fork of it runs the same graph, on a worker hosting it. ``None``: the fork takes the first worker's."""
    try:
        status: Any = await asyncio.wait_for(run.query(QUERY_STATUS), timeout)
    except Exception:
        return None
    signature = status.get("graph_signature") if isinstance(status, dict) else None
    return signature if isinstance(signature, str) and signature else None


def get_run(client: Client, workflow_id: str) -> RunHandle:
    """A handle on an existing run (its latest execution)."""
    return RunHandle(client.get_workflow_handle(workflow_id), client)


def start_input(
    workflow: Workflow | str,
    message: Any = None,
    *,
    keep_alive: bool = False,
    checkpoint_every: int | None = None,
    max_history_events: int | None = None,
    max_steps_in_flight: int | None = None,
    stream: bool | None = None,
    function_invocation_kwargs: Mapping[str, Any] | None = None,
    client_kwargs: Mapping[str, Any] | None = None,
    concurrent_input: ConcurrentInput | None = None,
) -> dict[str, Any]:
    """The start input of a run (``RunInput`` as JSON), checked as :func:`start_run` checks it.

    The one builder of a run's start input: :func:`start_run` sends it, and a
    schedule (:func:`~temporal_workflows.temporal._client.schedules.create_schedule`)
    starts every run with it, so a scheduled run starts exactly as one
    started by hand. The arguments are :func:`start_run`'s.

    Raises:
        PayloadTooLargeError: the start message is too large for one Temporal payload.
        InvalidRunInputError: ``workflow`` is a graph and the message fits no handler of its start executor.
        ValueError: an option out of range.
    """
    if not isinstance(workflow, str) and message is not None:
        check_start_message(workflow, message)  # a misspelled field is named here, before the run starts
    env = encode(message, what="start message")
    check_payload(env.data, what="start message")
    arg: dict[str, Any] = {"message": env.data}
    if env.type is not None:
        arg["message_type"] = env.type
    if keep_alive:
        arg["keep_alive"] = True
    if checkpoint_every is not None:
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be 0 or positive, not {checkpoint_every}")
        arg["checkpoint_every"] = checkpoint_every
    if max_history_events is not None:
        arg["max_history_events"] = max_history_events
    if max_steps_in_flight is not None:
        if not 1 <= max_steps_in_flight <= MAX_STEPS_IN_FLIGHT:
            raise ValueError(f"max_steps_in_flight must be 1 to {MAX_STEPS_IN_FLIGHT}, not {max_steps_in_flight}")
        arg["max_steps_in_flight"] = max_steps_in_flight
    if stream is not None:
        arg["stream"] = stream
    kwargs = invocation_kwargs(function_invocation_kwargs, client_kwargs)
    if kwargs:
        arg["invocation_kwargs"] = kwargs
    if concurrent_input is not None:
        arg["concurrent_input"] = check_policy(concurrent_input)
    return arg


async def start_run(
    client: Client,
    workflow: Workflow | str,
    message: Any = None,
    *,
    id: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    keep_alive: bool = False,
    checkpoint_every: int | None = None,
    max_history_events: int | None = None,
    max_steps_in_flight: int | None = None,
    stream: bool | None = None,
    function_invocation_kwargs: Mapping[str, Any] | None = None,
    client_kwargs: Mapping[str, Any] | None = None,
    concurrent_input: ConcurrentInput | None = None,
    reader: str | None = None,
) -> RunHandle:
    """Start a run of ``workflow`` (a built graph, or its name) with a start message.

    Args:
        keep_alive: Keep the run open when it is idle, for more :meth:`RunHandle.send`
            messages (one run per conversation); end it with :meth:`RunHandle.close`.
            A keep-alive run started without a message starts idle.
        checkpoint_every: Take a checkpoint every N supersteps (0: only when
            asked); default: the graph's ``checkpoint_every`` if it was built
            with a storage, else only when asked.
        max_history_events: Continue as new at the first boundary after history
            reaches this many events (default 8,000), or when Temporal suggests it.
        max_steps_in_flight: Run at most this many steps of a superstep at once
            (1 to 1,000, the default); the others start as those finish, and
            results still commit in the same order.
        stream: How the run is read, as Agent Framework's ``run(stream=...)``
            (``ctx.is_streaming()``; agents call their model and yield outputs
            accordingly): ``True`` streamed, ``False`` awaited; ``None`` (the
            default) not said: agents stream live and keep each response as an
            output (docs/agents.md).
        function_invocation_kwargs, client_kwargs: As Agent Framework's
            ``run()`` takes them (plain JSON): every step gets them, and
            ``AgentExecutor`` passes them to its agent's tools and chat client.
        concurrent_input: What a message sent while the run is busy does by
            default (``"enqueue"``, ``"reject"``, ``"interrupt"``, ``"rollback"``;
            :meth:`RunHandle.send` may say otherwise per message).
        reader: A token the caller reads the run's events under
            (``RunHandle.events(reader=...)``): the run goes no further than
            that reader has read, as an in-process stream goes no further than
            its reader (the durable twin's ``run(..., stream=True)``;
            ``temporal/_workflow/pacing.py``).

    Raises:
        PayloadTooLargeError: the start message is too large for one Temporal
            payload (checked before the run is started).
        InvalidRunInputError: ``workflow`` is a graph and the message fits no
            handler of its start executor, naming the fields that failed.
    """
    name = _graph_name(workflow)
    arg = start_input(
        workflow,
        message,
        keep_alive=keep_alive,
        checkpoint_every=checkpoint_every,
        max_history_events=max_history_events,
        max_steps_in_flight=max_steps_in_flight,
        stream=stream,
        function_invocation_kwargs=function_invocation_kwargs,
        client_kwargs=client_kwargs,
        concurrent_input=concurrent_input,
    )
    override = None
    if not isinstance(workflow, str):
        # The run executes this graph, whichever worker takes it (docs/deployment.md, "A fleet of workers"). Not
        # part of start_input: a schedule's runs take the graph deployed when each starts.
        signature = arg["graph_signature"] = workflow.graph_signature_hash[:SIGNATURE_PREFIX]
        override = await versioning_override(client, task_queue, name, signature)
    if reader is not None:
        _check_length("reader", reader, MAX_ID_CHARS)
        arg["reader"] = reader
    handle = await start_workflow(
        client,
        name,
        arg,
        id=id or f"{name}-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=dict,
        versioning_override=override,
    )
    return _started_graph_run(handle, client, name)


def _started_graph_run(handle: WorkflowHandle[Any, Any], client: Client, workflow_type: str) -> RunHandle:
    """A handle on a run this client has just started as ``workflow_type``: its kind is known, so its first
    ``result()`` asks the server nothing more (no ``describe`` per run)."""
    run = RunHandle(handle, client)
    run._kind = "llama_index" if workflow_type == llama.WORKFLOW_TYPE else "graph"
    return run


async def send_or_start(
    client: Client,
    workflow: Workflow | str,
    message: Any,
    *,
    id: str,
    executor_id: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    wait: bool = True,
) -> RunHandle:
    """Send ``message`` to the keep-alive run ``id``, starting it first if it is not running.

    For stateless front ends: one workflow id per conversation, and every turn
    is this one call. ``wait=True`` uses update-with-start (returns once the
    message is accepted, or raises naming the problem); ``wait=False`` uses
    signal-with-start.

    Args:
        executor_id: Who gets the message; the start executor by default.
    """
    name = _graph_name(workflow)
    target = executor_id
    if target is None:
        if isinstance(workflow, str):
            raise ValueError("pass executor_id= when the workflow is given by name")
        target = workflow.graph.topology.start_executor_id
    arg = _send_input(target, message)
    start = RunInput(keep_alive=True)
    override = None
    if not isinstance(workflow, str):
        start.graph_signature = workflow.graph_signature_hash[:SIGNATURE_PREFIX]
        override = await versioning_override(client, task_queue, name, start.graph_signature)
    if not wait:
        handle = await start_workflow(
            client,
            name,
            start,
            id=id,
            task_queue=task_queue,
            result_type=dict,
            start_signal=SIGNAL_SEND,
            start_signal_args=[arg],
            versioning_override=override,
        )
        return RunHandle(handle, client)

    def operation() -> WithStartWorkflowOperation[Any, Any]:
        return WithStartWorkflowOperation(
            name,
            start,
            id=id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            result_type=dict,
            versioning_override=override,
        )

    _, handle = await update_with_start(
        client,
        UPDATE_SEND,
        arg,
        operation=operation,
        workflow_id=id,
        task_queue=task_queue,
        versioning_override=override,
        result_type=dict,
    )
    return RunHandle(handle, client)
