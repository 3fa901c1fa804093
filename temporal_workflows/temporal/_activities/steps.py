"""Activities that run user code for graph runs hosted on Temporal.

Per graph and executor there is one activity type, ``"<graph>.<executor>"``,
so the Web UI, ``temporal workflow show`` and metrics read naturally. Two
shared activities serve every graph: the topology lookup that pins a graph for
a run, and callable state reducers.

Committed state reaches a step inline while it is small; otherwise from this
worker's cache, filled by querying the workflow. A query adds nothing to
history, so a large state costs history bytes once (in the diff that wrote
it), not once per step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory, CancelledError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._checkpoints.base import CheckpointCipher, CheckpointStorage
from temporal_workflows._checkpoints.file import FileCheckpointStorage
from temporal_workflows._checkpoints.memory import HistoryCheckpointStorage, InMemoryCheckpointStorage
from temporal_workflows._checkpoints.sqlite import SqliteCheckpointStorage
from temporal_workflows._engine.limits import max_payload_bytes, stored_value_threshold
from temporal_workflows._engine.serde import Envelope, decode, validation_message
from temporal_workflows._errors import (
    NotSerializableError,
    UnknownGraphError,
    WorkflowError,
    class_path,
    error_args_of,
)
from temporal_workflows._graph.context import run_step
from temporal_workflows._graph.shape import MAX_SHAPE_BYTES, bounded_shape
from temporal_workflows._telemetry import Attr, instruments
from temporal_workflows.temporal._activities.checkpoints import build_checkpoint_activities
from temporal_workflows.temporal._failures import refusal_retry_delay, sever_cause_cycles, to_failure
from temporal_workflows.temporal._protocol import (
    ACTIVITY_PIN,
    ACTIVITY_REDUCE,
    ACTIVITY_TOPOLOGY,
    ACTIVITY_VALIDATE,
    FAILURE_SIGNATURE_MISMATCH,
    FAILURE_STALE_STATE,
    QUERY_COMMITTED_STATE_PAGE,
    QUERY_OUTSIDE_INPUT,
    SIGNATURE_PREFIX,
    STATUS_SEARCH_ATTRIBUTE,
    STEP_ERROR_ARGS,
    STEP_ERROR_CLASS,
    CheckpointSetup,
    PinInput,
    Pinned,
    ReduceInput,
    StatePage,
    StateSnapshot,
    Validated,
    ValidateInput,
    state_from_text,
    step_activity_name,
)
from temporal_workflows.temporal._wire import decode_step_input, encode_step_result
from temporal_workflows.temporal._worker.live_publisher import LivePublisher
from temporal_workflows.temporal._workflow.options import step_options

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = [
    "StateCache",
    "StepMeter",
    "build_activities",
    "build_not_hosted",
    "graph_step_input",
    "not_hosted_refusal",
    "signature_refusal",
]

_log = logging.getLogger(__name__)


class _StatusAttribute:
    """Whether the namespace has the status search attribute (asked once per worker).

    Upserting an unregistered attribute fails the workflow task, so runs only
    use it when the namespace has it; the answer is pinned in each run's
    history by the topology activity, so replays never depend on it.
    """

    def __init__(self) -> None:
        self._known: dict[str, str | None] = {}

    async def get(self) -> str | None:
        namespace = activity.info().workflow_namespace or "default"
        if namespace not in self._known:
            listed = True
            try:
                resp = await activity.client().operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=namespace)
                )
                names = set(resp.custom_attributes) | set(resp.system_attributes)
            except Exception as e:
                listed = False
                names = set()
                if isinstance(e, RPCError) and e.status == RPCStatusCode.UNIMPLEMENTED:
                    # Temporal's time-skipping test server has no search attributes at all: nothing to tell.
                    _log.debug("the server has no search attributes; runs will not set %s", STATUS_SEARCH_ATTRIBUTE)
                else:  # e.g. no permission on a hosted namespace: run without it
                    _log.warning(
                        "cannot list search attributes of %r (%s); runs will not set %s",
                        namespace,
                        e,
                        STATUS_SEARCH_ATTRIBUTE,
                    )
            found = STATUS_SEARCH_ATTRIBUTE in names
            if not found and listed:
                _log.warning(
                    "namespace %r has no %s search attribute, so runs cannot be found by status; register it with: "
                    "temporal operator search-attribute create --namespace %s --name %s --type Keyword",
                    namespace,
                    STATUS_SEARCH_ATTRIBUTE,
                    namespace,
                    STATUS_SEARCH_ATTRIBUTE,
                )
            self._known[namespace] = STATUS_SEARCH_ATTRIBUTE if found else None
        return self._known[namespace]


class StateCache:
    """Committed state per workflow run, as last seen by this worker process.

    Concurrent steps of one superstep share a single read; entries are
    evicted least-recently-used. A read is a query per page of the state's
    JSON text (half a payload each), so a state of several payloads (up to
    ``STATE_PAYLOADS``) reaches a step although no query answer could hold it.
    """

    def __init__(self, max_runs: int = 256) -> None:
        self._max = max_runs
        self._items: OrderedDict[tuple[str, str], StateSnapshot] = OrderedDict()
        self._inflight: dict[tuple[str, str, str], asyncio.Future[StateSnapshot]] = {}

    async def get(self, workflow_id: str, run_id: str, version: str) -> dict[str, Envelope]:
        key = (workflow_id, run_id)
        snap = self._items.get(key)
        if snap is not None and snap.version == version:
            self._items.move_to_end(key)
            return snap.state
        fkey = (workflow_id, run_id, version)
        fut = self._inflight.get(fkey)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._inflight[fkey] = fut
            try:
                fut.set_result(await _read_state(workflow_id, run_id))
            except BaseException as e:
                fut.set_exception(e)
                fut.exception()  # mark retrieved; awaiting callers re-raise it
            finally:
                del self._inflight[fkey]
        snap = await fut
        if snap.version != version:
            # Retryable: the workflow moved on (e.g. this is a late retry of a discarded step).
            raise ApplicationError(
                f"committed state is at version {snap.version}, step expected {version}", type=FAILURE_STALE_STATE
            )
        self._items[key] = snap
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)
        return snap.state


STATE_READ_PATIENCE = 30.0
"""Seconds a step keeps asking for the run's committed state when the query fails (the worker that held the
run was killed a moment ago, the server is restarting) before its attempt fails, retryably."""


_PERMANENT = frozenset(
    {
        RPCStatusCode.NOT_FOUND,
        RPCStatusCode.INVALID_ARGUMENT,
        RPCStatusCode.PERMISSION_DENIED,
        RPCStatusCode.UNIMPLEMENTED,
    }
)
"""Query refusals asking again cannot change (the run is gone, the query is malformed, not allowed)."""


async def _state_page(handle: Any, offset: int) -> StatePage:
    """One page of the committed state. A failed query is asked again for a while: a step retried because its
    worker died reads the state while the run's own worker (maybe the same dead one) is being replaced, and
    failing the attempt for that wastes it, with a traceback too long for the server to keep."""
    deadline = time.monotonic() + STATE_READ_PATIENCE
    delay = 0.2
    while True:
        try:
            page: StatePage = await handle.query(QUERY_COMMITTED_STATE_PAGE, offset, result_type=StatePage)
            return page
        except RPCError as e:
            if e.status in _PERMANENT:
                raise
            if time.monotonic() + delay > deadline:
                raise ApplicationError(
                    f"could not read the run's committed state for {STATE_READ_PATIENCE:g} s: "
                    f"{type(e).__name__}: {str(e)[:300]}",
                    type=FAILURE_STALE_STATE,
                ) from None
            _log.info("reading the run's committed state failed (%s); asking again", type(e).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


async def _read_state(workflow_id: str, run_id: str) -> StateSnapshot:
    """The run's committed state, page by page; retryable ``FAILURE_STALE_STATE`` if it moved on meanwhile."""
    handle = activity.client().get_workflow_handle(workflow_id, run_id=run_id)
    first = await _state_page(handle, 0)
    parts = [first.text]
    read = len(first.text)
    while read < first.size:
        page = await _state_page(handle, read)
        if page.version != first.version:
            raise ApplicationError(
                f"committed state moved from version {first.version} to {page.version} while it was read",
                type=FAILURE_STALE_STATE,
            )
        if not page.text:
            raise ApplicationError(f"committed state page at {read} of {first.size} is empty", type=FAILURE_STALE_STATE)
        parts.append(page.text)
        read += len(page.text)
    return StateSnapshot(first.version, state_from_text("".join(parts)))


