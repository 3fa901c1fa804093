"""A LlamaIndex workflow's runs (``TemporalRuntime``) behind an AG-UI endpoint: its turns, its events as AG-UI.

A thread is one LlamaIndex run (the run id is the thread's workflow id). Its first user message starts it, as
``workflow.run(**kwargs)`` would: a JSON object is the start event's fields; plain text goes to the start
event's one field, or, for LlamaIndex's plain ``StartEvent``, as ``user_msg`` (what LlamaIndex's agents take).
The run takes that one message: later turns answer what it asks (``resume``), each answer the response event
of the request it answers (an ``InputRequiredEvent``'s ``HumanResponseEvent``, a ``wait_for_event``'s event),
checked by the run. The run's stream is what ``stream_events()`` shows, with LlamaIndex's internal events: a
step's ``StepStateChanged`` makes ``STEP_STARTED`` / ``STEP_FINISHED``, LlamaIndex's ``WorkflowIdleEvent`` ends
the turn (``RUN_FINISHED``, with the interrupt outcome while requests are pending), the run's end ends it with
its result (a message, and ``result.outputs``) or its error (``RUN_ERROR``). Every rest and end is read from the
stream itself, so a reconnecting client gets the same events with the same ids.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass
from typing import Any

from ag_ui.core import ResumeEntry
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows._errors import WorkflowError
from temporal_workflows._events import RequestInfoEvent
from temporal_workflows.ag_ui._emit import to_json
from temporal_workflows.ag_ui._kinds import Ask, Refusal, TurnContext
from temporal_workflows.ag_ui._runs import POLL_COOLDOWN, HandleKind, StateTranslator
from temporal_workflows.temporal._client.llama import (
    IDLE_EVENT,
    STEP_STATE_EVENT,
    STOP_EVENTS,
    LlamaEvent,
    LlamaRunFailedError,
    read_stream,
)

__all__ = ["LlamaKind", "LlamaTranslator", "llama_kind"]

AGENT_STREAM = "AgentStream"
"""LlamaIndex agents' streamed text (``llama_index.core.agent.workflow.AgentStream``: ``delta``,
``current_agent_name``): AG-UI text messages."""


@dataclass(frozen=True)
class RunEnded:
    """The end of a closed run's stream (made by the reader, after its last item): its result or its error."""

    result: Any = None
    error: tuple[str, str] | None = None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(to_json(value), ensure_ascii=False)


def _asked(request: RequestInfoEvent) -> str:
    """What a request asks, for a person: an ``InputRequiredEvent(prefix="Enter a number: ")``'s one text."""
    data = request.data
    if isinstance(data, dict):
        texts = [v for v in data.values() if isinstance(v, str)]
        if len(data) == 1 and texts:
            return texts[0]
    shown = _text(data) if data is not None else "input"
    return shown if len(shown) <= 400 else shown[:399] + "…"


def _answer(ask_id: str) -> Any:
    def answer(entry: ResumeEntry) -> Any:
        if entry.status == "cancelled":
            raise Refusal(
                f"resume for interrupt {ask_id!r}: a LlamaIndex run's request cannot be cancelled; "
                "answer it (status 'resolved' with its payload)",
                "InvalidResponseError",
            )
        return entry.payload

    return answer


class LlamaTranslator(StateTranslator):
    """A LlamaIndex run's events as AG-UI (the table in ``docs/ag-ui.md``)."""

    def __init__(self, ctx: TurnContext, mode: str, kind: LlamaKind, client: Client) -> None:
        super().__init__(ctx, mode, kind, client)
        self._kind: LlamaKind = kind
        self._current: Hashable | None = None

    async def _one(self, offset: int, n: int, event: Any, *, live: bool) -> None:
        em = self.em
        if isinstance(event, RunEnded):
            if event.error is not None:
                self.error = event.error
                self.ended = "failed"
                return
            self.outputs.append(event.result)
            text = _text(event.result)
            if text:
                tag = {"temporal_workflows": {"workflow": self._kind.name, "output": True}}
                em.message(("out", offset, n), text, name=self._kind.name, metadata=tag)
            self.ended = "closed"
            return
        if not isinstance(event, LlamaEvent):
            return
        data = event.data if isinstance(event.data, dict) else {}
        if event.event_type == STEP_STATE_EVENT:
            key = ("step", str(data.get("name")), str(data.get("worker_id")))
            if data.get("step_state") == "running":
                self.activated = True
                em.step_started(key, str(data.get("name")))
                self._current = key
            elif data.get("step_state") == "not_running":
                em.end(key)
                em.step_finished(key)
                if self._current == key:
                    self._current = None
                if live:
                    await self._delta()  # a step's store writes land when it completes
            return
        if event.event_type == IDLE_EVENT:
            if self.activated:
                self.ended = "waiting"  # at rest: the turn's end asks the run what it waits for
            return
        if event.internal or event.event_type in STOP_EVENTS:
            return  # the result comes with the run's end (RunEnded); internal events are LlamaIndex's bookkeeping
        if event.name == AGENT_STREAM and isinstance(data.get("delta"), str):
            if data["delta"]:
                agent = str(data.get("current_agent_name") or self._kind.name)
                owner = self._current or ("agent", agent)
                em.text(owner, data["delta"], name=agent, metadata={"temporal_workflows": {"event": event.name}})
            return
        em.custom(event.name, {"event_type": event.event_type, "data": event.data})


