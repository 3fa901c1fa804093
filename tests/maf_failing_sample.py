# Copyright (c) Microsoft. All rights reserved.
"""Agent Framework's guessing-game sample, ported, with a model that stops answering in the agreed format.

Source: ``microsoft/agent-framework`` (MIT licence),
``python/samples/03-workflows/human-in-the-loop/guessing_game_with_human_input.py``: an
agent guesses a number, a human answers higher, lower or correct. The sample's
``TurnManager`` raises ``RuntimeError`` when the agent's reply carries no structured
``GuessOutput`` (``AgentResponse.value is None``); here the scripted model answers in JSON
once and in prose after the first feedback, so the sample's own executor raises, as a
real model that ignores ``response_format`` makes it raise.

A port changes only what the sample imports (``mod`` is ``agent_framework`` or
``temporal_workflows``), its chat client (a ``ScriptedChatClient``), and ``input()`` (the
answers are fixed: ``higher``). ``durable`` turns the built workflow into what the sample
calls ``run`` on (in process: the workflow itself; on Temporal: its durable twin). The
sample's own code and prints are kept.

Annotations are evaluated where they are written (no ``from __future__ import annotations``):
Agent Framework reads a handler's ``WorkflowContext[...]`` from the live annotation.
"""

import json
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass
from typing import Any

from agent_framework import Agent, AgentResponseUpdate, Message
from pydantic import BaseModel

from temporal_workflows.agents.testing import ScriptedChatClient

Durable = Callable[[Any], Any]


def in_process(workflow: Any) -> Any:
    return workflow


@dataclass
class HumanFeedbackRequest:
    """Request sent to the human for feedback on the agent's guess."""

    prompt: str


class GuessOutput(BaseModel):  # module level, as in the sample (a Temporal client can name it)
    """Structured output from the agent. Enforced via response_format for reliable parsing."""

    guess: int


def forgetful_guesser(messages: list[Message]) -> str:
    """JSON for the first guess; prose, not the agreed format, once it has feedback."""
    if any(m.role == "user" and m.text.startswith("Feedback: ") for m in messages):
        return "Then I would say eight."
    return json.dumps({"guess": 5})


async def guessing_game_with_a_forgetful_model(
    mod: Any, durable: Durable = in_process, *, response_format: bool = True
) -> None:
    """The sample's ``main``, its agent answering from :func:`forgetful_guesser`; raises what the sample raises.

    With ``response_format=False`` the agent is built without the sample's ``response_format``
    (the mistake the sample's own error message names): ``.value`` is ``None`` and the sample's
    ``TurnManager`` raises its ``RuntimeError``. With it, the reply that does not parse makes
    reading ``.value`` raise pydantic's ``ValidationError`` in ``TurnManager``.
    """

    class TurnManager(mod.Executor):  # type: ignore[misc,name-defined]
        """Coordinates turns between the agent and the human."""

        def __init__(self, id: str | None = None):
            super().__init__(id=id or "turn_manager")

        @mod.handler  # type: ignore[misc]
        async def start(self, _: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
            """Start the game by asking the agent for an initial guess."""
            user = Message("user", contents=["Start by making your first guess."])
            await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

        @mod.handler  # type: ignore[misc]
        async def on_agent_response(
            self,
            result: mod.AgentExecutorResponse,  # type: ignore[name-defined]
            ctx: mod.WorkflowContext,  # type: ignore[name-defined]
        ) -> None:
            """Handle the agent's guess and request human guidance."""
            agent_value = result.agent_response.value
            if agent_value is None:
                raise RuntimeError(
                    "AgentResponse.value is None. Ensure that the agent is invoked with "
                    "options={'response_format': GuessOutput} so structured output is available."
                )
            last_guess = agent_value.guess
            prompt = (
                f"The agent guessed: {last_guess}. "
                "Type one of: higher (your number is higher than this guess), "
                "lower (your number is lower than this guess), correct, or exit."
            )
            await ctx.request_info(
                request_data=HumanFeedbackRequest(prompt=prompt),
                response_type=str,
            )

        @mod.response_handler  # type: ignore[misc]
        async def on_human_feedback(
            self,
            original_request: HumanFeedbackRequest,
            feedback: str,
            ctx: mod.WorkflowContext[mod.AgentExecutorRequest, str],  # type: ignore[name-defined]
        ) -> None:
            """Continue the game or finish based on human feedback."""
            reply = feedback.strip().lower()
            if reply == "correct":
                await ctx.yield_output("Guessed correctly!")
                return
            last_guess = original_request.prompt.split(": ")[1].split(".")[0]
            feedback_text = (
                f"Feedback: {reply}. Your last guess was {last_guess}. "
                f"Use this feedback to adjust and make your next guess (1-10)."
            )
            user_msg = Message("user", contents=[feedback_text])
            await ctx.send_message(mod.AgentExecutorRequest(messages=[user_msg], should_respond=True))

    async def process_event_stream(stream: AsyncIterable[Any]) -> dict[str, str] | None:
        """Process events from the workflow stream to capture human feedback requests."""
        last_response_id: str | None = None
        requests: list[tuple[str, HumanFeedbackRequest]] = []
        async for event in stream:
            if event.type == "request_info" and isinstance(event.data, HumanFeedbackRequest):
                requests.append((event.request_id, event.data))
            elif event.type == "output":
                if isinstance(event.data, AgentResponseUpdate):
                    update = event.data
                    response_id = update.response_id
                    if response_id != last_response_id:
                        if last_response_id is not None:
                            print()
                        print(f"{update.author_name}: {update.text}", end="", flush=True)
                        last_response_id = response_id
                    else:
                        print(update.text, end="", flush=True)
                else:
                    print(f"\n{event.executor_id}: {event.data}")
        if requests:
            responses: dict[str, str] = {}
            for request_id, request in requests:
                print(f"\nHITL: {request.prompt}")
                answer = "higher"  # input("Enter higher/lower/correct/exit: ")
                print(f"Enter higher/lower/correct/exit: {answer}")
                responses[request_id] = answer
            return responses
        return None

    guessing_agent = Agent(
        client=ScriptedChatClient(forgetful_guesser, stream_words=False),
        name="GuessingAgent",
        instructions=(
            "You guess a number between 1 and 10. "
            "If the user says 'higher' or 'lower', adjust your next guess. "
            'You MUST return ONLY a JSON object exactly matching this schema: {"guess": <integer 1..10>}. '
            "No explanations or additional text."
        ),
        default_options={"response_format": GuessOutput} if response_format else {},
    )
    turn_manager = TurnManager(id="turn_manager")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=turn_manager, name="guessing_game_forgetful")
        .add_edge(turn_manager, guessing_agent)
        .add_edge(guessing_agent, turn_manager)
        .build()
    )
    stream = workflow.run("start", stream=True)
    pending_responses = await process_event_stream(stream)
    while pending_responses is not None:
        stream = workflow.run(stream=True, responses=pending_responses)
        pending_responses = await process_event_stream(stream)
