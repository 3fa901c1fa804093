"""Agent Framework programs run side by side with Agent Framework itself (issue #25, items 1-10).

Each test runs one program, written once against a module (``agent_framework`` or
``temporal_workflows``), on both, and checks that ours prints what Agent Framework
1.23 prints. Annotations are evaluated where written (no ``from __future__ import
annotations``): Agent Framework reads ``mod.WorkflowContext[...]`` from the live annotation.
"""

import subprocess
import sys
from typing import Any

import agent_framework
import pytest

import temporal_workflows

MODULES = [agent_framework, temporal_workflows]
ids = ["maf", "ours"]


# -- 3. plain classes as messages -------------------------------------------------------------------------


class SplitCompleted:
    """A marker class with no fields, as MAF's map-reduce sample sends."""


class Counted:
    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.count = len(items)


def marker_program(mod: Any) -> Any:
    class Splitter(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def go(self, text: str, ctx: mod.WorkflowContext[SplitCompleted]) -> None:  # type: ignore[name-defined]
            ctx.set_state("counted", Counted(text.split()))
            await ctx.send_message(SplitCompleted())

    class Done(mod.Executor):  # type: ignore[misc,name-defined]
        @mod.handler
        async def go(self, m: SplitCompleted, ctx: mod.WorkflowContext[None, str]) -> None:  # type: ignore[name-defined]
            c = ctx.get_state("counted")
            await ctx.yield_output(f"{type(m).__name__} {type(c).__name__} {c.items} {c.count}")

    s, d = Splitter(id="split"), Done(id="done")
    storage = mod.InMemoryCheckpointStorage()
    return mod.WorkflowBuilder(start_executor=s, checkpoint_storage=storage).add_edge(s, d).build(), storage


@pytest.mark.parametrize("mod", MODULES, ids=ids)
async def test_a_marker_class_message_and_a_plain_state_value_work_as_in_agent_framework(mod: Any) -> None:
    workflow, storage = marker_program(mod)
    result = await workflow.run("a b c")
    assert result.get_outputs() == ["SplitCompleted Counted ['a', 'b', 'c'] 3"]
    assert await storage.list_checkpoints(workflow_name=workflow.name)  # checkpointed, on both


# -- 10. imports --------------------------------------------------------------------------------------------


def test_agent_executor_types_import_from_where_workflow_builder_comes_from() -> None:
    from temporal_workflows import AgentExecutor, AgentExecutorRequest, AgentExecutorResponse, WorkflowBuilder
    from temporal_workflows.agents import AgentExecutor as FromAgents

    assert AgentExecutor is FromAgents and WorkflowBuilder is temporal_workflows.WorkflowBuilder
    assert AgentExecutorRequest is agent_framework.AgentExecutorRequest
    assert AgentExecutorResponse is agent_framework.AgentExecutorResponse
    assert "AgentExecutor" in dir(temporal_workflows)
    with pytest.raises(AttributeError):
        temporal_workflows.NoSuchName  # noqa: B018


def test_importing_the_graph_api_does_not_import_agent_framework_and_its_absence_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['agent_framework'] = None  # as if the agents extra were not installed\n"
        "import temporal_workflows\n"
        "assert 'temporal_workflows.agents' not in sys.modules\n"
        "from temporal_workflows import WorkflowBuilder, executor\n"
        "try:\n"
        "    from temporal_workflows import AgentExecutor\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "'agents' extra" in run.stdout and "pip install 'temporal-workflows[agents]'" in run.stdout