class LlamaKind(HandleKind):
    """The runs of one LlamaIndex workflow hosted on a ``TemporalRuntime``: a thread is one run."""

    def __init__(self, workflow: Any) -> None:
        from temporal_workflows._llama_runtime._temporal_runtime import TemporalRuntime

        if not isinstance(workflow.runtime, TemporalRuntime):
            raise TypeError(
                f"a LlamaIndex workflow served over AG-UI runs on TemporalRuntime: "
                f"{type(workflow).__name__}(runtime=TemporalRuntime(...))"
            )
        self.workflow = workflow
        self.name = str(workflow.workflow_name)
        start = getattr(workflow, "start_event_class", None)
        fields = dict(getattr(start, "model_fields", {}) or {})
        self._start_fields = [name for name in fields if not name.startswith("_")]

    def message_input(self, text: str) -> Any:
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError as e:
                raise Refusal(
                    f"the message starts a {self.name!r} run: a JSON object is its start event's fields ({e})",
                    "InvalidRunInputError",
                ) from None
            if isinstance(value, dict):
                return value
        if len(self._start_fields) == 1:
            return {self._start_fields[0]: text}
        if not self._start_fields:
            return {"user_msg": text}  # LlamaIndex's plain StartEvent takes any field; its agents read user_msg
        raise Refusal(
            f"the message starts a {self.name!r} run, whose start event has the fields "
            f"{', '.join(self._start_fields)}: send them as a JSON object",
            "InvalidRunInputError",
        )

    def _resting(self, status: Any) -> bool:
        return bool(status == "waiting_for_input")

    async def _started_with(self, client: Client, workflow_id: str) -> dict[str, Any] | None:
        """The start event's fields the thread's run started with (``None``: not known)."""
        from temporal_workflows._llama_runtime._protocol import RunInput
        from temporal_workflows.temporal._client.llama import decode_item

        async for event in client.get_workflow_handle(workflow_id).fetch_history_events(page_size=1):
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            [started] = await client.data_converter.decode(payloads, [RunInput])
            if isinstance(started, RunInput) and started.start_event is not None:
                fields = decode_item(started.start_event).data
                return fields if isinstance(fields, dict) else None
            return None
        return None

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
        # ``policy`` (forwardedProps' double-texting choice) has nothing to choose between here: a LlamaIndex
        # thread's run takes one message, its start; any other is refused whatever the policy.
        from temporal_workflows._llama_runtime._start import StartRefused, start_run

        try:
            await self._handle(client, workflow_id).describe()
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            # The thread's run exists: AG-UI clients send the whole conversation every turn, so its start message
            # comes again; any other message is refused (a LlamaIndex run takes events, not more messages).
            started = await self._started_with(client, workflow_id)
            # (The start event holds its defaults too: the message's fields are among its fields.)
            if started is not None and isinstance(value, dict) and all(started.get(k) == v for k, v in value.items()):
                return False
            raise Refusal(
                f"this thread's {self.name!r} run took its start message already; it takes answers to what it asks "
                "(resume), not another message: start a new thread for a new run",
                "InvalidRunInputError",
            )
        try:
            await start_run(self.workflow, value, run_id=workflow_id)
        except StartRefused as e:
            raise Refusal(str(e), "InvalidRunInputError") from None
        except WorkflowError as e:
            raise Refusal(str(e), type(e).__name__) from None
        return True

    async def asks(self, client: Client, workflow_id: str) -> list[Ask]:
        pending = await self._pending(client, workflow_id)
        return [
            Ask(
                id=r.request_id,
                reason="input_required",
                message=_asked(r),
                response_schema=r.response_schema or None,
                metadata={
                    "temporal_workflows": {
                        "workflow_id": workflow_id,
                        "workflow": self.name,
                        "step": r.source_executor_id or None,
                        "response_type": r.response_type,
                        "data": to_json(r.data),
                    }
                },
                answer=_answer(r.request_id),
            )
            for r in pending
        ]

    async def read(self, client: Client, workflow_id: str, from_offset: int) -> AsyncIterator[tuple[int, list[Any]]]:
        last = from_offset - 1
        async for offset, event in read_stream(client, workflow_id, from_offset, poll_cooldown=POLL_COOLDOWN):
            last = offset
            yield offset, [event]
        # The run closed: its end, after its last item (the same place on every read of the stream).
        try:
            result = await self._handle(client, workflow_id).result()
        except LlamaRunFailedError as e:
            yield last + 1, [RunEnded(error=(str(e), e.error_type.rpartition(".")[2]))]
            return
        yield last + 1, [RunEnded(result=result.get("result"))]

    async def translator(self, client: Client, ctx: TurnContext, mode: str) -> LlamaTranslator:
        return LlamaTranslator(ctx, mode, self, client)

    async def closed_outcome(self, client: Client, workflow_id: str) -> tuple[str, str] | None:
        try:
            await self._handle(client, workflow_id).result()
        except LlamaRunFailedError as e:
            return str(e), e.error_type.rpartition(".")[2]
        return None


def llama_kind(workflow: Any) -> LlamaKind | None:
    """A :class:`LlamaKind` for a LlamaIndex ``workflows.Workflow``; ``None`` for anything else."""
    try:
        from workflows import Workflow as LlamaWorkflow
    except ImportError:
        return None
    return LlamaKind(workflow) if isinstance(workflow, LlamaWorkflow) else None
