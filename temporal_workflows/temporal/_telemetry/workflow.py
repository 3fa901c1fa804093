"""The run's own telemetry, as workflow code records it: spans that are replay-safe, metrics that count once.

Spans come from the global provider when it is replay-safe (the same ids on
every replay, exported by the execution that counts); with any other provider
they are skipped, since they would be exported again on every replay. Metric
recordings are skipped while the workflow replays history and, when live, are
held by the replay gate until the workflow task is known to count.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry.trace import Span
from temporalio import workflow

from temporal_workflows._telemetry import INSTRUMENTATION_NAME
from temporal_workflows.temporal._telemetry.config import replay_safe_provider
from temporal_workflows.temporal._telemetry.gate import GATE

__all__ = ["record", "start_span", "workflow_span"]


def workflow_span(name: str, attributes: dict[str, Any]) -> AbstractContextManager[Any]:
    """A span around a block of workflow code, or nothing when spans there would not be replay-safe."""
    provider = replay_safe_provider()
    if provider is None:
        return nullcontext()
    return provider.get_tracer(INSTRUMENTATION_NAME).start_as_current_span(name, attributes=attributes)


def start_span(name: str, attributes: dict[str, Any]) -> Span | None:
    """A span that workflow code ends later (a request, open across workflow tasks), child of the current one."""
    provider = replay_safe_provider()
    if provider is None:
        return None
    return provider.get_tracer(INSTRUMENTATION_NAME).start_span(name, attributes=attributes)


def record(effect: Callable[[], None]) -> None:
    """Record a metric from workflow code: nothing on replay; when live, once its workflow task counts."""
    if workflow.unsafe.is_replaying_history_events():
        return
    if not GATE.hold(effect):
        effect()
