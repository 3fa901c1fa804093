# Copyright (c) Microsoft. All rights reserved.
"""More of Agent Framework's own workflow samples, ported: each written once against a module.

Source: ``microsoft/agent-framework`` (MIT licence), ``python/samples/03-workflows/`` and
``python/samples/01-get-started/``; each program names its sample file. A port changes only
what the sample imports (``mod`` is ``agent_framework`` or ``temporal_workflows``) and, where
the sample calls a cloud model, its chat client: a ``ScriptedChatClient`` (``agents.testing``) whose replies
depend only on the messages it is given. Where the sample asks a human (``input()``), the
answers are fixed. The sample's own prints are kept; ``tests/test_maf_samples.py`` runs each
on Agent Framework and here and compares what they print.

``durable`` turns a built workflow into what the sample calls ``run`` on: the workflow
itself (in process; Agent Framework), or its durable twin on Temporal
(``tests/integration/test_maf_samples_temporal.py``).

Annotations are evaluated where they are written (no ``from __future__ import annotations``):
Agent Framework reads ``mod.WorkflowContext[...]`` from the live annotation.
"""

import ast
import asyncio
import contextlib
import json
import os
import random
from collections import defaultdict
from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Never, cast
from uuid import uuid4

from agent_framework import Agent, AgentResponse, AgentResponseUpdate, Message
from pydantic import BaseModel

from temporal_workflows.agents.testing import ScriptedChatClient

Durable = Callable[[Any], Any]
"""What a sample calls ``run`` on, given its built workflow."""


def in_process(workflow: Any) -> Any:
    return workflow


def last_user_text(messages: list[Message]) -> str:
    return next(m.text for m in reversed(messages) if m.role == "user")


# -- 01-get-started/07_first_graph_workflow.py ------------------------------------------------------------


