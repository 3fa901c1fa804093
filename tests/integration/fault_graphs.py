"""Graphs of the fault-injection tests (``test_faults.py``) and the side-effect log their steps write.

Worker processes (``python -m tests.integration.fault_worker``), workers in the
test process and the in-process reference runs all import this module, so
nothing here depends on who hosts it. Two pieces of process configuration come
from the environment, read when a step runs:

- ``TW_FAULT_LOG``: path of the SQLite side-effect log (no logging when unset).
- ``TW_FAULT_HOLD``: ``"1"`` in a worker the test is about to kill: there, the
  first attempt of every ``work`` step applies its effect and then keeps
  heartbeating instead of returning, so the kill is certain to land mid-step
  (and mid-superstep). Retries, in other processes, run normally.

The log stands in for an external system: every step records its attempts,
and applies its effect (adding its amount to the run's balance, which is not
idempotent by itself) at most once per idempotency key, in one SQLite
transaction. Several processes write it at once; SQLite serializes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.common import RetryPolicy

from temporal_workflows import Executor, ExecutorOptions, Workflow, WorkflowBuilder, WorkflowContext, executor, handler

ENV_LOG = "TW_FAULT_LOG"
ENV_HOLD = "TW_FAULT_HOLD"

HOLD_SECONDS = 120.0
"""How long a held first attempt heartbeats before giving up (the test kills its process long before)."""

HEARTBEAT_EVERY = 0.2
"""Seconds between a long step's heartbeats (the SDK throttles what reaches the server)."""

# -- the side-effect log ----------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    executor_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS effects (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    executor_id TEXT NOT NULL,
    amount INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS balances (
    run_id TEXT PRIMARY KEY,
    total INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class Event:
    """One line of the log: something a step attempt did."""

    seq: int
    run_id: str
    key: str
    executor_id: str
    attempt: int
    pid: int
    event: str
    detail: str
    at: float


@dataclass(frozen=True)
class Effect:
    """An applied effect; at most one per idempotency key (the table's primary key)."""

    key: str
    run_id: str
    executor_id: str
    amount: int
    attempt: int
    pid: int


class EffectLog:
    """The SQLite side-effect log (one connection per call: safe across processes and kills)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def from_env(cls) -> EffectLog | None:
        path = os.environ.get(ENV_LOG)
        return cls(path) if path else None

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 60000")
            # A commit survives the death of the process that made it (the faults injected here),
            # without an fsync per write, which would stall every step.
            conn.execute("PRAGMA synchronous = NORMAL")
            yield conn
        finally:
            conn.close()

    def _rows(self, sql: str) -> list[Any]:
        with self._connect() as conn:
            return conn.execute(sql).fetchall()

    def create(self) -> None:
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.executescript(_SCHEMA)

    def record(self, ctx: WorkflowContext[Any, Any], event: str, detail: str = "") -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO events (run_id, key, executor_id, attempt, pid, event, detail, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ctx.run_id,
                    ctx.idempotency_key,
                    ctx.executor_id,
                    ctx.attempt,
                    os.getpid(),
                    event,
                    detail,
                    time.time(),
                ),
            )

    def apply(self, ctx: WorkflowContext[Any, Any], amount: int) -> bool:
        """Add ``amount`` to the run's balance unless this step's key already did; True if applied now."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO effects (key, run_id, executor_id, amount, attempt, pid) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (ctx.idempotency_key, ctx.run_id, ctx.executor_id, amount, ctx.attempt, os.getpid()),
                )
                applied = cur.rowcount == 1
                if applied:
                    conn.execute(
                        "INSERT INTO balances (run_id, total) VALUES (?, ?) "
                        "ON CONFLICT (run_id) DO UPDATE SET total = total + excluded.total",
                        (ctx.run_id, amount),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return applied

    # -- reading (the test's side) ---------------------------------------------------

    def events(self) -> list[Event]:
        sql = "SELECT seq, run_id, key, executor_id, attempt, pid, event, detail, at FROM events ORDER BY seq"
        return [Event(*row) for row in self._rows(sql)]

    def effects(self) -> list[Effect]:
        sql = "SELECT key, run_id, executor_id, amount, attempt, pid FROM effects ORDER BY key"
        return [Effect(*row) for row in self._rows(sql)]

    def balances(self) -> dict[str, int]:
        return {run_id: total for run_id, total in self._rows("SELECT run_id, total FROM balances")}


async def _record(ctx: WorkflowContext[Any, Any], event: str, detail: str = "") -> None:
    log = EffectLog.from_env()
    if log is not None:  # off the event loop, like any call to an outside system from a step
        await asyncio.to_thread(log.record, ctx, event, detail)


async def _apply(ctx: WorkflowContext[Any, Any], amount: int) -> bool:
    log = EffectLog.from_env()
    return await asyncio.to_thread(log.apply, ctx, amount) if log is not None else True


async def heartbeating_sleep(ctx: WorkflowContext[Any, Any], seconds: float) -> None:
    """Wait ``seconds``, heartbeating as a long step should (a no-op in process)."""
    deadline = time.monotonic() + seconds
    beat = 0
    while (left := deadline - time.monotonic()) > 0:
        ctx.heartbeat(beat)
        beat += 1
        await asyncio.sleep(min(HEARTBEAT_EVERY, left))


def _cancel_reason() -> str:
    """Why the running activity was cancelled, as far as the SDK says (empty in process)."""
    if not activity.in_activity():
        return ""
    details = activity.cancellation_details()
    if details is None:
        return "unknown"
    return ",".join(name for name, value in vars(details).items() if value is True) or "unknown"


# -- fan-out rounds with side effects (kills, server restart, shared queue) ---------------------

LONG_STEP = ExecutorOptions(
    start_to_close_timeout=timedelta(minutes=2),
    # Short, so the attempts of a killed worker are retried elsewhere within seconds.
    heartbeat_timeout=timedelta(seconds=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=1), maximum_attempts=20
    ),
)
QUICK_STEP = ExecutorOptions(
    # Shorter than the heartbeat timeout: this start-to-close timeout notices that a quick step's worker is gone.
    start_to_close_timeout=timedelta(seconds=5),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=1), maximum_attempts=20
    ),
)


