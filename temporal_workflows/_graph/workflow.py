"""``Workflow``: a built graph you can run in process, export, or host on Temporal."""

from __future__ import annotations

import inspect
import uuid
import warnings
from collections.abc import Awaitable, Collection, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from temporal_workflows._engine.inbound import ConcurrentInput
from temporal_workflows._engine.registry import declare
from temporal_workflows._errors import WorkflowRunError, attach_result
from temporal_workflows._events import RequestInfoEvent, WorkflowEvent, WorkflowRunResult, WorkflowRunState
from temporal_workflows._graph.hosting import GRAPH_HOOK, as_graph_workflow
from temporal_workflows._graph.runs import MISSING, RunStream, invocation_kwargs, local_request_event, shared_state

if TYPE_CHECKING:
    from temporalio.client import Client

    from temporal_workflows._checkpoints.base import CheckpointStorage
    from temporal_workflows._engine.machine import Topology
    from temporal_workflows._graph.executor import Executor
    from temporal_workflows._graph.graph import Graph
    from temporal_workflows.temporal._client.durable import DurableWorkflow

__all__ = ["GRAPH_HOOK", "ResetCall", "Workflow", "as_graph_workflow", "import_user_module", "load_workflow"]


class ResetCall:
    """What :meth:`Workflow.reset_for_new_run` returns: the run is already forgotten; awaiting it resets executors.

    The workflow's run (state, messages, pending requests, outputs, failure)
    is cleared when the method is called, so code written for the earlier,
    synchronous ``reset()`` keeps working; ``await`` it to also run every
    executor's ``reset()`` hook (Agent Framework's ``await
    workflow.reset_for_new_run()``). Not awaiting it while an executor
    overrides ``reset()`` warns, rather than silently skipping the hook.
    """

    def __init__(self, workflow: Workflow) -> None:
        self._workflow = workflow
        self._awaited = False

    def __await__(self) -> Generator[Any, None, None]:
        self._awaited = True
        return self._workflow._runner.reset_executors().__await__()

    def __del__(self) -> None:
        if self._awaited:
            return
        hooked = [eid for eid, ex in self._workflow.executors.items() if type(ex).reset is not _base_reset()]
        if hooked:
            warnings.warn(
                f"reset_for_new_run() was not awaited, so the reset() of executors {hooked} did not run; "
                "use `await workflow.reset_for_new_run()`",
                RuntimeWarning,
                stacklevel=2,
            )


def _base_reset() -> Any:
    from temporal_workflows._graph.executor import Executor

    return Executor.reset


