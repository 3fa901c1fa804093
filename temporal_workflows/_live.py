"""Live events: what a step publishes while it is still running.

An event a step hands to ``ctx.add_event`` normally joins the run's stream
when the step completes, with the step's other results (it is *committed*).
An event whose class derives from :class:`LiveEvent` is published at once
instead: in process it reaches ``run(stream=True)`` while the step runs; on
Temporal the step activity sends it to the run's event stream
(``temporalio.contrib.workflow_streams``, batched) and ``RunHandle.events()``
yields it while the step is still running. Agent token updates, progress
reports and partial results are live events.

A live item is tagged with the step it belongs to (``executor_id``,
``superstep``, ``index``), the ``attempt`` of the step that published it, and its
sequence number ``seq`` within that attempt. A step can fail part-way and be
retried (on Temporal), so live items are *provisional*:

* every retried attempt first publishes a :class:`StepRetryEvent`: a reader
  then discards what earlier attempts of that step published;
* a step that completes commits a :class:`LiveCommittedEvent` with its
  result (before its own custom events and ``ExecutorCompletedEvent``):
  the attempt that completed and how many items it published.

``RunHandle.events(view="committed")`` replays only the items of attempts
that completed, each at its step's ``LiveCommittedEvent``, also long after the
run ended; the default ``view="live"`` yields items as they arrive and drops
those of attempts that a retry superseded. The events here are the library's
own; their class paths are type keys in stored data, so this module stays put.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from temporal_workflows._engine.serde import register_type
from temporal_workflows._events import WorkflowEvent

__all__ = [
    "MAX_LIVE_EVENT_BYTES",
    "LiveCommittedEvent",
    "LiveEvent",
    "LiveOmittedEvent",
    "StepProgressEvent",
    "StepRetryEvent",
]

MAX_LIVE_EVENT_BYTES = 1024 * 1024
"""A live event larger than this as JSON is not streamed: a :class:`LiveOmittedEvent` stands in for it.

On Temporal each batch of live events is a signal recorded in the run's
history, and a signal over Temporal's payload limit (2 MiB) is refused; the
limit keeps one event well inside one signal. The in-process and Temporal hosts apply it, so a
reader sees the same events in process and on Temporal.
"""


class LiveEvent(WorkflowEvent):
    """Base of events a step publishes while it runs (subclass it for your own live events).

    The four tags are stamped by the step's context when the event is
    published; a handler leaves them at their defaults.

    Attributes:
        executor_id: The step's executor.
        superstep: The step's superstep.
        index: The step's position in its superstep (an executor can run
            several steps in one superstep, one per message).
        attempt: The attempt of the step that published it (always 1 in process).
        seq: Its number among the live items of that attempt, from 1. On
            Temporal, consecutive events that :meth:`merge` combines while
            they wait for one batch arrive as one event carrying the number
            of the last one, so numbers may skip but never go back.
    """

    live: ClassVar[bool] = True
    """Published while its step runs: never one of the run's outputs, whatever its ``type``."""

    type: str = "live"
    executor_id: str = ""
    superstep: int = 0
    index: int = 0
    attempt: int = 1
    seq: int = 0

    def merge(self, later: LiveEvent) -> LiveEvent | None:
        """One event that stands for this one followed by ``later``, or ``None`` if they stay apart.

        Publishing cost on Temporal grows with batches, not with events, only
        if events that wait for the same batch can be combined: text deltas
        concatenate, for example. The default combines nothing.
        """
        return None


class StepProgressEvent(LiveEvent):
    """A running step's progress, for people watching: a line of text, a fraction done, any JSON."""

    type: Literal["progress"] = "progress"
    message: str = ""
    progress: float | None = None
    data: Any = None


class StepRetryEvent(LiveEvent):
    """Attempt ``attempt`` of the step started because an earlier attempt failed.

    Live items of that step with a lower ``attempt`` are void: the step is
    running again from its start. It carries ``seq`` 0 and is not counted in
    :class:`LiveCommittedEvent.items`.
    """

    type: Literal["step_retry"] = "step_retry"


class LiveOmittedEvent(LiveEvent):
    """Stands for a live event that was too large to stream (over :data:`MAX_LIVE_EVENT_BYTES` as JSON).

    It carries the omitted event's tags (its ``seq`` included, so a reader
    counting items sees no gap) and says what was left out; the step itself
    is unaffected (its committed result is whole). Publish a reference (a
    URL, a storage key) or a preview instead of a large value.

    Attributes:
        event_type: The omitted event's ``type``.
        event_class: Its class, as ``module:QualName``.
        size: Its size as JSON, in bytes.
        limit: The limit it exceeded.
    """

    type: Literal["live_omitted"] = "live_omitted"
    event_type: str = ""
    event_class: str = ""
    size: int = 0
    limit: int = MAX_LIVE_EVENT_BYTES

    @property
    def note(self) -> str:
        """What a reader shows in place of the event."""
        return (
            f"live event {self.event_type!r} ({self.event_class}) of executor {self.executor_id!r} was "
            f"{self.size:,} bytes as JSON, over the {self.limit:,}-byte limit for a live event: not streamed"
        )


class LiveCommittedEvent(WorkflowEvent):
    """Committed with a step's result: which attempt completed and how many live items it published.

    A reader that kept the step's live items can check it saw them all
    (``seq`` up to ``items``) and drop those of other attempts.
    """

    type: Literal["live_committed"] = "live_committed"
    executor_id: str
    superstep: int
    index: int = 0
    attempt: int
    items: int


for _cls in (LiveEvent, StepProgressEvent, StepRetryEvent, LiveOmittedEvent, LiveCommittedEvent):
    # A client that only reads a run's stream decodes them without having encoded one.
    register_type(_cls)
