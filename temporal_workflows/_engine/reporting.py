"""The run's events in Agent Framework's vocabulary, as the engine's driver makes them.

Every host shows the same events because they are made here, once: a pending
request's ``request_info`` event and its listed form, a sub-workflow's bubbled
``intermediate`` output.
"""

from __future__ import annotations

from temporal_workflows._engine.machine import PendingRequest
from temporal_workflows._events import RequestInfoEvent

__all__ = [
    "request_event",
]


def request_event(req: PendingRequest) -> RequestInfoEvent:
    """The event that announces a pending request (its ``data`` as JSON)."""
    return RequestInfoEvent(
        request_id=req.request_id,
        source_executor_id=req.executor_id,
        data=req.data.data,
        data_type=req.data.type,
        response_type=req.response_type,
        response_schema=req.response_schema,
        timeout=req.timeout,
    )
