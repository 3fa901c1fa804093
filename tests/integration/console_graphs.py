"""Graphs the console's tests run: a draft reviewed by a person (a validated form), a chatty one (10,000
events), a form whose answer must arrive exactly as typed, and a graph whose executor id is markup."""

from __future__ import annotations

import asyncio
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from temporal_workflows import Executor, WorkflowBuilder, WorkflowContext, executor, handler, response_handler
from temporal_workflows._live import StepProgressEvent


class Draft(BaseModel):
    topic: str = Field(min_length=1, max_length=80)
    words: int = Field(default=100, ge=10, le=1000)


class ForReview(BaseModel):
    topic: str
    text: str


class Review(BaseModel):
    approved: bool
    score: int = Field(ge=1, le=5, description="1 (poor) to 5 (ready)")
    comment: str = ""

    @model_validator(mode="after")
    def _rejection_says_why(self) -> Review:
        # A rule the JSON schema cannot carry: the page lets it through, the run refuses it.
        if not self.approved and not self.comment.strip():
            raise ValueError("a rejection needs a comment saying why")
        return self


@executor(id="outline")
async def outline(draft: Draft, ctx: WorkflowContext[Draft]) -> None:
    ctx.set_state("topic", draft.topic)
    await ctx.send_message(draft)


class Writer(Executor):
    @handler
    async def write(self, draft: Draft, ctx: WorkflowContext) -> None:
        text = f"{draft.words} words on {draft.topic}"
        ctx.set_state("draft", text)
        await ctx.request_info(ForReview(topic=draft.topic, text=text), Review)

    @response_handler
    async def reviewed(self, original: ForReview, review: Review, ctx: WorkflowContext[str]) -> None:
        verdict = "approved" if review.approved else "rejected"
        await ctx.send_message(f"{original.topic}: {verdict} ({review.score}/5) {review.comment}".strip())


@executor(id="publish")
async def publish(verdict: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(verdict)


writer = Writer("writer")
review = WorkflowBuilder(start_executor=outline, name="console_review").add_chain([outline, writer, publish]).build()


class Chatter(BaseModel):
    events: int = Field(default=10_000, ge=1, le=200_000)


@executor(id="chatter")
async def chatter(spec: Chatter, ctx: WorkflowContext[None, int]) -> None:
    for i in range(spec.events):
        await ctx.add_event(StepProgressEvent(message=f"event {i + 1}"))
        if i % 500 == 499:  # bursts: one tight loop of 10,000 overflows a stream batch (issue #23 item 5)
            await asyncio.sleep(0.02)
    await ctx.yield_output(spec.events)


chatty = WorkflowBuilder(start_executor=chatter, name="console_chatty").build()


class Exact(BaseModel):
    """An answer whose every field the page must send exactly as typed, or leave to the run to check."""

    model_config = ConfigDict(regex_engine="python-re")  # Python's regex syntax: backreferences, \A, \Z

    confirm: str = Field(pattern=r"(?i)^yes$", description="type yes (any case)")
    code: str = Field(pattern=r"\A[A-Z]{2}(?P<n>[0-9])(?P=n)\Z", description="two capitals, a digit twice")
    digits: str = Field(pattern=r"^\d+$", description="digits (Unicode ones too)")
    big: int
    price: Decimal
    when: date
    at: datetime


class Asker(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info({"topic": topic}, Exact)

    @response_handler
    async def answered(self, asked: dict[str, Any], a: Exact, ctx: WorkflowContext[None, dict[str, str]]) -> None:
        await ctx.yield_output(
            {
                "confirm": a.confirm,
                "code": a.code,
                "digits": a.digits,
                "big": str(a.big),
                "price": str(a.price),
                "when": a.when.isoformat(),
                "at": a.at.isoformat(),
            }
        )


forms = WorkflowBuilder(start_executor=Asker("asker"), name="console_forms").build()

MARKUP_ID = "<img src=http://127.0.0.1:9/console-picture-fetch.png>"
"""An executor id that is markup: drawn as text, it fetches nothing."""


class Markup(Executor):
    @handler
    async def ask(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info({"topic": topic}, bool)

    @response_handler
    async def answered(self, asked: dict[str, Any], ok: bool, ctx: WorkflowContext[None, bool]) -> None:
        await ctx.yield_output(ok)


markup = WorkflowBuilder(start_executor=Markup(MARKUP_ID), name="console_markup").build()


def all_workflows() -> list:  # type: ignore[type-arg]
    return [review, chatty, forms, markup]
