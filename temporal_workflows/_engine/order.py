"""In which order a superstep's steps run: the messages one sender sent an executor, one after another.

Agent Framework delivers the messages a source sent through one edge in the
order they were sent, each handled to its end before the next is delivered
("multiple messages from a source to the same target are delivered in the
order they were sent"); everything else in a superstep runs side by side.
A handler that keeps what it received in its executor's attributes (a list of
results, a count) therefore sees them in send order, and so does what it
prints or yields from them. The in-process and Temporal hosts keep that order by the one rule here:
a step handling a message waits for the step that handled the previous
message of the same sender to the same executor in that superstep. Steps that
share no sender and executor still run concurrently, and every step still
reads the state committed at the last boundary (plus its own writes): the
order is of running, not of seeing each other's writes.

An executor whose ``ExecutorOptions(concurrent=True)`` says its messages may
be handled side by side (a wide fan-out through one edge: thousands of items
for one worker executor) is left out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from temporal_workflows._engine.machine import StepTask, Topology

__all__ = ["predecessors"]


def predecessors(topology: Topology, tasks: Sequence[StepTask], concurrent: Collection[str]) -> list[int | None] | None:
    """For each task, the index of the task it runs after (``None``: it starts at once); ``None`` if none waits.

    A ``message`` task waits for the previous ``message`` task of the same
    sender to the same executor, unless the executor is in ``concurrent``.
    Messages from outside the run (no sender), fan-ins, batches and responses
    start at once.
    """
    if len(tasks) < 2:
        return None
    last: dict[tuple[str, str], int] = {}
    after: list[int | None] = [None] * len(tasks)
    waits = False
    for t in tasks:
        if t.kind != "message" or not t.source_ids or t.executor_id in concurrent:
            continue
        source = t.source_ids[0]
        if source is None:
            continue
        key = (source, t.executor_id)
        before = last.get(key)
        if before is not None:
            after[t.index] = before
            waits = True
        last[key] = t.index
    return after if waits else None
