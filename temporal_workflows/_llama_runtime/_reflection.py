"""A workflow's steps and store type, looked up once per workflow instance on a worker.

LlamaIndex finds a workflow's steps by reflection (``Workflow._get_steps``: ``inspect.getmembers`` over
the instance, then the class's free-function steps) each time it needs them: its step wrapper does on
every invocation (for the step's config), and ``infer_state_type`` (the type of a fresh ``ctx.store``)
does again. In the default runtime that is once per step call; an activity that runs a wide fan-in's
invocations and runs ahead their reruns calls it hundreds of times a batch (about 30% of the activity's
time in the 50-way ``collect_events`` bench). The answer only changes when ``Workflow.add_step`` adds a
step to the class, which bumps the class's ``_step_functions_version``: the cache is keyed by it.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from pydantic import BaseModel
from workflows.context.state_store import infer_state_type
from workflows.workflow import Workflow

__all__ = ["cached_steps", "state_type"]


class _CachedSteps:
    """Stands in for ``Workflow._get_steps`` on one instance: the same answer, computed once per
    ``_step_functions_version`` (a fresh dict each call, as LlamaIndex's is)."""

    def __init__(self, workflow: Workflow) -> None:
        self._ref = weakref.ref(workflow)
        self._version: int | None = None
        self._steps: dict[str, Any] = {}
        self._state_type: type[BaseModel] | None = None

    def owner(self) -> Workflow | None:
        return self._ref()

    def _refresh(self, workflow: Workflow) -> None:
        version = type(workflow)._step_functions_version
        if version != self._version:
            # Computed outside the cache, then swapped in: a reader on another thread sees either answer.
            steps = Workflow._get_steps(workflow)
            self._steps, self._state_type, self._version = steps, None, version

    def __call__(self) -> dict[str, Any]:
        workflow = self._ref()
        if workflow is None:  # pragma: no cover - the instance owns this object
            return {}
        self._refresh(workflow)
        return dict(self._steps)

    def state_type(self, workflow: Workflow) -> type[BaseModel]:
        self._refresh(workflow)
        found = self._state_type
        if found is None:
            found = self._state_type = infer_state_type(workflow)
        return found


_lock = threading.Lock()


def cached_steps(workflow: Workflow) -> _CachedSteps:
    """The instance's step cache, installed as its ``_get_steps`` (so LlamaIndex's step wrapper uses it)."""
    current = workflow.__dict__.get("_get_steps")
    if isinstance(current, _CachedSteps) and current.owner() is workflow:
        return current
    with _lock:
        current = workflow.__dict__.get("_get_steps")
        if not (isinstance(current, _CachedSteps) and current.owner() is workflow):
            current = _CachedSteps(workflow)
            workflow.__dict__["_get_steps"] = current
        return current


def state_type(workflow: Workflow) -> type[BaseModel]:
    """``infer_state_type(workflow)``, once per step set."""
    return cached_steps(workflow).state_type(workflow)
