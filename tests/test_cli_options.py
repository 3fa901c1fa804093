"""The options several commands share are defined once (``_cli/_options.py``, ``ConnectionConfig.add_arguments``).

``--help`` must keep offering what it offered before they were shared: the
same flags, defaults and help on ``console`` and ``codec-server`` (the two
guarded HTTP servers), the same ``--workflow`` on ``console``, ``worker`` and
``dev``, and the same connection flags everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any

import pytest

from temporal_workflows._cli._main import parser

CONNECTION = [
    ("--address", None),
    ("--namespace -n", None),
    ("--profile", None),
    ("--config-file", None),
    ("--tls --no-tls", None),
    ("--tls-cert --tls-cert-path", None),
    ("--tls-key --tls-key-path", None),
    ("--tls-ca --tls-ca-path", None),
    ("--tls-cert-data", None),
    ("--tls-key-data", None),
    ("--tls-ca-data", None),
    ("--tls-server-name", None),
    ("--api-key", None),
    ("--grpc-meta", None),
]
"""The connection flags (their help is checked equal across commands, not spelled here)."""

ORIGINS = "(repeatable; default: http://localhost:8233 http://127.0.0.1:8233)"
ALLOWED_HOST = "a further name clients reach it by, e.g. behind a proxy (repeatable)"
HOST = "interface to bind (default: loopback only)"
ENCODE = "also serve /encode (encrypts whatever it is sent)"

OWN: dict[str, list[tuple[str, str | None, Any]]] = {
    "console": [
        (
            "--workflow",
            "a graph (or a LlamaIndex workflow) to show pictures of and start runs of (repeatable); runs of others "
            "are listed and answered",
            [],
        ),
        ("--host", HOST, "127.0.0.1"),
        ("--port", None, 8080),
        ("--task-queue", "where runs started from the console go", None),
        (
            "--token-file",
            "require this token (bearer header, or the login page's cookie); needed off loopback",
            None,
        ),
        ("--allowed-host", ALLOWED_HOST, []),
        ("--origin", f"Web UI origin allowed to call /decode {ORIGINS}", None),
        ("--allow-encode", ENCODE, False),
        (
            "--allowed-origin",
            "a front end's origin (e.g. https://app.example.com) allowed to call the AG-UI endpoints "
            "/ag-ui/<name> from the browser, with CORS (repeatable; others are refused)",
            [],
        ),
    ],
    "codec-server": [
        ("--host", HOST, "127.0.0.1"),
        ("--port", None, 8081),
        (
            "--token-file",
            "require 'Authorization: Bearer <token>' with the token in FILE (or set TEMPORAL_WORKFLOWS_CODEC_TOKEN)",
            None,
        ),
        ("--allowed-host", ALLOWED_HOST, []),
        ("--origin", f"Web UI origin allowed to call it {ORIGINS}", None),
        ("--allow-encode", ENCODE, False),
    ],
}
"""Each server command's own flags as `--help` showed them before they were shared: flag, help, default."""

WORKFLOW_HOSTED = "a built graph to host, e.g. examples.research:workflow (repeatable)"


def _commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    p = parser("temporal-workflows")
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return p, dict(sub.choices)


def _flags(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {" ".join(a.option_strings): a for a in p._actions if a.option_strings and a.dest != "help"}


def _help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser("temporal-workflows").parse_args(argv)
    return " ".join(out.getvalue().split())


@pytest.mark.parametrize("command", sorted(OWN))
def test_each_server_command_offers_the_flags_help_and_defaults_it_offered(command: str) -> None:
    _, commands = _commands()
    flags = _flags(commands[command])
    own = {name: (a.help, a.default) for name, a in flags.items() if name not in dict(CONNECTION)}
    assert own == {"--debug": ("print tracebacks", argparse.SUPPRESS)} | {
        name: (text, default) for name, text, default in OWN[command]
    }
    shown = _help_text([command, "--help"])
    for name, text, _ in OWN[command]:
        assert f"{name} " in shown
        if text:
            assert text in shown


def test_the_connection_flags_are_the_same_on_every_command_and_at_the_top() -> None:
    top, commands = _commands()
    expected = [name for name, _ in CONNECTION]
    reference = {name: (a.help, a.metavar) for name, a in _flags(top).items() if name in expected}
    assert sorted(reference) == sorted(expected)
    for command, p in commands.items():
        flags = _flags(p)
        assert {name: (flags[name].help, flags[name].metavar) for name in expected} == reference, command
    shown_top, shown_console = _help_text(["--help"]), _help_text(["console", "--help"])
    for name, (text, _) in reference.items():
        assert text and text in shown_top and text in shown_console, name


def test_the_origins_the_help_names_are_the_codec_servers_defaults() -> None:
    from temporal_workflows._cli._options import DEFAULT_ORIGINS
    from temporal_workflows.temporal._client.codec_server import DEFAULT_CODEC_ORIGINS

    assert DEFAULT_ORIGINS == DEFAULT_CODEC_ORIGINS


def test_workflow_is_one_option_on_the_console_worker_and_dev() -> None:
    _, commands = _commands()
    for command, required, text in (
        ("console", False, OWN["console"][0][1]),
        ("worker", True, WORKFLOW_HOSTED),
        ("dev", False, WORKFLOW_HOSTED),
    ):
        action = _flags(commands[command])["--workflow"]
        assert (action.help, action.required, action.metavar, type(action).__name__) == (
            text,
            required,
            "MODULE:ATTR",
            "_AppendAction",
        )
        assert action.default == (None if required else [])
