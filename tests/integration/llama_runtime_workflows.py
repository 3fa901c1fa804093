"""Plain LlamaIndex ``workflows`` programs (``from workflows import ...``, nothing of ours) run on
both LlamaIndex's default runtime and ``TemporalRuntime`` by tests/integration/test_llama_runtime.py."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import BaseModel
from workflows import Context, Workflow, step
from workflows.events import (
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    StartEvent,
    StopEvent,
)
from workflows.resource import Resource
from workflows.retry_policy import retry_policy, stop_after_attempt, wait_fixed


class Mid(Event):
    n: int


class Progress(Event):
    msg: str


class Chain(Workflow):
    """Start → a → b → Stop, with the store and stream writes."""

    @step
    async def a(self, ctx: Context, ev: StartEvent) -> Mid:
        await ctx.store.set("seen", ["a"])
        ctx.write_event_to_stream(Progress(msg="a"))
        return Mid(n=ev.x + 1)

    @step
    async def b(self, ctx: Context, ev: Mid) -> StopEvent:
        seen = await ctx.store.get("seen")
        await ctx.store.set("seen", [*seen, "b"])
        ctx.write_event_to_stream(Progress(msg=f"b after {seen}"))
        return StopEvent(result=f"done {ev.n}")


class Item(Event):
    i: int


class Done(Event):
    i: int
    square: int


class FanOut(Workflow):
    """``ctx.send_event`` fan-out to a ``num_workers`` step, ``collect_events`` fan-in."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Item | None:
        await ctx.store.set("n", ev.n)
        for i in range(ev.n):
            ctx.send_event(Item(i=i))
        return None

    @step(num_workers=4)
    async def work(self, ev: Item) -> Done:
        await asyncio.sleep(0.01 * (ev.i % 3))
        return Done(i=ev.i, square=ev.i * ev.i)

    @step
    async def join(self, ctx: Context, ev: Done) -> StopEvent | None:
        n = await ctx.store.get("n")
        got = ctx.collect_events(ev, [Done] * n)
        if got is None:
            return None
        return StopEvent(result=sorted(d.square for d in got))


class Ask(InputRequiredEvent):
    question: str


class Answer(HumanResponseEvent):
    text: str


class HumanInLoop(Workflow):
    """``InputRequiredEvent`` out on the stream, ``HumanResponseEvent`` in with ``handler.ctx.send_event``."""

    @step
    async def ask(self, ev: StartEvent) -> Ask:
        return Ask(question=f"name for {ev.topic}?")

    @step
    async def answered(self, ev: Answer) -> StopEvent:
        return StopEvent(result=f"got {ev.text}")


class Question(Event):
    n: int


