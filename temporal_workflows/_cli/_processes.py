"""``temporal-workflows worker --processes N``: N worker processes on one task queue, run as one.

Python runs one thread of Python at a time, and a worker's workflow tasks (the superstep loop) are Python:
one process uses one core for them however many steps it awaits. ``--processes N`` starts N copies of the
same worker command as child processes (each one a whole worker: same flags, same queue, same
registrations, its own identity ``<pid>@<host>``), and:

* **one log**: every line a child writes (its stdout and its log) is written to the supervisor's stdout,
  prefixed ``[worker i/N pid P]``, whole lines only;
* **stopped together**: SIGTERM or SIGINT to the supervisor sends SIGTERM to every child, each shuts down
  gracefully (in-flight steps get ``--graceful-shutdown`` seconds), and the supervisor exits once all have;
  the children are in their own process group (a terminal's Ctrl-C reaches only the supervisor, which
  stops them) and, on Linux, are sent SIGTERM if the supervisor itself dies (``kill -9``);
* **a child that dies is replaced**: a worker killed or crashed after it started is reported in the log
  (exit code or signal) and started again (after 1 s, doubling to 30 s while replacements keep dying
  within a minute), so the queue keeps N pollers; a child that exits *before* it started (a wrong flag, a
  module that does not import, no server) stops the others, and the supervisor exits with its code: a
  configuration error is said once, not retried for ever.

With ``--dev``, the supervisor runs the dev server and the children connect to it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from typing import IO, Any

__all__ = ["CHILD_ENV", "DEV_ADDRESS_ENV", "READY", "supervise"]

CHILD_ENV = "TEMPORAL_WORKFLOWS_WORKER_PROCESS"
"""Set in a child to ``"<i>/<N>"``: it runs one worker (no supervisor of its own, no dev server)."""
DEV_ADDRESS_ENV = "TEMPORAL_WORKFLOWS_DEV_ADDRESS"
"""Set in a child when the supervisor runs the dev server (``--dev``): where it listens."""
READY = "worker on task queue"
"""What a child's log says once its worker polls: from then on it counts as started."""
RESTART_DELAYS = (1.0, 30.0)
"""First and longest wait before a dead child is replaced (doubling while replacements die within a minute)."""
KILL_AFTER = 30.0
"""Seconds past ``--graceful-shutdown`` a stopping child gets before it is killed."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Linux: the child gets SIGTERM when the supervisor dies, however it dies (``PR_SET_PDEATHSIG``)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _Supervisor:
    def __init__(self, argv: list[str], n: int, out: IO[str], *, dev_address: str | None, grace: float) -> None:
        self.argv = argv
        self.n = n
        self.out = out
        self.dev_address = dev_address
        self.grace = grace
        self.stopping = asyncio.Event()
        self.failed: int | None = None
        self.live: dict[int, asyncio.subprocess.Process] = {}

    def say(self, text: str) -> None:
        print(f"[supervisor pid {os.getpid()}] {text}", flush=True, file=self.out)

    async def _spawn(self, i: int) -> asyncio.subprocess.Process:
        env = {**os.environ, CHILD_ENV: f"{i}/{self.n}", "PYTHONUNBUFFERED": "1"}
        if self.dev_address:
            env[DEV_ADDRESS_ENV] = self.dev_address
        kwargs: dict[str, Any] = {"start_new_session": True}
        if sys.platform.startswith("linux"):
            kwargs["preexec_fn"] = _die_with_parent
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "temporal_workflows",
            *self.argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            **kwargs,
        )
        self.live[i] = proc
        return proc

    async def _relay(self, i: int, proc: asyncio.subprocess.Process) -> bool:
        """Copy the child's lines to the log, prefixed; whether it said it started."""
        assert proc.stdout is not None
        prefix = f"[worker {i}/{self.n} pid {proc.pid}] "
        started = False
        while True:
            line = await proc.stdout.readline()
            if not line:
                return started
            text = line.decode(errors="replace").rstrip("\n")
            started = started or READY in text
            print(prefix + text, flush=True, file=self.out)

    async def slot(self, i: int) -> None:
        """Keep worker ``i`` running until the supervisor stops."""
        delay = 0.0
        while not self.stopping.is_set():
            proc = await self._spawn(i)
            began = time.monotonic()
            started = await self._relay(i, proc)
            code = await proc.wait()
            del self.live[i]
            if self.stopping.is_set():
                return
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            if not started:
                self.say(f"worker {i}/{self.n} (pid {proc.pid}) {how} before it started: stopping the others")
                self.failed = code if code > 0 else 1
                self.stopping.set()
                return
            # The first replacement soon; then doubling while replacements keep dying within a minute.
            delay = min(delay * 2, RESTART_DELAYS[1]) if delay and time.monotonic() - began < 60 else RESTART_DELAYS[0]
            self.say(f"worker {i}/{self.n} (pid {proc.pid}) {how}; starting another in {delay:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)

    async def stop_all(self) -> None:
        for proc in list(self.live.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace + KILL_AFTER
        for proc in list(self.live.values()):
            try:
                await asyncio.wait_for(proc.wait(), max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                self.say(f"pid {proc.pid} did not stop within {self.grace + KILL_AFTER:g} s: killing it")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()


async def supervise(args: argparse.Namespace, n: int, out: IO[str], *, dev_address: str | None = None) -> int:
    """Run ``n`` children of this worker command until SIGTERM/SIGINT (or one fails at start-up)."""
    argv: list[str] | None = getattr(args, "argv", None)
    if argv is None:
        argv = ["worker", *sys.argv[1:]]
    sup = _Supervisor(argv, n, out, dev_address=dev_address, grace=args.graceful_shutdown)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, sup.stopping.set)
    sup.say(f"starting {n} worker processes: " + " ".join(["temporal-workflows", *argv]))
    slots = [asyncio.create_task(sup.slot(i)) for i in range(1, n + 1)]
    await sup.stopping.wait()
    if sup.failed is None:
        sup.say(f"stopping {len(sup.live)} worker processes (SIGTERM to each)")
    await sup.stop_all()
    for task in slots:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    sup.say("every worker process has stopped")
    return sup.failed or 0
