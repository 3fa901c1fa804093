"""The in-process host: drives the engine with asyncio, for tests and notebooks.

It runs every task of a superstep concurrently with ``asyncio.gather``, hands
the results to the engine in task order, runs callable reducers, saves
checkpoints and turns it all into events. The Temporal workflow does the same
with activities instead of coroutines; the engine between them is shared.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from ._checkpoint import CheckpointStorage, WorkflowCheckpoint
from ._context import run_step
from ._engine import EXECUTOR_STATE_PREFIX, Engine, PendingRequest, StepResult, StepTask
from ._errors import (
    ExecutorFailedError,
    GraphSignatureMismatchError,
    RequestTimeoutError,
    UndeliverableMessageError,
    UnknownRequestError,
    WorkflowError,
    WorkflowRunError,
    describe,
)
from ._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowRunState,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
)
from ._graph import Graph
from ._limits import check_step_input, input_may_exceed, max_payload_bytes
from ._serde import Envelope, decode, encode

__all__ = ["LocalRunner", "request_event"]

MISSING: Any = object()


def request_event(req: PendingRequest) -> RequestInfoEvent:
    return RequestInfoEvent(
        request_id=req.request_id,
        source_executor_id=req.executor_id,
        data=decode(req.data),
        response_type=req.response_type,
        response_schema=req.response_schema,
        timeout=req.timeout,
    )


def shared_state(state: Mapping[str, Envelope]) -> dict[str, Any]:
    """Decoded committed state, without executor-private keys."""
    return {k: decode(v) for k, v in state.items() if not k.startswith(EXECUTOR_STATE_PREFIX)}


class LocalRunner:
    """One in-process run of a graph (kept between ``run()`` calls, like Agent Framework's)."""

    def __init__(self, graph: Graph, *, checkpoint_every: int = 1) -> None:
        self.graph = graph
        self.checkpoint_every = checkpoint_every
        self.engine: Engine | None = None
        self.run_id: str | None = None
        self.failed: WorkflowRunError | None = None
        self.last_checkpoint_id: str | None = None
        self.running = False

    def reset(self) -> None:
        if self.running:
            raise WorkflowError("cannot reset a workflow while it is running")
        self.engine = None
        self.run_id = None
        self.failed = None
        self.last_checkpoint_id = None

    @property
    def state(self) -> WorkflowRunState:
        if self.failed is not None:
            return WorkflowRunState.FAILED
        if self.engine is None:
            return WorkflowRunState.IDLE
        return self.engine.run_state()

    def _validate_responses(self, engine: Engine, responses: Mapping[str, Any]) -> dict[str, Envelope]:
        """Check every response before accepting any, so a bad one changes nothing."""
        accepted: dict[str, Envelope] = {}
        for rid, value in responses.items():
            req = engine.pending_requests.get(rid)
            if req is None:
                raise UnknownRequestError(rid, list(engine.pending_requests))
            accepted[rid] = self.graph.validate_response(req, value)
        return accepted

    async def _restore(
        self, checkpoint_id: str, storage: CheckpointStorage | None
    ) -> tuple[Engine, WorkflowCheckpoint]:
        if storage is None:
            raise WorkflowError(
                "resuming from a checkpoint needs a checkpoint storage: pass checkpoint_storage= to run() "
                "or to WorkflowBuilder"
            )
        cp = await storage.load(checkpoint_id)
        if cp.graph_signature_hash != self.graph.topology.signature_hash:
            raise GraphSignatureMismatchError(
                f"checkpoint {checkpoint_id!r} was taken under graph signature {cp.graph_signature_hash[:12]}…, "
                f"but this graph's signature is {self.graph.topology.signature_hash[:12]}…; the graph changed"
            )
        return Engine(self.graph.topology, cp.to_snapshot()), cp

    async def events(
        self,
        message: Any = MISSING,
        *,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
    ) -> AsyncIterator[WorkflowEvent]:
        """Run until the graph is idle, yielding events as they happen."""
        if self.running:
            raise WorkflowError("this workflow is already running; await the current run() first")
        if message is not MISSING and checkpoint_id is not None:
            raise WorkflowError("pass either a start message or checkpoint_id, not both")
        if message is MISSING and checkpoint_id is None and responses is None:
            raise WorkflowError("run() needs a start message, responses=, or checkpoint_id=")
        self.running = True
        try:
            # Nothing about the current run changes until the new input (responses included) is accepted.
            run_id, last_checkpoint_id, new_run = self.run_id, self.last_checkpoint_id, False
            if checkpoint_id is not None:
                engine, cp = await self._restore(checkpoint_id, checkpoint_storage)
                run_id, last_checkpoint_id = cp.run_id, cp.checkpoint_id
                # Deadlines are restored as they were (as on Temporal): a request
                # already overdue times out now, before any response is matched.
                try:
                    engine.expire_due(time.time())
                except RequestTimeoutError as e:
                    self.engine, self.run_id, self.last_checkpoint_id = engine, run_id, last_checkpoint_id
                    async for ev in self._fail(e, engine):
                        yield ev
            elif message is not MISSING:
                start = self.graph.executors[self.graph.topology.start_executor_id]
                env = encode(message, what="start message")
                if (start.coerce(message) if env.type is None else start.find_handler(message)) is None:
                    raise UndeliverableMessageError(
                        f"start executor {start.id!r} has no handler for {describe(message)}",
                        source_id="<input>",
                        type_name=describe(message),
                        targets=[start.id],
                    )
                engine = Engine(self.graph.topology)
                engine.start(env)
                run_id, last_checkpoint_id, new_run = uuid.uuid4().hex, None, True
            else:
                if self.failed is not None:
                    raise WorkflowError(f"the run failed ({self.failed}); start a new run or resume from a checkpoint")
                if self.engine is None:
                    raise WorkflowError("no run to send responses to; start one with run(message)")
                # Work on a copy, adopted only once the new input is accepted: a
                # refused response must leave the run exactly as it was.
                engine = Engine(self.graph.topology, self.engine.snapshot())
                # Timers do not run between calls: requests past their deadline
                # time out now, before any response is matched (as on Temporal,
                # where the timer fires first and a late answer finds no request).
                # ``run(responses={})`` delivers due timeouts and nothing else.
                try:
                    engine.expire_due(time.time())
                except RequestTimeoutError as e:
                    self.engine = engine
                    async for ev in self._fail(e, engine):
                        yield ev
            if responses:
                accepted = self._validate_responses(engine, responses)
                for rid, env in accepted.items():
                    engine.respond(rid, env)
            self.failed = None  # (a failed run took no responses above)
            self.engine, self.run_id, self.last_checkpoint_id = engine, run_id, last_checkpoint_id
            if new_run:
                yield WorkflowStartedEvent(run_id=run_id)
            if checkpoint_id is not None:
                # A run restored from a checkpoint says again what it is waiting for.
                for req in engine.pending_requests.values():
                    yield request_event(req)
            async for ev in self._loop(engine, checkpoint_storage):
                yield ev
        finally:
            self.running = False

    async def _run_task(self, task: StepTask, state: Mapping[str, Envelope]) -> StepResult | BaseException:
        try:
            # As on Temporal, where the input is one activity payload.
            if input_may_exceed(task):
                check_step_input(task, limit=max_payload_bytes())
            return await run_step(self.graph, task, state, run_id=self.run_id or "")
        except Exception as e:
            return e

    async def _loop(self, engine: Engine, storage: CheckpointStorage | None) -> AsyncIterator[WorkflowEvent]:
        yield WorkflowStatusEvent(state=engine.run_state())
        while engine.has_work():
            try:
                tasks = engine.begin_superstep()
            except WorkflowRunError as e:
                async for ev in self._fail(e, engine):
                    yield ev
                return
            step = tasks[0].superstep
            yield SuperStepStartedEvent(superstep=step, executor_ids=[t.executor_id for t in tasks])
            for t in tasks:
                yield ExecutorInvokedEvent(executor_id=t.executor_id, superstep=step)
            state = engine.state
            if len(tasks) == 1:
                outcomes = [await self._run_task(tasks[0], state)]
            else:
                outcomes = list(await asyncio.gather(*(self._run_task(t, state) for t in tasks)))
            failures = [(t, o) for t, o in zip(tasks, outcomes, strict=True) if isinstance(o, BaseException)]
            if failures:
                engine.abort_superstep()
                for t, err in failures:
                    yield ExecutorFailedEvent(
                        executor_id=t.executor_id, superstep=step, error_type=type(err).__name__, error=str(err)
                    )
                first_task, first_err = failures[0]
                async for ev in self._fail(ExecutorFailedError(first_task.executor_id, step, first_err), engine):
                    yield ev
                return
            results: list[StepResult] = [o for o in outcomes if isinstance(o, StepResult)]
            for t, r in zip(tasks, results, strict=True):
                for custom in r.events:
                    yield decode(custom)
                yield ExecutorCompletedEvent(executor_id=t.executor_id, superstep=step)
            try:
                plan = engine.prepare_commit(results)
                reduced = {r.key: self.graph.reduce(r.key, r.committed, list(r.writes)) for r in plan.reductions}
                engine.apply_commit(plan, reduced, now=time.time())
            except WorkflowRunError as e:
                engine.abort_superstep()
                async for ev in self._fail(e, engine):
                    yield ev
                return
            except Exception as e:
                engine.abort_superstep()
                err = WorkflowRunError(f"commit of superstep {step} failed: {e}", superstep=step)
                err.__cause__ = e
                async for ev in self._fail(err, engine):
                    yield ev
                return
            for out in plan.outputs:
                yield WorkflowOutputEvent(executor_id=out.executor_id, data=decode(out.value))
            for req in plan.requests:
                yield request_event(req)
            try:
                cp_id = await self._checkpoint(engine, storage)
            except Exception as e:
                # The run cannot go on without the checkpoint it promised; say so in its state too.
                self.failed = WorkflowRunError(
                    f"checkpoint after superstep {step} could not be saved: {e}", superstep=step
                )
                self.failed.__cause__ = e
                raise
            yield SuperStepCompletedEvent(superstep=step, state_keys_written=plan.keys_written, checkpoint_id=cp_id)
        yield WorkflowStatusEvent(state=engine.run_state())

    async def _fail(self, error: WorkflowRunError, engine: Engine) -> AsyncIterator[WorkflowEvent]:
        self.failed = error
        yield WorkflowFailedEvent(
            error_type=type(error).__name__,
            error=str(error),
            executor_id=error.executor_id,
            superstep=error.superstep,
        )
        yield WorkflowStatusEvent(state=WorkflowRunState.FAILED)
        raise error

    async def _checkpoint(self, engine: Engine, storage: CheckpointStorage | None) -> str | None:
        every = self.checkpoint_every
        if storage is None or every <= 0 or engine.superstep % every:
            return None
        cp = WorkflowCheckpoint.from_snapshot(
            engine.snapshot(),
            checkpoint_id=uuid.uuid4().hex,
            workflow_name=self.graph.name,
            run_id=self.run_id or "",
            graph_signature_hash=self.graph.topology.signature_hash,
            previous_checkpoint_id=self.last_checkpoint_id,
            timestamp=datetime.now(UTC),
        )
        # A failed save propagates: the caller must know the checkpoint does not exist.
        cp_id = await storage.save(cp)
        self.last_checkpoint_id = cp_id
        return cp_id
