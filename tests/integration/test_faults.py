"""Fault injection on a real dev server: killed workers, a restarted server, retries, timeouts, cancellation.

Steps with default options heartbeat by themselves (the step activity does it
while the handler runs): section 5 kills the only worker of such steps, and
cancels a step that never calls ``ctx.heartbeat()``.

Every test checks that nothing was lost. Outputs and committed state equal an
undisturbed in-process reference run of the same graph, and the side-effect
log (``fault_graphs.EffectLog``, a SQLite file the steps write) shows every
step's effect applied exactly once, keyed by ``ctx.idempotency_key``, however
often the step was attempted. Faults are timed by conditions (the log, the
``status`` query), never by sleeps.

Workers that get killed are processes (``python -m tests.integration.fault_worker``)
on task queues of their own, so the session worker never sees these runs.

Covered elsewhere and not repeated here: a step failing once and succeeding
with the same idempotency key (``test_temporal.test_idempotency_key_is_stable_across_retries``),
a non-retryable handler error failing the run at once
(``test_temporal.test_handler_non_retryable_error_fails_the_run``), graph errors
that are never retried (``test_temporal.test_undeliverable_message_fails_without_retrying``),
and a worker process shut down by SIGTERM (``test_temporal.test_worker_process_serves_runs_and_stops_on_sigterm``).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from temporal_workflows import SqliteCheckpointStorage, Workflow
from temporal_workflows._engine.serde import encode
from temporal_workflows._graph.executor import DEFAULT_HEARTBEAT_TIMEOUT
from temporal_workflows.errors import ExecutorFailedError
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, start_dev_server, start_run
from temporal_workflows.temporal._client.devserver import free_port
from tests.integration import fault_graphs
from tests.integration.cli import ProcessGroup
from tests.integration.fault_graphs import ENV_HOLD, ENV_LOG, EffectLog, Job
from tests.integration.waits import DEADLINE, until

ROOT = Path(__file__).parents[2]


async def connect(address: str) -> Client:
    """A client that starts and reads runs (hosts nothing)."""
    return await Client.connect(address, plugins=[TemporalWorkflowsPlugin(tracing=False, encryption=None)])


# -- worker processes ----------------------------------------------------------------


class WorkerProcesses(ProcessGroup):
    """Worker processes on one task queue; every one still running is killed on exit."""

    def __init__(self, address: str, task_queue: str, log: EffectLog, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.address = address
        self.task_queue = task_queue
        self.log = log

    async def start(self, *names: str, hold: bool = False) -> list[int]:
        """Start one worker per name (concurrently); return their pids once each polls."""
        for name in names:
            stderr = (self.tmp_path / f"{name}.stderr").open("wb")
            self.procs[name] = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.integration.fault_worker",
                *("--address", self.address, "--task-queue", self.task_queue, "--log", str(self.log.path)),
                *("--checkpoint-db", str(self.tmp_path / f"{name}-checkpoints.sqlite")),
                *(["--hold"] if hold else []),
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
            stderr.close()
        return list(await asyncio.gather(*(self._ready(name) for name in names)))

    async def _ready(self, name: str) -> int:
        proc = self.procs[name]
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), DEADLINE)
        assert line.startswith(b"ready "), f"worker {name} did not start: {self.stderr(name)}"
        return int(line.split()[1])

    async def kill(self, name: str) -> None:
        """``kill -9``: no graceful shutdown, no completions reported."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(proc.wait(), DEADLINE) == -signal.SIGKILL

    def alive(self, name: str) -> bool:
        return self.procs[name].returncode is None

    def stderr(self, name: str) -> str:
        return (self.tmp_path / f"{name}.stderr").read_text(errors="replace")[-4000:]


# -- the reference run and what "nothing lost" means ------------------------------------


@dataclass
class Reference:
    """An undisturbed in-process run of each job: outputs, state and effects, per job index."""

    outputs: list[list[Any]]
    states: list[dict[str, Any]]
    effects: dict[int, list[tuple[str, str, int]]]
    balances: dict[int, int]


