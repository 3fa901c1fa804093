"""A graph's runs behind an AG-UI endpoint: how a turn's input enters one, and how its events read as AG-UI.

A thread is one keep-alive run of the graph (started streamed, so agents
stream and their updates are the text). A user message goes to the start
executor by the ``deliver`` signal with an id derived from the message id,
signal-with-start (a new thread starts its run in the same call), and
``confirm_delivery`` returns the run's own acceptance or refusal; the run
remembers deliveries across continue-as-new, so a message it has is never
taken twice. Answers go together by the ``submit_responses`` update (all or
none: a refusal leaves the run as it was).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    ResumeEntry,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
)
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._engine.limits import check_payload
from temporal_workflows._errors import DeliveryForgottenError, RunClosedError, WorkflowError
from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowInterruptedEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowRunState,
    WorkflowStatusEvent,
)
from temporal_workflows._graph.checkstart import check_start_message
from temporal_workflows._graph.typecheck import type_name
from temporal_workflows._graph.workflow import Workflow
from temporal_workflows._live import LiveCommittedEvent, LiveEvent, StepRetryEvent
from temporal_workflows.ag_ui._emit import to_json
from temporal_workflows.ag_ui._kinds import (
    APPROVAL_SCHEMA,
    Ask,
    Refusal,
    TurnContext,
)
from temporal_workflows.ag_ui._runs import (
    POLL_COOLDOWN,
    HandleKind,
    StateTranslator,
    failure_code,
    failure_text,
)
from temporal_workflows.temporal._client.client import RawLiveEvent, RunHandle
from temporal_workflows.temporal._client.routing import versioning_override
from temporal_workflows.temporal._client.starting import start_workflow
from temporal_workflows.temporal._protocol import (
    FAILURE_UNKNOWN_DELIVERY,
    QUERY_TURNS,
    SIGNAL_DELIVER,
    SIGNATURE_PREFIX,
    UPDATE_CONFIRM,
    ConfirmInput,
    Delivery,
    RunInput,
    SendInput,
)

__all__ = ["GraphKind", "GraphTranslator", "read_stream"]


async def read_stream(client: Client, workflow_id: str, from_offset: int) -> AsyncIterator[tuple[int, list[Any]]]:
    """A run's event stream from ``from_offset``, item by item with its offset, as ``RunHandle.events()`` reads it
    (live items of superseded attempts dropped); follows continue-as-new; ends after the run closes.

    Through the process's one reader of the run (``RunHandle.events``, ``temporal/_client/feed.py``), so any
    number of AG-UI clients of a run take no more of its update room than one, and a server blip is ridden out.
    """
    handle = RunHandle(client.get_workflow_handle(workflow_id), client)
    stream = handle.events(from_offset=from_offset, poll_cooldown=POLL_COOLDOWN)
    try:
        async for offset, kept in stream.batches(empty=True):
            yield offset, kept
    finally:
        await stream.aclose()


def _agent_update(event: LiveEvent) -> dict[str, Any] | None:
    """An agent's streamed update as JSON (``AgentResponseUpdate``), whether or not its class is importable here."""
    data: Any = event.data
    if isinstance(event, RawLiveEvent) and isinstance(data, dict) and isinstance(data.get("data"), dict):
        data = data["data"]
    if type(event).__name__ != "AgentRunUpdateEvent" and not (
        isinstance(data, dict) and data.get("type") == "agent_response_update"
    ):
        return None
    update = to_json(data)
    return update if isinstance(update, dict) else None


def _approval_answer(request: Any, ask_id: str) -> Any:
    """How a tool approval's resume entry becomes the run's response (Agent Framework's approval response)."""

    def answer(entry: ResumeEntry) -> Any:
        if entry.status == "cancelled":
            approved = False
        else:
            payload = entry.payload
            if isinstance(payload, bool):
                approved = payload
            elif isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
                approved = payload["approved"]
            else:
                raise Refusal(
                    f"resume for interrupt {ask_id!r}: payload.approved: a boolean is required "
                    '(the answer is {"approved": true} or {"approved": false})',
                    "InvalidResponseError",
                )
        response = {k: v for k, v in request.items() if k != "user_input_request"}
        response.update(type="function_approval_response", approved=approved)
        return response

    return answer


def _request_answer(ask_id: str) -> Any:
    def answer(entry: ResumeEntry) -> Any:
        if entry.status == "cancelled":
            raise Refusal(
                f"resume for interrupt {ask_id!r}: this request cannot be cancelled; "
                "answer it (status 'resolved' with its payload)",
                "InvalidResponseError",
            )
        return entry.payload

    return answer