async def first_graph_workflow(mod: Any, durable: Durable = in_process) -> None:
    class UpperCase(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str):
            super().__init__(id=id)

        @mod.handler  # type: ignore[misc]
        async def to_upper_case(self, text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            await ctx.send_message(text.upper())

    @mod.executor(id="reverse_text")  # type: ignore[misc]
    async def reverse_text(text: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        await ctx.yield_output(text[::-1])

    def create_workflow() -> Any:
        upper = UpperCase(id="upper_case")
        return mod.WorkflowBuilder(start_executor=upper, name="first_graph").add_edge(upper, reverse_text).build()

    workflow = durable(create_workflow())
    events = await workflow.run("hello world")
    print(f"Output: {events.get_outputs()}")
    print(f"Final state: {events.get_final_state()}")


# -- 03-workflows/_start-here/step1_executors_and_edges.py --------------------------------------------------


async def executors_and_edges(mod: Any, durable: Durable = in_process) -> None:
    class UpperCase(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str):
            super().__init__(id=id)

        @mod.handler  # type: ignore[misc]
        async def to_upper_case(self, text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            result = text.upper()
            await ctx.send_message(result)

    @mod.executor(id="reverse_text_executor")  # type: ignore[misc]
    async def reverse_text(text: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        result = text[::-1]
        await ctx.yield_output(result)

    class ExclamationAdder(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str):
            super().__init__(id=id)

        @mod.handler(input=str, output=str)  # type: ignore[misc]
        async def add_exclamation(self, message, ctx) -> None:  # type: ignore[no-untyped-def]
            result = f"{message}!!!"
            await ctx.send_message(result)

    def create_workflow() -> Any:
        upper_case = UpperCase(id="upper_case_executor")
        return (
            mod.WorkflowBuilder(start_executor=upper_case, name="executors_and_edges_1")
            .add_edge(upper_case, reverse_text)
            .build()
        )

    workflow1 = durable(create_workflow())
    print("Workflow 1 (introspection-based types):")
    events1 = await workflow1.run("hello world")
    print(events1.get_outputs())
    print("Final state:", events1.get_final_state())

    upper_case = UpperCase(id="upper_case_executor")
    exclamation_adder = ExclamationAdder(id="exclamation_adder")
    workflow2 = durable(
        mod.WorkflowBuilder(start_executor=upper_case, name="executors_and_edges_2")
        .add_edge(upper_case, exclamation_adder)
        .add_edge(exclamation_adder, reverse_text)
        .build()
    )
    print("\nWorkflow 2 (explicit @handler types):")
    events2 = await workflow2.run("hello world")
    print(events2.get_outputs())
    print("Final state:", events2.get_final_state())


# -- 03-workflows/control-flow/sequential_executors.py ------------------------------------------------------


async def sequential_executors(mod: Any, durable: Durable = in_process) -> None:
    class UpperCaseExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def to_upper_case(self, text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            result = text.upper()
            await ctx.send_message(result)

    class ReverseTextExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def reverse_text(self, text: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
            result = text[::-1]
            await ctx.yield_output(result)

    upper_case_executor = UpperCaseExecutor(id="upper_case_executor")
    reverse_text_executor = ReverseTextExecutor(id="reverse_text_executor")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=upper_case_executor, name="sequential_executors")
        .add_edge(upper_case_executor, reverse_text_executor)
        .build()
    )
    outputs: list[str] = []
    async for event in workflow.run("hello world", stream=True):
        print(f"Event: {event}")
        if event.type == "output":
            outputs.append(cast(str, event.data))
    if outputs:
        print(f"Workflow outputs: {outputs}")


# -- 03-workflows/control-flow/sequential_streaming.py ------------------------------------------------------


async def sequential_streaming(mod: Any, durable: Durable = in_process) -> None:
    @mod.executor(id="upper_case_executor")  # type: ignore[misc]
    async def to_upper_case(text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
        result = text.upper()
        await ctx.send_message(result)

    @mod.executor(id="reverse_text_executor")  # type: ignore[misc]
    async def reverse_text(text: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        result = text[::-1]
        await ctx.yield_output(result)

    workflow = durable(
        mod.WorkflowBuilder(start_executor=to_upper_case, name="sequential_streaming")
        .add_edge(to_upper_case, reverse_text)
        .build()
    )
    async for event in workflow.run("hello world", stream=True):
        print(f"Event: {event}")
        if event.type == "output":
            print(f"Workflow completed with result: {event.data}")


# -- 03-workflows/observability/executor_io_observation.py --------------------------------------------------


def format_io_data(data: Any) -> str:
    type_name = type(data).__name__
    if data is None:
        return "None"
    if isinstance(data, str):
        preview = data[:80] + "..." if len(data) > 80 else data
        return f"{type_name}: '{preview}'"
    if isinstance(data, list):
        data_list = cast(list[Any], data)
        if len(data_list) == 0:
            return f"{type_name}: []"
        if len(data_list) <= 3:
            items = [format_io_data(item) for item in data_list]
            return f"{type_name}: [{', '.join(items)}]"
        return f"{type_name}: [{len(data_list)} items]"
    return f"{type_name}: {data!r}"


async def executor_io_observation(mod: Any, durable: Durable = in_process) -> None:
    class UpperCaseExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str = "upper_case"):
            super().__init__(id=id)

        @mod.handler  # type: ignore[misc]
        async def handle(self, text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
            result = text.upper()
            await ctx.send_message(result)

    class ReverseTextExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str = "reverse_text"):
            super().__init__(id=id)

        @mod.handler  # type: ignore[misc]
        async def handle(self, text: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
            result = text[::-1]
            await ctx.yield_output(result)

    upper_case = UpperCaseExecutor()
    reverse_text = ReverseTextExecutor()
    workflow = durable(
        mod.WorkflowBuilder(start_executor=upper_case, name="io_observation").add_edge(upper_case, reverse_text).build()
    )
    print("Running workflow with executor I/O observation...\n")
    async for event in workflow.run("hello world", stream=True):
        if event.type == "executor_invoked":
            print(f"[INVOKED] {event.executor_id}")
            print(f"    Input: {format_io_data(event.data)}")
        elif event.type == "executor_completed":
            print(f"[COMPLETED] {event.executor_id}")
            if event.data:
                print(f"    Output: {format_io_data(event.data)}")
        elif event.type == "output":
            print(f"[WORKFLOW OUTPUT] {format_io_data(event.data)}")


# -- 03-workflows/parallelism/aggregate_results_of_different_types.py ---------------------------------------


async def aggregate_results_of_different_types(mod: Any, durable: Durable = in_process) -> None:
    class Dispatcher(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def handle(self, numbers: list[int], ctx: mod.WorkflowContext[list[int]]) -> None:  # type: ignore[name-defined]
            if not numbers:
                raise RuntimeError("Input must be a valid list of integers.")
            await ctx.send_message(numbers)

    class Average(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def handle(self, numbers: list[int], ctx: mod.WorkflowContext[float]) -> None:  # type: ignore[name-defined]
            average: float = sum(numbers) / len(numbers)
            await ctx.send_message(average)

    class Sum(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def handle(self, numbers: list[int], ctx: mod.WorkflowContext[int]) -> None:  # type: ignore[name-defined]
            total: int = sum(numbers)
            await ctx.send_message(total)

    class Aggregator(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def handle(
            self,
            results: list[int | float],
            ctx: mod.WorkflowContext[Never, list[int | float]],  # type: ignore[name-defined]
        ) -> None:
            await ctx.yield_output(results)

    dispatcher = Dispatcher(id="dispatcher")
    average = Average(id="average")
    summation = Sum(id="summation")
    aggregator = Aggregator(id="aggregator")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=dispatcher, name="aggregate_types")
        .add_fan_out_edges(dispatcher, [average, summation])
        .add_fan_in_edges([average, summation], aggregator)
        .build()
    )
    rng = random.Random(7)  # the sample draws from the global generator; a seeded one prints the same twice
    output: list[int | float] | None = None
    async for event in workflow.run([rng.randint(1, 100) for _ in range(10)], stream=True):
        if event.type == "output":
            output = event.data
    if output is not None:
        print(output)


# -- 03-workflows/control-flow/simple_loop.py (the judge agent scripted) -------------------------------------


class NumberSignal(Enum):
    ABOVE = "above"
    BELOW = "below"
    MATCHED = "matched"
    INIT = "init"


def judge(messages: list[Message]) -> str:
    prompt = last_user_text(messages)
    target = int(prompt.split("Target: ")[1].split("\n")[0])
    guess = int(prompt.split("Guess: ")[1].split("\n")[0])
    return "MATCHED" if guess == target else "ABOVE" if target > guess else "BELOW"


async def simple_loop(mod: Any, durable: Durable = in_process) -> None:
    class GuessNumberExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, bound: tuple[int, int], id: str):
            super().__init__(id=id)
            self._lower = bound[0]
            self._upper = bound[1]

        @mod.handler  # type: ignore[misc]
        async def guess_number(self, feedback: NumberSignal, ctx: mod.WorkflowContext[int, str]) -> None:  # type: ignore[name-defined]
            if feedback == NumberSignal.INIT:
                self._guess = (self._lower + self._upper) // 2
                await ctx.send_message(self._guess)
            elif feedback == NumberSignal.MATCHED:
                await ctx.yield_output(f"Guessed the number: {self._guess}")
            elif feedback == NumberSignal.ABOVE:
                self._lower = self._guess + 1
                self._guess = (self._lower + self._upper) // 2
                await ctx.send_message(self._guess)
            else:
                self._upper = self._guess - 1
                self._guess = (self._lower + self._upper) // 2
                await ctx.send_message(self._guess)

    class SubmitToJudgeAgent(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, judge_agent_id: str, target: int, id: str | None = None):
            super().__init__(id=id or "submit_to_judge")
            self._judge_agent_id = judge_agent_id
            self._target = target

        @mod.handler  # type: ignore[misc]
        async def submit(self, guess: int, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
            prompt = (
                "You are a number judge. Given a target number and a guess, reply with exactly one token:"
                " 'MATCHED' if guess == target, 'ABOVE' if the target is above the guess,"
                " or 'BELOW' if the target is below.\n"
                f"Target: {self._target}\nGuess: {guess}\nResponse:"
            )
            await ctx.send_message(
                mod.AgentExecutorRequest(messages=[Message("user", contents=[prompt])], should_respond=True),
                target_id=self._judge_agent_id,
            )

    class ParseJudgeResponse(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def parse(self, response: mod.AgentExecutorResponse, ctx: mod.WorkflowContext[NumberSignal]) -> None:  # type: ignore[name-defined]
            text = response.agent_response.text.strip().upper()
            if "MATCHED" in text:
                await ctx.send_message(NumberSignal.MATCHED)
            elif "ABOVE" in text and "BELOW" not in text:
                await ctx.send_message(NumberSignal.ABOVE)
            else:
                await ctx.send_message(NumberSignal.BELOW)

    judge_agent = mod.AgentExecutor(
        Agent(
            client=ScriptedChatClient(judge, stream_words=False),
            instructions="You strictly respond with one of: MATCHED, ABOVE, BELOW based on the given target and guess.",
            name="judge_agent",
        )
    )
    guess_number = GuessNumberExecutor((1, 100), "guess_number")
    submit_judge = SubmitToJudgeAgent(judge_agent_id="judge_agent", target=30)
    parse_judge = ParseJudgeResponse(id="parse_judge")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=guess_number, name="simple_loop")
        .add_edge(guess_number, submit_judge)
        .add_edge(submit_judge, judge_agent)
        .add_edge(judge_agent, parse_judge)
        .add_edge(parse_judge, guess_number)
        .build()
    )
    iterations = 0
    async for event in workflow.run(NumberSignal.INIT, stream=True):
        if event.type == "executor_completed" and event.executor_id == "guess_number":
            iterations += 1
        elif event.type == "output":
            if isinstance(event.data, AgentResponseUpdate):
                continue
            print(f"Workflow output: {event.data}")
    print(f"Guessed {iterations - 1} times.")


# -- 03-workflows/control-flow/switch_case_edge_group.py (both agents scripted) -----------------------------

EMAIL_STATE_PREFIX = "email:"
CURRENT_EMAIL_ID_KEY = "current_email_id"


class DetectionResultAgent(BaseModel):
    spam_decision: Literal["NotSpam", "Spam", "Uncertain"]
    reason: str


class EmailResponse(BaseModel):
    response: str


@dataclass
class DetectionResult:
    spam_decision: str
    reason: str
    email_id: str


@dataclass
class Email:
    email_id: str
    email_content: str


def detect_spam(messages: list[Message]) -> str:
    text = last_user_text(messages).lower()
    if "prize" in text:
        return json.dumps({"spam_decision": "Spam", "reason": "promises a prize"})
    if "offer" in text:
        return json.dumps({"spam_decision": "Uncertain", "reason": "an offer, maybe wanted"})
    return json.dumps({"spam_decision": "NotSpam", "reason": "a colleague writing"})


def draft_reply(messages: list[Message]) -> str:
    return json.dumps({"response": f"Thanks, noted: {last_user_text(messages)[:24]}"})


SWITCH_EMAILS = {
    "spam": "You won a prize! Send your bank details.",
    "uncertain": "Hey there, I noticed you might be interested in our latest offer. It expires soon.",
    "not_spam": "Hi, the meeting moved to 3pm. See you there.",
}


async def switch_case_edge_group(mod: Any, durable: Durable = in_process, email: str = "uncertain") -> None:
    def get_case(expected_decision: str) -> Callable[[Any], bool]:
        def condition(message: Any) -> bool:
            return isinstance(message, DetectionResult) and message.spam_decision == expected_decision

        return condition

    @mod.executor(id="store_email")  # type: ignore[misc]
    async def store_email(email_text: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
        new_email = Email(email_id=str(uuid4()), email_content=email_text)
        ctx.set_state(f"{EMAIL_STATE_PREFIX}{new_email.email_id}", new_email)
        ctx.set_state(CURRENT_EMAIL_ID_KEY, new_email.email_id)
        await ctx.send_message(
            mod.AgentExecutorRequest(
                messages=[Message("user", contents=[new_email.email_content])], should_respond=True
            )
        )

    @mod.executor(id="to_detection_result")  # type: ignore[misc]
    async def to_detection_result(
        response: mod.AgentExecutorResponse,  # type: ignore[name-defined]
        ctx: mod.WorkflowContext[DetectionResult],  # type: ignore[name-defined]
    ) -> None:
        parsed = DetectionResultAgent.model_validate_json(response.agent_response.text)
        email_id: str = ctx.get_state(CURRENT_EMAIL_ID_KEY)
        await ctx.send_message(
            DetectionResult(spam_decision=parsed.spam_decision, reason=parsed.reason, email_id=email_id)
        )

    @mod.executor(id="submit_to_email_assistant")  # type: ignore[misc]
    async def submit_to_email_assistant(
        detection: DetectionResult,
        ctx: mod.WorkflowContext[mod.AgentExecutorRequest],  # type: ignore[name-defined]
    ) -> None:
        if detection.spam_decision != "NotSpam":
            raise RuntimeError("This executor should only handle NotSpam messages.")
        email: Email = ctx.get_state(f"{EMAIL_STATE_PREFIX}{detection.email_id}")
        await ctx.send_message(
            mod.AgentExecutorRequest(messages=[Message("user", contents=[email.email_content])], should_respond=True)
        )

    @mod.executor(id="finalize_and_send")  # type: ignore[misc]
    async def finalize_and_send(response: mod.AgentExecutorResponse, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        parsed = EmailResponse.model_validate_json(response.agent_response.text)
        await ctx.yield_output(f"Email sent: {parsed.response}")

    @mod.executor(id="handle_spam")  # type: ignore[misc]
    async def handle_spam(detection: DetectionResult, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        if detection.spam_decision == "Spam":
            await ctx.yield_output(f"Email marked as spam: {detection.reason}")
        else:
            raise RuntimeError("This executor should only handle Spam messages.")

    @mod.executor(id="handle_uncertain")  # type: ignore[misc]
    async def handle_uncertain(detection: DetectionResult, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        if detection.spam_decision == "Uncertain":
            email: Email | None = ctx.get_state(f"{EMAIL_STATE_PREFIX}{detection.email_id}")
            await ctx.yield_output(
                f"Email marked as uncertain: {detection.reason}. Email content: {getattr(email, 'email_content', '')}"
            )
        else:
            raise RuntimeError("This executor should only handle Uncertain messages.")

    spam_detection_agent = mod.AgentExecutor(
        Agent(
            client=ScriptedChatClient(detect_spam, stream_words=False),
            instructions="You are a spam detection assistant that identifies spam emails.",
            name="spam_detection_agent",
            default_options={"response_format": DetectionResultAgent},
        )
    )
    email_assistant_agent = mod.AgentExecutor(
        Agent(
            client=ScriptedChatClient(draft_reply, stream_words=False),
            instructions="You are an email assistant that helps users draft responses to emails with professionalism.",
            name="email_assistant_agent",
            default_options={"response_format": EmailResponse},
        )
    )
    workflow = durable(
        mod.WorkflowBuilder(start_executor=store_email, name="switch_case")
        .add_edge(store_email, spam_detection_agent)
        .add_edge(spam_detection_agent, to_detection_result)
        .add_switch_case_edge_group(
            to_detection_result,
            [
                mod.Case(condition=get_case("NotSpam"), target=submit_to_email_assistant),
                mod.Case(condition=get_case("Spam"), target=handle_spam),
                mod.Default(target=handle_uncertain),
            ],
        )
        .add_edge(submit_to_email_assistant, email_assistant_agent)
        .add_edge(email_assistant_agent, finalize_and_send)
        .build()
    )
    events = await workflow.run(SWITCH_EMAILS[email])
    outputs = events.get_outputs()
    if outputs:
        for output in outputs:
            print(f"Workflow output: {output}")


# -- 03-workflows/human-in-the-loop/guessing_game_with_human_input.py (agent and human scripted) ------------


@dataclass
class HumanFeedbackRequest:
    prompt: str


class GuessOutput(BaseModel):
    guess: int


def guesser(messages: list[Message]) -> str:
    """Bisects 1..10 from the feedback the conversation holds."""
    low, high, guess = 1, 10, 5
    for m in messages:
        if m.role == "user" and m.text.startswith("Feedback: "):
            if m.text.startswith("Feedback: higher"):
                low = guess + 1
            else:
                high = guess - 1
            guess = (low + high) // 2
    return json.dumps({"guess": guess})


def forgetful_guesser(messages: list[Message]) -> str:
    """JSON for the first guess; prose, not the agreed format, once it has feedback (a model that drifts)."""
    if any(m.role == "user" and m.text.startswith("Feedback: ") for m in messages):
        return "Then I would say eight."
    return json.dumps({"guess": 5})


async def guessing_game_with_human_input(
    mod: Any,
    durable: Durable = in_process,
    secret: int = 8,
    *,
    script: Callable[[list[Message]], str] = guesser,
    response_format: bool = True,
) -> None:
    """The sample; ``script`` is the agent's model, and ``response_format=False`` builds the agent without one.

    Its ``TurnManager`` raises the sample's ``RuntimeError`` when ``.value`` is ``None`` (the agent
    has no ``response_format``, the mistake its message names), and reading ``.value`` raises
    pydantic's ``ValidationError`` when the reply does not parse (:func:`forgetful_guesser`):
    ``tests/test_maf_failing_sample.py`` compares what each host raises.
    """

    class TurnManager(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str | None = None):
            super().__init__(id=id or "turn_manager")

        @mod.handler  # type: ignore[misc]
        async def start(self, _: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
            user = Message("user", contents=["Start by making your first guess."])
            await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

        @mod.handler  # type: ignore[misc]
        async def on_agent_response(self, result: mod.AgentExecutorResponse, ctx: mod.WorkflowContext) -> None:  # type: ignore[name-defined]
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
            await ctx.request_info(request_data=HumanFeedbackRequest(prompt=prompt), response_type=str)

        @mod.response_handler  # type: ignore[misc]
        async def on_human_feedback(
            self,
            original_request: HumanFeedbackRequest,
            feedback: str,
            ctx: mod.WorkflowContext[mod.AgentExecutorRequest, str],  # type: ignore[name-defined]
        ) -> None:
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

    def human(prompt: str) -> str:  # stands for input(): compares the guess with the secret
        guess = int(prompt.split(": ")[1].split(".")[0])
        return "correct" if guess == secret else "higher" if secret > guess else "lower"

    async def process_event_stream(stream: AsyncIterable[Any]) -> dict[str, str] | None:
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
                answer = human(request.prompt)
                print(f"Enter higher/lower/correct/exit: {answer}")
                responses[request_id] = answer
            return responses
        return None

    guessing_agent = Agent(
        client=ScriptedChatClient(script, stream_words=False),
        name="GuessingAgent",
        instructions="You guess a number between 1 and 10.",
        default_options={"response_format": GuessOutput} if response_format else {},
    )
    turn_manager = TurnManager(id="turn_manager")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=turn_manager, name="guessing_game")
        .add_edge(turn_manager, guessing_agent)
        .add_edge(guessing_agent, turn_manager)
        .build()
    )
    stream = workflow.run("start", stream=True)
    pending_responses = await process_event_stream(stream)
    while pending_responses is not None:
        stream = workflow.run(stream=True, responses=pending_responses)
        pending_responses = await process_event_stream(stream)


# -- 03-workflows/checkpoint/checkpoint_with_human_in_the_loop.py (writer and reviewer scripted) ------------


@dataclass
class HumanApprovalRequest:
    prompt: str = ""
    draft: str = ""
    iteration: int = 0


def writer_reply(messages: list[Message]) -> str:
    text = last_user_text(messages)
    if "Human guidance: " in text:
        return "Revised: " + text.split("Human guidance: ")[1]
    return "Meet the grinder. Pre-order now."


async def checkpoint_with_human_in_the_loop(mod: Any, storage_dir: Path, durable: Durable = in_process) -> None:
    class BriefPreparer(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str, agent_id: str) -> None:
            super().__init__(id=id)
            self._agent_id = agent_id

        @mod.handler  # type: ignore[misc]
        async def prepare(self, brief: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest, str]) -> None:  # type: ignore[name-defined]
            normalized = " ".join(brief.split()).strip()
            if not normalized.endswith("."):
                normalized += "."
            ctx.set_state("brief", normalized)
            prompt = f"You are drafting product release notes.\n\nBRIEF: {normalized}"
            await ctx.send_message(
                mod.AgentExecutorRequest(messages=[Message("user", contents=[prompt])], should_respond=True),
                target_id=self._agent_id,
            )

    class ReviewGateway(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str, writer_id: str) -> None:
            super().__init__(id=id)
            self._writer_id = writer_id
            self._iteration = 0

        @mod.handler  # type: ignore[misc]
        async def on_agent_response(self, response: mod.AgentExecutorResponse, ctx: mod.WorkflowContext) -> None:  # type: ignore[name-defined]
            self._iteration += 1
            await ctx.request_info(
                request_data=HumanApprovalRequest(
                    prompt="Review the draft. Reply 'approve' or provide edit instructions.",
                    draft=response.agent_response.text,
                    iteration=self._iteration,
                ),
                response_type=str,
            )

        @mod.response_handler  # type: ignore[misc]
        async def on_human_feedback(
            self,
            original_request: HumanApprovalRequest,
            feedback: str,
            ctx: mod.WorkflowContext[mod.AgentExecutorRequest | str, str],  # type: ignore[name-defined]
        ) -> None:
            reply = feedback.strip()
            if len(reply) == 0 or reply.lower() == "approve":
                await ctx.yield_output(original_request.draft)
                return
            prompt = (
                "Revise the launch note. Respond with the new copy only.\n\n"
                f"Previous draft:\n{original_request.draft}\n\n"
                f"Human guidance: {reply}"
            )
            await ctx.send_message(
                mod.AgentExecutorRequest(messages=[Message("user", contents=[prompt])], should_respond=True),
                target_id=self._writer_id,
            )

        async def on_checkpoint_save(self) -> dict[str, Any]:
            return {"iteration": self._iteration}

        async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
            self._iteration = state.get("iteration", 0)

    def create_workflow(checkpoint_storage: Any) -> Any:
        writer = mod.AgentExecutor(
            Agent(
                client=ScriptedChatClient(writer_reply, stream_words=False),
                instructions="Write release notes.",
                name="writer",
            )
        )
        review_gateway = ReviewGateway(id="review_gateway", writer_id="writer")
        prepare_brief = BriefPreparer(id="prepare_brief", agent_id="writer")
        return durable(
            mod.WorkflowBuilder(
                max_iterations=6,
                start_executor=prepare_brief,
                checkpoint_storage=checkpoint_storage,
                name="checkpoint_hitl",
            )
            .add_edge(prepare_brief, writer)
            .add_edge(writer, review_gateway)
            .add_edge(review_gateway, writer)
            .build()
        )

    answers = iter(["Mention the $249 price.", "approve", "approve"])

    def prompt_for_responses(requests: dict[str, HumanApprovalRequest]) -> dict[str, str]:
        responses: dict[str, str] = {}
        for request_id, request in requests.items():
            print("\n=== Human approval needed ===")
            print(f"Iteration: {request.iteration}")
            print(request.prompt)
            print("Draft: \n---\n" + request.draft + "\n---")
            response = next(answers)
            print(f"Type 'approve' or enter revision guidance (or 'exit' to quit): {response}")
            responses[request_id] = response
        return responses

    async def run_interactive_session(
        workflow: Any, initial_message: str | None = None, checkpoint_id: str | None = None
    ) -> str:
        requests: dict[str, HumanApprovalRequest] = {}
        responses: dict[str, str] | None = None
        completed_output: str | None = None
        while True:
            if responses:
                event_stream = workflow.run(stream=True, responses=responses)
                requests.clear()
                responses = None
            elif initial_message:
                print(f"\nStarting workflow with brief: {initial_message}\n")
                event_stream = workflow.run(message=initial_message, stream=True)
            else:
                print("\nStarting workflow from checkpoint...\n")
                event_stream = workflow.run(checkpoint_id=checkpoint_id, stream=True)
            async for event in event_stream:
                if event.type == "status":
                    print(event)
                if event.type == "output":
                    completed_output = event.data
                if event.type == "request_info":
                    requests[event.request_id] = event.data
            if completed_output:
                break
            if requests:
                responses = prompt_for_responses(requests)
                continue
            raise RuntimeError("Workflow stopped without completing or requesting input")
        return completed_output

    # Agent Framework 1.23 unpickles only the types it is told of (the sample predates that).
    allowed = [f"{__name__}:HumanApprovalRequest"]
    storage = mod.FileCheckpointStorage(storage_path=storage_dir, allowed_checkpoint_types=allowed)
    workflow = create_workflow(checkpoint_storage=storage)
    brief = "Introduce our limited edition smart coffee grinder.   Invite customers to pre-order"
    print("Running workflow (human approval required)...")
    result = await run_interactive_session(workflow, initial_message=brief)
    print(f"Workflow completed with: {result}")
    checkpoints = await storage.list_checkpoints(workflow_name=workflow.name)
    sorted_cps = sorted(checkpoints, key=lambda cp: (cp.iteration_count, cp.timestamp))
    print("\nAvailable checkpoints:")
    for idx, cp in enumerate(sorted_cps):
        print(f"  [{idx}] iter={cp.iteration_count}")
    chosen = sorted_cps[2]  # input(): resume from the draft's first review
    print(f"\nResume from which checkpoint? (press Enter to skip): 2 (iter={chosen.iteration_count})")
    new_workflow = create_workflow(checkpoint_storage=storage)
    result = await run_interactive_session(new_workflow, checkpoint_id=chosen.checkpoint_id)
    print(f"Workflow completed with: {result}")
    # Not in the sample: the checkpoints once the resumed run's request is answered (issue #39), by time.
    checkpoints = await storage.list_checkpoints(workflow_name=workflow.name)
    listed = sorted(checkpoints, key=lambda cp: datetime.fromisoformat(cp.timestamp))
    print(f"iter={[cp.iteration_count for cp in listed]}")


# -- 03-workflows/control-flow/workflow_cancellation.py (its sleeps shortened; cancelled during step2) -------


async def workflow_cancellation(mod: Any, durable: Durable = in_process) -> None:
    step2_started = asyncio.Event()

    @mod.executor(id="step1")  # type: ignore[misc]
    async def step1(text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
        print("[Step1] Starting...")
        await asyncio.sleep(0)
        print("[Step1] Done")
        await ctx.send_message(text.upper())

    @mod.executor(id="step2")  # type: ignore[misc]
    async def step2(text: str, ctx: mod.WorkflowContext[str]) -> None:  # type: ignore[name-defined]
        print("[Step2] Starting...")
        step2_started.set()
        await asyncio.sleep(30 if cancelling else 0)  # the sample's 2 s: long enough to be cancelled in
        print("[Step2] Done")
        await ctx.send_message(text + "!")

    @mod.executor(id="step3")  # type: ignore[misc]
    async def step3(text: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        print("[Step3] Starting...")
        await asyncio.sleep(0)
        print("[Step3] Done")
        await ctx.yield_output(f"Result: {text}")

    def build_workflow() -> Any:
        return durable(
            mod.WorkflowBuilder(start_executor=step1, name="cancellation")
            .add_edge(step1, step2)
            .add_edge(step2, step3)
            .build()
        )

    print("=== Run with cancellation ===\n")
    cancelling = True
    workflow = build_workflow()
    task: asyncio.Future[Any] = asyncio.ensure_future(workflow.run("hello world"))
    await asyncio.wait_for(step2_started.wait(), 10)  # the sample sleeps 3 s: step 2 is running then
    print("\n--- Cancelling workflow ---\n")
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        print("Workflow was cancelled")
    print("\n")
    print("=== Run to completion ===\n")
    cancelling = False
    step2_started.clear()
    workflow = build_workflow()
    result = await workflow.run("hello world")
    print(f"\nWorkflow completed with output: {result.get_outputs()}")


Program = Callable[..., Awaitable[None]]


# -- 03-workflows/parallelism/fan_out_fan_in_edges.py (the three experts scripted) -------------------------


@dataclass
class AggregatedInsights:
    research: str
    marketing: str
    legal: str


def expert(name: str) -> Callable[[list[Message]], str]:
    def reply(messages: list[Message]) -> str:
        return f"{name} on {last_user_text(messages)[:20]}: fine."

    return reply


def render_live_streams(buffers: dict[str, str], order: list[str], completed: set[str]) -> None:
    print("\033[2J\033[H", end="")
    print("=== Expert Streams (Live) ===")
    print("Concurrent agent updates are shown below as they stream.\n")
    for agent_id in order:
        state = "completed" if agent_id in completed else "streaming"
        print(f"[{agent_id}] ({state})")
        print(buffers.get(agent_id, ""))
        print("-" * 80)
    print("", end="", flush=True)


async def fan_out_fan_in_edges(mod: Any, durable: Durable = in_process) -> None:
    class DispatchToExperts(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def dispatch(self, prompt: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
            initial_message = Message("user", contents=[prompt])
            await ctx.send_message(mod.AgentExecutorRequest(messages=[initial_message], should_respond=True))

    class AggregateInsights(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def aggregate(
            self,
            results: list[mod.AgentExecutorResponse],  # type: ignore[name-defined]
            ctx: mod.WorkflowContext[Never, str],  # type: ignore[name-defined]
        ) -> None:
            by_id: dict[str, str] = {}
            for r in results:
                by_id[r.executor_id] = r.agent_response.text
            aggregated = AggregatedInsights(
                research=by_id.get("researcher", ""),
                marketing=by_id.get("marketer", ""),
                legal=by_id.get("legal", ""),
            )
            consolidated = (
                "Consolidated Insights\n"
                "====================\n\n"
                f"Research Findings:\n{aggregated.research}\n\n"
                f"Marketing Angle:\n{aggregated.marketing}\n\n"
                f"Legal/Compliance Notes:\n{aggregated.legal}\n"
            )
            await ctx.yield_output(consolidated)

    def agent(name: str) -> Any:
        return mod.AgentExecutor(Agent(client=ScriptedChatClient(expert(name)), instructions="Expert.", name=name))

    dispatcher = DispatchToExperts(id="dispatcher")
    aggregator = AggregateInsights(id="aggregator")
    researcher, marketer, legal = agent("researcher"), agent("marketer"), agent("legal")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=dispatcher, name="fan_out_fan_in")
        .add_fan_out_edges(dispatcher, [researcher, marketer, legal])
        .add_fan_in_edges([researcher, marketer, legal], aggregator)
        .build()
    )
    expert_order = ["researcher", "marketer", "legal"]
    expert_buffers: dict[str, str] = {expert_id: "" for expert_id in expert_order}
    completed_experts: set[str] = set()
    final_output: str | None = None
    async for event in workflow.run(
        "We are launching a new budget-friendly electric bike for urban commuters.", stream=True
    ):
        if event.type == "executor_completed" and event.executor_id in expert_buffers:
            completed_experts.add(event.executor_id)
            render_live_streams(expert_buffers, expert_order, completed_experts)
        elif event.type == "output":
            if isinstance(event.data, AgentResponseUpdate):
                executor_id = event.executor_id or ""
                if executor_id in expert_buffers:
                    expert_buffers[executor_id] += event.data.text
                    render_live_streams(expert_buffers, expert_order, completed_experts)
                continue
            if event.executor_id == "aggregator":
                final_output = str(event.data)
    if final_output:
        print("\n=== Final Consolidated Output ===\n")
        print(final_output)


# -- 03-workflows/state-management/state_with_agents.py (both agents scripted) -----------------------------


class SpamVerdict(BaseModel):
    is_spam: bool
    reason: str


@dataclass
class SpamDetection:
    is_spam: bool
    reason: str
    email_id: str


def spam_or_not(messages: list[Message]) -> str:
    text = last_user_text(messages)
    if "WINNER" in text:
        return json.dumps({"is_spam": True, "reason": "lottery bait"})
    return json.dumps({"is_spam": False, "reason": "ordinary mail"})


STATE_EMAILS = {
    "spam": "You are a WINNER! Click here for a free lottery offer!!!",
    "ham": "Could you send me the slides from Tuesday?",
}


async def state_with_agents(mod: Any, durable: Durable = in_process, email: str = "spam") -> None:
    def get_condition(expected_result: bool) -> Callable[[Any], bool]:
        def condition(message: Any) -> bool:
            if not isinstance(message, SpamDetection):
                return True
            return message.is_spam == expected_result

        return condition

    @mod.executor(id="store_email")  # type: ignore[misc]
    async def store_email(email_text: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
        new_email = Email(email_id=str(uuid4()), email_content=email_text)
        ctx.set_state(f"{EMAIL_STATE_PREFIX}{new_email.email_id}", new_email)
        ctx.set_state(CURRENT_EMAIL_ID_KEY, new_email.email_id)
        user = Message("user", contents=[new_email.email_content])
        await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

    @mod.executor(id="to_detection_result")  # type: ignore[misc]
    async def to_detection_result(
        response: mod.AgentExecutorResponse,  # type: ignore[name-defined]
        ctx: mod.WorkflowContext[SpamDetection],  # type: ignore[name-defined]
    ) -> None:
        parsed = SpamVerdict.model_validate_json(response.agent_response.text)
        email_id: str = ctx.get_state(CURRENT_EMAIL_ID_KEY)
        await ctx.send_message(SpamDetection(is_spam=parsed.is_spam, reason=parsed.reason, email_id=email_id))

    @mod.executor(id="submit_to_email_assistant")  # type: ignore[misc]
    async def submit_to_email_assistant(
        detection: SpamDetection,
        ctx: mod.WorkflowContext[mod.AgentExecutorRequest],  # type: ignore[name-defined]
    ) -> None:
        if detection.is_spam:
            raise RuntimeError("This executor should only handle non-spam messages.")
        email: Email = ctx.get_state(f"{EMAIL_STATE_PREFIX}{detection.email_id}")
        user = Message("user", contents=[email.email_content])
        await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

    @mod.executor(id="finalize_and_send")  # type: ignore[misc]
    async def finalize_and_send(response: mod.AgentExecutorResponse, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        parsed = EmailResponse.model_validate_json(response.agent_response.text)
        await ctx.yield_output(f"Email sent: {parsed.response}")

    @mod.executor(id="handle_spam")  # type: ignore[misc]
    async def handle_spam(detection: SpamDetection, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        if detection.is_spam:
            await ctx.yield_output(f"Email marked as spam: {detection.reason}")
        else:
            raise RuntimeError("This executor should only handle spam messages.")

    spam_detection_agent = Agent(
        client=ScriptedChatClient(spam_or_not, stream_words=False),
        instructions="You are a spam detection assistant that identifies spam emails.",
        default_options={"response_format": SpamVerdict},
        name="spam_detection_agent",
    )
    email_assistant_agent = Agent(
        client=ScriptedChatClient(draft_reply, stream_words=False),
        instructions="You are an email assistant that helps users draft responses to emails with professionalism.",
        default_options={"response_format": EmailResponse},
        name="email_assistant_agent",
    )
    workflow = durable(
        mod.WorkflowBuilder(start_executor=store_email, name="state_with_agents")
        .add_edge(store_email, spam_detection_agent)
        .add_edge(spam_detection_agent, to_detection_result)
        .add_edge(to_detection_result, submit_to_email_assistant, condition=get_condition(False))
        .add_edge(to_detection_result, handle_spam, condition=get_condition(True))
        .add_edge(submit_to_email_assistant, email_assistant_agent)
        .add_edge(email_assistant_agent, finalize_and_send)
        .build()
    )
    events = await workflow.run(STATE_EMAILS[email])
    outputs = events.get_outputs()
    if outputs:
        print(f"Final result: {outputs[0]}")


# -- 03-workflows/control-flow/intermediate_vs_terminal_outputs.py ------------------------------------------
# Its third part (``workflow.as_agent()``) is left out: as_agent is not provided here (docs/maf.md).


async def intermediate_vs_terminal_outputs(mod: Any, durable: Durable = in_process) -> None:
    @mod.executor(id="planner")  # type: ignore[misc]
    async def planner(messages: list[Message], ctx: mod.WorkflowContext[list[Message], str]) -> None:  # type: ignore[name-defined]
        prompt = messages[0].text if messages else ""
        await ctx.yield_output(f"plan: starting work on '{prompt}'")
        await ctx.send_message(messages)

    @mod.executor(id="researcher")  # type: ignore[misc]
    async def researcher(messages: list[Message], ctx: mod.WorkflowContext[list[Message], str]) -> None:  # type: ignore[name-defined]
        prompt = messages[0].text if messages else ""
        await ctx.yield_output(f"research: gathering data for '{prompt}'")
        await ctx.send_message(messages)

    @mod.executor(id="answerer")  # type: ignore[misc]
    async def answerer(messages: list[Message], ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        prompt = messages[0].text if messages else ""
        await ctx.yield_output(f"final answer to '{prompt}': 42")

    built = (
        mod.WorkflowBuilder(
            start_executor=planner,
            output_from=[answerer],
            intermediate_output_from=[planner, researcher],
            name="intermediate_outputs",
        )
        .add_edge(planner, researcher)
        .add_edge(researcher, answerer)
        .build()
    )
    workflow = durable(built)
    initial = [Message(role="user", contents=["life, the universe, and everything"])]
    print("=== Streaming events (workflow.run(stream=True)) ===")
    async for event in workflow.run(initial, stream=True):
        if event.type == "intermediate":
            print(f"  [intermediate] {event.executor_id}: {event.data}")
        elif event.type == "output":
            print(f"  [output]       {event.executor_id}: {event.data}")
    print("\n=== Non-streaming run().get_outputs() ===")
    result = await workflow.run(initial)
    print(f"  outputs: {result.get_outputs()}")

    print("\n=== Embedding as a sub-workflow -- intermediates bubble up ===")
    sub = mod.WorkflowExecutor(built, id="sub")

    @mod.executor(id="parent_sink")  # type: ignore[misc]
    async def parent_sink(message: str, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        await ctx.yield_output(message)

    parent_workflow = durable(
        mod.WorkflowBuilder(start_executor=sub, output_from=[parent_sink], name="intermediate_parent")
        .add_edge(sub, parent_sink)
        .build()
    )
    async for event in parent_workflow.run(initial, stream=True):
        if event.type == "intermediate":
            print(f"  [intermediate] {event.executor_id}: {event.data}")
        elif event.type == "output":
            print(f"  [output]       {event.executor_id}: {event.data}")


# -- 03-workflows/control-flow/multi_selection_edge_group.py (the three agents scripted) --------------------

LONG_EMAIL_THRESHOLD = 100


class AnalysisResultAgent(BaseModel):
    spam_decision: Literal["NotSpam", "Spam", "Uncertain"]
    reason: str


class EmailSummaryModel(BaseModel):
    summary: str


@dataclass
class AnalysisResult:
    spam_decision: str
    reason: str
    email_length: int
    email_summary: str
    email_id: str


def summarize(messages: list[Message]) -> str:
    return json.dumps({"summary": last_user_text(messages)[:30]})


MULTI_EMAILS = {
    "short": "Hi, the meeting moved to 3pm. See you there.",
    "long": "Hello team, here are the updates for this week: the release is on track, the docs are "
    "done, and the new dashboard ships on Friday. Please review the attached notes before Monday.",
    "spam": "You won a prize! Send your bank details.",
}


async def multi_selection_edge_group(mod: Any, durable: Durable = in_process, email: str = "long") -> None:
    class DatabaseEvent(mod.WorkflowEvent):  # type: ignore[misc,name-defined]
        ...

    @mod.executor(id="store_email")  # type: ignore[misc]
    async def store_email(email_text: str, ctx: mod.WorkflowContext[mod.AgentExecutorRequest]) -> None:  # type: ignore[name-defined]
        new_email = Email(email_id=str(uuid4()), email_content=email_text)
        ctx.set_state(f"{EMAIL_STATE_PREFIX}{new_email.email_id}", new_email)
        ctx.set_state(CURRENT_EMAIL_ID_KEY, new_email.email_id)
        user = Message("user", contents=[new_email.email_content])
        await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

    @mod.executor(id="to_analysis_result")  # type: ignore[misc]
    async def to_analysis_result(
        response: mod.AgentExecutorResponse,  # type: ignore[name-defined]
        ctx: mod.WorkflowContext[AnalysisResult],  # type: ignore[name-defined]
    ) -> None:
        parsed = AnalysisResultAgent.model_validate_json(response.agent_response.text)
        email_id: str = ctx.get_state(CURRENT_EMAIL_ID_KEY)
        email: Email = ctx.get_state(f"{EMAIL_STATE_PREFIX}{email_id}")
        await ctx.send_message(
            AnalysisResult(
                spam_decision=parsed.spam_decision,
                reason=parsed.reason,
                email_length=len(email.email_content),
                email_summary="",
                email_id=email_id,
            )
        )

    @mod.executor(id="submit_to_email_assistant")  # type: ignore[misc]
    async def submit_to_email_assistant(
        analysis: AnalysisResult,
        ctx: mod.WorkflowContext[mod.AgentExecutorRequest],  # type: ignore[name-defined]
    ) -> None:
        if analysis.spam_decision != "NotSpam":
            raise RuntimeError("This executor should only handle NotSpam messages.")
        email: Email = ctx.get_state(f"{EMAIL_STATE_PREFIX}{analysis.email_id}")
        user = Message("user", contents=[email.email_content])
        await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

    @mod.executor(id="finalize_and_send")  # type: ignore[misc]
    async def finalize_and_send(response: mod.AgentExecutorResponse, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        parsed = EmailResponse.model_validate_json(response.agent_response.text)
        await ctx.yield_output(f"Email sent: {parsed.response}")

    @mod.executor(id="summarize_email")  # type: ignore[misc]
    async def summarize_email(
        analysis: AnalysisResult,
        ctx: mod.WorkflowContext[mod.AgentExecutorRequest],  # type: ignore[name-defined]
    ) -> None:
        email: Email = ctx.get_state(f"{EMAIL_STATE_PREFIX}{analysis.email_id}")
        user = Message("user", contents=[email.email_content])
        await ctx.send_message(mod.AgentExecutorRequest(messages=[user], should_respond=True))

    @mod.executor(id="merge_summary")  # type: ignore[misc]
    async def merge_summary(
        response: mod.AgentExecutorResponse,  # type: ignore[name-defined]
        ctx: mod.WorkflowContext[AnalysisResult],  # type: ignore[name-defined]
    ) -> None:
        summary = EmailSummaryModel.model_validate_json(response.agent_response.text)
        email_id: str = ctx.get_state(CURRENT_EMAIL_ID_KEY)
        email: Email = ctx.get_state(f"{EMAIL_STATE_PREFIX}{email_id}")
        await ctx.send_message(
            AnalysisResult(
                spam_decision="NotSpam",
                reason="",
                email_length=len(email.email_content),
                email_summary=summary.summary,
                email_id=email_id,
            )
        )

    @mod.executor(id="handle_spam")  # type: ignore[misc]
    async def handle_spam(analysis: AnalysisResult, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        if analysis.spam_decision == "Spam":
            await ctx.yield_output(f"Email marked as spam: {analysis.reason}")
        else:
            raise RuntimeError("This executor should only handle Spam messages.")

    @mod.executor(id="handle_uncertain")  # type: ignore[misc]
    async def handle_uncertain(analysis: AnalysisResult, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        if analysis.spam_decision == "Uncertain":
            email: Email | None = ctx.get_state(f"{EMAIL_STATE_PREFIX}{analysis.email_id}")
            await ctx.yield_output(
                f"Email marked as uncertain: {analysis.reason}. Email content: {getattr(email, 'email_content', '')}"
            )
        else:
            raise RuntimeError("This executor should only handle Uncertain messages.")

    @mod.executor(id="database_access")  # type: ignore[misc]
    async def database_access(analysis: AnalysisResult, ctx: mod.WorkflowContext[Never, str]) -> None:  # type: ignore[name-defined]
        await asyncio.sleep(0.05)
        await ctx.add_event(DatabaseEvent(type="database_event", data=f"Email {analysis.email_id} saved to database."))

    def agent(script: Callable[[list[Message]], str], name: str, fmt: type[BaseModel]) -> Any:
        client = ScriptedChatClient(script, stream_words=False)
        return mod.AgentExecutor(
            Agent(client=client, instructions="Assist.", name=name, default_options={"response_format": fmt})
        )

    email_analysis_agent = agent(detect_spam, "email_analysis_agent", AnalysisResultAgent)
    email_assistant_agent = agent(draft_reply, "email_assistant_agent", EmailResponse)
    email_summary_agent = agent(summarize, "email_summary_agent", EmailSummaryModel)

    def select_targets(analysis: AnalysisResult, target_ids: list[str]) -> list[str]:
        handle_spam_id, submit_to_email_assistant_id, summarize_email_id, handle_uncertain_id = target_ids
        if analysis.spam_decision == "Spam":
            return [handle_spam_id]
        if analysis.spam_decision == "NotSpam":
            targets = [submit_to_email_assistant_id]
            if analysis.email_length > LONG_EMAIL_THRESHOLD:
                targets.append(summarize_email_id)
            return targets
        return [handle_uncertain_id]

    workflow = durable(
        mod.WorkflowBuilder(start_executor=store_email, name="multi_selection")
        .add_edge(store_email, email_analysis_agent)
        .add_edge(email_analysis_agent, to_analysis_result)
        .add_multi_selection_edge_group(
            to_analysis_result,
            [handle_spam, submit_to_email_assistant, summarize_email, handle_uncertain],
            selection_func=select_targets,
        )
        .add_edge(submit_to_email_assistant, email_assistant_agent)
        .add_edge(email_assistant_agent, finalize_and_send)
        .add_edge(summarize_email, email_summary_agent)
        .add_edge(email_summary_agent, merge_summary)
        .add_edge(to_analysis_result, database_access, condition=lambda r: r.email_length <= LONG_EMAIL_THRESHOLD)
        .add_edge(merge_summary, database_access)
        .build()
    )
    async for event in workflow.run(MULTI_EMAILS[email], stream=True):
        if isinstance(event, DatabaseEvent):
            print(f"{event}")
        elif event.type == "output":
            if isinstance(event.data, AgentResponseUpdate):
                continue
            print(f"Workflow output: {event.data}")


# -- 03-workflows/_start-here/step2_agents_in_a_workflow.py and step3_streaming.py (one scripted client) ----


def writer_or_reviewer(messages: list[Message]) -> str:
    """The writer drafts (streamed word by word), the reviewer, seeing a draft, gives feedback."""
    if any(m.role == "assistant" for m in messages):
        return "Say who it is for."
    return "Charge ahead: fun, electric, affordable."


def writer_and_reviewer(mod: Any, name: str) -> Any:
    client = ScriptedChatClient(writer_or_reviewer)
    writer_agent = Agent(client=client, instructions="You are an excellent content writer.", name="writer")
    reviewer_agent = Agent(client=client, instructions="You are an excellent content reviewer.", name="reviewer")
    return mod.WorkflowBuilder(start_executor=writer_agent, name=name).add_edge(writer_agent, reviewer_agent).build()


async def agents_in_a_workflow(mod: Any, durable: Durable = in_process) -> None:
    workflow = durable(writer_and_reviewer(mod, "agents_in_a_workflow"))
    events = await workflow.run("Create a slogan for a new electric SUV that is affordable and fun to drive.")
    outputs = cast(list[AgentResponse], events.get_outputs())
    for output in outputs:
        print(f"{output.messages[0].author_name}: {output.text}\n")
    print("Final state:", events.get_final_state())


async def agents_streaming(mod: Any, durable: Durable = in_process) -> None:
    workflow = durable(writer_and_reviewer(mod, "agents_streaming"))
    last_author: str | None = None
    async for event in workflow.run(
        Message("user", ["Create a slogan for a new electric SUV that is affordable and fun to drive."]),
        stream=True,
    ):
        if event.type == "output" and isinstance(event.data, AgentResponseUpdate):
            update = event.data
            author = update.author_name
            if author != last_author:
                if last_author is not None:
                    print()
                print(f"{author}: {update.text}", end="", flush=True)
                last_author = author
            else:
                print(update.text, end="", flush=True)
    print()


# -- 03-workflows/agents/custom_agent_executors.py (the agents' client scripted) -----------------------------


async def custom_agent_executors(mod: Any, durable: Durable = in_process) -> None:
    class Writer(mod.Executor):  # type: ignore[misc,name-defined]
        agent: Agent

        def __init__(self, id: str = "writer"):
            self.agent = Agent(
                client=ScriptedChatClient(writer_or_reviewer), instructions="You are an excellent content writer."
            )
            super().__init__(id=id)

        @mod.handler  # type: ignore[misc]
        async def handle(self, message: Message, ctx: mod.WorkflowContext[list[Message], str]) -> None:  # type: ignore[name-defined]
            messages: list[Message] = [message]
            response = await self.agent.run(messages)
            messages.extend(response.messages)
            await ctx.send_message(messages)

    class Reviewer(mod.Executor):  # type: ignore[misc,name-defined]
        agent: Agent

        def __init__(self, id: str = "reviewer"):
            self.agent = Agent(
                client=ScriptedChatClient(writer_or_reviewer), instructions="You are an excellent content reviewer."
            )
            super().__init__(id=id)

        @mod.handler  # type: ignore[misc]
        async def handle(self, messages: list[Message], ctx: mod.WorkflowContext[list[Message], str]) -> None:  # type: ignore[name-defined]
            response = await self.agent.run(messages)
            await ctx.yield_output(response.text)

    writer = Writer()
    reviewer = Reviewer()
    workflow = durable(
        mod.WorkflowBuilder(start_executor=writer, name="custom_agent_executors").add_edge(writer, reviewer).build()
    )
    events = await workflow.run(
        Message("user", ["Create a slogan for a new electric SUV that is affordable and fun to drive."])
    )
    outputs = events.get_outputs()
    if outputs:
        print(outputs[-1])


# -- 03-workflows/checkpoint/sub_workflow_checkpoint.py ------------------------------------------------------
# Its line printing the checkpoint file's raw ``pending_request_info_events`` is left out: the file
# formats differ on purpose (docs/maf.md, "Checkpoint format"); the sample only shows it.


def _utc_now() -> datetime:
    return datetime.now()


@dataclass
class DraftTask:
    topic: str
    due: datetime
    iteration: int = 1


@dataclass
class DraftPackage:
    topic: str
    content: str
    iteration: int
    created_at: datetime = field(default_factory=_utc_now)


@dataclass
class FinalDraft:
    topic: str
    content: str
    iterations: int
    approved_at: datetime


@dataclass
class ReviewRequest:
    id: str = str(uuid4())
    topic: str = ""
    iteration: int = 1
    draft_excerpt: str = ""
    due_iso: str = ""
    reviewer_guidance: list[str] = field(default_factory=list)


@dataclass
class ReviewDecision:
    decision: str
    original_request: ReviewRequest


async def sub_workflow_checkpoint(mod: Any, storage_dir: Path, durable: Durable = in_process) -> None:
    class DraftWriter(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(id="draft_writer")

        @mod.handler  # type: ignore[misc]
        async def create_draft(self, task: DraftTask, ctx: mod.WorkflowContext[DraftPackage]) -> None:  # type: ignore[name-defined]
            draft = DraftPackage(
                topic=task.topic,
                content=(
                    f"Launch plan for {task.topic}.\n\n"
                    "- Outline the customer message.\n"
                    "- Highlight three differentiators.\n"
                    "- Close with a next-step CTA.\n"
                    f"(iteration {task.iteration})"
                ),
                iteration=task.iteration,
            )
            await ctx.send_message(draft, target_id="draft_review")

    class DraftReviewRouter(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(id="draft_review")

        @mod.handler  # type: ignore[misc]
        async def request_review(self, draft: DraftPackage, ctx: mod.WorkflowContext) -> None:  # type: ignore[name-defined]
            excerpt = draft.content.splitlines()[0]
            request = ReviewRequest(
                topic=draft.topic,
                iteration=draft.iteration,
                draft_excerpt=excerpt,
                due_iso=draft.created_at.isoformat(),
                reviewer_guidance=["Ensure tone matches launch messaging", "Confirm CTA is action-oriented"],
            )
            await ctx.request_info(request_data=request, response_type=str)

        @mod.response_handler  # type: ignore[misc]
        async def forward_decision(
            self,
            original_request: ReviewRequest,
            decision: str,
            ctx: mod.WorkflowContext[ReviewDecision],  # type: ignore[name-defined]
        ) -> None:
            await ctx.send_message(ReviewDecision(decision=decision, original_request=original_request))

    class DraftFinaliser(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(id="draft_finaliser")

        @mod.handler  # type: ignore[misc]
        async def on_review_decision(
            self,
            review_decision: ReviewDecision,
            ctx: mod.WorkflowContext[DraftTask, FinalDraft],  # type: ignore[name-defined]
        ) -> None:
            reply = review_decision.decision.strip().lower()
            original = review_decision.original_request
            topic = original.topic if original else "unknown topic"
            iteration = original.iteration if original else 1
            if reply != "approve":
                next_task = DraftTask(topic=topic, due=_utc_now() + timedelta(hours=1), iteration=iteration + 1)
                await ctx.send_message(next_task, target_id="draft_writer")
                return
            final = FinalDraft(
                topic=topic,
                content=f"Approved launch narrative for {topic} (iteration {iteration}).",
                iterations=iteration,
                approved_at=_utc_now(),
            )
            await ctx.yield_output(final)

    class LaunchCoordinator(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(id="launch_coordinator")
            self._pending_requests: dict[str, Any] = {}

        @mod.handler  # type: ignore[misc]
        async def kick_off(self, topic: str, ctx: mod.WorkflowContext[DraftTask]) -> None:  # type: ignore[name-defined]
            task = DraftTask(topic=topic, due=_utc_now() + timedelta(hours=2))
            await ctx.send_message(task)

        @mod.handler  # type: ignore[misc]
        async def collect_final(self, draft: FinalDraft, ctx: mod.WorkflowContext[None, FinalDraft]) -> None:  # type: ignore[name-defined]
            approved_at = draft.approved_at
            normalised = draft
            if isinstance(approved_at, str):
                with contextlib.suppress(ValueError):
                    parsed = datetime.fromisoformat(approved_at)
                    normalised = replace(draft, approved_at=parsed)
                    approved_at = parsed
            approved_display = approved_at.isoformat() if hasattr(approved_at, "isoformat") else str(approved_at)
            print("\n>>> Parent workflow received approved draft:")
            print(f"- Topic: {normalised.topic}")
            print(f"- Iterations: {normalised.iterations}")
            print(f"- Approved at: {approved_display}")
            print(f"- Content: {normalised.content}\n")
            await ctx.yield_output(normalised)

        @mod.handler  # type: ignore[misc]
        async def handler_sub_workflow_request(
            self,
            request: mod.SubWorkflowRequestMessage,  # type: ignore[name-defined]
            ctx: mod.WorkflowContext,  # type: ignore[name-defined]
        ) -> None:
            if not isinstance(request.source_event.data, ReviewRequest):
                raise TypeError(f"Expected 'ReviewRequest', got {type(request.source_event.data)}")
            review_request = request.source_event.data
            self._pending_requests[review_request.id] = request
            await ctx.request_info(request_data=review_request, response_type=str)

        @mod.response_handler  # type: ignore[misc]
        async def handle_request_response(
            self,
            original_request: ReviewRequest,
            response: str,
            ctx: mod.WorkflowContext[mod.SubWorkflowResponseMessage],  # type: ignore[name-defined]
        ) -> None:
            request_message = self._pending_requests.pop(original_request.id, None)
            if request_message is None:
                raise ValueError("No matching pending request found for the resource response")
            await ctx.send_message(request_message.create_response(response))

        async def on_checkpoint_save(self) -> dict[str, Any]:
            return {"pending_requests": self._pending_requests}

        async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
            self._pending_requests = state.get("pending_requests", {})

    def build_sub_workflow() -> Any:
        writer = DraftWriter()
        router = DraftReviewRouter()
        finaliser = DraftFinaliser()
        sub_workflow = (
            mod.WorkflowBuilder(start_executor=writer)
            .add_edge(writer, router)
            .add_edge(router, finaliser)
            .add_edge(finaliser, writer)
            .build()
        )
        return mod.WorkflowExecutor(sub_workflow, id="launch_subworkflow")

    def build_parent_workflow(storage: Any) -> Any:
        coordinator = LaunchCoordinator()
        sub_executor = build_sub_workflow()
        return durable(
            mod.WorkflowBuilder(start_executor=coordinator, checkpoint_storage=storage, name="sub_workflow_checkpoint")
            .add_edge(coordinator, sub_executor)
            .add_edge(sub_executor, coordinator)
            .build()
        )

    allowed = [f"{__name__}:{c.__name__}" for c in (DraftTask, DraftPackage, FinalDraft, ReviewRequest, ReviewDecision)]
    storage = mod.FileCheckpointStorage(storage_dir, allowed_checkpoint_types=allowed)
    workflow = build_parent_workflow(storage)
    print("\n=== Stage 1: run until sub-workflow requests human review ===")
    request_id: str | None = None
    async for event in workflow.run("Contoso Gadget Launch", stream=True):
        if event.type == "request_info" and request_id is None:
            request_id = event.request_id
            print(f"Captured review request id: {request_id}")
        if event.type == "status" and event.state is mod.WorkflowRunState.IDLE_WITH_PENDING_REQUESTS:
            break
    if request_id is None:
        raise RuntimeError("Sub-workflow completed without requesting review.")
    resume_checkpoint = await storage.get_latest(workflow_name=workflow.name)
    if not resume_checkpoint:
        raise RuntimeError("No checkpoints found.")
    print(f"Using checkpoint {resume_checkpoint.checkpoint_id} at iteration {resume_checkpoint.iteration_count}")

    print("\n=== Stage 2: resume from checkpoint ===")
    workflow2 = build_parent_workflow(storage)
    request_info_event: Any = None
    async for event in workflow2.run(checkpoint_id=resume_checkpoint.checkpoint_id, stream=True):
        if event.type == "request_info":
            request_info_event = event
    if request_info_event is None:
        raise RuntimeError("No request_info_event captured.")

    print("\n=== Stage 3: approve draft ==")
    output_event: Any = None
    async for event in workflow2.run(stream=True, responses={request_info_event.request_id: "approve"}):
        if event.type == "output":
            output_event = event
    if output_event is None:
        raise RuntimeError("Workflow did not complete after resume.")
    print("\n=== Final Draft (from resumed run) ===")
    print(output_event.data)


# -- 03-workflows/parallelism/map_reduce_and_visualization.py (its text and temporary folder given) ---------

STATE_DATA_KEY = "data_to_be_processed"
MAP_REDUCE_TEXT = """The quick brown fox jumps over the lazy dog.
The dog sleeps; the fox runs on.
A lazy afternoon for a quick fox and a brown dog."""


class SplitCompleted: ...


@dataclass
class MapCompleted:
    file_path: str


@dataclass
class ShuffleCompleted:
    file_path: str
    reducer_id: str


@dataclass
class ReduceCompleted:
    file_path: str


async def map_reduce_and_visualization(mod: Any, temp_dir: Path, durable: Durable = in_process) -> None:
    TEMP_DIR = str(temp_dir)

    class Split(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, map_executor_ids: list[str], id: str | None = None):
            super().__init__(id=id or "split")
            self._map_executor_ids = map_executor_ids

        @mod.handler  # type: ignore[misc]
        async def split(self, data: str, ctx: mod.WorkflowContext[SplitCompleted]) -> None:  # type: ignore[name-defined]
            word_list = self._preprocess(data)
            ctx.set_state(STATE_DATA_KEY, word_list)
            map_executor_count = len(self._map_executor_ids)
            chunk_size = len(word_list) // map_executor_count

            async def _process_chunk(i: int) -> None:
                start_index = i * chunk_size
                end_index = start_index + chunk_size if i < map_executor_count - 1 else len(word_list)
                ctx.set_state(self._map_executor_ids[i], (start_index, end_index))
                await ctx.send_message(SplitCompleted(), self._map_executor_ids[i])

            tasks = [asyncio.create_task(_process_chunk(i)) for i in range(map_executor_count)]
            await asyncio.gather(*tasks)

        def _preprocess(self, data: str) -> list[str]:
            line_list = [line.strip() for line in data.splitlines() if line.strip()]
            return [word for line in line_list for word in line.split() if word]

    class Map(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def map(self, _: SplitCompleted, ctx: mod.WorkflowContext[MapCompleted]) -> None:  # type: ignore[name-defined]
            data_to_be_processed: list[str] = ctx.get_state(STATE_DATA_KEY)
            chunk_start, chunk_end = ctx.get_state(self.id)
            results = [(item, 1) for item in data_to_be_processed[chunk_start:chunk_end]]
            file_path = os.path.join(TEMP_DIR, f"map_results_{self.id}.txt")
            with open(file_path, "w") as f:
                f.writelines([f"{item}: {count}\n" for item, count in results])
            await ctx.send_message(MapCompleted(file_path))

    class Shuffle(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, reducer_ids: list[str], id: str | None = None):
            super().__init__(id=id or "shuffle")
            self._reducer_ids = reducer_ids

        @mod.handler  # type: ignore[misc]
        async def shuffle(self, data: list[MapCompleted], ctx: mod.WorkflowContext[ShuffleCompleted]) -> None:  # type: ignore[name-defined]
            chunks = await self._preprocess(data)

            async def _process_chunk(chunk: list[tuple[str, list[int]]], index: int) -> None:
                file_path = os.path.join(TEMP_DIR, f"shuffle_results_{index}.txt")
                with open(file_path, "w") as f:
                    f.writelines([f"{key}: {value}\n" for key, value in chunk])
                await ctx.send_message(ShuffleCompleted(file_path, self._reducer_ids[index]))

            tasks = [asyncio.create_task(_process_chunk(chunk, i)) for i, chunk in enumerate(chunks)]
            await asyncio.gather(*tasks)

        async def _preprocess(self, data: list[MapCompleted]) -> list[list[tuple[str, list[int]]]]:
            map_results: list[tuple[str, int]] = []
            for result in data:
                with open(result.file_path) as f:
                    map_results.extend(
                        [(line.strip().split(": ")[0], int(line.strip().split(": ")[1])) for line in f.readlines()]
                    )
            intermediate_results: defaultdict[str, list[int]] = defaultdict(list)
            for key, value in map_results:
                intermediate_results[key].append(value)
            aggregated_results = [(key, values) for key, values in intermediate_results.items()]
            aggregated_results.sort(key=lambda x: x[0])
            reduce_executor_count = len(self._reducer_ids)
            chunk_size = len(aggregated_results) // reduce_executor_count
            remaining = len(aggregated_results) % reduce_executor_count
            chunks = [
                aggregated_results[i : i + chunk_size]
                for i in range(0, len(aggregated_results) - remaining, chunk_size)
            ]
            if remaining > 0:
                chunks[-1].extend(aggregated_results[-remaining:])
            return chunks

    class Reduce(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def _execute(self, data: ShuffleCompleted, ctx: mod.WorkflowContext[ReduceCompleted]) -> None:  # type: ignore[name-defined]
            if data.reducer_id != self.id:
                return
            with open(data.file_path) as f:
                lines = f.readlines()
            reduced_results: dict[str, int] = defaultdict(int)
            for line in lines:
                key, value = line.split(": ")
                reduced_results[key] = sum(ast.literal_eval(value))
            file_path = os.path.join(TEMP_DIR, f"reduced_results_{self.id}.txt")
            with open(file_path, "w") as f:
                f.writelines([f"{key}: {value}\n" for key, value in reduced_results.items()])
            await ctx.send_message(ReduceCompleted(file_path))

    class CompletionExecutor(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def complete(self, data: list[ReduceCompleted], ctx: mod.WorkflowContext[Never, list[str]]) -> None:  # type: ignore[name-defined]
            await ctx.yield_output([result.file_path for result in data])

    mappers = [Map(id=f"map_executor_{i}") for i in range(3)]
    split_data_executor = Split([m.id for m in mappers], id="split_data_executor")
    reducers = [Reduce(id=f"reduce_executor_{i}") for i in range(4)]
    shuffle_executor = Shuffle([r.id for r in reducers], id="shuffle_executor")
    completion_executor = CompletionExecutor(id="completion_executor")
    built = (
        mod.WorkflowBuilder(start_executor=split_data_executor, name="map_reduce")
        .add_fan_out_edges(split_data_executor, mappers)
        .add_fan_in_edges(mappers, shuffle_executor)
        .add_fan_out_edges(shuffle_executor, reducers)
        .add_fan_in_edges(reducers, completion_executor)
        .build()
    )
    print("Generating workflow visualization...")
    viz = mod.WorkflowViz(built)
    print("Mermaid string: \n=======")
    print(viz.to_mermaid())
    print("=======")
    print("DiGraph string: \n=======")
    print(viz.to_digraph())
    print("=======")
    workflow = durable(built)
    async for event in workflow.run(MAP_REDUCE_TEXT, stream=True):
        print(f"Event: {event}")
        if event.type == "output":
            print(f"Final Output: {event.data}")


# -- 03-workflows/composition/sub_workflow_request_interception.py -------------------------------------------


@dataclass
class SanitizedEmailResult:
    original: str
    sanitized: str
    is_valid: bool


@dataclass
class Letter:
    """The sample's ``Email`` (named apart from the switch-case sample's)."""

    recipient: str
    subject: str
    body: str


async def sub_workflow_request_interception(mod: Any, durable: Durable = in_process) -> None:
    """The sample as written (the parent intercepts its sub-workflow's domain checks).

    Its last line per email prints the caller's own ``Email``, which Agent Framework's
    orchestrator rewrote in place (messages are passed by reference there); here a message
    is a copy (docs/maf.md, "Mutating a received message"), so that line shows the address
    as the caller gave it.
    """

    def build_email_address_validation_workflow() -> Any:
        class EmailSanitizer(mod.Executor):  # type: ignore[misc,name-defined]
            @mod.handler  # type: ignore[misc]
            async def handle(self, email_address: str, ctx: mod.WorkflowContext[SanitizedEmailResult]) -> None:  # type: ignore[name-defined]
                sanitized = email_address.strip()
                print(f"Sanitized email address: '{sanitized}'")
                await ctx.send_message(
                    SanitizedEmailResult(original=email_address, sanitized=sanitized, is_valid=False)
                )

        class EmailFormatValidator(mod.Executor):  # type: ignore[misc,name-defined]
            @mod.handler  # type: ignore[misc]
            async def handle(
                self,
                partial_result: SanitizedEmailResult,
                ctx: mod.WorkflowContext[SanitizedEmailResult, SanitizedEmailResult],  # type: ignore[name-defined]
            ) -> None:
                if "@" not in partial_result.sanitized or "." not in partial_result.sanitized.split("@")[-1]:
                    print(f"Invalid email format: '{partial_result.sanitized}'")
                    await ctx.yield_output(replace(partial_result, is_valid=False))
                    return
                print(f"Validated email format: '{partial_result.sanitized}'")
                await ctx.send_message(replace(partial_result, is_valid=False))

        class DomainValidator(mod.Executor):  # type: ignore[misc,name-defined]
            def __init__(self, id: str):
                super().__init__(id=id)
                self._pending_domains: dict[str, SanitizedEmailResult] = {}

            @mod.handler  # type: ignore[misc]
            async def handle(self, partial_result: SanitizedEmailResult, ctx: mod.WorkflowContext) -> None:  # type: ignore[name-defined]
                domain = partial_result.sanitized.split("@")[-1]
                print(f"Validating domain: '{domain}'")
                self._pending_domains[domain] = partial_result
                await ctx.request_info(request_data=domain, response_type=bool)

            @mod.response_handler  # type: ignore[misc]
            async def handle_domain_validation_response(
                self,
                original_request: str,
                is_valid: bool,
                ctx: mod.WorkflowContext[Never, SanitizedEmailResult],  # type: ignore[name-defined]
            ) -> None:
                if original_request not in self._pending_domains:
                    raise ValueError(f"Received response for unknown domain: '{original_request}'")
                partial_result = self._pending_domains.pop(original_request)
                print(f"Domain '{original_request}' is {'valid' if is_valid else 'invalid'}.")
                await ctx.yield_output(replace(partial_result, is_valid=is_valid))

        sanitizer = EmailSanitizer(id="email_sanitizer")
        validator = EmailFormatValidator(id="email_format_validator")
        domains = DomainValidator(id="domain_validator")
        return (
            mod.WorkflowBuilder(start_executor=sanitizer)
            .add_edge(sanitizer, validator)
            .add_edge(validator, domains)
            .build()
        )

    class SmartEmailOrchestrator(mod.Executor):  # type: ignore[misc,name-defined]
        def __init__(self, id: str, approved_domains: set[str]):
            super().__init__(id=id)
            self._approved_domains = approved_domains
            self._approved_recipients: set[str] = set()
            self._disapproved_recipients: set[str] = set()
            self._pending_emails: dict[str, Letter] = {}

        @mod.handler  # type: ignore[misc]
        async def run(self, email: Letter, ctx: mod.WorkflowContext[Letter | str, bool]) -> None:  # type: ignore[name-defined]
            recipient = email.recipient
            if recipient in self._approved_recipients:
                print(f"Recipient '{recipient}' has been previously approved.")
                await ctx.send_message(email)
                return
            if recipient in self._disapproved_recipients:
                print(f"Blocking email to previously disapproved recipient: '{recipient}'")
                await ctx.yield_output(False)
                return
            print(f"Validating new recipient email address: '{recipient}'")
            self._pending_emails[recipient] = email
            await ctx.send_message(recipient)

        @mod.handler  # type: ignore[misc]
        async def handler_domain_validation_request(
            self,
            request: mod.SubWorkflowRequestMessage,  # type: ignore[name-defined]
            ctx: mod.WorkflowContext[mod.SubWorkflowResponseMessage],  # type: ignore[name-defined]
        ) -> None:
            if not isinstance(request.source_event.data, str):
                raise TypeError(f"Expected domain string, got {type(request.source_event.data)}")
            domain = request.source_event.data
            is_valid = domain in self._approved_domains
            print(f"External domain validation for '{domain}': {'valid' if is_valid else 'invalid'}")
            await ctx.send_message(request.create_response(is_valid), target_id=request.executor_id)

        @mod.handler  # type: ignore[misc]
        async def handle_validation_result(
            self,
            result: SanitizedEmailResult,
            ctx: mod.WorkflowContext[Letter, bool],  # type: ignore[name-defined]
        ) -> None:
            email = self._pending_emails.pop(result.original)
            email.recipient = result.sanitized  # Use the sanitized email address
            if result.is_valid:
                print(f"Email address '{result.original}' is valid.")
                self._approved_recipients.add(result.original)
                await ctx.send_message(email)
            else:
                print(f"Email address '{result.original}' is invalid. Blocking email.")
                self._disapproved_recipients.add(result.original)
                await ctx.yield_output(False)

    class EmailDelivery(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler  # type: ignore[misc]
        async def handle(self, email: Letter, ctx: mod.WorkflowContext[Never, bool]) -> None:  # type: ignore[name-defined]
            print(f"Sending email to '{email.recipient}' with subject '{email.subject}'")
            await asyncio.sleep(0)  # the sample's 1 s of "network delay"
            print(f"Email sent to '{email.recipient}' successfully.")
            await ctx.yield_output(True)

    orchestrator = SmartEmailOrchestrator(
        id="smart_email_orchestrator", approved_domains={"example.com", "company.com"}
    )
    delivery = EmailDelivery(id="email_delivery")
    validation = mod.WorkflowExecutor(build_email_address_validation_workflow(), id="email_validation_workflow")
    workflow = durable(
        mod.WorkflowBuilder(start_executor=orchestrator, name="email_interception")
        .add_edge(orchestrator, validation)
        .add_edge(validation, orchestrator)
        .add_edge(orchestrator, delivery)
        .build()
    )
    test_emails = [
        Letter(recipient="user1@example.com", subject="Hello User1", body="This is a test email."),
        Letter(recipient=" user2@invalid", subject="Hello User2", body="This is a test email."),
        Letter(recipient="  user3@company.com  ", subject="Hello User3", body="This is a test email."),
        Letter(recipient="user4@unknown.com", subject="Hello User4", body="This is a test email."),
        Letter(recipient="user1@example.com", subject="Hello User1", body="This is a test email."),
        Letter(recipient=" user2@invalid", subject="Hello User2", body="This is a test email."),
    ]
    for email in test_emails:
        print(f"\nProcessing email to '{email.recipient}'")
        async for event in workflow.run(email, stream=True):
            if event.type == "output":
                print(f"Final result for '{email.recipient}': {'Delivered' if event.data else 'Blocked'}")