class Workflow:
    """A validated graph. Made by :meth:`WorkflowBuilder.build`.

    In process it keeps its current run between ``run()`` calls (so
    ``run(responses=...)`` continues it), as in Agent Framework. Unlike there,
    a failed run does not poison the instance: ``run(message)`` starts a new
    run and :meth:`reset_for_new_run` clears everything.

    Attributes:
        id: A new id per instance, for telling instances apart in logs and
            traces (Agent Framework's ``Workflow.id``); not a run id.
    """

    def __init__(
        self, graph: Graph, *, checkpoint_storage: CheckpointStorage | None = None, checkpoint_every: int = 1
    ) -> None:
        self._graph = graph
        self._storage = checkpoint_storage
        self._checkpoint_every = checkpoint_every
        # A Workflow runs in process (Agent Framework's contract), so it owns the
        # in-process host; imported here, the graph layer imports no host at import time.
        from temporal_workflows._local.runner import GraphLocalRunner

        self._runner = GraphLocalRunner(graph, checkpoint_every=checkpoint_every)
        self.id = str(uuid.uuid4())
        declare(_declared_types(graph))  # what decoding may build: every class the handlers name, and their fields'

    # -- description -----------------------------------------------------------

    @property
    def name(self) -> str:
        """The name given to the builder, or the one made for it (``WorkflowBuilder-<uuid>``, as Agent Framework's).

        Checkpoints are filed under it. A made-up name differs in every
        process, so a graph hosted on Temporal needs one given
        (:attr:`name_is_generated` is then false).
        """
        return self._graph.name or ""

    @property
    def name_is_generated(self) -> bool:
        """Whether :attr:`name` was made up by the builder (no ``name=`` given): not stable across processes."""
        return self._graph.name_generated

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

    def get_start_executor(self) -> Executor:
        """The executor the start message goes to (Agent Framework's accessor)."""
        return self._graph.executors[self.start_executor_id]

    def get_executors_list(self) -> list[Executor]:
        """Every executor, in the order they were added (Agent Framework's accessor)."""
        return list(self._graph.executors.values())

    def get_output_executors(self) -> list[Executor]:
        """The executors whose yields are workflow outputs (every one unless ``output_from`` says otherwise)."""
        topology = self._graph.topology
        return [ex for eid, ex in self._graph.executors.items() if topology.output_kind(eid) == "output"]

    def get_intermediate_executors(self) -> list[Executor]:
        """The executors whose yields are intermediate outputs (``intermediate_output_from``)."""
        topology = self._graph.topology
        return [ex for eid, ex in self._graph.executors.items() if topology.output_kind(eid) == "intermediate"]

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
        function_invocation_kwargs: Mapping[str, Any] | None = ...,
        client_kwargs: Mapping[str, Any] | None = ...,
        concurrent_input: ConcurrentInput | None = ...,
    ) -> RunStream: ...

    @overload
    def run(
        self,
        message: Any = ...,
        *,
        stream: Literal[False] = ...,
        responses: Mapping[str, Any] | None = ...,
        checkpoint_id: str | None = ...,
        checkpoint_storage: CheckpointStorage | None = ...,
        include_status_events: bool = ...,
        function_invocation_kwargs: Mapping[str, Any] | None = ...,
        client_kwargs: Mapping[str, Any] | None = ...,
        concurrent_input: ConcurrentInput | None = ...,
    ) -> Awaitable[WorkflowRunResult]: ...

    def run(
        self,
        message: Any = MISSING,
        *,
        stream: bool = False,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
        include_status_events: bool = False,
        function_invocation_kwargs: Mapping[str, Any] | None = None,
        client_kwargs: Mapping[str, Any] | None = None,
        concurrent_input: ConcurrentInput | None = None,
    ) -> RunStream | Awaitable[WorkflowRunResult]:
        """Run in this process until the graph is idle.

        The workflow is reserved as soon as this is called (not when the
        result is awaited or the stream read), so a second ``run()`` made
        before this one finishes is refused at once; a stream or awaitable
        dropped unread frees it again.

        Args:
            message: Start a new run with this message to the start executor.
            stream: Return an async iterator of events instead of the result.
            responses: ``{request_id: response}`` answers to pending requests
                (validated against each request's response type first; a bad one
                changes nothing). Requests past their ``timeout`` expire first;
                ``responses={}`` delivers just those timeouts.
            checkpoint_id: Resume from this checkpoint (time travel if it is old).
            checkpoint_storage: Overrides the builder's storage for this call.
            include_status_events: Keep the ``status`` events in the result's
                list (they are always in ``result.status_timeline()``).
            function_invocation_kwargs, client_kwargs: As in Agent Framework:
                keyword arguments ``AgentExecutor`` passes on to its agent's tool
                calls and chat client calls; a mapping keyed by executor ids
                gives each executor its own. They hold for the run (a call
                continuing it with responses keeps them unless it gives new
                ones) and must be plain JSON (they reach steps on Temporal too).
            concurrent_input: What a message :meth:`send` brings while this run
                is busy does by default: ``"enqueue"`` (the default), ``"reject"``,
                ``"interrupt"`` or ``"rollback"`` (docs/concurrent-input.md). A
                second ``run()`` while one goes is refused, as in Agent Framework.

        Raises:
            WorkflowRunError: the run failed (``ExecutorFailedError``,
                ``StateConflictError``, ``SuperstepLimitError``); its ``result``
                holds the events up to the failure. A step's failure is raised
                as Agent Framework raises it, the step's own exception, which is
                also an ``ExecutorFailedError`` (``except MyError`` and
                ``except ExecutorFailedError`` both catch it; docs/maf.md).
            UnknownRequestError / InvalidResponseError: a bad response; the run is unchanged.
            WorkflowError: the workflow is already running (raised by this call itself).
        """
        events = self._runner.events(
            message,
            responses=responses,
            checkpoint_id=checkpoint_id,
            checkpoint_storage=checkpoint_storage if checkpoint_storage is not None else self._storage,
            stream=stream,
            invocation_kwargs=invocation_kwargs(function_invocation_kwargs, client_kwargs),
            concurrent_input=concurrent_input,
        )
        if stream:
            return events
        return self._collect(events, include_status_events)

    def send(
        self, message: Any, *, executor_id: str | None = None, policy: ConcurrentInput | None = None
    ) -> dict[str, Any]:
        """Send a message into the ``run()`` in progress (from another task), taken at its next boundary.

        The in-process twin of ``RunHandle.send``: while a ``run()`` goes (awaited
        or streamed), a second message reaches it here rather than by a second
        ``run()``, which is refused. ``policy`` (default: the run's
        ``concurrent_input``) says what the message does if the run is busy:
        waits for the next boundary (``"enqueue"``), is refused (``"reject"``),
        or cancels the running superstep and is taken at once, keeping the
        turn's committed state (``"interrupt"``) or after going back to where
        the run was before the turn's input (``"rollback"``). Returns
        ``{"executor_id", "accepted": True, "policy", "interrupts"}``.

        Args:
            executor_id: Who gets it; the start executor by default.

        Raises:
            RunClosedError: no ``run()`` is in progress.
            RunInProgressError: the run is busy and the policy is ``"reject"``.
            UndeliverableMessageError: the executor has no handler for it.
            ValueError: an unknown policy.
        """
        return self._runner.send(message, executor_id=executor_id, policy=policy)

    def run_stream(
        self,
        message: Any = MISSING,
        *,
        responses: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        checkpoint_storage: CheckpointStorage | None = None,
    ) -> RunStream:
        """Same as ``run(..., stream=True)``."""
        return self.run(
            message,
            stream=True,
            responses=responses,
            checkpoint_id=checkpoint_id,
            checkpoint_storage=checkpoint_storage,
        )

    async def _collect(self, events: RunStream, include_status_events: bool) -> WorkflowRunResult:
        collected: list[WorkflowEvent] = []
        try:
            await events.read_all(collected)
        except WorkflowRunError as e:
            attach_result(e, self._result(collected, include_status_events))
            raise
        return self._result(collected, include_status_events)

    def _result(self, events: list[WorkflowEvent], include_status_events: bool = False) -> WorkflowRunResult:
        engine = self._runner.engine
        return WorkflowRunResult(
            events,
            final_state=self._runner.state,
            state=shared_state(engine.state) if engine else {},
            run_id=self._runner.run_id or "",
            include_status_events=include_status_events,
        )

    @property
    def run_state(self) -> WorkflowRunState:
        """State of the current in-process run."""
        return self._runner.state

    @property
    def status(self) -> WorkflowRunState:
        """Agent Framework's name for :attr:`run_state`."""
        return self._runner.state

    @property
    def is_running(self) -> bool:
        """Whether a ``run()`` holds the workflow now (see :meth:`run`)."""
        return self._runner.running

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

    def reset_for_new_run(self) -> ResetCall:
        """Forget the current run, and (awaited) call every executor's ``reset()`` hook.

        Nothing of the previous run survives: state, messages in flight,
        pending requests, outputs, a failure, the checkpoint lineage (the
        next checkpoint has no parent). Checkpoints already saved stay in
        their storage, so the run can still be resumed from one of them.
        Executors that keep per-run state in attributes clear it in their
        ``async def reset(self)``; ``await workflow.reset_for_new_run()`` runs
        each of them once (all of them, even if one raises, which then raises
        ``WorkflowError`` naming it).

        Raises:
            WorkflowError: a ``run()`` holds the workflow (raised by the call itself).
        """
        self._runner.reset()
        return ResetCall(self)

    def reset(self) -> ResetCall:
        """The same as :meth:`reset_for_new_run` (the name it had before)."""
        return self.reset_for_new_run()

    async def create_checkpoint(self, checkpoint_storage: CheckpointStorage | None = None) -> str:
        """Checkpoint the workflow now, while it is idle, and return the checkpoint's id.

        Also before it has received any message: restoring that checkpoint
        later (``run(checkpoint_id=...)``) returns the workflow to its initial
        state, whatever ran in between. Executors that keep state in their
        attributes are brought back to it by their checkpoint hooks when they
        next run (see ``Executor.on_checkpoint_restore``).

        Args:
            checkpoint_storage: Where to save it; default: the builder's.

        Raises:
            WorkflowError: a ``run()`` holds the workflow, or there is no storage.
            CheckpointStorageError: the storage did not save it.
        """
        return await self._runner.create_checkpoint(
            checkpoint_storage if checkpoint_storage is not None else self._storage
        )

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
        from temporal_workflows.temporal._client.durable import DurableWorkflow
        from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE

        return DurableWorkflow(
            self, client, id=id, task_queue=task_queue or DEFAULT_TASK_QUEUE, checkpoint_every=checkpoint_every
        )

    def __temporal_workflows_graph__(self) -> Workflow:
        """A graph workflow is its own graph (:data:`GRAPH_HOOK`): how hosts tell one apart without importing it."""
        return self

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


