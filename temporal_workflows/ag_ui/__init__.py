"""AG-UI for durable runs: any AG-UI front end (CopilotKit, ``@ag-ui/client``, ...) drives graph runs on Temporal.

    from temporal_workflows.ag_ui import AGUIApp

    app = FastAPI()
    app.mount("/ag-ui", AGUIApp(client, [workflow]))    # POST /ag-ui/<workflow name>

Each AG-UI thread is one durable run (a Temporal workflow id derived from the
``threadId``); each request (``RunAgentInput``) is one turn: its new user
message and its answers to the run's requests go in, the run's events come
back as the AG-UI event stream (SSE) until the run is at rest, ending with
``RUN_FINISHED`` (an interrupt outcome while the run waits for a person) or
``RUN_ERROR``. ``temporal-workflows console`` serves it at ``/ag-ui/<name>``
for each ``--workflow``. Needs the ``ag-ui`` extra. See ``docs/ag-ui.md``.
"""

from __future__ import annotations

try:
    import ag_ui.core  # noqa: F401
    import sse_starlette  # noqa: F401
    import starlette  # noqa: F401
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise ImportError(
        f"temporal_workflows.ag_ui needs the ag-ui extra ({e.name} is missing): pip install 'temporal-workflows[ag-ui]'"
    ) from e

from temporal_workflows.ag_ui._app import AGUIApp, AGUISettings

__all__ = ["AGUIApp", "AGUISettings"]
