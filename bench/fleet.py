"""The fleet benchmark: graphs on several worker processes, beside hand-written Temporal, under chaos and deploys.

    python -m bench --only fleet            # full run (about 12 minutes)
    python -m bench --only fleet --json     # the report on stderr, one JSON object on stdout
    python -m bench --only fleet --quick    # CI: every stage, scaled down; targets not judged
    python -m bench --only fleet --stage versioned  # one stage, full size; repeat --stage or give a comma list

It starts a dev server of its own (``temporal server start-dev`` as it comes: eager activity execution on)
and worker processes of its own, started as users start them (``python -m temporal_workflows worker
--workflow bench.fleet_graphs:...``; the hand-written twin: ``python -m bench.fleet_baseline``), killed
and stopped by pid. Stages:

1. **spread**: one ``wide`` run (200 parallel steps of 0.5 s) on 1 and on 4 worker processes of 10
   activity slots each: wall time ratio, and the smallest share of its steps a worker ran (from the
   steps' own ``worker`` field). Beside it, runs of 10 ms steps on 1 and 4 workers: short steps' latency.
2. **throughput**: ``fanout`` runs (start → 10 parallel steps → join, every step awaiting 0.5 s) on
   N = 1, 2, 4 worker processes of 10 activity slots each, and the hand-written twin on as many of its own,
   the two sides interleaved: completed steps per second, scaling and the ratio to hand-written at each N.
3. **chaos**: 4 worker processes; 120 runs (fan-outs, human-input runs answered during the chaos,
   streaming steps with a live reader each) while a random worker is killed (``kill -9``) every 10 s for
   2 minutes and a new one started each time. Counted: runs lost, failed, stuck or wrong; a step's effect
   on committed state counted twice; duplicates in a reader's committed view; and each run's latency
   above the same kind's median without chaos (its p99, against the steps' heartbeat timeout + 5 s).
4. **rolling**: 4 worker processes under a steady stream of runs; each is sent SIGTERM in turn (it drains
   gracefully) and replaced: runs failed, and activity or workflow task timeouts in their histories.
5. **versioned**: a Worker Deployment rolled from v1 to v2 (another shape of one graph) under load: runs
   started before, and runs started by a v1 client after, finish on v1; runs of v2 clients on v2. Its
   ``routes`` count, per kind of start, where the library's routing sent it and why (its ``DEBUG`` line);
   a wrong or unfinished run is reported with its build, its pinned version, its status and that line.

``--stage NAME`` (repeatable, or ``--stage rolling,versioned``; default: every stage) runs only the stages
named, at full size unless ``--quick``: the report still holds every key ``--json`` promises, those of the
stages not run as ``null``, the stages run in ``config.stages``, and only their targets judged (the others'
``met`` is ``null``). The rolling stage's second run, on a server without poll completion, runs with it.

Every target is judged on the full run only; the machine's load average is reported beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows import Workflow
from temporal_workflows._live import LiveCommittedEvent, LiveEvent, StepRetryEvent
from temporal_workflows.events import ExecutorCompletedEvent
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, start_dev_server, start_run
from temporal_workflows.temporal._client.routing import graphs_of_version
from temporal_workflows.temporal._worker.versioning import build_id_for, current_build_id

from . import fleet_graphs as g

__all__ = ["REQUIRED_KEYS", "main"]

ROOT = Path(__file__).resolve().parents[1]
READY = "worker on task queue"
SLOTS = 10
"""Activity slots per worker process in the spread and throughput stages (``--max-concurrent-activities``)."""

REQUIRED_KEYS: dict[str, type] = {
    "io_scaling_4_vs_1": float,
    "throughput_ratio_vs_hand_written": float,
    "chaos_runs": int,
    "chaos_lost": int,
    "chaos_failed": int,
    "chaos_wrong": int,
    "chaos_duplicate_commits": int,
    "chaos_p99_added_s": float,
    "rolling_failures": int,
    "versioned_rollout_failures": int,
}
"""The keys ``--json`` always prints, with their types (``tests/test_bench.py`` checks them); a key of a stage
not run (``--stage``) is ``null``."""


@dataclass(frozen=True)
class Config:
    quick: bool
    wide: str
    """The ``bench.fleet_graphs`` attribute of the spread stage's graph."""
    wide_workers: int
    short_runs: int
    io_delay: float
    throughput_ns: tuple[int, ...]
    throughput_runs: int
    reps: int
    chaos_workers: int
    chaos_runs: int
    chaos_seconds: float
    kill_every: float
    rolling_workers: int
    rolling_rate: float
    versioned_runs: int

    @staticmethod
    def of(quick: bool) -> Config:
        if quick:
            return Config(True, "wide_quick", 2, 4, 0.2, (1, 2), 6, 1, 2, 16, 20.0, 5.0, 2, 0.5, 3)
        return Config(False, "wide", 4, 10, 0.5, (1, 2, 4), 80, 2, 4, 120, 120.0, 10.0, 4, 0.25, 8)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- worker processes ---------------------------------------------------------------------------------


