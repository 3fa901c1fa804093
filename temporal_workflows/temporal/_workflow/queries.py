"""The queries of ``GraphWorkflow``: what a client reads of a run (state, status, graph, checkpoints, requests).

Queries change nothing and issue no command; they answer from the run's parts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio import workflow

# No imports are passed through a sandbox: the workflow runs unsandboxed, and the CI guard that
# replays it in the sandbox must see one consistent copy of every module it uses.
from temporal_workflows._checkpoints.base import WorkflowCheckpoint
from temporal_workflows._engine.driver import pending_request_event
from temporal_workflows._engine.limits import (
    truncated_requests,
    truncated_state,
)
from temporal_workflows._engine.machine import (
    PendingRequest,
    shared_part,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal._protocol import (
    MAX_TURN_KEYS,
    QUERY_CHECKPOINT,
    QUERY_CHECKPOINTS,
    QUERY_COMMITTED_STATE,
    QUERY_COMMITTED_STATE_PAGE,
    QUERY_OUTSIDE_INPUT,
    QUERY_PENDING_REQUESTS,
    QUERY_STATE,
    QUERY_STATUS,
    QUERY_TOPOLOGY,
    QUERY_TURNS,
    SIGNATURE_PREFIX,
    StatePage,
    StateSnapshot,
    state_page_text,
)
from temporal_workflows.temporal._workflow.handler_base import HandlerBase

__all__ = ["QueryHandlers"]


def _request_json(req: PendingRequest) -> dict[str, Any]:
    """A pending request's JSON: the one form (``pending_request_event``), as the query and the result give it."""
    out: dict[str, Any] = pending_request_event(req).model_dump(mode="json")
    return out


