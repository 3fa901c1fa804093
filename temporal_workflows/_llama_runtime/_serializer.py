"""The serializer a ``TemporalRuntime`` workflow records with, and the one outside input is read with.

Under LlamaIndex's default runtime events and ``ctx.store`` values never leave the process. Here they
cross Temporal between the run (workflow code) and its steps (activities), so the runtime gives a
workflow that keeps LlamaIndex's default serializer a subclass of it (:class:`DeclaredTypesSerializer`)
that keeps values as they were:

* a workflow's declared events and state type resolve by the names records carry, first (a class
  defined inside a function cannot be imported by name);
* a value plain JSON would change (a tuple, set, bytes, a dict with non-str keys, ``datetime``,
  ``date``, ``time``, ``timedelta``, ``UUID``, ``Decimal``, ``Path``, ``complex``, a NaN or infinite
  float) is recorded in the engine's tagged form (``_wire.tagged_form``), and an event whose JSON
  dump would not give it back carries its exact field values (``_wire.exact_form``).

Input from outside a run (a ``llama_tick`` or ``send_event`` signal, the ``submit_event`` update, a
start event, a snapshot to resume) is read with :meth:`DeclaredTypesSerializer.closed`: only classes
the workflow declares, a waiter awaits, or LlamaIndex's own framework types resolve; any other name is
refused, and nothing is ever imported because a sender named it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from workflows.context.serializers import JsonSerializer
from workflows.events import Event

from temporal_workflows._llama_runtime import _registry, _wire

__all__ = ["DeclaredTypesSerializer"]


class DeclaredTypesSerializer(JsonSerializer):
    """LlamaIndex's default serializer, that also finds the workflow's own event and state classes, and keeps
    the Python types of values plain JSON would change (module docstring)."""

    reads_exact_form = True
    """Its records may carry exact field values (``_wire.EXACT_KEY``), and it reads them."""

    def __init__(self, types: Iterable[type[Any]], *, closed: bool = False) -> None:
        types = [t for t in types if isinstance(t, type)]
        # closed: LlamaIndex's own allow-list (registered classes and its framework types resolve; any other
        # name raises, and nothing is imported).
        super().__init__(allowed_types=types if closed else None)
        self._types = types
        self._declared: dict[str, type[Any]] = {}
        for t in types:
            self._declared[f"{t.__module__}.{t.__name__}"] = t
            self._declared[f"{t.__module__}.{t.__qualname__}"] = t
        self.is_closed = closed

    def closed(self, extra: Iterable[type[Any]] = ()) -> DeclaredTypesSerializer:
        """This serializer for outside input: it resolves only its declared classes and ``extra``."""
        return DeclaredTypesSerializer([*self._types, *extra], closed=True)

    def resolve_class(self, qualified_name: str) -> type[Any]:
        declared = self._declared.get(qualified_name)
        if declared is not None:
            return declared
        if not self.is_closed:
            seen = _registry.seen_type(qualified_name)
            if seen is not None:
                return seen
        return super().resolve_class(qualified_name)

    def serialize_value(self, value: Any) -> Any:
        tagged = _wire.tagged_form(self, value)
        if tagged is not None:
            return tagged
        out = _wire.event_record(value)
        if out is None:
            out = super().serialize_value(value)
        if isinstance(value, BaseModel) and isinstance(out, dict) and out.get("__is_pydantic"):
            if isinstance(value, Event):
                exceptions = _wire.exception_fields(value)
                if exceptions is not None:
                    out[_wire.EXCEPTIONS_KEY] = exceptions
            exact = _wire.exact_form(value, out["value"], self)
            if exact is not None:
                out[_wire.EXACT_KEY] = exact
            else:
                _wire.add_exact_forms(value, out["value"], self)  # a tick carrying an event
        return out

    def deserialize_value(self, data: Any) -> Any:
        if isinstance(data, dict) and _wire.EXCEPTIONS_KEY in data:
            rest = {k: v for k, v in data.items() if k != _wire.EXCEPTIONS_KEY}
            return _wire.restore_exception_fields(self, self.deserialize_value(rest), data[_wire.EXCEPTIONS_KEY])
        if isinstance(data, dict) and _wire.TAGGED_KEY in data:
            found, value = _wire.from_tagged_form(self, data)
            if found:
                return value
        if isinstance(data, dict) and _wire.EXACT_KEY in data:
            model = _wire.from_exact_form(self, data)
            if model is not None:
                return model
        return super().deserialize_value(data)
