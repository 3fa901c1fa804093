"""A process that used Temporal ends cleanly (``temporal/_exit.py``): its exit hooks run before the
interpreter winds down, while a thread pool still takes work, as a worker's shutdown needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    from concurrent.futures import ThreadPoolExecutor
    from temporal_workflows.temporal._exit import end_cleanly

    pool = ThreadPoolExecutor(1)
    def stop():
        print("stopped", pool.submit(lambda: 42).result())
    end_cleanly(stop)
    end_cleanly(stop)  # once, however often the program connects
    end_cleanly()
    print("last line")
    """
)


def test_exit_hooks_run_once_after_the_last_line_while_a_pool_still_takes_work() -> None:
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["last line", "stopped 42"]
