"""A refine loop that stops once a critic's score reaches a threshold: ``python -m examples.counter_loop``.

    refiner ──▶ critic ──switch-case──▶ finalizer   (Case: target_reached)
       ▲                   │
       └──── Default ──────┘

Each round the editor "model" fixes one weakness and the judge "model" scores the text.
Scores accumulate in state (an "append" reducer); the round count is the refiner's private state.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from temporal_workflows import Case, Default, Executor, Workflow, WorkflowBuilder, WorkflowContext, executor, handler
from temporal_workflows.events import WorkflowOutputEvent as Output

# What the critic looks for, and the edit the editor makes when it is missing.
CRITERIA = {
    "clear": "It defines its terms up front (clear).",
    "concise": "It drops filler words (concise).",
    "cited": "It cites the Temporal docs (cited).",
    "tested": "It links the replay tests (tested).",
}


class RefineTask(BaseModel):
    text: str
    target_score: float = 0.75
    max_rounds: int = 8


class Candidate(BaseModel):
    task: RefineTask
    text: str
    round: int


class Scored(Candidate):
    score: float


class FinalAnswer(BaseModel):
    text: str
    score: float
    rounds: int
    reached_target: bool


def fake_critic(text: str) -> float:
    """Deterministic stand-in for an LLM judge: the share of criteria the text meets."""
    return sum(f"({name})" in text for name in CRITERIA) / len(CRITERIA)


def fake_editor(text: str) -> str:
    """Deterministic stand-in for an editing model: fix the first unmet criterion."""
    missing = [edit for name, edit in CRITERIA.items() if f"({name})" not in text]
    return f"{text} {missing[0]}" if missing else text


class Refiner(Executor):
    @handler
    async def start(self, task: RefineTask, ctx: WorkflowContext[Candidate]) -> None:
        await self._refine(task, task.text, ctx)

    @handler
    async def again(self, scored: Scored, ctx: WorkflowContext[Candidate]) -> None:
        await self._refine(scored.task, scored.text, ctx)

    async def _refine(self, task: RefineTask, text: str, ctx: WorkflowContext[Candidate]) -> None:
        rounds = ctx.get_executor_state("rounds", 0) + 1
        ctx.set_executor_state("rounds", rounds)
        await ctx.send_message(Candidate(task=task, text=fake_editor(text), round=rounds))


@executor(id="critic")
async def critic(draft: Candidate, ctx: WorkflowContext[Scored]) -> None:
    score = fake_critic(draft.text)
    ctx.set_state("scores", [score])
    await ctx.send_message(Scored(**draft.model_dump(), score=score))


@executor(id="finalizer")
async def finalizer(best: Scored, ctx: WorkflowContext[None, FinalAnswer]) -> None:
    reached = best.score >= best.task.target_score
    await ctx.yield_output(FinalAnswer(text=best.text, score=best.score, rounds=best.round, reached_target=reached))


def target_reached(s: Scored) -> bool:
    return s.score >= s.task.target_score or s.round >= s.task.max_rounds


def build() -> Workflow:
    refiner = Refiner("refiner")
    return (
        WorkflowBuilder(start_executor=refiner, name="counter_loop", max_iterations=50)
        .add_edge(refiner, critic)
        .add_switch_case_edge_group(critic, [Case(condition=target_reached, target=finalizer), Default(target=refiner)])
        .add_state_reducer("scores", "append")
        .build()
    )


workflow = build()
SAMPLE_INPUT = RefineTask(text="Temporal makes agent workflows durable.", target_score=0.75)


async def run() -> None:
    wf = build()
    async for ev in wf.run(SAMPLE_INPUT, stream=True):
        if isinstance(ev, Output):
            print(f"\nfinal ({ev.data.rounds} rounds, score {ev.data.score}): {ev.data.text}")
        else:
            print(f"[{ev.type}] {ev.model_dump(mode='json', exclude={'type'}, exclude_none=True)}")
    print(f"score history: {wf.state['scores']}")


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
