"""OpenTelemetry set-up for processes that host or drive runs on Temporal, from the standard ``OTEL_*`` variables.

Spans opened in workflow code (the run, its supersteps and requests) must be
replay-safe: the same ids on every replay, and exported once. That needs the
process's *global* tracer provider to be the gated replay-safe one
(``provider.py``) before a worker starts, and OpenTelemetry lets a process set
its global providers once. So :func:`configure_tracing` and
:func:`configure_metrics` are the one place that sets them, and
:class:`~temporal_workflows.temporal.TemporalWorkflowsPlugin` calls them
unless the application installed its own providers first.

What the standard variables select, as OpenTelemetry's own SDK configuration
does: ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (``otlp``,
``console``, ``none``), and without them OTLP whenever
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the signal's own endpoint) is set, nothing
otherwise; ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf`` by default,
``grpc`` if that exporter is installed); ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``; ``OTEL_METRIC_EXPORT_INTERVAL``;
``OTEL_BSP_*``; ``OTEL_SDK_DISABLED``. The console exporters write to
stderr, so a command's own output (``run`` prints its result) stays clean.

Every process's resource says who it is: ``host.name``, ``process.pid`` and
``service.instance.id``, which is the Temporal identity its clients and
workers use by default (``<pid>@<host>``), the one the run's history records
for each activity task a worker started.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
from typing import Any, Final, Literal

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import (
    HOST_NAME,
    PROCESS_PID,
    SERVICE_INSTANCE_ID,
    SERVICE_NAME,
    OTELResourceDetector,
    Resource,
)
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from temporalio.contrib.opentelemetry import ReplaySafeMeterProvider, ReplaySafeTracerProvider

from temporal_workflows._errors import WorkflowError
from temporal_workflows.temporal._telemetry.gate import GATE
from temporal_workflows.temporal._telemetry.provider import GatedTracerProvider, make_provider

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "Role",
    "configure_metrics",
    "configure_telemetry",
    "configure_tracing",
    "flush_telemetry",
    "flush_tracing",
    "process_identity",
    "replay_safe_provider",
    "service_name_for",
    "telemetry_resource",
]

DEFAULT_SERVICE_NAME: Final = "temporal-workflows"
"""``service.name`` of a process that did not say what it is (an application using the plugin)."""

Role = Literal["worker", "console", "cli", "app"]
"""What a process is, for its default ``service.name``."""

_ROLE_SERVICE: Final[dict[str, str]] = {
    "worker": "temporal-workflows-worker",
    "console": "temporal-workflows-console",
    "cli": "temporal-workflows-cli",
    "app": DEFAULT_SERVICE_NAME,
}

DEFAULT_BSP_SCHEDULE_DELAY_MS: Final = 1000
"""How often finished spans are sent when ``OTEL_BSP_SCHEDULE_DELAY`` is not set: a second rather than the
SDK's five, so a worker that is killed loses at most about a second of them."""

_log = logging.getLogger(__name__)


def process_identity() -> str:
    """This process's Temporal identity as the SDK makes it by default (``<pid>@<host>``)."""
    return f"{os.getpid()}@{socket.gethostname()}"


def service_name_for(role: Role) -> str:
    return _ROLE_SERVICE.get(role, DEFAULT_SERVICE_NAME)


def telemetry_resource(service_name: str | None = None) -> Resource:
    """The resource of this process's spans and metrics.

    ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` win; then
    ``service_name``; ``host.name``, ``process.pid`` and
    ``service.instance.id`` (the Temporal identity) are added unless set there.
    """
    from_env = OTELResourceDetector().detect().attributes
    attributes: dict[str, Any] = {}
    if not os.environ.get("OTEL_SERVICE_NAME") and SERVICE_NAME not in from_env:
        attributes[SERVICE_NAME] = service_name or DEFAULT_SERVICE_NAME
    for key, value in (
        (HOST_NAME, socket.gethostname()),
        (PROCESS_PID, os.getpid()),
        (SERVICE_INSTANCE_ID, process_identity()),
    ):
        if key not in from_env:
            attributes[key] = value
    return Resource.create(attributes)


