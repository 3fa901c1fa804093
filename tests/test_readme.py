"""Every Python snippet of README.md runs as written, from the installed wheel, as a reader would run it.

The checkout's wheel is built and installed, with the extras the README
names, into a fresh virtualenv (``tests/wheel_check.py``'s user
environment: nothing of the checkout on the path, no Temporal profile).
Every ```python block then runs in order, in one empty directory, with that
virtualenv's ``python snippet.py`` and ``TEMPORAL_ADDRESS`` pointing at the
session's dev server. A block must exit 0; top-level ``await`` is a
``SyntaxError`` there, as it would be for the reader.

An HTML comment right before a block says more about it:

- ``<!-- file: NAME.py -->``: the reader saves the block as ``NAME.py`` (later
  blocks import it). A ``test_*.py`` file also runs under ``pytest``.
- ``<!-- worker: MODULE:ATTR ... -->``: the README's ``temporal-workflows dev
  --workflow ...`` command is running: a ``temporal-workflows worker`` of the
  virtualenv hosts these graphs on the default task queue (started again when
  the list changes).
- ``<!-- before: start MODULE:ATTR as ID with JSON -->``: before the block
  runs, ``temporal-workflows run MODULE:ATTR --id ID --input JSON`` has
  started a run that now waits for input, as the README tells the reader.
- ``<!-- notebook: REASON -->``: the block is a notebook cell: it runs with
  top-level ``await`` on an event loop, as Jupyter runs a cell, and the value
  of its last line must display (``_repr_mimebundle_``) as SVG or Mermaid.
- ``<!-- no-run: REASON -->``: the block is not run; the reason is required
  and is shown as the test's skip reason. Nothing else skips a block.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client

from temporal_workflows.temporal import get_run
from tests.integration.runs import terminate_if_running
from tests.wheel_check import ROOT, build_dist, user_env

README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*([\w-]+)\s*:\s*(.*?)\s*-->$")
_START = re.compile(r"^start ([\w.]+:\w+) as ([\w-]+) with (\{.*\})$")
_WORKER = re.compile(r"^[\w.]+:\w+( [\w.]+:\w+)*$")
EXTRAS = "all"
"""What the README has the reader install first, one line for everything (with pytest and pytest-asyncio for the
test example): ``test_the_readme_installs_everything_in_one_line`` keeps the two the same."""


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
        unknown = set(snippet.markers) - {"file", "before", "no-run", "worker", "notebook"}
        assert not unknown, f"{snippet.id}: unknown marker(s) {unknown}"
        if "no-run" in snippet.markers:
            assert snippet.markers["no-run"], f"{snippet.id}: a no-run marker needs a reason"
        if "before" in snippet.markers:
            assert _START.match(snippet.markers["before"]), f"{snippet.id}: {snippet.markers['before']!r}"
        if "file" in snippet.markers:
            assert re.fullmatch(r"\w+\.py", snippet.markers["file"]), snippet.markers["file"]
        if "worker" in snippet.markers:
            assert _WORKER.match(snippet.markers["worker"]), f"{snippet.id}: {snippet.markers['worker']!r}"
        assert "examples" not in snippet.code, f"{snippet.id}: the examples package is not installed with the wheel"


def test_the_parser_reads_markers_and_code() -> None:
    text = "# T\n\n<!-- no-run: needs an API key -->\n```python\nx = 1\n```\n\n```bash\nls\n```\n```python\ny\n```\n"
    first, second = snippets(text)
    assert first.markers == {"no-run": "needs an API key"} and first.code == "x = 1\n" and first.heading == "T"
    assert second.markers == {} and second.line == 11


@dataclass
class Reader:
    """A reader of the README: the installed wheel's virtualenv, an empty directory, and what runs in it."""

    bin: Path
    env: dict[str, str]
    home: Path
    worker: subprocess.Popen[str] | None = None
    worker_spec: str = ""

    @property
    def python(self) -> str:
        return str(self.bin / "python")

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin / "temporal-workflows"), *args]
        return subprocess.run(argv, cwd=self.home, env=self.env, capture_output=True, text=True, timeout=timeout)

    async def host(self, spec: str) -> None:
        """A ``temporal-workflows worker`` hosting ``spec``'s graphs, as the README's ``dev`` command runs one."""
        if self.worker is not None and self.worker_spec == spec:
            return
        self.stop_worker()
        args = [arg for s in spec.split() for arg in ("--workflow", s)]
        log = self.home.parent / "worker.log"
        with log.open("w") as out:
            self.worker = subprocess.Popen(
                [str(self.bin / "temporal-workflows"), "worker", *args, "--graceful-shutdown", "1"],
                cwd=self.home,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        self.worker_spec = spec
        for _ in range(300):
            if "worker on task queue" in log.read_text():
                return
            if self.worker.poll() is not None:
                break
            await asyncio.sleep(0.2)
        raise AssertionError(f"the worker for {spec} did not start:\n{log.read_text()[-3000:]}")

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.send_signal(signal.SIGINT)
            try:
                self.worker.wait(30)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()
            self.worker = None


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory, temporal_address: str) -> Iterator[Reader]:
    """The wheel of this checkout, installed into a fresh virtualenv with the README's extras; an empty directory."""
    tmp = tmp_path_factory.mktemp("readme")
    built = build_dist(tmp / "dist")
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = sorted((tmp / "dist").glob("*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    home = tmp / "home"
    home.mkdir()
    env = {**user_env(venv, tmp), "TEMPORAL_ADDRESS": temporal_address}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE"):
        if key in os.environ:
            env[key] = os.environ[key]
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[{EXTRAS}]", "pytest", "pytest-asyncio"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    r = Reader(venv / "bin", env, home)
    try:
        yield r
    finally:
        r.stop_worker()


async def _waiting_run(client: Client, reader: Reader, spec: str) -> None:
    match = _START.match(spec)
    assert match, spec
    target, workflow_id, message = match.groups()
    await terminate_if_running(client.get_workflow_handle(workflow_id))
    started = reader.cli("run", target, "--id", workflow_id, "--input", message, "--no-wait")
    assert started.returncode == 0, started.stdout + started.stderr
    handle = get_run(client, workflow_id)
    for _ in range(150):
        if await handle.pending_requests():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id} never waited for input")


_AS_CELL = """
import ast, asyncio, os, sys
sys.path.insert(0, os.getcwd())
tree = ast.parse(open(sys.argv[1]).read())
last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
ns = {"__name__": "__main__"}

async def cell():
    ran = eval(compile(tree, sys.argv[1], "exec", flags=flags), ns)
    if ran is not None:
        await ran
    if last is not None:  # what the notebook displays: the value of the cell's last line
        shown = eval(compile(ast.Expression(last.value), sys.argv[1], "eval", flags=flags), ns)
        bundle = shown._repr_mimebundle_()
        assert "image/svg+xml" in bundle or "text/vnd.mermaid" in bundle, sorted(bundle)
        print("displayed:", " ".join(sorted(bundle)))

try:
    asyncio.run(cell())
    code = 0
except BaseException:
    import traceback
    traceback.print_exc()
    code = 1
sys.stdout.flush(); sys.stderr.flush()
os._exit(code)
"""
"""Runs a snippet as a Jupyter cell: top-level ``await`` on a running loop, the last line displayed."""


_AS_MAIN = """
import os, runpy, sys, traceback
sys.argv = sys.argv[1:]
sys.path.insert(0, os.getcwd())
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
    code = 0
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
except BaseException:
    traceback.print_exc()
    code = 1
sys.stdout.flush(); sys.stderr.flush()
os._exit(code)
"""
"""Runs a snippet as ``python snippet.py`` would, then leaves without the interpreter's teardown: the SDK's
Rust threads can outlive the event loop and abort a finished process there ("Fatal Python error:
PyGILState_Release ... finalizing", temporalio/sdk-python#300), which is no fault of the snippet."""


async def _run(reader: Reader, *argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=reader.home, env=reader.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 180)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
async def test_the_snippet_runs_as_written(snippet: Snippet, client: Client, reader: Reader) -> None:
    if "no-run" in snippet.markers:
        pytest.skip(f"README line {snippet.line}: {snippet.markers['no-run']}")
    for earlier in SNIPPETS[: snippet.index]:
        if "file" in earlier.markers:
            (reader.home / earlier.markers["file"]).write_text(earlier.code)
    if "worker" in snippet.markers:
        await reader.host(snippet.markers["worker"])
    if "before" in snippet.markers:
        await _waiting_run(client, reader, snippet.markers["before"])
    script = reader.home / snippet.markers.get("file", f"snippet_{snippet.index}.py")
    script.write_text(snippet.code)
    runner = _AS_CELL if "notebook" in snippet.markers else _AS_MAIN
    code, out, err = await _run(reader, reader.python, "-c", runner, script.name)
    assert code == 0, f"README line {snippet.line} ({snippet.heading}):\n{err[-3000:]}"
    expected = re.search(r"print\((.+)\)\s*#\s*(\[.*\])\s*$", snippet.code, re.M)
    if expected:  # a printed value the snippet shows in a comment must be what it prints
        assert expected.group(2) in out, out
    if script.name.startswith("test_"):  # the README's test example, under pytest as the README says
        code, out, err = await _run(reader, reader.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", script.name)
        assert code == 0, out + err
        assert "warning" not in out.lower(), out


def test_the_readme_installs_everything_in_one_line() -> None:
    """The set-up's one ``pip install`` names ``[all]``, and ``[all]`` holds every extra a later section uses."""
    import tomllib

    text = README.read_text()
    first = re.search(r"^pip install '([\w-]+)\[([\w,-]+)\]'", text, re.M)
    assert first is not None and first.group(2) == EXTRAS
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    everything = set(re.findall(r"temporal-workflows\[([\w,-]+)\]", extras["all"][0])[0].split(","))
    named = set(re.findall(r"the `([\w-]+)` extra, in `\[all\]`", text))
    assert named and named <= everything, named - everything
    assert {"dev-server", "testing", "console", "agents", "llama-runtime", "otlp"} <= everything


def test_the_readme_shows_no_checkout_only_command_first() -> None:
    """A reader from PyPI is told to pip install before anything else."""
    first = re.search(r"^```bash\n(.+)$", README.read_text(), re.M)
    assert first is not None and first.group(1).startswith("pip install"), first


async def test_the_agents_example_runs_from_the_wheel_with_no_key(reader: Reader) -> None:
    """``examples/agents.py`` copied on its own next to the README's files: the scripted model, no key, no checkout."""
    (reader.home / "agents_example.py").write_text((ROOT / "examples" / "agents.py").read_text())
    env = {k: v for k, v in reader.env.items() if k != "OPENAI_API_KEY"}
    proc = await asyncio.create_subprocess_exec(
        reader.python, "agents_example.py", cwd=reader.home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert "approval needed: publish" in out.decode() and "published it" in out.decode(), out.decode()