class TwoQuestions(Workflow):
    """Two ``InputRequiredEvent``s out at once; the answers collected together."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Question | None:
        ctx.send_event(Question(n=1))
        ctx.send_event(Question(n=2))
        return None

    @step(num_workers=2)
    async def ask(self, ev: Question) -> Ask:
        return Ask(question="first?" if ev.n == 1 else "second?")

    @step
    async def answered(self, ctx: Context, ev: Answer) -> StopEvent | None:
        got = ctx.collect_events(ev, [Answer, Answer])
        return None if got is None else StopEvent(result=" and ".join(a.text for a in got))


class WaitsForEvent(Workflow):
    """``ctx.wait_for_event`` inside a step, answered from outside."""

    @step
    async def waiting(self, ctx: Context, ev: StartEvent) -> StopEvent:
        answer = await ctx.wait_for_event(Answer, waiter_event=Ask(question="ok?"), waiter_id="w1", timeout=None)
        return StopEvent(result=f"waited {answer.text}")


class Boom(Exception):
    pass


class Fails(Workflow):
    @step
    async def explode(self, ev: StartEvent) -> StopEvent:
        raise Boom("step exploded")


ATTEMPTS: dict[str, int] = {}


class Flaky(Workflow):
    """Fails twice, then succeeds, under a LlamaIndex retry policy."""

    @step(retry_policy=retry_policy(wait=wait_fixed(0.2), stop=stop_after_attempt(5)))
    async def flaky(self, ev: StartEvent) -> StopEvent:
        ATTEMPTS[ev.key] = ATTEMPTS.get(ev.key, 0) + 1
        if ATTEMPTS[ev.key] < 3:
            raise RuntimeError(f"attempt {ATTEMPTS[ev.key]}")
        return StopEvent(result=ATTEMPTS[ev.key])


class Slow(Workflow):
    @step
    async def slow(self, ev: StartEvent) -> StopEvent:
        await asyncio.sleep(30)
        return StopEvent(result="late")


class Counter(BaseModel):
    count: int = 0
    log: list[str] = []


class TypedState(Workflow):
    """``Context[State]``: a typed store edited by two steps."""

    @step
    async def one(self, ctx: Context[Counter], ev: StartEvent) -> Mid:
        async with ctx.store.edit_state() as state:
            state.count += 1
            state.log.append("one")
        return Mid(n=1)

    @step
    async def two(self, ctx: Context[Counter], ev: Mid) -> StopEvent:
        async with ctx.store.edit_state() as state:
            state.count += 10
            state.log.append("two")
        state = await ctx.store.get_state()
        return StopEvent(result={"count": state.count, "log": state.log})


def describe(events: list[Event]) -> list[Any]:
    """Events as comparable values (type name and fields)."""
    return [(type(e).__name__, e.model_dump(mode="json")) for e in events]


class Racer(Event):
    i: int


class FirstWins(Workflow):
    """Three racers in parallel; the first to finish stops the run and the others are cancelled."""

    @step
    async def start(self, ctx: Context, ev: StartEvent) -> Racer | None:
        for i in range(3):
            ctx.send_event(Racer(i=i))
        return None

    @step(num_workers=3)
    async def race(self, ev: Racer) -> StopEvent:
        if ev.i != 0:
            await asyncio.sleep(30)
        return StopEvent(result=f"winner {ev.i}")


class Blocking(Workflow):
    """A step that marks its attempt (``started-<pid>``) and runs until ``release`` exists in ``ev.path``."""

    @step
    async def block(self, ev: StartEvent) -> StopEvent:
        import os
        from pathlib import Path

        folder = Path(ev.path)
        (folder / f"started-{os.getpid()}").touch()
        while not (folder / "release").exists():
            await asyncio.sleep(0.05)
        return StopEvent(result=os.getpid())


class Ping(Event):
    path: str


class PingDone(Event):
    pass


class BlockDone(Event):
    pid: int


class SendsThenBlocks(Workflow):
    """A step that appends to a stored list, sends, then runs until ``release`` exists in ``ev.path`` (kill -9
    test of live sends: the retried attempt re-sends and re-writes; neither may land twice)."""

    @step
    async def sender(self, ctx: Context, ev: StartEvent) -> BlockDone | Ping:
        import os
        from pathlib import Path

        folder = Path(ev.path)
        log = await ctx.store.get("log", default=[])
        await ctx.store.set("log", [*log, "sender"])
        ctx.send_event(Ping(path=ev.path))
        (folder / f"started-{os.getpid()}").touch()
        while not (folder / "release").exists():
            await asyncio.sleep(0.05)
        return BlockDone(pid=os.getpid())

    @step
    async def receiver(self, ctx: Context, ev: Ping) -> PingDone:
        from pathlib import Path

        with (Path(ev.path) / "received").open("a") as f:
            f.write("ping\n")
        await ctx.store.set("seen_log", await ctx.store.get("log", default=None))
        return PingDone()

    @step
    async def join(self, ctx: Context, ev: BlockDone | PingDone) -> StopEvent | None:
        got = ctx.collect_events(ev, [BlockDone, PingDone])
        if got is None:
            return None
        seen = await ctx.store.get("seen_log")
        return StopEvent(result={"pid": got[0].pid, "log": await ctx.store.get("log"), "seen_log": seen})


async def serve_blocking(task_queue: str) -> None:
    """A worker process hosting ``Blocking`` and ``SendsThenBlocks``, steps heartbeating every 2/3 s (kill -9 tests)."""
    from datetime import timedelta

    from temporal_workflows._llama_runtime._options import StepOptions
    from temporal_workflows.llama import TemporalRuntime

    rt = TemporalRuntime(task_queue=task_queue, step_options=StepOptions(heartbeat_timeout=timedelta(seconds=2)))
    Blocking(timeout=None, runtime=rt)
    SendsThenBlocks(timeout=None, runtime=rt)
    client = await rt.client()
    await rt.worker(client).run()


class Dependency:
    n = 7


def get_dependency(**_kwargs: Any) -> Dependency:
    return Dependency()


class SyncAndResources(Workflow):
    """A synchronous step, a resource, and a store that a reused or restored ``Context`` carries."""

    @step
    def double(self, ev: StartEvent) -> Mid:
        return Mid(n=ev.x * 2)

    @step
    async def add(self, ctx: Context, ev: Mid, dep: Annotated[Dependency, Resource(get_dependency)]) -> StopEvent:
        runs = await ctx.store.get("runs", default=0)
        await ctx.store.set("runs", runs + 1)
        return StopEvent(result=ev.n + dep.n + runs)


async def reuse_and_restore(wf: Workflow) -> list[Any]:
    """Runs with one ``Context`` reused, then one restored with ``Context.from_dict(handler.ctx.to_dict())``."""
    ctx = Context(wf)
    out = [await wf.run(x=1, ctx=ctx), await wf.run(x=1, ctx=ctx)]
    handler = wf.run(x=2, ctx=ctx)
    out.append(await handler)
    snapshot = handler.ctx.to_dict()
    out.append(await wf.run(x=3, ctx=Context.from_dict(wf, snapshot)))
    out.append(snapshot["state"]["state_data"])
    return out


class Mid2(Event):
    n: int


class BigStore(Workflow):
    """Two steps each store ``ev.size`` characters. Past Temporal's payload limit, either a step's
    result (one write too large) or the last step's input (the store too large) cannot be sent."""

    @step
    async def fill(self, ctx: Context, ev: StartEvent) -> Mid:
        await ctx.store.set("a", "x" * ev.size)
        return Mid(n=ev.size)

    @step
    async def more(self, ctx: Context, ev: Mid) -> Mid2:
        await ctx.store.set("b", "y" * ev.n)
        return Mid2(n=ev.n)

    @step
    async def after(self, ev: Mid2) -> StopEvent:
        return StopEvent(result="unreachable")


