"""Plain LlamaIndex ``workflows`` programs on the CLI, under ``TemporalRuntime``.

``temporal-workflows worker --workflow app:MyWorkflow`` hosts a ``workflows.Workflow``
(an instance, or a class it builds with its defaults) as the ``TemporalRuntime``'s
production worker does: workflow type ``LlamaIndexRun``, one activity per step,
on the queue the runtime's clients use (``llama-index-workflows`` unless
``--task-queue`` says otherwise). ``temporal-workflows run app:MyWorkflow --input
'{...}'`` starts one run of it, as ``await MyWorkflow().run(**input)`` does; the CLI
then follows it like any run (its events, what it waits for, its result). The
console takes the same specs (``console --workflow app:MyWorkflow``).

Kept apart from the graph CLI because the two are different workflow types:
the graph CLI's ``load_graph`` refuses a LlamaIndex ``Workflow`` (it is no
graph), so each spec is asked here first.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from temporalio.client import Client

from temporal_workflows._cli._errors import EXIT_USAGE, CliError
from temporal_workflows._graph.workflow import import_user_module
from temporal_workflows.temporal._client.connect import ConnectionConfig
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

if TYPE_CHECKING:
    from workflows import Workflow as LlamaWorkflow

    from temporal_workflows.llama import TemporalRuntime

__all__ = ["host", "llama_task_queue", "load_llama", "start_llama"]


def load_llama(spec: str) -> Any | None:
    """The plain LlamaIndex ``Workflow`` (instance or subclass) that ``module:attribute`` names, else ``None``.

    ``None`` also when anything goes wrong on the way (no ``workflows`` installed, a wrong spec, an
    import error): the graph loader then says what is wrong, in its own words.
    """
    try:
        from workflows import Workflow as LlamaWorkflow
    except ImportError:
        return None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or "/" in module_name or module_name.endswith(".py"):
        return None
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = import_user_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    if isinstance(obj, LlamaWorkflow) or (isinstance(obj, type) and issubclass(obj, LlamaWorkflow)):
        return obj
    return None


def host(target: Any, runtime: TemporalRuntime, spec: str) -> LlamaWorkflow:
    """``target`` (from :func:`load_llama`) as a workflow of ``runtime``: a class is built with its defaults
    (``timeout=45`` unless it sets its own), an instance moves to the runtime, keeping its timeout etc."""
    if isinstance(target, type):
        try:
            built: LlamaWorkflow = target(runtime=runtime)
        except Exception as e:
            raise CliError(
                f"--workflow {spec!r}: building {target.__name__}() failed: {type(e).__name__}: {e}",
                hint="name a built instance instead, e.g. workflow = MyWorkflow(timeout=60) at module level",
                code=EXIT_USAGE,
            ) from e
        return built
    try:
        target._switch_runtime(runtime)  # LlamaIndex's own move to another runtime (before any run)
    except Exception as e:
        raise CliError(f"--workflow {spec!r}: cannot host it on TemporalRuntime: {e}", code=EXIT_USAGE) from e
    instance: LlamaWorkflow = target
    return instance


def llama_task_queue(task_queue: str | None) -> str:
    """The queue LlamaIndex runs go to: ``--task-queue`` when given, else the runtime's default, which a
    client's ``TemporalRuntime()`` uses too (the graph CLI's default queue is another one)."""
    from temporal_workflows._llama_runtime._protocol import DEFAULT_TASK_QUEUE as LLAMA_QUEUE

    return LLAMA_QUEUE if task_queue in (None, DEFAULT_TASK_QUEUE) else task_queue


async def start_llama(
    target: Any,
    spec: str,
    message: Any,
    *,
    connection: ConnectionConfig,
    task_queue: str | None,
    run_id: str | None,
) -> tuple[Client, str, str]:
    """``run app:MyWorkflow --input '{...}'``: start ``MyWorkflow().run(**input)`` on Temporal, as the program
    would; returns the client, the run id and the queue once the run exists (the CLI then follows it as any run)."""
    from temporal_workflows._llama_runtime._start import StartRefused, start_run
    from temporal_workflows.llama import TemporalRuntime

    if message is not None and not isinstance(message, dict):
        raise CliError(
            "--input of a LlamaIndex workflow is a JSON object (the run's keyword arguments)", code=EXIT_USAGE
        )
    runtime = TemporalRuntime(task_queue=llama_task_queue(task_queue), connection=connection)
    workflow = host(target, runtime, spec)
    try:
        started: str = await start_run(workflow, dict(message or {}), run_id=run_id)
    except StartRefused as e:
        raise CliError(str(e), hint=f"the start event's fields are the run's keyword arguments ({spec})") from None
    return await runtime.client(), started, runtime.task_queue
