"""A workflow runner that shows the replay gate every activation, around the runner it wraps.

The worker runs each workflow instance's activations one after another; this
wrapper tells the gate (``gate.py``) what each activation is before the
instance runs it, which is all the gate needs to decide whether what the
previous one emitted counts. It changes nothing else: the wrapped runner
(sandboxed or not) creates and runs the instance.
"""

from __future__ import annotations

from typing import Any

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

from temporal_workflows.temporal._telemetry.gate import GATE, ReplayGate

__all__ = ["GatedRunner", "gated"]


class _GatedInstance(WorkflowInstance):
    def __init__(self, instance: WorkflowInstance, gate: ReplayGate) -> None:
        self._instance = instance
        self._gate = gate

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        with self._gate.activation(id(self), act):
            return self._instance.activate(act)

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._instance.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._instance.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self._instance.get_info()

    def get_thread_id(self) -> int | None:
        return self._instance.get_thread_id()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._instance, name)


class GatedRunner(WorkflowRunner):
    """Wraps ``runner`` so that the replay gate sees every activation of the instances it creates."""

    def __init__(self, runner: WorkflowRunner, gate: ReplayGate = GATE) -> None:
        self.runner = runner
        self.gate = gate

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _GatedInstance(self.runner.create_instance(det), self.gate)

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        self.runner.set_worker_level_failure_exception_types(types)


def gated(runner: WorkflowRunner) -> WorkflowRunner:
    """``runner`` wrapped once (a runner wrapped already is returned as it is)."""
    return runner if isinstance(runner, GatedRunner) else GatedRunner(runner)
