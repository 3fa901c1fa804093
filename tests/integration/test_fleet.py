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
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from temporal_workflows.temporal import start_dev_server
from temporal_workflows.temporal._client.routing import graphs_of_version
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
