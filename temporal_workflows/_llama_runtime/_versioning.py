"""Which LlamaIndex program a run runs: a workflow's signature, and a worker's build id.

A ``LlamaIndexRun`` execution replays LlamaIndex's reducer and routes on the hosted workflow's
steps, and its step activities run the hosted workflow's code. Two different programs may build a
workflow of the same ``workflow_name`` (a rolling deploy of a changed workflow, two programs on one
queue); a worker hosting the other one must never run a step of this run. So the starter records the
workflow's :func:`signature` in the run's input, and the workflow and every step activity compare it
with the workflow they host (a mismatch is refused retryably, so a worker of the right program takes
it). With Worker Versioning (``TemporalRuntime.worker(client, deployment_name=...)``) runs are also
pinned to the build they started on (:func:`build_id_for`, which the signatures make up).

The signature covers the program: the workflow's name; each step's name, accepted and returned events,
workers, retry policy kind and source code; each declared event's fields. Not covered: code a step calls
(a helper module, a model), which a deploy may change with the steps unchanged; and constructor arguments
such as ``timeout=``, which travel with the run (``RunInput.timeout``: the run uses its starter's, whatever
the worker's instance was built with).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections.abc import Iterable
from types import CodeType
from typing import Any

from workflows.runtime.types.plugin import WeakIdentityKeyDictionary
from workflows.workflow import Workflow

from temporal_workflows._llama_runtime._llama_private import (
    installed_workflows_version,
    step_configs,
    step_functions,
    step_functions_version,
    workflow_timeout,
)

__all__ = ["SIGNATURE_CHARS", "build_id_for", "describe", "signature", "workflows_version"]

SIGNATURE_CHARS = 16
"""Hex characters of a signature (64 bits: tells a queue's programs apart)."""


def workflows_version() -> str:
    return installed_workflows_version() or "unknown"


def _name(t: Any) -> str:
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', repr(t))}"


def _code_digest(code: CodeType) -> str:
    """A code object's bytecode, constants and names (nested functions by their own digest): used when a
    step's source is not available (code made by ``exec`` without a file)."""
    h = hashlib.sha256(code.co_code)
    for const in code.co_consts:
        h.update(_code_digest(const).encode() if isinstance(const, CodeType) else repr(const).encode())
    h.update(repr(code.co_names).encode())
    return h.hexdigest()[:16]


def _source_digest(func: Any) -> str:
    func = getattr(func, "__func__", func)
    func = inspect.unwrap(func)
    try:
        text = inspect.getsource(func)
    except (OSError, TypeError):
        code = getattr(func, "__code__", None)
        return _code_digest(code) if isinstance(code, CodeType) else "?"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _event_fields(cls: Any) -> str:
    fields = getattr(cls, "model_fields", None)
    if not isinstance(fields, dict):
        return ""
    return ",".join(f"{name}:{info.annotation}" for name, info in fields.items())


def describe(wf: Workflow) -> list[str]:
    """The lines a workflow's signature digests, in a stable order (readable in a mismatch report)."""
    lines = [f"workflow {wf.workflow_name}"]
    functions = step_functions(wf)
    for name, cfg in sorted(step_configs(wf).items()):
        accepted = ",".join(sorted(_name(t) for t in cfg.accepted_events))
        returned = ",".join(sorted(_name(t) for t in cfg.return_types))
        policy = type(cfg.retry_policy).__qualname__ if cfg.retry_policy is not None else "-"
        source = _source_digest(functions[name]) if name in functions else "?"
        lines.append(f"step {name}({accepted})->{returned} workers={cfg.num_workers} retry={policy} code={source}")
    for event in sorted(wf.events, key=_name):
        lines.append(f"event {_name(event)}({_event_fields(event)})")
    return lines


_signatures: WeakIdentityKeyDictionary[Workflow, tuple[int, str]] = WeakIdentityKeyDictionary()
_lock = threading.Lock()


def signature(wf: Workflow) -> str:
    """The workflow's signature (:data:`SIGNATURE_CHARS` hex), computed once per instance and step set."""
    version = step_functions_version(wf)
    with _lock:
        cached = _signatures.get(wf)
    if cached is not None and cached[0] == version:
        return cached[1]
    digest = hashlib.sha256(json.dumps(describe(wf)).encode()).hexdigest()[:SIGNATURE_CHARS]
    with _lock:
        _signatures[wf] = (version, digest)
    return digest


def build_id_for(workflows: Iterable[Workflow]) -> str:
    """``llama-<workflows version>-<12 hex of the hosted workflows' signatures and timeouts>``."""
    signatures = sorted({f"{wf.workflow_name}={signature(wf)}/{workflow_timeout(wf)}" for wf in workflows})
    digest = hashlib.sha256("\n".join(signatures).encode()).hexdigest()[:12]
    return f"llama-{workflows_version()}-{digest}"
