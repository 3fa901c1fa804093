"""A mixed fleet runs every run on the graph its starter built (issue 35, item 1).

Two versions of one graph module (``ops_report``; v2 adds an executor) are hosted by two worker processes
on one task queue, started as users start them (``python -m temporal_workflows worker``), with the CLI's
defaults and with Worker Versioning, on a dev server as ``start-dev`` runs it (eager activity execution
on) and as a deployed server runs (eager activity execution off). Runs are started from each version's
directory by ``run --no-wait`` and by ``start_run``, at once: every run's outputs are its starter's graph's.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride
from temporalio.testing import WorkflowEnvironment

from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, get_run, start_dev_server, start_run
from temporal_workflows.temporal._client.routing import graphs_of_version, versioning_override
from temporal_workflows.temporal._protocol import SIGNATURE_PREFIX
from temporal_workflows.temporal._worker.versioning import current_build_id
from tests.integration.fleet import expected, fleet, run_cli_in, start_runs_in, write_versions

EAGER_OFF = ["--dynamic-config-value", "system.enableActivityEagerExecution=false"]

CLI_RUNS = 3
"""Runs each version's directory starts with ``run --no-wait`` per scenario."""
API_RUNS = 2
"""Runs each version's directory starts with ``start_run`` per scenario (from one process)."""


