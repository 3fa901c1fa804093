"""The checkpoint: the engine at a superstep boundary, as JSON (Agent Framework's ``WorkflowCheckpoint``).

A checkpoint is JSON (a pydantic model), never a pickle, so it can be read by
other tools and loaded without running code from the file. Every checkpoint
carries its run id, and storage lookups take one, so runs that share a store
stay isolated.

The engine makes and reads checkpoints (the driver's hosts save them, a
sub-workflow's child is carried in one), so the form lives here, with the
engine; the stores that keep checkpoints, and their contract, are
``_checkpoints/`` above it, which imports this module (never the reverse).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import BaseModel, ConfigDict, field_validator

from temporal_workflows._engine.machine import (
    EXECUTOR_STATE_PREFIX,
    EngineSnapshot,
    Output,
    PendingRequest,
    RoutedMessage,
)
from temporal_workflows._engine.reporting import request_event
from temporal_workflows._engine.serde import Envelope, decode
from temporal_workflows._errors import GraphSignatureMismatchError
from temporal_workflows._events import RequestInfoEvent

__all__ = [
    "CheckpointId",
    "WorkflowCheckpoint",
    "check_signature",
    "checkpoint_of",
    "iso_timestamp",
]

if TYPE_CHECKING:
    from temporal_workflows._engine.machine import Engine, Topology

_new = object.__new__
_set_attr = object.__setattr__

CheckpointId: TypeAlias = str
"""Opaque checkpoint id; compare and store it, never parse it."""


def iso_timestamp(value: datetime | str) -> str:
    """A checkpoint's time as Agent Framework gives it (ISO 8601, UTC), in one fixed-width form.

    One form (always microseconds, always ``+00:00``) makes the text sort in
    time order, which the stores rely on.
    """
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    if when.tzinfo is UTC:  # a host's clock (``datetime.now(UTC)``, workflow time): already in the one form
        return _utc_text(when)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds")


_utc_second: tuple[tuple[int, ...], str] = ((), "")
"""The last second :func:`_utc_text` formatted, and its text up to the seconds."""


def _utc_text(when: datetime) -> str:
    """``when.isoformat(timespec="microseconds")`` of a UTC time, the second's part formatted once per second.

    A checkpoint per superstep stamps many checkpoints within one second;
    ``isoformat`` with a ``timespec`` took a visible part of one's cost.
    """
    global _utc_second
    second = (when.second, when.minute, when.hour, when.day, when.month, when.year)
    kept, head = _utc_second
    if second != kept:
        head = when.replace(microsecond=0, tzinfo=None).isoformat()
        _utc_second = (second, head)
    return f"{head}.{when.microsecond:06d}+00:00"


class WorkflowCheckpoint(BaseModel):
    """Everything needed to continue a run exactly where a superstep boundary left it.

    Field names follow Agent Framework's ``WorkflowCheckpoint``, and so do
    the types a user reads: ``timestamp`` is an ISO 8601 string (UTC;
    :attr:`created_at` gives the ``datetime``), ``iteration_count`` is the
    superstep it was taken after (0: before the first). ``run_id`` scopes it
    to one run and ``fan_in_buffers``/``responses`` make the snapshot
    complete. Executors' checkpoint state (what their ``on_checkpoint_save``
    returned) is in ``state`` under reserved keys; :attr:`executor_states`
    reads it.
    """

    model_config = ConfigDict(frozen=True)

    checkpoint_id: CheckpointId
    workflow_name: str | None
    run_id: str
    graph_signature_hash: str
    previous_checkpoint_id: CheckpointId | None = None
    timestamp: str
    superstep: int
    iterations: int = 0
    state: dict[str, Envelope]
    messages: list[RoutedMessage]
    fan_in_buffers: dict[str, dict[str, list[Envelope]]] = {}
    pending_requests: dict[str, PendingRequest] = {}
    responses: list[tuple[str, Envelope]] = []
    outputs: list[Output] = []
    outputs_released: int = 0
    metadata: dict[str, Any] = {}
    version: int = 1

    @field_validator("timestamp", mode="before")
    @classmethod
    def _iso(cls, value: Any) -> Any:
        return iso_timestamp(value) if isinstance(value, (datetime, str)) else value

    @property
    def iteration_count(self) -> int:
        """Agent Framework's name for ``superstep``."""
        return self.superstep

    @property
    def created_at(self) -> datetime:
        """``timestamp`` as a ``datetime`` (UTC)."""
        return datetime.fromisoformat(self.timestamp)

    @property
    def executor_states(self) -> dict[str, dict[str, Any]]:
        """Each executor's checkpoint state, by executor id (MAF keeps these in ``state["_executor_state"]``)."""
        prefix = EXECUTOR_STATE_PREFIX
        return {
            k[len(prefix) : -1]: decode(v) for k, v in self.state.items() if k.startswith(prefix) and k.endswith("/")
        }

    @property
    def pending_request_info_events(self) -> dict[str, RequestInfoEvent]:
        """Agent Framework's name: the open requests, as the events that announced them."""
        out: dict[str, RequestInfoEvent] = {}
        answered = {rid for rid, _ in self.responses}
        for rid, req in self.pending_requests.items():
            if rid in answered:
                continue
            event = request_event(req)
            out[rid] = event.model_copy(update={"data": decode(Envelope(event.data_type, event.data))})
        return out

    @classmethod
    def from_snapshot(
        cls,
        snap: EngineSnapshot,
        *,
        checkpoint_id: str,
        workflow_name: str | None,
        run_id: str,
        graph_signature_hash: str,
        previous_checkpoint_id: str | None,
        timestamp: datetime | str,
        metadata: dict[str, Any] | None = None,
    ) -> WorkflowCheckpoint:
        parts = dict(vars(snap))
        for name in ("pending", "responses", "outputs"):
            parts[name] = list(parts[name])
        parts["fan_in_buffers"] = {g: {s: list(m) for s, m in b.items()} for g, b in snap.fan_in_buffers.items()}
        return cls._of_parts(
            parts,
            checkpoint_id=checkpoint_id,
            workflow_name=workflow_name,
            run_id=run_id,
            graph_signature_hash=graph_signature_hash,
            previous_checkpoint_id=previous_checkpoint_id,
            timestamp=timestamp,
            metadata=metadata,
        )

    @classmethod
    def _of_parts(
        cls,
        parts: dict[str, Any],
        *,
        checkpoint_id: str,
        workflow_name: str | None,
        run_id: str,
        graph_signature_hash: str,
        previous_checkpoint_id: str | None,
        timestamp: datetime | str,
        metadata: dict[str, Any] | None,
    ) -> WorkflowCheckpoint:
        """The checkpoint of a snapshot's fields (``Engine.snapshot_fields``), its sequences already lists of its own.

        Built as ``model_construct`` builds it: the snapshot is already valid, and validating it again would
        make every checkpoint cost O(state) instead of O(keys). Directly (every field given, in declaration
        order, ``model_fields_set`` all of them): in process a checkpoint per superstep, and a generic
        construct's merging of defaults was a visible part of one's cost.
        """
        values: dict[str, Any] = {
            "checkpoint_id": checkpoint_id,
            "workflow_name": workflow_name,
            "run_id": run_id,
            "graph_signature_hash": graph_signature_hash,
            "previous_checkpoint_id": previous_checkpoint_id,
            "timestamp": iso_timestamp(timestamp),
            "superstep": parts["superstep"],
            "iterations": parts["iterations"],
            "state": parts["state"],
            "messages": parts["pending"],
            "fan_in_buffers": parts["fan_in_buffers"],
            "pending_requests": parts["pending_requests"],
            "responses": parts["responses"],
            "outputs": parts["outputs"],
            "outputs_released": parts["outputs_released"],
            "metadata": metadata or {},
            "version": 1,
        }
        if cls is not WorkflowCheckpoint:  # a subclass may have fields of its own: pydantic's way
            return cls.model_construct(**values)
        cp = _new(cls)
        _set_attr(cp, "__dict__", values)
        _set_attr(cp, "__pydantic_fields_set__", _EVERY_FIELD)
        _set_attr(cp, "__pydantic_extra__", None)
        _set_attr(cp, "__pydantic_private__", None)
        return cp

    def to_snapshot(self) -> EngineSnapshot:
        return EngineSnapshot(
            superstep=self.superstep,
            iterations=self.iterations,
            state=dict(self.state),
            pending=tuple(self.messages),
            fan_in_buffers={g: {s: tuple(m) for s, m in b.items()} for g, b in self.fan_in_buffers.items()},
            pending_requests=dict(self.pending_requests),
            responses=tuple((r, e) for r, e in self.responses),
            outputs=tuple(self.outputs),
            outputs_released=self.outputs_released,
        )


