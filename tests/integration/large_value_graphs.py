"""A document through a five-step graph, for large values by reference (tests and bench/large_values.py).

``make`` builds a document of the size it is given, keeps it in state and
sends it on; three steps each append their name to it and send it on; the
last reads the document from state and from its message and yields their
sizes and digests (a small output). So the document travels as messages
(step results and step inputs), as committed state (read by the last step
through the state query) and in checkpoints.
"""

from __future__ import annotations

import hashlib
from typing import Any

from temporal_workflows import ExecutorOptions, WorkflowBuilder, WorkflowContext, executor

LATE_QUEUE = "tw-large-values-late"
"""Where ``late_check``'s steps go: no worker polls it until a test starts one."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@executor(id="make")
async def make(size: int, ctx: WorkflowContext[str]) -> None:
    block = "0123456789abcdef" * 64  # 1 KiB
    doc = (block * (size // len(block) + 1))[:size]
    ctx.set_state("doc", doc)
    await ctx.send_message(doc)


def _stage(name: str) -> Any:
    @executor(id=name)
    async def stage(doc: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(doc + f"|{name}")

    return stage


@executor(id="check")
async def check(doc: str, ctx: WorkflowContext[None, dict[str, Any]]) -> None:
    kept = ctx.get_state("doc")
    await ctx.yield_output(
        {
            "message_bytes": len(doc),
            "state_bytes": len(kept),
            "tail": doc[-30:],
            "state_digest": digest(kept),
        }
    )


first, second, third = _stage("first"), _stage("second"), _stage("third")
document = (
    WorkflowBuilder(start_executor=make, name="lv_document").add_chain([make, first, second, third, check]).build()
)


@executor(id="late_check", options=ExecutorOptions(task_queue=LATE_QUEUE))
async def late_check(doc: str, ctx: WorkflowContext[None, int]) -> None:
    await ctx.yield_output(len(doc))


late = WorkflowBuilder(start_executor=make, name="lv_late").add_edge(make, late_check).build()


def all_workflows() -> list[Any]:
    return [document, late]
