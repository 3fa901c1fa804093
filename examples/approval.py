"""Drafting with human approval and a rework loop: ``python -m examples.approval [--interactive]``.

    drafter ──▶ reviewer ──(human: ReviewDecision)──▶ publisher
       ▲            │ rejected with feedback (at most ``max_rounds`` drafts)
       └────────────┘

The reviewer asks with ``ctx.request_info(ReviewRequest, ReviewDecision)``; the run idles
until the answer comes, then ``@response_handler`` publishes or sends a ``Revision`` back.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Literal, Never

from pydantic import BaseModel

from temporal_workflows import Executor, Workflow, WorkflowBuilder, WorkflowContext, handler, response_handler
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.events import WorkflowOutputEvent as Output


class ArticleRequest(BaseModel):
    topic: str
    max_rounds: int = 3


class Draft(BaseModel):
    topic: str
    text: str
    round: int
    max_rounds: int


class Revision(BaseModel):
    draft: Draft
    feedback: str


class ReviewRequest(BaseModel):
    draft: Draft
    question: str = "Publish this draft?"


class ReviewDecision(BaseModel):
    approved: bool
    feedback: str = ""


class Publication(BaseModel):
    status: Literal["published", "abandoned"]
    text: str
    rounds: int


def fake_llm_write(topic: str, previous: str | None = None, feedback: str = "") -> str:
    """Deterministic stand-in for a drafting model."""
    if previous is None:
        return f"{topic}: durable workflows survive crashes and wait for people."
    text = f"{previous} Revised after review ({feedback})."
    return f"{text} Sources: Temporal docs." if "source" in feedback.lower() else text


class Drafter(Executor):
    @handler
    async def first_draft(self, req: ArticleRequest, ctx: WorkflowContext[Draft]) -> None:
        await ctx.send_message(
            Draft(topic=req.topic, text=fake_llm_write(req.topic), round=1, max_rounds=req.max_rounds)
        )

    @handler
    async def rework(self, rev: Revision, ctx: WorkflowContext[Draft]) -> None:
        text = fake_llm_write(rev.draft.topic, rev.draft.text, rev.feedback)
        await ctx.send_message(rev.draft.model_copy(update={"text": text, "round": rev.draft.round + 1}))


class Reviewer(Executor):
    @handler
    async def review(self, draft: Draft, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(ReviewRequest(draft=draft), ReviewDecision)

    @response_handler
    async def on_decision(
        self, request: ReviewRequest, decision: ReviewDecision, ctx: WorkflowContext[Draft | Revision, Publication]
    ) -> None:
        draft = request.draft
        ctx.set_state("reviews", [*ctx.get_state("reviews", []), {"round": draft.round, **decision.model_dump()}])
        if decision.approved:
            await ctx.send_message(draft)  # on the reviewer's edges only the publisher takes a Draft
        elif draft.round < draft.max_rounds:
            await ctx.send_message(Revision(draft=draft, feedback=decision.feedback or "improve it"))
        else:
            await ctx.yield_output(Publication(status="abandoned", text=draft.text, rounds=draft.round))


class Publisher(Executor):
    @handler
    async def publish(self, draft: Draft, ctx: WorkflowContext[Never, Publication]) -> None:
        await ctx.yield_output(Publication(status="published", text=draft.text, rounds=draft.round))


def build() -> Workflow:
    drafter, reviewer, publisher = Drafter("drafter"), Reviewer("reviewer"), Publisher("publisher")
    return (
        WorkflowBuilder(start_executor=drafter, name="approval", description="draft, human review, rework, publish")
        .add_edge(drafter, reviewer)
        .add_edge(reviewer, drafter)
        .add_edge(reviewer, publisher)
        .build()
    )


workflow = build()
SAMPLE_INPUT = ArticleRequest(topic="Human-in-the-loop agents")


def auto_answer(request: Any) -> ReviewDecision:
    """A reviewer policy for a RequestInfoEvent: approve drafts that cite sources, else ask for them."""
    draft = ReviewRequest.model_validate(request.data).draft  # a model in process; a dict from a Temporal client
    ok = "Sources:" in draft.text
    decision = ReviewDecision(approved=ok, feedback="" if ok else "please cite your sources")
    print(f"  reviewer answers {request.request_id} (round {draft.round}): {decision.model_dump()}")
    return decision


def ask_human(request: Any) -> ReviewDecision:
    review = ReviewRequest.model_validate(request.data)
    print(f"\n--- draft, round {review.draft.round} ({request.request_id}) ---\n{review.draft.text}")
    if input(f"{review.question} [y/N] ").strip().lower().startswith("y"):
        return ReviewDecision(approved=True)
    return ReviewDecision(approved=False, feedback=input("Feedback: "))


async def run(interactive: bool = False) -> list[Publication]:
    wf, outputs = build(), []
    events = wf.run(SAMPLE_INPUT, stream=True)
    while True:
        asked: list[RequestInfoEvent] = []
        async for ev in events:
            print(f"[{ev.type}] {ev.model_dump(mode='json', exclude={'type', 'data', 'response_schema'})}")
            asked += [ev] if isinstance(ev, RequestInfoEvent) else []
            outputs += [ev.data] if isinstance(ev, Output) else []
        if not asked:
            return outputs
        answer = ask_human if interactive else auto_answer
        events = wf.run(responses={r.request_id: answer(r) for r in asked}, stream=True)


def main(argv: list[str] | None = None) -> None:
    for pub in asyncio.run(run(interactive="--interactive" in (sys.argv[1:] if argv is None else argv))):
        print(f"\n{pub.status.upper()} after {pub.rounds} round(s):\n{pub.text}")


if __name__ == "__main__":
    main()
