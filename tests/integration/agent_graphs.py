"""Agent graphs with deterministic models, run by tests in process and hosted by the integration worker.

Everything here needs the agent extras; without them :func:`all_workflows`
is empty and the agent tests skip.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from temporal_workflows import Workflow

try:
    import agent_framework  # noqa: F401
except ImportError:  # pragma: no cover - the agent extras are not installed
    AVAILABLE = False
else:
    AVAILABLE = True

try:
    import pydantic_ai  # noqa: F401
except ImportError:  # pragma: no cover
    PYDANTIC_AI = False
else:
    PYDANTIC_AI = True


class Verdict(BaseModel):
    """An agent's structured output (``response_format``)."""

    ok: bool
    reason: str


def _build() -> dict[str, Workflow]:
    from typing import Never

    from agent_framework import Agent, AgentSession, Message, tool
    from agent_framework.exceptions import ChatClientContentFilterException
    from temporalio.common import RetryPolicy

    from temporal_workflows import Executor, ExecutorOptions, WorkflowBuilder, WorkflowContext, handler
    from temporal_workflows.agents import AgentExecutor, AgentExecutorResponse
    from tests.agent_support import TOOL_CALLS, Reply, ScriptedChatClient, ToolCall, count

    graphs: dict[str, Workflow] = {}

    # -- writer -> reviewer (Agent Framework's "agents in a workflow" sample) -------------------
    writer = Agent(
        client=ScriptedChatClient(lambda ms: "Charge Ahead: affordable fun"),
        instructions="You write slogans.",
        name="writer",
    )
    reviewer = Agent(
        client=ScriptedChatClient(lambda ms: "Make it more playful."),
        instructions="You review slogans.",
        name="reviewer",
    )
    graphs["chain"] = WorkflowBuilder(start_executor=writer, name="it_agents_chain").add_edge(writer, reviewer).build()

    # -- an agent streaming a long answer, which a second message interrupts (concurrent_input) -----------
    def tell(ms: list[Message]) -> str:
        return " ".join(f"story{i}" for i in range(400)) if "story" in ms[-1].text else "short answer"

    teller = AgentExecutor(Agent(client=ScriptedChatClient(tell, delay=0.02), name="teller"))
    graphs["busy"] = WorkflowBuilder(start_executor=teller, name="it_agents_busy").build()

    # -- structured output: response_format, read by the next executor (issue #25.9) ----------------
    judge = AgentExecutor(
        Agent(
            client=ScriptedChatClient(lambda ms: json.dumps({"ok": True, "reason": "fine"})),
            name="judge",
            default_options={"response_format": Verdict},
        )
    )

    class ReadVerdict(Executor):
        @handler
        async def read(self, r: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output(f"{type(r.agent_response.value).__name__} {r.agent_response.value!r}")

    graphs["structured"] = (
        WorkflowBuilder(start_executor=judge, name="it_agents_structured")
        .add_edge(judge, ReadVerdict("read_verdict"))
        .build()
    )

    # -- two agents sharing one AgentSession (issue #25.8) ---------------------------------------------
    shared = AgentSession(session_id="it-shared-session")  # a fixed id: the same in every process
    first = AgentExecutor(
        Agent(client=ScriptedChatClient(lambda ms: f"A saw {len(ms)}"), name="first_agent"), session=shared
    )
    second = AgentExecutor(
        Agent(client=ScriptedChatClient(lambda ms: f"B saw {len(ms)}"), name="second_agent"), session=shared
    )
    graphs["session"] = WorkflowBuilder(start_executor=first, name="it_agents_session").add_edge(first, second).build()

    # -- tools that need approval ----------------------------------------------------------------
    @tool(approval_mode="never_require")
    def lookup(ticket: str, name: str) -> str:
        """Look a person up."""
        TOOL_CALLS[ticket].append(("lookup", {"name": name}))
        return f"{name} works in sales"

    @tool(approval_mode="always_require")
    def send_email(ticket: str, to: str, body: str) -> str:
        """Send an email."""
        TOOL_CALLS[ticket].append(("send_email", {"to": to}))
        return f"sent to {to}"

    @tool(approval_mode="always_require")
    def archive(ticket: str, folder: str) -> str:
        """Archive the thread."""
        TOOL_CALLS[ticket].append(("archive", {"folder": folder}))
        return f"archived in {folder}"

    def mail_script(messages: list[Message]) -> Reply:
        ticket = next(m.text.split()[0] for m in messages if m.role == "user" and m.text)
        results = count(messages, "function_result")
        if results == 0:
            return [ToolCall("lookup", {"ticket": ticket, "name": "bob"})]
        if results == 1:
            return [
                ToolCall("send_email", {"ticket": ticket, "to": "bob", "body": "hello"}),
                ToolCall("archive", {"ticket": ticket, "folder": "done"}),
            ]
        return f"Emailed bob ({results} tool results)."

    mailer = AgentExecutor(
        Agent(
            client=ScriptedChatClient(mail_script),
            name="mailer",
            instructions="Handle email.",
            tools=[lookup, send_email, archive],
        )
    )

    class Conclude(Executor):
        @handler
        async def conclude(self, response: AgentExecutorResponse, ctx: WorkflowContext[Never, str]) -> None:
            await ctx.yield_output(f"{response.executor_id}: {response.agent_response.text}")

    graphs["approval"] = (
        WorkflowBuilder(start_executor=mailer, name="it_agents_approval").add_edge(mailer, Conclude("conclude")).build()
    )

    # -- two agents of one superstep, each waiting for its own approval --------------------------
    def sibling_script(folder: str) -> Any:
        def script(messages: list[Message]) -> Reply:
            ticket = next(m.text.split()[0] for m in messages if m.role == "user" and m.text)
            if count(messages, "function_result") == 0:
                return [ToolCall("archive", {"ticket": ticket, "folder": folder})]
            return f"{folder} done"

        return script

    class Fan(Executor):
        @handler
        async def fan(self, text: str, ctx: WorkflowContext[str]) -> None:
            await ctx.send_message(text)

    left = Agent(client=ScriptedChatClient(sibling_script("left")), name="left", tools=[archive])
    right = Agent(client=ScriptedChatClient(sibling_script("right")), name="right", tools=[archive])
    fan = Fan("fan")
    graphs["siblings"] = (
        WorkflowBuilder(start_executor=fan, name="it_agents_siblings").add_fan_out_edges(fan, [left, right]).build()
    )

    # -- a model that refuses the request ---------------------------------------------------------
    def refusing(messages: list[Message]) -> Reply:
        return ChatClientContentFilterException("the prompt was filtered")

    graphs["refused"] = WorkflowBuilder(
        start_executor=Agent(client=ScriptedChatClient(refusing), name="censored"), name="it_agents_refused"
    ).build()

    # -- a model error another attempt may fix: raised as it is, retried per policy (here: none) ---
    class UpstreamModelError(Exception):
        pass

    def exploding(messages: list[Message]) -> Reply:
        return UpstreamModelError("the upstream model exploded")

    volatile = AgentExecutor(
        Agent(client=ScriptedChatClient(exploding), name="volatile"),
        options=ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1)),
    )
    graphs["exploding"] = WorkflowBuilder(start_executor=volatile, name="it_agents_exploding").build()

    # -- a conversation of several turns, each adding a large tool result ------------------------
    @tool(approval_mode="never_require")
    def fetch(ticket: str, turn: int) -> str:
        """Fetch a document."""
        TOOL_CALLS[ticket].append(("fetch", {"turn": turn}))
        return f"document {turn}: " + "x" * 3000

    def chat_script(messages: list[Message]) -> Reply:
        ticket = next(m.text.split()[0] for m in messages if m.role == "user" and m.text)
        turns = sum(1 for m in messages if m.role == "user")
        if count(messages, "function_result") < turns:
            return [ToolCall("fetch", {"ticket": ticket, "turn": turns})]
        return f"read document {turns}"

    assistant = AgentExecutor(
        Agent(client=ScriptedChatClient(chat_script), name="assistant", tools=[fetch]), output_response=False
    )

    class User(Executor):
        """Asks three questions, one per turn, then yields the agent's last answer."""

        @handler
        async def start(self, ticket: str, ctx: WorkflowContext[str, str]) -> None:
            ctx.set_executor_state("ticket", ticket)
            await ctx.send_message(f"{ticket} question 1")

        @handler
        async def on_answer(self, response: AgentExecutorResponse, ctx: WorkflowContext[str, str]) -> None:
            asked = int(response.full_conversation[0].text.rsplit(" ", 1)[-1])
            if asked < 3:
                await ctx.send_message(f"{ctx.get_executor_state('ticket')} question {asked + 1}")
            else:
                await ctx.yield_output(response.agent_response.text)

    user = User("user")
    graphs["conversation"] = (
        WorkflowBuilder(start_executor=user, name="it_agents_conversation")
        .add_edge(user, assistant)
        .add_edge(assistant, user)
        .build()
    )
    if PYDANTIC_AI:
        graphs.update(_pydantic_graphs())
    return graphs


