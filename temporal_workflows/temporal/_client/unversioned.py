"""A worker without Worker Versioning, started while runs of another version of its graphs are open.

Such a worker refuses their steps (``GraphSignatureMismatchError``, retryable);
the runs then wait, for ``SIGNATURE_WAIT``, for a worker of their own graph.
That is by design, but it is better said when the worker starts than found
when the runs stall: :func:`check_open_runs` lists them and prints a warning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from temporalio.client import Client

from temporal_workflows.temporal._protocol import QUERY_STATUS, SIGNATURE_PREFIX, SIGNATURE_WAIT_TEXT

if TYPE_CHECKING:
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["check_open_runs"]


async def check_open_runs(
    client: Client, workflows: Sequence[Workflow], out: IO[str], *, limit: int = 50, timeout: float = 5.0
) -> int:
    """Warn on ``out`` about open runs of ``workflows``' graphs started under another graph signature.

    Reads up to ``limit`` open runs per graph (their ``status`` query says the
    run's signature; call this once a worker that can answer queries polls the
    task queue). Runs that do not answer within ``timeout`` are skipped: this
    is advice, never a reason not to start. Returns how many runs were found.
    """
    found = 0
    for wf in workflows:
        name = wf.name or ""
        mine = wf.graph_signature_hash[:SIGNATURE_PREFIX]
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        try:
            runs = [
                (ex.id, ex.run_id)
                async for ex in client.list_workflows(
                    f'WorkflowType = "{quoted}" AND ExecutionStatus = "Running"', limit=limit
                )
            ]
        except Exception:  # visibility unavailable: nothing to say
            continue

        async def signature(workflow_id: str, run_id: str) -> str | None:
            try:
                handle = client.get_workflow_handle(workflow_id, run_id=run_id)
                status: dict[str, Any] = await asyncio.wait_for(handle.query(QUERY_STATUS), timeout)
            except Exception:
                return None
            sig = status.get("graph_signature") if isinstance(status, dict) else None
            return sig if isinstance(sig, str) else None

        signatures = await asyncio.gather(*(signature(w, r) for w, r in runs))
        others = sorted({s for s in signatures if s and s != mine})
        n = sum(1 for s in signatures if s and s != mine)
        if not n:
            continue
        found += n
        print(
            f"warning: {n} open run{'s' if n != 1 else ''} of graph {name!r} started under another graph "
            f"signature ({', '.join(s + '…' for s in others)}); this worker hosts {mine}… without Worker "
            f"Versioning, so it refuses their steps, and they wait (up to {SIGNATURE_WAIT_TEXT}) for a worker of "
            "their graph: keep one running until they finish, or deploy with --deployment-name "
            "(docs/deployment.md)",
            flush=True,
            file=out,
        )
    return found
