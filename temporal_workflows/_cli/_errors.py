"""What a newcomer's mistakes look like on the command line: one line, a hint, an exit code.

Every command runs inside :func:`explain`'s mapping: an error a person can fix
(a wrong ``module:attr``, no server at the address, a refused answer) is one
line saying what is wrong and what to do, and never a traceback (``--debug``
shows it). Only errors nobody anticipated print "unexpected error" with the
hint to rerun with ``--debug``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from temporal_workflows._graph.workflow import Workflow, import_user_module, load_workflow

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "CliError",
    "connection_failure",
    "load_graph",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
EXIT_PIPE = 141  # 128 + SIGPIPE, as shells report a reader that went away


class CliError(Exception):
    """A failure the person at the terminal can fix: printed as it is, without a traceback.

    Attributes:
        code: The process exit code (``EXIT_USAGE`` for bad arguments,
            ``EXIT_FAILED`` otherwise).
        hint: A second line saying what to do, or ``None``.
    """

    def __init__(self, message: str, *, hint: str | None = None, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


def _graphs_in(module: Any) -> list[str]:
    return sorted(name for name, value in vars(module).items() if isinstance(value, Workflow))


def load_graph(spec: str, *, what: str = "--workflow", needs_name: bool = True) -> Workflow:
    """``load_workflow(spec)`` with every way it can fail said in one line.

    Args:
        spec: ``package.module:attribute``.
        what: The flag or argument it came from, for the message.
        needs_name: The graph is hosted on Temporal, where its ``name`` is the workflow type.

    Raises:
        CliError: The spec is a path or lacks ``:attr``, the module cannot be
            imported (missing, or raising itself), the attribute is not there,
            it is not a built graph, or it has no name.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep:
        dotted = colon_for_dot(spec)
        if dotted is not None:
            raise CliError(
                f"{what} {spec!r} has a dot where module:attribute has its colon ({dotted[0]!r} is a module here, "
                f"and {dotted[1]!r} is {describe_target(dotted[2])} in it)",
                hint=f"write {dotted[0]}:{dotted[1]}",
                code=EXIT_USAGE,
            )
    if not sep or not module_name or not attr:
        looks_like_path = "/" in spec or "\\" in spec or spec.endswith(".py")
        example = _as_module(spec) if looks_like_path else (module_name or "package.module")
        raise CliError(
            f"{what} {spec!r} is not module:attribute",
            hint=f"name the module and the graph in it, e.g. {example}:workflow"
            + (" (a module path with dots, not a file path)" if looks_like_path else ""),
            code=EXIT_USAGE,
        )
    if "/" in module_name or module_name.endswith(".py"):
        raise CliError(
            f"{what} {spec!r} names a file, not a module",
            hint=f"use the module's dotted name: {_as_module(module_name)}:{attr}",
            code=EXIT_USAGE,
        )
    # As `python -m` does and uvicorn or celery do: a console script's sys.path lacks the current
    # directory, where a user's own package usually is.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        workflow = load_workflow(spec)  # the one place a module is imported by name (tests/test_no_pickle.py)
    except ModuleNotFoundError as e:
        missing = e.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise CliError(
                f"{what} {spec!r}: no module named {missing!r} (looked in {os.getcwd()} and sys.path)",
                hint="run from the directory that holds it, or add that directory to PYTHONPATH",
                code=EXIT_USAGE,
            ) from e
        raise CliError(
            f"{what} {spec!r}: importing {module_name!r} failed: it imports {missing!r}, which is not installed",
            hint=f"pip install the package that provides {missing!r} into this environment ({sys.prefix})",
        ) from e
    except (TypeError, ValueError) as e:
        if module_name in sys.modules and _has(sys.modules[module_name], attr):
            graphs = [g for g in _graphs_in(sys.modules[module_name]) if g != attr]
            there = f"graphs there: {', '.join(f'{module_name}:{g}' for g in graphs)}" if graphs else None
            said = str(e).replace(f"{spec!r} ", "it ", 1)  # the spec once, at the start
            raise CliError(f"{what} {spec!r}: {said}", hint=there, code=EXIT_USAGE) from e
        raise _failed(what, spec, module_name, e) from e
    except AttributeError as e:
        module = sys.modules.get(module_name)
        if module is None or _has(module, attr):  # raised while importing or building, not a missing name
            raise _failed(what, spec, module_name, e) from e
        graphs = _graphs_in(module)
        there = f"graphs there: {', '.join(f'{module_name}:{g}' for g in graphs)}" if graphs else ""
        raise CliError(
            f"{what} {spec!r}: module {module_name!r} has no attribute {attr!r}",
            hint=there or f"{module_name!r} defines no built graph at module level",
            code=EXIT_USAGE,
        ) from e
    except Exception as e:
        raise _failed(what, spec, module_name, e) from e
    if needs_name and (not workflow.name or workflow.name_is_generated):
        raise CliError(
            f"{what} {spec!r}: the graph has no name, and on Temporal its name is the workflow type",
            hint="build it with WorkflowBuilder(start_executor=..., name='my_graph')",
            code=EXIT_USAGE,
        )
    return workflow


