"""Telemetry for runs on Temporal: set-up from ``OTEL_*``, the replay gate, workflow-side spans and metrics.

* ``config``: the process's providers and resource, from the standard variables;
* ``gate``: what live workflow code emits waits until its workflow task is known to count;
* ``provider``: the replay-safe tracer provider whose span ends in workflow code go through the gate;
* ``runner``: the workflow runner wrapper that shows the gate every activation;
* ``interceptor``: Temporal's tracing interceptor, minus the per-item stream spans, plus run-parented client spans;
* ``workflow``: the run's own spans and metrics, as workflow code records them.
"""

from temporal_workflows.temporal._telemetry.config import (
    DEFAULT_SERVICE_NAME,
    configure_metrics,
    configure_telemetry,
    configure_tracing,
    flush_telemetry,
    flush_tracing,
    process_identity,
    replay_safe_provider,
)

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "configure_metrics",
    "configure_telemetry",
    "configure_tracing",
    "flush_telemetry",
    "flush_tracing",
    "process_identity",
    "replay_safe_provider",
]
