"""LlamaIndex's own ``workflows`` on ``TemporalRuntime``, beside hand-written Temporal code and llama-agents-dbos.

    python -m bench --only llama-runtime            # a dev server of its own; default options
    python -m bench --only llama-runtime --json     # one JSON object on stdout (the table on stderr)
    python -m bench --only llama-runtime --quick    # one repetition, to check it runs

The programs (``bench.llama_runtime_programs``): a 20-step chain, and a 50-way ``send_event`` fan-out joined
by ``collect_events``. Each runs, on one dev server and one worker in this process:

* on ``TemporalRuntime`` (LlamaIndex's loop as workflow code, each step invocation an activity);
* as hand-written Temporal code calling the same steps as activities with the same concurrency limits
  (``work`` 8 at once, ``join`` 4 at once), unsandboxed as ours is, with the activity options the runtime
  uses: idiomatic code, one activity per step (the targets' comparison); and the same code calling each
  step as a local activity, as the runtime does for the steps it has seen to be short (reported beside);
* with ``llama-agents-dbos`` installed (the ``llama-bench`` extra), on its own ``DBOSRuntime`` over a fresh
  SQLite file, default options.

Reported per step (the chain's 20 invocations, the fan-out's 50 items): wall ms and history bytes (for DBOS,
how much the SQLite file and its WAL grew), medians of the repetitions, the variants alternating; and every
step invocation counted by the steps themselves: ``duplicate_invocations`` is how many ran more than once in
runs with no failure (the ``join``'s own reruns of a stale buffer, which LlamaIndex's loop starts, are
reported apart as ``fan_join_invocations``). The machine's load averages are reported before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from . import llama_runtime_programs as programs
from .measure import Sample, history_bytes, ratio, timed

__all__ = ["TARGETS", "main", "measure"]

TASK_QUEUE = "bench-llama-runtime"

TARGETS: dict[str, tuple[str, float]] = {
    "chain_wall_ratio_vs_hand_written": ("<=", 1.1),
    "fanout_wall_ratio_vs_hand_written": ("<=", 1.5),
    "fanout_wall_ratio_vs_dbos": ("<=", 0.25),
    "duplicate_invocations": ("==", 0),
}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _duplicates(run_ids: set[str]) -> int:
    """Invocations of the given runs that ran more than once (the join's reruns aside: LlamaIndex's own)."""
    return sum(
        n - 1 for key, n in programs.counts().items() if key[0] in run_ids and key[1] != "join-invocation" and n > 1
    )


def _join_invocations(run_id: str) -> int:
    return programs.counts()[(run_id, "join-invocation")]


async def measure(address: str, reps: int, timeout: float = 300.0) -> dict[str, Any]:
    from temporal_workflows.llama import TemporalRuntime
    from temporal_workflows.temporal import ConnectionConfig

    programs.reset_counts()
    rt = TemporalRuntime(worker=True, task_queue=f"{TASK_QUEUE}-rt", connection=ConnectionConfig(address=address))
    chain = programs.Chain(timeout=600, runtime=rt)
    fan = programs.Fan(timeout=600, runtime=rt)
    client = await Client.connect(address)
    rt_client = await rt.client()
    steps = {"chain": programs.CHAIN_LENGTH, "fan": programs.FAN_WIDTH}
    variants = ("runtime", "hand", "hand_local")
    samples = {(shape, v): Sample() for shape in steps for v in variants}
    runs: set[str] = set()
    join_calls: dict[str, list[int]] = {v: [] for v in variants}

    async def once(shape: str, variant: str, record: bool = True) -> None:
        run_id = f"bench-lr-{shape}-{variant}-{uuid.uuid4().hex[:10]}"
        runs.add(run_id)
        with timed() as t:
            if variant != "runtime":
                wf_type = "bench_llama_hand_chain" if shape == "chain" else "bench_llama_hand_fan"
                local = variant == "hand_local"
                handle = await client.start_workflow(wf_type, args=[run_id, local], id=run_id, task_queue=TASK_QUEUE)
                await asyncio.wait_for(handle.result(), timeout)
            else:
                handler = (chain if shape == "chain" else fan).run(run_id=run_id, run=run_id)
                await asyncio.wait_for(handler, timeout)
        history = await (client if variant != "runtime" else rt_client).get_workflow_handle(run_id).fetch_history()
        if record:
            per_step = steps[shape]
            samples[(shape, variant)].add(wall_ms=t.wall * 1e3 / per_step, bytes=history_bytes(history) / per_step)
            if shape == "fan":
                join_calls[variant].append(_join_invocations(run_id))

    load_before = _load()
    async with Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=programs.HAND_WORKFLOWS,
        activities=programs.HAND_ACTIVITIES,
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        for shape in steps:
            for variant in variants:
                await once(shape, variant, record=False)  # warm-up
            for rep in range(reps):
                for variant in variants if rep % 2 == 0 else tuple(reversed(variants)):
                    await once(shape, variant)
    await rt.destroy()
    duplicates = _duplicates(runs)
    dbos = await _measure_dbos(reps)
    load_after = _load()
    out: dict[str, Any] = {
        "chain_steps": programs.CHAIN_LENGTH,
        "fan_width": programs.FAN_WIDTH,
        "reps": reps,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "duplicate_invocations": duplicates + (dbos.get("duplicate_invocations", 0) if isinstance(dbos, dict) else 0),
        "fan_join_invocations": {
            "runtime": sorted(join_calls["runtime"]),
            "hand_written": sorted(join_calls["hand"]),
            "hand_written_local": sorted(join_calls["hand_local"]),
            **({"dbos": dbos["join_invocations"]} if isinstance(dbos, dict) else {}),
        },
        "dbos": dbos,
    }
    for shape in steps:
        for metric in ("wall_ms", "bytes"):
            r = samples[(shape, "runtime")].median(metric)
            h = samples[(shape, "hand")].median(metric)
            hl = samples[(shape, "hand_local")].median(metric)
            entry: dict[str, Any] = {
                "runtime": round(r, 3),
                "hand_written": round(h, 3),
                "ratio": ratio(r, h),
                "hand_written_local": round(hl, 3),
                "ratio_vs_local": ratio(r, hl),
            }
            if isinstance(dbos, dict):
                entry["dbos"] = dbos[f"{shape}_{metric}"]
                entry["ratio_vs_dbos"] = ratio(r, dbos[f"{shape}_{metric}"])
            out[f"{shape}_{metric}"] = entry
    out["chain_wall_ratio_vs_hand_written"] = out["chain_wall_ms"]["ratio"]
    out["fanout_wall_ratio_vs_hand_written"] = out["fan_wall_ms"]["ratio"]
    out["fanout_wall_ratio_vs_dbos"] = out["fan_wall_ms"].get("ratio_vs_dbos")
    out["chain_bytes_ratio_vs_hand_written"] = out["chain_bytes"]["ratio"]
    out["fanout_bytes_ratio_vs_hand_written"] = out["fan_bytes"]["ratio"]
    out["chain_wall_ratio_vs_hand_written_local"] = out["chain_wall_ms"]["ratio_vs_local"]
    out["fanout_wall_ratio_vs_hand_written_local"] = out["fan_wall_ms"]["ratio_vs_local"]
    out["targets"] = _targets(out, quick=reps < 2)
    return out


def _targets(out: dict[str, Any], quick: bool) -> dict[str, Any]:
    judged: dict[str, Any] = {}
    for key, (op, limit) in TARGETS.items():
        value = out.get(key)
        met: bool | None
        if value is None or (quick and key != "duplicate_invocations"):
            met = None  # --quick judges no timing
        else:
            met = value <= limit if op == "<=" else value == limit
        judged[key] = {"value": value, "target": f"{op} {limit}", "met": met}
    return judged


async def _measure_dbos(reps: int) -> dict[str, Any] | str:
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
    chain = programs.Chain(timeout=600, runtime=rt)
    fan = programs.Fan(timeout=600, runtime=rt)

    def size() -> int:
        return sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))

    samples = {shape: Sample() for shape in ("chain", "fan")}
    runs: set[str] = set()
    joins: list[int] = []
    await rt.launch()
    try:
        for shape, wf, steps in (("chain", chain, programs.CHAIN_LENGTH), ("fan", fan, programs.FAN_WIDTH)):
            for rep in range(reps + 1):
                run_id = f"bench-dbos-{shape}-{uuid.uuid4().hex[:10]}"
                before = size()
                with timed() as t:
                    await wf.run(run_id=run_id, run=run_id)
                if rep:  # the first is a warm-up
                    runs.add(run_id)
                    samples[shape].add(wall_ms=t.wall * 1e3 / steps, bytes=(size() - before) / steps)
                    if shape == "fan":
                        joins.append(_join_invocations(run_id))
    finally:
        await rt.destroy()
        with contextlib.suppress(Exception):
            DBOS.destroy()
        shutil.rmtree(folder, ignore_errors=True)
    out: dict[str, Any] = {
        f"{shape}_{m}": round(samples[shape].median(m), 3) for shape in samples for m in ("wall_ms", "bytes")
    }
    out["duplicate_invocations"] = _duplicates(runs)
    out["join_invocations"] = sorted(joins)
    return out


def _table(d: dict[str, Any]) -> str:
    lines = [
        "| per step | TemporalRuntime | hand-written Temporal (activities) | ratio "
        "| hand-written (local activities) | ratio | llama-agents-dbos on SQLite | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {"chain": f"chain of {d['chain_steps']}", "fan": f"{d['fan_width']}-way send_event + collect_events"}
    for shape, label in labels.items():
        for metric, name in (("wall_ms", "wall ms"), ("bytes", "history bytes (DBOS: SQLite growth)")):
            m = d[f"{shape}_{metric}"]
            dbos = f"{m['dbos']:,.2f}" if "dbos" in m else "-"
            vs = m.get("ratio_vs_dbos", "-")
            lines.append(
                f"| {label}: {name} | {m['runtime']:,.2f} | {m['hand_written']:,.2f} | {m['ratio']} "
                f"| {m['hand_written_local']:,.2f} | {m['ratio_vs_local']} | {dbos} | {vs} |"
            )
    lines.append(f"| join invocations per fan-out run | {d['fan_join_invocations']} | | | | |")
    lines.append(f"| duplicate invocations (runs with no failure) | {d['duplicate_invocations']} | | | | |")
    lines.append(f"| load average before / after | {d['load_average_before']} / {d['load_average_after']} | | | | |")
    if not isinstance(d["dbos"], dict):
        lines.append(f"| llama-agents-dbos on SQLite | {d['dbos']} | | | | |")
    for key, t in d["targets"].items():
        lines.append(f"| target {key} {t['target']} | {t['value']} | met: {t['met']} | | | |")
    return "\n".join(lines)


async def _run(quick: bool, reps: int | None) -> dict[str, Any]:
    from temporal_workflows.temporal import start_dev_server

    env = await start_dev_server()
    try:
        return await measure(env.client.service_client.config.target_host, reps or (1 if quick else 5))
    finally:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(env.shutdown(), 30)


def report_main(
    prog: str,
    run: Callable[[bool, int | None], Awaitable[dict[str, Any]]],
    table: Callable[[dict[str, Any]], str],
    argv: list[str] | None,
) -> None:
    """``--quick``, ``--reps``, ``--json``: the table, or one JSON object on stdout and the table on stderr.

    Leaves with ``os._exit`` (as ``bench.run``): without waiting on the SDK's threads.
    """
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one repetition, to check it runs")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout (the table on stderr)")
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args(argv)
    code = 0
    stdout = None
    if args.json:
        # stdout carries the JSON alone: what the dev server (and anything else) prints goes to stderr.
        sys.stdout.flush()
        stdout = os.dup(1)
        os.dup2(2, 1)
    try:
        details: dict[str, Any] = asyncio.run(run(args.quick, args.reps))  # type: ignore[arg-type]
        if args.json:
            print(table(details), file=sys.stderr)
            sys.stdout.flush()
            assert stdout is not None
            os.write(stdout, (json.dumps(details) + "\n").encode())
        else:
            print(table(details))
    except BaseException as e:
        print(f"benchmark failed: {type(e).__name__}: {e}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    report_main("python -m bench --only llama-runtime", _run, _table, argv)
