"""Branches and a loop, LlamaIndex-style: ``python -m examples.llama_loop``.

    StartEvent ──▶ draft ──▶ Draft ──▶ critique ──▶ Approved ──▶ publish ──▶ StopEvent
                     ▲                    │
                     └──── Critique ◀─────┘ (until the draft is long enough, at most max_rounds)

A LlamaIndex program; only its imports say it runs on this engine. Each step
is routed to by the event type in its signature, the loop is a step returning
an event an earlier step accepts, and the typed state (``Context[Notes]``)
counts the rounds. The same instance is hosted on Temporal by
``TemporalWorkflowsPlugin([DraftLoop()])`` (see ``examples.llama_demo``).
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from temporal_workflows.llama import Context, Event, StartEvent, StopEvent, Workflow, step


class Draft(Event):
    text: str


class Critique(Event):
    text: str
    advice: str


class Approved(Event):
    text: str


class Notes(BaseModel):
    rounds: int = 0
    advice: list[str] = Field(default_factory=list)


class DraftLoop(Workflow):
    """Write, critique and rewrite a short text until it is long enough."""

    @step
    async def draft(self, ctx: Context[Notes], ev: StartEvent | Critique) -> Draft:
        if isinstance(ev, StartEvent):
            return Draft(text=f"A note on {ev.topic}.")
        async with ctx.store.edit_state() as notes:
            notes.advice.append(ev.advice)
        return Draft(text=f"{ev.text} More on it, as advised: {ev.advice}.")

    @step
    async def critique(self, ctx: Context[Notes], ev: Draft) -> Critique | Approved:
        async with ctx.store.edit_state() as notes:
            notes.rounds += 1
            rounds = notes.rounds
        if len(ev.text) >= 80 or rounds >= 3:
            return Approved(text=ev.text)
        return Critique(text=ev.text, advice=f"say more (round {rounds})")

    @step
    async def publish(self, ctx: Context[Notes], ev: Approved) -> StopEvent:
        notes = await ctx.store.get_state()
        return StopEvent(result={"text": ev.text, "rounds": notes.rounds, "advice": notes.advice})


SAMPLE = {"topic": "bees"}


async def main() -> None:
    result = await DraftLoop(timeout=30, verbose=True).run(**SAMPLE)
    print(result)


if __name__ == "__main__":
    asyncio.run(main())