def ask_of(request: RequestInfoEvent, workflow_id: str) -> Ask:
    """A pending request as the interrupt AG-UI shows, with how a resume entry answers it."""
    data = request.data
    metadata: dict[str, Any] = {
        "temporal_workflows": {
            "workflow_id": workflow_id,
            "source_executor_id": request.source_executor_id,
            "response_type": request.response_type,
            "data": to_json(data),
        }
    }
    if isinstance(data, dict) and data.get("type") == "function_approval_request":
        found = data.get("function_call")
        call: dict[str, Any] = found if isinstance(found, dict) else {}
        name = str(call.get("name") or "a tool")
        arguments = call.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(to_json(arguments or {}))
        return Ask(
            id=request.request_id,
            reason="tool_call",
            message=f"Approve {name}({arguments[:400]})?",
            response_schema=dict(APPROVAL_SCHEMA),
            tool_call_id=str(call["call_id"]) if call.get("call_id") else None,
            expires_at=request.deadline,
            metadata=metadata,
            answer=_approval_answer(data, request.request_id),
        )
    shown = json.dumps(to_json(data), ensure_ascii=False)
    if len(shown) > 400:
        shown = shown[:399] + "…"
    return Ask(
        id=request.request_id,
        reason="input_required",
        message=f"{request.source_executor_id} asks for {request.response_type}: {shown}",
        response_schema=request.response_schema or None,
        expires_at=request.deadline,
        metadata=metadata,
        answer=_request_answer(request.request_id),
    )


@dataclass
class _Invocation:
    """One executor invocation of a superstep, from its first sign (a live item, or its invoked event)."""

    key: Hashable
    index: int | None
    invoked: bool = False
    subagent: str | None = None
    asked: list[str] = field(default_factory=list)


_REST = {
    WorkflowRunState.IDLE: "idle",
    WorkflowRunState.IDLE_WITH_PENDING_REQUESTS: "waiting",
    WorkflowRunState.FAILED: "failed",
    WorkflowRunState.CANCELLED: "failed",
}


