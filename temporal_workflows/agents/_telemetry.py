"""OpenTelemetry's GenAI spans for agent steps, whichever framework the agent is built with, one copy each.

An agent turn is an ``invoke_agent <name>`` span (inside the step's
``executor.process`` span), each model call in it a ``chat <model>`` span and
each tool call an ``execute_tool <tool>`` span, with the conventions'
attributes (``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.input_tokens`` / ``output_tokens``,
``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``,
``gen_ai.tool.call.id``) and the ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` metrics. Where the framework makes
them, it makes them, and nothing here adds a second copy:

* **Agent Framework**: its ``Agent`` makes ``invoke_agent`` and, through
  ``FunctionInvocationLayer``, ``execute_tool``; a chat client with its
  ``ChatTelemetryLayer`` (its own clients, and this project's
  ``ScriptedChatClient``) makes ``chat`` and the metrics. An agent that is
  not Agent Framework's ``Agent`` (any ``SupportsAgentRun``) gets its
  ``invoke_agent`` span here. A chat client without the layer makes no
  ``chat`` spans (nothing can see its model calls from outside).
* **Pydantic AI**: its instrumentation makes all three and the metrics when
  it is on (``Agent(instrument=...)``, ``Agent.instrument_all()``, an
  ``InstrumentedModel``); when it is not, the turn runs with an
  ``InstrumentedModel`` here. ``instrument=False`` on the agent is kept: no
  spans.

Message content (prompts, completions, tool arguments and results) is left
out unless the user opts in with the conventions' switch,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``: it then turns
on Agent Framework's sensitive-data capture and Pydantic AI's
``include_content``. (Agent Framework's own ``ENABLE_SENSITIVE_DATA`` still
works as it does there.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Status, StatusCode

from temporal_workflows._telemetry import Attr, capture_message_content, tracer

__all__ = ["follow_content_switch", "maf_invoke_agent", "pydantic_instrumentation"]

_content_switched = False


def follow_content_switch() -> None:
    """Turn Agent Framework's sensitive-data capture on when the conventions' content switch is on (once)."""
    global _content_switched
    if _content_switched or not capture_message_content():
        return
    _content_switched = True
    try:
        from agent_framework.observability import OBSERVABILITY_SETTINGS
    except ImportError:  # pragma: no cover - an older Agent Framework
        return
    if OBSERVABILITY_SETTINGS.enable_instrumentation and not OBSERVABILITY_SETTINGS.enable_sensitive_data:
        OBSERVABILITY_SETTINGS.enable_sensitive_data = True


def _maf_instruments_agents(agent: Any) -> bool:
    try:
        from agent_framework.observability import OBSERVABILITY_SETTINGS, AgentTelemetryLayer
    except ImportError:  # pragma: no cover
        return False
    return isinstance(agent, AgentTelemetryLayer) and bool(OBSERVABILITY_SETTINGS.ENABLED)


@contextmanager
def maf_invoke_agent(agent: Any) -> Iterator[Callable[[Any], None]]:
    """Around an Agent Framework agent's run: an ``invoke_agent`` span if the agent does not make one itself.

    Yields a function to call with the ``AgentResponse`` (its usage and finish
    reason go on the span).
    """
    if _maf_instruments_agents(agent):
        yield lambda response: None
        return
    name = str(getattr(agent, "name", None) or type(agent).__name__)
    attributes: dict[str, Any] = {
        Attr.GEN_AI_OPERATION: "invoke_agent",
        Attr.GEN_AI_PROVIDER: "microsoft.agent_framework",
        Attr.GEN_AI_AGENT_NAME: name,
    }
    with tracer().start_as_current_span(
        f"invoke_agent {name}", attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:

        def finished(response: Any) -> None:
            if not span.is_recording():
                return
            usage = getattr(response, "usage_details", None) or {}
            if usage.get("input_token_count") is not None:
                span.set_attribute(Attr.GEN_AI_INPUT_TOKENS, int(usage["input_token_count"]))
            if usage.get("output_token_count") is not None:
                span.set_attribute(Attr.GEN_AI_OUTPUT_TOKENS, int(usage["output_token_count"]))
            reason = getattr(response, "finish_reason", None)
            if reason:
                span.set_attribute(Attr.GEN_AI_FINISH_REASONS, json.dumps([str(reason)]))
            model = getattr(response, "model", None)
            if model:
                span.set_attribute(Attr.GEN_AI_RESPONSE_MODEL, str(model))

        try:
            yield finished
        except Exception as e:
            if span.is_recording():
                span.set_attribute(Attr.ERROR_TYPE, type(e).__qualname__)
                span.set_status(Status(StatusCode.ERROR, f"{type(e).__name__}: {e}"[:1000]))
            raise


def pydantic_instrumentation(agent: Any) -> dict[str, Any]:
    """Keyword arguments for a Pydantic AI agent's ``run`` that turn its own instrumentation on for this turn,
    or none when it is on already (or turned off on purpose)."""
    from pydantic_ai import Agent
    from pydantic_ai.models import infer_model
    from pydantic_ai.models.instrumented import InstrumentationSettings, InstrumentedModel

    chosen = getattr(agent, "instrument", None)
    if chosen is not None or (isinstance(agent, Agent) and getattr(Agent, "_instrument_default", False)):
        return {}  # the agent says (instrumented already, or not at all)
    model = getattr(agent, "model", None)
    if model is None or isinstance(model, InstrumentedModel):
        return {}
    try:
        resolved = infer_model(model)
    except Exception:  # a model name it cannot resolve here: leave the run as it is (it reports that itself)
        return {}
    return {"model": InstrumentedModel(resolved, InstrumentationSettings(include_content=capture_message_content()))}
