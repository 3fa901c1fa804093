"""In-process benchmarks: the engine and runner alone, no Temporal, beside Agent Framework's own runner.

These measure what the shared engine costs per step (the part every host
pays), and the same two graphs on Agent Framework 1.23's in-process runner
(:mod:`bench.maf_shapes`), as a ratio ours / Agent Framework (below 1: ours
is faster).

    python -m bench.local                 # 6 alternating rounds, ours then Agent Framework's each round
    python -m bench.local --rounds 3 --reps 5 --json

Each round measures ours and Agent Framework's fan-out loop, then ours and
Agent Framework's checkpointed chain, one after the other, so a change in the
machine's load reaches both sides alike; the figures are the medians of the
rounds' medians, and the load average (``os.getloadavg``) is printed beside
them. Agent Framework's checkpointed chain takes seconds (its checkpoints
grow with the executors), so it runs once per round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporal_workflows import FileCheckpointStorage, InMemoryCheckpointStorage, Workflow

from . import maf_shapes, shapes
from .measure import median

__all__ = [
    "compare_with_maf",
    "local_chain_ms",
    "local_fanloop_us_per_step",
    "main",
    "maf_chain_ms",
    "maf_fanloop_us_per_step",
]


async def _samples(reps: int, once: Callable[[], Awaitable[float]], *, warm_up: bool = True) -> list[float]:
    if warm_up:
        await once()  # first-call costs (imports, pydantic schema builds) are not per-step costs
    return [await once() for _ in range(reps)]


async def _fanloop_us_per_step(wf: Any, who: str, reps: int) -> tuple[float, list[float]]:
    """µs per step of ``wf``, a 50-way fan-out/fan-in looped 20 rounds (:func:`shapes.fanout_loop`), no checkpoints.

    One loop for both runners: ``wf`` is ours or Agent Framework's, run the
    same way (``await wf.run(0)``), its outputs checked the same way.
    """

    async def once() -> float:
        t = time.perf_counter()
        result = await wf.run(0)
        elapsed = time.perf_counter() - t
        if result.get_outputs() != [shapes.LOCAL_FANLOOP_ROUNDS]:
            raise AssertionError(f"{who} fanloop produced {result.get_outputs()}")
        return elapsed * 1e6 / shapes.LOCAL_FANLOOP_STEPS

    samples = await _samples(reps, once)
    return median(samples), samples


async def _chain_ms(
    wf: Any, who: str, reps: int, storage: Callable[[str], Any], *, warm_up: bool = True
) -> tuple[float, list[float]]:
    """ms for ``wf``, the 200-step chain, with a checkpoint saved at every superstep in ``storage(tmp_dir)``.

    One loop for both runners: the run, the check that it made its output and
    one checkpoint per superstep (and one of the start message before the
    first), and the timing are the same for ours and Agent Framework's.
    """

    async def once() -> float:
        with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
            store = storage(tmp)
            t = time.perf_counter()
            result = await wf.run(0, checkpoint_storage=store)
            elapsed = time.perf_counter() - t
            saved = await store.list_checkpoint_ids(workflow_name=wf.name)
        if result.get_outputs() != [shapes.LOCAL_CHAIN_LENGTH] or len(saved) != shapes.LOCAL_CHAIN_LENGTH + 1:
            raise AssertionError(f"{who} chain: outputs {result.get_outputs()}, {len(saved)} checkpoints")
        return elapsed * 1e3

    samples = await _samples(reps, once, warm_up=warm_up)
    return median(samples), samples


async def local_fanloop_us_per_step(reps: int) -> tuple[float, list[float]]:
    """µs per step of a 50-way fan-out/fan-in looped 20 rounds, in process, no checkpoints."""
    wf = shapes.fanout_loop("bench_local_fanloop", shapes.LOCAL_FANLOOP_WIDTH, shapes.LOCAL_FANLOOP_ROUNDS)
    return await _fanloop_us_per_step(wf, "local", reps)


async def local_chain_ms(reps: int, *, file_store: bool = False) -> tuple[float, list[float]]:
    """ms for a 200-step chain (each step writes state) with a checkpoint saved at every superstep.

    ``file_store`` uses :class:`FileCheckpointStorage` (JSON, fsynced, renamed) instead
    of the in-memory store, to show what durable checkpoints cost on this disk.
    """
    wf: Workflow = shapes.chain("bench_local_chain", shapes.LOCAL_CHAIN_LENGTH, stateful=True)

    def storage(tmp: str) -> Any:
        return FileCheckpointStorage(tmp) if file_store else InMemoryCheckpointStorage()

    return await _chain_ms(wf, "local", reps, storage)


# -- Agent Framework 1.23's own in-process runner, on the same graphs ---------------------------------------


async def maf_fanloop_us_per_step(reps: int) -> tuple[float, list[float]]:
    """µs per step of the same 50-way fan-out loop on Agent Framework's runner (:func:`local_fanloop_us_per_step`)."""
    wf = maf_shapes.fanout_loop("bench_maf_fanloop", shapes.LOCAL_FANLOOP_WIDTH, shapes.LOCAL_FANLOOP_ROUNDS)
    return await _fanloop_us_per_step(wf, "Agent Framework", reps)