class GraphTranslator(StateTranslator):
    """A graph run's events as AG-UI (the table in ``docs/ag-ui.md``)."""

    def __init__(self, ctx: TurnContext, mode: str, subworkflows: dict[str, str], kind: GraphKind, client: Client):
        super().__init__(ctx, mode, kind, client)
        self.subworkflows = subworkflows
        self._output_steps: list[int] = []  # the superstep of each of ``outputs``
        self._streamed: set[str] = set()
        self._open: dict[tuple[int, str], list[_Invocation]] = {}
        self._attempts: dict[tuple[int, int, str], int] = {}
        self._invocations = 0
        self._superstep = 0  # the superstep the stream is in (outputs name it: a rollback takes theirs back)

    # -- invocations -------------------------------------------------------------------------------

    def _start(self, superstep: int, executor_id: str, index: int | None, *, invoked: bool) -> _Invocation:
        opened = self._open.setdefault((superstep, executor_id), [])
        if index is not None:
            for inv in opened:
                if inv.index == index:
                    return inv
        elif invoked:
            for inv in opened:
                if not inv.invoked:
                    inv.invoked = True
                    return inv
        self._invocations += 1
        inv = _Invocation(key=(superstep, executor_id, self._invocations), index=index, invoked=invoked)
        opened.append(inv)
        self.em.step_started(inv.key, executor_id)
        child = self.subworkflows.get(executor_id)
        if child is not None:
            inv.subagent = f"{self.ctx.workflow_id}/{executor_id}/{superstep}#{self._invocations}"
            self.em.emit(SubagentStartedEvent(subagent_run_id=inv.subagent, name=child))
        return inv

    def _owners(self, superstep: int, executor_id: str, inv: _Invocation) -> list[Hashable]:
        if inv.index is None:
            return []
        step = (superstep, inv.index, executor_id)
        return [(superstep, inv.index, a) for a in range(1, self._attempts.get(step, 1) + 1)]

    def _finish(self, superstep: int, executor_id: str, failed: ExecutorFailedEvent | None = None) -> None:
        opened = self._open.get((superstep, executor_id), [])
        inv = next((i for i in opened if i.invoked), opened[0] if opened else None)
        if inv is None:
            return
        opened.remove(inv)
        self._end(superstep, executor_id, inv, failed)

    def _end(self, superstep: int, executor_id: str, inv: _Invocation, failed: ExecutorFailedEvent | None) -> None:
        for owner in self._owners(superstep, executor_id, inv):
            self.em.end(owner)
        if inv.subagent is not None:
            if failed is not None:
                self.em.emit(
                    SubagentErrorEvent(subagent_run_id=inv.subagent, message=failed.error, code=failed.error_type)
                )
            elif inv.asked:
                self.em.emit(
                    SubagentFinishedEvent(
                        subagent_run_id=inv.subagent,
                        outcome=SubagentFinishedSuspendedOutcome(interrupt_ids=list(inv.asked)),
                    )
                )
            else:
                self.em.emit(SubagentFinishedEvent(subagent_run_id=inv.subagent))
        self.em.step_finished(inv.key)

    def _end_superstep(self, superstep: int) -> None:
        for (s, executor_id), opened in list(self._open.items()):
            if s <= superstep:
                for inv in opened:
                    self._end(s, executor_id, inv, None)
                del self._open[(s, executor_id)]

    # -- live items --------------------------------------------------------------------------------

    def _live(self, event: LiveEvent) -> None:
        step = (event.superstep, event.index, event.executor_id)
        if isinstance(event, StepRetryEvent):
            before = self._attempts.get(step, 1)
            self._attempts[step] = max(before, event.attempt)
            # What the superseded attempts said is void: taken back, then the new attempt speaks afresh.
            self.em.void([(event.superstep, event.index, a) for a in range(1, event.attempt)])
            self.em.custom("step_retry", {"executor_id": event.executor_id, "attempt": event.attempt})
            return
        self._attempts[step] = max(self._attempts.get(step, 1), event.attempt)
        self._start(event.superstep, event.executor_id, event.index, invoked=False)
        owner = (event.superstep, event.index, event.attempt)
        update = _agent_update(event)
        if update is None:
            value = to_json(event.data if isinstance(event, RawLiveEvent) else event)
            name = (event.event_type if isinstance(event, RawLiveEvent) else None) or event.type
            self.em.custom(str(name), value)
            return
        self._streamed.add(event.executor_id)
        name = update.get("author_name") or event.executor_id
        for content in update.get("contents") or ():
            if not isinstance(content, dict):
                continue
            kind = content.get("type")
            if kind == "text":
                if content.get("text"):
                    tag = {"temporal_workflows": {"executor_id": event.executor_id}}
                    self.em.text(owner, str(content["text"]), name=str(name), metadata=tag)
            elif kind == "text_reasoning":
                if content.get("text"):
                    self.em.reasoning(owner, str(content["text"]))
            elif kind == "function_call":
                arguments = content.get("arguments")
                if not isinstance(arguments, str):
                    arguments = json.dumps(to_json(arguments)) if arguments is not None else ""
                call_id = str(content.get("call_id") or content.get("id") or "")
                if call_id:
                    self.em.tool_call(owner, call_id, str(content.get("name") or ""), arguments)
            elif kind == "function_result":
                call_id = str(content.get("call_id") or "")
                result = content.get("result")
                if call_id:
                    self.em.tool_result(owner, call_id, result if result is not None else "")
            elif kind in ("function_approval_request", "usage"):
                pass  # an approval is the turn's interrupt; usage is not shown
            else:
                self.em.custom("agent_content", {"executor_id": event.executor_id, "content": content})

    # -- one stream item ---------------------------------------------------------------------------

    async def _one(self, offset: int, n: int, event: WorkflowEvent, *, live: bool) -> None:
        em = self.em
        if isinstance(event, WorkflowStatusEvent):
            if event.state in (WorkflowRunState.IN_PROGRESS, WorkflowRunState.IN_PROGRESS_PENDING_REQUESTS):
                self.activated = True
            rest = _REST.get(event.state)
            if rest is not None and self.activated and rest != "failed":
                self.ended = rest  # type: ignore[assignment]
                return
            em.custom("status", {"state": event.state.value})
            return
        if isinstance(event, LiveEvent):
            self._live(event)
            return
        if isinstance(event, ExecutorInvokedEvent):
            self._superstep = event.superstep
            self._start(event.superstep, event.executor_id, None, invoked=True)
            return
        if isinstance(event, SuperStepStartedEvent):
            self._superstep = event.superstep
            em.custom(event.type, event)
            return
        if isinstance(event, (ExecutorCompletedEvent, ExecutorFailedEvent)):
            self._finish(event.superstep, event.executor_id, event if isinstance(event, ExecutorFailedEvent) else None)
            return
        if isinstance(event, WorkflowOutputEvent):
            data = to_json(event.data)
            if isinstance(data, dict) and data.get("type") == "agent_response":
                if event.executor_id in self._streamed:
                    self.outputs.append(data)
                    self._output_steps.append(self._superstep)
                    return  # its text streamed already, update by update
                text = "".join(
                    str(c.get("text") or "")
                    for m in data.get("messages") or ()
                    if isinstance(m, dict)
                    for c in m.get("contents") or ()
                    if isinstance(c, dict) and c.get("type") == "text"
                )
            else:
                text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            self.outputs.append(data)
            self._output_steps.append(self._superstep)
            if text:
                tag = {"temporal_workflows": {"executor_id": event.executor_id, "output": True}}
                em.message(("out", self._superstep, offset, n), text, name=event.executor_id, metadata=tag)
            return
        if isinstance(event, RequestInfoEvent):
            for inv in self._open.get((event.superstep or 0, event.source_executor_id), ()):
                if inv.subagent is not None:
                    inv.asked.append(event.request_id)
            em.custom(
                "request_info",
                {
                    "request_id": event.request_id,
                    "source_executor_id": event.source_executor_id,
                    "response_type": event.response_type,
                    "data": event.data,
                },
            )
            return
        if isinstance(event, SuperStepCompletedEvent):
            self._end_superstep(event.superstep)
            em.custom("superstep_completed", {"superstep": event.superstep})
            if live and any(not k.startswith("@") for k in event.state_keys_written):
                await self._delta()
            return
        if isinstance(event, WorkflowFailedEvent):
            self.error = (f"{event.error_type}: {event.error}", event.error_type)
            self.ended = "failed"
            return
        if isinstance(event, WorkflowInterruptedEvent):
            await self._interrupted(event, live=live)
            return
        if isinstance(event, WorkflowResetEvent):
            self._attempts.clear()
            em.custom("reset", {"checkpoint_id": event.checkpoint_id, "superstep": event.superstep})
            if live:
                for e in await self.snapshot():
                    self.em.emit(e, counted=False)
            return
        if isinstance(event, LiveCommittedEvent):
            return  # bookkeeping of the live stream
        em.custom(event.type, event)

    async def _interrupted(self, event: WorkflowInterruptedEvent, *, live: bool) -> None:
        """A message sent while the run was busy interrupted its turn (``concurrent_input``): say so, and take back
        what was said in the supersteps it voided (the cancelled one; for a rollback, the whole turn's)."""
        cancelled = event.superstep if event.cancelled else None
        back_to = event.rolled_back_to if event.policy == "rollback" else None

        def gone(superstep: int) -> bool:
            return superstep == cancelled or (back_to is not None and superstep > back_to)

        self._end_superstep(event.superstep)  # the cancelled steps end (their work is void)
        self.em.custom(
            "interrupted",
            {
                "policy": event.policy,
                "superstep": event.superstep,
                "cancelled": list(event.cancelled),
                "rolled_back_to": event.rolled_back_to,
            },
        )
        self.em.void_supersteps(gone)
        self.outputs = [o for o, s in zip(self.outputs, self._output_steps, strict=True) if not gone(s)]
        self._output_steps = [s for s in self._output_steps if not gone(s)]
        for step in [k for k in self._attempts if gone(k[0])]:
            del self._attempts[step]
        self.interruption = event
        if back_to is not None and live:  # the state went back too
            for e in await self.snapshot():
                self.em.emit(e, counted=False)

    def close(self) -> list[Any]:
        for (s, executor_id), opened in list(self._open.items()):
            for inv in opened:
                self._end(s, executor_id, inv, None)
        self._open.clear()
        return super().close()


