"""``TemporalWorkflowsPlugin``: everything a client or worker needs, in one object.

Pass it to ``Client.connect(plugins=[...])``; workers built on that client pick
up its workflow, activities, sandbox settings and failure types. A client that
only starts runs can use it without workflows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import trace
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from temporal_workflows._engine.limits import allow_stored_values
from temporal_workflows._errors import WorkflowError
from temporal_workflows._graph.hosting import as_graph_workflow
from temporal_workflows._graph.subworkflow import subworkflow_graphs
from temporal_workflows.temporal._codec import EncryptionCodec
from temporal_workflows.temporal._converter import json_data_converter
from temporal_workflows.temporal._failures import CycleSafeFailureConverterWithEncodedAttributes
from temporal_workflows.temporal._storage import LargeValues
from temporal_workflows.temporal._telemetry.config import configure_tracing, replay_safe_provider
from temporal_workflows.temporal._telemetry.interceptor import ProjectTracingInterceptor
from temporal_workflows.temporal._telemetry.runner import gated
from temporal_workflows.temporal._worker.eviction import evict_cached_runs
from temporal_workflows.temporal._worker.versioning import WorkerVersioning
from temporal_workflows.temporal._workflow.workflow import GraphWorkflow

if TYPE_CHECKING:
    from temporal_workflows._checkpoints.base import CheckpointStorage
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["DEFAULT_TASK_QUEUE", "TemporalWorkflowsPlugin"]

DEFAULT_TASK_QUEUE = "temporal-workflows"

# Modules the workflow sandbox shares with the host instead of re-importing per run.
PASSTHROUGH_MODULES = (
    # Our engine and wire types: pure and deterministic (no I/O, clock or randomness
    # at import or in the code the workflow calls), and re-importing them per run
    # would cost more than the run itself. The modules holding user code are never
    # imported by workflow code.
    "temporal_workflows",
    # Tracing context travels through OTel's global API; it must be the host's.
    "opentelemetry",
)


def _tracing_interceptor() -> Any:
    """Temporal's OpenTelemetry interceptor, in the form the global provider allows.

    With a replay-safe provider (ours by default) workflow code opens real
    spans and Temporal's spans nest: start → run → superstep → activity →
    step (``ProjectTracingInterceptor``: Temporal's, without per-item stream
    spans, with client calls parented to their run). An application that
    installed another provider first keeps it and gets the older
    interceptor, whose workflow-side spans are flat and instantaneous; the
    run's own spans are then skipped.
    """
    if replay_safe_provider() is None and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        configure_tracing()
    if replay_safe_provider() is not None:
        return ProjectTracingInterceptor()
    warnings.warn(
        f"the global OpenTelemetry provider ({type(trace.get_tracer_provider()).__name__}) is not replay-safe, so "
        "runs get no superstep spans; build it with temporal_workflows.configure_tracing() or "
        "temporalio.contrib.opentelemetry.create_tracer_provider()",
        stacklevel=3,
    )
    return TracingInterceptor()


def data_converter(codec: EncryptionCodec | None, large_values: LargeValues | None = None) -> DataConverter:
    """The pydantic converter, encrypting payloads with ``codec`` if given, large ones kept by reference.

    With a codec, failure messages and stack traces are moved into an encoded
    (so encrypted) attribute too: they often quote the values that failed.
    With ``large_values``, payloads over its threshold go to its store after
    encoding (so stored bytes are encrypted too) and history holds a reference.
    """
    converter = json_data_converter
    if codec is not None:
        converter = dataclasses.replace(
            converter,
            payload_codec=codec,
            failure_converter_class=CycleSafeFailureConverterWithEncodedAttributes,
        )
    if large_values is not None:
        converter = dataclasses.replace(converter, external_storage=large_values.external_storage())
    return converter


def _sandbox_runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The worker's runner, with this project's modules passed through if it is a sandbox.

    The graph workflow itself runs unsandboxed; this is for the application's
    own workflows that import this project (to start runs as child workflows,
    say). A worker configured with a runner that is not a sandbox keeps it.
    """
    if existing is not None and not isinstance(existing, SandboxedWorkflowRunner):
        return existing
    base = existing if existing is not None else SandboxedWorkflowRunner()
    return dataclasses.replace(base, restrictions=base.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES))


