"""The messages a sub-workflow and its parent exchange (Agent Framework's names).

A :class:`~temporal_workflows.WorkflowExecutor` runs a child graph as one
executor of its parent. When the child asks for input (``ctx.request_info``),
the executor either sends its parent's graph a :class:`SubWorkflowRequestMessage`
(an executor of the parent with a handler for it intercepts the request and
answers with :meth:`SubWorkflowRequestMessage.create_response`), or, with
``propagate_request=True``, makes the request its own, so it reaches whoever
runs the parent.

These classes travel as messages, and their class paths are type keys in
stored data (history, checkpoints), so they live here, at the top of the
package, with the events and errors, and never move.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from temporal_workflows._engine.machine import PendingRequest
from temporal_workflows._engine.serde import Envelope, decode, encode, register_type
from temporal_workflows._events import RequestInfoEvent

__all__ = ["SubWorkflowReport", "SubWorkflowRequestMessage", "SubWorkflowResponseMessage"]

_BUILTINS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def _mismatch(data: Any, response_type: str) -> bool:
    """Whether ``data`` is plainly not a ``response_type`` (named as ``type_name`` names it).

    Only simple names are judged (a builtin, or a class by its qualified
    name); unions and generics are left to the sub-workflow, which validates
    every response against its request's real type when it receives it.
    """
    if not _NAME.fullmatch(response_type):
        return False
    builtin = _BUILTINS.get(response_type)
    if builtin is not None:
        if isinstance(data, bool) and bool not in builtin:
            return True
        return not isinstance(data, builtin)
    if response_type in ("Any", "object"):
        return False
    return not any(getattr(c, "__qualname__", None) == response_type for c in type(data).__mro__)


def _typed(data: Any, data_type: str | None) -> Any:
    """``data`` as its type again after a trip through JSON (a message is a copy, never the sender's object)."""
    if data_type is not None and isinstance(data, (dict, list)):
        return decode(Envelope(data_type, data))
    return data


def _type_of(data: Any) -> str | None:
    return encode(data, what="sub-workflow request or response data").type


@dataclass
class SubWorkflowResponseMessage:
    """An answer to a sub-workflow's request, sent to the ``WorkflowExecutor`` that runs it.

    Made by :meth:`SubWorkflowRequestMessage.create_response` (or directly,
    from a request's ``source_event``); send it back to the request's
    ``executor_id``. The sub-workflow validates ``data`` against its request's
    response type; a response to a request that is no longer pending (answered
    already) is ignored with a warning, as in Agent Framework.

    Attributes:
        data: The response.
        source_event: The sub-workflow's request, as its ``RequestInfoEvent``.
        data_type: Type key of ``data`` (filled in; it restores ``data``'s type on arrival).
    """

    data: Any
    source_event: RequestInfoEvent
    data_type: str | None = None

    def __post_init__(self) -> None:
        if self.data_type is None:
            self.data_type = _type_of(self.data)
        self.data = _typed(self.data, self.data_type)


@dataclass
class SubWorkflowRequestMessage:
    """A sub-workflow's request, as a message its ``WorkflowExecutor`` sends into the parent graph.

    An executor of the parent with a ``@handler`` for this type intercepts
    it: it answers at once (``ctx.send_message(request.create_response(value),
    target_id=request.executor_id)``), or asks the outside world itself with
    ``ctx.request_info`` and answers once it has the answer.

    Attributes:
        source_event: The sub-workflow's request (``data``, ``request_id``,
            ``response_type``, the child's ``source_executor_id``).
        executor_id: The ``WorkflowExecutor`` (in the parent) running that sub-workflow.
    """

    source_event: RequestInfoEvent
    executor_id: str

    def __post_init__(self) -> None:
        ev = self.source_event
        typed = _typed(ev.data, ev.data_type)
        if typed is not ev.data:
            self.source_event = ev.model_copy(update={"data": typed})

    def create_response(self, data: Any) -> SubWorkflowResponseMessage:
        """Wrap ``data`` as the answer to this request.

        Raises:
            TypeError: ``data`` is plainly not of the request's response type
                (its full validation happens in the sub-workflow).
        """
        expected = self.source_event.response_type
        if _mismatch(data, expected):
            raise TypeError(
                f"response data of type {type(data).__qualname__} does not match the expected type {expected} "
                f"for request {self.source_event.request_id!r}"
            )
        return SubWorkflowResponseMessage(data=data, source_event=self.source_event)


@dataclass
class SubWorkflowReport:
    """What one activation of a sub-workflow produced, handed to its ``WorkflowExecutor``'s step (internal).

    The host runs the sub-workflow (in process, or as a Temporal child
    workflow) and then the executor's step with this report; the step sends
    the outputs on along the executor's edges (or yields them) and turns the
    requests into ``SubWorkflowRequestMessage``s or requests of its own. The
    step is user code (edge conditions), so on Temporal it is an activity,
    while the child's run is the child workflow.
    """

    outputs: list[Envelope] = field(default_factory=list)
    requests: list[PendingRequest] = field(default_factory=list)


for _tp in (SubWorkflowRequestMessage, SubWorkflowResponseMessage, SubWorkflowReport):
    register_type(_tp)