class Job(BaseModel):
    """A run's start message: ``rounds`` rounds of three parallel ``work`` steps."""

    run: int
    rounds: int = 2
    work_seconds: float = 0.3
    round: int = 1


class Part(BaseModel):
    job: Job
    worker: str
    amount: int


WORKERS = ("w0", "w1", "w2")


def amount_of(job: Job, worker_id: str) -> int:
    """The effect a step applies: distinct per run, round and worker, so a double count shows."""
    return (job.run + 1) * 1000 + job.round * 10 + WORKERS.index(worker_id) + 1


@executor(id="plan", options=QUICK_STEP)
async def plan(job: Job, ctx: WorkflowContext[Job]) -> None:
    ctx.set_state("round", job.round)
    await ctx.send_message(job)


class Work(Executor):
    """A long step: heartbeats while it works, then applies its effect guarded by its idempotency key."""

    @handler
    async def work(self, job: Job, ctx: WorkflowContext[Part]) -> None:
        await _record(ctx, "started")
        await heartbeating_sleep(ctx, job.work_seconds)
        amount = amount_of(job, self.id)
        await _record(ctx, "applied" if await _apply(ctx, amount) else "duplicate", str(amount))
        if ctx.attempt == 1 and os.environ.get(ENV_HOLD) == "1":
            await _record(ctx, "holding")
            await heartbeating_sleep(ctx, HOLD_SECONDS)  # until this process is killed
        ctx.set_state("ledger", [f"{self.id}@{job.round}={amount}"])
        ctx.set_state("total", amount)
        await ctx.send_message(Part(job=job, worker=self.id, amount=amount))
        await _record(ctx, "finished")


@executor(id="merge", options=QUICK_STEP)
async def merge(parts: list[Part], ctx: WorkflowContext[Job, dict[str, Any]]) -> None:
    job = parts[0].job
    subtotal = sum(p.amount for p in parts)
    ctx.set_state(f"round_{job.round}", {p.worker: p.amount for p in parts})
    if job.round < job.rounds:
        await ctx.send_message(job.model_copy(update={"round": job.round + 1}))
    else:
        total = ctx.get_state("total")
        await ctx.yield_output({"run": job.run, "rounds": job.rounds, "total": total, "last_round": subtotal})


def build_rounds() -> Workflow:
    """plan → fan-out to w0, w1, w2 → fan-in to merge → plan again, ``rounds`` times."""
    workers = [Work(w, options=LONG_STEP) for w in WORKERS]
    return (
        WorkflowBuilder(start_executor=plan, name="fault_rounds")
        .add_fan_out_edges(plan, workers)
        .add_fan_in_edges(workers, merge)
        .add_edge(merge, plan)
        .add_state_reducer("ledger", "append")
        .add_state_reducer("total", "sum")
        .build()
    )


rounds = build_rounds()

# -- retries, timeouts and cancellation (one step each) --------------------------------------------

FAST_RETRY_3 = RetryPolicy(initial_interval=timedelta(milliseconds=100), backoff_coefficient=1.0, maximum_attempts=3)


@executor(id="wobbly", options=ExecutorOptions(retry_policy=FAST_RETRY_3))
async def wobbly(text: str, ctx: WorkflowContext[None, str]) -> None:
    """Fails on its first two attempts, then succeeds (the policy allows three)."""
    await _record(ctx, "started")
    if ctx.attempt <= 2:
        raise RuntimeError(f"transient failure on attempt {ctx.attempt}")
    await ctx.yield_output(f"{text} on attempt {ctx.attempt}")


fails_twice = WorkflowBuilder(start_executor=wobbly, name="fault_fails_twice").build()