class GraphKind(HandleKind):
    """The runs of one graph: a thread is a keep-alive run of it, streamed."""

    def __init__(self, workflow: Workflow) -> None:
        if workflow.name_is_generated:
            raise ValueError(
                "a graph served over AG-UI needs a name that is the same in every process: WorkflowBuilder(name=...)"
            )
        self.workflow = workflow
        self.name = workflow.name
        graph = workflow.graph
        self.start_executor = graph.topology.start_executor_id
        self._start_types = graph.executors[self.start_executor].input_types

    def message_input(self, text: str) -> Any:
        if str in self._start_types:
            return text
        try:
            value = json.loads(text)
        except ValueError as e:
            accepts = ", ".join(type_name(t) for t in self._start_types)
            raise Refusal(
                f"the message is the start of a {self.name!r} run, which takes {accepts}: "
                f"send it as JSON of that type ({e})",
                "InvalidRunInputError",
            ) from None
        try:
            check_start_message(self.workflow, value)
        except WorkflowError as e:
            raise Refusal(str(e), type(e).__name__) from None
        return value

    def _resting(self, status: Any) -> bool:
        return status not in (RunStatus.RUNNING, RunStatus.STARTING)

    async def deliver(
        self,
        client: Client,
        workflow_id: str,
        value: Any,
        delivery_id: str,
        *,
        task_queue: str,
        policy: str | None = None,
    ) -> bool:
        handle = self._handle(client, workflow_id)
        confirm = ConfirmInput(delivery_id)
        # Has the run taken this message before? (A retried request, a client sending its history again.)
        try:
            await handle._update(UPDATE_CONFIRM, confirm)
            return False
        except DeliveryForgottenError:
            return False
        except WorkflowUpdateFailedError as e:
            if failure_code(e) != FAILURE_UNKNOWN_DELIVERY:
                raise Refusal(failure_text(e), failure_code(e)) from None
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
        except WorkflowError as e:
            raise Refusal(str(e), type(e).__name__) from None
        try:
            from temporal_workflows.temporal._client.client import _send_input

            send: SendInput = _send_input(self.start_executor, value, policy=policy)
            check_payload(send.message.data, what="message")
        except (WorkflowError, ValueError) as e:
            raise Refusal(str(e), type(e).__name__) from None
        # The thread's run executes this graph, whichever worker takes it, as start_run's runs do.
        signature = self.workflow.graph_signature_hash[:SIGNATURE_PREFIX]
        started = await start_workflow(
            client,
            self.name,
            RunInput(keep_alive=True, stream=True, graph_signature=signature),
            id=workflow_id,
            task_queue=task_queue,
            start_signal=SIGNAL_DELIVER,
            start_signal_args=[Delivery(delivery_id, send=send)],
            versioning_override=await versioning_override(client, task_queue, self.name, signature),
        )
        try:
            await RunHandle(started, client)._update(UPDATE_CONFIRM, confirm)
        except RunClosedError:
            # The run started with this message (its start signal) and has ended already, e.g. a step that
            # failed at once: the message was taken, and the turn reads how the run ended (RUN_ERROR).
            return True
        except (WorkflowUpdateFailedError, WorkflowError) as e:
            raise Refusal(failure_text(e), failure_code(e)) from None
        return True

    async def turns(self, client: Client, workflow_id: str, keys: list[str]) -> dict[str, Any] | None:
        try:
            found = await self._handle(client, workflow_id).handle.query(QUERY_TURNS, keys)
        except (RPCError, WorkflowQueryFailedError):
            return None  # a run (or a worker) that keeps no such record: the turn asks whether the run works
        return found if isinstance(found, dict) else None

    async def asks(self, client: Client, workflow_id: str) -> list[Ask]:
        pending = await self._pending(client, workflow_id)
        return [ask_of(r, workflow_id) for r in pending]

    async def state(self, client: Client, workflow_id: str) -> dict[str, Any]:
        state = await super().state(client, workflow_id)
        return {k: v for k, v in state.items() if not k.startswith("@")}

    def read(self, client: Client, workflow_id: str, from_offset: int) -> AsyncIterator[tuple[int, list[Any]]]:
        return read_stream(client, workflow_id, from_offset)

    async def translator(self, client: Client, ctx: TurnContext, mode: str) -> GraphTranslator:
        subworkflows: dict[str, str] = {}
        try:
            topology = await self._handle(client, ctx.workflow_id).topology()
            subworkflows = {str(k): str(v) for k, v in (topology.get("subworkflows") or {}).items()}
        except (RPCError, WorkflowUpdateFailedError):
            pass
        except Exception:  # a run that has not pinned its graph yet: the graph given is the one it pins
            pass
        if not subworkflows:
            subworkflows = {
                eid: getattr(getattr(ex, "workflow", None), "name", eid)
                for eid, ex in self.workflow.graph.executors.items()
                if type(ex).__name__ == "WorkflowExecutor"
            }
        return GraphTranslator(ctx, mode, subworkflows, self, client)

    async def closed_outcome(self, client: Client, workflow_id: str) -> tuple[str, str] | None:
        handle = self._handle(client, workflow_id)
        try:
            await handle.result()
        except WorkflowError as e:
            return f"{type(e).__name__}: {e}", type(e).__name__
        except WorkflowFailureError as e:
            return str(e.cause or e), type(e.cause or e).__name__
        return None
