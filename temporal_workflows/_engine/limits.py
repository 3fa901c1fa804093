"""Payload size limits: fail clearly, where a value is produced, before Temporal refuses it.

Temporal refuses any payload over ``limit.blobSize.error`` (2 MiB by default;
it warns from ``limit.blobSize.warn``, 512 KiB). A step's whole result is one
payload (the activity's result), and so is each signal, update and workflow
input. Left to Temporal, a step that writes 3 MB of state fails after the
fact with ``PayloadsTooLarge: [TMPRL1103] Attempted to upload payloads with
size that exceeded the error limit`` -- naming neither the state key nor the
fix, and only after the step's retries have run it (and its side effects)
again. So every step's result is measured at the end of ``run_step``, which
both graph hosts share: the in-process runner fails exactly as a Temporal run does,
and a graph that would break on Temporal breaks in its unit tests first.

The limit defaults to just under 2 MiB, leaving room for what wraps the
values (field names, type names, the encryption codec's header). A cluster
configured with a larger ``limit.blobSize.error`` can raise it with the
environment variable :data:`ENV_MAX_PAYLOAD_BYTES` on workers and clients.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from temporal_workflows._engine.machine import EXECUTOR_STATE_PREFIX, Engine, Output, StepResult, StepTask
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import PayloadTooLargeError, RunTooLargeError, WorkflowError

__all__ = [
    "CommitRefused",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "ENVELOPE_ALLOWANCE",
    "MAX_ANSWERS_PER_UPDATE",
    "ENV_MAX_PAYLOAD_BYTES",
    "GUIDANCE",
    "MIN_MAX_PAYLOAD_BYTES",
    "TEMPORAL_BLOB_SIZE_LIMIT",
    "TEMPORAL_BLOB_SIZE_WARNING",
    "check_payload",
    "OMITTED_KEY",
    "RunLimits",
    "TRUNCATED_KEY",
    "STATE_PAYLOADS",
    "StateSizes",
    "check_step_input",
    "check_step_result",
    "input_may_exceed",
    "json_size",
    "allow_stored_values",
    "stored_value_threshold",
    "max_payload_bytes",
    "state_entry_size",
    "too_large",
    "truncated_requests",
    "truncated_state",
]

STATE_PAYLOADS = 4
"""How many payloads the run's committed state may take as a whole (each key still fits in one).

A step reads the committed state in pages (on Temporal, a query per page), so
the state need not fit in one payload; it stays bounded because every byte of
it is in the run's history at least once (the diff that wrote it), and a run
whose state cannot be carried by a continue-as-new stays in one execution,
whose history Temporal caps at 50 MB. Four payloads (7.75 MiB by default)
hold a 50-turn agent conversation with 100 KB tool outputs with room to spare.
"""

TEMPORAL_BLOB_SIZE_LIMIT = 2 * 1024 * 1024
"""Temporal's default ``limit.blobSize.error``: the server, and the SDK's worker, refuse a larger payload."""

TEMPORAL_BLOB_SIZE_WARNING = 512 * 1024
"""Temporal's default ``limit.blobSize.warn``: larger payloads are accepted, with a warning in the logs."""

ENVELOPE_ALLOWANCE = 64 * 1024
"""Room left under Temporal's limit for what wraps the measured JSON: the step result's
field names, type names and ids, and the encryption codec's nonce, tag and key id."""

DEFAULT_MAX_PAYLOAD_BYTES = TEMPORAL_BLOB_SIZE_LIMIT - ENVELOPE_ALLOWANCE
"""The largest step result (or start input, message or response) accepted: 2,031,616 bytes of JSON."""

MAX_ANSWERS_PER_UPDATE = 1000
"""Most answers one update carries (a graph run's ``submit_responses``, a LlamaIndex run's ``submit_events``):
a run rarely has more requests pending, and each answer is read before the update is taken."""

ENV_MAX_PAYLOAD_BYTES = "TEMPORAL_WORKFLOWS_MAX_PAYLOAD_BYTES"
"""Environment variable overriding :data:`DEFAULT_MAX_PAYLOAD_BYTES` (a whole number of bytes,
at least :data:`MIN_MAX_PAYLOAD_BYTES`); set it on workers and clients alike, e.g. for a
cluster with a larger ``limit.blobSize.error``."""

MIN_MAX_PAYLOAD_BYTES = 64 * 1024
"""The smallest limit :data:`ENV_MAX_PAYLOAD_BYTES` may set. A step result smaller than this,
nearly every one, is therefore accepted without reading the environment (a read costs more
than the rest of the check)."""

