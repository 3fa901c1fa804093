"""Agent Framework's message types as values a run can carry.

Agent Framework's ``Message``, ``Content``, ``AgentResponse`` and their kin
are neither pydantic models nor dataclasses: they serialize themselves with
``to_dict()`` / ``from_dict()``. Giving each a pydantic schema built from
those two methods makes them ordinary values here: messages, outputs,
requests, responses and state hold them (and MAF's own dataclasses with
fields of their type, such as ``AgentExecutorRequest``), as JSON, validated
when they come from outside. A client that answers a tool-approval request
sends the ``Content`` object's JSON; the run validates it back into one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from temporal_workflows._engine.serde import register_value_type

__all__ = ["install_maf_types"]

_installed = False


VALUE_KEY = "value"
"""Where an ``AgentResponse``'s structured output (``.value``) is kept in its JSON, as a tagged node.

``to_dict()`` leaves it out (the response keeps the ``response_format`` it
was parsed with, a class, which JSON cannot hold); without it a response that
crossed a boundary would read ``.value`` as ``None``. It is stored as the
codec stores any value inside another (``docs/values.md``), so it comes back
as the model it was, in a process that declared or registered its class (an
``AgentExecutor`` registers its agent's ``response_format``)."""


FORMAT_KEY = "response_format"
"""Where an ``AgentResponse`` whose text does not parse as its ``response_format`` keeps that format's name.

Agent Framework parses ``.value`` when it is read: a reply that does not fit
the format raises there (pydantic's ``ValidationError``), in the executor
that reads it. The response carries the format's registered name instead of
a value, so after a boundary ``.value`` is parsed, and raises, as in Agent
Framework, rather than reading ``None``."""


RESULT_ITEMS = "=result"
"""A ``function_result`` content's ``items`` in its JSON when they are the one text item ``result`` holds.

Agent Framework's ``Content.from_function_result`` keeps a tool's output twice, as
``result`` and as a text item: every response, output, event and checkpoint of an
agent step would carry each tool output twice. Here the second is this marker
(``items`` is a list otherwise), and it is made again from ``result`` when the JSON
is read, so the object is the same."""


def _text_item(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "additional_properties": {}}


def _fold(node: Any) -> Any:
    """``node`` (a ``to_dict()`` tree) with each ``function_result``'s repeated text item folded (copied on change)."""
    if isinstance(node, list):
        folded = [_fold(v) for v in node]
        return folded if any(a is not b for a, b in zip(folded, node, strict=True)) else node
    if not isinstance(node, dict):
        return node
    out = node
    for key, value in node.items():
        new = _fold(value)
        if new is not value:
            if out is node:
                out = dict(node)
            out[key] = new
    result = out.get("result")
    if out.get("type") == "function_result" and isinstance(result, str) and out.get("items") == [_text_item(result)]:
        out = {**out, "items": RESULT_ITEMS}
    return out


def _unfold(node: Any) -> Any:
    """The inverse of :func:`_fold` (a tree JSON gave: changed in place)."""
    if isinstance(node, list):
        for v in node:
            _unfold(v)
    elif isinstance(node, dict):
        for v in node.values():
            _unfold(v)
        if node.get("items") == RESULT_ITEMS and isinstance(result := node.get("result"), str):
            node["items"] = [_text_item(result)]
    return node


def _has_folded(node: Any) -> bool:
    if isinstance(node, list):
        return any(_has_folded(v) for v in node)
    if isinstance(node, dict):
        return node.get("items") == RESULT_ITEMS or any(_has_folded(v) for v in node.values())
    return False


def _structured_value(response: Any) -> Any:
    """The response's parsed ``value``, or ``None`` if it has none (or its text does not parse)."""
    try:
        return response.value
    except Exception:  # the model's text did not fit the format: reading .value raises (FORMAT_KEY)
        return None


def _format_of(node: Any) -> Any:
    """The ``response_format`` class ``node`` names, or ``None`` where this process cannot build it."""
    from temporal_workflows._engine.registry import resolve
    from temporal_workflows.errors import NotSerializableError

    try:
        return resolve(node) if isinstance(node, str) else None
    except NotSerializableError:
        return None


def _value_node(value: Any) -> Any:
    from temporal_workflows._engine.serde import encode

    env = encode(value, what="an agent response's structured value")
    return env.data if env.type is None else {f"${env.type}": env.data}


def _value_of(node: Any) -> Any:
    from temporal_workflows._engine.serde import decode, node_envelope

    return decode(node_envelope(node))


def _schema_for(cls: type) -> Callable[..., core_schema.CoreSchema]:
    from agent_framework import AgentResponse

    from temporal_workflows._engine.registry import type_key

    keeps_value = issubclass(cls, AgentResponse)

    def schema(source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def validate(value: Any) -> Any:
            if isinstance(value, cls):
                return value
            if isinstance(value, dict):
                value = _unfold(copy.deepcopy(value)) if _has_folded(value) else value
                if keeps_value and VALUE_KEY in value:
                    value = {**value, VALUE_KEY: _value_of(value[VALUE_KEY])}
                if keeps_value and FORMAT_KEY in value:
                    value = {**value, FORMAT_KEY: _format_of(value[FORMAT_KEY])}
                return cls.from_dict(value)  # type: ignore[attr-defined]
            raise ValueError(f"expected a {cls.__name__} or its JSON object, not a {type(value).__name__}")

        def serialize(value: Any) -> Any:
            data = _fold(value.to_dict())
            if keeps_value:
                structured = _structured_value(value)
                if structured is not None:
                    data[VALUE_KEY] = _value_node(structured)
                elif isinstance(fmt := getattr(value, "_response_format", None), type):
                    data[FORMAT_KEY] = type_key(fmt)
            return data

        return core_schema.no_info_plain_validator_function(
            validate,
            json_schema_input_schema=core_schema.dict_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(serialize),
        )

    return schema


def install_maf_types() -> None:
    """Give Agent Framework's message classes a pydantic schema and register them (once per process)."""
    global _installed
    if _installed:
        return
    from agent_framework import (
        AgentResponse,
        AgentResponseUpdate,
        ChatResponse,
        ChatResponseUpdate,
        Content,
        Message,
    )

    classes: tuple[type, ...] = (Message, Content, AgentResponse, AgentResponseUpdate, ChatResponse, ChatResponseUpdate)
    for cls in classes:
        if "__get_pydantic_core_schema__" not in vars(cls):
            schema = classmethod(lambda c, source, handler: _schema_for(c)(source, handler))
            setattr(cls, "__get_pydantic_core_schema__", schema)  # noqa: B010 - a class we do not own
        register_value_type(cls)
    _installed = True