def _disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def _selected(signal: Literal["traces", "metrics"]) -> str:
    """``otlp``, ``console`` or ``none`` for ``signal``, as OpenTelemetry's own configuration reads the variables."""
    if _disabled():
        return "none"
    name = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    if not name:
        endpoint = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return "otlp" if endpoint else "none"
    first = name.split(",")[0].strip()
    if first not in ("otlp", "console", "none"):
        raise WorkflowError(
            f"OTEL_{signal.upper()}_EXPORTER={name!r} is not supported here; use 'otlp', 'console' or 'none'"
        )
    return first


def _protocol(signal: Literal["traces", "metrics"]) -> str:
    value = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", ""
    )
    return value.strip().lower()


def _missing(e: ImportError) -> WorkflowError:
    return WorkflowError(
        "OTLP export is configured (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_*_EXPORTER=otlp) but the exporter is "
        f"not installed ({e.name}): pip install 'temporal-workflows[otlp]'"
    )


def _otlp_exporter(signal: Literal["traces", "metrics"]) -> Any:
    """OpenTelemetry's OTLP exporter class for ``signal`` on the configured wire (imported by name, statically:
    the package never imports a module whose name it computes)."""
    grpc = _protocol(signal) == "grpc"
    # The `otlp` extra installs the HTTP exporters; the gRPC ones are the user's to install.
    if signal == "traces":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcSpanExporter,
            )

            return GrpcSpanExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[import-not-found]
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter


def _from_env(signal: Literal["traces", "metrics"], console: Any) -> tuple[str, Any]:
    """The exporter the ``OTEL_*`` environment selects for ``signal``, and its name (``console``: that class)."""
    name = _selected(signal)
    if name == "none":
        return name, None
    if name == "console":
        return name, console(out=sys.stderr)
    try:
        exporter_class = _otlp_exporter(signal)
    except ImportError as e:
        raise _missing(e) from e
    return name, exporter_class()


def _exporter_from_env() -> tuple[str, SpanExporter | None]:
    """The span exporter the ``OTEL_*`` environment selects, and its name."""
    return _from_env("traces", ConsoleSpanExporter)


def _metric_exporter_from_env() -> tuple[str, MetricExporter | None]:
    """The metric exporter the ``OTEL_*`` environment selects, and its name."""
    return _from_env("metrics", ConsoleMetricExporter)


def _span_processor(exporter: SpanExporter, batch: bool) -> Any:
    if not batch:
        return SimpleSpanProcessor(exporter)
    if os.environ.get("OTEL_BSP_SCHEDULE_DELAY"):
        return BatchSpanProcessor(exporter)
    return BatchSpanProcessor(exporter, schedule_delay_millis=DEFAULT_BSP_SCHEDULE_DELAY_MS)


def configure_tracing(
    exporter: SpanExporter | None = None,
    *,
    service_name: str | None = None,
    batch: bool = True,
    metric_reader: MetricReader | None = None,
) -> ReplaySafeTracerProvider:
    """Install the process's telemetry: a replay-safe global tracer provider and the meter provider, once.

    Metrics are configured as :func:`configure_metrics` does (from the
    ``OTEL_*`` environment, or ``metric_reader``) unless a meter provider is
    installed already.

    Args:
        exporter: Where spans go. ``None`` reads the ``OTEL_*`` environment:
            OTLP (``pip install 'temporal-workflows[otlp]'``) when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, the console (stderr) with
            ``OTEL_TRACES_EXPORTER=console``, nowhere otherwise.
        service_name: ``service.name`` of the spans; ``OTEL_SERVICE_NAME``
            wins, else this, else ``temporal-workflows``.
        batch: Export in the background (production) rather than as each
            span ends (tests that read spans right after a run).
        metric_reader: Where metrics go instead of what the environment says
            (a test's ``InMemoryMetricReader``); only before a meter provider
            is installed.

    Returns:
        The global tracer provider. If one is already installed and
        replay-safe, it is returned unchanged (``exporter`` is then added to it).

    Raises:
        WorkflowError: Another kind of global provider is already installed, or
            the configured exporter is not installed.
    """
    if metric_reader is not None or (_meter_provider is None and _is_proxy(metrics.get_meter_provider())):
        configure_metrics(metric_reader, service_name=service_name)
    current = trace.get_tracer_provider()
    if isinstance(current, ReplaySafeTracerProvider):
        if exporter is not None:
            current.add_span_processor(_span_processor(exporter, batch))
        return current
    if not isinstance(current, trace.ProxyTracerProvider):
        raise WorkflowError(
            f"a global OpenTelemetry tracer provider ({type(current).__name__}) is already installed; build it with "
            "temporalio.contrib.opentelemetry.create_tracer_provider() so superstep spans are replay-safe, or call "
            "temporal_workflows.temporal.configure_tracing() before anything else sets one"
        )
    name = "custom"
    if exporter is None:
        name, exporter = _exporter_from_env()
    provider = make_provider(telemetry_resource(service_name))
    if exporter is not None:
        provider.add_span_processor(_span_processor(exporter, batch))
    trace.set_tracer_provider(provider)
    # Registered after the provider's own exit hook, so it runs first: what the gate still holds is exported.
    atexit.register(GATE.flush)
    _log.debug("tracing: replay-safe provider installed, exporter %s", name)
    return provider


