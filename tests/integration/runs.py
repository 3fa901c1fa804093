"""Helpers for tests that check how a run settles: closed, continued as new, or stuck on a failing task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["outcome", "terminate_if_running", "update_error"]


async def outcome(handle: WorkflowHandle[Any, Any], timeout: float = 30) -> HistoryEvent:
    """The first event that settles the run: it closed, or a workflow task failed (it would retry for ever).

    Waits on history itself, so a run that is stuck is seen as stuck at once,
    not after a timeout.
    """
    settling = {
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }

    async def scan() -> HistoryEvent:
        async for ev in handle.fetch_history_events(wait_new_event=True):
            if ev.event_type in settling:
                return ev
        raise AssertionError("history ended without the run closing")

    return await asyncio.wait_for(scan(), timeout)


async def terminate_if_running(handle: WorkflowHandle[Any, Any]) -> None:
    """Stop a run a failing test left behind (a stuck run retries its workflow task for ever)."""
    try:
        await handle.terminate("test cleanup")
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise


def update_error(info: pytest.ExceptionInfo[WorkflowUpdateFailedError]) -> ApplicationError:
    cause = info.value.cause
    assert isinstance(cause, ApplicationError), cause
    return cause
