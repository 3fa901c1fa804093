"""LlamaIndex programs the tools' tests host in worker processes, as a user hosts theirs:

    temporal-workflows worker --workflow tests.integration.llama_tools_app:hitl ...

``hitl``, ``wait`` and ``streaming`` are LlamaIndex's own documented examples, unchanged
(``tests/integration/llama_docs_examples.py``: human in the loop, with an ``InputRequiredEvent`` a step
returns and with ``ctx.wait_for_event``; streaming); ``review`` starts with a typed ``StartEvent`` (a field
with a default) and waits for a typed ``HumanResponseEvent`` (so a wrong shape has something to be refused by);
``broken`` fails as LlamaIndex's error-text case does.
"""

from __future__ import annotations

from pydantic import Field
from workflows import Context, Workflow, step
from workflows.events import HumanResponseEvent, InputRequiredEvent, StartEvent, StopEvent

from tests.integration.llama_docs_examples import HumanInTheLoopWorkflow, StreamingWorkflow, WaitWorkflow

hitl = HumanInTheLoopWorkflow(timeout=None)
"""LlamaIndex's human-in-the-loop example; without a timeout, as a run that waits for a person is built."""
wait = WaitWorkflow(timeout=None)
streaming = StreamingWorkflow(timeout=120)


class ReviewStart(StartEvent):
    topic: str
    rounds: int = 1


class Approval(HumanResponseEvent):
    approved: bool
    score: int = Field(ge=1, le=5)


class ReviewWorkflow(Workflow):
    @step
    async def ask(self, ctx: Context, ev: ReviewStart) -> InputRequiredEvent:
        await ctx.store.set("topic", ev.topic)
        return InputRequiredEvent(prefix=f"Review {ev.topic}")

    @step
    async def decide(self, ctx: Context, ev: Approval) -> StopEvent:
        await ctx.store.set("score", ev.score)
        return StopEvent(result=f"{'approved' if ev.approved else 'rejected'} ({ev.score}/5)")


review = ReviewWorkflow(timeout=None)


class BrokenWorkflow(Workflow):
    @step
    async def explode(self, ev: StartEvent) -> StopEvent:
        raise KeyError("missing-key")


broken = BrokenWorkflow(timeout=60)

SPECS = [f"tests.integration.llama_tools_app:{name}" for name in ("hitl", "wait", "streaming", "review", "broken")]
"""Every program here, as ``--workflow`` arguments name them."""