async def reference_runs(jobs: Sequence[Job], log_path: Path, monkeypatch: pytest.MonkeyPatch) -> Reference:
    log = EffectLog(log_path)
    log.create()
    with monkeypatch.context() as m:
        m.setenv(ENV_LOG, str(log_path))
        m.delenv(ENV_HOLD, raising=False)
        results = await asyncio.gather(*(fault_graphs.build_rounds().run(job) for job in jobs))
    job_of = {r.run_id: i for i, r in enumerate(results)}
    return Reference(
        outputs=[[encode(o).data for o in r.get_outputs()] for r in results],
        states=[{k: encode(v).data for k, v in r.state.items()} for r in results],
        effects=effects_by_job(log, job_of),
        balances={job_of[run]: total for run, total in log.balances().items()},
    )


def effects_by_job(log: EffectLog, job_of: dict[str, int]) -> dict[int, list[tuple[str, str, int]]]:
    """Each job's effects as (step key without the run id, executor, amount), sorted."""
    found: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for e in log.effects():
        found[job_of[e.run_id]].append((e.key.removeprefix(f"{e.run_id}:"), e.executor_id, e.amount))
    return {job: sorted(effects) for job, effects in found.items()}


TASK_TIMEOUT = timedelta(seconds=3)
"""Workflow task timeout of the runs started here.

A workflow task that a killed worker had taken waits out this timeout before
another worker may take it (Temporal's default is 10 s); the runs' steps are
unaffected (they have their own timeouts).
"""


async def start_jobs(
    client: Client, jobs: Sequence[Job], prefix: str, task_queue: str, graph: Workflow = fault_graphs.rounds
) -> list[RunHandle]:
    """Start one run of ``graph`` (``fault_rounds``) per job with the plain SDK (``docs/temporal.md``'s contract)."""

    async def start(i: int, job: Job) -> RunHandle:
        message = encode(job)
        handle = await client.start_workflow(
            graph.name or "",
            {"message": message.data, "message_type": message.type},
            id=f"{prefix}-{i}",
            task_queue=task_queue,
            task_timeout=TASK_TIMEOUT,
            result_type=dict,
        )
        return RunHandle(handle, client)

    return list(await asyncio.gather(*(start(i, job) for i, job in enumerate(jobs))))


async def assert_nothing_lost(handles: Sequence[RunHandle], ref: Reference, log: EffectLog) -> None:
    """Outputs, state and effects equal the reference; no step's effect was applied twice or lost."""
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), DEADLINE)
    assert [r["status"] for r in results] == ["completed"] * len(handles)
    assert [r["outputs"] for r in results] == ref.outputs
    assert [await h.state() for h in handles] == ref.states
    job_of = {h.id: i for i, h in enumerate(handles)}
    # One effect per step of the reference (the effects table holds at most one per idempotency key) ...
    assert effects_by_job(log, job_of) == ref.effects
    # ... and the non-idempotent balance moved once per step: no attempt applied an effect again.
    assert {job_of[run]: total for run, total in log.balances().items()} == ref.balances
    events = [e for e in log.events() if e.run_id in job_of]
    applied = Counter(e.key for e in events if e.event == "applied")
    assert max(applied.values()) == 1, [k for k, n in applied.items() if n > 1]
    # Every attempt that started belongs to a step whose effect is in (none was left half done).
    assert {e.key for e in events if e.event == "started"} == {e.key for e in log.effects() if e.run_id in job_of}


def held_keys(log: EffectLog, pid: int) -> set[str]:
    """Steps whose first attempt, in process ``pid``, applied its effect and now hangs there."""
    return {e.key for e in log.events() if e.pid == pid and e.event == "holding"}


