"""Fan-out / fan-in research pipeline.

    planner ──fan-out──▶ background, market, risks ──fan-in──▶ writer

The planner turns a topic into one question per researcher. The three
researchers run in the same superstep (in parallel); each appends its finding
to the ``findings`` state key, which has the ``"append"`` reducer so the three
writes combine deterministically, and sends a ``Finding``. The writer receives
``list[Finding]`` once all three have reported and yields a ``Report``.

Run it: ``python -m examples.research``
"""

from __future__ import annotations

import asyncio
import hashlib

from pydantic import BaseModel

from temporal_workflows import Executor, Workflow, WorkflowBuilder, WorkflowContext, WorkflowEvent, executor, handler
from temporal_workflows.events import WorkflowOutputEvent as Output

RESEARCHERS = {
    "background": "What is the history and current state of {topic}?",
    "market": "Who uses {topic} today, and who competes with it?",
    "risks": "What can go wrong when adopting {topic}?",
}


class ResearchRequest(BaseModel):
    topic: str
    audience: str = "engineering leadership"


class ResearchPlan(BaseModel):
    topic: str
    audience: str
    questions: dict[str, str]  # researcher id -> question


class Finding(BaseModel):
    researcher: str
    question: str
    summary: str
    confidence: float


class Report(BaseModel):
    topic: str
    audience: str
    sections: list[Finding]
    confidence: float
    text: str


def fake_llm(prompt: str) -> tuple[str, float]:
    """Deterministic stand-in for a model call: a summary and a confidence."""
    digest = hashlib.sha256(prompt.encode()).digest()
    return f"{prompt.rstrip('?')}: {2 + digest[1] % 4} sources agree.", round(0.6 + digest[0] / 255 * 0.35, 2)


@executor(id="planner")
async def planner(request: ResearchRequest, ctx: WorkflowContext[ResearchPlan]) -> None:
    ctx.set_state("request", request)
    questions = {rid: q.format(topic=request.topic) for rid, q in RESEARCHERS.items()}
    await ctx.send_message(ResearchPlan(topic=request.topic, audience=request.audience, questions=questions))


class Researcher(Executor):
    """One researcher per focus; its id picks its question from the plan."""

    @handler
    async def research(self, plan: ResearchPlan, ctx: WorkflowContext[Finding]) -> None:
        question = plan.questions[self.id]
        summary, confidence = fake_llm(f"[{plan.audience}] {question}")
        finding = Finding(researcher=self.id, question=question, summary=summary, confidence=confidence)
        ctx.set_state("findings", [finding])  # "append" reducer: concurrent writes are combined
        await ctx.send_message(finding)


@executor(id="writer")
async def writer(findings: list[Finding], ctx: WorkflowContext[None, Report]) -> None:
    request: ResearchRequest = ctx.get_state("request")
    confidence = round(sum(f.confidence for f in findings) / len(findings), 3)
    body = "\n".join(f"## {f.researcher}\n{f.summary}" for f in findings)
    text = f"# {request.topic} (for {request.audience})\n{body}"
    report = Report(topic=request.topic, audience=request.audience, sections=findings, confidence=confidence, text=text)
    await ctx.yield_output(report)


def build() -> Workflow:
    researchers = [Researcher(rid) for rid in RESEARCHERS]
    return (
        WorkflowBuilder(start_executor=planner, name="research", description="fan-out/fan-in research")
        .add_fan_out_edges(planner, researchers)
        .add_fan_in_edges(researchers, writer)
        .add_state_reducer("findings", "append")
        .build()
    )


workflow = build()
SAMPLE_INPUT = ResearchRequest(topic="durable execution for AI agents")


def show(event: WorkflowEvent) -> None:
    if isinstance(event, Output):
        print(f"\n{event.data.text}\n\n(confidence {event.data.confidence})\n")
    else:
        print(f"[{event.type}] {event.model_dump(mode='json', exclude={'type'}, exclude_none=True)}")


async def run() -> None:
    async for event in build().run(SAMPLE_INPUT, stream=True):
        show(event)


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
