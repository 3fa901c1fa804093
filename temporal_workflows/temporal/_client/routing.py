"""Where a run starts on a versioned task queue: on a Worker Deployment version hosting its starter's graph.

A run started by a client that has the graph carries the graph's signature (``RunInput.graph_signature``)
and pins that graph on a worker hosting it (``_workflow/pinning.py``). With Worker Versioning the run is
also pinned, by Temporal, to the deployment version it starts on, and only that version's workers get its
tasks: Temporal starts it on the deployment's *current* version (or the ramping one), whatever graph the
starter built. A client built from an older (or newer) graph than the current version's would then start
a run that no worker of its version can take, and that waits for ever.

So a versioned worker records the signatures of the graphs it hosts in its version's metadata
(:data:`GRAPHS_METADATA_KEY`, written by ``WorkerVersioning.announce``), and a starter pins its run, with a
versioning override, to the current version when that hosts its signature (the queue's routing read here can
lag the deployment's by a moment after a rollout), else to the newest version that does; only when both the
current and a ramping version host it is the choice left to the ramp. When no version records it, the run
starts where Temporal puts it and waits, saying so.

Each start on a versioned queue asks the queue's routing (``DescribeTaskQueue``) afresh. An unversioned
queue that workers poll costs one such call per few seconds per queue (the answer is kept for
:data:`QUEUE_TTL`); a queue no worker has polled yet is asked on every start, since its first versioned
worker may be starting. For a moment during a rollout (about 0.2 s on a dev server) a queue's routing reads
"unversioned" while versioned workers poll it: the server drops the old current version before the queue
learns the new one. That answer is not kept either: the deployment's own routing
(``DescribeWorkerDeployment``) is read instead, so a start in that moment is pinned like any other.

The server answers these questions from its deployment system workflows, which a busy server can refuse for
a moment (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``, a failed query). Such a refusal is asked again, with
backoff, for up to :data:`ROUTING_PATIENCE`, and then the start fails with it: taking it for "no version
hosts this graph" would start the run on the current version, where a run of another graph waits for ever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    DescribeWorkerDeploymentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, VersioningOverride, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["GRAPHS_METADATA_KEY", "graphs_of_version", "versioning_override"]

GRAPHS_METADATA_KEY = "temporal_workflows.graphs"
"""Key, in a Worker Deployment version's metadata, of the graphs its workers host: a JSON object of graph
name → signature (its first ``SIGNATURE_PREFIX`` hex characters)."""

_T = TypeVar("_T")

_log = logging.getLogger(__name__)

ROUTING_PATIENCE = 30.0
"""Seconds a start asks again a routing question the server refused as busy, before it fails with that refusal."""

_FOR_GOOD = frozenset(
    {
        RPCStatusCode.NOT_FOUND,
        RPCStatusCode.INVALID_ARGUMENT,
        RPCStatusCode.PERMISSION_DENIED,
        RPCStatusCode.UNAUTHENTICATED,
        RPCStatusCode.UNIMPLEMENTED,
        RPCStatusCode.FAILED_PRECONDITION,
    }
)
"""Refusals asking again cannot change (no such queue or deployment, a server without the API, no
permission); every other one (busy, unavailable, a deadline, a query of the deployment's system workflow
that failed) is asked again."""

QUEUE_TTL = 5.0
"""Seconds the answer "this queue is unversioned, and only unversioned workers poll it" is kept before it is
asked again."""


@dataclass(frozen=True)
class _Routing:
    deployment: str | None
    current: str | None
    ramping: str | None
    read_from: str = "the queue"
    """Whose routing this is: the queue's, or its deployment's when the queue was between two versions."""


_BETWEEN = "the deployment (the queue between two versions)"


_queues: dict[tuple[str, str, str], tuple[float, _Routing]] = {}
_asking: dict[tuple[str, str, str, int], asyncio.Future[_Routing]] = {}
"""The queue routing asked for right now, per event loop: the starts that want it meanwhile share its answer."""
_versions: dict[tuple[str, str, str, str], dict[str, str]] = {}
"""(address, namespace, deployment, build id) → graphs it hosts: metadata is written once per version."""


def busy(e: RPCError) -> bool:
    """Whether the server refused a routing question for load or a passing outage (ask again), not for good."""
    return e.status not in _FOR_GOOD


async def _patiently(ask: Callable[[], Awaitable[_T]]) -> _T:
    """``ask()``, asked again while the server refuses it as busy, for up to :data:`ROUTING_PATIENCE`.

    Raises:
        RPCError: a refusal that is not busy at once; a busy one once the patience is spent.
    """
    deadline = time.monotonic() + ROUTING_PATIENCE
    pause = 0.2
    while True:
        try:
            return await ask()
        except RPCError as e:
            if not busy(e) or time.monotonic() + pause > deadline:
                raise
        await asyncio.sleep(pause * random.uniform(0.5, 1.5))  # backoff with jitter: the server is busy
        pause = min(pause * 2, 5.0)


def _key(client: Client) -> tuple[str, str]:
    return client.service_client.config.target_host, client.namespace


async def _routing(client: Client, task_queue: str) -> _Routing:
    """The queue's routing: from the cache while an "unversioned" answer is fresh, else asked once for all the
    starts that want it at the same moment (a batch of starts makes one ``DescribeTaskQueue``, not one each)."""
    address, namespace = _key(client)
    cached = _queues.get((address, namespace, task_queue))
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    key = (address, namespace, task_queue, id(asyncio.get_running_loop()))
    asking = _asking.get(key)
    if asking is None:
        asking = _asking[key] = asyncio.ensure_future(_ask_routing(client, task_queue))
        asking.add_done_callback(lambda done: _settled(key, done))
    return await asyncio.shield(asking)


def _settled(key: tuple[str, str, str, int], done: asyncio.Future[_Routing]) -> None:
    _asking.pop(key, None)
    if not done.cancelled():
        done.exception()  # retrieved here too: every start that wanted it may have been cancelled meanwhile


async def _ask_routing(client: Client, task_queue: str) -> _Routing:
    address, namespace = _key(client)
    resp = await _patiently(
        lambda: client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    )
    info = resp.versioning_info
    current, ramping = info.current_deployment_version, info.ramping_deployment_version
    routing = _Routing(
        current.deployment_name or ramping.deployment_name or None,
        current.build_id or None,
        ramping.build_id or None,
    )
    if routing.deployment is not None:
        return routing
    polling = sorted({p.deployment_options.deployment_name for p in resp.pollers} - {""})
    if polling:
        # Versioned workers poll a queue whose routing reads "unversioned": the queue is between two versions.
        # When a version becomes current, the server drops the old one from the queue's routing a moment
        # (~0.2 s) before the queue learns the new one; a start left to that routing would go to the new
        # version whatever graph its starter built. The deployment's own routing is the one to read then.
        for deployment in polling:
            found = await _deployment_routing(client, deployment)
            if found.current is not None or found.ramping is not None:
                return found
        return _Routing(polling[0], None, None, _BETWEEN)  # no version current yet (promoted by hand): not kept either
    # Only "unversioned" is kept, and only when workers poll and none is versioned: a versioned queue's current
    # version changes with every rollout, and a start routed on a stale answer would go where its graph is not.
    # A queue no worker has polled yet (or not yet where this question is answered) says nothing of its
    # workers: its first versioned worker may be starting, and "unversioned" kept from then would leave the
    # starts of the next seconds to routing that a rollout then changes under them.
    if resp.pollers:
        _queues[(address, namespace, task_queue)] = (time.monotonic() + QUEUE_TTL, routing)
    return routing


async def _describe_deployment(client: Client, deployment: str) -> DescribeWorkerDeploymentResponse:
    """``DescribeWorkerDeployment``, asked :func:`_patiently` (its routing config and its versions)."""
    return await _patiently(
        lambda: client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=_key(client)[1], deployment_name=deployment)
        )
    )


async def _deployment_routing(client: Client, deployment: str) -> _Routing:
    """The current and ramping versions of ``deployment``, as the deployment itself says (no such deployment:
    neither)."""
    try:
        described = await _describe_deployment(client, deployment)
    except RPCError as e:
        if busy(e):
            raise
        return _Routing(deployment, None, None, _BETWEEN)
    config = described.worker_deployment_info.routing_config
    return _Routing(
        deployment,
        config.current_deployment_version.build_id or None,
        config.ramping_deployment_version.build_id or None,
        _BETWEEN,
    )


async def graphs_of_version(client: Client, deployment: str, build_id: str) -> dict[str, str]:
    """The graphs a version's workers host, as they recorded them (empty: none recorded, or no such version)."""
    address, namespace = _key(client)
    key = (address, namespace, deployment, build_id)
    if key in _versions:
        return _versions[key]
    try:
        resp = await _patiently(
            lambda: client.workflow_service.describe_worker_deployment_version(
                DescribeWorkerDeploymentVersionRequest(
                    namespace=namespace,
                    deployment_version=VersionProto(deployment_name=deployment, build_id=build_id),
                )
            )
        )
    except RPCError as e:
        if busy(e):
            raise  # unknown, not "none": the caller must not take it for a version hosting nothing
        return {}
    entry = resp.worker_deployment_version_info.metadata.entries.get(GRAPHS_METADATA_KEY)
    if entry is None:
        return {}  # not recorded yet (its worker is starting): asked again next time
    try:
        graphs = json.loads(entry.data)
    except ValueError:
        graphs = {}
    found = {str(k): str(v) for k, v in graphs.items()} if isinstance(graphs, dict) else {}
    _versions[key] = found
    return found


