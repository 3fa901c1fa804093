"""The documented public surface (docs/api.md) is exactly what each module's ``__all__`` exports.

A user reads the surface in docs/api.md; a name there that a module does not
export, or an export the page does not list, is a bug either way. Names moved
out of a module keep importing from the old place for one release with a
``DeprecationWarning`` naming the new place, and never come back into its
``__all__``.
"""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path
from types import ModuleType

import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"

_HEADING = re.compile(r"^## `([\w.]+)`\s*$")
_NAME = re.compile(r"`([A-Za-z_]\w*)`")


def documented() -> dict[str, list[str]]:
    """Each ``## `module``` section's names: the backticked names in the first column of its table."""
    surface: dict[str, list[str]] = {}
    module: str | None = None
    for line in API.read_text().splitlines():
        heading = _HEADING.match(line)
        if heading:
            module = heading.group(1)
            surface[module] = []
        elif module and line.startswith("| `"):
            surface[module].extend(_NAME.findall(line.split("|")[1]))
    return surface


SURFACE = documented()


def _import(name: str) -> ModuleType:
    if name.startswith("temporal_workflows.agents"):
        pytest.importorskip("agent_framework")
    if name == "temporal_workflows.llama":
        pytest.importorskip("workflows")  # TemporalRuntime (the llama-runtime extra)
    return importlib.import_module(name)


def test_the_page_documents_every_public_module() -> None:
    assert set(SURFACE) == {
        "temporal_workflows",
        "temporal_workflows.events",
        "temporal_workflows.errors",
        "temporal_workflows.temporal",
        "temporal_workflows.temporal.integration",
        "temporal_workflows.llama",
        "temporal_workflows.agents",
        "temporal_workflows.agents.testing",
        "temporal_workflows.testing",
    }
    for module, names in SURFACE.items():
        assert names, module
        assert len(names) == len(set(names)), f"{module}: a name is listed twice"


@pytest.mark.parametrize("module_name", sorted(SURFACE))
def test_documented_names_are_exactly_what_all_exports_and_each_imports(module_name: str) -> None:
    module = _import(module_name)
    exported = module.__all__
    assert len(exported) == len(set(exported)), f"{module_name}.__all__ lists a name twice"
    assert sorted(SURFACE[module_name]) == sorted(exported)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # nothing public is a deprecated alias
        for name in exported:
            assert getattr(module, name) is not None, f"{module_name}.{name}"
    star: dict[str, object] = {}
    exec(f"from {module_name} import *", star)
    assert set(star) - {"__builtins__"} == set(exported)


def test_the_top_level_surfaces_stay_small() -> None:
    # The anchors export 4-12 names per integration; a user keeps each of these in their head.
    import temporal_workflows
    import temporal_workflows.llama
    import temporal_workflows.temporal

    assert len(temporal_workflows.__all__) <= 30
    assert len(temporal_workflows.temporal.__all__) <= 17
    assert temporal_workflows.llama.__all__ == ["StepOptions", "TemporalRuntime"]


def _moved() -> list[tuple[str, str, str]]:
    import temporal_workflows
    import temporal_workflows.temporal

    moved = [("temporal_workflows", name, new) for name, new in temporal_workflows._MOVED.items()]
    moved += [
        ("temporal_workflows.temporal", name, "temporal_workflows.temporal.integration")
        for name in temporal_workflows.temporal._MOVED
    ]
    return moved


def test_every_name_that_left_a_module_is_public_in_its_new_place() -> None:
    for old, name, new in _moved():
        assert name not in importlib.import_module(old).__all__
        assert name in SURFACE[new], f"{old}.{name} moved to {new}, which does not document it"


@pytest.mark.parametrize(("old", "name", "new"), _moved())
def test_old_imports_of_moved_names_still_work_and_warn_naming_the_new_place(old: str, name: str, new: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    message = str(caught[0].message)
    assert name in message and new in message
    assert caught[0].filename == __file__  # the warning points at the importing line, not at our module


def test_the_plain_from_import_form_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match="temporal_workflows.errors"):
        from temporal_workflows import StateConflictError  # noqa: F401
    with pytest.warns(DeprecationWarning, match="temporal_workflows.temporal.integration"):
        from temporal_workflows.temporal import GraphWorkflow  # noqa: F401


def test_retired_names_warn_and_say_what_to_use() -> None:
    import temporal_workflows

    for name in ("CheckpointId", "StateView"):
        with pytest.warns(DeprecationWarning, match="leaves the public API"):
            assert getattr(temporal_workflows, name) is not None
        assert name not in temporal_workflows.__all__


def test_unknown_names_are_still_attribute_errors() -> None:
    import temporal_workflows
    import temporal_workflows.llama
    import temporal_workflows.temporal

    for module in (temporal_workflows, temporal_workflows.temporal, temporal_workflows.llama):
        with pytest.raises(AttributeError):
            module.NoSuchName  # noqa: B018


_MOVE_TO_THE_RUNTIME = "change your imports back to llamaindex's `workflows`"


@pytest.mark.parametrize("name", ["Workflow", "step", "Context", "StartEvent", "StopEvent", "start_run", "wait_fixed"])
def test_a_name_of_the_retired_import_swap_front_end_says_how_to_move(name: str) -> None:
    # Its programs run unchanged on TemporalRuntime: the error says so, in both import forms.
    import temporal_workflows.llama

    with pytest.raises(ImportError) as caught:
        exec(f"from temporal_workflows.llama import {name}", {})
    message = str(caught.value)
    assert f"temporal_workflows.llama.{name}" in message and "import-swap front end" in message
    assert _MOVE_TO_THE_RUNTIME in message.lower() and "TemporalRuntime" in message
    assert "docs/llama-runtime.md" in message
    with pytest.raises(ImportError, match="retired"):
        getattr(temporal_workflows.llama, name)
    assert name not in temporal_workflows.llama.__all__


@pytest.mark.parametrize("module", ["events", "context", "decorators", "retry_policy", "workflow", "temporal"])
def test_a_module_of_the_retired_import_swap_front_end_says_how_to_move(module: str) -> None:
    with pytest.raises(ImportError) as caught:
        importlib.import_module(f"temporal_workflows.llama.{module}")
    message = str(caught.value)
    assert f"temporal_workflows.llama.{module}" in message and _MOVE_TO_THE_RUNTIME in message.lower()
    assert "TemporalRuntime" in message


def test_the_runtime_itself_still_imports_from_the_package() -> None:
    pytest.importorskip("workflows")  # the llama-runtime extra
    from temporal_workflows._llama_runtime._options import StepOptions as options
    from temporal_workflows._llama_runtime._temporal_runtime import TemporalRuntime as defined
    from temporal_workflows.llama import StepOptions, TemporalRuntime

    assert TemporalRuntime is defined and StepOptions is options
