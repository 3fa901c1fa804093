"""The Docker deployment: docker-compose.yml, Dockerfile and .dockerignore.

Docker does not run here, so the compose file is parsed and its services,
images, ports, dependencies and health checks are checked; the Dockerfile's
entry point is parsed with worker.py's own argument parser and the graphs it
names are imported. The worker's command and the compose health check are then
run as processes against a local dev server. Where the ``docker compose``
plugin exists, ``docker compose config`` validates the file as well.
"""

from __future__ import annotations

import asyncio
import fnmatch
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from temporalio.testing import WorkflowEnvironment

from temporal_workflows import Workflow, load_workflow
from temporal_workflows.temporal._client.devserver import free_port, temporal_cli_path
from temporal_workflows.temporal.integration import STATUS_SEARCH_ATTRIBUTE

ROOT = Path(__file__).parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

FRONTEND_PORT = 7233
UI_PORT = 8080
SERVICES = {"postgresql", "temporal", "temporal-admin-tools", "temporal-ui", "worker"}

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}: compose interpolation.
_INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), "no services in docker-compose.yml"
    return data


def _services() -> dict[str, dict[str, Any]]:
    return _compose()["services"]  # type: ignore[no-any-return]


def _resolve(value: str) -> str:
    """Interpolate as compose does with no variables set: defaults, else empty."""
    unescaped = value.replace("$$", "\0")

    def sub(m: re.Match[str]) -> str:
        if m.group("op") in (":-", "-"):
            return m.group("arg")
        return ""

    return _INTERPOLATION.sub(sub, unescaped).replace("\0", "$")


