# mypy: disable-error-code="attr-defined"
"""LlamaIndex's own ``workflows`` on ``TemporalRuntime``, per step.

    python -m bench --only llama-runtime           # a dev server of its own
    python -m bench --only llama-runtime --quick   # one repetition, to check it runs

Two programs (``bench.llama.make``: a 20-step chain, and a 50-way ``send_event`` fan-out joined by
``collect_events``), written against LlamaIndex's ``workflows``, run on one dev server by
``TemporalRuntime`` (LlamaIndex's loop as workflow code). Reported per step: wall ms and history bytes,
medians.

With ``llama-agents-dbos`` installed (the ``llama-bench`` extra), the same programs also run on its own
``DBOSRuntime`` over a fresh SQLite file: wall ms and the database's growth per step.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from typing import Any

from .llama import CHAIN_LENGTH, FAN_WIDTH, _llamaindex, make, report_main
from .measure import Sample, history_bytes, timed

__all__ = ["main", "measure"]

TASK_QUEUE = "bench-llama-runtime"


async def measure(address: str, reps: int, timeout: float = 300.0) -> dict[str, Any]:
    from temporal_workflows.llama import TemporalRuntime
    from temporal_workflows.temporal import ConnectionConfig

    llamaindex = _llamaindex()
    if llamaindex is None:
        raise RuntimeError("llama-index-workflows is not installed (pip install 'temporal-workflows[llama-runtime]')")
    rt = TemporalRuntime(worker=True, task_queue=f"{TASK_QUEUE}-rt", connection=ConnectionConfig(address=address))
    li_api = make(llamaindex)
    li_chain = li_api["loop"](timeout=600, runtime=rt)
    li_chain.bench_steps = CHAIN_LENGTH
    li_fan = li_api["fan"](timeout=600, runtime=rt)
    # make() defines the events inside a function; LlamaIndex's serializer finds an event class by its
    # module and name, so they are published there (a real program defines them at module level).
    for wf in (li_chain, li_fan):
        for event_type in wf.events:
            if "<locals>" in event_type.__qualname__:
                setattr(sys.modules[event_type.__module__], event_type.__name__, event_type)
    rt_client = await rt.client()

    shapes = {"chain": (CHAIN_LENGTH, li_chain), "fan": (FAN_WIDTH, li_fan)}
    samples = {shape: Sample() for shape in shapes}

    async def once(shape: str, *, kept: bool = True) -> None:
        steps, runtime_wf = shapes[shape]
        with timed() as t:
            handler = runtime_wf.run()
            await asyncio.wait_for(handler, timeout)
        # The history is fetched after the run's time is taken.
        history = await rt_client.get_workflow_handle(handler.run_id).fetch_history()
        if kept:
            samples[shape].add(wall_ms=t.wall * 1e3 / steps, bytes=history_bytes(history) / steps)

    for shape in shapes:
        await once(shape, kept=False)  # warm-up
        for _ in range(reps):
            await once(shape)
    await rt.destroy()
    dbos = await _measure_dbos(reps)
    out: dict[str, Any] = {"chain_steps": CHAIN_LENGTH, "fan_width": FAN_WIDTH, "dbos": dbos}
    for shape in shapes:
        for metric in ("wall_ms", "bytes"):
            r = samples[shape].median(metric)
            out[f"{shape}_{metric}"] = {"runtime": round(r, 3)}
            if isinstance(dbos, dict):
                out[f"{shape}_{metric}"]["dbos"] = dbos[f"{shape}_{metric}"]
    return out


async def _measure_dbos(reps: int) -> dict[str, float] | str:
    """The same two programs on ``llama-agents-dbos`` (its own runtime, DBOS on a fresh SQLite file).

    Per step: wall ms, and bytes the SQLite database (file and its WAL) grew by, the nearest thing DBOS
    has to a history (page-granular, so small runs round up). Medians over ``reps`` after a warm-up.
    """
    try:
        from dbos import DBOS
        from llama_agents.dbos import DBOSRuntime  # type: ignore[import-untyped]
    except ImportError:
        return "not measured (not installed: pip install 'temporal-workflows[llama-bench]')"
    folder = tempfile.mkdtemp(prefix="bench-llama-dbos-")
    db = os.path.join(folder, "dbos.sqlite")
    DBOS(config={"name": "bench-llama-dbos", "system_database_url": f"sqlite:///{db}"})
    rt = DBOSRuntime()
    api = make(_llamaindex())
    chain = api["loop"](timeout=600, runtime=rt)
    chain.bench_steps = CHAIN_LENGTH
    fan = api["fan"](timeout=600, runtime=rt)
    # DBOS pickles events: make()'s function-local classes are published under their plain names.
    for wf in (chain, fan):
        for event_type in wf.events:
            if "<locals>" in event_type.__qualname__:
                event_type.__qualname__ = event_type.__name__
                setattr(sys.modules[event_type.__module__], event_type.__name__, event_type)

    def size() -> int:
        return sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))

    samples = {shape: Sample() for shape in ("chain", "fan")}
    await rt.launch()
    try:
        for shape, wf, steps in (("chain", chain, CHAIN_LENGTH), ("fan", fan, FAN_WIDTH)):
            for rep in range(reps + 1):
                before = size()
                with timed() as t:
                    await wf.run()
                if rep:  # the first is a warm-up
                    samples[shape].add(wall_ms=t.wall * 1e3 / steps, bytes=(size() - before) / steps)
    finally:
        await rt.destroy()
        with contextlib.suppress(Exception):
            DBOS.destroy()
        shutil.rmtree(folder, ignore_errors=True)
    return {f"{shape}_{m}": round(samples[shape].median(m), 3) for shape in samples for m in ("wall_ms", "bytes")}


def _table(details: dict[str, Any]) -> str:
    lines = [
        "| per step | TemporalRuntime (LlamaIndex's loop) | llama-agents-dbos on SQLite |",
        "|---|---:|---:|",
    ]
    labels = {"chain": f"chain of {CHAIN_LENGTH}", "fan": f"{FAN_WIDTH}-way send_event + collect_events"}
    for shape, label in labels.items():
        for metric, name in (("wall_ms", "wall ms"), ("bytes", "history bytes (DBOS: SQLite growth)")):
            m = details[f"{shape}_{metric}"]
            dbos = f"{m['dbos']:,.2f}" if "dbos" in m else "-"
            lines.append(f"| {label}: {name} | {m['runtime']:,.2f} | {dbos} |")
    if not isinstance(details["dbos"], dict):
        lines.append(f"| llama-agents-dbos on SQLite | {details['dbos']} | |")
    return "\n".join(lines)


async def _run(quick: bool, reps: int | None) -> dict[str, Any]:
    from temporal_workflows.temporal import start_dev_server

    env = await start_dev_server()
    try:
        return await measure(env.client.service_client.config.target_host, reps or (1 if quick else 5))
    finally:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(env.shutdown(), 30)


def main(argv: list[str] | None = None) -> None:
    report_main("python -m bench --only llama-runtime", _run, _table, argv)
