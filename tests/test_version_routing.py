"""Where a start goes on a versioned queue when the server is busy (``temporal/_client/routing.py``).

A client of an older version starts its run pinned to the newest version hosting its graph, which it learns
from ``DescribeWorkerDeployment``. Under load the server can refuse that question for a moment; taking the
refusal for "no version hosts it" would start the run on the current version, where it waits for ever. A busy
refusal is asked again for a bounded time, then the start fails with it; a refusal for good is "start as
before".

During a rollout the queue's routing reads "unversioned" for a moment while versioned workers poll it (the
server drops the old current version before the queue learns the new one). Starts in that moment were left to
the queue's routing and kept so for 5 s: the fleet benchmark's versioned rollout found every run of a
not-yet-upgraded client on the new version, waiting for ever. They now read the deployment's routing, and
"unversioned" is kept only for a queue that unversioned workers poll.
On a real server: ``tests/integration/test_versioning.py`` and ``tests/integration/test_fleet.py``.
"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any, cast

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import Payload
from temporalio.api.deployment.v1 import (
    RoutingConfig,
    VersionMetadata,
    WorkerDeploymentInfo,
    WorkerDeploymentOptions,
    WorkerDeploymentVersion,
    WorkerDeploymentVersionInfo,
)
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueueVersioningInfo
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueResponse,
    DescribeWorkerDeploymentResponse,
    DescribeWorkerDeploymentVersionResponse,
)
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows.temporal._client import routing

DEPLOYMENT = "app"
GRAPHS = {"v1": {"g": "sig-one"}, "v2": {"g": "sig-two"}}


class Service:
    """The three questions a start asks, answered from a v1 → v2 rollout; ``refusals`` are raised first by
    ``DescribeWorkerDeployment``, one per call."""

    def __init__(self, *refusals: RPCError, between_versions: bool = False) -> None:
        self.refusals = list(refusals)
        self.deployment_asked = 0
        self.queue_asked = 0
        self.between_versions = between_versions

    async def describe_task_queue(self, req: Any) -> DescribeTaskQueueResponse:
        self.queue_asked += 1
        v2 = WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id="v2")
        pollers = [PollerInfo(deployment_options=WorkerDeploymentOptions(deployment_name=DEPLOYMENT, build_id="v1"))]
        if self.between_versions:  # as a real server answers for ~0.2 s while v2 becomes current
            unversioned = TaskQueueVersioningInfo(current_version="__unversioned__")
            return DescribeTaskQueueResponse(versioning_info=unversioned, pollers=pollers)
        return DescribeTaskQueueResponse(
            versioning_info=TaskQueueVersioningInfo(current_deployment_version=v2), pollers=pollers
        )

    async def describe_worker_deployment_version(self, req: Any) -> DescribeWorkerDeploymentVersionResponse:
        graphs = GRAPHS[req.deployment_version.build_id]
        metadata = VersionMetadata(entries={routing.GRAPHS_METADATA_KEY: Payload(data=json.dumps(graphs).encode())})
        return DescribeWorkerDeploymentVersionResponse(
            worker_deployment_version_info=WorkerDeploymentVersionInfo(metadata=metadata)
        )

    async def describe_worker_deployment(self, req: Any) -> DescribeWorkerDeploymentResponse:
        self.deployment_asked += 1
        if self.refusals:
            raise self.refusals.pop(0)
        summaries = [
            WorkerDeploymentInfo.WorkerDeploymentVersionSummary(
                deployment_version=WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id=build),
                create_time=Timestamp(seconds=created),
            )
            for build, created in (("v1", 100), ("v2", 200))
        ]
        routing_config = RoutingConfig(
            current_deployment_version=WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id="v2")
        )
        return DescribeWorkerDeploymentResponse(
            worker_deployment_info=WorkerDeploymentInfo(version_summaries=summaries, routing_config=routing_config)
        )


def client_of(service: Service) -> Client:
    # A server of its own per test: the routing answers are kept per address.
    config = SimpleNamespace(target_host=f"server-{uuid.uuid4().hex}")
    return cast(
        Client,
        SimpleNamespace(workflow_service=service, service_client=SimpleNamespace(config=config), namespace="default"),
    )


def busy() -> RPCError:
    return RPCError("query failed: the deployment's workflow is busy", RPCStatusCode.RESOURCE_EXHAUSTED, b"")


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_sleep(_: float) -> None:
        return None

    monkeypatch.setattr(routing.asyncio, "sleep", no_sleep)


async def test_a_start_of_an_older_version_is_pinned_there_even_when_the_server_is_busy_for_a_moment() -> None:
    service = Service(busy(), busy(), RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b""))
    override = await routing.versioning_override(client_of(service), "q", "g", "sig-one")
    assert isinstance(override, PinnedVersioningOverride)
    assert override.version.build_id == "v1" and service.deployment_asked == 4


async def test_a_server_busy_past_the_patience_fails_the_start_instead_of_placing_it_on_another_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter(range(0, 10_000, 7))  # each question costs 7 s
    monkeypatch.setattr(routing.time, "monotonic", lambda: float(next(clock)))
    service = Service(*[busy() for _ in range(100)])
    with pytest.raises(RPCError) as refused:
        await routing.versioning_override(client_of(service), "q", "g", "sig-one")
    assert refused.value.status == RPCStatusCode.RESOURCE_EXHAUSTED
    assert 2 <= service.deployment_asked <= routing.ROUTING_PATIENCE / 7 + 1


async def test_a_refusal_for_good_starts_as_before_and_the_current_version_needs_no_question() -> None:
    denied = Service(RPCError("no permission", RPCStatusCode.PERMISSION_DENIED, b""))
    assert await routing.versioning_override(client_of(denied), "q", "g", "sig-one") is None
    assert denied.deployment_asked == 1  # asked once: asking again cannot change it
    current = Service(*[busy() for _ in range(100)])
    override = await routing.versioning_override(client_of(current), "q", "g", "sig-two")
    assert isinstance(override, PinnedVersioningOverride) and override.version.build_id == "v2"
    assert current.deployment_asked == 0


@pytest.mark.parametrize("graph_of", ["v1", "v2"])
async def test_a_start_while_the_queue_is_between_two_versions_is_pinned_by_the_deployments_routing(
    graph_of: str,
) -> None:
    service = Service(between_versions=True)
    client = client_of(service)
    for asked in (1, 2):  # that answer is not kept: the next start asks the queue again
        override = await routing.versioning_override(client, "q", "g", GRAPHS[graph_of]["g"])
        assert isinstance(override, PinnedVersioningOverride) and override.version.build_id == graph_of
        assert service.queue_asked == asked


@pytest.mark.parametrize("polled", [True, False], ids=["unversioned-workers-poll", "no-worker-polled-yet"])
async def test_an_unversioned_queue_is_kept_so_for_a_while_only_once_its_workers_poll(polled: bool) -> None:
    """A queue whose workers are all unversioned keeps its answer for a few seconds. A queue no worker has
    polled yet may be getting its first versioned worker: "unversioned" kept from then left the next starts
    to routing that a rollout changed under them (the fleet benchmark: a v1 client's runs on v2)."""

    class Unversioned(Service):
        async def describe_task_queue(self, req: Any) -> DescribeTaskQueueResponse:
            self.queue_asked += 1
            pollers = [PollerInfo(identity="an unversioned worker")] if polled else []
            unversioned = TaskQueueVersioningInfo(current_version="__unversioned__")
            return DescribeTaskQueueResponse(versioning_info=unversioned, pollers=pollers)

    service = Unversioned()
    client = client_of(service)
    assert await routing.versioning_override(client, "q", "g", "sig-one") is None
    assert await routing.versioning_override(client, "q", "g", "sig-one") is None
    assert service.queue_asked == (1 if polled else 2) and service.deployment_asked == 0