def _pydantic_graphs() -> dict[str, Workflow]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    from temporal_workflows import WorkflowBuilder
    from temporal_workflows.agents import AgentExecutor
    from tests.agent_support import TOOL_CALLS

    def ticket_of(messages: list[ModelMessage]) -> str:
        for m in messages:
            if isinstance(m, ModelRequest):
                for p in m.parts:
                    if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                        return p.content.split()[0]
        return "?"

    def responses(messages: list[ModelMessage]) -> int:
        return sum(isinstance(m, ModelResponse) for m in messages)

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        ticket = ticket_of(messages)
        TOOL_CALLS[ticket].append(("model", {"messages": len(messages)}))
        if responses(messages) == 0:
            return ModelResponse(
                parts=[
                    ToolCallPart("weather", {"ticket": ticket, "city": "Oslo"}, tool_call_id="w1"),
                    ToolCallPart("book", {"ticket": ticket, "city": "Oslo"}, tool_call_id="b1"),
                ]
            )
        return ModelResponse(parts=[TextPart("Booked Oslo; it is sunny.")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        ticket = ticket_of(messages)
        TOOL_CALLS[ticket].append(("model", {"messages": len(messages)}))
        if responses(messages) == 0:
            args = json.dumps({"ticket": ticket, "city": "Oslo"})
            yield {
                0: DeltaToolCall(name="weather", json_args=args, tool_call_id="w1"),
                1: DeltaToolCall(name="book", json_args=args, tool_call_id="b1"),
            }
            return
        for piece in ("Booked ", "Oslo; ", "it is ", "sunny."):
            yield piece

    agent = Agent(FunctionModel(reply, stream_function=stream), name="travel")

    @agent.tool_plain
    def weather(ticket: str, city: str) -> str:
        TOOL_CALLS[ticket].append(("weather", {"city": city}))
        return "sunny"

    @agent.tool_plain(requires_approval=True)
    def book(ticket: str, city: str) -> str:
        TOOL_CALLS[ticket].append(("book", {"city": city}))
        return "booked"

    travel = AgentExecutor(agent)
    return {
        "pydantic": WorkflowBuilder(start_executor=travel, name="it_agents_pydantic").build(),
        "long_chat": WorkflowBuilder(
            start_executor=AgentExecutor(_long_chat_agent()), name="it_agents_long_chat"
        ).build(),
    }


def document(turn: int, size: int) -> str:
    """``size`` characters that differ per turn (as a real tool's output would)."""
    body = "".join(f"{(turn * 7919 + i) % 100003:06d} " for i in range(size // 7 + 1))
    return (f"document {turn}: " + body)[:size]


def _long_chat_agent() -> Any:
    """Each turn ("question <turn> <size>"): a tool call that fetches ``size`` characters, then a short answer."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    def decide(messages: list[ModelMessage]) -> tuple[str, dict[str, int]]:
        last = messages[-1]
        prompt = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)]
        _, turn, size = str(prompt[-1].content).split()
        args = {"turn": int(turn), "size": int(size)}
        returned = isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts)
        return ("answer" if returned else "call"), args

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        what, args = decide(messages)
        if what == "call":
            return ModelResponse(parts=[ToolCallPart("fetch", args, tool_call_id=f"fetch-{args['turn']}")])
        return ModelResponse(parts=[TextPart(f"Noted document {args['turn']}.")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        what, args = decide(messages)
        if what == "call":
            yield {0: DeltaToolCall(name="fetch", json_args=json.dumps(args), tool_call_id=f"fetch-{args['turn']}")}
            return
        for piece in ("Noted ", "document ", f"{args['turn']}."):
            yield piece

    agent = Agent(FunctionModel(reply, stream_function=stream), name="librarian")

    @agent.tool_plain
    def fetch(turn: int, size: int) -> str:
        """Fetch the document for this turn."""
        return document(turn, size)

    return agent


CLIENT_KWARGS: list[dict[str, Any]] = []
"""What the ``it_agents_kwargs`` graph's chat client calls were given (``run(client_kwargs=...)``)."""


def _build_kwargs() -> dict[str, Workflow]:
    from temporal_workflows import WorkflowBuilder
    from temporal_workflows.agents import AgentExecutor
    from tests.agent_support import ScriptedChatClient

    class Recording(ScriptedChatClient):
        def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
            CLIENT_KWARGS.append(dict(kwargs))
            return super()._inner_get_response(messages=messages, stream=stream, options=options, **kwargs)

    from agent_framework import Agent

    first = AgentExecutor(Agent(client=Recording(lambda ms: "one"), name="kw_first"))
    second = AgentExecutor(Agent(client=Recording(lambda ms: "two"), name="kw_second"))
    return {"kwargs": WorkflowBuilder(start_executor=first, name="it_agents_kwargs").add_edge(first, second).build()}


GRAPHS: dict[str, Workflow] = {**_build(), **_build_kwargs()} if AVAILABLE else {}


def all_workflows() -> list[Workflow]:
    if not AVAILABLE:
        return []
    from examples import agents

    return [*GRAPHS.values(), agents.build(scripted=True)]  # never a real model, whatever the environment
