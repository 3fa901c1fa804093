"""OpenTelemetry set-up for runs hosted on Temporal.

Spans opened in workflow code (one per superstep) must be replay-safe: the
same ids on every replay and never exported twice. Temporal's
``ReplaySafeTracerProvider`` does that, but only when it is the *global*
provider before a worker starts, and OpenTelemetry lets a process set its
global provider once. So :func:`configure_tracing` is the one place that sets
it, from the standard ``OTEL_*`` environment variables, and
:class:`~temporal_workflows.TemporalWorkflowsPlugin` calls it unless the
application already installed a provider.
"""

from __future__ import annotations

import logging
import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

from temporal_workflows._errors import WorkflowError

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "TRACER_NAME",
    "configure_tracing",
    "flush_tracing",
    "replay_safe_provider",
    "workflow_span",
]

TRACER_NAME = "temporal_workflows"
DEFAULT_SERVICE_NAME = "temporal-workflows"

_log = logging.getLogger(__name__)


def _exporter_from_env() -> tuple[str, SpanExporter | None]:
    """Pick the exporter the way OpenTelemetry's own SDK configuration does.

    ``OTEL_TRACES_EXPORTER`` wins (``otlp``, ``console`` or ``none``); without
    it, traces go to OTLP when an OTLP endpoint is configured and nowhere
    otherwise, so a laptop run without a collector does not log connection
    errors.
    """
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "none", None
    name = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not name:
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        name = "otlp" if endpoint else "none"
    if name == "none":
        return name, None
    if name == "console":
        return name, ConsoleSpanExporter()
    if name == "otlp":
        return name, _otlp_exporter()
    raise WorkflowError(f"OTEL_TRACES_EXPORTER={name!r} is not supported here; use 'otlp', 'console' or 'none'")


def _otlp_exporter() -> SpanExporter:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    )
    try:
        if protocol.strip().lower() == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcExporter,
            )

            exporter: SpanExporter = GrpcExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
    except ImportError as e:
        raise WorkflowError(
            "OTLP trace export is configured (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER=otlp) but the "
            f"exporter is not installed ({e.name}): pip install 'temporal-workflows[otlp]'"
        ) from e
    return exporter


def configure_tracing(
    exporter: SpanExporter | None = None, *, service_name: str | None = None, batch: bool = True
) -> ReplaySafeTracerProvider:
    """Install a replay-safe global tracer provider, once per process.

    Args:
        exporter: Where spans go. ``None`` reads the ``OTEL_*`` environment:
            OTLP (``pip install 'temporal-workflows[otlp]'``) when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, the console with
            ``OTEL_TRACES_EXPORTER=console``, nowhere otherwise.
        service_name: ``service.name`` of the spans; ``OTEL_SERVICE_NAME``
            or ``temporal-workflows`` when omitted.
        batch: Export in the background (production) rather than as each
            span ends (tests that read spans right after a run).

    Returns:
        The global provider. If one is already installed and replay-safe, it is
        returned unchanged (``exporter`` is then added to it).

    Raises:
        WorkflowError: Another kind of global provider is already installed, or
            the configured exporter is not installed.
    """
    current = trace.get_tracer_provider()
    if isinstance(current, ReplaySafeTracerProvider):
        if exporter is not None:
            current.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
        return current
    if not isinstance(current, trace.ProxyTracerProvider):
        raise WorkflowError(
            f"a global OpenTelemetry tracer provider ({type(current).__name__}) is already installed; build it with "
            "temporalio.contrib.opentelemetry.create_tracer_provider() so superstep spans are replay-safe, or call "
            "temporal_workflows.configure_tracing() before anything else sets one"
        )
    name = "custom"
    if exporter is None:
        name, exporter = _exporter_from_env()
    attributes: dict[str, Any] = {}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = service_name or DEFAULT_SERVICE_NAME
    elif service_name:
        attributes[SERVICE_NAME] = service_name
    provider = create_tracer_provider(resource=Resource.create(attributes))
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _log.debug("tracing: replay-safe provider installed, exporter %s", name)
    return provider


def replay_safe_provider() -> ReplaySafeTracerProvider | None:
    """The global provider if workflow code may open spans with it, else ``None``."""
    current = trace.get_tracer_provider()
    return current if isinstance(current, ReplaySafeTracerProvider) else None


def workflow_span(name: str, attributes: dict[str, Any]) -> AbstractContextManager[Any]:
    """A span for workflow code, or nothing when spans there would not be replay-safe.

    With any other provider a span opened in workflow code would get new ids on
    every replay and be exported again each time, so it is skipped.
    """
    provider = replay_safe_provider()
    if provider is None:
        return nullcontext()
    return provider.get_tracer(TRACER_NAME).start_as_current_span(name, attributes=attributes)


def flush_tracing(timeout_millis: int = 5000) -> None:
    """Export buffered spans now (short-lived processes call this before exiting)."""
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush(timeout_millis)