GUIDANCE = (
    "keep large data in external storage — S3/GCS/a database — and put a reference in state "
    "(its URL or key) instead of the data"
)
"""The fix, quoted in every :class:`PayloadTooLargeError`."""

_FRAMING_PER_PART = 512
"""Upper bound of the JSON around one value in a step result (key, type name, ids), for the fast path."""


_STORED_VALUE_LIMIT: list[int] = []
"""Set when this process keeps large values by reference (``LargeValues``): the largest value it takes."""


def allow_stored_values(max_value_bytes: int | None, threshold: int | None = None) -> None:
    """This process keeps values over a threshold in a store (``None``: no longer): values up to
    ``max_value_bytes`` pass :func:`max_payload_bytes` (a reference is what a payload then holds).

    Set by ``TemporalWorkflowsPlugin(large_values=...)`` in the workers and clients that have the store; no
    I/O here, only the number.
    """
    _STORED_VALUE_LIMIT.clear()
    if max_value_bytes is not None:
        _STORED_VALUE_LIMIT.extend((max_value_bytes, threshold or 0))


def stored_value_threshold() -> int | None:
    """With a store for large values in this process: payloads of at least this many bytes go there."""
    return (_STORED_VALUE_LIMIT[1] or None) if _STORED_VALUE_LIMIT else None


def max_payload_bytes() -> int:
    """The payload limit in bytes: :data:`ENV_MAX_PAYLOAD_BYTES` if set, else the default; with a store for
    large values (:func:`allow_stored_values`), the largest value it takes, if that is more.

    Read on every call, so a test or a process can change it without
    reloading anything.

    Raises:
        WorkflowError: the variable is set but is not a whole number of at
            least :data:`MIN_MAX_PAYLOAD_BYTES`; a limit silently ignored would
            let the opaque Temporal error back in.
    """
    raw = os.environ.get(ENV_MAX_PAYLOAD_BYTES, "").strip()
    stored = _STORED_VALUE_LIMIT[0] if _STORED_VALUE_LIMIT else 0
    if not raw:
        return max(DEFAULT_MAX_PAYLOAD_BYTES, stored)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < MIN_MAX_PAYLOAD_BYTES:
        raise WorkflowError(
            f"{ENV_MAX_PAYLOAD_BYTES}={raw!r} must be a whole number of bytes, at least {MIN_MAX_PAYLOAD_BYTES:,}"
        )
    return max(value, stored)


_MEASURED: dict[int, tuple[str, int]] = {}
"""The JSON sizes of the last few very large strings measured, by identity (each kept alive by its entry)."""
_MEASURED_KEPT = 8
_MEASURED_FROM = 1 << 20


def json_size(data: Any) -> int:
    """Bytes of ``data`` as compact UTF-8 JSON: what the pydantic data converter sends for it.

    A very large string (a document kept by reference, one message through several steps) is measured
    once: the same object passes the step's events, the next step's input and its events in one workflow
    task, and measuring 100 MB takes a third of a second (the SDK allows a workflow task 2 s of code).
    """
    if type(data) is str and len(data) >= _MEASURED_FROM:
        known = _MEASURED.get(id(data))
        if known is not None and known[0] is data:
            return known[1]
        size = len(to_json(data))
        if len(_MEASURED) >= _MEASURED_KEPT:
            del _MEASURED[next(iter(_MEASURED))]
        _MEASURED[id(data)] = (data, size)
        return size
    return len(to_json(data))


def _too_large(what: str, size: int, limit: int, *, executor_id: str | None, detail: str = "") -> PayloadTooLargeError:
    who = f"executor {executor_id!r}: " if executor_id is not None else ""
    return PayloadTooLargeError(
        f"{who}{what} is {size:,} bytes as JSON{detail}, over the payload limit of {limit:,} bytes "
        f"(Temporal refuses payloads over {TEMPORAL_BLOB_SIZE_LIMIT // (1024 * 1024)} MiB; {ENV_MAX_PAYLOAD_BYTES} "
        f"sets the limit); {GUIDANCE}",
        what=what,
        size=size,
        limit=limit,
        executor_id=executor_id,
    )


def too_large(what: str, size: int, limit: int) -> PayloadTooLargeError:
    """The error for an outside value (no executor produced it) of ``size`` bytes over ``limit``."""
    return _too_large(what, size, limit, executor_id=None)


