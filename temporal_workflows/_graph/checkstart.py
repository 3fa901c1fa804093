"""Check a start message against the graph's start executor before a run is started.

A client that holds the graph (``start_run(client, workflow, message)``, the
CLI's ``run module:attr``) can tell at once that a message fits no handler of
the start executor, naming the fields that failed validation (and the ones the
type does not declare, e.g. a misspelled ``titel``). Otherwise the run would
start, and fail on the worker with "start executor 'plan' has no handler for
dict", which names neither the field nor the type.

The rule is the one the hosts apply when a run starts (a typed value must be
accepted as it is; plain JSON is validated strictly against each handler's
input type), so what passes here starts on either host.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from temporal_workflows._engine.serde import encode, validate_as
from temporal_workflows._errors import InvalidRunInputError, describe
from temporal_workflows._graph.typecheck import type_name

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["check_start_message"]


def _declared_fields(tp: Any) -> set[str] | None:
    """Field names (and aliases) a model or dataclass accepts; ``None`` for other types."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        names = set(tp.model_fields)
        names.update(f.alias for f in tp.model_fields.values() if f.alias)
        names.update(f.validation_alias for f in tp.model_fields.values() if isinstance(f.validation_alias, str))
        return names
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return {f.name for f in dataclasses.fields(tp)}
    return None


def _why_not(tp: Any, message: Any) -> str:
    try:
        validate_as(tp, message, strict=True)
    except (ValueError, TypeError) as e:
        detail = str(e)
    else:  # validates, yet was not taken: the hosts would not take it either
        return f"as {type_name(tp)}: not accepted"
    fields = _declared_fields(tp)
    if fields is not None and isinstance(message, dict):
        unknown = sorted(str(k) for k in message if k not in fields)
        if unknown:
            detail += f"; fields {type_name(tp)} does not declare: {', '.join(repr(k) for k in unknown)}"
    return detail


def check_start_message(workflow: Workflow, message: Any) -> None:
    """Raise if no handler of ``workflow``'s start executor takes ``message``.

    Raises:
        InvalidRunInputError: Naming the start executor, each handler's input
            type and why it refused the message (pydantic's field errors,
            without the values, and fields the type does not declare).
    """
    graph = workflow.graph
    start = graph.executors[graph.topology.start_executor_id]
    if not start.handlers:
        return
    typed = encode(message, what="start message").type is not None
    if (start.find_handler(message) if typed else start.coerce(message)) is not None:
        return
    reasons = [f"it is a {describe(message)}"] if typed else [_why_not(h.input_type, message) for h in start.handlers]
    accepts = ", ".join(type_name(t) for t in start.input_types)
    raise InvalidRunInputError(
        f"the start message fits no handler of start executor {start.id!r} of graph {workflow.name!r} "
        f"(it takes {accepts}): {' | '.join(reasons)}"
    )
