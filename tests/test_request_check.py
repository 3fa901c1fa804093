"""``build()`` checks that every ``request_info`` a handler makes has a response handler for each answer type."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, Never

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    Executor,
    RequestTimedOut,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)
from temporal_workflows.errors import GraphValidationError, InvalidResponseError


class Ask(BaseModel):
    question: str


class Answer(BaseModel):
    approved: bool


class Other(BaseModel):
    note: str


class TimedAskerTypedNarrowly(Executor):
    @handler
    async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Ask(question=text), Answer, timeout=timedelta(days=2))

    @response_handler
    async def on(self, request: Ask, answer: Answer, ctx: WorkflowContext[Never, str]) -> None:
        await ctx.yield_output(str(answer.approved))


class TimedAsker(Executor):
    @handler
    async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Ask(question=text), Answer, timeout=timedelta(days=2))

    @response_handler
    async def on(self, request: Ask, answer: Answer | RequestTimedOut, ctx: WorkflowContext[Never, str]) -> None:
        await ctx.yield_output("timed out" if isinstance(answer, RequestTimedOut) else str(answer.approved))


class FailingAsker(TimedAskerTypedNarrowly):
    @handler
    async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Ask(question=text), Answer, timeout=timedelta(days=2), on_timeout="fail")


class UntimedAsker(TimedAskerTypedNarrowly):
    @handler
    async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Ask(question=text), Answer)


class NoHandlerForItsRequest(TimedAsker):
    @handler
    async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Other(note=text), Answer)


class DynamicAsker(TimedAskerTypedNarrowly):
    response: Any = Answer

    @handler
    async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Ask(question=text), self.response, timeout=timedelta(days=2))


def build(ex: Executor) -> Any:
    return WorkflowBuilder(start_executor=ex, name="asks").build()


def test_a_timed_request_whose_handler_cannot_take_request_timed_out_fails_at_build() -> None:
    with pytest.raises(GraphValidationError) as e:
        build(TimedAskerTypedNarrowly("asker"))
    message = str(e.value)
    # the request, the asking handler, the response handler and the missing type, and the fix
    assert "request_info(Ask, Answer, timeout=...)" in message and "handler 'ask'" in message
    assert "@response_handler 'on' gets a RequestTimedOut" in message
    assert "Answer | RequestTimedOut" in message and "on_timeout='fail'" in message


@pytest.mark.parametrize("ex", [TimedAsker, FailingAsker, UntimedAsker, DynamicAsker])
def test_requests_every_answer_of_which_has_a_handler_build(ex: type[Executor]) -> None:
    build(ex("asker"))  # including one whose response type the source does not name: not judged


def test_a_request_no_response_handler_takes_fails_at_build() -> None:
    with pytest.raises(GraphValidationError, match=r"no @response_handler for Other requests"):
        build(NoHandlerForItsRequest("asker"))


def test_an_executor_defined_in_a_function_is_checked_too() -> None:
    class LocalAnswer(BaseModel):
        ok: bool

    class Local(Executor):
        @handler
        async def ask(self, text: str, ctx: WorkflowContext[Never]) -> None:
            await ctx.request_info(Ask(question=text), LocalAnswer, timeout=5)

        @response_handler
        async def on(self, request: Ask, answer: LocalAnswer, ctx: WorkflowContext[Never, str]) -> None: ...

    with pytest.raises(GraphValidationError, match=re.escape("annotate the response as LocalAnswer | RequestTimedOut")):
        build(Local("local"))


async def test_a_wrong_answer_names_the_expected_response_type_not_request_timed_out_fields() -> None:
    workflow = build(TimedAsker("asker"))
    first = await workflow.run("publish?")
    [request] = first.get_request_info_events()
    with pytest.raises(InvalidResponseError) as e:
        await workflow.run(responses={request.request_id: {"approve": True}})
    message = str(e.value)
    assert "expected Answer" in message and "approved: Field required" in message
    assert "deadline" not in message and "RequestTimedOut" not in message