@dataclass
class Proc:
    proc: asyncio.subprocess.Process
    log: Path
    kind: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def identity(self) -> str:
        return f"{self.proc.pid}@{os.uname().nodename}"

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while READY not in self.text():
            if self.proc.returncode is not None:
                raise RuntimeError(f"{self.kind} worker {self.pid} exited before it started:\n{self.text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.kind} worker {self.pid} did not start in {timeout} s:\n{self.text()[-3000:]}"
                )
            await asyncio.sleep(0.1)  # polling its log, with a deadline

    async def kill(self) -> None:
        """``kill -9``: no shutdown, its steps and workflow tasks abandoned."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        await self.proc.wait()

    async def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (graceful: in-flight steps finish), then wait; killed if it does not stop in ``timeout``."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            await self.kill()
            return -9


class Fleet:
    """The benchmark's worker processes, by pid; every one is gone when the benchmark ends."""

    def __init__(self, address: str, logs: Path) -> None:
        self.address = address
        self.logs = logs
        self.procs: list[Proc] = []

    async def start(self, kind: str, queue: str, *args: str) -> Proc:
        log = self.logs / f"{kind}-{len(self.procs)}.log"
        if kind == "ours":
            command = ["-m", "temporal_workflows", "worker", "--task-queue", queue, "--address", self.address, *args]
        else:
            command = ["-m", "bench.fleet_baseline", "--task-queue", queue, "--address", self.address, *args]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with open(log, "wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, *command, cwd=ROOT, env=env, stdout=out, stderr=asyncio.subprocess.STDOUT
            )
        started = Proc(proc, log, kind)
        self.procs.append(started)
        return started

    async def start_ready(self, n: int, kind: str, queue: str, *args: str) -> list[Proc]:
        procs = [await self.start(kind, queue, *args) for _ in range(n)]
        await asyncio.gather(*(p.ready() for p in procs))
        return procs

    async def stop_all(self) -> None:
        await asyncio.gather(*(p.stop(30) for p in self.procs if p.proc.returncode is None))
        self.procs = [p for p in self.procs if p.proc.returncode is None]

    async def kill_all(self) -> None:
        for p in self.procs:
            if p.proc.returncode is None:
                await p.kill()


def _ours_args(*graphs: str, slots: int | None = None, extra: Sequence[str] = ()) -> list[str]:
    args = [a for graph in graphs for a in ("--workflow", f"bench.fleet_graphs:{graph}")]
    if slots is not None:
        args += ["--max-concurrent-activities", str(slots)]
    return [*args, *extra]


# -- runs ---------------------------------------------------------------------------------------------


async def _run_ours(client: Client, graph: Workflow, queue: str, job: g.Job) -> tuple[RunHandle, float, Any]:
    began = time.monotonic()
    run = await start_run(client, graph, job, id=f"{queue}-{job.id}", task_queue=queue)
    result = await run.result()
    return run, time.monotonic() - began, result


def _fanout_ok(result: Any, job_id: str, width: int) -> bool:
    outputs = result.get("outputs") if isinstance(result, dict) else None
    return outputs == [{"id": job_id, "done": sorted(f"w{i}" for i in range(width))}]


async def _workers_of(run: RunHandle) -> Counter[str]:
    """How many of the run's steps each worker ran (the steps' ``worker`` field)."""
    counts: Counter[str] = Counter()
    async for ev in run.events():
        if isinstance(ev, ExecutorCompletedEvent) and ev.executor_id.startswith("w") and ev.worker:
            counts[ev.worker] += 1
    return counts


# -- stage 1: spread ----------------------------------------------------------------------------------


async def spread(client: Client, fleet: Fleet, cfg: Config) -> dict[str, Any]:
    wide: Workflow = getattr(g, cfg.wide)
    width = len(wide.graph.executors) - 2
    out: dict[str, Any] = {"width": width, "delay_s": cfg.io_delay, "slots": SLOTS}
    for n in (1, cfg.wide_workers):
        queue = f"spread{n}-{uuid.uuid4().hex[:6]}"
        procs = await fleet.start_ready(n, "ours", queue, *_ours_args(cfg.wide, "fanout", slots=SLOTS))
        await _run_ours(client, wide, queue, g.Job(id="warm", delay=0.01))
        times, shares = [], []
        for rep in range(cfg.reps):
            run, took, result = await _run_ours(client, wide, queue, g.Job(id=f"r{rep}", delay=cfg.io_delay))
            assert _fanout_ok(result, f"r{rep}", width), result
            times.append(took)
            counts = await _workers_of(run)
            shares.append(min(counts.get(p.identity, 0) for p in procs) / width)
        short = []
        for i in range(cfg.short_runs):
            _, took, result = await _run_ours(client, g.fanout, queue, g.Job(id=f"s{i}", delay=0.01))
            assert _fanout_ok(result, f"s{i}", g.FANOUT_WIDTH), result
            short.append(took)
        out[f"workers_{n}"] = {
            "seconds": statistics.median(times),
            "min_share": min(shares),
            "short_run_p50_ms": statistics.median(short) * 1000,
        }
        await fleet.stop_all()
    one, many = out["workers_1"], out[f"workers_{cfg.wide_workers}"]
    out["ratio"] = many["seconds"] / one["seconds"]
    out["min_share"] = many["min_share"]
    out["short_ratio"] = many["short_run_p50_ms"] / one["short_run_p50_ms"]
    return out


