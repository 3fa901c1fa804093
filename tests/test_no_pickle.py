"""No pickle anywhere: nothing the library reads back (payloads, checkpoints, stores) can run code.

Every value crosses process and storage boundaries as JSON, and decoding
constructs only the standard types of a fixed table and classes this process
declared, registered or encoded (see ``tests/test_serde.py`` for the decoder
itself: unregistered type keys raise instead of importing, at the top of a
value or tagged anywhere inside it). These checks keep it that way as the code grows: the
source may not use a code-executing serializer, nor import modules by name
outside the one operator-facing loader, and a checkpoint naming a type this
process does not know fails on decode instead of importing it.
"""

from __future__ import annotations

import ast
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from temporal_workflows import FileCheckpointStorage, WorkflowCheckpoint
from temporal_workflows._engine.serde import Envelope, decode
from temporal_workflows.errors import NotSerializableError

ROOT = Path(__file__).parents[1]
SOURCES = [
    *sorted((ROOT / "temporal_workflows").rglob("*.py")),
    *sorted((ROOT / "activities").rglob("*.py")),
    ROOT / "worker.py",
]
FORBIDDEN_MODULES = {"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "jsonpickle", "marshal", "shelve", "joblib"}
FORBIDDEN_CALLS = {"eval", "exec", "__import__"}
# Imports a module by name from an operator's command line (`worker.py --workflow pkg.mod:attr`), never from data.
DYNAMIC_IMPORT_ALLOWED = {("temporal_workflows/_graph/workflow.py", "import_user_module")}


def _violations(path: Path, rel: str | None = None) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = rel or path.relative_to(ROOT).as_posix()
    found: list[str] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def enclosing(node: ast.AST) -> str | None:
        for fn in functions:
            if fn.lineno <= getattr(node, "lineno", 0) <= (fn.end_lineno or fn.lineno):
                return fn.name
        return None

    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_MODULES:
            found.append(f"{where} uses {node.id}")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FORBIDDEN_CALLS:
                found.append(f"{where} calls {name}")
            if name == "import_module" and (rel, enclosing(node)) not in DYNAMIC_IMPORT_ALLOWED:
                found.append(f"{where} imports a module by name in {enclosing(node)}")
    return found


def test_the_scan_sees_every_source_file() -> None:
    assert len(SOURCES) > 20 and all(p.exists() for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_code_executing_serializer_or_dynamic_import(path: Path) -> None:
    assert _violations(path) == []


def test_the_scan_catches_what_it_forbids(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import pickle\nfrom marshal import loads\nimport dill as d\nimport importlib\n"
        "def f(b):\n    return pickle.loads(b), eval('1'), importlib.import_module('os')\n"
    )
    found = "\n".join(_violations(probe, rel="temporal_workflows/probe.py"))
    for what in ("imports pickle", "imports from marshal", "imports dill", "uses pickle", "calls eval", "by name in f"):
        assert what in found


async def test_a_stored_checkpoint_naming_an_unknown_type_never_imports_it(tmp_path: Path) -> None:
    """A checkpoint file is data: its type keys stay strings until decoded, and decoding refuses unknown ones."""
    module = "tw_untrusted_checkpoint_module"
    store = FileCheckpointStorage(tmp_path)
    await store.save(
        WorkflowCheckpoint(
            checkpoint_id="cp-1",
            workflow_name="g",
            run_id="r",
            graph_signature_hash="h",
            timestamp=datetime(2025, 1, 1, tzinfo=UTC),
            superstep=1,
            state={
                "evil": Envelope(f"{module}:Payload", {"x": 1}),
                "sys": Envelope("list[subprocess:Popen]", [{}]),
                "nested": Envelope("list[*]", [1, {"$tuple": [{f"${module}:Payload": {"x": 1}}]}]),
                "key": Envelope("dict", [[{"$os:system": "true"}, 1]]),
            },
            messages=[],
        )
    )
    loaded = await store.load("cp-1")
    assert loaded.state["evil"] == Envelope(f"{module}:Payload", {"x": 1})
    for env in loaded.state.values():
        with pytest.raises(NotSerializableError, match="not registered"):
            decode(env)
    assert module not in sys.modules