def assert_reattempted_elsewhere(log: EffectLog, held: set[str], victim: int) -> None:
    """Every step the killed worker held ran again in another process and found its effect already applied."""
    events = log.events()
    retried = {e.key for e in events if e.event == "started" and e.attempt > 1 and e.pid != victim}
    assert held <= retried, f"never re-attempted: {sorted(held - retried)}"
    duplicates = {e.key for e in events if e.event == "duplicate"}
    assert held <= duplicates, f"re-attempts that applied the effect again: {sorted(held - duplicates)}"
    assert not any(e.key in held and e.event == "finished" and e.pid == victim for e in events)


@pytest.fixture
def log(tmp_path: Path) -> EffectLog:
    effects = EffectLog(tmp_path / "effects.sqlite")
    effects.create()
    return effects


# -- 1. kill -9 of the worker process mid-superstep -------------------------------------------


async def test_worker_killed_mid_superstep_a_new_worker_completes_every_run(
    temporal_address: str, tmp_path: Path, log: EffectLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [Job(run=i, rounds=2, work_seconds=0.3) for i in range(10)]
    ref = await reference_runs(jobs, tmp_path / "reference.sqlite", monkeypatch)
    queue = f"faults-kill-{uuid.uuid4().hex[:8]}"
    client = await connect(temporal_address)
    async with WorkerProcesses(temporal_address, queue, log, tmp_path) as workers:
        (victim,) = await workers.start("victim", hold=True)
        handles = await start_jobs(client, jobs, queue, queue)
        width = len(fault_graphs.WORKERS)
        held = await until(
            "every run's first-round steps to be running on the victim",
            lambda: keys if len(keys := held_keys(log, victim)) == width * len(jobs) else None,
        )
        for status in await asyncio.gather(*(h.status() for h in handles)):
            assert status["status"] == "running" and status["superstep"] == 1, status
            assert sorted(status["in_flight"]) == sorted(fault_graphs.WORKERS), status
        await workers.kill("victim")
        (rescuer,) = await workers.start("rescuer")
        await assert_nothing_lost(handles, ref, log)
        assert_reattempted_elsewhere(log, held, victim)
        assert {e.pid for e in log.events()} == {victim, rescuer}


# -- 2. the server stopped and restarted on the same SQLite file ----------------------------------


async def test_server_restarted_mid_run_on_the_same_database(
    tmp_path: Path, log: EffectLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [Job(run=i, rounds=2, work_seconds=1.0) for i in range(5)]
    ref = await reference_runs(jobs, tmp_path / "reference.sqlite", monkeypatch)
    port, db = free_port(), str(tmp_path / "temporal.sqlite")
    env = await start_dev_server(port=port, db_filename=db)
    try:
        address = env.client.service_client.config.target_host
        queue = f"faults-restart-{uuid.uuid4().hex[:8]}"
        client = await connect(address)
        async with WorkerProcesses(address, queue, log, tmp_path) as workers:
            await workers.start("worker")
            handles = await start_jobs(client, jobs, queue, queue)
            await until(
                "every run to be running a step",
                lambda: {e.run_id for e in log.events() if e.event == "started"} == {h.id for h in handles},
            )
            stopped_at = time.time()
            await env.shutdown()
            # Steps go on without the server; wait until one has finished while it was down.
            await until(
                "a step to finish while the server is down",
                lambda: any(e.event == "finished" and e.at > stopped_at for e in log.events()),
            )
            env = await start_dev_server(port=port, db_filename=db)
            await assert_nothing_lost(handles, ref, log)
            assert workers.alive("worker"), workers.stderr("worker")
            # The client from before the outage still works, and the runs really crossed it.
            for h in handles:
                desc = await h.describe()
                assert desc.close_time is not None
                assert desc.start_time.timestamp() < stopped_at < desc.close_time.timestamp()
    finally:
        await env.shutdown()


# -- 3. three workers share a queue; one is killed -----------------------------------------


async def test_one_of_three_workers_killed_the_other_two_finish_all_runs(
    temporal_address: str, tmp_path: Path, log: EffectLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [Job(run=i, rounds=1, work_seconds=0.2) for i in range(50)]
    ref = await reference_runs(jobs, tmp_path / "reference.sqlite", monkeypatch)
    queue = f"faults-shared-{uuid.uuid4().hex[:8]}"
    client = await connect(temporal_address)
    async with WorkerProcesses(temporal_address, queue, log, tmp_path) as workers:
        (victim,), survivors = await asyncio.gather(
            workers.start("victim", hold=True), workers.start("survivor-a", "survivor-b")
        )
        handles = await start_jobs(client, jobs, queue, queue)

        def mid_way() -> set[str] | None:
            """The victim holds steps, and the others have done a quarter of all the work steps."""
            events = log.events()
            held = {e.key for e in events if e.pid == victim and e.event == "holding"}
            finished = Counter(e.pid for e in events if e.pid != victim and e.event == "finished")
            quarter = len(jobs) * len(fault_graphs.WORKERS) // 4
            return held if held and set(finished) == set(survivors) and finished.total() >= quarter else None

        held = await until("the victim to hold steps while the others work", mid_way)
        await workers.kill("victim")
        await assert_nothing_lost(handles, ref, log)
        assert_reattempted_elsewhere(log, held_keys(log, victim), victim)
        assert held <= held_keys(log, victim)
        finishers = {e.pid for e in log.events() if e.event == "finished"}
        assert set(survivors) <= finishers  # both shared the work


# -- 4. retries, timeouts and cancellation (a worker in this process) ------------------------------


@dataclass
class Local:
    client: Client
    task_queue: str
    log: EffectLog

    def events(self, run_id: str) -> list[fault_graphs.Event]:
        return [e for e in self.log.events() if e.run_id == run_id]


@pytest.fixture
async def local(
    temporal_address: str, tmp_path: Path, log: EffectLog, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Local]:
    monkeypatch.setenv(ENV_LOG, str(log.path))
    monkeypatch.delenv(ENV_HOLD, raising=False)
    plugin = TemporalWorkflowsPlugin(
        fault_graphs.all_workflows(),
        tracing=False,
        encryption=None,
        checkpoint_storage=SqliteCheckpointStorage(tmp_path / "checkpoints.sqlite"),
    )
    client = await Client.connect(temporal_address, plugins=[plugin])
    queue = f"faults-local-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue):
        yield Local(client, queue, log)


async def _step_started(handle: RunHandle, executor_id: str) -> Any:
    """The ActivityTaskStarted event of the (last attempt of the) step of ``executor_id``."""
    history = await handle.handle.fetch_history()
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name.endswith(f".{executor_id}")
    }
    (started,) = [
        e.activity_task_started_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]
    return started


async def test_a_step_failing_twice_succeeds_on_its_third_attempt(local: Local) -> None:
    handle = await start_run(local.client, fault_graphs.fails_twice, "ping", task_queue=local.task_queue)
    result = await asyncio.wait_for(handle.result(), DEADLINE)
    allowed = fault_graphs.FAST_RETRY_3.maximum_attempts
    assert result["outputs"] == [f"ping on attempt {allowed}"]
    events = local.events(handle.id)
    assert [e.attempt for e in events] == list(range(1, allowed + 1))
    assert len({e.key for e in events}) == 1  # one step, one idempotency key across its attempts
    started = await _step_started(handle, "wobbly")
    assert started.attempt == allowed
    assert f"transient failure on attempt {allowed - 1}" in started.last_failure.message


async def test_a_step_that_keeps_failing_fails_the_run_naming_its_executor(local: Local) -> None:
    handle = await start_run(local.client, fault_graphs.always_fails, "order-9", task_queue=local.task_queue)
    with pytest.raises(ExecutorFailedError) as info:
        await asyncio.wait_for(handle.result(), DEADLINE)
    failed = info.value
    allowed = fault_graphs.FAST_RETRY_3.maximum_attempts
    assert failed.executor_id == "doomed" and failed.superstep == 2
    assert "'doomed'" in failed.summary and "superstep 2" in failed.summary
    assert f"backend down (attempt {allowed})" in str(failed)
    assert [e.attempt for e in local.events(handle.id)] == list(range(1, allowed + 1))
    status = await handle.status()
    assert status["status"] == "failed" and "'doomed'" in status["error"]


async def test_a_step_overrunning_its_start_to_close_timeout_is_retried(local: Local) -> None:
    handle = await start_run(local.client, fault_graphs.overrun, "pong", task_queue=local.task_queue)
    result = await asyncio.wait_for(handle.result(), DEADLINE)
    assert result["outputs"] == ["pong on attempt 2"]  # the first attempt's result never counts
    started = await _step_started(handle, "slowpoke")
    assert started.attempt == 2
    assert started.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE

    # The first attempt never heartbeats itself, but its step activity does: the first heartbeat after
    # the timeout was refused (the attempt was gone from the server), which cancelled the attempt long
    # before it would have ended by itself. Wait for it to end so that nothing is left running.
    def both_ended() -> list[fault_graphs.Event] | None:
        events = local.events(handle.id)
        return events if sorted(e.attempt for e in events if e.event == "ended") == [1, 2] else None

    events = await until("the overrunning first attempt to end", both_ended)
    first, second = (next(e for e in events if e.attempt == n and e.event == "started") for n in (1, 2))
    assert second.at - first.at >= fault_graphs.OVERRUN_TIMEOUT.total_seconds()
    assert [(e.event, e.detail) for e in events if e.attempt == 1] == [
        ("started", ""),
        ("cancelled", "not_found"),
        ("ended", ""),
    ]
    ended = next(e for e in events if e.attempt == 1 and e.event == "ended")
    assert ended.at - first.at < fault_graphs.OVERRUN_BY * fault_graphs.OVERRUN_TIMEOUT.total_seconds()


async def test_a_cancelled_run_cancels_its_heartbeating_step_and_ends_after_it_cleaned_up(local: Local) -> None:
    handle = await start_run(local.client, fault_graphs.long_step, 600.0, task_queue=local.task_queue)
    await until("the long step to start", lambda: local.events(handle.id))
    await handle.handle.cancel()
    try:
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), DEADLINE)
        assert isinstance(info.value.cause, CancelledError)
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        # When the run is over, so is its step: cancelled by request, cleaned up, ended.
        events = local.events(handle.id)
        assert [e.event for e in events] == ["started", "cancelled", "cleanup", "ended"]
        assert events[1].detail == "cancel_requested"
        history = await handle.handle.fetch_history()
        kinds = [e.event_type for e in history.events]
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in kinds
    finally:
        # Either way, leave nothing running in this process's worker.
        await until("the step to end", lambda: any(e.event == "ended" for e in local.events(handle.id)))