class QueryHandlers(HandlerBase):
    """The run's queries (a mixin of ``GraphWorkflow``)."""

    @workflow.query(name=QUERY_COMMITTED_STATE)
    def committed_state(self) -> StateSnapshot:
        engine = self.parts.engine
        version = self.parts.steps.state_version if self.parts.steps else "0"
        return StateSnapshot(version, dict(engine.state) if engine else {})

    @workflow.query(name=QUERY_COMMITTED_STATE_PAGE)
    def committed_state_page(self, offset: int) -> StatePage:
        """The committed state's JSON text from ``offset``, at most half a payload of it (escaped again in the
        answer, it still fits in one): a state of several payloads reaches a step in several queries."""
        engine = self.parts.engine
        version = self.parts.steps.state_version if self.parts.steps else "0"
        if self.parts.state_text is None or self.parts.state_text[0] != version:
            # Made once per version, kept for the other pages (and the other steps) of that version.
            self.parts.state_text = (version, state_page_text(engine.state if engine else {}))
        text = self.parts.state_text[1]
        page = max(4096, self.parts.payload_limit // 2 - 4096)
        start = max(0, offset)
        return StatePage(version, len(text), text[start : start + page])

    @workflow.query(name=QUERY_OUTSIDE_INPUT)
    def outside_input(self, ref: str) -> Envelope | None:
        """Large outside input the ``validate`` activity checks by reference (``ValidateInput.ref``)."""
        return self.parts.admission.held.get(ref)

    @workflow.query(name=QUERY_TURNS)
    def turns(self, keys: list[str]) -> dict[str, dict[str, Any] | None]:
        """Where the run is with input a client follows: taken, and the stream offset its turn ended at."""
        if not isinstance(keys, list) or len(keys) > MAX_TURN_KEYS or not all(isinstance(k, str) for k in keys):
            raise ValueError(f"{QUERY_TURNS} takes a list of at most {MAX_TURN_KEYS} keys")
        return self.parts.admission.inbox.turns.where(keys)

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> dict[str, Any]:
        """Where the run is: status, superstep, in-flight executors, requests, outputs so far, warnings."""
        engine, board, cps = self.parts.engine, self.parts.board, self.parts.checkpoints
        return {
            "status": board.status,
            "superstep": engine.superstep if engine else 0,
            "in_flight": list(self.parts.steps.in_flight) if self.parts.steps else [],
            "pending_requests": len(engine.pending_requests) if engine else 0,
            "outputs": [o.value.data for o in engine.outputs] if engine else [],
            "outputs_released": engine.outputs_released if engine else 0,
            "keep_alive": self.parts.keep_alive,
            # Asked to close: it takes no new messages and completes once no request waits for an answer.
            "closing": self.parts.closing and not board.closed,
            "concurrent_input": self.parts.input.concurrent_input or "enqueue",
            "warnings": list(board.warnings),
            "error": board.error,
            "last_checkpoint_id": cps.last_id,
            "checkpoints": len(cps.listed),
            "resets": self.parts.epoch,
            "continued_as_new": self.parts.segment,
            "lineage": self.parts.lineage,
            # The run's graph version: a worker without Worker Versioning compares its own at start-up.
            # Before it is pinned, the signature the run waits for (its starter's), if it names one.
            "graph_signature": self.parts.topology.signature_hash[:SIGNATURE_PREFIX]
            if self.parts.topology
            else self.parts.input.graph_signature,
            # "starter": the graph its start input named; "first worker": none was named (``temporal workflow
            # start``), so the first worker that took it chose.
            "graph_signature_from": self.parts.signature_from,
        }

    @workflow.query(name=QUERY_TOPOLOGY)
    def topology(self) -> dict[str, Any]:
        """The run's graph as pinned, and its picture as data (``shape``) or a ``note`` saying why there is none.

        Answered from what the run recorded when it started (the topology activity's result), never from the
        worker's current graph, so it is the graph this run runs; kept once per run, not per query.
        """
        topology, shape = self.parts.topology, self.parts.shape
        note = self.parts.shape_note
        if topology is None:
            note = "the run has not pinned its graph yet"
        elif shape is None and note is None:
            note = "this run was started by a worker that kept no picture of its graph (an earlier version)"
        return {
            "graph": topology.name if topology else workflow.info().workflow_type,
            "start_executor": topology.start_executor_id if topology else None,
            "executor_ids": list(topology.executor_ids) if topology else [],
            "subworkflows": dict(topology.subworkflows) if topology else {},
            "shape": dataclasses.asdict(shape) if shape is not None else None,
            "note": note,
        }

    @workflow.query(name=QUERY_CHECKPOINTS)
    def checkpoints(self) -> list[dict[str, Any]]:
        """This workflow's checkpoints, oldest first: id, superstep, label, created time, parent id."""
        return [dict(c) for c in self.parts.checkpoints.listed]

    @workflow.query(name=QUERY_CHECKPOINT)
    def get_checkpoint(self, checkpoint_id: str) -> WorkflowCheckpoint | None:
        """A history-only checkpoint whole (``None`` if this run does not hold it)."""
        return self.parts.checkpoints.kept.get(checkpoint_id)

    @workflow.query(name=QUERY_PENDING_REQUESTS)
    def pending_requests(self) -> list[dict[str, Any]]:
        """Open requests (``RequestInfoEvent`` JSON, with the schema a response must match), oldest first;
        the largest cut if need be."""
        engine = self.parts.engine
        if engine is None:
            return []
        pending = [
            _request_json(r)
            for r in engine.pending_requests.values()
            if self.parts.admission.inbox.is_open(r.request_id)
        ]
        return truncated_requests(pending, self.parts.payload_limit)

    @workflow.query(name=QUERY_STATE)
    def state(self) -> dict[str, Any]:
        """Committed shared state as JSON; cut, with a note, where it would not fit in one payload."""
        engine = self.parts.engine
        if engine is None:
            return {}
        shared = {k: v.data for k, v in shared_part(engine.state).items()}
        return truncated_state(shared, self.parts.payload_limit)