_meter_provider: MeterProvider | None = None


def configure_metrics(
    reader: MetricReader | None = None, *, service_name: str | None = None
) -> metrics.MeterProvider | None:
    """Install the global meter provider, once per process, wrapped so workflow code records nothing on replay.

    Args:
        reader: Where metrics go (a test's ``InMemoryMetricReader``). ``None``
            reads the ``OTEL_*`` environment as :func:`configure_tracing`
            does (``OTEL_METRICS_EXPORTER``, the OTLP endpoint), exporting
            every ``OTEL_METRIC_EXPORT_INTERVAL`` milliseconds (60 s by default).
        service_name: As for :func:`configure_tracing`.

    Returns:
        The global provider, or ``None`` when nothing is configured (no
        provider is installed then, and instruments stay no-ops).

    Raises:
        WorkflowError: ``reader`` is given but a meter provider is already
            installed (OpenTelemetry cannot add a reader later).
    """
    global _meter_provider
    current = metrics.get_meter_provider()
    if _meter_provider is not None or not _is_proxy(current):
        if reader is not None:
            raise WorkflowError(
                "a global OpenTelemetry meter provider is already installed; a reader can only be given to "
                "configure_metrics() before anything sets one"
            )
        return current
    if reader is None:
        name, exporter = _metric_exporter_from_env()
        if exporter is None:
            return None
        reader = PeriodicExportingMetricReader(exporter)
    else:
        name = "custom"
    provider = MeterProvider(metric_readers=[reader], resource=telemetry_resource(service_name))
    _meter_provider = provider
    metrics.set_meter_provider(ReplaySafeMeterProvider(provider))
    _log.debug("metrics: meter provider installed, exporter %s", name)
    return provider


def _is_proxy(provider: metrics.MeterProvider) -> bool:
    return type(provider).__name__ in ("_ProxyMeterProvider", "ProxyMeterProvider", "NoOpMeterProvider")


def configure_telemetry(role: Role = "app", *, service_name: str | None = None) -> None:
    """Tracing and metrics from the ``OTEL_*`` environment, named for ``role`` unless ``OTEL_SERVICE_NAME`` says.

    What the CLI's commands, the console and ``worker.py`` call first; an
    application's plugin calls it with ``role="app"``. Installing nothing
    twice: a process that configured its providers already keeps them.
    """
    name = service_name or service_name_for(role)
    if _meter_provider is None and _is_proxy(metrics.get_meter_provider()):
        configure_metrics(service_name=name)
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        configure_tracing(service_name=name)


def replay_safe_provider() -> ReplaySafeTracerProvider | None:
    """The global provider if workflow code may open spans with it, else ``None``."""
    current = trace.get_tracer_provider()
    return current if isinstance(current, ReplaySafeTracerProvider) else None


def flush_telemetry(timeout_millis: int = 5000) -> None:
    """Export what is buffered now: held workflow effects, spans and metrics (a short-lived process exits)."""
    GATE.flush()
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush(timeout_millis)
    if _meter_provider is not None:
        _meter_provider.force_flush(timeout_millis)


def flush_tracing(timeout_millis: int = 5000) -> None:
    """Export buffered telemetry before a short-lived process exits (:func:`flush_telemetry`)."""
    flush_telemetry(timeout_millis)


def is_gated(provider: object) -> bool:
    return isinstance(provider, GatedTracerProvider)
