"""Run ``python -m temporal_workflows`` (or ``worker.py``) as a separate process, as a user would."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

ROOT = Path(__file__).parents[2]


def cli_env(address: str | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a CLI process gets: this checkout importable from any directory, no stray settings.

    ``TEMPORAL_ADDRESS`` is the session's server when ``address`` is given;
    a Temporal config file in the tester's home is never read
    (``TEMPORAL_CONFIG_FILE`` names one that does not exist unless ``env``
    names another).
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_") or k.startswith("TEMPORAL_WORKFLOWS")}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    base["TEMPORAL_CONFIG_FILE"] = str(ROOT / ".temporal" / "no-such-temporal-config.toml")
    if address is not None:
        base["TEMPORAL_ADDRESS"] = address
    return {**base, **(env or {})}


async def run_cli(
    address: str | None, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one CLI command against the server at ``address``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        *args,
        env=cli_env(address, env),
        cwd=cwd or ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


class ProcessGroup:
    """Processes a test starts, by name (workers, consoles); every one still running is killed on exit."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
