"""Runs stay on the graph version they started with: Temporal's Worker Versioning, set up for graphs.

A graph run pins its topology when it starts, so its own workflow code never
changes under it; but its steps are activities, and on a shared task queue an
activity goes to whichever worker polls first. During a rolling deploy that
could be a worker hosting a changed graph: its handlers, edges and routing
would run for a run that started under the old ones.

With :class:`WorkerVersioning` every worker belongs to a Worker Deployment
version whose build id is derived from the signatures of the graphs it hosts
(unless given), and runs are *pinned*: Temporal sends a run's workflow and
activity tasks only to workers of the version it started on. A worker starting
with a new build id makes its version the deployment's current one (unless
told not to), so new runs go to it while runs already going finish on the old
workers. A run whose version has no worker left waits (nothing is lost)
until one polls again; see docs/deployment.md.

Without versioning, the step activity's signature check is the safety net: a
worker hosting a different graph refuses the step (retryably), so it never
runs the wrong edges.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio.api.common.v1 import Payload
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    UpdateWorkerDeploymentVersionMetadataRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from temporal_workflows.temporal._protocol import SIGNATURE_PREFIX

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow


__all__ = ["ENV_BUILD_ID", "ENV_DEPLOYMENT_NAME", "WorkerVersioning", "build_id_for", "current_build_id"]

_log = logging.getLogger(__name__)

ENV_DEPLOYMENT_NAME = "TEMPORAL_WORKFLOWS_DEPLOYMENT_NAME"
"""The worker's deployment name (turns versioning on in ``worker.py``)."""

ENV_BUILD_ID = "TEMPORAL_WORKFLOWS_BUILD_ID"
"""The worker's build id, when it should not be derived from the graphs."""


def build_id_for(workflows: Sequence[Workflow]) -> str:
    """A build id that changes exactly when a hosted graph's shape does: ``graphs-<16 hex>``."""
    shapes = sorted(f"{wf.name}:{wf.graph_signature_hash}" for wf in workflows)
    return "graphs-" + hashlib.sha256("\n".join(shapes).encode()).hexdigest()[:16]


async def current_build_id(client: Client, deployment_name: str) -> str | None:
    """The build id new runs of ``deployment_name`` go to (``None``: no current version, or no such deployment)."""
    try:
        described = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment_name)
        )
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    current = described.worker_deployment_info.routing_config.current_deployment_version
    return current.build_id or None


