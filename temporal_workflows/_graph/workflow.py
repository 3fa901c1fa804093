"""``Workflow``: a built graph you can run in process, export, or host on Temporal."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from temporal_workflows._engine.registry import declare
from temporal_workflows._errors import WorkflowRunError
from temporal_workflows._events import RequestInfoEvent, WorkflowEvent, WorkflowRunResult, WorkflowRunState
from temporal_workflows._local.runner import MISSING, LocalRunner, local_request_event, shared_state

if TYPE_CHECKING:
    from temporalio.client import Client

    from temporal_workflows._checkpoints.base import CheckpointStorage
    from temporal_workflows._engine.machine import Topology
    from temporal_workflows._graph.executor import Executor
    from temporal_workflows._graph.graph import Graph
    from temporal_workflows.temporal._durable import DurableWorkflow

__all__ = ["GRAPH_HOOK", "Workflow", "as_graph_workflow", "load_workflow"]

GRAPH_HOOK = "__temporal_workflows_graph__"
"""Name of the method another front end's workflow object (LlamaIndex's ``temporal_workflows.llama.Workflow``)
has to return the graph :class:`Workflow` it compiles to, so the plugin, worker and CLI host it as they host graphs."""


class Workflow:
    """A validated graph. Made by :meth:`WorkflowBuilder.build`.

    In process it keeps its current run between ``run()`` calls (so
    ``run(responses=...)`` continues it), as in Agent Framework. Unlike there,
    a failed run does not poison the instance: ``run(message)`` starts a new
    run and :meth:`reset` clears everything.
    """

    def __init__(
        self, graph: Graph, *, checkpoint_storage: CheckpointStorage | None = None, checkpoint_every: int = 1
    ) -> None:
        self._graph = graph
        self._storage = checkpoint_storage
        self._checkpoint_every = checkpoint_every
        self._runner = LocalRunner(graph, checkpoint_every=checkpoint_every)
        declare(_declared_types(graph))  # what decoding may build: every class the handlers name, and their fields'

    # -- description -----------------------------------------------------------

    @property
    def name(self) -> str | None:
        return self._graph.name

    @property
    def description(self) -> str | None:
        return self._graph.description

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def topology(self) -> Topology:
        """The graph as pure data (what a Temporal run pins in its history)."""
        return self._graph.topology

    @property
    def start_executor_id(self) -> str:
        return self._graph.topology.start_executor_id

    @property
    def executors(self) -> Mapping[str, Executor]:
        return dict(self._graph.executors)

    @property
    def graph_signature_hash(self) -> str:
        return self._graph.topology.signature_hash

    @property
    def max_iterations(self) -> int:
        return self._graph.topology.max_iterations

    @property
    def checkpoint_storage(self) -> CheckpointStorage | None:
        return self._storage

    @property
    def checkpoint_every(self) -> int:
        """Supersteps between automatic checkpoints when a storage is set (0: on request only)."""
        return self._checkpoint_every

    # -- running in process ----------------------------------------------------------

    @overload
    def run(
        self,
        message: Any = ...,
        *,
        stream: Literal[True],
        responses: Mapping[str, Any] | None = ...,
        checkpoint_id: str | None = ...,
        checkpoint_storage: CheckpointStorage | None = ...,
    ) -> AsyncIterator[WorkflowEvent]: ...

    @overload
    def run(
        self,
        message: Any = ...,
        *,
        stream: Literal[False] = ...,
        responses: Mapping[str, Any] | None = ...,
        checkpoint_id: str | None = ...,
        checkpoint_storage: CheckpointStorage | None = ...,
    ) -> Awaitable[WorkflowRunResult]: ...

    def run(
        self,
        message: Any = MISSING,
        *,
        stream: bool = False,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
    ) -> AsyncIterator[WorkflowEvent] | Awaitable[WorkflowRunResult]:
        """Run in this process until the graph is idle.

        Args:
            message: Start a new run with this message to the start executor.
            stream: Return an async iterator of events instead of the result.
            responses: ``{request_id: response}`` answers to pending requests
                (validated against each request's response type first; a bad one
                changes nothing). Requests past their ``timeout`` expire first;
                ``responses={}`` delivers just those timeouts.
            checkpoint_id: Resume from this checkpoint (time travel if it is old).
            checkpoint_storage: Overrides the builder's storage for this call.

        Raises:
            WorkflowRunError: the run failed (``ExecutorFailedError``,
                ``StateConflictError``, ``SuperstepLimitError``); its ``result``
                holds the events up to the failure.
            UnknownRequestError / InvalidResponseError: a bad response; the run is unchanged.
        """
        events = self._runner.events(
            message,
            responses=responses,
            checkpoint_id=checkpoint_id,
            checkpoint_storage=checkpoint_storage if checkpoint_storage is not None else self._storage,
        )
        if stream:
            return events
        return self._collect(events)

    def run_stream(
        self,
        message: Any = MISSING,
        *,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
    ) -> AsyncIterator[WorkflowEvent]:
        """Same as ``run(..., stream=True)``."""
        return self.run(
            message,
            stream=True,
            responses=responses,
            checkpoint_id=checkpoint_id,
            checkpoint_storage=checkpoint_storage,
        )

    async def _collect(self, events: AsyncIterator[WorkflowEvent]) -> WorkflowRunResult:
        collected: list[WorkflowEvent] = []
        try:
            async for ev in events:
                collected.append(ev)
        except WorkflowRunError as e:
            e.result = self._result(collected)
            raise
        return self._result(collected)

    def _result(self, events: list[WorkflowEvent]) -> WorkflowRunResult:
        engine = self._runner.engine
        return WorkflowRunResult(
            events,
            final_state=self._runner.state,
            state=shared_state(engine.state) if engine else {},
            run_id=self._runner.run_id or "",
        )

    @property
    def run_state(self) -> WorkflowRunState:
        """State of the current in-process run."""
        return self._runner.state

    @property
    def pending_requests(self) -> list[RequestInfoEvent]:
        """Requests of the current in-process run still waiting for a response."""
        engine = self._runner.engine
        return [local_request_event(r) for r in engine.pending_requests.values()] if engine else []

    @property
    def state(self) -> dict[str, Any]:
        """Committed shared state of the current in-process run."""
        engine = self._runner.engine
        return shared_state(engine.state) if engine else {}

    def reset(self) -> None:
        """Forget the current run: no state, messages, requests or outputs survive."""
        self._runner.reset()

    # -- on Temporal -------------------------------------------------------------

    def on_temporal(
        self,
        client: Client,
        *,
        id: str | None = None,
        task_queue: str | None = None,
        checkpoint_every: int | None = None,
    ) -> DurableWorkflow:
        """This workflow's ``run`` calls, each backed by a run on Temporal (same arguments, results, errors).

        ``durable = workflow.on_temporal(client)``, then ``await durable.run(message)``,
        ``durable.run(message, stream=True)``, ``durable.run(responses=...)`` and
        ``durable.run(checkpoint_id=...)`` as in process: the one line that makes a
        program durable. A worker hosting this workflow must poll ``task_queue``.
        See :class:`~temporal_workflows.temporal.DurableWorkflow`.
        """
        from temporal_workflows.temporal._durable import DurableWorkflow
        from temporal_workflows.temporal._plugin import DEFAULT_TASK_QUEUE

        return DurableWorkflow(
            self, client, id=id, task_queue=task_queue or DEFAULT_TASK_QUEUE, checkpoint_every=checkpoint_every
        )

    # -- export ----------------------------------------------------------------

    def to_mermaid(self) -> str:
        """Mermaid ``flowchart`` text of the graph."""
        from temporal_workflows._graph.viz import to_mermaid

        return to_mermaid(self._graph)

    def to_dot(self) -> str:
        """Graphviz DOT text of the graph."""
        from temporal_workflows._graph.viz import to_dot

        return to_dot(self._graph)

    def __repr__(self) -> str:
        return f"Workflow(name={self.name!r}, executors={list(self._graph.executors)})"

    def _repr_svg_(self) -> str | None:
        """The graph as SVG in a notebook (``None``, so Mermaid shows instead, without Graphviz)."""
        from temporal_workflows._graph.viz import render_svg

        return render_svg(self._graph)

    def _repr_mimebundle_(
        self, include: Collection[str] | None = None, exclude: Collection[str] | None = None
    ) -> dict[str, str]:
        """How a notebook shows the graph: SVG when Graphviz can draw it, else Mermaid text."""
        from temporal_workflows._graph.viz import mimebundle

        return mimebundle(self._graph, repr(self), include=include, exclude=exclude)


def _declared_types(graph: Graph) -> Iterator[Any]:
    """Every annotation a graph's handlers declare: messages, outputs, requests, responses."""
    for ex in graph.executors.values():
        for h in ex.handlers:
            yield h.input_type
            yield from h.output_types
            yield from h.workflow_output_types
        for r in ex.response_handlers:
            yield from (r.request_type, r.response_type, *r.output_types, *r.workflow_output_types)