async def versioning_override(client: Client, task_queue: str, graph: str, signature: str) -> VersioningOverride | None:
    """A pinned override to the newest version of the queue's deployment that hosts ``graph`` at
    ``signature``, when the version new runs go to does not; ``None`` otherwise (an unversioned queue, a
    current version hosting it, or no version known to host it: the run then waits, saying so).

    Each decision is logged at ``DEBUG`` (logger ``temporal_workflows.temporal._client.routing``) with the
    routing it read, so an operator can see why a start went where it did.

    Raises:
        RPCError: the server stayed busy (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``, ...) for
            :data:`ROUTING_PATIENCE`: the start fails rather than go to a version that may not host its graph.
    """
    override, why = await _decide(client, task_queue, graph, signature)
    if _log.isEnabledFor(logging.DEBUG):
        where = (
            f"pinned to {override.version.deployment_name}:{override.version.build_id}"
            if isinstance(override, PinnedVersioningOverride)
            else "left to the queue's routing"
        )
        _log.debug("a start of graph %r (%s) on task queue %r: %s (%s)", graph, signature, task_queue, where, why)
    return override


async def _decide(client: Client, task_queue: str, graph: str, signature: str) -> tuple[VersioningOverride | None, str]:
    try:
        routing = await _routing(client, task_queue)
    except RPCError as e:
        if busy(e):
            raise
        return None, f"no routing: {e.status.name if e.status else e}"  # no worker deployments, or no permission
    deployment = routing.deployment
    if deployment is None:
        return None, "queue unversioned"
    if routing.current is None:
        return None, f"deployment {deployment!r} has no current version (ramping {routing.ramping})"
    targets = [b for b in (routing.current, routing.ramping) if b is not None]
    hosted = [await graphs_of_version(client, deployment, b) for b in targets]
    seen = f"current {routing.current}, ramping {routing.ramping}, read from {routing.read_from}"
    if not any(hosted):
        return None, f"{seen}: no version records its graphs"
    if len(targets) == 2 and all(graphs.get(graph) == signature for graphs in hosted):
        return None, f"{seen}: both host it, the ramp chooses"
    if hosted[0].get(graph) == signature:
        # The current version hosts it: pinned there explicitly, not left to the server's routing, which can
        # have moved on since the queue's routing was read (a task queue learns a new current version
        # asynchronously, so a start right after a rollout would otherwise land on the new version).
        return PinnedVersioningOverride(
            WorkerDeploymentVersion(deployment, routing.current)
        ), f"{seen}: current hosts it"
    try:
        described = await _describe_deployment(client, deployment)
    except RPCError as e:
        if busy(e):
            raise
        return None, f"{seen}: deployment not described: {e.status.name if e.status else e}"
    summaries = sorted(
        described.worker_deployment_info.version_summaries,
        key=lambda v: v.create_time.ToDatetime(),
        reverse=True,
    )
    for summary in summaries:
        build_id = summary.deployment_version.build_id
        if build_id and (await graphs_of_version(client, deployment, build_id)).get(graph) == signature:
            return PinnedVersioningOverride(
                WorkerDeploymentVersion(deployment, build_id)
            ), f"{seen}: {build_id} hosts it"
    builds = [s.deployment_version.build_id or f"({s.version!r})" for s in summaries]
    return None, f"{seen}: none of the versions {builds} records it"
