# mypy: disable-error-code="untyped-decorator,no-any-return,attr-defined"
# (The workflows below are written once against whichever LlamaIndex-compatible module is passed in.)
"""LlamaIndex-style workflows: this engine beside llama-index-workflows 2.26, and beside hand-written Temporal.

    python -m bench --only llama           # this part alone (a dev server of its own for the Temporal part)
    python -m bench --only llama --quick   # one repetition, to check it runs

In process the *same* workflow source runs on both runtimes: the classes are
made from whichever module provides ``Workflow``, ``step``, ``Context`` and
the events (``temporal_workflows.llama``, or LlamaIndex's ``workflows``), so
the ratio is what each runtime costs per step of one program. LlamaIndex is
an optional dependency (``pip install 'llama-index-workflows>=2.26,<3'``);
without it the in-process side reports ours alone.

On Temporal the LlamaIndex-style chain is measured as the graph chain is
(``bench.run``): wall time, history events and bytes per step, against the
hand-written chain of :mod:`bench.baseline` with the same trivial activity.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import sys
import time
import types
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows._graph.workflow import Workflow as GraphWorkflow
from temporal_workflows._graph.workflow import as_graph_workflow

from .measure import Sample, history_bytes, median, ratio, timed

__all__ = ["CHAIN_LENGTH", "HOSTED", "chain_workflow", "main", "measure_in_process", "measure_temporal", "rows"]

LOOP_STEPS = 200
"""Step invocations of the in-process loop (one event per step, one after another)."""
FAN_WIDTH = 50
"""Events of the in-process fan-out: sent by one step, handled by a ``num_workers`` step, joined by
``collect_events``."""
CHAIN_LENGTH = 20
"""Steps of the Temporal chain (the graph chain of ``bench.run`` has as many)."""
TASK_QUEUE = "bench-llama"


def make(api: Any) -> dict[str, type]:
    """The benchmark's workflows, written once against a LlamaIndex-compatible API module."""
    Event, StartEvent, StopEvent = api.Event, api.StartEvent, api.StopEvent
    Workflow, Context, step = api.Workflow, api.Context, api.step

    class Tick(Event):  # type: ignore[misc, valid-type]
        n: int

    class Item(Event):  # type: ignore[misc, valid-type]
        n: int

    class Done(Event):  # type: ignore[misc, valid-type]
        n: int

    class Loop(Workflow):  # type: ignore[misc, valid-type]
        """``start`` then one ``tick`` per step, each passing a count on; the last ends the run."""

        @step
        async def start(self, ev: StartEvent) -> Tick:  # type: ignore[valid-type]
            return Tick(n=1)

        @step
        async def tick(self, ev: Tick) -> Tick | StopEvent:  # type: ignore[valid-type]
            if ev.n >= getattr(self, "bench_steps", LOOP_STEPS) - 1:
                return StopEvent(result=ev.n + 1)
            return Tick(n=ev.n + 1)

    class Fan(Workflow):  # type: ignore[misc, valid-type]
        """One step sends ``FAN_WIDTH`` items; a step handles them 8 at a time; ``collect_events`` joins them."""

        @step
        async def scatter(self, ctx: Context, ev: StartEvent) -> Item | None:  # type: ignore[valid-type]
            for n in range(FAN_WIDTH):
                ctx.send_event(Item(n=n))
            return None

        @step(num_workers=8)
        async def work(self, ev: Item) -> Done:  # type: ignore[valid-type]
            return Done(n=ev.n)

        @step
        async def join(self, ctx: Context, ev: Done) -> StopEvent | None:  # type: ignore[valid-type]
            got = ctx.collect_events(ev, [Done] * FAN_WIDTH)
            if got is None:
                return None
            return StopEvent(result=len(got))

    Loop.__name__ = Loop.__qualname__ = "LlamaBenchLoop"
    Fan.__name__ = Fan.__qualname__ = "LlamaBenchFan"
    return {"loop": Loop, "fan": Fan}


def _ours() -> types.ModuleType:
    return importlib.import_module("temporal_workflows.llama")


