"""``StepStateChanged`` under ``stream_events(expose_internal=True)``: what LlamaIndex shows (issue #25).

Each program runs on ``workflows`` (llama-index-workflows 2.26.1, installed) and on
``temporal_workflows.llama`` in process; the step states must be the same, but for
the module LlamaIndex's own event classes live in (``str()`` of the class, as
LlamaIndex writes ``not_running``'s names). Temporal gives the same records
(``tests/conformance/test_llama_conformance.py``).
"""

import asyncio
from types import SimpleNamespace
from typing import Any

from tests import llama_sample_ports as ports

PEER = ports.namespace("workflows")
OURS = ports.namespace("temporal_workflows.llama")


async def states(make: Any, m: SimpleNamespace, answer: Any = None) -> list[tuple[Any, ...]]:
    handler = make(m)(timeout=10).run()
    seen: list[tuple[Any, ...]] = []
    async for ev in handler.stream_events(expose_internal=True):
        if isinstance(ev, m.StepStateChanged):
            names = [
                str(n).replace(m.StopEvent.__module__, "<events>") if n else n
                for n in (ev.input_event_name, ev.output_event_name)
            ]
            seen.append((ev.name, ev.step_state.value, *names, ev.worker_id))
        elif not isinstance(ev, m.InternalDispatchEvent):
            seen.append((type(ev).__name__,))
        if answer is not None and isinstance(ev, m.InputRequiredEvent):
            handler.ctx.send_event(answer(m))
    await asyncio.wait_for(handler, 10)
    return seen


def retried(m: SimpleNamespace) -> Any:
    tries = {"n": 0}

    class Retried(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step(retry_policy=m.retry_policy(wait=m.wait_fixed(0), stop=m.stop_after_attempt(3)))  # type: ignore[untyped-decorator]
        async def go(self, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            tries["n"] += 1
            if tries["n"] < 3:
                raise ValueError("not yet")
            return m.StopEvent(result="ok")

    return Retried


def waiting(m: SimpleNamespace) -> Any:
    class Waiting(m.Workflow):  # type: ignore[misc,name-defined]
        @m.step  # type: ignore[untyped-decorator]
        async def ask(self, ctx: m.Context, ev: m.StartEvent) -> m.StopEvent:  # type: ignore[name-defined]
            got = await ctx.wait_for_event(m.HumanResponseEvent, waiter_event=m.InputRequiredEvent(prefix="name?"))
            return m.StopEvent(result=got.response)

    return Waiting


async def test_each_attempt_of_a_retried_step_is_running_then_not_running_as_in_llamaindex() -> None:
    peer = await states(retried, PEER)
    assert peer[-2] == ("go", "not_running", "<class '<events>.StartEvent'>", "<class '<events>.StopEvent'>", "0")
    assert len(peer) == 6 + 1
    assert await states(retried, OURS) == peer


async def test_a_wait_for_event_ends_the_attempt_and_the_answer_runs_the_step_again_as_in_llamaindex() -> None:
    peer = await states(waiting, PEER, lambda m: m.HumanResponseEvent(response="Ann"))
    assert [s[:2] for s in peer] == [
        ("ask", "running"),
        ("ask", "not_running"),
        ("InputRequiredEvent",),
        ("ask", "running"),
        ("ask", "not_running"),
        ("StopEvent",),
    ]
    assert await states(waiting, OURS, lambda m: m.HumanResponseEvent(response="Ann")) == peer


async def test_no_step_state_without_expose_internal() -> None:
    handler = retried(OURS)(timeout=10).run()
    seen = [type(ev).__name__ async for ev in handler.stream_events()]
    assert seen == ["StopEvent"]
    assert await handler == "ok"
