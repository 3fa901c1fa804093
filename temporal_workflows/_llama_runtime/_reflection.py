"""A workflow's store type, looked up once per workflow instance and step set on a worker.

LlamaIndex finds the type of a fresh ``ctx.store`` by reflecting over the workflow's steps
(``infer_state_type``) each time it is asked; the step activity needs it for every invocation.
The answer only changes when ``Workflow.add_step`` adds a step to the class, which bumps the
class's step version: the cache is keyed by it.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel
from workflows.context.state_store import infer_state_type
from workflows.runtime.types.plugin import WeakIdentityKeyDictionary
from workflows.workflow import Workflow

from temporal_workflows._llama_runtime._llama_private import step_functions_version

__all__ = ["state_type"]

_cache: WeakIdentityKeyDictionary[Workflow, tuple[int, type[BaseModel]]] = WeakIdentityKeyDictionary()
_lock = threading.Lock()


def state_type(workflow: Workflow) -> type[BaseModel]:
    """``infer_state_type(workflow)``, once per step set."""
    version = step_functions_version(workflow)
    with _lock:
        cached = _cache.get(workflow)
    if cached is not None and cached[0] == version:
        return cached[1]
    found: Any = infer_state_type(workflow)
    with _lock:
        _cache[workflow] = (version, found)
    return found  # type: ignore[no-any-return]
