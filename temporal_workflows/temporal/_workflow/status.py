"""The run's status as clients read it: ``status`` query, search attribute, current details, warnings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._events import WorkflowEvent, WorkflowWarningEvent
from temporal_workflows.temporal._protocol import QUOTE_LIMIT, CarriedStatus, quote

__all__ = ["MAX_WARNINGS", "QUOTE_LIMIT", "WARNING_LIMIT", "StatusBoard", "quote"]

MAX_WARNINGS = 20
"""Warnings about unusable outside input kept for the ``status`` query (newest last)."""

WARNING_LIMIT = 500
"""Characters a warning keeps: warnings are carried across continue-as-new and served by query."""


def _bounded(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


class StatusBoard:
    """Where the run is, for humans and for ``temporal workflow list``.

    The status search attribute is upserted only when the status changes, and
    only if the namespace has it (pinned with the topology).
    """

    def __init__(self, publish: Callable[[WorkflowEvent], None], carried: CarriedStatus | None) -> None:
        self._publish = publish
        self.status = RunStatus.STARTING
        self.error: str | None = None
        self.warnings: list[dict[str, Any]] = list(carried.warnings) if carried else []
        self.attribute: str | None = None
        self._upserted: RunStatus | None = None
        self.observe: Callable[[RunStatus], None] | None = None
        """Told every status the run takes (its telemetry counts the ones that end a run or segment)."""

    @property
    def closed(self) -> bool:
        return self.status.closed

    def set(self, status: RunStatus, details: str) -> None:
        self.status = status
        if self.observe is not None:
            self.observe(status)
        workflow.set_current_details(details)
        if status == self._upserted:
            return
        self._upserted = status
        if self.attribute:
            key = SearchAttributeKey.for_keyword(self.attribute)
            workflow.upsert_search_attributes([key.value_set(status.value)])

    def fail(self, error: str, *, upsert: bool) -> None:
        """The run failed outside the superstep driver (its input, an activity of its own): ``status`` says so.

        Args:
            upsert: Also set the search attribute (a command: callers gate it for recorded histories).
        """
        self.error = error
        if upsert:
            self.set(RunStatus.FAILED, f"failed: {_bounded(error, WARNING_LIMIT)}")
        else:
            self.status = RunStatus.FAILED
            if self.observe is not None:
                self.observe(RunStatus.FAILED)
            workflow.set_current_details(f"failed: {_bounded(error, WARNING_LIMIT)}")

    def warn(self, message: str, *, request_id: str | None = None, executor_id: str | None = None) -> None:
        """Outside input the run could not use: kept (bounded), streamed, and logged without values."""
        message = _bounded(message, WARNING_LIMIT) or ""
        request_id = _bounded(request_id, QUOTE_LIMIT)
        executor_id = _bounded(executor_id, QUOTE_LIMIT)
        warning = {"message": message, "request_id": request_id, "executor_id": executor_id}
        self.warnings = [*self.warnings, warning][-MAX_WARNINGS:]
        # The log carries no values (they may be secrets the codec encrypts elsewhere).
        workflow.logger.warning("outside input was not used; the status query and event stream say why")
        self._publish(WorkflowWarningEvent(message=message, request_id=request_id, executor_id=executor_id))

    def note(self, message: str) -> None:
        """Something about the run as hosted on Temporal (no event: the run in process has no such thing to
        say, and both graph hosts publish the same events): kept with the warnings, bounded, in ``status``."""
        warning = {"message": _bounded(message, WARNING_LIMIT) or "", "request_id": None, "executor_id": None}
        self.warnings = [*self.warnings, warning][-MAX_WARNINGS:]

    def unnote(self, message: str) -> None:
        """Take back a :meth:`note` that no longer holds (what the run waited for has come)."""
        kept = _bounded(message, WARNING_LIMIT)
        self.warnings = [w for w in self.warnings if w.get("message") != kept]

    def carry(self) -> CarriedStatus:
        return CarriedStatus(warnings=list(self.warnings))
