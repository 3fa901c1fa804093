"""``AgentExecutor``: an agent as a step of a graph, the way Agent Framework wires agents into workflows.

It speaks Agent Framework's vocabulary (``AgentExecutorRequest`` /
``AgentExecutorResponse``, ``Message``, ``AgentResponse``,
``AgentResponseUpdate``) whichever framework the agent is built with, and
runs in process and on Temporal like any executor, with three things Agent Framework's
in-memory executor does not need to care about:

* **The conversation lives in workflow state**, in the shared key
  ``conversation:<executor id>`` with the ``append`` reducer: each turn writes
  only the messages it added, and reads the rest from committed state (which a
  step on Temporal fetches from its worker's cache, not from its input), so a
  long conversation costs history in proportion to what each turn adds.
* **Updates stream live** (:class:`AgentRunUpdateEvent`), while the step runs.
* **A tool that needs approval becomes a pending request of the run**
  (``Content`` ``function_approval_request``, answered with the ``Content``
  its ``to_function_approval_response(approved)`` makes, by ``respond`` like
  any request). The agent goes on from where it stopped once every request of
  that turn is answered: no model call or tool that already completed runs
  again. Requests of one turn are independent (answered in any order, at any
  time; the turn resumes once, when the last arrives), and so are those of
  sibling agents.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Literal

from agent_framework import (
    AgentExecutorRequest,
    AgentExecutorResponse,
    AgentResponse,
    AgentResponseUpdate,
    AgentSession,
    Content,
    Message,
)
from pydantic import BaseModel

from temporal_workflows._engine.registry import class_kind, register_type
from temporal_workflows._errors import WorkflowError, describe
from temporal_workflows._events import WorkflowWarningEvent
from temporal_workflows._graph.context import WorkflowContext
from temporal_workflows._graph.executor import Executor, ExecutorOptions, handler, response_handler
from temporal_workflows.agents._errors import AgentModelError, is_permanent_model_error
from temporal_workflows.agents._events import AgentRunUpdateEvent
from temporal_workflows.agents._maf_types import install_maf_types
from temporal_workflows.agents._telemetry import follow_content_switch
from temporal_workflows.agents._turns import (
    MafAgentTurns,
    PydanticAgentTurns,
    Turn,
    TurnRunner,
    is_maf_agent,
    is_pydantic_ai_agent,
)

install_maf_types()

__all__ = ["AgentExecutor", "ApprovalsAnswered", "conversation_key", "session_conversation_key"]

ContextMode = Literal["full", "last_agent", "custom"]

LIVE_RESULT_CHARS = 500
"""Characters of a tool result an agent's live updates show by default (the rest stays in its result)."""


def _result_text(content: Content) -> str:
    result = content.result
    return result if isinstance(result, str) else str(result)


def _long_result(content: Content, limit: int) -> bool:
    return content.type == "function_result" and len(_result_text(content)) > limit


def _preview(content: Content, limit: int) -> Content:
    text = _result_text(content)
    return Content.from_function_result(
        call_id=content.call_id or "",
        id=content.id,
        result=f"{text[:limit]}… [{len(text) - limit:,} more characters]",
        additional_properties={"truncated_from": len(text)},
    )


def conversation_key(executor_id: str) -> str:
    """The shared state key holding an agent executor's conversation (``append`` reducer)."""
    return f"conversation:{executor_id}"


def session_conversation_key(session_id: str) -> str:
    """The shared state key holding the conversation of an ``AgentSession`` several agent executors share."""
    return f"conversation:session:{session_id}"


class ApprovalsAnswered(BaseModel):
    """An agent executor's note to itself: answers to its pending requests were recorded in ``superstep``.

    Several answers to one turn's requests can arrive in the same superstep,
    and none of those steps sees the others' (snapshot isolation), so each
    records its answer and sends this; next superstep the step of the last
    answer recorded (the greatest request id of that superstep) resumes the
    turn, once.
    """

    request_id: str
    superstep: int


def _agent_id(agent: Any) -> str | None:
    """The agent's name. Not its ``id``, which Agent Framework draws at random when none is given: an executor
    id must be the same in every process that hosts the graph."""
    value = getattr(agent, "name", None)
    return value if isinstance(value, str) and value else None