class AskWithStore(Workflow):
    """Stores a value, asks, and answers with the stored value and the answer."""

    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> Ask:
        await ctx.store.set("topic", ev.topic)
        return Ask(question="name?")

    @step
    async def answered(self, ctx: Context, ev: Answer) -> StopEvent:
        return StopEvent(result=f"{await ctx.store.get('topic')}: {ev.text}")


class StoreFromOutside(Workflow):
    """The handler reads and writes ``ctx.store`` while the run waits for an answer."""

    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> Ask:
        await ctx.store.set("topic", ev.topic)
        return Ask(question="name?")

    @step
    async def answered(self, ctx: Context, ev: Answer) -> StopEvent:
        return StopEvent(result=f"{await ctx.store.get('topic')} {await ctx.store.get('extra')} {ev.text}")


class PythonResult(Workflow):
    """A result JSON would change: a tuple, a set, bytes, int keys, an event inside (the default runtime
    hands the object itself to the caller)."""

    @step
    async def go(self, ctx: Context, ev: StartEvent) -> StopEvent:
        return StopEvent(result=((1, ["a"]), {1: "one", 2: (2,)}, {3}, b"x", Progress(msg="in")))


class PairSeen(Event):
    pair: tuple[int, ...]
    anything: Any = None


class PythonValues(Workflow):
    """Tuples, sets, bytes and int keys in a StartEvent's keyword arguments, an ``Any`` field and the store:
    the default runtime never serializes them, so each step sees them as they were."""

    @step
    async def a(self, ctx: Context, ev: StartEvent) -> PairSeen:
        await ctx.store.set("kept", ((1, 2), {3}, b"x", {4: "four"}))
        ctx.write_event_to_stream(Progress(msg=f"start sees {ev.pair!r} {ev.get('keys')!r}"))
        return PairSeen(pair=ev.pair, anything={1: (2,), "s": frozenset({5})})

    @step
    async def b(self, ctx: Context, ev: PairSeen) -> StopEvent:
        kept = await ctx.store.get("kept")
        return StopEvent(result=f"b sees {ev.pair!r} {ev.anything!r} {kept!r}")


class Go(Event):
    n: int


class SenderDone(Event):
    pass


class ReceiverDone(Event):
    seen: Any


class SendsWhileWorking(Workflow):
    """A step that writes the store, sends, then works on (a model call, here a sleep) and writes again: under
    the default runtime the receiver starts while the sender works, reads the writes made before the send,
    and its own write to a key the sender wrote earlier stands."""

    @step
    async def sender(self, ctx: Context, ev: StartEvent) -> SenderDone | Go:
        await ctx.store.set("n", 1)
        await ctx.store.set("shared", "sender")
        ctx.send_event(Go(n=1))
        await asyncio.sleep(1.5)
        ctx.write_event_to_stream(Progress(msg="sender done"))
        await ctx.store.set("after", 2)
        return SenderDone()

    @step
    async def receiver(self, ctx: Context, ev: Go) -> ReceiverDone:
        seen = await ctx.store.get("n", default=None)
        ctx.write_event_to_stream(Progress(msg=f"receiver saw {seen}"))
        await ctx.store.set("shared", "receiver")
        return ReceiverDone(seen=seen)

    @step
    async def join(self, ctx: Context, ev: SenderDone | ReceiverDone) -> StopEvent | None:
        got = ctx.collect_events(ev, [SenderDone, ReceiverDone])
        if got is None:
            return None
        store = ctx.store
        keys = ("n", "shared", "after")
        return StopEvent(result=[got[1].seen, *[await store.get(k, default=None) for k in keys]])


class AskThenReport(Workflow):
    """Asks a human, then writes a progress event to the stream before it stops."""

    @step
    async def ask(self, ev: StartEvent) -> Ask:
        return Ask(question=f"name for {ev.topic}?")

    @step
    async def answered(self, ctx: Context, ev: Answer) -> StopEvent:
        ctx.write_event_to_stream(Progress(msg=f"thanks for {ev.text}"))
        return StopEvent(result=f"got {ev.text}")