async def maf_chain_ms(reps: int) -> tuple[float, list[float]]:
    """ms for the same 200-step chain on Agent Framework's runner, checkpointed every superstep in memory.

    No warm-up run: one takes seconds, and its first-call costs are lost in it.
    """
    from agent_framework import InMemoryCheckpointStorage as MafMemoryStorage

    wf = maf_shapes.chain("bench_maf_chain", shapes.LOCAL_CHAIN_LENGTH)
    return await _chain_ms(wf, "Agent Framework", reps, lambda tmp: MafMemoryStorage(), warm_up=False)


async def compare_with_maf(rounds: int, reps: int) -> dict[str, Any]:
    """Ours and Agent Framework's, in alternating rounds; medians of the rounds' medians, and ratios ours / MAF."""
    if not maf_shapes.AVAILABLE:
        raise RuntimeError("Agent Framework is not installed (pip install -e '.[agents]')")
    seen: dict[str, list[float]] = {"fanloop_us": [], "maf_fanloop_us": [], "chain_ms": [], "maf_chain_ms": []}
    load: list[float] = []
    for _ in range(rounds):
        load.append(os.getloadavg()[0])
        seen["fanloop_us"].append((await local_fanloop_us_per_step(reps))[0])
        seen["maf_fanloop_us"].append((await maf_fanloop_us_per_step(reps))[0])
        seen["chain_ms"].append((await local_chain_ms(reps))[0])
        seen["maf_chain_ms"].append((await maf_chain_ms(1))[0])
    out: dict[str, Any] = {k: round(median(v), 2) for k, v in seen.items()}
    out["fanloop_maf_ratio"] = round(out["fanloop_us"] / out["maf_fanloop_us"], 4)
    out["chain_maf_ratio"] = round(out["chain_ms"] / out["maf_chain_ms"], 6)
    out["rounds"] = {k: [round(x, 2) for x in v] for k, v in seen.items()}
    out["load_1min"] = [round(x, 2) for x in load]
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.local``: ours beside Agent Framework's in-process runner, alternating rounds."""
    parser = argparse.ArgumentParser(prog="python -m bench.local", description=main.__doc__)
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds (default 6)")
    parser.add_argument("--reps", type=int, default=5, help="runs of each of ours per round (default 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    out = asyncio.run(compare_with_maf(args.rounds, args.reps))
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.rounds} alternating rounds, load average (1 min) {out['load_1min']}")
    print(
        f"50-way fan-out loop: ours {out['fanloop_us']:.1f} µs/step, Agent Framework {out['maf_fanloop_us']:.1f} "
        f"µs/step: ratio {out['fanloop_maf_ratio']:.3f}"
    )
    print(
        f"200-step chain checkpointed every superstep: ours {out['chain_ms']:.1f} ms, Agent Framework "
        f"{out['maf_chain_ms']:.0f} ms: ratio {out['chain_maf_ratio']:.5f}"
    )


if __name__ == "__main__":
    main()