# -- stage 2: throughput ------------------------------------------------------------------------------


async def _batch_ours(client: Client, queue: str, runs: int, delay: float) -> float:
    tag = uuid.uuid4().hex[:6]
    jobs = [g.Job(id=f"{tag}-{i}", delay=delay) for i in range(runs)]
    began = time.monotonic()
    results = await asyncio.gather(*(_run_ours(client, g.fanout, queue, job) for job in jobs))
    took = time.monotonic() - began
    bad = [job.id for job, (_, _, r) in zip(jobs, results, strict=True) if not _fanout_ok(r, job.id, g.FANOUT_WIDTH)]
    assert not bad, bad
    return runs * (g.FANOUT_WIDTH + 2) / took


async def _batch_base(client: Client, queue: str, runs: int, delay: float) -> float:
    tag = uuid.uuid4().hex[:6]
    began = time.monotonic()

    async def one(i: int) -> Any:
        handle = await client.start_workflow(
            "fleet_base_fanout", args=[f"{tag}-{i}", delay], id=f"{queue}-{tag}-{i}", task_queue=queue
        )
        return await handle.result()

    results = await asyncio.gather(*(one(i) for i in range(runs)))
    took = time.monotonic() - began
    want = sorted(f"w{i}" for i in range(g.FANOUT_WIDTH))
    assert all(r["done"] == want for r in results), results[:2]
    return runs * (g.FANOUT_WIDTH + 2) / took


async def throughput(client: Client, fleet: Fleet, cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": cfg.throughput_runs, "delay_s": cfg.io_delay, "slots": SLOTS, "by_n": {}}
    for n in cfg.throughput_ns:
        qo, qb = f"tput-ours{n}-{uuid.uuid4().hex[:6]}", f"tput-base{n}-{uuid.uuid4().hex[:6]}"
        await asyncio.gather(
            fleet.start_ready(n, "ours", qo, *_ours_args("fanout", slots=SLOTS)),
            fleet.start_ready(n, "base", qb, "--max-concurrent-activities", str(SLOTS)),
        )
        await _batch_ours(client, qo, n, 0.01)  # warm: every worker has the graph's code loaded
        await _batch_base(client, qb, n, 0.01)
        ours, base = [], []
        for rep in range(cfg.reps):
            order = ("ours", "base") if rep % 2 == 0 else ("base", "ours")
            for side in order:
                if side == "ours":
                    ours.append(await _batch_ours(client, qo, cfg.throughput_runs, cfg.io_delay))
                else:
                    base.append(await _batch_base(client, qb, cfg.throughput_runs, cfg.io_delay))
        out["by_n"][n] = {
            "ours_steps_per_s": statistics.median(ours),
            "base_steps_per_s": statistics.median(base),
            "ratio": statistics.median(ours) / statistics.median(base),
            "load": _load(),
        }
        _say(f"  throughput N={n}: {out['by_n'][n]}")
        await fleet.stop_all()
    by_n = out["by_n"]
    top = max(cfg.throughput_ns)
    out["scaling"] = by_n[top]["ours_steps_per_s"] / by_n[1]["ours_steps_per_s"]
    out["base_scaling"] = by_n[top]["base_steps_per_s"] / by_n[1]["base_steps_per_s"]
    out["lowest_ratio"] = min(v["ratio"] for v in by_n.values())
    return out


# -- stage 3: chaos -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str
    id: str
    latency: float | None = None
    status: str = "stuck"
    wrong: str | None = None
    duplicate_commits: int = 0
    reader_duplicates: int = 0


class _Reader:
    """A live reader of one run: its committed view (each step's live items of the attempt that committed,
    as ``RunHandle.events()`` delivers them while workers die), and the completed steps it saw."""

    def __init__(self, run: RunHandle) -> None:
        self.run = run
        self.duplicates = 0
        self.committed_steps: Counter[tuple[str, int, int]] = Counter()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        items: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
        for _ in range(20):  # a poll refused while workers die: read again from where it stopped
            try:
                async for ev in self.run.events():
                    self._see(ev, items)
                return
            except Exception:
                await asyncio.sleep(1.0)

    def _see(self, ev: Any, items: dict[tuple[str, int, int], list[tuple[int, int]]]) -> None:
        if isinstance(ev, StepRetryEvent):
            key = (ev.executor_id, ev.superstep, ev.index)
            items[key] = [(a, s) for a, s in items.get(key, []) if a >= ev.attempt]
        elif isinstance(ev, LiveEvent):
            items.setdefault((ev.executor_id, ev.superstep, ev.index), []).append((ev.attempt, ev.seq))
        elif isinstance(ev, LiveCommittedEvent):
            key = (ev.executor_id, ev.superstep, ev.index)
            kept = [s for a, s in items.pop(key, []) if a == ev.attempt]
            self.duplicates += len(kept) - len(set(kept))
            self.committed_steps[key] += 1
        elif isinstance(ev, ExecutorCompletedEvent):
            self.committed_steps[(ev.executor_id, ev.superstep, -1)] += 1

    def doubled(self) -> int:
        return self.duplicates + sum(c - 1 for c in self.committed_steps.values() if c > 1)


async def _answer(run: RunHandle, text: str, deadline: float) -> float | None:
    """Answer the run's request once it is pending (queries and updates retried while workers die)."""
    while time.monotonic() < deadline:
        try:
            pending = await asyncio.wait_for(run.pending_requests(), 10)
            if pending:
                await asyncio.wait_for(run.respond(pending[0].request_id, g.Answer(text=text)), 30)
                return time.monotonic()
        except Exception:
            pass
        await asyncio.sleep(0.5)
    return None


async def _mixed_run(
    client: Client,
    queue: str,
    kind: str,
    i: int,
    delay: float,
    answer_after: float,
    deadline: float,
    readers: list[_Reader],
) -> Outcome:
    job = g.Job(id=f"{kind}-{i}", delay=delay)
    out = Outcome(kind, job.id)
    graph = {"fanout": g.fanout, "human": g.human, "stream": g.stream}[kind]
    began = time.monotonic()
    run = await start_run(client, graph, job, id=f"{queue}-{job.id}", task_queue=queue)
    reader = _Reader(run) if kind == "stream" or (kind == "fanout" and i % 3 == 0) else None
    if reader is not None:
        readers.append(reader)
    if kind == "human":
        await asyncio.sleep(answer_after)
        answered = await _answer(run, f"answer-{i}", deadline)
        if answered is None:
            return out
        began = answered
    try:
        result = await asyncio.wait_for(run.result(), max(1.0, deadline - time.monotonic()))
    except TimeoutError:
        return out  # stuck
    except Exception as e:
        out.status = "failed"
        out.wrong = f"{type(e).__name__}: {e}"[:300]
        return out
    out.status = "completed"
    out.latency = time.monotonic() - began
    outputs = result.get("outputs")
    if kind == "fanout":
        done = outputs[0]["done"] if outputs else []
        out.duplicate_commits = len(done) - len(set(done))
        if not _fanout_ok(result, job.id, g.FANOUT_WIDTH):
            out.wrong = f"outputs {outputs!r}"[:300]
    elif kind == "human":
        answers = outputs[0]["answers"] if outputs else []
        out.duplicate_commits = len(answers) - len(set(answers))
        if outputs != [{"id": job.id, "answer": f"answer-{i}", "answers": [f"answer-{i}"]}]:
            out.wrong = f"outputs {outputs!r}"[:300]
    elif outputs != [{"id": job.id, "parts": g.LIVE_ITEMS}]:
        out.wrong = f"outputs {outputs!r}"[:300]
    if reader is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader.task, 60)
        out.reader_duplicates = reader.doubled()
    return out


