"""Command-line options several commands share, each defined once.

``console`` and ``codec-server`` are both small HTTP servers behind the same
guard (``_http/guard.py``), so they take the same listening and guard
options; ``console``, ``worker`` and ``dev`` load graphs with the same
``--workflow MODULE:ATTR``. The connection options (address, namespace, TLS,
profile, API key) are :meth:`ConnectionConfig.add_arguments`, which every
command uses. What differs per command is only a default or the help that
says what the option means there.
"""

from __future__ import annotations

import argparse

__all__ = ["add_server_arguments", "add_workflow_argument"]

DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
"""The Web UI origins ``--origin`` defaults to, for its help: ``codec_server.DEFAULT_CODEC_ORIGINS``, which
cannot be imported here (that module needs the console extra, and ``--help`` must work without it);
``tests/test_cli_options.py`` checks the two agree."""


def add_workflow_argument(p: argparse.ArgumentParser, *, help: str, required: bool = False) -> None:
    """``--workflow MODULE:ATTR`` (repeatable): the graphs this command imports (``_errors.load_graph``)."""
    p.add_argument(
        "--workflow",
        action="append",
        required=required,
        default=None if required else [],
        metavar="MODULE:ATTR",
        help=help,
    )


def add_server_arguments(
    p: argparse.ArgumentParser, *, port: int, token_help: str, origin_help: str, task_queue_help: str | None = None
) -> None:
    """Where a guarded HTTP server listens and whom it lets in: host, port, token, host names, Web UI origins.

    The guard refuses a non-loopback ``--host`` without a token, and requests
    naming a host that is neither the bound one nor an ``--allowed-host``;
    ``--origin`` lists the browser origins allowed to call ``/decode``. With
    ``task_queue_help``, also ``--task-queue`` (where runs started there go).
    """
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=port)
    if task_queue_help is not None:
        p.add_argument("--task-queue", default=None, help=task_queue_help)
    p.add_argument("--token-file", default=None, metavar="FILE", help=token_help)
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a further name clients reach it by, e.g. behind a proxy (repeatable)",
    )
    p.add_argument(
        "--origin",
        action="append",
        default=None,
        help=f"{origin_help} (repeatable; default: {' '.join(DEFAULT_ORIGINS)})",
    )
    p.add_argument("--allow-encode", action="store_true", help="also serve /encode (encrypts whatever it is sent)")