def _naming_its_class(e: BaseException) -> BaseException:
    """A user's exception as the step's failure: what the SDK makes of it, plus its class's qualified name.

    The SDK reports any exception as an ``ApplicationError`` of its message
    and its class's bare name (``type``, which retry policies'
    ``non_retryable_error_types`` match); this one says the same and adds
    ``{"error_class": "module.QualName"}`` as its details, so the client can
    tell the user's class (``ExecutorFailedError.error_class``) and raise it
    again where the peer does. Cancellations, Temporal's own failures
    (an ``ApplicationError`` the step raised names its own type) pass as they are.
    """
    if not isinstance(e, Exception) or isinstance(e, FailureError):
        return e
    details: dict[str, Any] = {STEP_ERROR_CLASS: class_path(type(e))}
    args = error_args_of(e)
    if args is not None:
        details[STEP_ERROR_ARGS] = args  # KeyError('k'): its message ('k', quoted) does not give it back
    return ApplicationError(str(e), details, type=type(e).__name__)


def _non_retryable(e: WorkflowError) -> ApplicationError:
    # The type travels as the failure's type; the message does not repeat it.
    return to_failure(e)


def signature_refusal(graph: str, run_signature: str, hosted: Workflow | None, what: str) -> ApplicationError:
    """Retryable ``GraphSignatureMismatchError``: this worker hosts another version of ``graph`` (or none).

    Whatever needs the graph's code for a run (its pinning, a step, a validation, a reducer) is left to a
    worker hosting the run's signature: Temporal retries the activity, and another worker takes it. The
    details name both signatures; the run says in its status what it waits for.
    """
    mine = hosted.graph_signature_hash if hosted is not None else ""
    here = (
        f"graph {graph!r} on this worker has signature {mine[: len(run_signature)]}…"
        if mine
        else f"this worker hosts no graph {graph!r}"
    )
    return ApplicationError(
        f"{here}, but the run was started under {run_signature}…; {what} is left to a worker hosting the run's "
        "graph (Worker Versioning routes it there: docs/deployment.md)",
        {"run_signature": run_signature, "worker_signature": mine},
        type=FAILURE_SIGNATURE_MISMATCH,
        non_retryable=False,
        # A refusal is routing, not a failure: the SDK logs it at debug level, and this worker's own
        # log says it once (_StepLog); it is tried again at routing's pace, not the step's backoff.
        category=ApplicationErrorCategory.BENIGN,
        next_retry_delay=refusal_retry_delay(),
    )