def _kinds(n: int) -> list[str]:
    """Half fan-outs, a quarter human-input runs, a quarter streaming steps, interleaved."""
    pattern = ["fanout", "human", "fanout", "stream"]
    return [pattern[i % 4] for i in range(n)]


async def _lost(client: Client, queue: str, outcomes: list[Outcome]) -> int:
    lost = 0
    for o in outcomes:
        try:
            await client.get_workflow_handle(f"{queue}-{o.id}").describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                lost += 1
    return lost


async def chaos(client: Client, fleet: Fleet, cfg: Config) -> dict[str, Any]:
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    graphs = _ours_args("fanout", "human", "stream")
    procs = await fleet.start_ready(cfg.chaos_workers, "ours", queue, *graphs)
    rng = random.Random(35)
    # Without chaos: each kind's median latency (human: from the answer).
    calm_deadline = time.monotonic() + 120
    calm_readers: list[_Reader] = []
    calm = await asyncio.gather(
        *(
            _mixed_run(client, queue, kind, 10_000 + i, cfg.io_delay, 1.0, calm_deadline, calm_readers)
            for i, kind in enumerate(_kinds(8))
        )
    )
    assert all(o.status == "completed" and not o.wrong for o in calm), [asdict(o) for o in calm if o.wrong]
    baseline = {
        kind: statistics.median(o.latency or 0.0 for o in calm if o.kind == kind)
        for kind in ("fanout", "human", "stream")
    }
    # The chaos: runs started at a steady rate, a worker killed every `kill_every` s and a new one started.
    readers: list[_Reader] = []
    deadline = time.monotonic() + cfg.chaos_seconds + 240
    spacing = (cfg.chaos_seconds * 0.75) / cfg.chaos_runs
    kinds = _kinds(cfg.chaos_runs)

    async def started(i: int, kind: str) -> Outcome:
        await asyncio.sleep(i * spacing)
        answer_after = rng.uniform(2.0, max(3.0, cfg.chaos_seconds / 4))
        return await _mixed_run(client, queue, kind, i, cfg.io_delay, answer_after, deadline, readers)

    runs = asyncio.gather(*(started(i, kind) for i, kind in enumerate(kinds)))
    kills: list[dict[str, Any]] = []
    live = list(procs)
    began = time.monotonic()
    while time.monotonic() - began < cfg.chaos_seconds:
        await asyncio.sleep(cfg.kill_every)
        victim = rng.choice(live)
        await victim.kill()
        live.remove(victim)
        live.append(await fleet.start("ours", queue, *graphs))  # not waited for: the next kill comes anyway
        kills.append({"at_s": round(time.monotonic() - began, 1), "pid": victim.pid})
    outcomes: list[Outcome] = list(await runs)
    lost = await _lost(client, queue, outcomes)
    for o in outcomes:
        if o.status == "stuck":
            with contextlib.suppress(Exception):
                await client.get_workflow_handle(f"{queue}-{o.id}").terminate("benchmark: stuck after the chaos")
    added = sorted(max(0.0, (o.latency or 0.0) - baseline[o.kind]) for o in outcomes if o.latency is not None)
    p99 = added[min(len(added) - 1, math.ceil(0.99 * len(added)) - 1)] if added else float("nan")
    await fleet.stop_all()
    return {
        "runs": len(outcomes),
        "workers": cfg.chaos_workers,
        "kills": len(kills),
        "kill_every_s": cfg.kill_every,
        "seconds": cfg.chaos_seconds,
        "heartbeat_timeout_s": g.HEARTBEAT.total_seconds(),
        "lost": lost,
        "failed": sum(o.status == "failed" for o in outcomes),
        "stuck": sum(o.status == "stuck" for o in outcomes),
        "wrong": sum(o.wrong is not None and o.status == "completed" for o in outcomes),
        "duplicate_commits": sum(o.duplicate_commits for o in outcomes),
        "reader_duplicates": sum(o.reader_duplicates for o in outcomes),
        "readers": len(readers),
        "baseline_latency_s": baseline,
        "p50_added_s": statistics.median(added) if added else float("nan"),
        "p99_added_s": p99,
        "problems": [asdict(o) for o in outcomes if o.status != "completed" or o.wrong][:10],
        "load": _load(),
    }


