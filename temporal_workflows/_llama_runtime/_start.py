"""Starting a LlamaIndex run from the project's tools (``run``, the console's start form, an AG-UI thread).

A run starts as the program itself starts one, ``workflow.run(**kwargs)`` on its ``TemporalRuntime``: the same
start event, signature, timeout and queue. A tool only starts it: once the execution exists it stops waiting
for the run's result (the run goes on, read and answered through the client layer like any other run).
"""

from __future__ import annotations

from typing import Any

from temporal_workflows._llama_runtime._llama_private import detach_handler

__all__ = ["StartRefused", "start_run"]


class StartRefused(ValueError):
    """The start input is not one the workflow takes (its start event does not validate): nothing was started."""


async def start_run(workflow: Any, kwargs: dict[str, Any], *, run_id: str | None = None, wait: bool = False) -> Any:
    """Start ``workflow.run(**kwargs)`` (``workflow`` hosted on a ``TemporalRuntime``); its run id once it exists.

    A run id that names a run of the same workflow already attaches to it, as ``workflow.run(run_id=...)`` does.
    With ``wait``, returns the handler instead (the caller awaits it); else the handler stops waiting.

    Raises:
        StartRefused: ``kwargs`` do not make the workflow's start event (pydantic's errors, without values).
    """
    from pydantic import ValidationError
    from workflows.errors import WorkflowRuntimeError, WorkflowValidationError

    runtime = workflow.runtime
    args = dict(kwargs)
    if run_id is not None:
        args["run_id"] = run_id
    try:
        handler = workflow.run(**args)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
            for err in e.errors(include_url=False, include_input=False)[:10]
        )
        name = workflow.workflow_name
        raise StartRefused(f"the start input does not make {name}'s start event: {problems}") from None
    except (WorkflowRuntimeError, WorkflowValidationError, TypeError) as e:
        raise StartRefused(f"{type(e).__name__}: {e}") from None
    adapter = getattr(runtime, "_adapters", {}).get(handler.run_id)
    try:
        if adapter is not None:
            await adapter.started  # the execution exists: it can be followed, answered, found in the Web UI
    except BaseException:
        detach_handler(handler)
        raise
    if wait:
        return handler
    detach_handler(handler)
    return handler.run_id