def _kind(obj: Any) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__name__}"
    return f"the function {getattr(obj, '__name__', type(obj).__name__)}"


def import_user_module(name: str) -> Any:
    """Import the module a ``module:attribute`` names: the one place a module is imported by name
    (``load_workflow``, and the CLI's check of a spec written with a dot for the colon)."""
    import importlib

    return importlib.import_module(name)


def load_workflow(spec: str) -> Workflow:
    """Import ``"package.module:attribute"`` and return the :class:`Workflow` it names.

    The attribute may also be a zero-argument function that builds one.
    """
    from temporal_workflows._graph.executor import Executor

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:attribute', got {spec!r}")
    obj: Any = import_user_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, Executor):
        raise TypeError(
            f"{spec!r} is an executor ({type(obj).__name__} {obj.id!r}), not a workflow: name the graph built "
            "from it (WorkflowBuilder(start_executor=...).build())"
        )
    elif callable(obj) and not isinstance(obj, Workflow) and not hasattr(type(obj), GRAPH_HOOK):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            raise TypeError(
                f"{spec!r} is {_kind(obj)} that takes arguments, not a built Workflow nor a function of no "
                "arguments that builds one"
            ) from None
        except ValueError:
            pass  # no signature to read: call it and see
        obj = obj()
    if isinstance(obj, Executor):  # a class called with no arguments, or a function returning one
        raise TypeError(
            f"{spec!r} gives an executor ({type(obj).__name__} {obj.id!r}), not a workflow: name the graph built "
            "from it (WorkflowBuilder(start_executor=...).build())"
        )
    try:
        return as_graph_workflow(obj)
    except TypeError:
        raise TypeError(
            f"{spec!r} is a {type(obj).__name__}, not a built Workflow (call WorkflowBuilder.build())"
        ) from None
