"""A built graph: the executors and edge groups (user code) beside their topology (pure data).

Only step hosts (the in-process runner, Temporal activities) touch a
:class:`Graph`; the engine and the Temporal workflow see only its
:class:`Topology`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

from temporal_workflows._engine.machine import PendingRequest, RoutedMessage, Topology
from temporal_workflows._engine.serde import Envelope, decode, encode, validate_as
from temporal_workflows._errors import InvalidResponseError, UndeliverableMessageError, WorkflowError, describe
from temporal_workflows._graph.edges import EdgeGroup
from temporal_workflows._graph.executor import Executor
from temporal_workflows._graph.typecheck import flatten
from temporal_workflows._requests import RequestTimedOut
from temporal_workflows._telemetry import Attr, tracer

__all__ = ["Graph"]

_GROUP_TYPES = {
    "single": "SingleEdgeGroup",
    "fan_out": "FanOutEdgeGroup",
    "fan_in": "FanInEdgeGroup",
    "switch_case": "SwitchCaseEdgeGroup",
    "multi_selection": "FanOutEdgeGroup",
}
"""Agent Framework's class for each kind of edge group (its ``edge_group.type``)."""


def _edge_group_attributes(
    group: EdgeGroup,
    source_id: str,
    target_id: str | None,
    delivered: list[RoutedMessage],
    seen: int,
    considered: list[str],
) -> dict[str, Any]:
    """An ``edge_group.process`` span's attributes, with Agent Framework's delivery statuses."""
    if delivered:
        status = "buffered" if group.kind == "fan_in" else "delivered"
    elif target_id is not None and target_id not in group.targets:
        status = "dropped target mismatch"
    elif len(considered) > seen:
        status = "dropped type mismatch"
    else:
        status = "dropped condition evaluated to false"
    attributes: dict[str, Any] = {
        Attr.EDGE_GROUP_TYPE: _GROUP_TYPES[group.kind],
        Attr.EDGE_GROUP_ID: group.id,
        Attr.MESSAGE_SOURCE_ID: source_id,
        Attr.EDGE_GROUP_DELIVERED: bool(delivered),
        Attr.EDGE_GROUP_DELIVERY_STATUS: status,
    }
    targets = [m.target_id for m in delivered] if delivered else ([target_id] if target_id else [])
    if len(targets) == 1:
        attributes[Attr.MESSAGE_TARGET_ID] = targets[0]
    return attributes


