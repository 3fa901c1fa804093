"""One agent turn inside a step, for each agent framework the layer accepts.

An adapter runs the agent once: on the turn's new input messages with the
conversation so far (read from workflow state, never from the step's
input), streaming each update to a callback. It returns what the turn
added to the conversation (in the form the framework round-trips exactly),
the agent's response, and, when the agent stopped for tools that need a
person, those requests with what it needs to go on from exactly there.

* Microsoft Agent Framework agents (``SupportsAgentRun``): the turn runs with
  an ``AgentSession`` whose in-memory history is the conversation. A tool with
  ``approval_mode="always_require"`` ends the run with
  ``function_approval_request`` contents; the session's approval records
  (small, without the history) are what the turn keeps, and the answers go
  back in on the same session, so the agent runs the approved calls and
  continues: no model call or tool that already completed runs again.
* Pydantic AI agents: the conversation is Pydantic AI's own message list; a
  tool that requires approval (or is deferred) ends the run with
  ``DeferredToolRequests``, shown to the person as the same Agent Framework
  ``Content`` requests; the answers go back as ``DeferredToolResults`` on the
  same message history, so Pydantic AI runs only the approved calls and the
  model continues from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_framework import (
    AgentResponse,
    AgentResponseUpdate,
    AgentSession,
    Content,
    InMemoryHistoryProvider,
    Message,
)

from temporal_workflows.agents._telemetry import maf_invoke_agent, pydantic_instrumentation

__all__ = ["MafAgentTurns", "PydanticAgentTurns", "Turn", "TurnRunner", "is_maf_agent", "is_pydantic_ai_agent"]

OnUpdate = Callable[[AgentResponseUpdate], None]


@dataclass
class Turn:
    """What one run of the agent did.

    Attributes:
        added: Items to append to the conversation, in the adapter's own form.
        added_messages: The same as Agent Framework messages.
        response: The agent's response (for a turn that stopped for requests:
            what it said up to there).
        requests: Requests for a person (tool approvals, calls the caller
            answers), as Agent Framework ``Content``; empty when the turn is done.
        resume: What the adapter needs to go on once they are answered (JSON).
        session: Agent Framework session data to keep between turns (JSON; its
            history left out), or ``None``.
    """

    added: list[Any]
    added_messages: list[Message]
    response: AgentResponse
    requests: list[Content] = field(default_factory=list)
    resume: dict[str, Any] | None = None
    session: dict[str, Any] | None = None


class TurnRunner:
    """Runs turns of one agent; the conversation is stored in the adapter's own JSON form."""

    streaming = True
    """Whether updates are wanted (``AgentExecutor(stream=False)`` turns it off)."""

    def load(self, stored: list[Any]) -> list[Any]:
        """The conversation as the adapter works with it, from its stored JSON."""
        raise NotImplementedError

    def dump(self, items: list[Any]) -> list[Any]:
        """Conversation items as stored (JSON, or values the run can carry)."""
        raise NotImplementedError

    async def run(
        self,
        conversation: list[Any],
        inputs: list[Message],
        *,
        session: dict[str, Any] | None,
        on_update: OnUpdate,
        author: str,
        stream: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        raise NotImplementedError

    async def resume(
        self,
        conversation: list[Any],
        answers: list[Content],
        resume: dict[str, Any],
        *,
        session: dict[str, Any] | None,
        on_update: OnUpdate,
        author: str,
        stream: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        raise NotImplementedError


# -- Agent Framework -----------------------------------------------------------------


def is_maf_agent(agent: Any) -> bool:
    from agent_framework import SupportsAgentRun

    try:
        return isinstance(agent, SupportsAgentRun)
    except TypeError:  # a protocol check on an odd object
        return False


class MafAgentTurns(TurnRunner):
    """Turns of an Agent Framework agent (``Agent`` with any chat client, or any ``SupportsAgentRun``)."""

    def __init__(self, agent: Any, *, session_id: str) -> None:
        self.agent = agent
        self.session_id = session_id

    def load(self, stored: list[Any]) -> list[Any]:
        return [m if isinstance(m, Message) else Message.from_dict(m) for m in stored]

    def dump(self, items: list[Any]) -> list[Any]:
        return list(items)

    def history_source(self) -> str:
        """The session state key the agent's in-memory history lives under."""
        return self._history_source()

    def _history_source(self) -> str:
        for provider in getattr(self.agent, "context_providers", None) or ():
            if isinstance(provider, InMemoryHistoryProvider) and provider.load_messages:
                return str(provider.source_id)
        return InMemoryHistoryProvider.DEFAULT_SOURCE_ID

    def _session(self, kept: dict[str, Any] | None, conversation: list[Any]) -> tuple[AgentSession, str]:
        session = AgentSession.from_dict(kept) if kept else AgentSession(session_id=self.session_id)
        source = self._history_source()
        history = session.state.get(source)
        if not isinstance(history, dict):
            history = session.state[source] = {}
        history["messages"] = list(conversation)
        return session, source

    async def _run(
        self,
        conversation: list[Any],
        inputs: list[Message],
        kept: dict[str, Any] | None,
        on_update: OnUpdate,
        streaming: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        session, source = self._session(kept, conversation)
        extra = run_kwargs or {}  # the run's client_kwargs / function_invocation_kwargs, as MAF's executor passes them
        response: AgentResponse
        with maf_invoke_agent(self.agent) as traced:  # GenAI spans, one copy (_telemetry.py)
            if not streaming:
                # As Agent Framework's executor in a run that is not streamed: one non-streaming model call.
                response = await self.agent.run(inputs, session=session, stream=False, **extra)
            else:
                updates = self.agent.run(inputs, session=session, stream=True, **extra)
                async for update in updates:
                    if not update.user_input_requests:  # as Agent Framework's own executor: requests are not output
                        on_update(update)
                get_final = getattr(updates, "get_final_response", None)
                response = await get_final() if callable(get_final) else AgentResponse(messages=[])
            traced(response)
        history = session.state.get(source, {}).get("messages")
        if isinstance(history, list) and all(a is b for a, b in zip(history, conversation, strict=False)):
            added: list[Message] = list(history[len(conversation) :])
        else:  # history kept elsewhere (a provider of the agent's own): the turn's input and output
            added = [*inputs, *response.messages]
        data = session.to_dict()
        state = data.get("state")
        if isinstance(state, dict):
            state.pop(source, None)
        keep = data if (data.get("service_session_id") or state) else None
        return Turn(
            added=added,
            added_messages=added,
            response=response,
            requests=list(response.user_input_requests),
            resume={"session": data} if response.user_input_requests else None,
            session=keep,
        )

    async def run(
        self,
        conversation: list[Any],
        inputs: list[Message],
        *,
        session: dict[str, Any] | None,
        on_update: OnUpdate,
        author: str,
        stream: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        return await self._run(conversation, inputs, session, on_update, stream, run_kwargs)

    async def resume(
        self,
        conversation: list[Any],
        answers: list[Content],
        resume: dict[str, Any],
        *,
        session: dict[str, Any] | None,
        on_update: OnUpdate,
        author: str,
        stream: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        # As Agent Framework's executor: the answers go in as messages, on the session that asked.
        messages: list[Message] = []
        for answer in answers:
            role = (
                "tool"
                if answer.type in ("function_result", "computer_tool_result")
                else "assistant"
                if answer.type == "error"
                else "user"
            )
            if messages and messages[-1].role == role:
                messages[-1].contents.append(answer)
            else:
                messages.append(Message(role=role, contents=[answer]))
        return await self._run(conversation, messages, resume.get("session") or session, on_update, stream, run_kwargs)


# -- Pydantic AI ---------------------------------------------------------------------------


def is_pydantic_ai_agent(agent: Any) -> bool:
    try:
        from pydantic_ai.agent import AbstractAgent
    except ImportError:
        return False
    return isinstance(agent, AbstractAgent)


def _text_of(message: Message) -> str:
    return "".join(c.text or "" for c in message.contents if c.type == "text")


class PydanticAgentTurns(TurnRunner):
    """Turns of a Pydantic AI ``Agent`` (any model: ``TestModel``, ``FunctionModel``, a provider's)."""

    def __init__(self, agent: Any) -> None:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        self.agent = agent
        self._adapter = ModelMessagesTypeAdapter

    def load(self, stored: list[Any]) -> list[Any]:
        return list(self._adapter.validate_python(stored))

    def dump(self, items: list[Any]) -> list[Any]:
        dumped: list[Any] = self._adapter.dump_python(items, mode="json")
        return dumped

    # conversions between the two vocabularies

    def _to_pydantic(self, messages: Sequence[Message]) -> list[Any]:
        """Agent Framework messages handed to this agent, as Pydantic AI messages (text: another agent's
        tool calls are its own business)."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

        out: list[Any] = []
        for m in messages:
            text = _text_of(m)
            if not text:
                continue
            if m.role == "system":
                out.append(ModelRequest(parts=[SystemPromptPart(content=text)]))
            elif m.role == "assistant":
                out.append(ModelResponse(parts=[TextPart(content=text)]))
            else:
                out.append(ModelRequest(parts=[UserPromptPart(content=text)]))
        return out

    def _to_maf(self, messages: Sequence[Any], author: str) -> list[Message]:
        from pydantic_ai.messages import (
            ModelRequest,
            RetryPromptPart,
            SystemPromptPart,
            TextPart,
            ThinkingPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )

        out: list[Message] = []
        for m in messages:
            if isinstance(m, ModelRequest):
                for part in m.parts:
                    if isinstance(part, UserPromptPart):
                        text = part.content if isinstance(part.content, str) else str(part.content)
                        out.append(Message("user", [text]))
                    elif isinstance(part, SystemPromptPart):
                        out.append(Message("system", [part.content]))
                    elif isinstance(part, ToolReturnPart):
                        content = Content.from_function_result(
                            call_id=part.tool_call_id, result=part.model_response_str()
                        )
                        out.append(Message("tool", [content], author_name=author))
                    elif isinstance(part, RetryPromptPart):
                        out.append(Message("user", [part.model_response()]))
                continue
            contents: list[Content] = []
            for rpart in m.parts:
                if isinstance(rpart, TextPart):
                    contents.append(Content.from_text(rpart.content))
                elif isinstance(rpart, ThinkingPart):
                    contents.append(Content.from_text_reasoning(text=rpart.content))
                elif isinstance(rpart, ToolCallPart):
                    contents.append(
                        Content.from_function_call(
                            call_id=rpart.tool_call_id, name=rpart.tool_name, arguments=rpart.args_as_json_str()
                        )
                    )
            if contents:
                out.append(Message("assistant", contents, author_name=author))
        return out

    def _handler(self, on_update: OnUpdate, author: str) -> Any:
        from pydantic_ai.messages import (
            FunctionToolResultEvent,
            PartDeltaEvent,
            PartEndEvent,
            PartStartEvent,
            TextPart,
            TextPartDelta,
            ThinkingPart,
            ThinkingPartDelta,
            ToolCallPart,
            ToolReturnPart,
        )

        def update(content: Content, role: str = "assistant") -> None:
            on_update(AgentResponseUpdate(contents=[content], role=role, author_name=author))

        async def handle(ctx: Any, events: Any) -> None:
            async for event in events:
                if isinstance(event, PartStartEvent):
                    part = event.part
                    if isinstance(part, TextPart) and part.content:
                        update(Content.from_text(part.content))
                    elif isinstance(part, ThinkingPart) and part.content:
                        update(Content.from_text_reasoning(text=part.content))
                elif isinstance(event, PartDeltaEvent):
                    delta = event.delta
                    if isinstance(delta, TextPartDelta) and delta.content_delta:
                        update(Content.from_text(delta.content_delta))
                    elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                        update(Content.from_text_reasoning(text=delta.content_delta))
                elif isinstance(event, PartEndEvent) and isinstance(event.part, ToolCallPart):
                    call = event.part
                    update(
                        Content.from_function_call(
                            call_id=call.tool_call_id, name=call.tool_name, arguments=call.args_as_json_str()
                        )
                    )
                elif isinstance(event, FunctionToolResultEvent) and isinstance(event.part, ToolReturnPart):
                    result = event.part
                    update(
                        Content.from_function_result(call_id=result.tool_call_id, result=result.model_response_str()),
                        role="tool",
                    )

        return handle

    def _can_stream(self) -> bool:
        """Whether the agent's model can stream (a ``FunctionModel`` needs a ``stream_function`` for it)."""
        try:
            from pydantic_ai.models.function import FunctionModel
        except ImportError:  # pragma: no cover
            return True
        model = getattr(self.agent, "model", None)
        return not (isinstance(model, FunctionModel) and model.stream_function is None)

    def _output_type(self) -> Any:
        from pydantic_ai import DeferredToolRequests

        declared = getattr(self.agent, "output_type", str)
        members = declared if isinstance(declared, (list, tuple)) else [declared]
        if DeferredToolRequests in members or getattr(self.agent, "_output_validators", None):
            return None
        return [*members, DeferredToolRequests]

    async def _go(
        self,
        history: list[Any],
        prompt: str | None,
        *,
        deferred: Any,
        on_update: OnUpdate,
        author: str,
        added_before: list[Any],
        stream: bool = True,
    ) -> Turn:
        from pydantic_ai import DeferredToolRequests

        kwargs: dict[str, Any] = {"message_history": history}
        if stream and self.streaming and self._can_stream():
            kwargs["event_stream_handler"] = self._handler(on_update, author)
        if deferred is not None:
            kwargs["deferred_tool_results"] = deferred
        output_type = self._output_type()
        if output_type is not None:
            kwargs["output_type"] = output_type
        kwargs.update(pydantic_instrumentation(self.agent))  # GenAI spans, one copy (_telemetry.py)
        result = await self.agent.run(prompt, **kwargs)
        every = list(result.all_messages())
        new = every[len(history) :]
        added = [*added_before, *new]
        response_messages = self._to_maf(new, author)
        output = result.output
        requests: list[Content] = []
        resume: dict[str, Any] | None = None
        if isinstance(output, DeferredToolRequests):
            for call in output.approvals:
                fc = Content.from_function_call(
                    call_id=call.tool_call_id, name=call.tool_name, arguments=call.args_as_json_str()
                )
                requests.append(Content.from_function_approval_request(id=call.tool_call_id, function_call=fc))
            for call in output.calls:
                fc = Content.from_function_call(
                    call_id=call.tool_call_id, name=call.tool_name, arguments=call.args_as_json_str()
                )
                fc.user_input_request = True
                fc.id = call.tool_call_id
                requests.append(fc)
            resume = {"calls": [c.tool_call_id for c in output.calls]}
            value = None
        else:
            value = None if isinstance(output, str) else output
        response = AgentResponse(messages=response_messages, value=value)
        return Turn(
            added=added,
            added_messages=[*self._to_maf(added_before, author), *response_messages],
            response=response,
            requests=requests,
            resume=resume,
        )

    async def run(
        self,
        conversation: list[Any],
        inputs: list[Message],
        *,
        session: dict[str, Any] | None,
        on_update: OnUpdate,
        author: str,
        stream: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        converted = self._to_pydantic(inputs)
        prompt: str | None = None
        if inputs and inputs[-1].role == "user" and converted and all(c.type == "text" for c in inputs[-1].contents):
            prompt = _text_of(inputs[-1])
            converted = converted[:-1]
        history = [*conversation, *converted]
        # The turn's earlier input messages are not in the result's new messages: they were history.
        return await self._go(
            history,
            prompt,
            deferred=None,
            on_update=on_update,
            author=author,
            added_before=converted,
            stream=stream,
        )

    async def resume(
        self,
        conversation: list[Any],
        answers: list[Content],
        resume: dict[str, Any],
        *,
        session: dict[str, Any] | None,
        on_update: OnUpdate,
        author: str,
        stream: bool = True,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Turn:
        from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied

        approvals: dict[str, Any] = {}
        calls: dict[str, Any] = {}
        for answer in answers:
            if answer.type == "function_approval_response":
                fc = answer.function_call
                call_id = fc.call_id if fc is not None else answer.id
                approvals[str(call_id)] = ToolApproved() if answer.approved else ToolDenied()
            elif answer.type == "function_result":
                calls[str(answer.call_id)] = answer.result
        deferred = DeferredToolResults(approvals=approvals, calls=calls)
        return await self._go(
            list(conversation),
            None,
            deferred=deferred,
            on_update=on_update,
            author=author,
            added_before=[],
            stream=stream,
        )
