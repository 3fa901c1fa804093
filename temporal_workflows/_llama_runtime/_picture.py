"""A LlamaIndex run's picture: its workflow's steps and events, as LlamaIndex itself describes them.

The run answers the ``topology`` query (the name graph runs answer their picture by) with LlamaIndex's own
representation of the workflow it hosts (``workflows.representation.get_workflow_representation``: steps,
the events between them, the outside world a step asks), reduced to ids, labels and edges. The console draws
it (:func:`to_mermaid`) and colours each step as the run's stream says it runs, so the picture is the one
this run's worker runs (the worker checked the run's signature), not one a console guesses.

:func:`representation` runs where the workflow is hosted and imports LlamaIndex there; :func:`to_mermaid` is
pure and imports nothing of it, so a console without LlamaIndex installed draws any run.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_PICTURE_BYTES", "representation", "to_mermaid", "topology_answer"]

MAX_PICTURE_BYTES = 64 * 1024
"""A larger picture is not answered (a ``note`` says so): it would crowd the query's payload and no page."""

_KINDS = ("step", "event", "external")


def representation(workflow: Any) -> dict[str, Any]:
    """``{"name", "nodes": [{"id", "label", "node_type"}], "edges": [{"source", "target"}]}`` of a hosted workflow,
    from LlamaIndex's own representation (resources left out: they are no part of the flow)."""
    from workflows.representation.build import get_workflow_representation

    graph = get_workflow_representation(workflow)
    nodes = [{"id": n.id, "label": n.label, "node_type": n.node_type} for n in graph.nodes if n.node_type in _KINDS]
    kept = {n["id"] for n in nodes}
    edges = [{"source": e.source, "target": e.target} for e in graph.edges if e.source in kept and e.target in kept]
    name = getattr(workflow, "workflow_name", graph.name)
    return {"name": graph.name, "workflow": name, "nodes": nodes, "edges": edges}


def topology_answer(workflow: Any) -> dict[str, Any]:
    """The ``topology`` query's answer: ``{"kind": "llama_index", "workflow", "representation"}``, or a ``note``
    instead of the representation saying why there is none."""
    answer: dict[str, Any] = {"kind": "llama_index", "workflow": getattr(workflow, "workflow_name", None)}
    try:
        rep = representation(workflow)
    except Exception as e:  # a workflow LlamaIndex cannot describe: no picture, and why
        answer.update(representation=None, note=f"LlamaIndex could not describe the workflow: {type(e).__name__}")
        return answer
    if len(json.dumps(rep)) > MAX_PICTURE_BYTES:
        answer.update(representation=None, note=f"the workflow's picture is over {MAX_PICTURE_BYTES // 1024} KiB")
        return answer
    answer["representation"] = rep
    return answer


_PREFIX = {"step": "s", "event": "e", "external": "x"}


def _mermaid_id(kind: str, value: str) -> str:
    return f"{_PREFIX[kind]}_{re.sub(r'[^0-9A-Za-z_]', '_', value)}"


def _text(value: str) -> str:
    return " ".join(str(value).replace('"', "#quot;").splitlines())


def to_mermaid(rep: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """Mermaid ``flowchart`` text of a representation, and the node id of each step (the console colours them).

    Steps are boxes, events rounded, the outside world (who answers an ``InputRequiredEvent``) a hexagon; an
    edge is an event a step returns or accepts.
    """
    ids: dict[str, str] = {}
    used: set[str] = set()
    lines = ["flowchart TD"]
    for node in rep.get("nodes") or ():
        kind = str(node.get("node_type"))
        if kind not in _KINDS:
            continue
        node_id = str(node.get("id"))
        alias = base = _mermaid_id(kind, node_id)
        n = 2
        while alias in used:
            alias, n = f"{base}_{n}", n + 1
        used.add(alias)
        ids[f"{kind}:{node_id}"] = alias
        label = _text(str(node.get("label") or node_id))
        if kind == "step":
            lines.append(f'  {alias}["{label}"];')
        elif kind == "event":
            lines.append(f'  {alias}(["{label}"]);')
        else:
            lines.append(f'  {alias}{{{{"outside"}}}};')
    by_id: dict[str, str] = {}
    for key, alias in ids.items():
        by_id.setdefault(key.split(":", 1)[1], alias)
    for edge in rep.get("edges") or ():
        source, target = by_id.get(str(edge.get("source"))), by_id.get(str(edge.get("target")))
        if source and target:
            lines.append(f"  {source} --> {target};")
    steps = {key.split(":", 1)[1]: alias for key, alias in ids.items() if key.startswith("step:")}
    return "\n".join(lines), steps
