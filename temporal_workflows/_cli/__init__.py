"""The ``temporal-workflows`` command line (also ``python -m temporal_workflows`` and ``worker.py``).

A private package: its modules are the command's parts (parser and commands,
the run views, the worker and dev server, error messages). What scripts may
import from it is re-exported here: :func:`main`, :func:`follow`,
:func:`describe_event` and :func:`hard_exit`.
"""

from temporal_workflows._cli._main import hard_exit, main
from temporal_workflows._cli._render import describe_event, follow

__all__ = ["describe_event", "follow", "hard_exit", "main"]