class TemporalWorkflowsPlugin(SimplePlugin):
    """Hosts graphs on Temporal.

    Installs the pydantic data converter (payloads are plain JSON, so the
    ``temporal`` CLI and other SDKs interoperate), optionally encrypted,
    OpenTelemetry trace propagation, the graph workflow, one activity per
    executor of each graph, and the sandbox passthrough list.

    Args:
        workflows: Graphs this worker hosts; each needs a unique ``name``.
        tracing: Trace runs with OpenTelemetry: client start → run → superstep →
            step, propagated across processes in Temporal headers. Installs
            :func:`configure_tracing`'s provider (exporter from ``OTEL_*``
            variables) unless the application installed one first.
        checkpoint_storage: Where checkpoints of graphs built without their own
            ``checkpoint_storage`` go (written by this worker's activities).
            Default: :class:`SqliteCheckpointStorage` at
            ``$TEMPORAL_WORKFLOWS_CHECKPOINT_DB`` or ``.temporal/checkpoints.sqlite``,
            opened on first use. Workers on several hosts need a shared store,
            or :class:`HistoryCheckpointStorage`.
        encryption: Encrypts every payload (history, queries, updates) with
            AES-256-GCM. ``"env"`` (default): on when
            ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` or ``..._KEY`` is set (see
            docs/security.md); ``None``: off; or an :class:`EncryptionCodec`.
            When on, checkpoints at rest are encrypted with the same keys: the
            default store, and file or SQLite stores (this plugin's or the
            graphs') built without a ``cipher`` of their own. Every client and
            worker of the namespace needs the keys to read the runs.
        large_values: Keep payloads over a threshold in a store, history holding
            a reference and a digest (a claim check; docs/values.md):
            ``"env"`` (default): the store ``TEMPORAL_WORKFLOWS_VALUE_STORE`` names,
            if set; ``None``: off; or a :class:`LargeValues`. With it, values may be
            up to its ``max_value_bytes``. Every worker and client of the
            namespace needs the same store (and the keys, when encrypted).
        versioning: Pin every run to the worker version (the graphs) it started
            on, with Temporal's Worker Versioning: the worker joins the
            deployment's version derived from its graphs' signatures and, by
            default, makes it current on start (a rolling deploy). ``None``
            (default): unversioned workers; a step then refuses to run on a
            worker whose graph differs from the run's.
    """

    def __init__(
        self,
        workflows: Sequence[Workflow | Any] = (),
        *,
        tracing: bool = True,
        checkpoint_storage: CheckpointStorage | None = None,
        encryption: EncryptionCodec | Literal["env"] | None = "env",
        versioning: WorkerVersioning | None = None,
        large_values: LargeValues | Literal["env"] | None = "env",
    ) -> None:
        from temporal_workflows.temporal._activities.steps import build_activities

        # A worker hosting a graph hosts its sub-workflows' graphs too (children run as their own workflows).
        self.graphs = subworkflow_graphs([as_graph_workflow(w) for w in workflows])
        self.versioning = versioning
        self.tracing = tracing
        self.codec = EncryptionCodec.from_env() if encryption == "env" else encryption
        cipher = self.codec.key_ring if self.codec is not None else None
        self.large_values = LargeValues.from_env() if large_values == "env" else large_values
        if self.large_values is not None:
            allow_stored_values(self.large_values.max_value_bytes, self.large_values.threshold)
        super().__init__(
            "temporal_workflows",
            data_converter=data_converter(self.codec, self.large_values),
            interceptors=[_tracing_interceptor()] if tracing else None,
            workflows=[GraphWorkflow] if self.graphs else None,
            activities=build_activities(self.graphs, checkpoint_storage, cipher=cipher) if self.graphs else None,
            workflow_runner=_sandbox_runner,
            # An engine error is a bug in the graph, not in the worker: fail the run
            # with it instead of retrying the workflow task for ever.
            workflow_failure_exception_types=[WorkflowError],
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        if self.tracing:
            # The graph workflow runs unsandboxed; the replay gate sees its activations (telemetry once).
            config["unsandboxed_workflow_runner"] = gated(
                config.get("unsandboxed_workflow_runner") or UnsandboxedWorkflowRunner()
            )
        if self.versioning is not None and self.graphs and config.get("deployment_config") is None:
            config["deployment_config"] = self.versioning.deployment_config(self.graphs)
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        promote = self.versioning is not None and self.versioning.make_current and self.graphs
        try:
            async with (
                self.versioning.promoting(worker.client, self.graphs)
                if promote and self.versioning is not None
                else contextlib.nullcontext()
            ):
                await super().run_worker(worker, next)
        finally:
            await evict_cached_runs(worker)  # spans of runs left mid-superstep close where they opened