def _env(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = [item.split("=", 1) if "=" in item else [item, ""] for item in raw]
        return {k: v for k, v in pairs}
    return {k: "" if v is None else str(v) for k, v in raw.items()}


def _ports(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, published port, container port) of each published port."""
    out = []
    for spec in service.get("ports") or []:
        if isinstance(spec, dict):
            out.append((str(spec.get("host_ip", "")), int(spec["published"]), int(spec["target"])))
            continue
        parts = str(spec).split("/")[0].rsplit(":", 2)
        if len(parts) == 1:
            continue  # container port only: published on a random host port
        host_ip = parts[0] if len(parts) == 3 else ""
        out.append((host_ip, int(parts[-2]), int(parts[-1])))
    return out


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


def _one_shots(services: dict[str, dict[str, Any]]) -> set[str]:
    """Services others wait to *complete*: set-up steps, not long-running."""
    return {
        name
        for svc in services.values()
        for name, condition in _depends_on(svc).items()
        if condition == "service_completed_successfully"
    }


def _seconds(duration: str | int | float) -> float:
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"bad duration {duration!r}"
    return sum(float(n) * units[u] for n, u in parts)


def _command_text(service: dict[str, Any]) -> str:
    parts = []
    for key in ("entrypoint", "command"):
        value = service.get(key) or []
        parts += value if isinstance(value, list) else [value]
    return "\n".join(str(p) for p in parts)


# -- Dockerfile ------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, with continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        instr, _, args = full.partition(" ")
        out.append((instr.upper(), args.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


def _exec_form(instr: str) -> list[str]:
    found = [args for name, args in _instructions() if name == instr]
    assert found, f"the Dockerfile has no {instr}"
    args = found[-1]  # the last one wins
    assert args.startswith("["), f"{instr} must use the exec (JSON) form so the worker gets SIGTERM: {args}"
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def _container_command() -> list[str]:
    """What the container runs: ENTRYPOINT followed by CMD (both exec form)."""
    has_entrypoint = any(name == "ENTRYPOINT" for name, _ in _instructions())
    return (_exec_form("ENTRYPOINT") if has_entrypoint else []) + _exec_form("CMD")


def _worker_argv() -> list[str]:
    """worker.py's arguments in the container command."""
    command = _container_command()
    assert len(command) >= 2 and re.fullmatch(r"python(3(\.\d+)?)?", command[0]), command
    assert command[1] == "worker.py", f"the container does not run worker.py: {command}"
    return command[2:]


def _worker_args() -> Any:
    worker = importlib.import_module("worker")
    return worker.parse_args(_worker_argv())


def _copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY from the build context."""
    out = []
    for name, args in _instructions():
        if name not in ("COPY", "ADD"):
            continue
        words = [w for w in args.split() if not w.startswith("--")]
        assert not any(a.startswith("--from") for a in args.split()), "no multi-stage COPY expected"
        out.append((words[:-1], words[-1]))
    return out


# -- compose: services, images, ports --------------------------------------------


def test_compose_has_the_services() -> None:
    assert set(_services()) >= SERVICES


def test_images_are_pinned() -> None:
    services = _services()
    expected_repos = {
        "postgresql": "postgres",
        "temporal": "temporalio/auto-setup",
        "temporal-admin-tools": "temporalio/admin-tools",
        "temporal-ui": "temporalio/ui",
    }
    for name, repo in expected_repos.items():
        image = _resolve(str(services[name].get("image", "")))
        assert "@" not in image, image
        repository, sep, tag = image.rpartition(":")
        assert sep and "/" not in tag, f"{name}: image {image!r} has no tag"
        assert repository == repo, f"{name}: expected {repo}, got {image!r}"
        assert tag != "latest" and re.match(r"\d+(\.\d+)*\b", tag), f"{name}: {image!r} is not pinned to a version"
    # Temporal images pinned to a full release; the tools match the server they set up.
    server_tag = _resolve(services["temporal"]["image"]).rpartition(":")[2]
    assert re.fullmatch(r"\d+\.\d+\.\d+", server_tag), server_tag
    tools_tag = _resolve(services["temporal-admin-tools"]["image"]).rpartition(":")[2]
    assert tools_tag.split("-")[0] == server_tag, (tools_tag, server_tag)
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, f"{name} has neither image nor build"
        image = _resolve(str(svc.get("image", "")))
        assert not image.endswith(":latest"), f"{name}: {image}"


def test_frontend_and_ui_are_published() -> None:
    services = _services()
    temporal_ports = _ports(services["temporal"])
    ui_ports = _ports(services["temporal-ui"])
    assert any(pub == FRONTEND_PORT and target == FRONTEND_PORT for _, pub, target in temporal_ports), temporal_ports
    assert any(pub == UI_PORT and target == UI_PORT for _, pub, target in ui_ports), ui_ports
    # No authentication on either: loopback only, and the database is not published at all.
    for host_ip, _, _ in temporal_ports + ui_ports:
        assert host_ip in ("127.0.0.1", "localhost", "[::1]"), f"published beyond loopback: {host_ip or '0.0.0.0'}"
    assert not _ports(services["postgresql"]), "PostgreSQL need not be reachable from outside"


def test_ui_and_tools_talk_to_the_frontend() -> None:
    services = _services()
    for name in ("temporal-ui", "temporal-admin-tools"):
        assert _env(services[name]).get("TEMPORAL_ADDRESS") == f"temporal:{FRONTEND_PORT}", name


# -- compose: the worker ---------------------------------------------------------


def test_worker_is_built_from_the_dockerfile_with_two_replicas() -> None:
    worker = _services()["worker"]
    build = worker["build"]
    if isinstance(build, str):
        build = {"context": build}
    context = (ROOT / build.get("context", ".")).resolve()
    assert context == ROOT.resolve(), context
    assert (context / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE.resolve()
    assert DOCKERFILE.is_file()
    assert worker.get("deploy", {}).get("replicas") == 2
    # Replicas can only be scaled without a fixed container name or host ports.
    assert "container_name" not in worker
    assert not _ports(worker)


def test_worker_environment() -> None:
    compose = _compose()
    worker = compose["services"]["worker"]
    env = _env(worker)
    assert env.get("TEMPORAL_ADDRESS") == f"temporal:{FRONTEND_PORT}"
    # The trace endpoint comes from the caller's environment, empty (no export) by default.
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    m = _INTERPOLATION.fullmatch(endpoint)
    assert m and m.group("name") == "OTEL_EXPORTER_OTLP_ENDPOINT", f"not configurable: {endpoint!r}"
    assert m.group("op") in (None, ":-", "-")  # never required: `docker compose up` works without it
    # The checkpoint store lives on a named volume.
    db = PurePosixPath(env["TEMPORAL_WORKFLOWS_CHECKPOINT_DB"])
    mounts = {}
    for vol in worker.get("volumes") or []:
        if isinstance(vol, dict):
            mounts[PurePosixPath(vol["target"])] = str(vol.get("source", ""))
        else:
            source, target = str(vol).split(":")[:2]
            mounts[PurePosixPath(target)] = source
    [volume] = [src for target, src in mounts.items() if db.is_relative_to(target)]
    assert volume in (compose.get("volumes") or {}), f"{volume!r} is not a named volume"


def test_worker_shuts_down_gracefully() -> None:
    worker = _services()["worker"]
    assert worker.get("stop_signal", "SIGTERM") in ("SIGTERM", "TERM", 15)
    grace = _seconds(worker.get("stop_grace_period", "10s"))  # compose's default is 10 s
    assert grace > _worker_args().graceful_shutdown, "Docker would kill the worker before in-flight steps finish"
    assert str(worker.get("restart", "no")) in ("always", "unless-stopped", "on-failure")


def test_status_search_attribute_is_registered_before_workers_start() -> None:
    services = _services()
    script = _command_text(services["temporal-admin-tools"])
    assert "search-attribute create" in script
    assert f"--name {STATUS_SEARCH_ATTRIBUTE}" in script
    assert "--type Keyword" in script
    assert _depends_on(services["worker"]).get("temporal-admin-tools") == "service_completed_successfully"


def test_database_wiring() -> None:
    services = _services()
    pg, temporal = _env(services["postgresql"]), _env(services["temporal"])
    assert temporal["DB"] == "postgres12"
    assert temporal["POSTGRES_SEEDS"] == "postgresql"
    assert temporal["POSTGRES_USER"] == pg["POSTGRES_USER"]
    assert temporal["POSTGRES_PWD"] == pg["POSTGRES_PASSWORD"]
    assert temporal.get("DB_PORT", "5432") == "5432"


# -- compose: start order and health ----------------------------------------------


def test_start_order() -> None:
    services = _services()
    assert _depends_on(services["temporal"]).get("postgresql") == "service_healthy"
    assert _depends_on(services["temporal-admin-tools"]).get("temporal") == "service_healthy"
    assert _depends_on(services["temporal-ui"]).get("temporal") == "service_healthy"
    assert _depends_on(services["worker"]).get("temporal") == "service_healthy"
    for name, svc in services.items():
        for dep, condition in _depends_on(svc).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy, which has no check"


def test_long_running_services_have_health_checks() -> None:
    services = _services()
    one_shots = _one_shots(services)
    assert one_shots == {"temporal-admin-tools"}
    for name, svc in services.items():
        if name in one_shots:
            assert str(svc.get("restart", "no")) in ("no", "on-failure") or str(svc["restart"]).startswith("on-failure")
            continue
        check = svc.get("healthcheck") or {}
        test = check.get("test")
        assert test and not check.get("disable"), f"{name} has no health check"
        assert isinstance(test, str) or test[0] in ("CMD", "CMD-SHELL"), f"{name}: {test}"
        assert test != ["NONE"], name


def test_worker_health_check_watches_the_task_queue_the_worker_polls() -> None:
    check = _services()["worker"]["healthcheck"]["test"]
    assert check[:3] == ["CMD", "python", "-c"]
    assert f'TaskQueue(name="{_worker_args().task_queue}")' in check[3]


# -- Dockerfile --------------------------------------------------------------------


def test_dockerfile_base_user_and_install() -> None:
    instructions = _instructions()
    froms = [args for name, args in instructions if name == "FROM"]
    assert froms and re.match(r"python:3\.11(\.\d+)?(-slim[\w-]*)?(\s|$)", froms[-1]), froms
    users = [args for name, args in instructions if name == "USER"]
    assert users, "the worker would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    runs = " && ".join(args for name, args in instructions if name == "RUN")
    assert re.search(r"pip install [^&]*\.\[[^\]]*\botlp\b", runs), "the OTLP exporter is not installed"
    # The checkpoint directory exists and belongs to that user, so a fresh named volume does too.
    db_dir = str(PurePosixPath(_env(_services()["worker"])["TEMPORAL_WORKFLOWS_CHECKPOINT_DB"]).parent)
    assert re.search(rf"chown\s+(-\S+\s+)*{re.escape(user)}(:\S+)?\s+{re.escape(db_dir)}\b", runs), runs


def test_dockerfile_copies_what_the_worker_needs() -> None:
    copied = {PurePosixPath(src).as_posix().rstrip("/") for srcs, _ in _copies() for src in srcs}
    assert {"worker.py", "temporal_workflows", "examples", "pyproject.toml"} <= copied, copied
    assert "activities" not in copied  # not installed: the activities live in temporal_workflows.temporal
    for srcs, dest in _copies():
        for src in srcs:
            assert (ROOT / src).exists(), f"COPY {src}: not in the build context"
        # Paths in /app mirror the repository, so worker.py imports examples as it does here.
        if len(srcs) == 1 and not dest.endswith("/") and dest not in (".", "./"):
            assert PurePosixPath(dest).name == PurePosixPath(srcs[0]).name, (srcs, dest)


def test_dockerignore_keeps_local_state_out_but_not_what_is_copied() -> None:
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        result = False
        parts = PurePosixPath(path).parts
        for pattern in patterns:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").strip("/")
            prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            if any(fnmatch.fnmatchcase(p, pat) or fnmatch.fnmatchcase(p, pat.removeprefix("**/")) for p in prefixes):
                result = not negate
        return result

    for name in (".venv", ".git", ".temporal", ".mypy_cache", "tests/histories", "temporal_workflows/__pycache__"):
        assert ignored(name), f"{name} would be sent to the Docker daemon"
    for srcs, _ in _copies():
        for src in srcs:
            assert not ignored(src.rstrip("/")), f"COPY {src} but .dockerignore excludes it"
            for file in (ROOT / src).rglob("*.py") if (ROOT / src).is_dir() else []:
                rel = file.relative_to(ROOT).as_posix()
                assert "__pycache__" in rel or not ignored(rel), f"{rel} is excluded"


def test_dockerfile_command_hosts_importable_named_graphs() -> None:
    args = _worker_args()
    assert not args.dev, "the container connects to TEMPORAL_ADDRESS; no dev server inside"
    assert args.workflow, "the worker hosts no graph"
    names = []
    for spec in args.workflow:
        wf = load_workflow(spec)
        assert isinstance(wf, Workflow)
        assert wf.name, f"{spec} has no name, so it cannot be a workflow type"
        names.append(wf.name)
    assert len(names) == len(set(names)), names


def test_docker_compose_config_validates() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("docker CLI without the compose plugin")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE_FILE), "config", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


# -- the container's command and health check, as processes ---------------------


@pytest.fixture(scope="module")
async def fresh_server() -> AsyncIterator[str]:
    """A dev server of its own: no other test's worker polls its default task queue, and
    no search attribute is pre-registered (as on a new cluster)."""
    env = await WorkflowEnvironment.start_local(
        ip="127.0.0.1",
        port=free_port(),
        dev_server_existing_path=temporal_cli_path(),
        dev_server_log_level="error",
    )
    yield env.client.service_client.config.target_host
    await env.shutdown()


async def _run(argv: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_container_command_serves_runs_and_health_check_sees_it(fresh_server: str, tmp_path: Path) -> None:
    worker_svc = _services()["worker"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OTEL_"))}
    env |= {k: _resolve(v) for k, v in _env(worker_svc).items()}  # as compose passes it: OTLP endpoint empty
    env |= {"TEMPORAL_ADDRESS": fresh_server, "TEMPORAL_WORKFLOWS_CHECKPOINT_DB": str(tmp_path / "checkpoints.sqlite")}
    check = [sys.executable, *worker_svc["healthcheck"]["test"][2:]]
    check_timeout = _seconds(worker_svc["healthcheck"].get("timeout", "30s"))

    code, out = await _run(check, env, check_timeout)
    assert code == 1, f"healthy with no worker polling: {out}"

    command = _container_command()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *command[1:], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert b"hosting:" in line, line
        for _ in range(20):
            code, out = await _run(check, env, check_timeout)
            if code == 0:
                break
            await asyncio.sleep(0.5)
        assert code == 0, out

        # The run command docs/deployment.md shows, against this worker's default task queue.
        code, out = await _run(
            [
                sys.executable,
                "-m",
                "temporal_workflows",
                "--address",
                fresh_server,
                "run",
                "examples.research:workflow",
                "--input",
                '{"topic": "durable execution"}',
            ],
            env,
        )
        assert code == 0, out
        assert "durable execution" in out

        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), _seconds(worker_svc["stop_grace_period"]))
        assert proc.returncode == 0, rest
        assert b"shutting down" in rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_search_attribute_step_runs_and_is_idempotent(fresh_server: str) -> None:
    """The one-shot set-up script, run by sh with the `temporal` CLI, as the container runs it."""
    tools = _services()["temporal-admin-tools"]
    entrypoint, command = tools["entrypoint"], tools["command"]
    assert entrypoint == ["/bin/sh", "-c"] and len(command) == 1
    script = _resolve(command[0])  # $$ -> $, as compose passes it
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env |= {k: _resolve(v) for k, v in _env(tools).items()} | {"TEMPORAL_ADDRESS": fresh_server}
    env["PATH"] = str(Path(temporal_cli_path()).parent) + os.pathsep + env.get("PATH", "")
    sh = shutil.which("sh")
    assert sh is not None

    code, first = await _run([sh, "-c", script], env)
    assert code == 0, first
    code, second = await _run([sh, "-c", script], env)
    assert code == 0, second
    code, listed = await _run(
        [temporal_cli_path(), "operator", "search-attribute", "list", "--address", fresh_server], env
    )
    assert code == 0, listed
    if re.search(rf"\b{STATUS_SEARCH_ATTRIBUTE}\b", listed):
        assert f"{STATUS_SEARCH_ATTRIBUTE} is already registered" in second
    else:
        # The server refuses the name (the "Temporal" prefix is reserved): say so, and go on.
        assert "reserved" in first and "WARNING" in first, first