_EVERY_FIELD: set[str] = set(WorkflowCheckpoint.model_fields)
"""The ``model_fields_set`` of every checkpoint a host makes (all fields given): one set, shared.

A set per checkpoint (a checkpoint per superstep in process) was a kilobyte
each. Nothing changes it: the model is frozen, and ``model_copy`` gives the
copy a set of its own before adding to it.
"""


def checkpoint_of(
    engine: Engine,
    *,
    checkpoint_id: str,
    run_id: str,
    previous_checkpoint_id: str | None,
    timestamp: datetime,
    metadata: dict[str, Any] | None = None,
) -> WorkflowCheckpoint:
    """The engine at this boundary as a checkpoint (both graph hosts, and continue-as-new)."""
    # The snapshot's fields as lists, straight into the checkpoint (no EngineSnapshot made and copied again).
    return WorkflowCheckpoint._of_parts(
        engine.snapshot_fields(list),
        checkpoint_id=checkpoint_id,
        workflow_name=engine.topology.name or "",
        run_id=run_id,
        graph_signature_hash=engine.topology.signature_hash,
        previous_checkpoint_id=previous_checkpoint_id,
        timestamp=timestamp,
        metadata=metadata or {},
    )


def check_signature(cp: WorkflowCheckpoint, topology: Topology, *, allow_mismatch: bool = False) -> None:
    """Refuse to restore a checkpoint taken under another graph.

    Raises:
        GraphSignatureMismatchError: naming both signatures.
    """
    if cp.graph_signature_hash == topology.signature_hash or allow_mismatch:
        return
    raise GraphSignatureMismatchError(
        f"checkpoint {cp.checkpoint_id!r} was taken under graph signature {cp.graph_signature_hash[:12]}…, "
        f"but graph {topology.name!r} has signature {topology.signature_hash[:12]}…; the graph changed "
        "(pass allow_signature_mismatch=True to restore it anyway)"
    )
