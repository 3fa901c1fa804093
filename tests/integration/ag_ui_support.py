"""What the AG-UI tests need: the real ``@ag-ui/client`` from npm, and console and worker processes.

The npm package is installed once per machine into a directory under the
system's temp dir (``tw-ag-ui-client-<version>``), under a file lock, and
reused; the tests skip only when ``node`` or ``npm`` is not on the PATH.
Consoles and workers run as users run them: ``python -m temporal_workflows
console`` / ``worker`` processes, killed by pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli import ROOT, ProcessGroup, cli_env

AG_UI_CLIENT_VERSION = "1.0.0"
"""The ``@ag-ui/client`` the tests drive endpoints with (its SSE parser splits frames on ``\\n\\n`` only)."""
RXJS_VERSION = "7.8.1"
DRIVER = Path(__file__).with_name("ag_ui_client.mjs")
READY = 60.0


def ag_ui_client_dir() -> Path:
    """A directory with ``@ag-ui/client`` installed and the driver script beside it (installed on first use)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("the @ag-ui/client tests need Node and npm on the PATH (neither is optional in CI)")
    root = Path(tempfile.gettempdir()) / f"tw-ag-ui-client-{AG_UI_CLIENT_VERSION}"
    root.mkdir(parents=True, exist_ok=True)
    installed = root / "node_modules" / "@ag-ui" / "client" / "package.json"
    with (root.parent / f"{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        version = json.loads(installed.read_text()).get("version") if installed.exists() else None
        if version != AG_UI_CLIENT_VERSION:
            (root / "package.json").write_text(json.dumps({"name": "tw-ag-ui-client", "private": True}))
            done = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-save",
                    "--prefix",
                    str(root),
                    f"@ag-ui/client@{AG_UI_CLIENT_VERSION}",
                    f"rxjs@{RXJS_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, f"npm install @ag-ui/client failed:\n{done.stdout}\n{done.stderr}"
        shutil.copyfile(DRIVER, root / DRIVER.name)
    return root


async def run_client(
    plan: dict[str, Any], *, on_progress: Callable[[dict[str, Any]], Any] | None = None, timeout: float = 240
) -> Any:
    """Run the driver (``ag_ui_client.mjs``) with ``plan``; its report. ``on_progress`` gets each PROGRESS line."""
    root = ag_ui_client_dir()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, dir=root) as f:
        json.dump(plan, f)
    proc = await asyncio.create_subprocess_exec(
        "node", str(root / DRIVER.name), f.name, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    report: Any = None
    try:
        async with asyncio.timeout(timeout):
            async for raw in proc.stdout:
                line = raw.decode().rstrip("\n")
                if line.startswith("PROGRESS ") and on_progress is not None:
                    result = on_progress(json.loads(line[9:]))
                    if asyncio.iscoroutine(result):
                        await result
                elif line.startswith("REPORT "):
                    report = json.loads(line[7:])
            err = await proc.stderr.read()
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        Path(f.name).unlink(missing_ok=True)
    assert report is not None, f"the AG-UI client printed no report (exit {proc.returncode}): {err.decode()[-3000:]}"
    return report


class Processes(ProcessGroup):
    """Console and worker processes (``python -m temporal_workflows ...``); those still running are killed on exit."""

    def __init__(self, address: str, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.address = address

    async def _start(self, name: str, *args: str, ready: re.Pattern[str]) -> re.Match[str]:
        log = (self.tmp_path / f"{name}.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "temporal_workflows",
            *args,
            cwd=ROOT,
            env=cli_env(self.address),
            stdout=subprocess.PIPE,
            stderr=log,
        )
        log.close()
        self.procs[name] = proc
        assert proc.stdout is not None
        async with asyncio.timeout(READY):
            while True:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    raise AssertionError(f"{name} exited before it was ready: {self.log(name)}")
                found = ready.search(line)
                if found is not None:
                    return found

    async def console(self, name: str, *args: str) -> str:
        """Start ``temporal-workflows console --port 0 ARGS``; its base URL."""
        found = await self._start(name, "console", "--port", "0", *args, ready=re.compile(r"console on (http://\S+)"))
        return found.group(1)

    async def worker(self, name: str, *args: str) -> None:
        """Start ``temporal-workflows worker ARGS``; returns once it says what it hosts."""
        await self._start(name, "worker", *args, ready=re.compile(r"worker on task queue"))

    async def kill(self, name: str) -> None:
        """``kill -9``."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), READY)

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")[-4000:]
