"""The worker command's log: one line per record, and no values in it.

Temporal's SDK logs every failed activity attempt with its exception, message included ("Completing
activity as failed" and the traceback), and a step's exception message may quote the values it failed on:
a prompt, a document, a secret the codec encrypts everywhere else (docs/security.md). The worker command
keeps those records, with the exception's type and the traceback's frames, but not its message; the step's
own line (``_activities/steps.py``: which step, attempt, worker, error type, whether Temporal retries it)
says the rest.
"""

from __future__ import annotations

import logging
import traceback

__all__ = ["ValueFreeFailures", "configure_logging"]


class ValueFreeFailures(logging.Filter):
    """Drops the message of the exception an activity's record carries (activities run user code), keeping
    its type and where it was raised."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "temporalio.activity" and record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            frames = "".join(traceback.format_tb(error.__traceback__)).rstrip()
            kind = getattr(error, "type", None) or type(error).__name__
            record.msg = f"{record.getMessage()}: {kind} (its message is left out of logs)\n{frames}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def configure_logging() -> None:
    """One line per record, this library's at INFO (a retried or failed step, a refused input), others' at
    WARNING, exceptions without their messages; a log a process supervisor or ``--processes`` prefixes."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in root.handlers:
        if not any(isinstance(f, ValueFreeFailures) for f in handler.filters):
            handler.addFilter(ValueFreeFailures())
    logging.getLogger("temporal_workflows").setLevel(logging.INFO)
