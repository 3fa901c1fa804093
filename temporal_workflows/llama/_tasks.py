"""One step task of a LlamaIndex run: its state overlay, shared by its invocations, and its result."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from temporal_workflows._engine.machine import (
    EXECUTOR_STATE_PREFIX,
    StateWrite,
    shared_part,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.llama._routing import Wait, waits_of_records
from temporal_workflows.llama._run_objects import RunObjects, decode_value, encode_value
from temporal_workflows.llama._runtime import (
    waiter_records,
)

if TYPE_CHECKING:
    from temporal_workflows._graph.context import WorkflowContext
    from temporal_workflows.llama._compile import Compiled, StepInfo

__all__ = ["TaskRun"]


class TaskRun:
    """One step task: its state overlay (shared by its invocations) and its result.

    Args:
        compiled: The workflow.
        info: The step.
        wctx: The engine's context of the task (its ``StepResult`` is what the task returns).
        state: Committed state at the boundary the task started from.
        objects: The in-process run's Python objects, or ``None`` (on Temporal).
    """

    def __init__(
        self,
        compiled: Compiled,
        info: StepInfo,
        wctx: WorkflowContext[Any, Any],
        state: Mapping[str, Envelope],
        objects: RunObjects | None,
    ) -> None:
        self.compiled = compiled
        self.info = info
        self.wctx = wctx
        self.result = wctx._result  # the engine's StepResult this task fills (run_step returns it)
        self.committed = state
        self.objects = objects
        self.overlay: dict[str, Envelope | None] = {}
        self.lock = asyncio.Lock()
        self.private = f"{EXECUTOR_STATE_PREFIX}{info.name}/"
        self.stream_tasks: list[asyncio.Task[None]] = []
        self.written: list[dict[str, Any]] = []
        """Every stream write of this task (its ``{"type", "data"}``), in order (published live if the task fails:
        ``run_task``)."""
        self.loop = asyncio.get_running_loop()
        self._waits: list[Wait] | None = None

    # -- state ---------------------------------------------------------------------------------------------

    def read(self, key: str) -> Envelope | None:
        if key in self.overlay:
            return self.overlay[key]
        return self.committed.get(key)

    def write(self, key: str, value: Any) -> Envelope:
        env = encode_value(value, self.objects, f"state key {key!r} written by step {self.info.name!r}")
        self.overlay[key] = env
        return env

    def write_env(self, key: str, env: Envelope | None) -> None:
        self.overlay[key] = env

    def state_keys(self) -> list[str]:
        keys = list(shared_part(self.committed))
        for k, v in shared_part(self.overlay).items():
            if v is None:
                if k in keys:
                    keys.remove(k)
            elif k not in keys:
                keys.append(k)
        return keys

    def value(self, env: Envelope) -> Any:
        return decode_value(env, self.objects)

    def waits(self) -> list[Wait]:
        """The ``wait_for_event`` calls committed at the boundary this task started from."""
        waits = self._waits
        if waits is None:
            waits = self._waits = waits_of_records(waiter_records(self.committed))
        return waits

    # -- output ----------------------------------------------------------------------------------------------

    def finish(self) -> None:
        """Write the state overlay into the task's result."""
        for key, env in self.overlay.items():
            self.result.writes.append(StateWrite(key, env))