def graph_step_input(raw: object) -> bool:
    """Whether an activity's first argument is a graph step's input (``_wire.encode_step_input``'s form)."""
    return isinstance(raw, dict) and (("superstep" in raw and "messages" in raw) or isinstance(raw.get("task"), dict))


def not_hosted_refusal(activity_type: str, raw: object, hosted: Mapping[str, Workflow]) -> ApplicationError:
    """Retryable refusal of an activity type this worker does not register: a step of another version of a
    graph (an executor this one lacks) or of a graph it does not host. Never the run's failure: the step is
    left to a worker that has it, and the run waits for one as for a signature it lacks."""
    graph = max((g for g in hosted if activity_type.startswith(f"{g}.")), key=len, default=None)
    run_signature = raw.get("signature") if isinstance(raw, dict) else None
    signature = run_signature if isinstance(run_signature, str) else ""
    wf = hosted.get(graph) if graph is not None else None
    mine = wf.graph_signature_hash if wf is not None else ""
    if wf is not None:
        executor = activity_type[len(graph or "") + 1 :]
        here = f"graph {graph!r} on this worker (signature {mine[:SIGNATURE_PREFIX]}…) has no executor {executor!r}"
    else:
        here = f"no activity {activity_type!r} is registered on this worker (it hosts {sorted(hosted)})"
    started = f"the run was started under {signature}…" if signature else "the run's graph differs"
    return ApplicationError(
        f"{here}; {started}: the step is left to a worker hosting the run's graph (Worker Versioning routes it "
        "there: docs/deployment.md)",
        {"run_signature": signature, "worker_signature": mine},
        type=FAILURE_SIGNATURE_MISMATCH,
        non_retryable=False,
        # A refusal is routing, not a failure: the SDK logs it at debug level, and this worker's own
        # log says it once (_StepLog); it is tried again at routing's pace, not the step's backoff.
        category=ApplicationErrorCategory.BENIGN,
        next_retry_delay=refusal_retry_delay(),
    )