# -- stage 4: rolling restart -------------------------------------------------------------------------


async def _timeouts(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The timeouts in a run's history: an activity's (which one) or a workflow task's (schedule-to-start:
    a sticky task no worker took; start-to-close: a worker that took it and never answered)."""
    found = []
    history = await handle.fetch_history()
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            failure = e.activity_task_timed_out_event_attributes.failure
            found.append(f"activity {TimeoutType.Name(failure.timeout_failure_info.timeout_type)}")
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            found.append(f"workflow task {TimeoutType.Name(e.workflow_task_timed_out_event_attributes.timeout_type)}")
    return found


async def rolling(client: Client, fleet: Fleet, cfg: Config) -> dict[str, Any]:
    queue = f"rolling-{uuid.uuid4().hex[:6]}"
    graphs = _ours_args("fanout")
    procs = await fleet.start_ready(cfg.rolling_workers, "ours", queue, *graphs)
    stop = asyncio.Event()
    results: list[Awaitable[tuple[RunHandle, float, Any]]] = []
    jobs: list[g.Job] = []

    async def load() -> None:
        i = 0
        while not stop.is_set():
            job = g.Job(id=f"r{i}", delay=cfg.io_delay)
            jobs.append(job)
            results.append(asyncio.ensure_future(_run_ours(client, g.fanout, queue, job)))
            i += 1
            await asyncio.sleep(cfg.rolling_rate)

    loader = asyncio.create_task(load())
    await asyncio.sleep(3)
    exits = []
    for old in procs:
        exits.append(await old.stop(90))  # SIGTERM: it stops polling, its in-flight steps finish
        await (await fleet.start("ours", queue, *graphs)).ready()
    await asyncio.sleep(3)
    stop.set()
    await loader
    done = await asyncio.gather(*results, return_exceptions=True)
    failures = 0
    timeouts: list[str] = []
    for job, r in zip(jobs, done, strict=True):
        if isinstance(r, BaseException) or not _fanout_ok(r[2], job.id, g.FANOUT_WIDTH):
            failures += 1
            continue
        timeouts += await _timeouts(r[0].handle)
    await fleet.stop_all()
    return {
        "workers": cfg.rolling_workers,
        "runs": len(jobs),
        "failures": failures,
        "timeouts": len(timeouts),
        "timeout_kinds": dict(Counter(timeouts)),
        "exit_codes": exits,
        "load": _load(),
    }


# -- stage 5: versioned rollout -----------------------------------------------------------------------


async def versioned(client: Client, fleet: Fleet, cfg: Config) -> dict[str, Any]:
    queue = f"versioned-{uuid.uuid4().hex[:6]}"
    deployment = f"bench-{uuid.uuid4().hex[:6]}"
    builds = {v: build_id_for([graph, g.fanout]) for v, graph in (("v1", g.versioned_v1), ("v2", g.versioned_v2))}
    per_side = max(1, cfg.rolling_workers // 2)

    async def workers(version: str) -> None:
        await fleet.start_ready(
            per_side,
            "ours",
            queue,
            *_ours_args(f"versioned_{version}", "fanout", extra=["--deployment-name", deployment]),
        )

    async def settled(version: str) -> None:
        async with asyncio.timeout(120):
            while not (
                await current_build_id(client, deployment) == builds[version]
                and await graphs_of_version(client, deployment, builds[version])
            ):
                await asyncio.sleep(0.2)

    await workers("v1")
    await settled("v1")
    stop = asyncio.Event()
    load_runs: list[asyncio.Future[tuple[RunHandle, float, Any]]] = []
    load_jobs: list[g.Job] = []

    async def load() -> None:
        i = 0
        while not stop.is_set():
            job = g.Job(id=f"load{i}", delay=cfg.io_delay)
            load_jobs.append(job)
            load_runs.append(asyncio.ensure_future(_run_ours(client, g.fanout, queue, job)))
            i += 1
            await asyncio.sleep(cfg.rolling_rate * 2)

    loader = asyncio.create_task(load())
    started: list[tuple[str, RunHandle, str]] = []  # (the version its starter built, run, id)
    decisions = _RoutingDecisions(g.versioned_v1.name or "")
    chosen: dict[str, str] = {}  # job id → where its start chose to go, and why (reported for a wrong run)

    async def start(version: str, label: str, i: int) -> None:
        graph = g.versioned_v1 if version == "v1" else g.versioned_v2
        job = g.Job(id=f"{label}-{i}")
        with decisions:  # the stage's own starts are one at a time: the decision logged meanwhile is this one's
            run = await start_run(client, graph, job, id=f"{queue}-{job.id}", task_queue=queue)
        chosen[job.id] = decisions.last()
        started.append((version, run, job.id))

    for i in range(cfg.versioned_runs):
        await start("v1", "before", i)
    await workers("v2")  # the rollout: v2 becomes current
    await settled("v2")
    for i in range(cfg.versioned_runs):
        await start("v2", "after-v2", i)
        await start("v1", "after-v1-client", i)  # a client not yet upgraded: its runs still run v1
    deadline = time.monotonic() + 180

    async def check(version: str, run: RunHandle, job_id: str) -> str | None:
        """``None`` when the run finished on its starter's version, else what went wrong."""
        try:
            answered = await _answer(run, "go", deadline)
            result = await asyncio.wait_for(run.result(), max(1.0, deadline - time.monotonic()))
            desc = await run.describe()
        except Exception as e:
            return f"{job_id}: {type(e).__name__}: {e}; {await _where(run)}; start: {chosen[job_id]}"[:900]
        build = desc.raw_description.workflow_execution_info.versioning_info.deployment_version.build_id
        outputs = result["outputs"]
        ok = answered is not None and outputs and all(o == {"id": job_id, "version": version} for o in outputs)
        wrong = f"{job_id}: outputs {outputs} on build {build}; start: {chosen[job_id]}"
        return None if ok and build == builds[version] else wrong[:900]

    checked = await asyncio.gather(*(check(*s) for s in started))
    problems = [p for p in checked if p is not None]
    failures = len(problems)
    stop.set()
    await loader
    load_done = await asyncio.gather(*load_runs, return_exceptions=True)
    load_failures = sum(
        isinstance(r, BaseException) or not _fanout_ok(r[2], job.id, g.FANOUT_WIDTH)
        for job, r in zip(load_jobs, load_done, strict=True)
    )
    await fleet.stop_all()
    return {
        "runs": len(started),
        "load_runs": len(load_jobs),
        "failures": failures + load_failures,
        "problems": problems[:10],
        "builds": builds,
        "routes": {
            label: dict(Counter(why.split(": ", 1)[1] for j, why in chosen.items() if j.startswith(f"{label}-")))
            for label in ("before", "after-v2", "after-v1-client")
        },
        "load": _load(),
    }


