"""``WorkflowExecutor``: a whole graph as one executor of another (Agent Framework's sub-workflows).

Each message the executor receives starts a child run of the wrapped graph;
the child runs to rest within the parent's superstep (in process: the same
driver over the child's own engine; on Temporal: a child workflow of the
child graph, with its own history under the parent's). What the child yields
comes back as the executor's messages (or, with ``allow_direct_output``, as
the parent's outputs); what it asks (``ctx.request_info``) becomes a
``SubWorkflowRequestMessage`` for the parent's executors to intercept, or,
with ``propagate_request``, a request of the parent itself. A child waiting
for answers lives in the parent's committed state (``_engine/subworkflows.py``),
so the parent's checkpoints, resets and forks restore parent and children
together.

The executor's own step runs no child: the host runs the child and then this
step on a :class:`SubWorkflowReport`, which sends the outputs on along the
executor's edges (edge conditions are user code: on Temporal, an activity).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from temporal_workflows._checkpoints.base import request_event
from temporal_workflows._engine.ids import bounded_id
from temporal_workflows._engine.machine import PendingRequest
from temporal_workflows._engine.serde import decode, encode
from temporal_workflows._errors import UndeliverableMessageError, WorkflowError
from temporal_workflows._graph.executor import Executor, ExecutorOptions, HandlerSpec, ResponseHandlerSpec
from temporal_workflows._graph.hosting import is_graph_workflow
from temporal_workflows._graph.typecheck import accepts, type_name
from temporal_workflows._subworkflow import SubWorkflowReport, SubWorkflowRequestMessage, SubWorkflowResponseMessage

if TYPE_CHECKING:
    from temporal_workflows._graph.context import WorkflowContext
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["WorkflowExecutor", "name_subworkflows", "subworkflow_graphs"]


async def _run_by_the_host(*args: Any) -> None:
    """Stands in for the handlers that start or resume a child: the host runs children, never this."""
    raise WorkflowError("a sub-workflow executor's input is run by the host, which starts or resumes its child run")


class WorkflowExecutor(Executor):
    """Runs ``workflow`` as one executor of a parent graph.

    Every input message starts a child run of ``workflow`` (its own state,
    requests and outputs), which runs until it is idle or waits for
    responses. Several inputs in one superstep start several children, side by
    side. The child's outputs are sent on along this executor's edges as
    messages, in the order they were yielded.

    Requests the child makes (``ctx.request_info``) go to the parent as
    :class:`SubWorkflowRequestMessage`s: a parent executor with a handler for
    that type may answer with ``request.create_response(value)`` sent back to
    ``request.executor_id``, or ask the outside world itself. With
    ``propagate_request=True`` the request instead becomes this executor's own
    request, same id and data: whoever runs the parent sees and answers it
    (``run(responses=...)``, ``RunHandle.respond``), and the answer resumes the
    child. So does a request no parent executor takes (no handler for
    ``SubWorkflowRequestMessage`` on this executor's edges): it reaches the
    outside instead of being lost.

    Unlike Agent Framework, where every input advances one shared instance of
    the sub-workflow (and overlapping inputs interfere unless it is
    stateless), each input has a child run of its own; a child waiting for
    answers is part of the parent's committed state, so a checkpoint, reset
    or fork of the parent brings its children back exactly as they were, and
    an answered request is never asked again.

    Args:
        workflow: The child graph (built). Its checkpoint storage is not used:
            the parent's checkpoints hold its children.
        id: The executor's id in the parent.
        allow_direct_output: Yield the child's outputs as the parent's own
            outputs instead of sending them as messages.
        propagate_request: Make the child's requests this executor's own
            (see above) instead of sending ``SubWorkflowRequestMessage``s.
        options: How the executor's own steps (which route the child's
            outputs) run on Temporal.
    """

    def __init__(
        self,
        workflow: Workflow,
        id: str,
        allow_direct_output: bool = False,
        propagate_request: bool = False,
        *,
        options: ExecutorOptions | None = None,
    ) -> None:
        if not is_graph_workflow(workflow):
            raise TypeError(f"WorkflowExecutor wraps a built Workflow (WorkflowBuilder.build()), not {workflow!r}")
        super().__init__(id, options=options)
        self.workflow = workflow
        self.allow_direct_output = allow_direct_output
        self.propagate_request = propagate_request
        outs: list[Any] = [] if allow_direct_output else list(child_output_types(workflow))
        if self.can_request and not propagate_request:
            outs.append(SubWorkflowRequestMessage)
        wouts = tuple(child_output_types(workflow)) if allow_direct_output else ()
        start = workflow.graph.executors[workflow.start_executor_id]
        specs = [
            HandlerSpec(f"start_{h.name}", _run_by_the_host, h.input_type, tuple(outs), wouts, bound=False)
            for h in start.handlers
            if h.input_type is not SubWorkflowResponseMessage
        ]
        specs.append(HandlerSpec("resume", _run_by_the_host, SubWorkflowResponseMessage, tuple(outs), wouts, False))
        self._handler_specs = tuple(specs)
        self._response_specs = ()
        self._report = HandlerSpec("report", _run_by_the_host, SubWorkflowReport, tuple(outs), wouts, bound=False)
        self._outs = outs

    @property
    def can_request(self) -> bool:
        """Whether a child run can make requests that reach this executor."""
        for ex in self.workflow.graph.executors.values():
            if isinstance(ex, WorkflowExecutor):
                if ex.propagate_request and ex.can_request:
                    return True
            elif ex.response_handlers:
                return True
        return False

    @property
    def output_types(self) -> list[Any]:
        return list(self._outs)

    def find_handler(self, message: Any) -> HandlerSpec | None:
        if isinstance(message, SubWorkflowReport):
            return self._report
        return super().find_handler(message)

    def find_response_handler(self, request: Any, response_type_name: str | None) -> ResponseHandlerSpec | None:
        """The child's response handler a propagated request of this executor is answered for.

        Responses are validated against it (the child's response type) before
        they are accepted, as for any request of the parent.
        """
        found = self._child_response_spec(request, response_type_name, exact=True)
        if found is None:
            found = self._child_response_spec(request, response_type_name, exact=False)
        if found is None:
            return None
        return dataclasses.replace(found, name="resume", func=_run_by_the_host)

    def _child_response_spec(self, request: Any, name: str | None, *, exact: bool) -> ResponseHandlerSpec | None:
        for ex in self.workflow.graph.executors.values():
            if isinstance(ex, WorkflowExecutor):
                spec = ex.find_response_handler(request, name)
                if spec is not None:
                    return spec
                continue
            for r in ex.response_handlers:
                named = not exact or name is None or type_name(r.response_type) == name
                if named and accepts(r.request_type, request):
                    return r
        return None

    async def _invoke(self, spec: HandlerSpec, message: Any, ctx: Any) -> None:
        if spec is not self._report:
            await _run_by_the_host()
        await self._forward(message, ctx)

    async def _invoke_response(self, spec: ResponseHandlerSpec, request: Any, response: Any, ctx: Any) -> None:
        await _run_by_the_host()

    async def _forward(self, report: SubWorkflowReport, ctx: WorkflowContext[Any, Any]) -> None:
        """Hand on what one activation of a child produced: outputs first, then its new requests (as MAF does)."""
        for out in report.outputs:
            value = decode(out)
            if self.allow_direct_output:
                await ctx.yield_output(value)
            else:
                await ctx.send_message(value)
        for req in report.requests:
            if not self.propagate_request and self._intercepted(req, ctx):
                continue
            # The same request, now this executor's: the parent's engine stamps its own deadline.
            own = dataclasses.replace(req, executor_id=self.id, superstep=ctx.superstep, created_at=None, deadline=None)
            ctx._result.requests.append(own)

    def _intercepted(self, req: PendingRequest, ctx: WorkflowContext[Any, Any]) -> bool:
        """Send a child's request into the parent as a ``SubWorkflowRequestMessage``, if an executor takes it.

        A request no executor of the parent takes (none has a handler for the
        type on this executor's edges, or their conditions all refuse it) is
        not lost, as it would be in Agent Framework: it becomes this
        executor's own request, as with ``propagate_request``.
        """
        message = SubWorkflowRequestMessage(source_event=request_event(req), executor_id=self.id)
        env = encode(message, what=f"request message sent by executor {self.id!r}")
        try:
            deliveries = ctx._graph.route(self.id, message, env, None)
        except UndeliverableMessageError:
            return False
        ctx._result.sent.extend(deliveries)
        return bool(deliveries)

    def __repr__(self) -> str:
        return f"WorkflowExecutor(id={self.id!r}, workflow={self.workflow.name!r})"


def child_output_types(workflow: Workflow) -> list[Any]:
    """What a graph's runs yield (every executor's declared workflow output types), in order, once each."""
    seen: list[Any] = []
    for ex in workflow.graph.executors.values():
        specs: list[HandlerSpec | ResponseHandlerSpec] = [*ex.handlers, *ex.response_handlers]
        for h in specs:
            for t in h.workflow_output_types:
                if t not in seen:
                    seen.append(t)
    return seen


def name_subworkflows(workflow: Workflow) -> None:
    """Name every unnamed child graph under ``workflow`` after its place (``"<parent>.<executor>"``).

    A child runs on Temporal as a workflow of its graph's name, so a worker
    hosting the parent hosts its children under these names; an Agent
    Framework sub-workflow built without a name ports unchanged. The names
    are recorded in each graph's topology (``subworkflows``).
    """
    graph = workflow.graph
    name = graph.topology.name
    subs: dict[str, str] = {}
    for ex in graph.executors.values():
        if not isinstance(ex, WorkflowExecutor):
            continue
        child = ex.workflow
        if (not child.name or child.name_is_generated) and name:
            # A child built without a name (Agent Framework names it WorkflowBuilder-<uuid>, new in every
            # process) is named after its place in the parent, as stable as the parent's own name.
            child.graph.topology = dataclasses.replace(child.graph.topology, name=bounded_id(f"{name}.{ex.id}"))
            child.graph.name_generated = workflow.name_is_generated
        name_subworkflows(child)
        subs[ex.id] = child.name or ""
    if subs != graph.topology.subworkflows:
        graph.topology = dataclasses.replace(graph.topology, subworkflows=subs)


def subworkflow_graphs(workflows: list[Workflow]) -> list[Workflow]:
    """``workflows`` and every child graph under them, each once (what a worker must host)."""
    out: list[Workflow] = []
    todo = list(workflows)
    while todo:
        wf = todo.pop(0)
        if any(w is wf for w in out):
            continue
        out.append(wf)
        todo.extend(ex.workflow for ex in wf.graph.executors.values() if isinstance(ex, WorkflowExecutor))
    return out
