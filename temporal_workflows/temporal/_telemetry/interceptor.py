"""Temporal's OpenTelemetry interceptor, as this project uses it.

Two things differ from ``temporalio.contrib.opentelemetry.OpenTelemetryInterceptor``:

* **Stream traffic is not traced item by item.** A streaming step publishes
  its live events by signal (``__temporal_workflow_stream_publish``, in
  batches) and readers long-poll by update (``__temporal_workflow_stream_poll``)
  and query (``__temporal_workflow_stream_offset``): hundreds of
  ``SignalWorkflow`` / ``HandleSignal`` / ``HandleUpdate`` spans per run
  that say nothing an operator needs. They pass untraced; the step's
  ``executor.process`` span and the ``temporal_workflows.live_events.published``
  metric count what was published.
* **A client's calls land in the run's trace.** Starting a run records the
  W3C trace context of its ``StartWorkflow`` span in the run's memo
  (``traceparent``, ``tracestate``). A query, signal or update sent to a run
  from a process with no span of its own (the CLI's ``respond``, the
  console's pages, a script) is started with that context as its parent, so
  ``StartWorkflowUpdate:submit_response`` and ``QueryWorkflow:status`` sit
  under the run they act on. A caller that has a span of its own keeps it
  as the parent. The context is read once per run and process (a
  ``describe``), and a run started without it (by another client) is left
  as it was.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import opentelemetry.context
import temporalio.client
import temporalio.worker
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor

__all__ = ["STREAM_NAMES", "TRACE_MEMO_KEYS", "ProjectTracingInterceptor"]

STREAM_NAMES: Final = frozenset(
    {
        "__temporal_workflow_stream_publish",
        "__temporal_workflow_stream_poll",
        "__temporal_workflow_stream_offset",
    }
)
"""The workflow-streams signal, update and query: passed untraced."""

TRACE_MEMO_KEYS: Final = ("traceparent", "tracestate")
"""Memo keys of a run's trace context (W3C), written when a client of this project starts it."""

_PROPAGATOR: Final = TraceContextTextMapPropagator()
_MAX_RUNS: Final = 1024


class _RunContexts:
    """The trace context each run was started in, read from its memo once per process (bounded)."""

    def __init__(self) -> None:
        self._known: OrderedDict[str, Context | None] = OrderedDict()

    async def get(self, next: temporalio.client.OutboundInterceptor, workflow_id: str) -> Context | None:
        if workflow_id in self._known:
            self._known.move_to_end(workflow_id)
            return self._known[workflow_id]
        context: Context | None = None
        try:
            described = await next.describe_workflow(
                temporalio.client.DescribeWorkflowInput(id=workflow_id, run_id=None, rpc_metadata={}, rpc_timeout=None)
            )
            memo = await described.memo()
            carrier = {k: memo[k] for k in TRACE_MEMO_KEYS if isinstance(memo.get(k), str)}
            if carrier.get("traceparent"):
                extracted = _PROPAGATOR.extract(carrier)
                if trace.get_current_span(extracted).get_span_context().is_valid:
                    context = extracted
        except Exception:
            return None  # not known now (no such run, no permission): try again next time, never fail the call
        self._known[workflow_id] = context
        while len(self._known) > _MAX_RUNS:
            self._known.popitem(last=False)
        return context