def _worker_identity() -> str:
    """Who runs this activity: the worker's identity (Temporal's default is ``<pid>@<host>``)."""
    try:
        return activity.client().identity
    except Exception:  # an ActivityEnvironment in tests has no client
        import os
        import socket

        return f"{os.getpid()}@{socket.gethostname()}"


class _Heartbeats:
    """One running step's heartbeats: automatic ones while it runs, and the handler's own (``ctx.heartbeat``).

    Every third of the step's heartbeat timeout (it has none: no automatic
    heartbeats) the event loop sends one from a timer, so heartbeats continue
    while the handler awaits anything, and a cancel still reaches the handler
    as ``asyncio.CancelledError`` at its next ``await``. Automatic heartbeats
    repeat the details last given (by ``ctx.heartbeat``, or else by the
    previous attempt), which is what the next attempt reads. They stop once a
    cancel has reached the step: a step that ignores it times out within its
    heartbeat timeout, so a cancel or reset never waits longer for it (unless
    the handler heartbeats itself). None is sent at the start: a step that
    ends within a third of its heartbeat timeout sends none at all.
    """

    def __init__(self, info: activity.Info) -> None:
        self.details: tuple[Any, ...] = tuple(info.heartbeat_details)
        timeout = info.heartbeat_timeout
        self._every = timeout.total_seconds() / 3 if timeout else 0.0
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, *details: Any) -> None:
        self.details = details
        activity.heartbeat(*details)

    def start(self) -> None:
        if self._every > 0:
            self._timer = asyncio.get_running_loop().call_later(self._every, self._beat)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _beat(self) -> None:
        self._timer = None
        if activity.is_cancelled():
            return
        activity.heartbeat(*self.details)
        self.start()


class _StepLog:
    """The worker's one log line per retried or failed step: where and which attempt, never a value.

    A retry says so as it starts (the worker that ran the attempt before may be gone, killed mid-step);
    a failed attempt says its error's type and whether Temporal tries again. Messages are left out:
    they may quote values (docs/security.md: no values in logs).
    """

    def __init__(self, info: activity.Info) -> None:
        self.info = info
        self.what = (
            f"step {info.activity_type!r} of workflow {info.workflow_id!r} (activity {info.activity_id!r}, "
            f"attempt {info.attempt})"
        )
        if info.attempt > 1:
            _log.info("%s: a retry, running on this worker (%s)", self.what, _worker_identity())

    def failed(self, e: BaseException) -> None:
        if isinstance(e, (asyncio.CancelledError, CancelledError)):
            return
        kind = (e.type if isinstance(e, ApplicationError) else None) or type(e).__name__
        if kind == FAILURE_SIGNATURE_MISMATCH:
            _log.debug("%s: refused here, left to a worker hosting the run's graph signature", self.what)
            return
        policy = self.info.retry_policy
        final = (
            (isinstance(e, ApplicationError) and e.non_retryable)
            or (policy is not None and kind in (policy.non_retryable_error_types or ()))
            or (policy is not None and policy.maximum_attempts > 0 and self.info.attempt >= policy.maximum_attempts)
        )
        then = "its last attempt: the step fails" if final else "Temporal retries it"
        _log.warning("%s failed on this worker (%s): %s; %s", self.what, _worker_identity(), kind, then)


class StepMeter:
    """One step attempt's metrics, recorded by the worker that runs it (an attempt runs once, never replays).

    ``steps.started`` (and ``steps.retried`` for an attempt after the first)
    when it starts; when it ends, ``step.duration`` by outcome and, if it
    raised, ``steps.failed`` by error type. An attempt lost with its worker
    records no end: the next attempt counts as retried. Completed steps are
    counted by the run, once per step (``steps.completed``).
    """

    def __init__(self, graph: str, executor_id: str, attempt: int) -> None:
        self._attributes = {Attr.WORKFLOW_NAME: graph, Attr.EXECUTOR_ID: executor_id}
        self._start = time.monotonic()
        m = instruments()
        m.steps_started.add(1, self._attributes)
        if attempt > 1:
            m.steps_retried.add(1, self._attributes)

    def ended(self, outcome: str, error: BaseException | None = None) -> None:
        m = instruments()
        m.step_duration.record(time.monotonic() - self._start, {**self._attributes, Attr.OUTCOME: outcome})
        if error is not None:
            m.steps_failed.add(1, {**self._attributes, Attr.ERROR_TYPE: type(error).__qualname__})


