"""README.md, followed as a person follows it: every block, in order, from the installed wheel, in one empty directory.

The checkout's wheel is built and installed, with the extras the README's
set-up names, into a fresh virtualenv (``tests/wheel_check.py``'s user
environment: nothing of the checkout on the path, no Temporal profile), and
``TEMPORAL_ADDRESS`` points at the session's dev server. Then, in order:

- every ```python block runs with that virtualenv's ``python snippet.py``; it
  must exit 0 (top-level ``await`` is a ``SyntaxError`` there, as it would be
  for the reader);
- every ```bash block runs line by line, as a person types it: the
  ``temporal-workflows`` / ``python -m temporal_workflows`` and ``temporal``
  commands as written, with the virtualenv's programs; ``<request-id>``,
  ``<checkpoint-id>`` and ``<workflow-id>`` are what the reader copies from
  the output before (the run's pending request, its latest checkpoint, the
  run just started); ``temporal-workflows dev --workflow ...`` is the
  session's server with a ``temporal-workflows worker`` hosting those graphs
  (started again when the list changes), and ``run`` without ``--no-wait``
  follows the run until it ends or says it waits, then gets Ctrl-C, as the
  README says. A command this test does not know fails it.

So a step that needs a run waiting works only if the README's own words
started one. An HTML comment right before a block may only say what it is:

- ``<!-- file: NAME.py -->``: the reader saves the block as ``NAME.py`` (later
  blocks import it). A ``test_*.py`` file also runs under ``pytest``.
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
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client

from temporal_workflows.temporal import get_run
from tests.wheel_check import ROOT, build_dist, user_env

README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*([\w-]+)\s*:\s*(.*?)\s*-->$")
EXTRAS = "all"
"""What the README has the reader install first, one line for everything (with pytest and pytest-asyncio for the
test example): ``test_the_readme_installs_everything_in_one_line`` keeps the two the same."""


@dataclass
class Snippet:
    """One ```python or ```bash block of the README and what the comments before it say."""

    index: int
    line: int
    heading: str
    code: str
    markers: dict[str, str] = field(default_factory=dict)
    lang: str = "python"

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
        if fence.group(1) in ("python", "bash"):
            markers: dict[str, str] = {}
            k = i - 1
            while k >= 0 and (not lines[k].strip() or _MARKER.match(lines[k].strip())):
                marker = _MARKER.match(lines[k].strip())
                if marker:
                    markers[marker.group(1)] = marker.group(2)
                k -= 1
            code = "\n".join(lines[i + 1 : end]) + "\n"
            found.append(Snippet(len(found), i + 1, heading, code, markers, fence.group(1)))
        i = end + 1
    return found


SNIPPETS = snippets(README.read_text())


def test_the_readme_has_snippets_and_every_marker_is_known() -> None:
    assert len(SNIPPETS) >= 5
    for snippet in SNIPPETS:
        # No marker sets anything up: what a block needs, the README's words (and blocks) do.
        unknown = set(snippet.markers) - {"file", "no-run", "notebook"}
        assert not unknown, f"{snippet.id}: unknown marker(s) {unknown}"
        if "no-run" in snippet.markers:
            assert snippet.markers["no-run"], f"{snippet.id}: a no-run marker needs a reason"
        if "file" in snippet.markers:
            assert snippet.lang == "python" and re.fullmatch(r"\w+\.py", snippet.markers["file"]), snippet.markers
        assert "examples" not in snippet.code, f"{snippet.id}: the examples package is not installed with the wheel"


def test_the_parser_reads_markers_and_code() -> None:
    text = "# T\n\n<!-- no-run: needs an API key -->\n```python\nx = 1\n```\n\n```bash\nls\n```\n```python\ny\n```\n"
    first, shell, second = snippets(text)
    assert first.markers == {"no-run": "needs an API key"} and first.code == "x = 1\n" and first.heading == "T"
    assert (shell.lang, shell.code) == ("bash", "ls\n")
    assert second.markers == {} and second.line == 11 and second.lang == "python"


@dataclass
class Reader:
    """A reader of the README: the installed wheel's virtualenv, an empty directory, and what runs in it."""

    bin: Path
    env: dict[str, str]
    home: Path
    worker: subprocess.Popen[str] | None = None
    worker_spec: str = ""
    last_run: str = ""
    """The run the reader started last (what ``<workflow-id>`` stands for)."""

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
    if snippet.lang == "bash":
        for line, argv in _commands(snippet.code):
            await _shell(reader, client, argv, f"README line {snippet.line} ({snippet.heading}): {line}")
        return
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


