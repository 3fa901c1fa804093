"""A process that used Temporal ends cleanly, instead of aborting after its last line.

Temporal's Rust core completes each call on a thread of its own, which takes the GIL to hand the result to
Python. One that takes it while the interpreter finalizes aborts the process (``Fatal Python error:
PyGILState_Release``, exit status -6), after the program printed everything and returned
(temporalio/sdk-python#300). Two things leave such a call in flight at exit:

- a worker still running (its polls stay pending; a daemon thread is not stopped at exit), which the module
  hosting it stops in a hook given to :func:`end_cleanly`;
- a call that completed last (a worker's final completion, a client's last answer), still on its way
  into Python: a short sleep, once the hooks ran, lets it arrive while Python is alive.

The hook is a ``threading`` exit hook, so it runs before ``concurrent.futures`` refuses new work at exit
(that module's hook was registered when it was imported, here, and runs after ours): a worker's shutdown
still runs its evictions on a pool.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (its exit hook registered now, so it runs after ours)
import threading
import time
from collections.abc import Callable

__all__ = ["EXIT_GRACE_SECONDS", "end_cleanly"]

EXIT_GRACE_SECONDS = 0.1
"""How long a process's exit leaves the GIL to Temporal's threads, for the calls they completed last."""

_HOOKS: list[Callable[[], None]] = []
_INSTALLED: list[bool] = []
_LOCK = threading.Lock()


def end_cleanly(before: Callable[[], None] | None = None) -> None:
    """Make this process end cleanly once it used Temporal; ``before`` (once) runs first at exit.

    Called by every connection the project makes and by every client connected with
    ``TemporalWorkflowsPlugin``, so a program, a CLI command or a worker all get it.
    """
    with _LOCK:
        if before is not None and before not in _HOOKS:
            _HOOKS.append(before)
        if not _INSTALLED:
            register = getattr(threading, "_register_atexit", atexit.register)
            register(_at_exit)
            _INSTALLED.append(True)


def _at_exit() -> None:
    with _LOCK:
        hooks = list(_HOOKS)
    for hook in hooks:
        hook()
    time.sleep(EXIT_GRACE_SECONDS)
