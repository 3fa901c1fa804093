"""The task queue of a program that hosts its own worker (``TemporalRuntime(worker=True)``).

A run stays on the task queue it was started on. The queue of an in-process
worker is therefore named after the program, not after the process: when the
program is killed mid-run and started again, its new worker polls the same
queue and the run goes on from where history left it (LlamaIndex's DBOS
example resumes its counter this way). Two different programs sharing a
server still get different queues, so neither picks up the other's runs: the
name digests the program's main file and the workflows it has built (class,
``workflow_name`` and step names) when it first needs the queue.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from temporal_workflows._llama_runtime._protocol import DEFAULT_TASK_QUEUE

if TYPE_CHECKING:
    from workflows.workflow import Workflow

__all__ = ["program_task_queue"]


def _main_origin() -> str:
    """The program's main file, or what stands for it (``-c``, a notebook, a REPL)."""
    main = sys.modules.get("__main__")
    origin = getattr(main, "__file__", None)
    if isinstance(origin, str) and origin:
        return os.path.realpath(origin)
    return f"<{sys.argv[0] if sys.argv and sys.argv[0] else 'interactive'}>@{os.getcwd()}"


def program_task_queue(workflows: Iterable[Workflow]) -> str:
    """``llama-index-workflows-<digest>``: the same for every start of one program, different for others."""
    parts = [_main_origin()]
    described = set()
    for wf in workflows:
        cls = type(wf)
        steps = ",".join(sorted(wf._get_steps()))
        described.add(f"{cls.__module__}.{cls.__qualname__}:{wf.workflow_name}:{steps}")
    parts.extend(sorted(described))
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
    return f"{DEFAULT_TASK_QUEUE}-{digest}"
