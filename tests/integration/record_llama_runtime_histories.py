"""Record the histories tests/integration/test_llama_runtime.py replays (tests/histories/llama_runtime/).

Run against a dev server when LlamaIndexRun's commands change on purpose (then gate the change with
``workflow.patched``, so the old histories keep replaying)::

    TEMPORAL_ADDRESS=localhost:7233 python -m tests.integration.record_llama_runtime_histories [name ...]
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workflows import Workflow

from temporal_workflows.llama import TemporalRuntime
from tests.integration import llama_runtime_workflows as lw

OUT = Path(__file__).parents[1] / "histories" / "llama_runtime"

# name -> (how the workflow is built, how a run is driven). A replay builds the same instance.
BUILD: dict[str, Callable[[TemporalRuntime], Workflow]] = {
    "chain": lambda rt: lw.Chain(timeout=30, runtime=rt),
    "fan_out": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    "typed_state": lambda rt: lw.TypedState(timeout=30, runtime=rt),
    "human_in_loop": lambda rt: lw.HumanInLoop(timeout=None, runtime=rt),
    "wait_for_event": lambda rt: lw.WaitsForEvent(timeout=None, runtime=rt),
    "flaky": lambda rt: lw.Flaky(timeout=30, runtime=rt),
    "fails": lambda rt: lw.Fails(timeout=30, runtime=rt),
    "first_wins": lambda rt: lw.FirstWins(timeout=60, runtime=rt),
    # Recorded with step batches (patch llama-runtime-step-batches); the ones above predate them.
    "fan_out_batched": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    "first_wins_batched": lambda rt: lw.FirstWins(timeout=60, runtime=rt),
    # Recorded with collect_events reruns run ahead in their batch (patch llama-runtime-collect-speculation).
    "fan_out_speculated": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    # Recorded with stream writes signalled live and typed StopEvent results (patches
    # llama-runtime-live-stream, llama-runtime-typed-stop-result).
    "chain_live_stream": lambda rt: lw.Chain(timeout=30, runtime=rt),
    # Recorded with queued work and collect reruns run ahead from the loop's broker state (patch
    # llama-runtime-run-ahead).
    "fan_out_run_ahead": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    # Recorded with the tasks just started settling before a done one is picked (patch
    # llama-runtime-settle-started).
    "fan_out_settled": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    # Recorded with a step's sends signalled while it runs, with its store writes (patch llama-runtime-live-sends).
    "live_sends": lambda rt: lw.SendsWhileWorking(timeout=60, runtime=rt),
    # Recorded with one marker for every patch above (patch llama-runtime-patches-1), and a fan-out whose
    # workers' batch also ran its join ahead (StepBatchInput.across_steps).
    "chain_bundled": lambda rt: lw.Chain(timeout=30, runtime=rt),
    "fan_out_across_steps": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    # Recorded with each invocation the loop starts as one activity, local once its step is seen to be short,
    # a short join reduced first, the run's signature and its starter's timeout (patch llama-runtime-exact-1).
    "chain_exact": lambda rt: lw.Chain(timeout=30, runtime=rt),
    "fan_out_exact": lambda rt: lw.FanOut(timeout=45, runtime=rt),
    "human_in_loop_exact": lambda rt: lw.HumanInLoop(timeout=None, runtime=rt),
    "first_wins_exact": lambda rt: lw.FirstWins(timeout=60, runtime=rt),
    "live_sends_exact": lambda rt: lw.SendsWhileWorking(timeout=60, runtime=rt),
}


async def _answer(handler: Any, answer: Any) -> None:
    async for ev in handler.stream_events():
        if isinstance(ev, lw.Ask):
            handler.ctx.send_event(answer)


async def _drive(name: str, wf: Workflow) -> str:
    kwargs: dict[str, dict[str, Any]] = {
        "chain": {"x": 1},
        "chain_live_stream": {"x": 1},
        "fan_out": {"n": 10},
        "fan_out_batched": {"n": 10},
        "fan_out_speculated": {"n": 16},
        "fan_out_run_ahead": {"n": 16},
        "fan_out_settled": {"n": 16},
        "fan_out_across_steps": {"n": 16},
        "chain_bundled": {"x": 1},
        "human_in_loop": {"topic": "t"},
        "chain_exact": {"x": 1},
        "fan_out_exact": {"n": 16},
        "human_in_loop_exact": {"topic": "t"},
    }
    if name == "flaky":
        kwargs["flaky"] = {"key": uuid.uuid4().hex}
    handler = wf.run(**kwargs.get(name, {}))
    if name in ("human_in_loop", "human_in_loop_exact", "wait_for_event"):
        await _answer(handler, lw.Answer(text="yes"))
    with contextlib.suppress(Exception):
        await handler
    return str(handler.run_id)


async def main(names: list[str] | None = None) -> None:
    """Record ``names`` (default: all; re-record old ones only on purpose, they guard old runs' replay)."""
    rt = TemporalRuntime(worker=True, task_queue=f"record-{uuid.uuid4().hex[:8]}")
    OUT.mkdir(parents=True, exist_ok=True)
    client = await rt.client()
    for name, build in BUILD.items():
        if names and name not in names:
            continue
        run_id = await _drive(name, build(rt))
        history = await client.get_workflow_handle(run_id).fetch_history()
        (OUT / f"{name}.json").write_text(history.to_json())
        print("recorded", name, len(history.events), "events")
    await rt.destroy()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