@pytest.fixture(scope="module")
async def eager_off_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server with eager activity execution off, as a deployed server (the compose file's) runs."""
    env = await start_dev_server(extra_args=EAGER_OFF)
    yield env
    await env.shutdown()


@pytest.fixture(scope="module")
async def polls_completed_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server that completes a worker's polls when it shuts down (``worker_poll_complete_on_shutdown``),
    so a stopping worker is handed no task it will not run (docs/deployment.md)."""
    env = await start_dev_server(
        extra_args=["--dynamic-config-value", "frontend.enableCancelWorkerPollsOnShutdown=true"]
    )
    yield env
    await env.shutdown()


@pytest.fixture
def polls_completed_server(request: pytest.FixtureRequest) -> str:
    env: WorkflowEnvironment = request.getfixturevalue("polls_completed_env")
    return env.client.service_client.config.target_host


@pytest.fixture(params=["eager-on", "eager-off"])
def server(request: pytest.FixtureRequest, temporal_address: str) -> str:
    if request.param == "eager-on":
        return temporal_address  # `temporal server start-dev` as it comes
    env: WorkflowEnvironment = request.getfixturevalue("eager_off_env")
    return env.client.service_client.config.target_host


async def _started_version(log: str) -> str:
    found = re.search(r"version '([^']+)' of deployment", log)
    assert found, log
    return found.group(1)


async def _until(what: str, check: Any, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.2)  # polling a condition, with a deadline
    assert True, what


async def _start_everywhere(dirs: dict[str, Path], address: str, queue: str, tag: str) -> dict[str, str]:
    """Runs started from each version's directory, all at once: workflow id → the version that started it."""
    started: dict[str, str] = {}
    jobs = []
    for version, d in dirs.items():
        for i in range(CLI_RUNS):
            wid = f"{tag}-{version}-cli-{i}"
            started[wid] = version
            cmd = ("run", "ops_report:workflow", "--input", '"x"', "--no-wait", "--task-queue", queue, "--id", wid)
            jobs.append(run_cli_in(d, address, *cmd))
        api = [f"{tag}-{version}-api-{i}" for i in range(API_RUNS)]
        started.update(dict.fromkeys(api, version))
        jobs.append(start_runs_in(d, address, queue, *api))
    await asyncio.gather(*jobs)
    return started


async def _outputs(address: str, ids: list[str]) -> dict[str, Any]:
    client = await Client.connect(address)

    async def one(wid: str) -> Any:
        result: dict[str, Any] = await client.get_workflow_handle(wid).result()
        return result["outputs"]

    found = await asyncio.wait_for(asyncio.gather(*(one(w) for w in ids)), 240)
    return dict(zip(ids, found, strict=True))


@pytest.mark.parametrize("versioned", [False, True], ids=["cli-defaults", "versioned"])
async def test_every_run_of_a_mixed_fleet_runs_the_graph_its_starter_built(
    server: str, versioned: bool, tmp_path: Path
) -> None:
    dirs = write_versions(tmp_path)
    tag = uuid.uuid4().hex[:8]
    queue = f"fleet-{tag}"
    args = ["--workflow", "ops_report:workflow", "--task-queue", queue]
    deployment = f"ops-{tag}"
    if versioned:
        args += ["--deployment-name", deployment]
    with fleet(server, tmp_path) as workers:
        v1 = workers.start(dirs["v1"], *args)
        v1_log = await workers.ready(v1)
        v2 = workers.start(dirs["v2"], *args)
        v2_log = await workers.ready(v2)
        if versioned:
            # The later worker's version becomes current; each version records the graphs it hosts.
            client = await Client.connect(server)
            builds = {"v1": await _started_version(v1_log), "v2": await _started_version(v2_log)}

            async def settled() -> bool:
                if await current_build_id(client, deployment) != builds["v2"]:
                    return False
                return all([await graphs_of_version(client, deployment, b) for b in builds.values()])

            await _until("v2 current, both versions' graphs recorded", settled)
        started = await _start_everywhere(dirs, server, queue, tag)
        outputs = await _outputs(server, list(started))
        wrong = {wid: out for wid, out in outputs.items() if out != expected(started[wid])}
        assert not wrong, wrong
        # A refusal is routing, not a failure: no worker logged a failed step or a traceback.
        for proc in (v1, v2):
            log = workers.log_of(proc)
            assert "Traceback" not in log and "failed on this worker" not in log, log[-3000:]
        if versioned:
            client = await Client.connect(server)
            for wid, version in started.items():
                desc = await client.get_workflow_handle(wid).describe()
                pinned = desc.raw_description.workflow_execution_info.versioning_info
                assert pinned.deployment_version.build_id == builds[version], wid


def _graph_of(version_dir: Path) -> Any:
    """``ops_report:workflow`` imported from ``version_dir``, as a client there builds it."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("ops_report", version_dir / "ops_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ops_report"] = module  # the graph's types are named by their module, as in the workers
    try:
        spec.loader.exec_module(module)
        return module.workflow
    finally:
        del sys.modules["ops_report"]


def _ag_ui_kind(version_dir: Path) -> Any:
    """What ``AGUIApp`` serves for ``ops_report:workflow`` imported from ``version_dir`` (as a server there would)."""
    from temporal_workflows.ag_ui._graph import GraphKind

    return GraphKind(_graph_of(version_dir))


async def test_runs_an_older_client_starts_all_through_a_rollout_run_its_graph_on_its_version(
    temporal_address: str, tmp_path: Path
) -> None:
    """While v2 becomes current the queue's routing reads "unversioned" for a moment (~0.2 s) though versioned
    workers poll it. A v1 client starting runs all through the rollout (v2's worker is another process, as in
    a deploy) has every run pinned to v1, finishing on v1's graph: none is left to the queue's routing in that
    moment, where it lands on v2 and waits for ever for a worker hosting its graph."""
    dirs = write_versions(tmp_path)
    tag = uuid.uuid4().hex[:8]
    queue, deployment = f"rollout-{tag}", f"ops-{tag}"
    args = ["--workflow", "ops_report:workflow", "--task-queue", queue, "--deployment-name", deployment]
    graph = _graph_of(dirs["v1"])
    signature = graph.graph_signature_hash[:SIGNATURE_PREFIX]
    client = await Client.connect(temporal_address, plugins=[TemporalWorkflowsPlugin()])
    with fleet(temporal_address, tmp_path) as workers:
        v1_build = await _started_version(await workers.ready(workers.start(dirs["v1"], *args)))

        async def v1_settled() -> bool:
            recorded = await graphs_of_version(client, deployment, v1_build)
            return await current_build_id(client, deployment) == v1_build and bool(recorded)

        await _until("v1 current, its graphs recorded", v1_settled)
        rolled_out = asyncio.Event()
        runs: list[RunHandle] = []
        decisions: list[str | None] = []

        async def starter(lane: int) -> None:
            i = 0
            while not rolled_out.is_set():
                runs.append(await start_run(client, graph, "x", id=f"{queue}-{lane}-{i}", task_queue=queue))
                i += 1

        async def decider() -> None:
            # Where a start goes, asked as often as the server answers: the moment is short.
            while not rolled_out.is_set():
                pinned = await versioning_override(client, queue, "ops_report", signature)
                decisions.append(pinned.version.build_id if isinstance(pinned, PinnedVersioningOverride) else None)
                await asyncio.sleep(0)  # the answer may come from the cache without a pause: let the starts run

        lanes = [asyncio.create_task(starter(lane)) for lane in range(2)] + [asyncio.create_task(decider())]
        v2_build = await _started_version(await workers.ready(workers.start(dirs["v2"], *args)))

        async def queue_learned_v2() -> bool:
            resp = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
            return bool(resp.versioning_info.current_deployment_version.build_id == v2_build)

        await _until("the queue routing new runs to v2", queue_learned_v2)
        learned = len(runs)

        async def more_starts() -> bool:
            return len(runs) >= learned + 6

        await _until("more starts once the queue learned v2", more_starts)
        rolled_out.set()
        await asyncio.gather(*lanes)
        assert len(decisions) >= 20 and set(decisions) == {v1_build}, Counter(decisions)
        outputs = await _outputs(temporal_address, [r.id for r in runs])
        builds = {
            r.id: (
                await r.describe()
            ).raw_description.workflow_execution_info.versioning_info.deployment_version.build_id
            for r in runs
        }
    wrong = {
        wid: (out, builds[wid]) for wid, out in outputs.items() if (out, builds[wid]) != (expected("v1"), v1_build)
    }
    assert not wrong, wrong


async def test_a_run_waits_visibly_for_a_worker_of_its_graph_and_a_start_without_one_says_whose_it_runs(
    temporal_address: str, tmp_path: Path
) -> None:
    """Only v1 workers poll: a run started from v2 waits (its status says for what) and runs v2's graph once a
    v2 worker comes; a run started without the graph (``temporal workflow start``) runs the first worker's,
    and its status says so."""
    dirs = write_versions(tmp_path)
    tag = uuid.uuid4().hex[:8]
    queue = f"fleet-wait-{tag}"
    args = ["--workflow", "ops_report:workflow", "--task-queue", queue]
    client = await Client.connect(temporal_address)
    with fleet(temporal_address, tmp_path) as workers:
        v1 = workers.start(dirs["v1"], *args)
        await workers.ready(v1)
        wid = f"{tag}-waits"
        await run_cli_in(dirs["v2"], temporal_address, "run", "ops_report:workflow", "--input", '"x"', "--no-wait",
                         "--task-queue", queue, "--id", wid)  # fmt: skip

        async def waiting() -> bool:
            status = json.loads(await run_cli_in(dirs["v2"], temporal_address, "status", wid))
            notes = [w["message"] for w in status.get("warnings", [])]
            return any("the run waits for a worker hosting graph 'ops_report' with signature" in n for n in notes)

        await _until("the run's status says what it waits for", waiting)
        status = json.loads(await run_cli_in(dirs["v2"], temporal_address, "status", wid))
        assert status["graph_signature_from"] == "starter" and status["status"] == "starting", status
        # An AG-UI thread's first message starts its run from the graph the server was given (v2's) too.
        thread = f"{tag}-ag-ui"
        assert await _ag_ui_kind(dirs["v2"]).deliver(client, thread, "x", "d1", task_queue=queue)

        async def thread_waits() -> bool:
            status = await client.get_workflow_handle(thread).query("status")
            return bool(status.get("graph_signature_from") == "starter" and status.get("status") == "starting")

        await _until("the AG-UI run waits for a worker of its graph", thread_waits)
        # No graph at hand: the first worker's, and the status says so.
        temporal = shutil.which("temporal") or str(Path(__import__("sys").executable).parent / "temporal")
        plain = f"{tag}-plain"
        subprocess.run(
            [temporal, "workflow", "start", "--address", temporal_address, "--task-queue", queue,
             "--type", "ops_report", "--workflow-id", plain, "--input", '{"message": "x"}'],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        result = await asyncio.wait_for(client.get_workflow_handle(plain).result(), 120)
        assert result["outputs"] == expected("v1")
        plain_status = await client.get_workflow_handle(plain).query("status")
        assert plain_status["graph_signature_from"] == "first worker"
        assert any("named no graph signature" in w["message"] for w in plain_status["warnings"]), plain_status
        # A worker of its graph comes: the run pins v2's graph there, and its waiting note is gone.
        v2 = workers.start(dirs["v2"], *args)
        await workers.ready(v2)
        result = await asyncio.wait_for(client.get_workflow_handle(wid).result(), 120)
        assert result["outputs"] == expected("v2")
        done = await client.get_workflow_handle(wid).query("status")
        assert not [w for w in done["warnings"] if "waits for a worker hosting" in w["message"]], done

        async def thread_ran_v2() -> bool:
            return bool((await get_run(client, thread).status()).get("outputs") == expected("v2"))

        # Each attempt to pin or run a step lands on whichever worker polls first (v1 refuses it); a refused
        # one is tried again within 10 s.
        try:
            await _until("the AG-UI run ran v2's graph", thread_ran_v2, 120)
        except TimeoutError:
            desc = await client.get_workflow_handle(thread).describe()
            pending = [(a.activity_type.name, a.attempt, a.last_failure.message[:200])
                       for a in desc.raw_description.pending_activities]  # fmt: skip
            raise AssertionError(f"{await get_run(client, thread).status()}; pending: {pending}") from None


# -- one worker command: graphs and LlamaIndex workflows (issue 35, item 2) -------------------------------

LLAMA_APP = """
from workflows import Context, Workflow, step
from workflows.events import StartEvent, StopEvent


class Greet(Workflow):
    @step
    async def greet(self, ctx: Context, ev: StartEvent) -> StopEvent:
        return StopEvent(result=f"hello {ev.name}")


workflow = Greet(timeout=60)
"""


@pytest.fixture(params=[True, False], ids=["--task-queue", "default-queues"])
def hosting(request: pytest.FixtureRequest, temporal_address: str) -> tuple[str, bool]:
    """(server, whether the worker is given ``--task-queue``); the default queues on a server of this
    module's own, where no other test's runs wait."""
    if request.param:
        return temporal_address, True
    env: WorkflowEnvironment = request.getfixturevalue("eager_off_env")
    return env.client.service_client.config.target_host, False


async def test_one_worker_command_hosts_graphs_and_llamaindex_workflows_on_every_queue_it_polls(
    hosting: tuple[str, bool], tmp_path: Path
) -> None:
    """``worker --workflow app:graph --workflow app:LlamaFlow [--task-queue X]``: one worker per queue, each
    registering every workflow type and activity: every graph run and LlamaIndex run finishes, a finished
    graph run answers every ``status`` query, and no task is refused as "not registered"."""
    pytest.importorskip("workflows")
    temporal_address, queue_flag = hosting
    from temporal_workflows.llama import TemporalRuntime
    from temporal_workflows.temporal import ConnectionConfig

    dirs = write_versions(tmp_path)
    app = dirs["v1"]
    (app / "llama_greet.py").write_text(LLAMA_APP)
    tag = uuid.uuid4().hex[:8]
    graph_queue = f"both-{tag}" if queue_flag else "temporal-workflows"
    llama_queue = graph_queue if queue_flag else "llama-index-workflows"
    hosted = ["--workflow", "ops_report:workflow", "--workflow", "llama_greet:workflow"]
    with fleet(temporal_address, tmp_path) as workers:
        proc = workers.start(app, *hosted, *(["--task-queue", graph_queue] if queue_flag else []))
        log = await workers.ready(proc, "LlamaIndexRun")
        lines = [line for line in log.splitlines() if line.startswith("worker on task queue")]
        assert len(lines) == len({graph_queue, llama_queue}), log
        assert all("ops_report" in line and "LlamaIndexRun" in line for line in lines), log
        graph_ids = [f"{tag}-graph-{i}" for i in range(3)]
        await asyncio.gather(
            *(
                run_cli_in(app, temporal_address, "run", "ops_report:workflow", "--input", '"x"', "--no-wait",
                           "--task-queue", graph_queue, "--id", wid)
                for wid in graph_ids
            )
        )  # fmt: skip
        # A TemporalRuntime client in another process (this one), on the queue its worker polls.
        import sys

        sys.path.insert(0, str(app))
        try:
            import llama_greet

            rt = TemporalRuntime(task_queue=llama_queue, connection=ConnectionConfig(address=temporal_address))
            greeters = [llama_greet.Greet(timeout=60, runtime=rt) for _ in range(3)]
            results = await asyncio.wait_for(
                asyncio.gather(*(g.run(name=f"n{i}") for i, g in enumerate(greeters))), 120
            )
            assert results == ["hello n0", "hello n1", "hello n2"]
            await rt.destroy()
        finally:
            sys.path.remove(str(app))
            sys.modules.pop("llama_greet", None)
        outputs = await _outputs(temporal_address, graph_ids)
        assert all(out == expected("v1") for out in outputs.values()), outputs
        client = await Client.connect(temporal_address)
        for wid in graph_ids:
            for _ in range(5):
                status = await client.get_workflow_handle(wid).query("status")
                assert status["outputs"] == expected("v1"), status
        log = workers.log_of(proc)
        assert "not registered" not in log and "Traceback" not in log, log[-3000:]


async def test_a_temporal_runtime_client_on_a_queue_nobody_polls_says_so_and_runs_once_a_worker_comes(
    temporal_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("workflows")
    import logging
    import sys

    from temporal_workflows.llama import TemporalRuntime
    from temporal_workflows.temporal import ConnectionConfig

    (tmp_path / "llama_greet.py").write_text(LLAMA_APP)
    queue = f"unpolled-{uuid.uuid4().hex[:8]}"
    sys.path.insert(0, str(tmp_path))
    try:
        import llama_greet

        rt = TemporalRuntime(task_queue=queue, connection=ConnectionConfig(address=temporal_address))
        with caplog.at_level(logging.WARNING, logger="temporal_workflows"):
            handler = llama_greet.Greet(timeout=120, runtime=rt).run(name="late")

            async def warned() -> bool:
                return any(f"no worker polls task queue {queue!r}" in r.getMessage() for r in caplog.records)

            await _until("a warning naming the queue", warned, timeout=30)
        (message,) = [r.getMessage() for r in caplog.records if queue in r.getMessage()]
        assert "temporal-workflows worker --workflow" in message and "TemporalRuntime(worker=True)" in message
        with fleet(temporal_address, tmp_path) as workers:
            proc = workers.start(tmp_path, "--workflow", "llama_greet:workflow", "--task-queue", queue)
            await workers.ready(proc)
            assert await asyncio.wait_for(handler, 120) == "hello late"
        await rt.destroy()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("llama_greet", None)


# -- many processes (issue 35, item 5) ---------------------------------------------------------------------


async def test_worker_processes_share_the_queue_are_replaced_when_killed_and_stop_together(
    temporal_address: str, tmp_path: Path
) -> None:
    import os
    import signal

    dirs = write_versions(tmp_path, delay=0.2)
    queue = f"procs-{uuid.uuid4().hex[:8]}"
    with fleet(temporal_address, tmp_path) as workers:
        sup = workers.start(dirs["v1"], "--workflow", "ops_report:workflow", "--task-queue", queue, "--processes", "2")

        async def children_ready(n: int) -> list[int]:
            found: list[int] = []

            async def enough() -> bool:
                found[:] = [
                    int(m.group(1))
                    for m in re.finditer(r"^\[worker \d/2 pid (\d+)\] worker on task queue", workers.log_of(sup), re.M)
                ]
                return len(found) >= n

            await _until(f"{n} worker processes started", enough, timeout=120)
            return found

        first, second = (await children_ready(2))[:2]
        assert first != second
        ids = [f"procs-{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
        await start_runs_in(dirs["v1"], temporal_address, queue, *ids)
        assert all(out == expected("v1") for out in (await _outputs(temporal_address, ids)).values())
        # kill -9 of a child: reported, and another takes its place.
        os.kill(first, signal.SIGKILL)
        pids = await children_ready(3)
        log = workers.log_of(sup)
        assert f"(pid {first}) was killed by signal 9; starting another" in log, log
        replacement = pids[-1]
        assert replacement not in (first, second)
        more = [f"procs-more-{i}-{uuid.uuid4().hex[:6]}" for i in range(4)]
        await start_runs_in(dirs["v1"], temporal_address, queue, *more)
        assert all(out == expected("v1") for out in (await _outputs(temporal_address, more)).values())
        # SIGTERM to the supervisor stops every child, gracefully, and it exits 0.
        assert await workers.stop(sup, signal.SIGTERM) == 0
        log = workers.log_of(sup)
        assert "every worker process has stopped" in log, log
        for pid in (second, replacement):
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        lines = log.splitlines()
        assert all(line.startswith(("[worker ", "[supervisor ")) for line in lines), log


async def test_worker_processes_stop_with_their_supervisor_and_a_start_up_failure_stops_them_all(
    temporal_address: str, tmp_path: Path
) -> None:
    import os
    import signal

    from temporal_workflows.temporal._client.devserver import free_port

    dirs = write_versions(tmp_path)
    queue = f"procs-kill-{uuid.uuid4().hex[:8]}"
    with fleet(temporal_address, tmp_path) as workers:
        sup = workers.start(dirs["v1"], "--workflow", "ops_report:workflow", "--task-queue", queue, "--processes", "2")

        async def started() -> bool:
            return len(re.findall(r"^\[worker \d/2 pid \d+\] worker on task queue", workers.log_of(sup), re.M)) == 2

        await _until("both started", started, timeout=120)
        pids = [int(p) for p in re.findall(r"^\[worker \d/2 pid (\d+)\] worker on", workers.log_of(sup), re.M)]
        # kill -9 of the supervisor: the children are told (SIGTERM) and stop.
        await workers.stop(sup, signal.SIGKILL)

        async def gone() -> bool:
            alive = 0
            for pid in pids:
                try:
                    os.kill(pid, 0)
                    alive += 1
                except ProcessLookupError:
                    pass
            return alive == 0

        await _until("the children stopped with their supervisor", gone, timeout=90)
        # A child that cannot start (no server there) stops the others; the supervisor exits with its code.
        bad = workers.start(
            dirs["v1"], "--workflow", "ops_report:workflow", "--processes", "2", "--address", f"127.0.0.1:{free_port()}"
        )
        code = await asyncio.to_thread(bad.wait, 120)
        log = workers.log_of(bad)
        assert code != 0 and "before it started: stopping the others" in log, log
        assert log.count("before it started") == 1, log


# -- placement (issue 35, item 4) --------------------------------------------------------------------------

FLAKY = """
from pathlib import Path

from temporal_workflows import Executor, WorkflowBuilder, WorkflowContext, handler


class Flaky(Executor):
    @handler
    async def go(self, path: str, ctx: WorkflowContext[str, str]) -> None:
        marker = Path(path)
        if not marker.exists():
            marker.write_text("failed once")
            raise RuntimeError(f"cannot use {marker.name}")  # a value, at run time: never in a log
        await ctx.yield_output("ok")


workflow = WorkflowBuilder(start_executor=Flaky("flaky"), name="flaky_step").build()
"""


async def test_each_step_says_which_worker_ran_it_and_workers_log_failed_and_retried_steps_without_values(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporal_workflows.events import ExecutorCompletedEvent
    from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run

    dirs = write_versions(tmp_path, delay=0.3)
    app = dirs["v1"]
    (app / "flaky.py").write_text(FLAKY)
    queue = f"placement-{uuid.uuid4().hex[:8]}"
    args = ["--workflow", "ops_report:workflow", "--workflow", "flaky:workflow", "--task-queue", queue]
    with fleet(temporal_address, tmp_path) as workers:
        procs = [workers.start(app, *args) for _ in range(2)]
        for proc in procs:
            await workers.ready(proc)
        ids = [f"placed-{i}-{uuid.uuid4().hex[:6]}" for i in range(8)]
        await start_runs_in(app, temporal_address, queue, *ids)
        await _outputs(temporal_address, ids)
        client = await Client.connect(temporal_address, plugins=[TemporalWorkflowsPlugin()])
        host = __import__("socket").gethostname()
        fleet_ids = {f"{p.pid}@{host}" for p in procs}
        seen: set[str] = set()
        for wid in ids:
            steps = [ev async for ev in get_run(client, wid).events() if isinstance(ev, ExecutorCompletedEvent)]
            assert len(steps) == 4 and all(ev.worker in fleet_ids for ev in steps), steps
            seen.update(ev.worker for ev in steps if ev.worker)
        assert seen == fleet_ids  # both workers ran steps of these runs, and each step names its own
        # The CLI shows it; a failed attempt and its retry are one line each in the workers' log, without values.
        shown = await run_cli_in(
            app, temporal_address, "run", "flaky:workflow", "--input", json.dumps(str(tmp_path / "s3cret-value")),
            "--task-queue", queue, "--follow",
        )  # fmt: skip
        assert re.search(rf"flaky done in .* on ({'|'.join(map(re.escape, fleet_ids))})", shown), shown
        logs = "".join(workers.log_of(p) for p in procs)
        failed = [line for line in logs.splitlines() if "step 'flaky_step.flaky'" in line and "failed" in line]
        retried = [line for line in logs.splitlines() if "step 'flaky_step.flaky'" in line and "a retry" in line]
        assert len(failed) == 1 and "RuntimeError; Temporal retries it" in failed[0], logs
        assert len(retried) == 1 and "attempt 2" in retried[0], logs
        assert "s3cret" not in logs


# -- steps spread over the fleet (issue 35, item 3) --------------------------------------------------------

WIDE = """
import asyncio
from collections import Counter

from temporal_workflows import Executor, WorkflowBuilder, WorkflowContext, handler


class Start(Executor):
    @handler
    async def start(self, n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(n)


class Step(Executor):
    @handler
    async def step(self, n: int, ctx: WorkflowContext[int]) -> None:
        await asyncio.sleep(0.3)
        await ctx.send_message(n)


class Join(Executor):
    @handler
    async def join(self, ns: list[int], ctx: WorkflowContext[int, int]) -> None:
        await ctx.yield_output(len(ns))


start, join = Start("start"), Join("join")
steps = [Step(f"s{i}") for i in range(80)]
workflow = WorkflowBuilder(start_executor=start, name="wide_80").add_fan_out_edges(start, steps).add_fan_in_edges(
    steps, join
).build()
"""


async def test_a_wide_fan_out_spreads_over_every_worker_of_the_fleet(temporal_address: str, tmp_path: Path) -> None:
    """80 parallel steps of 0.3 s on 4 worker processes of 10 activity slots each: every worker runs at least
    15% of them (the steps' own ``worker`` field says where each ran); the timing is the benchmark's."""
    from temporal_workflows.events import ExecutorCompletedEvent
    from temporal_workflows.temporal import TemporalWorkflowsPlugin, get_run

    (tmp_path / "wide.py").write_text(WIDE)
    queue = f"wide-{uuid.uuid4().hex[:8]}"
    args = ["--workflow", "wide:workflow", "--task-queue", queue, "--max-concurrent-activities", "10"]
    with fleet(temporal_address, tmp_path) as workers:
        procs = [workers.start(tmp_path, *args) for _ in range(4)]
        await asyncio.gather(*(workers.ready(p) for p in procs))
        wid = f"wide-{uuid.uuid4().hex[:8]}"
        await run_cli_in(tmp_path, temporal_address, "run", "wide:workflow", "--input", "1", "--task-queue", queue,
                         "--id", wid)  # fmt: skip
        client = await Client.connect(temporal_address, plugins=[TemporalWorkflowsPlugin()])
        ran = Counter(
            [
                ev.worker
                async for ev in get_run(client, wid).events()
                if isinstance(ev, ExecutorCompletedEvent) and ev.executor_id[1:].isdigit()
            ]
        )
        host = __import__("socket").gethostname()
        shares = {f"{p.pid}@{host}": ran.get(f"{p.pid}@{host}", 0) / 80 for p in procs}
        assert sum(ran.values()) == 80 and all(share >= 0.15 for share in shares.values()), shares


# -- leaving without a timeout (issue 35, item 6: rolling restarts) ----------------------------------------


async def test_a_worker_stopped_under_load_drains_its_steps_and_hands_its_runs_back_without_a_timeout(
    polls_completed_server: str, tmp_path: Path
) -> None:
    """SIGTERM to each of two workers in turn, each replaced, while runs keep starting: the stopped worker
    takes no new step, lets its running ones finish while it still runs their runs' workflow tasks, then
    resets the stickiness of the runs it cached; no run fails, and no history records a timeout (an
    activity's, or a workflow task's that waited on a stopped worker's sticky queue or was lost)."""
    from temporalio.api.enums.v1 import EventType

    dirs = write_versions(tmp_path, delay=0.3)
    queue = f"leave-{uuid.uuid4().hex[:8]}"
    args = ["--workflow", "ops_report:workflow", "--task-queue", queue]
    client = await Client.connect(polls_completed_server)
    with fleet(polls_completed_server, tmp_path) as workers:
        procs = [workers.start(dirs["v1"], *args) for _ in range(2)]
        await asyncio.gather(*(workers.ready(p) for p in procs))
        ids: list[str] = []
        stop = asyncio.Event()

        async def load() -> None:
            i = 0
            while not stop.is_set():
                batch = [f"leave-{i}-{j}-{uuid.uuid4().hex[:4]}" for j in range(3)]
                await start_runs_in(dirs["v1"], polls_completed_server, queue, *batch)
                ids.extend(batch)
                i += 1

        loader = asyncio.create_task(load())
        for old in procs:
            await _until("runs under way", lambda: _true_after(len(ids) >= 6), timeout=120)
            assert await workers.stop(old) == 0
            log = workers.log_of(old)
            assert "cached runs handed back to the task queue" in log and "still running" not in log, log
            await workers.ready(workers.start(dirs["v1"], *args))
        stop.set()
        await loader
        outputs = await _outputs(polls_completed_server, ids)
        assert all(out == expected("v1") for out in outputs.values()), outputs
        timed_out = (EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)
        for wid in ids:
            history = await client.get_workflow_handle(wid).fetch_history()
            assert not [e for e in history.events if e.event_type in timed_out], wid


async def _true_after(value: bool) -> bool:
    return value