async def _where(run: RunHandle) -> str:
    """Where an unfinished run is: the build it runs on, the version it was pinned to, and what its status
    says it waits for."""
    try:
        desc = await run.describe()
        info = desc.raw_description.workflow_execution_info.versioning_info
        pinned = info.versioning_override.pinned.version.build_id or "(none)"
        warnings = [w.get("message", "")[:160] for w in (await run.status()).get("warnings", [])]
    except Exception as e:  # the report of a report: never the benchmark's failure
        return f"(not described: {type(e).__name__})"
    return f"on build {info.deployment_version.build_id or '(none)'}, pinned to {pinned}; status warnings {warnings}"


class _RoutingDecisions(logging.Handler):
    """While entered: the routing decisions (``_client/routing.py``'s debug lines) of starts of one graph."""

    def __init__(self, graph: str) -> None:
        super().__init__(logging.DEBUG)
        self._graph = graph
        self._seen: list[str] = []
        self._logger = logging.getLogger("temporal_workflows.temporal._client.routing")

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and record.args[:1] == (self._graph,):
            self._seen.append(record.getMessage())

    def __enter__(self) -> _RoutingDecisions:
        self._saved = self._logger.level, self._logger.propagate
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False  # kept here: not printed by the handlers of whoever runs the bench
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        level, self._logger.propagate = self._saved
        self._logger.setLevel(level)  # setLevel, not .level: it also clears the loggers' cached levels

    def last(self) -> str:
        return self._seen[-1] if self._seen else "(no decision logged)"


# -- the report ---------------------------------------------------------------------------------------


Stage = Callable[[Client, Fleet, Config], Awaitable[dict[str, Any]]]

STAGES: dict[str, Stage] = {
    "spread": spread,
    "throughput": throughput,
    "chaos": chaos,
    "rolling": rolling,
    "versioned": versioned,
}
"""The stages, in the order a run takes them (``--stage`` picks some; the order stays this one)."""


@dataclass
class Target:
    key: str
    stage: str
    """The stage whose figures it judges: not judged (``met`` ``null``) when that stage did not run."""
    text: str
    met: Callable[[dict[str, Any]], bool]