def check_payload(data: Any, *, what: str) -> None:
    """Refuse one outside value (start message, message, response) before it is sent.

    Args:
        data: The value's JSON form (an ``Envelope``'s ``data``).
        what: What it is, for the error: ``"start message"``, ``"message for executor 'chat'"``.

    Raises:
        PayloadTooLargeError: naming ``what``, its size and the limit.
    """
    limit = max_payload_bytes()
    size = json_size(data)
    if size > limit:
        raise _too_large(what, size, limit, executor_id=None)


def _parts(result: StepResult) -> Iterator[tuple[str, Any]]:
    """Every value in a step result, with what it is called in an error message."""
    for w in result.writes:
        if w.value is not None:
            if w.key.startswith(EXECUTOR_STATE_PREFIX) and w.key.endswith("/"):
                yield "checkpoint state (what on_checkpoint_save returned)", w.value.data
            elif w.key.startswith(EXECUTOR_STATE_PREFIX):
                yield f"executor state key {w.key.split('/', 1)[-1]!r}", w.value.data
            else:
                yield f"state key {w.key!r}", w.value.data
    for d in result.sent:
        for m in d.messages:
            yield f"message to {d.target_id!r}", m.data
    for o in result.outputs:
        yield "output", o.data
    for r in result.requests:
        yield f"request {r.request_id!r}", (r.data.data, r.response_schema)
    for e in result.events:
        yield f"event {e.type or 'custom'}", e.data
    for m in result.unrouted:
        yield "message sent nowhere (every edge condition was false)", m.data


def check_step_result(result: StepResult, *, executor_id: str) -> StepResult:
    """Return ``result`` if it fits in one Temporal payload; otherwise fail naming what is too large.

    Each written state value, sent message (once per target it goes to),
    output, request and event is measured as JSON, and so is the result as
    a whole. Small results, nearly all of them, cost one serialization of
    their values (about a microsecond); the exact measure of the whole
    result runs only near the limit.

    Raises:
        PayloadTooLargeError: naming the executor and the state key,
            ``message to '<target>'`` or ``output`` that is too large (or,
            when no single value is, the result's total and its largest
            parts), the size, the limit and the fix.
    """
    values: list[Any] = [w.value.data for w in result.writes if w.value is not None] if result.writes else []
    for d in result.sent:
        for m in d.messages:
            values.append(m.data)
    # (Parts a step did not make are skipped: most steps make one or two kinds.)
    if result.outputs:
        values.extend(o.data for o in result.outputs)
    if result.requests:
        values.extend((r.data.data, r.response_schema) for r in result.requests)
    if result.events:
        values.extend(e.data for e in result.events)
    if result.unrouted:
        values.extend(m.data for m in result.unrouted)
    estimate = len(to_json(values)) + _FRAMING_PER_PART * len(values)
    if estimate <= MIN_MAX_PAYLOAD_BYTES:
        return result
    limit = max_payload_bytes()
    if estimate <= limit:
        return result
    sizes = sorted(((json_size(data), what) for what, data in _parts(result)), reverse=True)
    if sizes and sizes[0][0] > limit:
        size, what = sizes[0]
        raise _too_large(what, size, limit, executor_id=executor_id)
    # The whole result with every field spelled out: at least what goes on the wire.
    total = json_size(result)
    if total > limit:
        largest = ", ".join(f"{what} ({size:,} bytes)" for size, what in sizes[:3])
        raise _too_large("the step's result", total, limit, executor_id=executor_id, detail=f" in all ({largest})")
    return result


def input_may_exceed(task: StepTask) -> bool:
    """Whether a task's input needs measuring before it runs.

    A single message a step sent was measured in that step's result; only
    inputs that combine values (a fan-in, a request with its response) or
    came from outside (a start message or a signal) can add up past the limit.
    """
    return task.kind != "message" or task.source_ids[:1] == (None,)


