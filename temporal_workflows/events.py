"""The events a run streams and returns, the same in process and on Temporal.

    from temporal_workflows.events import RequestInfoEvent, WorkflowOutputEvent

``WorkflowEvent`` (the base, also importable from ``temporal_workflows`` as in
Agent Framework) carries ``type``; the classes here are its kinds, for
``isinstance`` checks. ``LiveEvent`` and its kinds are what a running step
streams before it commits (``docs/streaming.md``). The classes live in private
modules because their class paths are type keys in stored data; this module is
where users import them.
"""

from __future__ import annotations

from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowIntermediateEvent,
    WorkflowInterruptedEvent,
    WorkflowOutputEvent,
    WorkflowResetEvent,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
    WorkflowWarningEvent,
)
from temporal_workflows._live import (
    LiveCommittedEvent,
    LiveEvent,
    LiveOmittedEvent,
    StepProgressEvent,
    StepRetryEvent,
)

__all__ = [
    "ExecutorCompletedEvent",
    "ExecutorFailedEvent",
    "ExecutorInvokedEvent",
    "LiveCommittedEvent",
    "LiveEvent",
    "LiveOmittedEvent",
    "RequestInfoEvent",
    "StepProgressEvent",
    "StepRetryEvent",
    "SuperStepCompletedEvent",
    "SuperStepStartedEvent",
    "WorkflowEvent",
    "WorkflowFailedEvent",
    "WorkflowIntermediateEvent",
    "WorkflowInterruptedEvent",
    "WorkflowOutputEvent",
    "WorkflowResetEvent",
    "WorkflowStartedEvent",
    "WorkflowStatusEvent",
    "WorkflowWarningEvent",
]