TARGETS = [
    Target(
        "spread",
        "spread",
        "200-way fan-out of 0.5 s steps: 4 workers ≤ 0.35 x 1 worker",
        lambda r: r["spread_ratio"] <= 0.35,
    ),
    Target(
        "spread_share",
        "spread",
        "each of 4 workers runs ≥ 15% of its steps",
        lambda r: r["spread_min_share"] >= 0.15,
    ),
    Target(
        "io_scaling",
        "throughput",
        "I/O-bound throughput, 4 workers ≥ 3.6 x 1 worker",
        lambda r: r["io_scaling_4_vs_1"] >= 3.6,
    ),
    Target(
        "vs_hand_written",
        "throughput",
        "throughput ≥ 0.9 x hand-written at every N",
        lambda r: r["throughput_ratio_vs_hand_written"] >= 0.9,
    ),
    Target(
        "chaos_zero",
        "chaos",
        "chaos: no run lost, failed, stuck or wrong; no duplicate commit; no reader duplicate",
        lambda r: (
            not any(
                r[k] for k in ("chaos_lost", "chaos_failed", "chaos_stuck", "chaos_wrong", "chaos_duplicate_commits")
            )
            and not r["chaos_reader_duplicates"]
        ),
    ),
    Target(
        "chaos_p99",
        "chaos",
        "chaos: added p99 ≤ heartbeat timeout + 5 s",
        lambda r: r["chaos_p99_added_s"] <= r["details"]["chaos"]["heartbeat_timeout_s"] + 5,
    ),
    Target(
        "rolling",
        "rolling",
        "rolling restart: no failure, no timeout",
        lambda r: r["rolling_failures"] + r["rolling_timeouts"] == 0,
    ),
    Target(
        "versioned",
        "versioned",
        "versioned rollout: every run on its starter's version",
        lambda r: r["versioned_rollout_failures"] == 0,
    ),
]


SERVER_ARGS = ["--dynamic-config-value", "frontend.enableCancelWorkerPollsOnShutdown=true"]
"""The benchmark's server: ``start-dev`` as it comes, and workers' polls completed by the server when a worker
shuts down (``worker_poll_complete_on_shutdown``), so a gracefully stopped worker is handed no task in
flight. The rolling restart runs once more on a server without it (``rolling_default_server``), reported."""


async def _stages(
    address: str, logs: Path, cfg: Config, stages: Sequence[tuple[str, Callable[..., Awaitable[dict[str, Any]]]]]
) -> dict[str, Any]:
    details: dict[str, Any] = {}
    fleet = Fleet(address, logs)
    try:
        client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin()])
        for name, stage in stages:
            _say(f"fleet: {name} (load {_load()})")
            t = time.monotonic()
            details[name] = await stage(client, fleet, cfg)
            details[name]["stage_seconds"] = round(time.monotonic() - t, 1)
            _say(f"  {json.dumps(details[name], default=str)[:600]}")
    finally:
        await fleet.kill_all()
    return details


def _figures(details: dict[str, Any]) -> dict[str, Any]:
    """The report's top-level figures from the stages' details; a figure of a stage not run is ``None``."""

    def of(stage: str, key: str) -> Any:
        return details[stage][key] if stage in details else None

    return {
        "spread_ratio": of("spread", "ratio"),
        "spread_min_share": of("spread", "min_share"),
        "short_steps_latency_ratio": of("spread", "short_ratio"),
        "io_scaling_4_vs_1": of("throughput", "scaling"),
        "throughput_ratio_vs_hand_written": of("throughput", "lowest_ratio"),
        "chaos_runs": of("chaos", "runs"),
        "chaos_lost": of("chaos", "lost"),
        "chaos_failed": of("chaos", "failed"),
        "chaos_stuck": of("chaos", "stuck"),
        "chaos_wrong": of("chaos", "wrong"),
        "chaos_duplicate_commits": of("chaos", "duplicate_commits"),
        "chaos_reader_duplicates": of("chaos", "reader_duplicates"),
        "chaos_p99_added_s": of("chaos", "p99_added_s"),
        "rolling_failures": of("rolling", "failures"),
        "rolling_timeouts": of("rolling", "timeouts"),
        "rolling_default_server_failures": of("rolling_default_server", "failures"),
        "rolling_default_server_timeouts": of("rolling_default_server", "timeouts"),
        "versioned_rollout_failures": of("versioned", "failures"),
    }


async def run_bench(cfg: Config, stages: Sequence[str] = tuple(STAGES)) -> dict[str, Any]:
    """Run ``stages`` (names in :data:`STAGES`, run in that table's order) and report them."""
    chosen = [name for name in STAGES if name in stages]
    report: dict[str, Any] = {
        "config": {"quick": cfg.quick, "cpus": os.cpu_count(), "server_args": SERVER_ARGS, "stages": chosen},
        "load_before": _load(),
    }
    logs = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        env = await start_dev_server(extra_args=SERVER_ARGS)
        try:
            details = await _stages(
                env.client.service_client.config.target_host,
                logs,
                cfg,
                [(name, STAGES[name]) for name in chosen],
            )
        finally:
            await env.shutdown()
        if "rolling" in chosen:
            plain = await start_dev_server()
            try:
                details["rolling_default_server"] = (
                    await _stages(plain.client.service_client.config.target_host, logs, cfg, (("rolling", rolling),))
                )["rolling"]
            finally:
                await plain.shutdown()
    except BaseException:
        _say(f"worker logs kept in {logs}")
        raise
    report.update(_figures(details))
    report["load_after"] = _load()
    report["details"] = details
    report["targets"] = {
        t.key: {"text": t.text, "met": None if cfg.quick or t.stage not in details else bool(t.met(report))}
        for t in TARGETS
    }
    return report


