"""A deploy never changes a running execution: runs stay on the graph version they started on.

Two versions of one graph (same name, different edges) are hosted by two
versioned workers on one task queue, as during a rolling deploy. A run that
started on version A finishes on A's edges after B is deployed; a run started
after the deploy runs B's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from temporal_workflows import Executor, Workflow, WorkflowBuilder, WorkflowContext, handler, response_handler
from temporal_workflows._engine.machine import StepTask
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.temporal import RunHandle, TemporalWorkflowsPlugin, WorkerVersioning, start_run
from temporal_workflows.temporal._activities.steps import build_activities
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
    address: str, wf: Workflow, queue: str, deployment: str
) -> AsyncIterator[tuple[Client, Worker]]:
    plugin = TemporalWorkflowsPlugin([wf], versioning=WorkerVersioning(deployment))
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
