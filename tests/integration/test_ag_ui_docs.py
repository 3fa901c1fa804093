"""``docs/ag-ui.md``'s ``@ag-ui/client`` example, run as written against a console and a worker process."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import uuid
from pathlib import Path

from examples.agents import WRITER_TEXT
from tests.integration.ag_ui_support import Processes, ag_ui_client_dir
from tests.integration.cli import ROOT

DOC = ROOT / "docs" / "ag-ui.md"


def _snippet() -> str:
    text = DOC.read_text()
    found = re.search(r"<!-- test: docs/ag-ui.md client -->\n```js\n(.*?)```", text, re.S)
    assert found is not None, "docs/ag-ui.md lost its tested client example"
    return found.group(1)


async def test_the_documented_client_streams_asks_and_finishes(temporal_address: str, tmp_path: Path) -> None:
    root = ag_ui_client_dir()
    script = root / f"docs-client-{uuid.uuid4().hex[:6]}.mjs"
    script.write_text(_snippet())
    queue = f"ag-ui-docs-{uuid.uuid4().hex[:6]}"
    try:
        async with Processes(temporal_address, tmp_path) as procs:
            graph = ("--workflow", "examples.agents:workflow", "--task-queue", queue)
            _, url = await asyncio.gather(procs.worker("worker", *graph), procs.console("console", *graph))
            env = {**os.environ, "AG_UI_URL": f"{url}/ag-ui/agents", "THREAD": f"docs-{uuid.uuid4().hex[:8]}"}
            proc = await asyncio.create_subprocess_exec(
                "node", str(script), cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            out, err = await asyncio.wait_for(proc.communicate(), 180)
    finally:
        script.unlink(missing_ok=True)
    printed = out.decode()
    assert proc.returncode == 0, err.decode()[-3000:]
    asked = printed.index("Approve publish(")
    assert printed.index(WRITER_TEXT) < asked < printed.index("Clear and accurate; I published")
