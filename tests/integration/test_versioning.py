"""A deploy never changes a running execution: runs stay on the graph version they started on.

Two versions of one graph (same name, different edges) are hosted by two
versioned workers on one task queue, as during a rolling deploy. A run that
started on version A finishes on A's edges after B is deployed; a run started
after the deploy runs B's. A start pinned to a version its queue has not
learned yet waits for it, briefly, and makes one run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from temporal_workflows import Executor, Workflow, WorkflowBuilder, WorkflowContext, handler, response_handler
from temporal_workflows._engine.machine import StepTask
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.errors import WorkerVersionNotReadyError
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, WorkerVersioning, start_run
from temporal_workflows.temporal._activities.steps import build_activities
from temporal_workflows.temporal._client import starting
from temporal_workflows.temporal._client.routing import graphs_of_version, versioning_override
from temporal_workflows.temporal._protocol import SIGNATURE_PREFIX, StepInput
from temporal_workflows.temporal._wire import encode_step_input
from temporal_workflows.temporal._worker.versioning import current_build_id
from temporal_workflows.temporal.integration import build_id_for

NAME = "it_versioned"


class Ask(Executor):
    """Asks for a word, then sends it to the version's finisher."""

    @handler
    async def start(self, topic: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(topic, str)

    @response_handler
    async def answered(self, topic: str, word: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(word)


class Finish(Executor):
    @handler
    async def finish(self, word: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(f"{self.id}:{word}")


def version(finisher: str) -> Workflow:
    ask, finish = Ask("ask"), Finish(finisher)
    return WorkflowBuilder(start_executor=ask, name=NAME).add_edge(ask, finish).build()


@asynccontextmanager
async def versioned_worker(
    address: str, wf: Workflow, queue: str, deployment: str, *, make_current: bool = True
) -> AsyncIterator[tuple[Client, Worker]]:
    plugin = TemporalWorkflowsPlugin([wf], versioning=WorkerVersioning(deployment, make_current=make_current))
    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(client, task_queue=queue)
    async with worker:
        yield client, worker


async def until(what: str, check: Callable[[], object], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return
            await asyncio.sleep(0.1)  # polling a condition, with a deadline
    raise AssertionError(what)  # pragma: no cover


async def pending_id(run: RunHandle) -> str:
    async def one() -> str | None:
        pending = await run.pending_requests()
        return pending[0].request_id if pending else None

    found: list[str] = []

    async def check() -> bool:
        rid = await one()
        if rid:
            found.append(rid)
        return bool(rid)

    await until("a pending request", check)
    return found[0]


async def _is_current(client: Client, deployment: str, build_id: str) -> bool:
    return await current_build_id(client, deployment) == build_id


async def test_a_run_finishes_on_the_graph_it_started_with_while_new_runs_take_the_new_one(
    temporal_address: str,
) -> None:
    queue = f"versioned-{uuid.uuid4().hex[:8]}"
    deployment = f"tw-{uuid.uuid4().hex[:8]}"
    old, new = version("finish_a"), version("finish_b")
    assert old.graph_signature_hash != new.graph_signature_hash
    assert build_id_for([old]) != build_id_for([new])
    async with versioned_worker(temporal_address, old, queue, deployment) as (client_a, _):
        before = await start_run(client_a, NAME, "first", task_queue=queue)
        first_request = await pending_id(before)
        # The deploy: a worker hosting the changed graph joins the same task queue and becomes current.
        async with versioned_worker(temporal_address, new, queue, deployment) as (client_b, _):
            # The new worker promotes its version as it starts; from then on new runs go to it.
            await until(
                "the new version to be current",
                lambda: _is_current(client_b, deployment, build_id_for([new])),
            )
            after = await start_run(client_b, NAME, "second", task_queue=queue)
            second_request = await pending_id(after)
            await before.respond(first_request, "one")
            await after.respond(second_request, "two")
            assert (await asyncio.wait_for(before.result(), 30))["outputs"] == ["finish_a:one"]
            assert (await asyncio.wait_for(after.result(), 30))["outputs"] == ["finish_b:two"]
            pinned = (await before.describe()).raw_description.workflow_execution_info.versioning_info
            assert pinned.deployment_version.build_id == build_id_for([old])
            newer = (await after.describe()).raw_description.workflow_execution_info.versioning_info
            assert newer.deployment_version.build_id == build_id_for([new])


async def test_a_start_pinned_to_a_version_its_queue_has_not_learned_waits_for_it_and_makes_one_run(
    temporal_address: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A v2 worker has started (its version exists and records its graph) but has not polled the run's queue
    yet: a v2 client's start pins v2 there, and the server refuses it until the queue learns v2. The refusal
    is sent again until a v2 worker polls the queue; then one run starts, and runs v2's graph."""
    queue, elsewhere = f"pinned-{uuid.uuid4().hex[:8]}", f"pinned-other-{uuid.uuid4().hex[:8]}"
    deployment = f"tw-{uuid.uuid4().hex[:8]}"
    old, new = version("finish_a"), version("finish_b")
    build_new = build_id_for([new])
    signature = new.graph_signature_hash[:SIGNATURE_PREFIX]
    caplog.set_level(logging.INFO, logger=starting.__name__)
    async with (
        versioned_worker(temporal_address, old, queue, deployment) as (client, _),
        # v2's first worker polls another queue of the deployment: v2 exists and says what it hosts, but the
        # run's queue has not learned it (as right after a worker of a new version starts).
        versioned_worker(temporal_address, new, elsewhere, deployment, make_current=False),
    ):
        await until("v1 current", lambda: _is_current(client, deployment, build_id_for([old])))
        await until(
            "v2's graphs recorded",
            lambda: _graphs_recorded(client, deployment, build_new, signature),
        )
        overrides: list[object] = []

        async def pins_v2() -> bool:
            # Once the queue names v1 current (it learns that a moment after the deployment does).
            overrides[:] = [await versioning_override(client, queue, NAME, signature)]
            pinned = overrides[0]
            return isinstance(pinned, PinnedVersioningOverride) and pinned.version.build_id == build_new

        await until("a v2 start pinned to v2", pins_v2)
        override = overrides[0]
        assert isinstance(override, PinnedVersioningOverride)

        # Without the retry: the server's refusal, exactly as the client matches it; nothing is started.
        with pytest.raises(RPCError) as refused:
            await client.start_workflow(
                NAME, {"message": "x"}, id=f"{queue}-raw", task_queue=queue, versioning_override=override
            )
        assert refused.value.status == RPCStatusCode.FAILED_PRECONDITION
        assert refused.value.message == (
            f"Pinned version '{deployment}:{build_new}' is not present in task queue '{queue}' of type 'Workflow'"
        )
        assert starting.not_learned(refused.value, override, queue)
        # With a wait too short for any worker to come, start_run gives up with the named error; no run exists.
        monkeypatch.setattr(starting, "PINNED_START_WAIT", 0.3)
        with pytest.raises(WorkerVersionNotReadyError, match=f"worker version '{deployment}:{build_new}'"):
            await start_run(client, new, "early", id=f"{queue}-early", task_queue=queue)
        for wid in (f"{queue}-raw", f"{queue}-early"):
            with pytest.raises(RPCError) as missing:
                await client.get_workflow_handle(wid).describe()
            assert missing.value.status == RPCStatusCode.NOT_FOUND

        # With the retry: the start waits while refused, and a v2 worker joining the queue lets it through.
        monkeypatch.setattr(starting, "PINNED_START_WAIT", 120.0)
        caplog.clear()
        wid = f"{queue}-waited"
        start = asyncio.create_task(start_run(client, new, "late", id=wid, task_queue=queue))
        await until(
            "the start refused and waiting",
            lambda: any("waits for task queue" in r.getMessage() and wid in r.getMessage() for r in caplog.records),
        )
        assert not start.done()
        async with versioned_worker(temporal_address, new, queue, deployment, make_current=False):
            run = await asyncio.wait_for(start, 120)
            await run.respond(await pending_id(run), "two")
            assert (await asyncio.wait_for(run.result(), 60))["outputs"] == ["finish_b:two"]
            info = (await run.describe()).raw_description.workflow_execution_info.versioning_info
            assert info.deployment_version.build_id == build_new
            executions: list[object] = []

            async def listed() -> bool:
                executions[:] = [e async for e in client.list_workflows(f"WorkflowId = '{wid}'")]
                return bool(executions)

            await until("the run listed", listed)
            assert len(executions) == 1, executions  # one run for the one start, however often it was sent


async def _graphs_recorded(client: Client, deployment: str, build_id: str, signature: str) -> bool:
    return (await graphs_of_version(client, deployment, build_id)).get(NAME) == signature


def test_versioning_needs_a_deployment_name() -> None:
    with pytest.raises(ValueError, match="deployment_name"):
        WorkerVersioning("")
    assert WorkerVersioning("app", build_id="v2").version([version("finish_a")]).build_id == "v2"


async def test_a_worker_hosting_another_graph_refuses_the_step_naming_both_signatures() -> None:
    """Without versioning, a mixed fleet never runs the wrong edges: the step is left to another worker."""
    old, new = version("finish_a"), version("finish_b")
    steps = {
        getattr(a, "__temporal_activity_definition").name: a for a in build_activities([new])
    }  # the new worker's activities
    task = StepTask(superstep=1, index=0, executor_id="ask", kind="message", messages=(Envelope(None, "topic"),))
    signature = old.graph_signature_hash[:SIGNATURE_PREFIX]
    raw = encode_step_input(StepInput(task, "0", {}, 0, signature))
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(steps[f"{NAME}.ask"], raw)
    assert refused.value.type == "GraphSignatureMismatchError" and not refused.value.non_retryable
    assert signature in refused.value.message and new.graph_signature_hash[:SIGNATURE_PREFIX] in refused.value.message
    # A refusal is routing: it is tried again at routing's pace (1 s doubling to 10 s), whatever the step's
    # retry policy's backoff, so a worker of the run's graph polling beside this one takes it soon.
    delays = []
    for attempt in (1, 2, 3, 4, 5, 9, 60):
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, attempt=attempt)
        with pytest.raises(ApplicationError) as again:
            await env.run(steps[f"{NAME}.ask"], raw)
        delays.append(again.value.next_retry_delay)
    assert delays == [timedelta(seconds=s) for s in (1, 2, 4, 8, 10, 10, 10)], delays
    # The run's own graph takes it; so do steps scheduled by older runs, which carry no signature.
    for ok in (new.graph_signature_hash[:SIGNATURE_PREFIX], ""):
        result = await ActivityEnvironment().run(
            steps[f"{NAME}.ask"], encode_step_input(StepInput(task, "0", {}, 0, ok))
        )
        assert result["requests"], result


@pytest.mark.parametrize(
    "flags", [["--deployment-name", ""], ["--deployment-name", "app", "--build-id", "  "]], ids=["name", "build-id"]
)
def test_worker_refuses_empty_versioning_flags_in_one_line(flags: list[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, "worker.py", "--workflow", "examples.research:workflow", *flags],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("worker.py: --deployment-name/--build-id:") and "Traceback" not in run.stderr
