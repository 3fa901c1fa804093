"""``WorkflowHandler``: what ``Workflow.run()`` returns in process, as in LlamaIndex.

Await it for the result, iterate ``stream_events()`` for what the steps
publish (ending with the ``StopEvent``), send events in with
``handler.ctx.send_event(...)``, stop it with ``await handler.cancel_run()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import warnings
from collections.abc import AsyncGenerator, Generator
from typing import TYPE_CHECKING, Any

from temporal_workflows.llama.errors import WorkflowCancelledByUser, WorkflowRuntimeError
from temporal_workflows.llama.events import Event, InternalDispatchEvent, StopEvent

if TYPE_CHECKING:
    from temporal_workflows.llama._local import LlamaLocalRun
    from temporal_workflows.llama.context import Context
    from temporal_workflows.llama.workflow import Workflow

__all__ = ["WorkflowHandler"]


class WorkflowHandler:
    """A running workflow: awaitable (its result), streamable (its events), and cancellable."""

    def __init__(self, workflow: Workflow, run: LlamaLocalRun, ctx: Context[Any]) -> None:
        self._workflow = workflow
        self._run = run
        self._ctx = ctx
        self.run_id = run.run_id
        self._all_events_consumed = False

    @property
    def ctx(self) -> Context[Any]:
        """The run's context: ``send_event``, ``store``, ``to_dict``."""
        return self._ctx

    async def _result(self) -> Any:
        stop = await asyncio.shield(self._run.result)
        return stop.result if type(stop) is StopEvent else stop

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._result().__await__()

    async def stop_event_result(self) -> StopEvent:
        """The run's ``StopEvent`` itself (whatever its class)."""
        return await asyncio.shield(self._run.result)

    def get_stop_event(self) -> StopEvent | None:
        return self._run.stop_event

    def is_done(self) -> bool:
        return self._run.result.done()

    async def stream_events(self, expose_internal: bool = False) -> AsyncGenerator[Event, None]:
        """The events the run publishes, as they happen, ending with its ``StopEvent`` (once per handler).

        Args:
            expose_internal: Also yield internal events (``WorkflowIdleEvent``, ``UnhandledEvent``).

        Raises:
            WorkflowRuntimeError: the events were consumed already.
        """
        if self._all_events_consumed:
            raise WorkflowRuntimeError("All the streamed events have already been consumed.")
        async for ev in self._run.stream():
            if isinstance(ev, InternalDispatchEvent) and not expose_internal:
                continue
            yield ev
            if isinstance(ev, StopEvent):
                self._all_events_consumed = True
                break

    async def cancel_run(self, *, timeout: float = 5.0) -> None:
        """Cancel the run; awaiting the handler then raises ``WorkflowCancelledByUser``."""
        await asyncio.sleep(0)  # as in LlamaIndex, work already queued (a just-started run) gets going first
        self._run.cancel()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(self._run.task), timeout)

    async def send_event(self, event: Event, step: str | None = None) -> None:
        """Send an event into the run (same as ``handler.ctx.send_event``)."""
        self._ctx.send_event(event, step)

    def cancel(self) -> None:
        """Deprecated: ``await handler.cancel_run()``."""
        _deprecated("WorkflowHandler.cancel() is deprecated; use await handler.cancel_run()")
        self._run.cancel()

    def done(self) -> bool:
        _deprecated("WorkflowHandler.done() is deprecated and will be removed in a future release")
        return self.is_done()

    def exception(self) -> BaseException | None:
        _deprecated("WorkflowHandler.exception() is deprecated and will be removed in a future release")
        return self._run.error

    def cancelled(self) -> bool:
        _deprecated("WorkflowHandler.cancelled() is deprecated and will be removed in a future release")
        return isinstance(self._run.error, WorkflowCancelledByUser)

    def __str__(self) -> str:
        return (
            f"WorkflowHandler(workflow={self._workflow.workflow_name}, run_id={self.run_id}, "
            f"result={self._run.stop_event})"
        )


@functools.lru_cache(maxsize=8)
def _deprecated(message: str) -> None:
    warnings.warn(message, DeprecationWarning, stacklevel=3)
