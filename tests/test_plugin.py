"""What TemporalWorkflowsPlugin does to a worker's configuration (no server needed)."""

from __future__ import annotations

from typing import cast

from temporalio.worker import UnsandboxedWorkflowRunner, WorkerConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import _Definition

from temporal_workflows.temporal import TemporalWorkflowsPlugin
from temporal_workflows.temporal.integration import GraphWorkflow
from tests.conftest import hosted_workflows


def _configure(**config: object) -> WorkerConfig:
    plugin = TemporalWorkflowsPlugin(hosted_workflows(), tracing=False, encryption=None)
    return plugin.configure_worker(cast(WorkerConfig, config))


def test_the_graph_workflow_runs_outside_the_sandbox() -> None:
    # It runs no user code; tests/integration/test_replay.py replays it inside the
    # sandbox, with the default restrictions, to keep it deterministic.
    config = _configure(workflow_runner=SandboxedWorkflowRunner())
    assert GraphWorkflow in config["workflows"]  # type: ignore[typeddict-item]
    assert _Definition.must_from_class(GraphWorkflow).sandboxed is False


def test_a_sandboxed_worker_passes_this_project_through() -> None:
    # The application's own workflows that import temporal_workflows (to start runs
    # as child workflows, say) share the host's modules rather than re-importing them.
    restrictions = SandboxRestrictions.default.with_passthrough_modules("my_app")
    runner = _configure(workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions))["workflow_runner"]  # type: ignore[typeddict-item]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert {"temporal_workflows", "opentelemetry", "my_app"} <= runner.restrictions.passthrough_modules


def test_a_worker_without_a_sandbox_keeps_its_runner() -> None:
    unsandboxed = UnsandboxedWorkflowRunner()
    assert _configure(workflow_runner=unsandboxed)["workflow_runner"] is unsandboxed  # type: ignore[typeddict-item]
