"""A worker build id that changes when what a running execution replays could change.

A ``LlamaIndexRun`` execution replays LlamaIndex's reducer and routes on the hosted workflow's
steps, so a worker may pick it up only if it runs the same ``workflows`` version and the same
steps (names, accepted and returned events, workers, retry policy kind, timeout). With Worker
Versioning (``TemporalRuntime.worker(client, deployment_name=...)``) runs are pinned to the
build they started on; a worker with another version never gets their tasks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from importlib.metadata import version
from typing import Any

from workflows.workflow import Workflow

__all__ = ["build_id_for", "workflows_version"]


def workflows_version() -> str:
    return version("llama-index-workflows")


def _name(t: Any) -> str:
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', repr(t))}"


def _shape(wf: Workflow) -> str:
    steps = []
    for name, cfg in sorted(wf._step_configs().items()):
        accepted = ",".join(sorted(_name(t) for t in cfg.accepted_events))
        returned = ",".join(sorted(_name(t) for t in cfg.return_types))
        policy = type(cfg.retry_policy).__qualname__ if cfg.retry_policy is not None else "-"
        steps.append(f"{name}({accepted})->{returned}*{cfg.num_workers}/{policy}")
    return f"{wf.workflow_name}[timeout={wf._timeout}]:" + ";".join(steps)


def build_id_for(workflows: Iterable[Workflow]) -> str:
    """``llama-<workflows version>-<12 hex of the hosted workflows' shapes>``."""
    shapes = sorted({_shape(wf) for wf in workflows})
    digest = hashlib.sha256("\n".join(shapes).encode()).hexdigest()[:12]
    return f"llama-{workflows_version()}-{digest}"
