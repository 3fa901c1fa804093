"""A small client layer: start a graph run on Temporal and watch it.

Anything here can also be done with the plain SDK (see ``docs/temporal.md``):
``client.start_workflow("<graph name>", {"message": ...}, id=..., task_queue=...)``.
"""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle

from ._plugin import DEFAULT_TASK_QUEUE
from ._serde import Envelope, decode, encode
from ._workflow import Workflow

__all__ = ["RunHandle", "start_run"]


class RunHandle:
    """A graph run on Temporal. ``handle`` is the SDK's own workflow handle."""

    def __init__(self, handle: WorkflowHandle[Any, Any]) -> None:
        self.handle = handle

    @property
    def id(self) -> str:
        return self.handle.id

    async def result(self) -> dict[str, Any]:
        """The run's JSON result: ``outputs``, ``output_types``, ``superstep``, ``status``.

        Committed state is not in the result (it may be large); read it with :meth:`state`.
        """
        result: dict[str, Any] = await self.handle.result()
        return result

    async def outputs(self) -> list[Any]:
        """The outputs with their pydantic/dataclass types restored (types must be importable here)."""
        r = await self.result()
        return [decode(Envelope(t, d)) for d, t in zip(r["outputs"], r.get("output_types") or [], strict=False)]

    async def status(self) -> dict[str, Any]:
        """Live status from the ``status`` query."""
        status: dict[str, Any] = await self.handle.query("status")
        return status

    async def state(self) -> dict[str, Any]:
        """Committed shared state (JSON) from the ``state`` query."""
        state: dict[str, Any] = await self.handle.query("state")
        return state

    async def describe(self) -> WorkflowExecutionDescription:
        return await self.handle.describe()


async def start_run(
    client: Client,
    workflow: Workflow | str,
    message: Any,
    *,
    id: str | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
) -> RunHandle:
    """Start a run of ``workflow`` (a built graph, or its name) with a start message."""
    name = workflow if isinstance(workflow, str) else workflow.name
    if not name:
        raise ValueError("a workflow hosted on Temporal needs a name: WorkflowBuilder(name=...)")
    env = encode(message, what="start message")
    arg: dict[str, Any] = {"message": env.data}
    if env.type is not None:
        arg["message_type"] = env.type
    handle = await client.start_workflow(
        name, arg, id=id or f"{name}-{uuid.uuid4().hex[:12]}", task_queue=task_queue, result_type=dict
    )
    return RunHandle(handle)