@executor(id="intake")
async def intake(text: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(text)


@executor(id="doomed", options=ExecutorOptions(retry_policy=FAST_RETRY_3))
async def doomed(text: str, ctx: WorkflowContext[None, str]) -> None:
    """Fails on every attempt."""
    await _record(ctx, "started")
    raise RuntimeError(f"backend down (attempt {ctx.attempt})")


always_fails = WorkflowBuilder(start_executor=intake, name="fault_always_fails").add_edge(intake, doomed).build()

OVERRUN_TIMEOUT = timedelta(seconds=1)
OVERRUN_BY = 10
"""The first attempt of ``slowpoke`` would take this many times its start-to-close timeout (it is stopped first)."""


@executor(
    id="slowpoke",
    options=ExecutorOptions(
        start_to_close_timeout=OVERRUN_TIMEOUT,
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3),
    ),
)
async def slowpoke(text: str, ctx: WorkflowContext[None, str]) -> None:
    """Its first attempt overruns its start-to-close timeout; later ones are quick.

    It never calls ``ctx.heartbeat()``, but the step activity heartbeats for it
    (the server keeps a heartbeat timeout no longer than the start-to-close
    timeout, so every third of a second here): the first heartbeat after the
    timeout is refused, and the first attempt is cancelled then, instead of
    running on to a result that would be refused.
    """
    await _record(ctx, "started")
    try:
        if ctx.attempt == 1:
            await asyncio.sleep(OVERRUN_BY * OVERRUN_TIMEOUT.total_seconds())
        await ctx.yield_output(f"{text} on attempt {ctx.attempt}")
    except asyncio.CancelledError:
        await _record(ctx, "cancelled", _cancel_reason())
        raise
    finally:
        await _record(ctx, "ended")


overrun = WorkflowBuilder(start_executor=slowpoke, name="fault_overrun").build()


@executor(
    id="marathon",
    options=ExecutorOptions(
        start_to_close_timeout=timedelta(minutes=5),
        heartbeat_timeout=timedelta(seconds=2),
        retry_policy=RetryPolicy(maximum_attempts=1),
    ),
)
async def marathon(seconds: float, ctx: WorkflowContext[None, str]) -> None:
    """A long step that heartbeats, and cleans up when it is cancelled."""
    await _record(ctx, "started")
    try:
        await heartbeating_sleep(ctx, seconds)
    except asyncio.CancelledError:
        await _record(ctx, "cancelled", _cancel_reason())
        await _record(ctx, "cleanup")  # e.g. release a lease, delete a temporary file
        raise
    finally:
        await _record(ctx, "ended")
    await ctx.yield_output("finished")


long_step = WorkflowBuilder(start_executor=marathon, name="fault_long_step").build()


# -- default options: the step activity heartbeats for steps that do not --------------------------------


@executor(id="dawdle")
async def dawdle(job: Job, ctx: WorkflowContext[None, dict[str, Any]]) -> None:
    """A step with default options that never calls ``ctx.heartbeat()``; held (a plain sleep) in a worker to be killed.

    Only the step activity's own heartbeats tell the server it is alive, so
    only they can notice, within the default heartbeat timeout, that its
    worker died.
    """
    await _record(ctx, "started")
    amount = amount_of(job, WORKERS[0])
    await _record(ctx, "applied" if await _apply(ctx, amount) else "duplicate", str(amount))
    if ctx.attempt == 1 and os.environ.get(ENV_HOLD) == "1":
        await _record(ctx, "holding")
        await asyncio.sleep(HOLD_SECONDS)  # until this process is killed
    await ctx.yield_output({"run": job.run, "amount": amount})
    await _record(ctx, "finished")


unconfigured = WorkflowBuilder(start_executor=dawdle, name="fault_unconfigured").build()


@executor(id="idler", options=ExecutorOptions(retry_policy=RetryPolicy(maximum_attempts=1)))
async def idler(seconds: float, ctx: WorkflowContext[None, str]) -> None:
    """A long step with the default heartbeat timeout that never heartbeats itself, and cleans up when cancelled."""
    await _record(ctx, "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await _record(ctx, "cancelled", _cancel_reason())
        await _record(ctx, "cleanup")
        raise
    finally:
        await _record(ctx, "ended")
    await ctx.yield_output("finished")


idle_step = WorkflowBuilder(start_executor=idler, name="fault_idle_step").build()

STUBBORN_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
STUBBORN_LINGER = 4 * STUBBORN_HEARTBEAT_TIMEOUT.total_seconds()
"""How long ``stubborn`` goes on after swallowing its cancel: longer than its heartbeat timeout."""


@executor(
    id="stubborn",
    options=ExecutorOptions(heartbeat_timeout=STUBBORN_HEARTBEAT_TIMEOUT, retry_policy=RetryPolicy(maximum_attempts=1)),
)
async def stubborn(seconds: float, ctx: WorkflowContext[None, str]) -> None:
    """A long step that swallows its cancel and carries on for a while (what a step must not do)."""
    await _record(ctx, "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await _record(ctx, "ignored", _cancel_reason())
        await asyncio.sleep(STUBBORN_LINGER)
    finally:
        await _record(ctx, "ended")
    await ctx.yield_output("finished")


ignores_cancel = WorkflowBuilder(start_executor=stubborn, name="fault_ignores_cancel").build()


def all_workflows() -> list[Workflow]:
    """Every graph a fault worker hosts."""
    return [rounds, fails_twice, always_fails, overrun, long_step, unconfigured, idle_step, ignores_cancel]