def _make_step_activity(wf: Workflow, executor_id: str, cache: StateCache) -> Callable[..., Any]:
    graph = wf.graph
    graph_signature = wf.graph_signature_hash
    fan_in_groups = wf.topology.fan_in_groups

    async def step(raw: dict[str, Any]) -> dict[str, Any]:
        info = activity.info()
        heartbeats = _Heartbeats(info)
        heartbeats.start()
        where = _StepLog(info)
        live = LivePublisher()
        try:
            result = await _step(raw, info, heartbeats, live)
        except BaseException as e:
            where.failed(e)
            raise
        finally:
            heartbeats.stop()
            if live.published:
                instruments().live_events.add(
                    live.published, {Attr.WORKFLOW_NAME: graph.name or "", Attr.EXECUTOR_ID: executor_id}
                )
        # Which worker ran it (placement): the run's events say so (ExecutorCompletedEvent.worker).
        result["worker"] = _worker_identity()
        return result

    async def _step(
        raw: dict[str, Any], info: activity.Info, heartbeats: _Heartbeats, live: LivePublisher
    ) -> dict[str, Any]:
        inp = decode_step_input(raw, executor_id)
        if inp.signature and not graph_signature.startswith(inp.signature):
            # A worker hosting another version of this graph (a mixed fleet, a rolling deploy):
            # never run its edges for this run; another worker takes it.
            raise signature_refusal(graph.name or "", inp.signature, wf, "this step")
        state = inp.state
        if state is None:
            state = await cache.get(info.workflow_id or "", info.workflow_run_id or "", inp.state_version)
        task = inp.task
        attributes = {Attr.RUN_ID: info.workflow_id or "", Attr.TEMPORAL_RUN_ID: info.workflow_run_id or ""}
        # Live events go to the run's stream while the handler runs; the last ones are
        # flushed before the result is returned, so they precede the step's completion.
        counted = StepMeter(graph.name or "", executor_id, info.attempt)
        try:
            result = await run_step(
                graph,
                task,
                state,
                run_id=info.workflow_id or "",
                attempt=info.attempt,
                epoch=inp.epoch,
                heartbeat=heartbeats,
                live=live,
                streaming=inp.streaming,
                invocation_kwargs=inp.invocation_kwargs,
                span_attributes=attributes,
            )
        except asyncio.CancelledError:
            counted.ended("cancelled")
            live.abandon()  # a cancelled attempt's items are void; its cancel must not wait on a flush
            raise
        except WorkflowError as e:
            # Graph-level errors (undeliverable message, unserializable value, bad
            # request_info) fail the same way on every attempt: do not retry them.
            counted.ended("failed", e)
            await live.close()
            raise _non_retryable(e) from e
        except BaseException as e:
            counted.ended("failed", e)
            await live.close()  # a reader sees what the failed attempt streamed, then the retry's marker
            sever_cause_cycles(e)  # the SDK reports this error, not a recursion error, for `raise e from e`
            named = _naming_its_class(e)
            if named is e:
                raise
            # In its place, not on top of it: its stack trace and the chain the SDK would follow, its message once.
            follows = e.__cause__ if e.__cause__ is not None or e.__suppress_context__ else e.__context__
            raise named.with_traceback(e.__traceback__) from follows
        counted.ended("completed")
        await live.close()
        return encode_step_result(result, task, fan_in_groups, share=inp.share)

    step.__name__ = step.__qualname__ = f"step_{graph.name}_{executor_id}".replace("-", "_")
    return activity.defn(name=step_activity_name(graph.name or "", executor_id))(step)