def check_step_input(task: StepTask, *, limit: int = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
    """Refuse a task whose input cannot be one payload, before it is scheduled.

    Every value was checked where it was produced, but a step's input can
    still add up past the limit: a fan-in target gets every source's message
    in one input, and a response task carries the request with the answer.
    For the hosts, before they run (schedule) the step; workflow code must
    pass the limit it pinned for the run, since it may not read the
    environment.

    Raises:
        PayloadTooLargeError: naming the executor, what its input holds and its size.
    """
    values: list[Any] = [m.data for m in task.messages]
    if task.request is not None:
        values.append(task.request.data.data)
    size = json_size(values)
    if size <= limit:
        return
    if task.kind == "fan_in":
        senders = sorted({s for s in task.source_ids if s is not None})
        what = f"its fan-in input ({len(task.messages)} messages from {senders})"
    elif task.kind == "response" and task.request is not None:
        what = f"its input (request {task.request.request_id!r} with its response)"
    else:
        what = "its input"
    raise _too_large(what, size, limit, executor_id=task.executor_id)


# -- the committed state as a whole --------------------------------------------------------------

_FRAMING_PER_ENTRY = 32
"""The JSON around one committed state entry in the committed-state query (``{"type":…,"data":…}``, commas)."""

_QUOTED = 80
"""Characters of a state key an error quotes."""

_LISTED = 5
"""State keys an error names, largest first."""


def state_entry_size(key: str, value: Envelope) -> int:
    """Bytes one committed state entry takes where the state travels whole, as JSON: key, type name, value."""
    # One serialization for both: ``[key,data]`` is their JSON, a comma and two brackets.
    return len(to_json((key, value.data))) - 3 + len(value.type or "") + _FRAMING_PER_ENTRY


def _largest_first(entry: tuple[int, str]) -> tuple[int, str]:
    return -entry[0], entry[1]


def _key(key: str) -> str:
    return repr(key if len(key) <= _QUOTED else key[:_QUOTED] + "…")


class StateSizes:
    """The committed state's size, kept per key as commits change it: the one limit on state, on every graph host.

    Each value fits in one payload (the step that writes it is checked), and
    the state as a whole in :data:`STATE_PAYLOADS` payloads: a step reads it
    in pages (on Temporal, one query per page), so it need not fit in one,
    but every byte of it stays in the run's history, and a state too large
    for a continue-as-new to carry keeps the run in one execution. The driver
    measures what each superstep would commit and fails the superstep (the
    step that grows the state most) before anything is committed, in process
    as on Temporal. Sizes are measured once per entry written (and once for a
    restored state), never for the whole state per superstep.
    """

    def __init__(self) -> None:
        self._measured: object = None
        self._sizes: dict[str, int] = {}
        self.total = 0

    def sync(self, state: Mapping[str, Envelope]) -> None:
        """Measure ``state`` whole unless it is the state last measured (a restore replaces it)."""
        if state is self._measured:
            return
        self._sizes = {k: state_entry_size(k, v) for k, v in state.items()}
        self.total = sum(self._sizes.values())
        self._measured = state

    def after(self, updates: Mapping[str, Envelope | None]) -> tuple[int, dict[str, int]]:
        """The total once ``updates`` are committed, and each updated key's new size (0: deleted)."""
        new: dict[str, int] = {}
        total, sizes = self.total, self._sizes
        for k, v in updates.items():
            size = new[k] = 0 if v is None else state_entry_size(k, v)
            total += size - sizes.get(k, 0)
        return total, new

    def commit(self, new: Mapping[str, int], state: Mapping[str, Envelope]) -> None:
        """Record a commit's sizes (from :meth:`after`); ``state`` is the committed state now."""
        for k, size in new.items():
            self.total += size - self._sizes.pop(k, 0)
            if size:
                self._sizes[k] = size
        self._measured = state

    def error(
        self, total: int, limit: int, new: Mapping[str, int], writers: Mapping[str, list[str]], *, executor_id: str
    ) -> PayloadTooLargeError:
        """The error for a superstep whose commit would take the state to ``total`` bytes, over ``limit``."""
        written = sorted(((size, k) for k, size in new.items() if size), key=_largest_first)
        named = ", ".join(
            f"{_key(k)} ({size:,} bytes, by {', '.join(repr(w) for w in writers.get(k, [])) or 'a reducer'})"
            for size, k in written[:_LISTED]
        )
        others = sorted(((size, k) for k, size in self._sizes.items() if k not in new), key=_largest_first)
        kept = ", ".join(f"{_key(k)} ({size:,} bytes)" for size, k in others[:_LISTED])
        what = "the run's committed state"
        return PayloadTooLargeError(
            f"executor {executor_id!r}: {what} would be {total:,} bytes as JSON, over its limit of "
            f"{limit:,} bytes: it writes state {named}"
            + (f", beside {kept}" if kept else "")
            + "; the state as a whole is bounded because all of it stays in the run's history (and a run that "
            f"continues as new carries it); the superstep is not committed; {GUIDANCE}",
            what=what,
            size=total,
            limit=limit,
            executor_id=executor_id,
        )


@dataclass(frozen=True, slots=True)
class CommitRefused:
    """A superstep's commit that would take the committed state past its limit: nothing of it may commit.

    Attributes:
        blamed: The index, in task order, of the step blamed: the one whose
            writes are largest (the first on a tie).
        error: What it is reported failed with, naming the keys written and
            their sizes, and the largest keys kept.
    """

    blamed: int
    error: PayloadTooLargeError


class RunLimits:
    """The limits the driver keeps for one run: each step's input, the committed state as a whole, its outputs.

    Every value is measured where it is made (``check_step_result``,
    ``check_payload``); what only adds up at the driver is checked here, once
    for every host: a step input that combines several values, the state a
    commit leaves, and the outputs a Temporal run's result carries.

    Args:
        engine: The run's engine, at a boundary (its outputs so far are counted).
        payload_limit: Most bytes one step input or the run's outputs may take
            as JSON; called only when a value is big enough to need it (in
            process it reads the environment, which may be invalid).
        limit_state: Refuse a commit that would take the committed state past
            ``state_limit``; off only for Temporal runs recorded before the limit.
        state_limit: Most bytes the committed state may take as a whole;
            by default :data:`STATE_PAYLOADS` times ``payload_limit``.
        release_outputs: Whether outputs adding up past ``payload_limit``
            release the oldest (otherwise they fail the run); asked only then.
    """

    def __init__(
        self,
        engine: Engine,
        payload_limit: Callable[[], int],
        *,
        limit_state: bool = True,
        state_limit: Callable[[], int] | None = None,
        release_outputs: Callable[[], bool] = lambda: True,
    ) -> None:
        self.payload_limit = payload_limit
        self.limit_state = limit_state
        self.state_limit = state_limit or (lambda: STATE_PAYLOADS * payload_limit())
        self.release_outputs = release_outputs
        self.restart(engine)

    def restart(self, engine: Engine) -> None:
        """Measure the run again from ``engine`` (its state and outputs changed outside a commit: an interruption)."""
        self._state_sizes = StateSizes()
        self._outputs_size = sum(json_size(o.value.data) for o in engine.outputs)

    def oversized_inputs(self, tasks: Sequence[StepTask]) -> list[tuple[StepTask, WorkflowError]]:
        """The steps whose input cannot be one payload, each with its error (most supersteps: none).

        Each value was measured where it was made; only inputs that combine
        several (a fan-in, a request with its response) or came from outside
        can add up past the limit (and Temporal would refuse the command and
        retry the workflow task for ever).
        """
        too_large: list[tuple[StepTask, WorkflowError]] = []
        for t in tasks:
            if not input_may_exceed(t):
                continue
            try:
                check_step_input(t, limit=self.payload_limit())
            except WorkflowError as error:  # too large, or (in process) an invalid limit in the environment
                too_large.append((t, error))
        return too_large

    def commit_sizes(
        self,
        state: Mapping[str, Envelope],
        tasks: Sequence[StepTask],
        results: Sequence[StepResult],
        updates: Mapping[str, Envelope | None],
    ) -> dict[str, int] | CommitRefused:
        """Each updated key's size once committed, or the refusal of a commit the state as a whole could not take.

        A commit that shrinks the state always passes (a state over the limit
        can be cut down). Give the sizes to :meth:`committed` once it is made.
        """
        sizes = self._state_sizes
        sizes.sync(state)
        total, new = sizes.after(updates)
        if total < MIN_MAX_PAYLOAD_BYTES or total <= sizes.total:
            return new
        limit = self.state_limit()
        if total <= limit:
            return new
        writers: dict[str, list[str]] = {}
        own: list[int] = []
        for t, r in zip(tasks, results, strict=True):
            keys = {w.key for w in r.writes}
            own.append(sum(new.get(k, 0) for k in keys))
            for k in sorted(keys):
                if t.executor_id not in writers.setdefault(k, []):
                    writers[k].append(t.executor_id)
        blamed = max(range(len(tasks)), key=lambda i: (own[i], -i))
        return CommitRefused(blamed, sizes.error(total, limit, new, writers, executor_id=tasks[blamed].executor_id))

    def committed(self, new_sizes: dict[str, int], state: Mapping[str, Envelope]) -> None:
        """The commit :meth:`commit_sizes` measured was made: ``state`` is the state it left."""
        self._state_sizes.commit(new_sizes, state)

    def outputs_committed(self, engine: Engine, outputs: Sequence[Output], superstep: int) -> None:
        """Keep the run's outputs within one payload: a Temporal run's result carries them all.

        Past that, the oldest are released (``Engine.release_outputs``): each
        was emitted as an ``output`` event when it was committed, which is how
        a caller of a long run (an agent conversation, a turn per message)
        receives them, and ``get_outputs()`` of a ``run()`` call in process
        reads those events. Hosts that must keep the older rule (runs recorded
        before it, on Temporal) pass ``release_outputs=False``: the run then
        fails with ``RunTooLargeError``.

        Raises:
            RunTooLargeError: the outputs do not fit and may not be released.
        """
        for out in outputs:
            self._outputs_size += json_size(out.value.data)
        if self._outputs_size < MIN_MAX_PAYLOAD_BYTES or not outputs:
            return
        limit = self.payload_limit()
        if self._outputs_size <= limit:
            return
        if self.release_outputs():
            size, release = self._outputs_size, 0
            while size > limit and release < len(engine.outputs) - 1:  # the newest always stays
                size -= json_size(engine.outputs[release].value.data)
                release += 1
            engine.release_outputs(release)
            self._outputs_size = size
            return
        out = outputs[-1]
        raise RunTooLargeError(
            f"executor {out.executor_id!r}: the run's outputs add up to {self._outputs_size:,} bytes as "
            f"JSON, over the payload limit of {limit:,} bytes, and the run's result carries "
            f"every output; yield smaller outputs, or {GUIDANCE}",
            superstep=superstep,
            executor_id=out.executor_id,
        )


TRUNCATED_KEY = "temporal_workflows.truncated"
"""The entry a truncated ``state`` query answer ends with, saying what it leaves out."""


def truncated_state(state: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """``state`` (key → JSON value) as a query answers it: whole if it fits in ``limit`` bytes, else cut.

    A query's answer is one payload, and the SDK fails a query whose answer
    is larger (``Blob data size exceeds limit``), so the caller learns
    nothing. Cut, the answer keeps keys in order while they fit and ends with
    a :data:`TRUNCATED_KEY` entry naming how many keys (and bytes) it leaves
    out and the largest of them.
    """
    sizes = {k: json_size(k) + json_size(v) + 2 for k, v in state.items()}
    if sum(sizes.values()) <= limit:
        return dict(state)
    room = limit - 4096  # the note
    kept: dict[str, Any] = {}
    left: list[tuple[int, str]] = []
    for k, v in state.items():
        if not left and sizes[k] <= room:
            kept[k] = v
            room -= sizes[k]
        else:
            left.append((sizes[k], k))
    largest = ", ".join(f"{_key(k)} ({size:,} bytes)" for size, k in sorted(left, key=_largest_first)[:_LISTED])
    kept[TRUNCATED_KEY] = (
        f"{len(left)} of {len(state)} state keys ({sum(size for size, _ in left):,} bytes as JSON) are left out: "
        f"the answer must fit in one payload of {limit:,} bytes; the largest left out: {largest}"
    )
    return kept


OMITTED_KEY = "request_omitted"
"""The field that says, in a ``pending_requests`` answer cut to fit, why a request's ``data`` is ``None``."""


def truncated_requests(requests: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Open requests as a query answers them: whole if they fit in ``limit`` bytes together, else the largest cut.

    Each request fits in one payload (it was a step's result), but several
    together need not. Cut, every request is still listed with its id,
    executor, types and response schema, so it can be answered; the data of
    the largest is left out (``data`` is ``None``) with an
    :data:`OMITTED_KEY` note giving its size, until the answer fits.
    """
    sizes = [json_size(r) for r in requests]
    total = sum(sizes) + len(requests) + 2
    if total <= limit:
        return requests
    out = list(requests)
    for i in sorted(range(len(out)), key=lambda i: (-sizes[i], i)):
        if total <= limit:
            break
        data = json_size(out[i].get("data"))
        out[i] = {
            **out[i],
            "data": None,
            "data_type": None,
            OMITTED_KEY: f"the request's data ({data:,} bytes as JSON) is left out: the open requests together pass "
            f"one query answer ({limit:,} bytes); answer it by its request_id and response_schema",
        }
        total += json_size(out[i]) - sizes[i]
    return out
