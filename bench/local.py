"""In-process benchmarks: the engine and runner alone, no Temporal.

These measure what the shared engine costs per step (the part every host
pays), against Agent Framework's published in-process figures.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable

from temporal_workflows import FileCheckpointStorage, InMemoryCheckpointStorage, Workflow

from . import shapes
from .measure import median

__all__ = ["local_chain_ms", "local_fanloop_us_per_step"]


async def _samples(reps: int, once: Callable[[], Awaitable[float]]) -> list[float]:
    await once()  # warm-up: first-call costs (imports, pydantic schema builds) are not per-step costs
    return [await once() for _ in range(reps)]


async def local_fanloop_us_per_step(reps: int) -> tuple[float, list[float]]:
    """µs per step of a 50-way fan-out/fan-in looped 20 rounds, in process, no checkpoints."""
    wf = shapes.fanout_loop("bench_local_fanloop", shapes.LOCAL_FANLOOP_WIDTH, shapes.LOCAL_FANLOOP_ROUNDS)

    async def once() -> float:
        t = time.perf_counter()
        result = await wf.run(0)
        elapsed = time.perf_counter() - t
        if result.get_outputs() != [shapes.LOCAL_FANLOOP_ROUNDS]:
            raise AssertionError(f"local fanloop produced {result.get_outputs()}")
        return elapsed * 1e6 / shapes.LOCAL_FANLOOP_STEPS

    samples = await _samples(reps, once)
    return median(samples), samples


async def local_chain_ms(reps: int, *, file_store: bool = False) -> tuple[float, list[float]]:
    """ms for a 200-step chain (each step writes state) with a checkpoint saved at every superstep.

    ``file_store`` uses :class:`FileCheckpointStorage` (JSON, fsynced, renamed) instead
    of the in-memory store, to show what durable checkpoints cost on this disk.
    """
    wf: Workflow = shapes.chain("bench_local_chain", shapes.LOCAL_CHAIN_LENGTH, stateful=True)

    async def once() -> float:
        with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
            storage = FileCheckpointStorage(tmp) if file_store else InMemoryCheckpointStorage()
            t = time.perf_counter()
            result = await wf.run(0, checkpoint_storage=storage)
            elapsed = time.perf_counter() - t
            saved = await storage.list_checkpoint_ids(workflow_name=wf.name)
        # One checkpoint per superstep, and one of the start message before the first.
        if result.get_outputs() != [shapes.LOCAL_CHAIN_LENGTH] or len(saved) != shapes.LOCAL_CHAIN_LENGTH + 1:
            raise AssertionError(f"local chain: outputs {result.get_outputs()}, {len(saved)} checkpoints")
        return elapsed * 1e3

    samples = await _samples(reps, once)
    return median(samples), samples