def _llamaindex() -> types.ModuleType | None:
    """LlamaIndex's ``workflows`` package as one namespace, if it is installed (an optional dependency)."""
    try:
        workflows = importlib.import_module("workflows")
        events = importlib.import_module("workflows.events")
    except ImportError:
        return None
    ns = types.ModuleType("llamaindex_api")
    ns.__dict__.update({k: getattr(workflows, k) for k in ("Workflow", "Context", "step")})
    ns.__dict__.update({k: getattr(events, k) for k in ("Event", "StartEvent", "StopEvent")})
    return ns


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


async def _us_per_step(run: Callable[[], Awaitable[Any]], steps: int, reps: int) -> list[float]:
    await run()  # warm-up: first-call costs are not per-step costs
    out: list[float] = []
    for _ in range(reps):
        t = time.perf_counter()
        await run()
        out.append((time.perf_counter() - t) * 1e6 / steps)
    return out


async def measure_in_process(reps: int) -> dict[str, Any]:
    """µs per step of the loop and the fan-out on this engine and (if installed) on LlamaIndex's runtime.

    The two runtimes alternate, so a machine warming up or slowing down hits
    both alike; figures are medians.
    """
    apis: dict[str, types.ModuleType] = {"ours": _ours()}
    other = _llamaindex()
    if other is not None:
        apis["llamaindex"] = other
    made = {name: make(api) for name, api in apis.items()}
    samples: dict[str, dict[str, list[float]]] = {shape: {name: [] for name in apis} for shape in ("loop", "fan")}
    steps = {"loop": LOOP_STEPS, "fan": 2 * FAN_WIDTH + 1}
    for rep in range(reps):
        order = list(apis) if rep % 2 == 0 else list(reversed(apis))
        for name in order:
            loop = made[name]["loop"](timeout=None)
            fan = made[name]["fan"](timeout=None)

            async def run_loop(wf: Any = loop) -> None:
                assert await wf.run() == LOOP_STEPS

            async def run_fan(wf: Any = fan) -> None:
                assert await wf.run() == FAN_WIDTH

            samples["loop"][name] += await _us_per_step(run_loop, steps["loop"], 1)
            samples["fan"][name] += await _us_per_step(run_fan, steps["fan"], 1)
    out: dict[str, Any] = {"llamaindex_version": _version("llama-index-workflows"), "steps": steps}
    for shape, by in samples.items():
        medians = {name: round(median(v), 1) for name, v in by.items()}
        out[f"{shape}_us_per_step"] = medians
        out[f"{shape}_ratio"] = ratio(medians["ours"], medians["llamaindex"]) if "llamaindex" in medians else None
    ratios = [out[f"{s}_ratio"] for s in samples if out[f"{s}_ratio"] is not None]
    out["overhead_ratio"] = max(ratios) if ratios else float("nan")
    return out


def chain_workflow() -> Any:
    """The LlamaIndex-style chain hosted on Temporal (``CHAIN_LENGTH`` steps)."""
    loop = make(_ours())["loop"](timeout=600, name="bench_llama_chain")
    loop.bench_steps = CHAIN_LENGTH
    return loop


CHAIN = chain_workflow()
HOSTED: tuple[GraphWorkflow, ...] = (as_graph_workflow(CHAIN),)
"""What a worker hosts for this part (``bench.run`` adds it to its plugin)."""


async def measure_temporal(client: Client, task_queue: str, reps: int, timeout: float) -> dict[str, Any]:
    """Per step of the chain on Temporal, LlamaIndex-style vs hand-written: wall ms, history events and bytes."""
    from temporal_workflows.llama import start_run

    samples = {"ours": Sample(), "base": Sample()}

    async def once(variant: str) -> None:
        wid = f"bench-llama-chain-{variant}-{uuid.uuid4().hex[:10]}"
        with timed() as t:
            if variant == "ours":
                run = await start_run(client, CHAIN, id=wid, task_queue=task_queue)
                got = await asyncio.wait_for(run.result(), timeout)
                handle = run.run.handle
            else:
                handle = await client.start_workflow("bench_base_chain", CHAIN_LENGTH, id=wid, task_queue=task_queue)
                got = await asyncio.wait_for(handle.result(), timeout)
        if got != CHAIN_LENGTH:
            raise AssertionError(f"llama chain ({variant}) returned {got!r}, expected {CHAIN_LENGTH}")
        history = await handle.fetch_history()
        samples[variant].add(
            wall_ms=t.wall * 1e3 / CHAIN_LENGTH,
            events=len(history.events) / CHAIN_LENGTH,
            bytes=history_bytes(history) / CHAIN_LENGTH,
        )

    await once("ours")  # warm-up
    await once("base")
    for rep in range(reps):
        for variant in ("ours", "base") if rep % 2 == 0 else ("base", "ours"):
            await once(variant)
    out: dict[str, Any] = {"steps": CHAIN_LENGTH}
    for metric in ("wall_ms", "events", "bytes"):
        ours, base = samples["ours"].median(metric), samples["base"].median(metric)
        out[metric] = {"ours": round(ours, 3), "base": round(base, 3)}
        out[f"{metric.removesuffix('_ms')}_ratio"] = ratio(ours, base)
    return out