def _with_trace_memo(memo: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``memo`` plus the current span's W3C context (the ``StartWorkflow`` span being made)."""
    if memo is not None and "traceparent" in memo:
        return memo
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    if not carrier.get("traceparent"):
        return memo
    return {**(memo or {}), **{k: carrier[k] for k in TRACE_MEMO_KEYS if k in carrier}}


class _RecordRunContext(temporalio.client.OutboundInterceptor):
    """Inside Temporal's tracing interceptor: a run started here records its ``StartWorkflow`` span's context."""

    async def start_workflow(self, input: temporalio.client.StartWorkflowInput) -> Any:
        input.memo = _with_trace_memo(input.memo)
        return await super().start_workflow(input)

    async def start_update_with_start_workflow(self, input: temporalio.client.StartWorkflowUpdateWithStartInput) -> Any:
        start = input.start_workflow_input
        start.memo = _with_trace_memo(start.memo)
        return await super().start_update_with_start_workflow(input)


@contextmanager
def _attached(context: Context | None) -> Iterator[None]:
    if context is None:
        yield
        return
    token = opentelemetry.context.attach(context)
    try:
        yield
    finally:
        opentelemetry.context.detach(token)


class _RunParentedCalls(temporalio.client.OutboundInterceptor):
    """Outside Temporal's tracing interceptor: stream traffic untraced, other calls parented to their run."""

    def __init__(
        self, traced: temporalio.client.OutboundInterceptor, untraced: temporalio.client.OutboundInterceptor
    ) -> None:
        super().__init__(traced)
        self._untraced = untraced
        self._contexts = _RunContexts()

    async def _parent(self, workflow_id: str) -> Context | None:
        if trace.get_current_span().get_span_context().is_valid:
            return None  # the caller's own span stays the parent
        if not getattr(trace.get_tracer_provider(), "exporting", True):
            return None  # this process sends no spans: no lookup for a parent nobody will see
        return await self._contexts.get(self._untraced, workflow_id)

    async def query_workflow(self, input: temporalio.client.QueryWorkflowInput) -> Any:
        if input.query in STREAM_NAMES:
            return await self._untraced.query_workflow(input)
        with _attached(await self._parent(input.id)):
            return await super().query_workflow(input)

    async def signal_workflow(self, input: temporalio.client.SignalWorkflowInput) -> None:
        if input.signal in STREAM_NAMES:
            return await self._untraced.signal_workflow(input)
        with _attached(await self._parent(input.id)):
            return await super().signal_workflow(input)

    async def start_workflow_update(self, input: temporalio.client.StartWorkflowUpdateInput) -> Any:
        if input.update in STREAM_NAMES:
            return await self._untraced.start_workflow_update(input)
        with _attached(await self._parent(input.id)):
            return await super().start_workflow_update(input)


class ProjectTracingInterceptor(OpenTelemetryInterceptor):
    """Temporal's ``OpenTelemetryInterceptor`` (with its Temporal spans), minus stream spans, plus run parents."""

    def __init__(self) -> None:
        super().__init__(add_temporal_spans=True)

    def intercept_client(self, next: temporalio.client.OutboundInterceptor) -> temporalio.client.OutboundInterceptor:
        recorded = _RecordRunContext(next)
        return _RunParentedCalls(super().intercept_client(recorded), recorded)

    def workflow_interceptor_class(self, input: temporalio.worker.WorkflowInterceptorClassInput) -> Any:
        base: Any = super().workflow_interceptor_class(input)

        class _StreamsUntraced(base):  # type: ignore[misc, valid-type]
            async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
                if input.signal in STREAM_NAMES:
                    await temporalio.worker.WorkflowInboundInterceptor.handle_signal(self, input)
                else:
                    await super().handle_signal(input)

            async def handle_query(self, input: temporalio.worker.HandleQueryInput) -> Any:
                if input.query in STREAM_NAMES:
                    return await temporalio.worker.WorkflowInboundInterceptor.handle_query(self, input)
                return await super().handle_query(input)

            def handle_update_validator(self, input: temporalio.worker.HandleUpdateInput) -> None:
                if input.update in STREAM_NAMES:
                    temporalio.worker.WorkflowInboundInterceptor.handle_update_validator(self, input)
                else:
                    super().handle_update_validator(input)

            async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
                if input.update in STREAM_NAMES:
                    return await temporalio.worker.WorkflowInboundInterceptor.handle_update_handler(self, input)
                return await super().handle_update_handler(input)

        return _StreamsUntraced
