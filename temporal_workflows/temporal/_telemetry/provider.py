"""The process's tracer provider: Temporal's replay-safe provider, with span ends in workflow code gated.

Temporal's ``ReplaySafeTracerProvider`` gives spans opened in workflow code
the same ids on every replay and skips their end while the workflow replays
history. This subclass keeps both and adds the replay gate (``gate.py``): a
span that live workflow code ends is held until its workflow task is known
to count, so a query's run-ahead or a task that never completed exports
nothing. It is still a ``ReplaySafeTracerProvider`` (Temporal's
``OpenTelemetryInterceptor`` requires one).

It samples a span only while the process has somewhere to send it (a span
processor): with no exporter configured, spans are not recorded at all, which
keeps their cost out of every step, while trace context still propagates.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer, use_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util import types
from opentelemetry.util._decorator import _agnosticcontextmanager
from temporalio import workflow
from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

from temporal_workflows.temporal._telemetry.gate import GATE, ReplayGate

__all__ = ["GatedTracerProvider", "make_provider"]


class _WhileExporting(Sampler):
    """Record spans only while the provider has a span processor (somewhere to send them)."""

    def __init__(self) -> None:
        self.on = False

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP, attributes)

    def get_description(self) -> str:
        return "WhileExporting"


def _replaying() -> bool:
    return workflow.in_workflow() and workflow.unsafe.is_replaying_history_events()


class _GatedSpan(Span):
    """A span whose end, in workflow code, is skipped on replay and held by the gate when live."""

    def __init__(self, span: Span, gate: ReplayGate) -> None:
        self._span = span
        self._gate = gate
        self._exception: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)

    def end(self, end_time: int | None = None) -> None:
        if not workflow.in_workflow() or not self._span.is_recording():
            self._span.end(end_time=end_time)  # outside workflow code, or nothing to export: nothing to gate
            return
        if workflow.unsafe.is_replaying_history_events():
            return  # this span was (or will be) ended by the execution that counts
        if self._exception is not None and not workflow.is_failure_exception(self._exception):
            return  # a failed workflow task: the retried task ends it
        at = end_time if end_time is not None else time.time_ns()
        span = self._span
        if not self._gate.hold(lambda: span.end(end_time=at)):
            span.end(end_time=at)

    def get_span_context(self) -> SpanContext:
        return self._span.get_span_context()

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        self._span.set_attributes(attributes)

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        self._span.add_event(name, attributes, timestamp)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        self._span.add_link(context, attributes)

    def update_name(self, name: str) -> None:
        self._span.update_name(name)

    def is_recording(self) -> bool:
        return self._span.is_recording()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self._span.set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        self._exception = exception
        self._span.record_exception(exception, attributes, timestamp, escaped)


class _GatedTracer(Tracer):
    def __init__(self, tracer: Tracer, gate: ReplayGate) -> None:
        self._tracer = tracer
        self._gate = gate

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        if _replaying():
            start_time = start_time or workflow.time_ns()  # the same on every replay
        span = self._tracer.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        return _GatedSpan(span, self._gate)

    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        with use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class GatedTracerProvider(ReplaySafeTracerProvider):
    """Temporal's replay-safe provider with the replay gate on span ends in workflow code (module doc)."""

    def __init__(self, tracer_provider: SdkTracerProvider, id_generator: Any, sampler: _WhileExporting) -> None:
        super().__init__(tracer_provider, id_generator)
        self._sampler = sampler
        self.gate = GATE
        self._tracers: dict[tuple[str, str | None, str | None], Tracer] = {}

    def add_span_processor(self, span_processor: SpanProcessor) -> None:
        super().add_span_processor(span_processor)
        self._sampler.on = True

    @property
    def exporting(self) -> bool:
        """Whether this process sends spans anywhere (a span processor was added)."""
        return self._sampler.on

    @property
    def resource(self) -> Resource:
        """The resource every span of this process carries."""
        return self._tracer_provider.resource

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: types.Attributes | None = None,
    ) -> Tracer:
        # Asked for on every span (the tracing interceptor, our own spans): the SDK builds a new tracer (and
        # instrumentation scope) each time, a few per cent of a worker's CPU per step. Tracers without
        # attributes are kept, one per scope.
        key = (instrumenting_module_name, instrumenting_library_version, schema_url)
        if attributes is None and (cached := self._tracers.get(key)) is not None:
            return cached
        tracer: Tracer = _GatedTracer(
            self._tracer_provider.get_tracer(
                instrumenting_module_name, instrumenting_library_version, schema_url, attributes
            ),
            self.gate,
        )
        if attributes is None:
            self._tracers[key] = tracer
        return tracer


def make_provider(resource: Resource) -> GatedTracerProvider:
    """A gated, replay-safe provider for ``resource``, recording spans once a processor is added."""
    # Temporal's id generator (deterministic in workflow code), taken from the provider it builds.
    generator = create_tracer_provider(shutdown_on_exit=False).id_generator()
    sampler = _WhileExporting()
    provider = SdkTracerProvider(sampler=sampler, resource=resource, id_generator=generator)
    return GatedTracerProvider(provider, generator, sampler)