# -- 5. default options: every step heartbeats by itself ---------------------------------------------


async def test_only_worker_killed_with_default_options_runs_resume_within_the_heartbeat_timeout(
    temporal_address: str, tmp_path: Path, log: EffectLog
) -> None:
    """No executor options and no ``ctx.heartbeat()``: a kill -9 stalls runs for about 30 s, not 5 minutes."""
    jobs = [Job(run=i) for i in range(5)]
    queue = f"faults-default-{uuid.uuid4().hex[:8]}"
    client = await connect(temporal_address)
    async with WorkerProcesses(temporal_address, queue, log, tmp_path) as workers:
        (victim,) = await workers.start("victim", hold=True)
        handles = await start_jobs(client, jobs, queue, queue, fault_graphs.unconfigured)
        held = await until(
            "every run's step to be running on the victim",
            lambda: keys if len(keys := held_keys(log, victim)) == len(jobs) else None,
        )
        for status in await asyncio.gather(*(h.status() for h in handles)):
            assert status["status"] == "running" and status["in_flight"] == ["dawdle"], status
        killed_at = time.monotonic()
        await workers.kill("victim")
        (rescuer,) = await workers.start("rescuer")
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), DEADLINE)
        recovery = time.monotonic() - killed_at
    want = [[{"run": job.run, "amount": fault_graphs.amount_of(job, fault_graphs.WORKERS[0])}] for job in jobs]
    assert [r["outputs"] for r in results] == want
    # Noticed by the heartbeat timeout (the steps started shortly before the kill), far from the 5-minute
    # start-to-close timeout that was all a step without heartbeats had.
    assert recovery < DEFAULT_HEARTBEAT_TIMEOUT.total_seconds() + 30, recovery
    for h in handles:
        history = await h.handle.fetch_history()
        (scheduled,) = [
            e.activity_task_scheduled_event_attributes
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        ]
        assert scheduled.heartbeat_timeout.ToTimedelta() == DEFAULT_HEARTBEAT_TIMEOUT
        started = await _step_started(h, "dawdle")
        assert started.attempt == 2
        assert started.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
    # Nothing lost, nothing applied twice: the retry found its effect in, by its idempotency key.
    assert_reattempted_elsewhere(log, held, victim)
    job_of = {h.id: i for i, h in enumerate(handles)}
    assert {job_of[run]: total for run, total in log.balances().items()} == {
        i: fault_graphs.amount_of(job, fault_graphs.WORKERS[0]) for i, job in enumerate(jobs)
    }
    assert Counter(e.key for e in log.events() if e.event == "applied").most_common(1)[0][1] == 1
    assert {e.pid for e in log.events()} == {victim, rescuer}