def _commands(code: str) -> Iterator[tuple[str, list[str]]]:
    """Each command line of a shell block (continuations joined), as the shell splits it, comments left out."""
    for line in code.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            yield line.strip(), argv


_PROGRAMS = {"temporal-workflows", "temporal", "python", "pip"}


async def _placeholders(client: Client, reader: Reader, argv: list[str]) -> list[str]:
    """``argv`` with what the reader copies from the output before in place of ``<request-id>`` and friends."""

    def run_named() -> str:
        for flag in ("--workflow-id", "--from"):
            if flag in argv:
                return argv[argv.index(flag) + 1]
        return argv[2]  # `respond ID ...`, `reset ID ...`

    out: list[str] = []
    for arg in argv:
        if "<request-id>" in arg:
            handle = get_run(client, run_named())
            for _ in range(150):  # the request the reader saw listed (a rework asks again after a moment)
                pending = await handle.pending_requests()
                if pending:
                    break
                await asyncio.sleep(0.2)
            assert pending, f"{run_named()} has no pending request to answer"
            arg = arg.replace("<request-id>", pending[0].request_id)
        if "<checkpoint-id>" in arg:
            listed = await get_run(client, run_named()).checkpoints()
            assert listed, f"{run_named()} has no checkpoint"
            arg = arg.replace("<checkpoint-id>", listed[-1]["checkpoint_id"])
        if "<workflow-id>" in arg:
            assert reader.last_run, "no run was started before"
            arg = arg.replace("<workflow-id>", reader.last_run)
        out.append(arg)
    return out


async def _shell(reader: Reader, client: Client, argv: list[str], where: str) -> None:
    """One command of a shell block, as the reader runs it (see the module)."""
    assert argv[0] in _PROGRAMS, f"{where}: a command this test does not run; mark the block no-run, or add it"
    if argv[0] == "pip":
        extras = set(re.findall(r"\[([\w,-]+)\]", " ".join(argv))[0].split(",")) if "[" in " ".join(argv) else set()
        assert extras <= {EXTRAS} | set(_extras_in_all()), f"{where}: installs what the set-up does not"
        return
    if argv[0] == "python" and argv[1].endswith(".py"):
        code, out, err = await _run(reader, reader.python, "-c", _AS_MAIN, *argv[1:])
        assert code == 0, f"{where}:\n{err[-3000:]}"
        return
    if argv[0] == "python":
        assert argv[1:3] == ["-m", "temporal_workflows"], where
        argv = ["temporal-workflows", *argv[3:]]
    if argv[0] == "temporal-workflows" and argv[1] in ("dev", "worker"):
        # The session's server stands in for dev's; a worker of the virtualenv hosts the graphs named.
        await reader.host(" ".join(argv[i + 1] for i, a in enumerate(argv) if a == "--workflow"))
        return
    argv = await _placeholders(client, reader, argv)
    program = str(reader.bin / argv[0])
    if argv[0] == "temporal-workflows" and argv[1] == "run" and "--no-wait" not in argv:
        code, out, err = await _follow_until_waiting(reader, [program, *argv[1:]])
        assert code in (0, 130), f"{where}: exit {code}\n{out[-2000:]}\n{err[-2000:]}"
    else:
        code, out, err = await _run(reader, program, *argv[1:])
        assert code == 0, f"{where}: exit {code}\n{out[-2000:]}\n{err[-3000:]}"
    started = re.search(r"^started (\S+)", out, re.M)
    if started:
        reader.last_run = started.group(1)


async def _follow_until_waiting(reader: Reader, argv: list[str]) -> tuple[int, str, str]:
    """``run`` following its run: until the run ends, or says it waits (then Ctrl-C, as the README says)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=reader.home, env=reader.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(180):
            while line := (await proc.stdout.readline()).decode():
                seen.append(line)
                if "waiting for an answer:" in line:
                    proc.send_signal(signal.SIGINT)  # the run goes on waiting
                    break
            rest, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode is not None
    return proc.returncode, "".join(seen) + rest.decode(), err.decode()


def _extras_in_all() -> list[str]:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return re.findall(r"temporal-workflows\[([\w,-]+)\]", extras["all"][0])[0].split(",")


def test_the_readme_installs_everything_in_one_line() -> None:
    """The set-up's one ``pip install`` names ``[all]``, and ``[all]`` holds every extra a later section uses."""
    text = README.read_text()
    first = re.search(r"^pip install '([\w-]+)\[([\w,-]+)\]'", text, re.M)
    assert first is not None and first.group(2) == EXTRAS
    everything = set(_extras_in_all())
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
