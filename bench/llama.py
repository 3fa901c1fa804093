# mypy: disable-error-code="untyped-decorator,no-any-return,attr-defined"
# (The workflows below are written once against whichever LlamaIndex-compatible module is passed in.)
"""The LlamaIndex programs the LlamaIndex benchmark runs (:mod:`bench.llama_runtime`), and its command line.

``make`` writes each program once against a module that provides LlamaIndex's
``Workflow``, ``step``, ``Context`` and events: LlamaIndex's own ``workflows``
(:func:`_llamaindex`), run by ``TemporalRuntime`` or by llama-agents-dbos.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import types
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["CHAIN_LENGTH", "FAN_WIDTH", "make", "report_main"]

LOOP_STEPS = 200
"""Step invocations of the loop (one event per step, one after another) unless it sets ``bench_steps``."""
FAN_WIDTH = 50
"""Events of the fan-out: sent by one step, handled by a ``num_workers`` step, joined by ``collect_events``."""
CHAIN_LENGTH = 20
"""Steps of the Temporal chain (the graph chain of ``bench.run`` has as many)."""


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


def report_main(
    prog: str,
    run: Callable[[bool, int | None], Coroutine[Any, Any, dict[str, Any]]],
    table: Callable[[dict[str, Any]], str],
    argv: list[str] | None,
) -> None:
    """A LlamaIndex bench's command line: ``--quick``, ``--reps``, ``--json``; the table, or JSON and the table.

    Used by :mod:`bench.llama_runtime`. Leaves with ``os._exit``
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