def _messages(value: str | Message | Sequence[str | Message]) -> list[Message]:
    if isinstance(value, str):
        return [Message("user", [value])]
    if isinstance(value, Message):
        return [value]
    return [Message("user", [m]) if isinstance(m, str) else m for m in value]


class AgentExecutor(Executor):
    """Runs an agent as a step: Agent Framework's ``AgentExecutor``, durable.

    Args:
        agent: An Agent Framework agent (``agent_framework.Agent`` with any
            chat client, or any ``SupportsAgentRun``), or a Pydantic AI
            ``Agent``.
        session: An Agent Framework ``AgentSession`` to run the agent on, as
            in Agent Framework: executors given the same session share one
            conversation (each agent sees what the others said), kept in
            workflow state under ``conversation:session:<session_id>``
            (:attr:`conversation_key`) so it is durable on Temporal and read
            from committed state like any conversation. In process the
            session object's in-memory history is also brought up to date after
            each turn, so ``session`` reads as in Agent Framework once the run
            is done; on Temporal the steps run on workers, so read the
            history from the run's state (``RunHandle.state()``).
        id: The executor id; by default the agent's name (required if it has none).
        stream: Publish the agent's updates live as :class:`AgentRunUpdateEvent`
            when the run is streamed (on Temporal they cost history by the
            batch: turn it off for agents nobody watches). The model is called
            as Agent Framework calls it: streaming when the run is streamed
            (``run(..., stream=True)``, ``ctx.is_streaming()``), with one
            non-streaming call in a ``run()`` that is awaited.
        live_result_chars: A tool result longer than this is streamed live
            as its first ``live_result_chars`` characters and a note of how
            many more there are (``None``: whole). Live updates are for people
            watching; a long document a tool fetched would otherwise cost its
            size again in history. The conversation and the response keep
            every result whole.
        output_response: Yield each completed turn's ``AgentResponse`` as a
            workflow output, as Agent Framework does in an awaited ``run()``;
            in a streamed run the updates are the outputs (live
            ``AgentRunUpdateEvent``s of type ``"output"``, as Agent Framework
            yields ``AgentResponseUpdate``s), unless ``stream=False``. A run on
            Temporal started by ``start_run`` does both. A long conversation
            should turn it off: a run's outputs are kept with it.
        context_mode: What a received ``AgentExecutorResponse`` adds to this
            agent's input: the sender's ``"full"`` conversation, its
            ``"last_agent"`` messages, or ``"custom"`` (``context_filter``).
        context_filter: For ``"custom"``: ``full_conversation -> messages``.
        options: How its steps run on Temporal (timeouts, ``retry_policy`` for
            errors another attempt may fix; permanent model errors fail the
            step at once as :class:`AgentModelError`).
    """

    def __init__(
        self,
        agent: Any,
        *,
        session: Any | None = None,
        id: str | None = None,
        stream: bool = True,
        live_result_chars: int | None = LIVE_RESULT_CHARS,
        output_response: bool = True,
        context_mode: ContextMode = "full",
        context_filter: Callable[[list[Message]], list[Message]] | None = None,
        options: ExecutorOptions | None = None,
    ) -> None:
        exec_id = id or _agent_id(agent)
        if not exec_id:
            raise ValueError(
                "the agent has no name: give it one, or pass AgentExecutor(agent, id=...) (the executor id must be "
                "the same in every process that hosts the graph)"
            )
        super().__init__(exec_id, options=options)
        if context_mode not in ("full", "last_agent", "custom"):
            raise ValueError(f"context_mode is 'full', 'last_agent' or 'custom', not {context_mode!r}")
        if context_mode == "custom" and context_filter is None:
            raise ValueError("context_mode='custom' needs a context_filter")
        self._agent = agent
        _register_response_format(agent)
        self._stream = stream
        self._live_result_chars = live_result_chars
        self._output_response = output_response
        self._context_mode = context_mode
        self._context_filter = context_filter
        self._session = session
        self._conversation_key = conversation_key(exec_id)
        if session is not None:
            if not isinstance(session, AgentSession):
                raise TypeError(f"session is an agent_framework.AgentSession, not {describe(session)}")
            if not is_maf_agent(agent):
                raise TypeError("session= is for Agent Framework agents (a Pydantic AI agent keeps no AgentSession)")
            self._conversation_key = session_conversation_key(session.session_id)
        self._turns: TurnRunner
        if is_pydantic_ai_agent(agent):
            self._turns = PydanticAgentTurns(agent)
        elif is_maf_agent(agent):
            self._turns = MafAgentTurns(agent, session_id=session.session_id if session is not None else exec_id)
        else:
            raise TypeError(
                f"AgentExecutor takes an Agent Framework agent (SupportsAgentRun) or a Pydantic AI Agent, "
                f"not {describe(agent)}"
            )
        self._turns.streaming = stream
        follow_content_switch()

    @property
    def agent(self) -> Any:
        return self._agent

    @property
    def description(self) -> str | None:
        value = getattr(self._agent, "description", None)
        return value if isinstance(value, str) else None

    @property
    def session(self) -> Any | None:
        """The ``AgentSession`` given (``None``: the executor's own conversation)."""
        return self._session

    @property
    def conversation_key(self) -> str:
        """Where this agent's conversation is kept in shared state (readable with ``state``): its own, or that
        of the session it shares with other executors."""
        return self._conversation_key

    def state_reducers(self) -> dict[str, str]:
        """State keys this executor writes from several steps at once, with their reducers (read by ``build()``)."""
        return {self.conversation_key: "append"}

    # -- inputs, as Agent Framework's executor takes them ------------------------------------

    @handler
    async def run(
        self, request: AgentExecutorRequest, ctx: WorkflowContext[AgentExecutorResponse, AgentResponse]
    ) -> None:
        """Add the request's messages to the agent's input; run it if ``should_respond``."""
        cache = self._cache(ctx) + list(request.messages)
        if not request.should_respond:
            ctx.set_executor_state("cache", cache)
            return
        await self._turn(ctx, cache)

    @handler
    async def from_response(
        self, prior: AgentExecutorResponse, ctx: WorkflowContext[AgentExecutorResponse, AgentResponse]
    ) -> None:
        """Chaining: run on another agent's response (its full conversation, last messages, or a filter)."""
        if self._context_mode == "full":
            given = list(prior.full_conversation)
        elif self._context_mode == "last_agent":
            given = list(prior.agent_response.messages)
        else:
            assert self._context_filter is not None
            given = list(self._context_filter(list(prior.full_conversation)))
        await self._turn(ctx, self._cache(ctx) + given)

    @handler
    async def from_str(self, text: str, ctx: WorkflowContext[AgentExecutorResponse, AgentResponse]) -> None:
        """A user prompt."""
        await self._turn(ctx, self._cache(ctx) + _messages(text))

    @handler
    async def from_message(self, message: Message, ctx: WorkflowContext[AgentExecutorResponse, AgentResponse]) -> None:
        await self._turn(ctx, [*self._cache(ctx), message])

    @handler
    async def from_messages(
        self, messages: list[str | Message], ctx: WorkflowContext[AgentExecutorResponse, AgentResponse]
    ) -> None:
        await self._turn(ctx, self._cache(ctx) + _messages(messages))

    # -- requests for a person -------------------------------------------------------------------

    @response_handler
    async def on_user_input(
        self,
        original_request: Content,
        response: Content,
        ctx: WorkflowContext[AgentExecutorResponse, AgentResponse],
    ) -> None:
        """An answer to one of the turn's requests; the turn goes on once all are answered."""
        request = ctx._task.request
        assert request is not None
        rid = request.request_id
        turn = ctx.get_executor_state("turn")
        if not isinstance(turn, dict) or rid not in turn.get("order", ()):
            raise WorkflowError(f"agent executor {self.id!r} has no pending request {rid!r} (its turn was reset)")
        problem = _answer_problem(original_request, response)
        if problem is not None:
            # Outside input must not fail the run: say so, and ask again (the turn keeps waiting).
            await ctx.add_event(WorkflowWarningEvent(message=problem, request_id=rid, executor_id=self.id))
            again = await ctx.request_info(original_request, Content)
            turn["order"] = [again if r == rid else r for r in turn["order"]]
            turn["requests"][again] = turn["requests"].pop(rid)
            ctx.set_executor_state("turn", turn)
            return
        answers = self._answers(ctx, turn, but=rid)
        if all(a is not None for a in answers.values()):
            answers[rid] = {"response": response.to_dict(), "superstep": ctx.superstep}
            await self._resume(ctx, turn, answers)
            return
        ctx.set_executor_state(f"answer/{rid}", {"response": response.to_dict(), "superstep": ctx.superstep})
        ctx._send_to_self(ApprovalsAnswered(request_id=rid, superstep=ctx.superstep))

    @handler
    async def on_answers_recorded(
        self, note: ApprovalsAnswered, ctx: WorkflowContext[AgentExecutorResponse, AgentResponse]
    ) -> None:
        """Resume the turn if its last answers were recorded in ``note.superstep`` and this is the last of them."""
        turn = ctx.get_executor_state("turn")
        if not isinstance(turn, dict) or note.request_id not in turn.get("order", ()):
            return  # resumed already
        answers = self._answers(ctx, turn)
        if any(a is None for a in answers.values()):
            return  # more answers to come; their own steps go on
        latest = [r for r, a in answers.items() if a is not None and a.get("superstep") == note.superstep]
        if not latest or max(latest) != note.request_id:
            return  # another step of that superstep resumes it
        await self._resume(ctx, turn, answers)

    # -- turns ---------------------------------------------------------------------------------

    def _cache(self, ctx: WorkflowContext[Any, Any]) -> list[Message]:
        cached = ctx.get_executor_state("cache")
        if cached is None:
            return []
        ctx.executor_state.delete("cache")
        return [m if isinstance(m, Message) else Message.from_dict(m) for m in cached]

    def _answers(
        self, ctx: WorkflowContext[Any, Any], turn: dict[str, Any], but: str | None = None
    ) -> dict[str, dict[str, Any] | None]:
        return {r: ctx.get_executor_state(f"answer/{r}") for r in turn["order"] if r != but}

    def _publisher(self, ctx: WorkflowContext[Any, Any]) -> Callable[[AgentResponseUpdate], None]:
        if not self._stream:
            return lambda update: None

        limit = self._live_result_chars

        def publish(update: AgentResponseUpdate) -> None:
            if limit is not None and any(_long_result(c, limit) for c in update.contents):
                update = copy.copy(update)
                update.contents = [_preview(c, limit) if _long_result(c, limit) else c for c in update.contents]
            ctx._publish_live(AgentRunUpdateEvent(data=update))

        return publish

    def _author(self) -> str:
        return _agent_id(self._agent) or self.id

    def _conversation(self, ctx: WorkflowContext[Any, Any]) -> list[Any]:
        return self._turns.load(ctx.get_state(self.conversation_key, []) or [])

    async def _turn(self, ctx: WorkflowContext[Any, Any], inputs: list[Message]) -> None:
        conversation = self._conversation(ctx)
        session = ctx.get_executor_state("session")
        try:
            turn = await self._turns.run(
                conversation,
                inputs,
                session=session,
                on_update=self._publisher(ctx),
                author=self._author(),
                stream=ctx.stream_mode is not False,
                run_kwargs=self._run_kwargs(ctx),
            )
        except Exception as e:
            raise self._model_error(e)  # noqa: B904 - its cause is set there (never the error itself)
        await self._finish(ctx, turn, inputs, session)

    async def _resume(
        self, ctx: WorkflowContext[Any, Any], turn_state: dict[str, Any], answers: dict[str, dict[str, Any] | None]
    ) -> None:
        for rid in turn_state["order"]:
            ctx.executor_state.delete(f"answer/{rid}")
        ctx.executor_state.delete("turn")
        given = [Content.from_dict(a["response"]) for a in (answers[r] for r in turn_state["order"]) if a is not None]
        inputs = [Message.from_dict(m) for m in turn_state.get("inputs", [])]
        conversation = self._conversation(ctx)
        session = ctx.get_executor_state("session")
        try:
            turn = await self._turns.resume(
                conversation,
                given,
                turn_state.get("resume") or {},
                session=session,
                on_update=self._publisher(ctx),
                author=self._author(),
                stream=ctx.stream_mode is not False,
                run_kwargs=self._run_kwargs(ctx),
            )
        except Exception as e:
            raise self._model_error(e)  # noqa: B904 - its cause is set there (never the error itself)
        await self._finish(ctx, turn, inputs, session)

    def _run_kwargs(self, ctx: WorkflowContext[Any, Any]) -> dict[str, Any] | None:
        """The run's ``function_invocation_kwargs`` / ``client_kwargs`` for this executor (MAF's ``run()`` args)."""
        given = {
            name: value
            for name in ("function_invocation_kwargs", "client_kwargs")
            if (value := ctx.invocation_kwargs(name)) is not None
        }
        return given or None

    def _model_error(self, e: Exception) -> Exception:
        """The error a failed model call fails the step with: the model's own, or a named permanent one.

        The model's own error is raised as it is, keeping its own cause: ``raise
        e from e`` would make it its own cause, a loop the SDK's failure
        converter followed until "maximum recursion depth exceeded" hid the
        model's error on Temporal. A permanent one has the model's as its cause.
        """
        if isinstance(e, WorkflowError) or not is_permanent_model_error(e):
            return e
        error = AgentModelError(
            f"agent executor {self.id!r}: the model refused the request ({type(e).__name__}: {e}); "
            "another attempt would be refused too, so the step fails without retrying",
            executor_id=self.id,
            model_error=type(e).__name__,
        )
        error.__cause__ = e
        return error

    def _share_history(self, ctx: WorkflowContext[Any, Any], added: list[Any]) -> None:
        """Bring the shared session's in-memory history up to date (in process, the object the user holds)."""
        session = self._session
        if session is None or not isinstance(self._turns, MafAgentTurns):
            return
        history = [*self._conversation(ctx), *self._turns.load(self._turns.dump(added))]
        source = self._turns.history_source()
        kept = session.state.get(source)
        if not isinstance(kept, dict):
            kept = session.state[source] = {}
        kept["messages"] = history

    async def _finish(
        self, ctx: WorkflowContext[Any, Any], turn: Turn, inputs: list[Message], session: dict[str, Any] | None
    ) -> None:
        if turn.added:
            self._share_history(ctx, turn.added)  # first: it reads the committed conversation
            ctx.set_state(self.conversation_key, self._turns.dump(turn.added))
        if turn.session != session:
            if turn.session is None:
                ctx.executor_state.delete("session")
            else:
                ctx.set_executor_state("session", turn.session)
        if turn.requests:
            order: list[str] = []
            requests: dict[str, Any] = {}
            for req in turn.requests:
                rid = await ctx.request_info(req, Content)
                order.append(rid)
                requests[rid] = req.to_dict()
            ctx.set_executor_state(
                "turn",
                {
                    "order": order,
                    "requests": requests,
                    "resume": turn.resume,
                    "inputs": [m.to_dict() for m in inputs],
                },
            )
            return
        # As Agent Framework: a streamed run's outputs are the updates (streamed live, type "output"), an
        # awaited run's the response. A run that does not say (start_run on Temporal) keeps both.
        if self._output_response and not (ctx.stream_mode is True and self._stream):
            await ctx.yield_output(turn.response)
        if ctx._graph.outgoing.get(self.id):
            full = [*inputs, *turn.response.messages]
            await ctx.send_message(AgentExecutorResponse(self.id, turn.response, full_conversation=full))


def _register_response_format(agent: Any) -> None:
    """Let the agent's structured output (``response_format``) be rebuilt wherever the graph is built.

    A response's ``.value`` crosses boundaries as a value of that class
    (``_maf_types``); a class the graph's handlers do not name would not be
    declared, so reading the value in another process (the next step, a
    client) would fail. Registering it where the executor is built declares it
    in every process that hosts the graph, as building a graph declares its
    handlers' types.
    """
    options = getattr(agent, "default_options", None)
    found = options.get("response_format") if isinstance(options, dict) else None
    if isinstance(found, type) and class_kind(found) is not None and found.__module__ != "builtins":
        register_type(found)


def _answer_problem(request: Content, answer: Content) -> str | None:
    """Why ``answer`` cannot answer ``request`` (the wrong kind of ``Content``), or ``None``."""
    expected = {
        "function_approval_request": "function_approval_response",
        "function_call": "function_result",
    }.get(str(request.type))
    if expected is None or answer.type == expected:
        return None
    return (
        f"a {request.type} is answered with a {expected} Content (for an approval: "
        f"request.to_function_approval_response(approved=True)), not a {answer.type}; the request is asked again"
    )