def as_graph_workflow(obj: Any) -> Workflow:
    """The graph :class:`Workflow` for ``obj``: itself, or what its front end compiles it to (:data:`GRAPH_HOOK`).

    Raises:
        TypeError: ``obj`` is neither.
    """
    if isinstance(obj, Workflow):
        return obj
    hook = getattr(type(obj), GRAPH_HOOK, None)
    if hook is not None:
        graph = hook(obj)
        if isinstance(graph, Workflow):
            return graph
    raise TypeError(
        f"{type(obj).__name__} is not a workflow: expected a built graph (WorkflowBuilder.build()) or a "
        "temporal_workflows.llama.Workflow"
    )


def load_workflow(spec: str) -> Workflow:
    """Import ``"package.module:attribute"`` and return the :class:`Workflow` it names.

    The attribute may also be a zero-argument function that builds one.
    """
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:attribute', got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, type) and hasattr(obj, GRAPH_HOOK):
        obj = obj()  # a LlamaIndex workflow class: its instance is the workflow
    elif callable(obj) and not isinstance(obj, Workflow) and not hasattr(type(obj), GRAPH_HOOK):
        obj = obj()
    try:
        return as_graph_workflow(obj)
    except TypeError:
        raise TypeError(
            f"{spec!r} is a {type(obj).__name__}, not a built Workflow (call WorkflowBuilder.build()) "
            "nor a temporal_workflows.llama.Workflow"
        ) from None