def build_not_hosted(workflows: Sequence[Workflow], other: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """The worker's dynamic activity: any activity type it does not register.

    A step of an executor that another version of a graph has (or of a graph this worker does not host) is
    refused retryably, as a step of another signature is: never the run's failure (Temporal's own answer,
    ``NotFoundError``, counts against the step's attempts and fails the run once they run out). ``other``:
    another dynamic activity of the same worker (a worker has one; ``TemporalRuntime``'s step activity is
    one), which gets every call that is not a graph step's.
    """
    registry = {wf.name or "": wf for wf in workflows}

    @activity.defn(dynamic=True)
    async def not_hosted(args: Sequence[RawValue]) -> Any:
        raw = activity.payload_converter().from_payload(args[0].payload) if args else None
        kind = activity.info().activity_type
        if other is not None and not (graph_step_input(raw) or any(kind.startswith(f"{g}.") for g in registry)):
            return await other(args)
        raise not_hosted_refusal(kind, raw, registry)

    return not_hosted


def _encrypt_store(storage: CheckpointStorage | None, cipher: CheckpointCipher) -> None:
    """Give a file or SQLite store that has no cipher of its own the worker's."""
    if isinstance(storage, (FileCheckpointStorage, SqliteCheckpointStorage)):
        if storage.cipher is None:
            storage.cipher = cipher
    elif storage is not None and not isinstance(storage, InMemoryCheckpointStorage):
        # InMemory stays in the process; HistoryCheckpointStorage lives in history (encrypted by the codec).
        warnings.warn(
            f"payload encryption is on, but {type(storage).__name__} is not one of the stores the worker can "
            "encrypt: its checkpoints are stored as it writes them",
            stacklevel=3,
        )


def build_activities(
    workflows: Sequence[Workflow],
    checkpoint_storage: CheckpointStorage | None = None,
    *,
    cipher: CheckpointCipher | None = None,
) -> list[Callable[..., Any]]:
    """Every activity a worker needs to host ``workflows``.

    Args:
        checkpoint_storage: Where checkpoints of graphs built without a
            ``checkpoint_storage`` go; by default a :class:`SqliteCheckpointStorage`
            (``$TEMPORAL_WORKFLOWS_CHECKPOINT_DB``, opened on first use).
        cipher: Encrypts checkpoints at rest: used by the default store, and
            given to file and SQLite stores (this one and the graphs' own) that
            have no cipher, so that turning payload encryption on also covers
            checkpoints written outside history.
    """
    registry: dict[str, Workflow] = {}
    for wf in workflows:
        if not wf.name or wf.name_is_generated:
            raise WorkflowError(
                "a workflow hosted on Temporal needs a name that is the same in every process: "
                f"WorkflowBuilder(name=...); without one it is named {wf.name!r}, a new name in every process, "
                "so workers and clients could not agree on its workflow type"
            )
        if wf.name in registry and registry[wf.name] is not wf:
            raise WorkflowError(f"two workflows are named {wf.name!r}; workflow names must be unique per worker")
        registry[wf.name] = wf

    if cipher is not None:
        for storage in {id(s): s for s in (checkpoint_storage, *(wf.checkpoint_storage for wf in workflows))}.values():
            _encrypt_store(storage, cipher)

    status_attribute = _StatusAttribute()

    def hosted(name: str, signature: str | None = None, what: str = "") -> Workflow:
        """The graph ``name``; with the run's ``signature``, only if this worker hosts that version of it
        (else a retryable refusal: another worker takes the activity)."""
        wf = registry.get(name)
        if signature and (wf is None or not wf.graph_signature_hash.startswith(signature)):
            raise signature_refusal(name, signature, wf, what)
        if wf is None:
            raise to_failure(
                UnknownGraphError(f"no graph named {name!r} is registered on this worker; known: {sorted(registry)}")
            )
        return wf

    default_storage = checkpoint_storage

    def storage_for(wf: Workflow) -> CheckpointStorage:
        nonlocal default_storage
        if wf.checkpoint_storage is not None:
            return wf.checkpoint_storage
        if default_storage is None:
            default_storage = SqliteCheckpointStorage(cipher=cipher)
        return default_storage

    def checkpoint_setup(wf: Workflow) -> CheckpointSetup:
        storage = wf.checkpoint_storage or default_storage
        history = isinstance(storage, HistoryCheckpointStorage)
        # A graph built with a storage asks for automatic checkpoints; the worker's default does not.
        every = wf.checkpoint_every if wf.checkpoint_storage is not None else 0
        return CheckpointSetup(
            store="history" if history else "external",
            every=every,
            keep=storage.keep if isinstance(storage, HistoryCheckpointStorage) else 0,
        )

    async def pinned_of(wf: Workflow) -> Pinned:
        # Edges in display form are for humans (viz, docs); the workflow never reads them.
        pinned = dataclasses.replace(wf.topology, edges=())
        options = {eid: spec for eid, ex in wf.graph.executors.items() if (spec := step_options(ex.options))}
        try:
            # The picture, kept once by the run for readers (the ``topology`` query); never a reason to fail.
            shape, note = bounded_shape(wf.graph, min(MAX_SHAPE_BYTES, max_payload_bytes() // 4))
        except Exception as e:
            shape, note = None, f"the graph's picture could not be made: {type(e).__name__}: {e}"[:500]
        # The children a sub-workflow executor starts run the child graph this version was built with.
        child_signatures = {
            child: registry[child].graph_signature_hash[:SIGNATURE_PREFIX]
            for child in sorted(set(wf.topology.subworkflows.values()))
            if child in registry
        }
        return Pinned(
            pinned,
            await status_attribute.get(),
            checkpoint_setup(wf),
            max_payload_bytes(),
            options,
            shape,
            note,
            stored_over=stored_value_threshold(),
            subworkflow_signatures=child_signatures or None,
        )

    @activity.defn(name=ACTIVITY_TOPOLOGY)
    async def topology(name: str) -> Pinned:
        return await pinned_of(hosted(name))

    @activity.defn(name=ACTIVITY_PIN)
    async def pin(inp: PinInput) -> Pinned:
        return await pinned_of(hosted(inp.graph, inp.signature, "its pinning"))

    @activity.defn(name=ACTIVITY_VALIDATE)
    async def validate(inp: ValidateInput) -> Validated:
        wf = hosted(inp.graph, inp.signature, "checking outside input")
        if inp.ref is not None:
            # Large input is read from the run (history holds it once, in its update or signal).
            info = activity.info()
            assert info.workflow_id is not None  # scheduled by a run
            handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
            held = await handle.query(QUERY_OUTSIDE_INPUT, inp.ref, result_type=Envelope)
            if held is None:  # pragma: no cover - the run holds it until this activity returns
                raise ApplicationError(f"the run no longer holds input {inp.ref!r}")
            inp = dataclasses.replace(inp, value=held, ref=None)
        what = f"response to request {inp.request.request_id!r}" if inp.request else f"message for {inp.executor_id!r}"
        try:
            if inp.request is not None:
                typed = wf.graph.validate_response(inp.request, decode(inp.value))
            else:
                typed = wf.graph.validate_message(inp.executor_id, inp.value)
            # The input is in history already (its signal or update): return only what validation changed,
            # or refuse a value validation made too large for a step's input.
            return Validated.of(inp.value, typed, limit=max_payload_bytes(), what=f"the {what} once validated")
        except (NotSerializableError, WorkflowError, Exception) as e:
            # Outside input must never fail the run: whatever goes wrong checking it (a type that
            # does not validate or cannot be resolved) refuses the input, naming no values.
            kind = "InvalidResponseError" if inp.request is not None else "UndeliverableMessageError"
            if isinstance(e, WorkflowError) and not isinstance(e, NotSerializableError):
                return Validated(error=str(e), error_type=type(e).__name__)
            detail = validation_message(e) if isinstance(e, ValidationError) else f"{type(e).__name__}: {e}"
            return Validated(error=f"the {what} cannot be used: {detail}", error_type=kind)

    @activity.defn(name=ACTIVITY_REDUCE)
    async def reduce(inp: ReduceInput) -> Envelope:
        wf = hosted(inp.graph, inp.signature, "a reducer")
        try:
            return wf.graph.reduce(inp.key, inp.committed, inp.writes)
        except WorkflowError as e:
            raise _non_retryable(e) from e
        except BaseException as e:
            sever_cause_cycles(e)
            raise

    cache = StateCache()
    acts: list[Callable[..., Any]] = [
        topology,
        pin,
        reduce,
        validate,
        *build_checkpoint_activities(hosted, storage_for),
    ]
    for wf in registry.values():
        for eid in wf.graph.executors:
            acts.append(_make_step_activity(wf, eid, cache))
    return acts
