"""The task queue of a program that hosts its own worker (``TemporalRuntime(worker=True)``).

A run stays on the task queue it was started on. The queue of an in-process
worker is therefore named after the program's workflows, not after the
process: when the program is killed mid-run and started again (from the same
file or another: a workflow defined in ``__main__`` resumes from a copy of
the script too), its new worker polls the same queue and the run goes on from
where history left it (LlamaIndex's DBOS example resumes its counter this
way). Two programs building different workflows get different queues, so
neither picks up the other's runs: the name digests each workflow's
``workflow_name`` and signature (``_versioning.signature``: steps, events,
step code) when the queue is first needed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from temporal_workflows._llama_runtime._protocol import DEFAULT_TASK_QUEUE
from temporal_workflows._llama_runtime._versioning import signature

if TYPE_CHECKING:
    from workflows.workflow import Workflow

__all__ = ["program_task_queue"]


def program_task_queue(workflows: Iterable[Workflow]) -> str:
    """``llama-index-workflows-<digest>``: the same for every start of one program, different for others."""
    described = sorted({f"{wf.workflow_name}={signature(wf)}" for wf in workflows})
    digest = hashlib.sha256("\n".join(described).encode()).hexdigest()[:12]
    return f"{DEFAULT_TASK_QUEUE}-{digest}"