def colon_for_dot(spec: str) -> tuple[str, str, Any] | None:
    """``(module, attribute, value)`` when ``spec`` is ``module.attribute`` written with a dot for the colon.

    Imports the module, as the spec with its colon would; anything that goes
    wrong on the way means "no", and the caller goes on as it would have.
    """
    if ":" in spec or "." not in spec or "/" in spec or "\\" in spec or spec.endswith(".py"):
        return None
    module_name, _, attr = spec.rpartition(".")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = import_user_module(module_name)
    except Exception:
        return None
    if not attr.isidentifier() or not hasattr(module, attr):
        return None
    return module_name, attr, getattr(module, attr)


def describe_target(value: Any) -> str:
    """What a ``module:attribute`` names, in a few words: ``a built graph``, ``an executor``, ..."""
    from temporal_workflows._graph.executor import Executor

    if isinstance(value, Workflow):
        return f"a built graph named {value.name!r}" if value.name else "a built graph"
    if isinstance(value, Executor):
        return f"an executor ({type(value).__name__} {value.id!r})"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if callable(value):
        return f"the function {getattr(value, '__name__', '?')}"
    return f"a {type(value).__name__}"


def _has(module: Any, attr: str) -> bool:
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _failed(what: str, spec: str, module_name: str, e: BaseException) -> CliError:
    return CliError(
        f"{what} {spec!r}: importing {module_name!r} or building the graph failed: {type(e).__name__}: {e}",
        hint="the error is in that code; rerun with --debug for the traceback",
    )


def _as_module(path: str) -> str:
    text = path.replace("\\", "/").removeprefix("./")
    text = text.removesuffix(".py").removesuffix("/__init__")
    return text.strip("/").replace("/", ".") or "package.module"


def connection_failure(error: BaseException, where: str, prog: str = "temporal-workflows") -> CliError | None:
    """A one-line :class:`CliError` if ``error`` is the SDK failing to reach a server, else ``None``.

    The SDK raises ``RuntimeError("Failed client connect: ... tonic::transport ...")``
    with the Rust transport's detail; what a person needs is which address and
    how to get a server there.
    """
    text = str(error)
    if not isinstance(error, RuntimeError) or "Failed client connect" not in text:
        return None
    start = f"start one with `{prog} dev` (or `temporal server start-dev`)"
    point = "or point --address, TEMPORAL_ADDRESS or a profile (--profile) at yours"
    if "ConnectionRefused" in text or "Connection refused" in text:
        return CliError(f"no Temporal server is listening at {where}", hint=f"{start}, {point}")
    if "dns error" in text:
        return CliError(f"cannot resolve the host of {where}", hint=f"check the address; {start}, {point}")
    if "timed out" in text.lower() or "deadline" in text.lower():
        return CliError(f"no answer from a Temporal server at {where} (timed out)", hint=f"{start}, {point}")
    if "tls" in text.lower() or "certificate" in text.lower() or "InvalidContentType" in text:
        return CliError(
            f"the TLS handshake with {where} failed: {text.split('Server connection error:')[-1].strip()}",
            hint="check --tls/--no-tls, the CA and the server name (a local dev server speaks plain gRPC)",
        )
    detail = text.split("Server connection error:")[-1].strip()
    return CliError(f"cannot connect to a Temporal server at {where}: {detail}", hint=f"{start}, {point}")
