"""The telemetry vocabulary every host shares: span and attribute names, metric instruments, the content switch.

Names follow OpenTelemetry's semantic conventions where they have one (the
GenAI conventions for agents: ``invoke_agent``, ``chat``, ``execute_tool``,
``gen_ai.*``; ``error.type``) and Agent Framework's workflow spans where they
mean the same thing (``workflow.run``, ``executor.process``, ``message.send``,
``edge_group.process`` and their ``workflow.*``, ``executor.*``,
``message.*``, ``edge_group.*`` attributes). What only this project has
(supersteps, attempts, requests, runs on Temporal) is under
``temporal_workflows.*``.

Instruments are made from OpenTelemetry's global meter, which binds late: they
record nothing until a meter provider is installed (on Temporal,
``temporal_workflows.temporal.configure_telemetry`` or the plugin does it from
the standard ``OTEL_*`` variables), and cost a no-op call until then.
"""

from __future__ import annotations

import os
from typing import Final

from opentelemetry import metrics, trace

__all__ = [
    "INSTRUMENTATION_NAME",
    "Attr",
    "Metrics",
    "capture_message_content",
    "instruments",
    "meter",
    "tracer",
]

INSTRUMENTATION_NAME: Final = "temporal_workflows"
"""The instrumentation scope of every span and metric this project makes."""


class Attr:
    """Span, metric and resource attribute names (semantic conventions first, then Agent Framework's, then ours)."""

    # Agent Framework's workflow vocabulary
    WORKFLOW_RUN_SPAN: Final = "workflow.run"
    WORKFLOW_ID: Final = "workflow.id"
    WORKFLOW_NAME: Final = "workflow.name"
    EXECUTOR_PROCESS_SPAN: Final = "executor.process"
    EXECUTOR_ID: Final = "executor.id"
    EXECUTOR_TYPE: Final = "executor.type"
    MESSAGE_SEND_SPAN: Final = "message.send"
    MESSAGE_TYPE: Final = "message.type"
    MESSAGE_PAYLOAD_TYPE: Final = "message.payload_type"
    MESSAGE_SOURCE_ID: Final = "message.source_id"
    MESSAGE_TARGET_ID: Final = "message.target_id"
    MESSAGE_DESTINATION_EXECUTOR_ID: Final = "message.destination_executor_id"
    EDGE_GROUP_PROCESS_SPAN: Final = "edge_group.process"
    EDGE_GROUP_TYPE: Final = "edge_group.type"
    EDGE_GROUP_ID: Final = "edge_group.id"
    EDGE_GROUP_DELIVERED: Final = "edge_group.delivered"
    EDGE_GROUP_DELIVERY_STATUS: Final = "edge_group.delivery_status"

    # OpenTelemetry's general and GenAI conventions
    ERROR_TYPE: Final = "error.type"
    GEN_AI_OPERATION: Final = "gen_ai.operation.name"
    GEN_AI_PROVIDER: Final = "gen_ai.provider.name"
    GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
    GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
    GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
    GEN_AI_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
    GEN_AI_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
    GEN_AI_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
    GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
    GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
    GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
    GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
    GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"

    # this project's
    GRAPH: Final = "temporal_workflows.graph"
    SUPERSTEP: Final = "temporal_workflows.superstep"
    EXECUTOR_IDS: Final = "temporal_workflows.executor_ids"
    ATTEMPT: Final = "temporal_workflows.attempt"
    RETRY: Final = "temporal_workflows.retry"
    RUN_ID: Final = "temporal_workflows.workflow_id"
    TEMPORAL_RUN_ID: Final = "temporal_workflows.run_id"
    REQUEST_ID: Final = "temporal_workflows.request_id"
    REQUEST_OUTCOME: Final = "temporal_workflows.request.outcome"
    OUTCOME: Final = "temporal_workflows.outcome"
    STATUS: Final = "temporal_workflows.status"
    SEGMENT: Final = "temporal_workflows.segment"
    # kept from the first release of the step span, so existing queries keep working
    LEGACY_EXECUTOR_ID: Final = "temporal_workflows.executor_id"
    LEGACY_MESSAGE_TYPE: Final = "temporal_workflows.message_type"


def tracer() -> trace.Tracer:
    """This project's tracer on the global provider (a no-op until one is installed)."""
    return trace.get_tracer(INSTRUMENTATION_NAME)


def meter() -> metrics.Meter:
    """This project's meter on the global provider (a no-op until one is installed)."""
    return metrics.get_meter(INSTRUMENTATION_NAME)


_TRUE = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event", "event_only"})


def capture_message_content() -> bool:
    """Whether GenAI spans may carry prompts, completions and tool arguments and results.

    Off unless the user opts in with the conventions' switch,
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``, or one
    of its newer modes such as ``SPAN_ONLY``); message content often holds
    what a codec encrypts everywhere else.
    """
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in _TRUE


class Metrics:
    """The instruments this project records (names in docs/observability.md).

    Steps are counted where each fact happens once: an attempt where it runs
    (``steps.started``, ``steps.retried``, ``steps.failed``,
    ``step.duration``), a step's completion where the run records its result
    (``steps.completed``), supersteps, runs and requests in the run itself
    (through the replay gate, so a replay or a query's run-ahead counts
    nothing), tokens and operation durations where the model is called.
    """

    def __init__(self) -> None:
        m = meter()
        self.steps_started = m.create_counter(
            "temporal_workflows.steps.started", unit="{attempt}", description="Step attempts started"
        )
        self.steps_retried = m.create_counter(
            "temporal_workflows.steps.retried",
            unit="{attempt}",
            description="Step attempts started after an earlier attempt of the same step failed or was lost",
        )
        self.steps_failed = m.create_counter(
            "temporal_workflows.steps.failed", unit="{attempt}", description="Step attempts that raised"
        )
        self.steps_completed = m.create_counter(
            "temporal_workflows.steps.completed",
            unit="{step}",
            description="Steps whose result the run recorded (once per step, whatever its attempts)",
        )
        self.step_duration = m.create_histogram(
            "temporal_workflows.step.duration", unit="s", description="Duration of one step attempt"
        )
        self.superstep_duration = m.create_histogram(
            "temporal_workflows.superstep.duration",
            unit="s",
            description="From a superstep's start to its commit, in workflow time",
        )
        self.runs = m.create_counter(
            "temporal_workflows.runs", unit="{run}", description="Runs entering a status (by status)"
        )
        self.requests_pending = m.create_up_down_counter(
            "temporal_workflows.requests.pending",
            unit="{request}",
            description="Requests for input a run is waiting on",
        )
        self.live_events = m.create_counter(
            "temporal_workflows.live_events.published",
            unit="{event}",
            description="Live events running steps published to their runs' streams",
        )
        # OpenTelemetry's GenAI client metrics, recorded here only for model calls no library records.
        self.token_usage = m.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=[
                1,
                4,
                16,
                64,
                256,
                1024,
                4096,
                16384,
                65536,
                262144,
                1048576,
                4194304,
                16777216,
                67108864,
            ],
        )
        self.operation_duration = m.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=[
                0.01,
                0.02,
                0.04,
                0.08,
                0.16,
                0.32,
                0.64,
                1.28,
                2.56,
                5.12,
                10.24,
                20.48,
                40.96,
                81.92,
            ],
        )


_metrics: Metrics | None = None


def instruments() -> Metrics:
    """The process's instruments (made once; they bind to whichever meter provider is installed)."""
    global _metrics
    if _metrics is None:
        _metrics = Metrics()
    return _metrics
