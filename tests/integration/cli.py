"""Run ``python -m temporal_workflows`` as a separate process, as a user would."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


async def run_cli(address: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one CLI command against the server at ``address``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        *args,
        env={**os.environ, "TEMPORAL_ADDRESS": address, **(env or {})},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