async def test_a_cancel_reaches_a_step_that_never_heartbeats_itself(local: Local) -> None:
    handle = await start_run(local.client, fault_graphs.idle_step, 600.0, task_queue=local.task_queue)
    await until("the step to start", lambda: local.events(handle.id))
    await handle.handle.cancel()
    try:
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), DEADLINE)
        assert isinstance(info.value.cause, CancelledError)
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        # The step activity's own heartbeat brought the cancel: the step saw CancelledError, cleaned
        # up, and the run ended once it had (a heartbeating step's cancel waits for it).
        events = local.events(handle.id)
        assert [e.event for e in events] == ["started", "cancelled", "cleanup", "ended"]
        assert events[1].detail == "cancel_requested"
        assert events[1].at - events[0].at < DEFAULT_HEARTBEAT_TIMEOUT.total_seconds()
        kinds = [e.event_type for e in (await handle.handle.fetch_history()).events]
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in kinds
    finally:
        await until("the step to end", lambda: any(e.event == "ended" for e in local.events(handle.id)))


async def test_a_step_ignoring_its_cancel_holds_the_run_no_longer_than_its_heartbeat_timeout(local: Local) -> None:
    handle = await start_run(local.client, fault_graphs.ignores_cancel, 600.0, task_queue=local.task_queue)
    await until("the step to start", lambda: local.events(handle.id))
    await handle.handle.cancel()
    try:
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), DEADLINE)
        assert isinstance(info.value.cause, CancelledError)
        desc = await handle.describe()
        assert desc.status == WorkflowExecutionStatus.CANCELED and desc.close_time is not None
        ignored = next(e for e in local.events(handle.id) if e.event == "ignored")
        assert ignored.detail == "cancel_requested"
        # Once the cancel had reached it, the step's automatic heartbeats stopped: it timed out on the
        # server within its heartbeat timeout (not retried: its run asked for the cancel), and the run
        # ended without waiting for the step to give up.
        assert desc.close_time.timestamp() < ignored.at + fault_graphs.STUBBORN_LINGER
        timed_out = [
            e.activity_task_timed_out_event_attributes.failure.timeout_failure_info.timeout_type
            for e in (await handle.handle.fetch_history()).events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
        ]
        assert timed_out == [TimeoutType.TIMEOUT_TYPE_HEARTBEAT]
    finally:
        # It carries on regardless; wait for it so that nothing is left running in this worker.
        await until("the step to end", lambda: any(e.event == "ended" for e in local.events(handle.id)))