@dataclass(frozen=True)
class WorkerVersioning:
    """Pin every run to the worker version it started on (Temporal Worker Versioning).

    Attributes:
        deployment_name: The Worker Deployment these workers belong to (one per
            application, the same on every worker of the task queue).
        build_id: This worker's version; by default :func:`build_id_for` the
            hosted graphs, so it changes exactly when a graph's shape does.
        make_current: On start, make this version the deployment's current one,
            so new runs go to it (a rolling deploy). Turn off to promote versions
            yourself (``temporal worker deployment set-current-version``), e.g.
            to ramp one up gradually.
    """

    deployment_name: str
    build_id: str | None = None
    make_current: bool = True

    def __post_init__(self) -> None:
        if not self.deployment_name or not self.deployment_name.strip():
            raise ValueError("WorkerVersioning needs a deployment_name")
        if self.build_id is not None and not self.build_id.strip():
            raise ValueError("WorkerVersioning's build_id, when given, must not be empty")

    def version(self, workflows: Sequence[Workflow]) -> WorkerDeploymentVersion:
        return WorkerDeploymentVersion(self.deployment_name, self.build_id or build_id_for(workflows))

    def deployment_config(self, workflows: Sequence[Workflow]) -> WorkerDeploymentConfig:
        """The worker option: versioned, runs pinned to the version they start on."""
        return WorkerDeploymentConfig(
            version=self.version(workflows),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )

    async def promote_when_ready(self, client: Client, workflows: Sequence[Workflow], *, within: float = 120.0) -> bool:
        """Promote this version, retrying while the server is not ready for it (e.g. no poller registered yet).

        Runs beside the worker: a version that cannot be promoted never stops a
        worker from serving the runs already pinned to it. Returns whether it was.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        delay = 0.2
        while True:
            try:
                await self.promote(client, workflows)
                return True
            except RPCError as e:
                retryable = e.status in (
                    RPCStatusCode.FAILED_PRECONDITION,
                    RPCStatusCode.NOT_FOUND,
                    RPCStatusCode.UNAVAILABLE,
                    RPCStatusCode.ABORTED,
                )
                if not retryable or loop.time() + delay > deadline:
                    _log.warning(
                        "could not make build %r the current version of deployment %r (%s); new runs go to the "
                        "current version until it is promoted (temporal worker deployment set-current-version)",
                        self.version(workflows).build_id,
                        self.deployment_name,
                        e,
                    )
                    return False
            await asyncio.sleep(delay)  # retry with backoff; the worker serves meanwhile
            delay = min(delay * 2, 5.0)

    @contextlib.asynccontextmanager
    async def promoting(self, client: Client, workflows: Sequence[Workflow]) -> AsyncIterator[None]:
        """While a worker runs: promote this version beside it (:meth:`promote_when_ready`), not before it,
        so a server that wants pollers first gets them; stopped with the worker."""
        task = asyncio.create_task(self.promote_when_ready(client, workflows))
        try:
            yield
        finally:
            task.cancel()

    async def announce(self, client: Client, workflows: Sequence[Workflow], *, within: float = 120.0) -> bool:
        """Record in this version's metadata the graphs its workers host (name → signature), so a client
        that built another version of a graph starts its runs on a version hosting it
        (``_client/routing.py``). Retried while the server does not know the version yet (until this
        worker's first poll registers it). Returns whether it was recorded."""
        from temporal_workflows.temporal._client.routing import GRAPHS_METADATA_KEY

        version = self.version(workflows)
        graphs = {wf.name or "": wf.graph_signature_hash[:SIGNATURE_PREFIX] for wf in workflows}
        payload = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(graphs, sort_keys=True).encode())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        delay = 0.2
        while True:
            try:
                await client.workflow_service.update_worker_deployment_version_metadata(
                    UpdateWorkerDeploymentVersionMetadataRequest(
                        namespace=client.namespace,
                        deployment_version=VersionProto(
                            deployment_name=version.deployment_name, build_id=version.build_id
                        ),
                        upsert_entries={GRAPHS_METADATA_KEY: payload},
                        identity=client.identity,
                    )
                )
                return True
            except RPCError as e:
                retryable = e.status in (
                    RPCStatusCode.NOT_FOUND,
                    RPCStatusCode.FAILED_PRECONDITION,
                    RPCStatusCode.UNAVAILABLE,
                    RPCStatusCode.ABORTED,
                )
                if not retryable or loop.time() + delay > deadline:
                    _log.warning(
                        "could not record the graphs of build %r in deployment %r (%s); clients built from another "
                        "version of a graph start runs on the current version, where they wait",
                        version.build_id,
                        self.deployment_name,
                        e,
                    )
                    return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    @contextlib.asynccontextmanager
    async def announcing(self, client: Client, workflows: Sequence[Workflow]) -> AsyncIterator[None]:
        """While a worker runs: :meth:`announce` its graphs beside it (the version exists once it polls)."""
        task = asyncio.create_task(self.announce(client, workflows))
        try:
            yield
        finally:
            task.cancel()

    async def promote(self, client: Client, workflows: Sequence[Workflow]) -> None:
        """Make this worker's version the deployment's current one (before it polls: no pollers needed)."""
        version = self.version(workflows)
        await client.workflow_service.set_worker_deployment_current_version(
            SetWorkerDeploymentCurrentVersionRequest(
                namespace=client.namespace,
                deployment_name=version.deployment_name,
                build_id=version.build_id,
                identity=client.identity,
                ignore_missing_task_queues=True,
                allow_no_pollers=True,
            )
        )
