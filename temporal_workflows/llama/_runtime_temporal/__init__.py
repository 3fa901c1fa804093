"""LlamaIndex ``workflows`` programs, unchanged, on Temporal: the ``TemporalRuntime`` plugin (docs/llama-runtime.md)."""

from temporal_workflows.llama._runtime_temporal._options import StepOptions
from temporal_workflows.llama._runtime_temporal._protocol import DEFAULT_TASK_QUEUE, TICK_SIGNAL, WORKFLOW_TYPE
from temporal_workflows.llama._runtime_temporal._runtime import TemporalExternalAdapter, TemporalRuntime
from temporal_workflows.llama._runtime_temporal._workflow import LlamaIndexRun

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "TICK_SIGNAL",
    "WORKFLOW_TYPE",
    "LlamaIndexRun",
    "StepOptions",
    "TemporalExternalAdapter",
    "TemporalRuntime",
]
