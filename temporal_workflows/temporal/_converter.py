"""The pydantic payload converter, with one type-adapter cache per process.

``temporalio.contrib.pydantic``'s converter caches a ``TypeAdapter`` per type
hint, but the cache lives on the converter instance, and a worker creates a
payload converter per workflow run. Every run therefore rebuilt the pydantic
schemas of the types it decodes (``RunInput``, ``Pinned``, ...), which cost
more worker CPU than the run's own steps on short graphs. Here the cache is
module level, so it is built once per process: the types it holds come from
modules passed through the sandbox, so they are the same objects in every run.

Payloads are byte for byte those of ``pydantic_data_converter``: this is a
cache, not a format. Failures are Temporal's too, once a looping or very deep
cause chain is cut (``_failures.CycleSafeFailureConverter``).
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)

from temporal_workflows._engine.serde import validation_message
from temporal_workflows.temporal._failures import CycleSafeFailureConverter

__all__ = ["PayloadConverter", "SharedAdapterJSONConverter", "json_data_converter"]

_ENCODING = "json/plain"


@functools.lru_cache(maxsize=1024)
def _adapter(type_hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_hint)


class SharedAdapterJSONConverter(EncodingPayloadConverter):
    """``json/plain`` through pydantic, with the process-wide adapter cache."""

    @property
    def encoding(self) -> str:
        return _ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(metadata={"encoding": _ENCODING.encode()}, data=to_json(value))

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        hint: Any = type_hint if type_hint is not None else Any
        try:
            adapter = _adapter(hint)
        except TypeError:
            # An unhashable hint (e.g. a parametrised type holding a list) cannot be cached.
            adapter = TypeAdapter(hint)
        try:
            return adapter.validate_json(payload.data)
        except ValidationError as e:
            # pydantic's own text quotes the rejected input; this one names fields and errors only.
            raise ValueError(validation_message(e)) from None


class PayloadConverter(CompositePayloadConverter):
    """Temporal's default converters with pydantic JSON (shared adapters) in place of ``json/plain``."""

    def __init__(self) -> None:
        json_converter = SharedAdapterJSONConverter()
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


json_data_converter = DataConverter(
    payload_converter_class=PayloadConverter, failure_converter_class=CycleSafeFailureConverter
)
"""Drop-in for ``temporalio.contrib.pydantic.pydantic_data_converter``."""