class Graph:
    """Executors, edges and reducers of one workflow definition."""

    def __init__(
        self,
        *,
        topology: Topology,
        executors: dict[str, Executor],
        groups: list[EdgeGroup],
        reducer_funcs: dict[str, Callable[[Any, list[Any]], Any]],
        description: str | None = None,
        name_generated: bool = False,
    ) -> None:
        self.topology = topology
        self.name_generated = name_generated
        """The name was made up by the builder (none given): it differs in every process."""
        self.executors = executors
        self.concurrent = frozenset(eid for eid, ex in executors.items() if ex.options.concurrent)
        """Executors whose messages from one sender run side by side (``ExecutorOptions.concurrent``)."""
        self.groups = groups
        self.reducer_funcs = reducer_funcs
        self.description = description
        self.outgoing: dict[str, list[EdgeGroup]] = {}
        for g in groups:
            for s in g.sources:
                self.outgoing.setdefault(s, []).append(g)

    @property
    def name(self) -> str | None:
        return self.topology.name

    def route(self, source_id: str, value: Any, envelope: Envelope, target_id: str | None) -> list[RoutedMessage]:
        """Where a message sent by ``source_id`` goes.

        Conditions and selection functions pick candidates; each candidate
        receives the message if one of its handlers accepts the type. A
        message that candidates exist for but none accepts is an error, as is
        a message from an executor with no outgoing edges; a message whose
        conditions all evaluate false is routed nowhere, by design.
        """
        groups = self.outgoing.get(source_id)
        if not groups:
            tname = describe(value)
            raise UndeliverableMessageError(
                f"executor {source_id!r} sent a {tname} but has no outgoing edges",
                source_id=source_id,
                type_name=tname,
                targets=[],
            )
        if target_id is not None and not any(target_id in g.targets for g in groups):
            tname = describe(value)
            connected = sorted({t for g in groups for t in g.targets})
            raise UndeliverableMessageError(
                f"executor {source_id!r} sent a {tname} to {target_id!r}, which it has no edge to; "
                f"its targets are {connected}",
                source_id=source_id,
                type_name=tname,
                targets=connected,
            )
        out: list[RoutedMessage] = []
        considered: list[str] = []
        spans = tracer()
        for g in groups:
            # One span per edge group the message meets, as Agent Framework's edge runners make them.
            with spans.start_as_current_span(f"{Attr.EDGE_GROUP_PROCESS_SPAN} {_GROUP_TYPES[g.kind]}") as span:
                before, seen = len(out), len(considered)
                for t in g.candidates(value):
                    if target_id is not None and t != target_id:
                        continue
                    considered.append(t)
                    target = self.executors[t]
                    if g.kind == "fan_in":
                        if target.accepts_items(value):
                            out.append(RoutedMessage.one(t, envelope, source_id, g.id))
                    elif (envelope.type is None and target.coerce(value) is not None) or target.find_handler(
                        value
                    ) is not None:
                        out.append(RoutedMessage.one(t, envelope, source_id))
                if span.is_recording():
                    span.set_attributes(_edge_group_attributes(g, source_id, target_id, out[before:], seen, considered))
        if considered and not out:
            tname = describe(value)
            raise UndeliverableMessageError(
                f"executor {source_id!r} sent a {tname}, but none of its targets {considered} "
                f"has a handler that accepts {tname}",
                source_id=source_id,
                type_name=tname,
                targets=considered,
            )
        return out

    def reduce(self, key: str, committed: Envelope | None, writes: list[Envelope]) -> Envelope:
        """Run a callable reducer over decoded values (a step host's job, never the workflow's)."""
        fn = self.reducer_funcs.get(key)
        if fn is None:
            raise WorkflowError(f"state key {key!r} has no callable reducer")
        current = decode(committed) if committed is not None else None
        return encode(fn(current, [decode(w) for w in writes]), what=f"reducer result for state key {key!r}")

    def validate_response(self, request: PendingRequest, value: Any) -> Envelope:
        """``value`` typed as the request's response handler expects it.

        Raises:
            InvalidResponseError: It does not validate, naming request and executor.
        """
        rid = request.request_id
        ex = self.executors.get(request.executor_id)
        spec = ex.find_response_handler(decode(request.data), request.response_type) if ex else None
        if spec is None:
            raise InvalidResponseError(rid, request.executor_id, "the executor has no matching @response_handler")
        # RequestTimedOut is the run's own answer at the deadline, never an outside one: validating against the
        # rest of the annotation makes a wrong answer's error list the response type's fields, not its fields.
        answerable = [t for t in flatten(spec.response_type) if t is not RequestTimedOut]
        expected = spec.response_type
        if answerable and len(answerable) < len(flatten(spec.response_type)):
            expected = answerable[0] if len(answerable) == 1 else Union[tuple(answerable)]  # noqa: UP007
        posing = InvalidResponseError(
            rid,
            request.executor_id,
            "RequestTimedOut is what the run delivers when the deadline passes, not a response",
        )
        try:
            typed = validate_as(expected, value)
        except (ValueError, TypeError) as e:
            if expected is not spec.response_type and _validates(RequestTimedOut, value):
                raise posing from None
            raise InvalidResponseError(
                rid, request.executor_id, f"expected {request.response_type}, got {describe(value)}: {e}"
            ) from None
        if isinstance(typed, RequestTimedOut):
            raise posing
        return encode(typed, what=f"response to request {rid!r}")

    def validate_message(self, executor_id: str, message: Envelope) -> Envelope:
        """A message from outside, typed as one of ``executor_id``'s handlers expects it.

        Raises:
            UndeliverableMessageError: No such executor, or no handler takes it.
        """
        ex = self.executors.get(executor_id)
        if ex is None:
            raise UndeliverableMessageError.no_executor(
                executor_id, self.name, self.executors, type_name=message.type or "json"
            )
        value = decode(message)
        match = ex.coerce(value) if message.type is None else None
        if match is None and ex.find_handler(value) is None:
            raise UndeliverableMessageError(
                f"executor {executor_id!r} has no handler for {describe(value)}; it handles "
                f"{[str(getattr(t, '__name__', t)) for t in ex.input_types]}",
                source_id="<input>",
                type_name=describe(value),
                targets=[executor_id],
            )
        typed = match[1] if match is not None else value
        return encode(typed, what=f"message for executor {executor_id!r}")


def _validates(tp: Any, value: Any) -> bool:
    try:
        validate_as(tp, value)
    except (ValueError, TypeError):
        return False
    return True