def rows(details: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """Table rows ``(what, ours, the other, ratio)`` for ``bench.run``'s table and this module's own."""
    out: list[tuple[str, Any, Any, Any]] = []
    local = details.get("local") or {}
    version = local.get("llamaindex_version")
    other = f"llama-index-workflows {version}" if version else "llama-index-workflows (not installed)"
    for shape, label in (("loop", f"{LOOP_STEPS}-step loop"), ("fan", f"{FAN_WIDTH}-way send_event + collect_events")):
        us = local.get(f"{shape}_us_per_step") or {}
        out.append(
            (
                f"LlamaIndex API in process, {label}: µs / step (vs {other})",
                us.get("ours"),
                us.get("llamaindex"),
                local.get(f"{shape}_ratio"),
            )
        )
    t = details.get("temporal") or {}
    if t:
        for metric, label in (("wall_ms", "wall ms"), ("events", "history events"), ("bytes", "history bytes")):
            m = t[metric]
            out.append(
                (
                    f"LlamaIndex API on Temporal, chain of {CHAIN_LENGTH}: {label} / step (vs hand-written)",
                    m["ours"],
                    m["base"],
                    t[f"{metric.removesuffix('_ms')}_ratio"],
                )
            )
    return out


def _table(details: dict[str, Any]) -> str:
    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.2f}"
        return "—" if x is None else str(x)

    lines = ["| measurement | ours | other | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {what} | {cell(a)} | {cell(b)} | {cell(r)} |" for what, a, b, r in rows(details)]
    return "\n".join(lines)


async def _run(quick: bool, reps: int | None) -> dict[str, Any]:
    from bench import baseline
    from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_dev_server

    local_reps = reps or (1 if quick else 7)
    details: dict[str, Any] = {"local": await measure_in_process(local_reps)}
    env = await start_dev_server()
    try:
        address = env.client.service_client.config.target_host
        client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin(list(HOSTED))])
        worker = Worker(client, task_queue=TASK_QUEUE, workflows=baseline.WORKFLOWS, activities=baseline.ACTIVITIES)
        async with worker:
            details["temporal"] = await measure_temporal(client, TASK_QUEUE, reps or (1 if quick else 5), 120.0)
    finally:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(env.shutdown(), 30)
    return details


def report_main(
    prog: str,
    run: Callable[[bool, int | None], Coroutine[Any, Any, dict[str, Any]]],
    table: Callable[[dict[str, Any]], str],
    argv: list[str] | None,
) -> None:
    """A LlamaIndex bench's command line: ``--quick``, ``--reps``, ``--json``; the table, or JSON and the table.

    Shared by this bench and :mod:`bench.llama_runtime`. Leaves with ``os._exit``
    (as ``bench.run``): without waiting on the SDK's threads.
    """
    parser = argparse.ArgumentParser(prog=prog, description=sys.modules[run.__module__].__doc__)
    parser.add_argument("--quick", action="store_true", help="one repetition, to check it runs")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout (the table on stderr)")
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args(argv)
    code = 0
    try:
        details = asyncio.run(run(args.quick, args.reps))
        if args.json:
            print(table(details), file=sys.stderr)
            print(json.dumps(details))
        else:
            print(table(details))
    except BaseException as e:
        print(f"benchmark failed: {type(e).__name__}: {e}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    report_main("python -m bench --only llama", _run, _table, argv)