def _table(report: dict[str, Any]) -> str:
    d = report["details"]
    stages = report["config"]["stages"]
    lines = [
        f"fleet benchmark ({'--quick: timings not judged' if report['config']['quick'] else 'full run'}); "
        f"{report['config']['cpus']} CPUs; load average before {report['load_before']}, after {report['load_after']}",
    ]
    if stages != list(STAGES):
        lines.append(f"stages run: {', '.join(stages)} (the others' figures are null)")
    if "spread" in d:
        sp = d["spread"]
        lines.append(
            f"spread: {sp['width']}-way fan-out of {sp['delay_s']} s steps, {SLOTS} slots per worker: "
            f"{sp['ratio']:.3f} x one worker's time; smallest share {sp['min_share']:.0%}; "
            f"short steps' latency {sp['short_ratio']:.2f} x one worker's"
        )
    if "throughput" in d:
        tp = d["throughput"]["by_n"]
        for n, row in tp.items():
            lines.append(
                f"throughput N={n}: ours {row['ours_steps_per_s']:.1f} steps/s, hand-written "
                f"{row['base_steps_per_s']:.1f} steps/s, ratio {row['ratio']:.2f} (load {row['load']})"
            )
        lines.append(
            f"scaling 1→{max(tp)} workers: ours {d['throughput']['scaling']:.2f}x, hand-written "
            f"{d['throughput']['base_scaling']:.2f}x"
        )
    if "chaos" in d:
        ch = d["chaos"]
        lines.append(
            f"chaos: {ch['runs']} runs, {ch['kills']} kill -9 over {ch['seconds']:g} s, heartbeat timeout "
            f"{ch['heartbeat_timeout_s']:g} s: lost {ch['lost']}, failed {ch['failed']}, stuck {ch['stuck']}, wrong "
            f"{ch['wrong']}, duplicate commits {ch['duplicate_commits']}, reader duplicates {ch['reader_duplicates']} "
            f"({ch['readers']} readers); added latency p50 {ch['p50_added_s']:.1f} s, p99 {ch['p99_added_s']:.1f} s"
        )
    if "rolling" in d:
        ro, rd = d["rolling"], d["rolling_default_server"]
        lines.append(f"rolling restart: {ro['runs']} runs, failures {ro['failures']}, timeouts {ro['timeouts']}")
        lines.append(
            f"  (on a server without polls completed at worker shutdown: {rd['runs']} runs, failures "
            f"{rd['failures']}, timeouts {rd['timeouts']} {rd['timeout_kinds']})"
        )
    if "versioned" in d:
        ve = d["versioned"]
        lines.append(f"versioned rollout: {ve['runs']} runs (+{ve['load_runs']} load runs), failures {ve['failures']}")
        lines += [f"  {problem}" for problem in ve["problems"]]
    for key, t in report["targets"].items():
        met = "not judged" if t["met"] is None else ("met" if t["met"] else "NOT MET")
        lines.append(f"  target {key}: {t['text']}: {met}")
    return "\n".join(lines)


async def _interruptible(work: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """``work``, cancelled by SIGTERM or SIGINT, so its worker processes and servers are stopped on the way out."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    return await task


def _chosen_stages(parser: argparse.ArgumentParser, given: Sequence[str] | None) -> list[str]:
    """The stages ``--stage`` names (every stage when none), in the benchmark's order; an unknown one is refused."""
    if not given:
        return list(STAGES)
    names = {name.strip() for value in given for name in value.split(",") if name.strip()}
    unknown = sorted(names - set(STAGES))
    if unknown or not names:
        parser.error(f"--stage: unknown stage {', '.join(unknown) or '(none)'}; choose from {', '.join(STAGES)}")
    return [name for name in STAGES if name in names]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench --only fleet", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="every stage scaled down, to check it runs (CI)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout (the table on stderr)")
    parser.add_argument(
        "--stage",
        action="append",
        metavar="NAME",
        help=f"run only this stage ({', '.join(STAGES)}); repeat it or give a comma list; default: every stage",
    )
    args = parser.parse_args(argv)
    stages = _chosen_stages(parser, args.stage)
    report_to = sys.stdout
    if args.json:
        # The JSON object alone on stdout: the servers and workers this bench starts inherit its file
        # descriptors (the dev server prints a banner on its stdout), so theirs is pointed at stderr.
        sys.stdout.flush()
        report_to = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    report = asyncio.run(_interruptible(run_bench(Config.of(args.quick), stages)))
    if args.json:
        _say(_table(report))
        print(json.dumps(report, default=str), file=report_to, flush=True)
    else:
        print(_table(report), flush=True)
