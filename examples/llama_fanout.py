"""Fan-out and fan-in with ``collect_events``, LlamaIndex-style: ``python -m examples.llama_fanout``.

    StartEvent ──▶ plan ──▶ Question x n ──▶ research (num_workers=4) ──▶ Finding x n ──▶ report ──▶ StopEvent

``plan`` sends one ``Question`` per subtopic with ``ctx.send_event``; the
``research`` step answers up to four of them at a time; ``report`` is called
for every ``Finding`` and ``ctx.collect_events`` hands it all of them, in the
order they arrived, once the last one is in. ``write_event_to_stream``
reports progress to whoever streams the run.
"""

from __future__ import annotations

import asyncio

from temporal_workflows.llama import Context, Event, StartEvent, StopEvent, Workflow, step

SUBTOPICS = ("anatomy", "behaviour", "ecology")


class Question(Event):
    topic: str
    subtopic: str


class Finding(Event):
    subtopic: str
    text: str


class Progress(Event):
    msg: str


class Research(Workflow):
    """Research a topic from several angles at once, then write one report."""

    @step
    async def plan(self, ctx: Context, ev: StartEvent) -> Question | None:
        await ctx.store.set("expected", len(SUBTOPICS))
        for sub in SUBTOPICS:
            ctx.send_event(Question(topic=ev.topic, subtopic=sub))
        return None

    @step(num_workers=4)
    async def research(self, ctx: Context, ev: Question) -> Finding:
        ctx.write_event_to_stream(Progress(msg=f"researching {ev.subtopic}"))
        await asyncio.sleep(0)  # a model or search call would be awaited here
        return Finding(subtopic=ev.subtopic, text=f"{ev.topic}: what we know about {ev.subtopic}")

    @step
    async def report(self, ctx: Context, ev: Finding) -> StopEvent | None:
        expected = await ctx.store.get("expected")
        findings = ctx.collect_events(ev, [Finding] * expected)
        if findings is None:
            return None
        return StopEvent(result="\n".join(f"- {f.text}" for f in findings))


SAMPLE = {"topic": "bees"}


async def main() -> None:
    handler = Research(timeout=30).run(**SAMPLE)
    async for ev in handler.stream_events():
        if isinstance(ev, Progress):
            print(ev.msg)
    print(await handler)


if __name__ == "__main__":
    asyncio.run(main())
