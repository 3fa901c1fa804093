"""Human in the loop, LlamaIndex-style: ``python -m examples.llama_hitl [--interactive]``.

Two documented patterns in one workflow:

* a step returns an ``InputRequiredEvent``; the caller, streaming the run,
  answers with a ``HumanResponseEvent`` that another step accepts;
* a step calls ``await ctx.wait_for_event(HumanResponseEvent, ...)`` and
  carries on from there when the answer arrives.

In process the waiting step stays suspended, so its work before the wait is
done once; on Temporal the run waits durably (for days if need be) as a
pending request, and the step runs again from the top when the answer comes,
replaying what it did before the wait instead of redoing it.
"""

from __future__ import annotations

import asyncio
import sys

from temporal_workflows.llama import (
    Context,
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    StartEvent,
    StopEvent,
    Workflow,
    step,
)


class Draft(Event):
    text: str
    author: str


class Approval(Workflow):
    """Ask who writes, draft, then ask for approval before publishing."""

    @step
    async def ask_author(self, ctx: Context, ev: StartEvent) -> InputRequiredEvent:
        await ctx.store.set("topic", ev.topic)
        return InputRequiredEvent(prefix=f"Who writes about {ev.topic}? ")

    @step
    async def write(self, ctx: Context, ev: HumanResponseEvent) -> Draft:
        topic = await ctx.store.get("topic")
        return Draft(text=f"{ev.response} on {topic}: bees are remarkable.", author=ev.response)

    @step
    async def review(self, ctx: Context, ev: Draft) -> StopEvent:
        decision = await ctx.wait_for_event(
            HumanResponseEvent,
            waiter_event=InputRequiredEvent(prefix=f"Publish {ev.text!r}? (yes/no) ", kind="approval"),
            requirements={"kind": "approval"},
            timeout=3600,
        )
        approved = decision.response.strip().lower() in ("y", "yes")
        return StopEvent(result={"published": approved, "text": ev.text, "author": ev.author})


def auto_answer(ev: InputRequiredEvent) -> HumanResponseEvent:
    """The human, played by code (the demo and tests)."""
    if ev.get("kind") == "approval":
        return HumanResponseEvent(response="yes", kind="approval")
    return HumanResponseEvent(response="Ann")


SAMPLE = {"topic": "bees"}


async def main(interactive: bool = False) -> None:
    handler = Approval(timeout=None).run(**SAMPLE)
    async for ev in handler.stream_events():
        if isinstance(ev, InputRequiredEvent):
            if interactive:
                answer = HumanResponseEvent(response=input(ev.prefix), kind=ev.get("kind"))
            else:
                answer = auto_answer(ev)
                print(f"{ev.prefix}{answer.response}")
            handler.ctx.send_event(answer)
    print(await handler)


if __name__ == "__main__":
    asyncio.run(main("--interactive" in sys.argv))
