"""Every Python snippet of README.md runs as written, as a reader would run it: ``python snippet.py``.

Each ```python block is written to a file in a fresh directory and run with
this interpreter, the checkout importable (``examples``), ``TEMPORAL_ADDRESS``
pointing at the session's dev server, and, on the default task queue, a
worker hosting the examples (what the README's ``temporal-workflows dev
--workflow ...`` starts). A block must exit 0; top-level ``await`` is a
``SyntaxError`` there, as it would be for the reader.

An HTML comment right before a block says more about it:

- ``<!-- file: NAME.py -->``: the block is also a module later blocks import
  (``from research_demo import workflow``): it is saved as ``NAME.py`` for
  every block after it.
- ``<!-- before: start MODULE:ATTR as ID -->``: before the block runs, a run of
  that graph with its module's ``SAMPLE_INPUT`` is started as ``ID`` and waits
  for input, as the block's comment tells the reader to do.
- ``<!-- no-run: REASON -->``: the block is not run; the reason is required
  and is shown as the test's skip reason. Nothing else skips a block.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_workflows.temporal import DEFAULT_TASK_QUEUE, get_run, start_run
from tests.integration.cli import ROOT, cli_env
from tests.integration.runs import terminate_if_running

README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*([\w-]+)\s*:\s*(.*?)\s*-->$")
_START = re.compile(r"^start ([\w.]+):(\w+) as ([\w-]+)$")


@dataclass
class Snippet:
    """One ```python block of the README and what the comments before it say."""

    index: int
    line: int
    heading: str
    code: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"{self.index}-{slug}-line{self.line}"


def snippets(text: str) -> list[Snippet]:
    """The README's Python blocks with their markers, in order."""
    found: list[Snippet] = []
    lines = text.splitlines()
    heading, i = "top", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        fence = _FENCE.match(line)
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) == "python":
            markers: dict[str, str] = {}
            k = i - 1
            while k >= 0 and (not lines[k].strip() or _MARKER.match(lines[k].strip())):
                marker = _MARKER.match(lines[k].strip())
                if marker:
                    markers[marker.group(1)] = marker.group(2)
                k -= 1
            found.append(Snippet(len(found), i + 1, heading, "\n".join(lines[i + 1 : end]) + "\n", markers))
        i = end + 1
    return found


SNIPPETS = snippets(README.read_text())


def test_the_readme_has_snippets_and_every_marker_is_known() -> None:
    assert len(SNIPPETS) >= 5
    for snippet in SNIPPETS:
        unknown = set(snippet.markers) - {"file", "before", "no-run"}
        assert not unknown, f"{snippet.id}: unknown marker(s) {unknown}"
        if "no-run" in snippet.markers:
            assert snippet.markers["no-run"], f"{snippet.id}: a no-run marker needs a reason"
        if "before" in snippet.markers:
            assert _START.match(snippet.markers["before"]), f"{snippet.id}: {snippet.markers['before']!r}"
        if "file" in snippet.markers:
            assert re.fullmatch(r"\w+\.py", snippet.markers["file"]), snippet.markers["file"]


def test_the_parser_reads_markers_and_code() -> None:
    text = "# T\n\n<!-- no-run: needs an API key -->\n```python\nx = 1\n```\n\n```bash\nls\n```\n```python\ny\n```\n"
    first, second = snippets(text)
    assert first.markers == {"no-run": "needs an API key"} and first.code == "x = 1\n" and first.heading == "T"
    assert second.markers == {} and second.line == 11


@pytest.fixture(scope="module")
async def readme_worker(client: Client) -> AsyncIterator[Worker]:
    """The worker the README's bash block starts: the examples on the default task queue."""
    async with Worker(client, task_queue=DEFAULT_TASK_QUEUE) as w:
        yield w


async def _waiting_run(client: Client, spec: str) -> str:
    match = _START.match(spec)
    assert match, spec
    module_name, attr, workflow_id = match.groups()
    module = importlib.import_module(module_name)  # an example module the README names
    graph, message = getattr(module, attr), module.SAMPLE_INPUT
    await terminate_if_running(client.get_workflow_handle(workflow_id))
    await start_run(client, graph, message, id=workflow_id, task_queue=DEFAULT_TASK_QUEUE)
    handle = get_run(client, workflow_id)
    for _ in range(150):
        if await handle.pending_requests():
            return workflow_id
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id} never waited for input")


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
async def test_the_snippet_runs_as_written(
    snippet: Snippet, tmp_path: Path, client: Client, temporal_address: str, readme_worker: Worker
) -> None:
    if "no-run" in snippet.markers:
        pytest.skip(f"README line {snippet.line}: {snippet.markers['no-run']}")
    for earlier in SNIPPETS[: snippet.index]:
        if "file" in earlier.markers:
            (tmp_path / earlier.markers["file"]).write_text(earlier.code)
    if "before" in snippet.markers:
        await _waiting_run(client, snippet.markers["before"])
    script = tmp_path / snippet.markers.get("file", f"snippet_{snippet.index}.py")
    script.write_text(snippet.code)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        script.name,
        cwd=tmp_path,
        env=cli_env(temporal_address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 0, f"README line {snippet.line} ({snippet.heading}):\n{err.decode()[-3000:]}"
    expected = re.search(r"print\((.+)\)\s*#\s*(\[.*\])\s*$", snippet.code, re.M)
    if expected:  # a printed value the snippet shows in a comment must be what it prints
        assert expected.group(2) in out.decode(), out.decode()
