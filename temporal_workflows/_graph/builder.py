"""``WorkflowBuilder``: declare executors and edges, then ``build()`` a checked graph.

``build()`` rejects what would otherwise fail mid-run (or, as in the peers,
silently drop messages): a missing start executor, duplicate ids, duplicate
edges, unreachable executors, and edges whose declared message types the
target cannot handle.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from temporal_workflows._engine.machine import BUILTIN_REDUCERS, FanInGroup, Topology
from temporal_workflows._engine.serde import register_type
from temporal_workflows._errors import GraphValidationError
from temporal_workflows._graph.edges import Case, Default, EdgeGroup, EdgeKind
from temporal_workflows._graph.executor import Executor, is_list_of
from temporal_workflows._graph.graph import Graph
from temporal_workflows._graph.typecheck import compatible, structured_types_in, type_name

if TYPE_CHECKING:
    from temporal_workflows._checkpoints.base import CheckpointStorage
    from temporal_workflows._graph.workflow import Workflow

__all__ = ["WorkflowBuilder"]

ExecutorLike = Executor | str
Reducer = str | Callable[[Any, list[Any]], Any]
OutputSelection = Sequence[ExecutorLike] | Literal["all"] | None
IntermediateSelection = Sequence[ExecutorLike] | Literal["all", "all_other"] | None

_UNSET: Any = object()


class WorkflowBuilder:
    """Builds a :class:`Workflow` from executors and edge groups.

    Args:
        start_executor: Receives the run's start message.
        name: The workflow's name, which checkpoints are filed under; on
            Temporal it is the workflow type. Without one the workflow is
            named ``WorkflowBuilder-<uuid>`` as in Agent Framework (one name
            per builder), which is fine in process, but a graph hosted on
            Temporal needs a name that is the same in every process.
        description: Free text for humans.
        max_iterations: Supersteps allowed per activation before the run fails
            with :class:`SuperstepLimitError` (a guard against endless loops).
        checkpoint_storage: Where checkpoints go. In process, none are taken
            without one; on Temporal the worker's default storage is used.
        checkpoint_every: With ``checkpoint_storage`` set, a checkpoint is
            taken every this many supersteps (1: at every boundary; 0: only
            when asked for, which on Temporal is the ``checkpoint`` signal),
            and one before the first superstep of each input (the start
            message, responses): Agent Framework's "iteration 0".
        output_from: The executors whose ``yield_output`` values are workflow
            outputs (``output`` events, ``get_outputs()``, a Temporal run's
            result), or ``"all"``. Omitted (and no ``intermediate_output_from``):
            every executor's are. Once either is given, yields of executors in
            neither list are hidden (they still show in the executor's
            ``executor_completed`` event), as in Agent Framework.
        intermediate_output_from: The executors whose yields are intermediate
            outputs (``intermediate`` events, ``get_intermediate_outputs()``,
            not part of a run's outputs); ``"all"``, or ``"all_other"``: every
            executor that declares workflow output types and is not in
            ``output_from``.
        output_executors: Agent Framework's earlier name for ``output_from``.
        intermediate_executors: Agent Framework's earlier name for
            ``intermediate_output_from``.
    """

    def __init__(
        self,
        start_executor: ExecutorLike | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        max_iterations: int = 100,
        checkpoint_storage: CheckpointStorage | None = None,
        checkpoint_every: int = 1,
        output_from: OutputSelection = _UNSET,
        intermediate_output_from: IntermediateSelection = _UNSET,
        output_executors: OutputSelection = _UNSET,
        intermediate_executors: IntermediateSelection = _UNSET,
    ) -> None:
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be 0 (on request only) or positive, not {checkpoint_every}")
        self._output_from: OutputSelection = _one_of("output_from", output_from, "output_executors", output_executors)
        self._intermediate_from: IntermediateSelection = _one_of(
            "intermediate_output_from", intermediate_output_from, "intermediate_executors", intermediate_executors
        )
        for what, sel, literals in (
            ("output_from", self._output_from, ("all",)),
            ("intermediate_output_from", self._intermediate_from, ("all", "all_other")),
        ):
            if isinstance(sel, str) and sel not in literals:
                raise GraphValidationError(
                    f"{what} takes a list of executors or {' or '.join(map(repr, literals))}, not {sel!r}"
                )
        self._start = start_executor
        self._name_generated = name is None
        self._name = name if name is not None else f"WorkflowBuilder-{uuid.uuid4()}"
        self._description = description
        self._max_iterations = max_iterations
        self._storage = checkpoint_storage
        self._checkpoint_every = checkpoint_every
        self._executors: list[Executor] = []
        self._groups: list[EdgeGroup] = []
        self._reducers: dict[str, Reducer] = {}
        self._types: list[type] = []
        self._agents: dict[int, Executor] = {}
        start_executor = self._agent(start_executor)
        self._start = start_executor
        if isinstance(start_executor, Executor):
            self._add(start_executor)

    # -- declaring -------------------------------------------------------------

    def _agent(self, candidate: Any) -> Any:
        """An agent object given where an executor goes becomes its ``AgentExecutor`` (one per agent), as in
        Agent Framework; anything else is returned as it is."""
        if isinstance(candidate, (Executor, str)) or not callable(getattr(candidate, "run", None)):
            return candidate
        wrapped = self._agents.get(id(candidate))
        if wrapped is None:
            try:
                from temporal_workflows.agents import AgentExecutor
            except ImportError:
                return candidate  # not an agent this process could run: _add names the problem
            try:
                wrapped = self._agents[id(candidate)] = AgentExecutor(candidate)
            except TypeError:
                return candidate
        return wrapped

    def _add(self, ex: Executor) -> None:
        ex = self._agent(ex)
        if not isinstance(ex, Executor):
            raise GraphValidationError(f"expected an Executor (a class instance or an @executor function), got {ex!r}")
        if not any(e is ex for e in self._executors):
            self._executors.append(ex)

    def _ref(self, ex: ExecutorLike) -> str:
        if isinstance(ex, str):
            return ex
        executor: Executor = self._agent(ex)
        self._add(executor)
        return executor.id

    def _group(self, kind: EdgeKind, sources: list[str], targets: list[str], **kw: Any) -> EdgeGroup:
        g = EdgeGroup(f"{kind}:{','.join(sources)}->{','.join(targets)}", kind, sources, targets, **kw)
        self._groups.append(g)
        return g

    def set_start_executor(self, executor: ExecutorLike) -> WorkflowBuilder:
        executor = self._agent(executor)
        self._start = executor
        if isinstance(executor, Executor):
            self._add(executor)
        return self

    def add_executor(self, executor: Executor) -> WorkflowBuilder:
        """Register an executor not (yet) on any edge, e.g. to refer to it by id later."""
        self._add(executor)
        return self

    def add_edge(
        self, source: ExecutorLike, target: ExecutorLike, condition: Callable[[Any], bool] | None = None
    ) -> WorkflowBuilder:
        """Messages from ``source`` go to ``target`` (when ``condition(message)`` is true)."""
        self._group("single", [self._ref(source)], [self._ref(target)], condition=condition)
        return self

    def add_fan_out_edges(self, source: ExecutorLike, targets: Sequence[ExecutorLike]) -> WorkflowBuilder:
        """Every message from ``source`` goes to each of ``targets`` that accepts its type."""
        self._group("fan_out", [self._ref(source)], [self._ref(t) for t in targets])
        return self

    def add_fan_in_edges(self, sources: Sequence[ExecutorLike], target: ExecutorLike) -> WorkflowBuilder:
        """``target`` gets a ``list`` of the buffered messages once every source has sent one."""
        self._group("fan_in", [self._ref(s) for s in sources], [self._ref(target)])
        return self

    def add_switch_case_edge_group(self, source: ExecutorLike, cases: Sequence[Case | Default]) -> WorkflowBuilder:
        """The first ``Case`` whose condition holds takes the message; else the ``Default``."""
        defaults = [c for c in cases if isinstance(c, Default)]
        if len(defaults) != 1 or not isinstance(cases[-1], Default):
            raise GraphValidationError(
                "a switch-case edge group needs exactly one Default, as its last entry, so that no message "
                "is silently dropped"
            )
        parsed: list[tuple[Callable[[Any], Any] | None, str]] = []
        for c in cases:
            if isinstance(c, Case):
                parsed.append((c.condition, self._ref(c.target)))
            elif isinstance(c, Default):
                parsed.append((None, self._ref(c.target)))
            else:
                raise GraphValidationError(f"switch-case entries must be Case or Default, not {c!r}")
        targets: list[str] = []
        for _, t in parsed:
            if t not in targets:
                targets.append(t)
        self._group("switch_case", [self._ref(source)], targets, cases=parsed)
        return self

    def add_multi_selection_edge_group(
        self,
        source: ExecutorLike,
        targets: Sequence[ExecutorLike],
        selection_func: Callable[[Any, list[str]], Sequence[str]],
    ) -> WorkflowBuilder:
        """``selection_func(message, target_ids)`` picks which targets get each message."""
        if not callable(selection_func):
            raise GraphValidationError("selection_func must be callable")
        self._group("multi_selection", [self._ref(source)], [self._ref(t) for t in targets], selection=selection_func)
        return self

    def add_chain(self, executors: Sequence[ExecutorLike]) -> WorkflowBuilder:
        """Edges from each executor to the next."""
        for a, b in itertools.pairwise(executors):
            self.add_edge(a, b)
        return self

    def add_state_reducer(self, key: str, reducer: Reducer) -> WorkflowBuilder:
        """Let several steps of one superstep write ``key``; their writes are combined.

        ``"append"``: each write is a list, concatenated onto the committed list.
        ``"sum"``: numbers added to the committed value. ``"merge"``: dicts merged
        into the committed dict. A callable ``(committed, [writes]) -> new`` for
        anything else. Writes are combined in task order, never completion order.
        """
        if not isinstance(key, str) or not key or key.startswith("@"):
            raise GraphValidationError(f"reducer key must be a non-empty string not starting with '@', not {key!r}")
        if isinstance(reducer, str):
            if reducer not in BUILTIN_REDUCERS:
                raise GraphValidationError(
                    f"unknown reducer {reducer!r} for state key {key!r}; use one of {list(BUILTIN_REDUCERS)} "
                    "or a callable (committed, writes) -> new"
                )
        elif not callable(reducer):
            raise GraphValidationError(f"reducer for state key {key!r} must be a name or a callable")
        self._reducers[key] = reducer
        return self

    def register_types(self, *types: type) -> WorkflowBuilder:
        """Allow these models/dataclasses in ``Any``-typed messages or state."""
        self._types.extend(types)
        return self

    # -- building --------------------------------------------------------------

    def build(self) -> Workflow:
        """Validate the graph and return a runnable :class:`Workflow`.

        Raises:
            GraphValidationError: naming the executor or edge at fault.
        """
        from temporal_workflows._graph.requestcheck import check_response_handlers
        from temporal_workflows._graph.subworkflow import WorkflowExecutor, name_subworkflows
        from temporal_workflows._graph.workflow import Workflow

        if self._start is None:
            raise GraphValidationError("the workflow has no start executor; pass WorkflowBuilder(start_executor=...)")
        if not isinstance(self._max_iterations, int) or self._max_iterations < 1:
            raise GraphValidationError(f"max_iterations must be a positive integer, not {self._max_iterations!r}")
        executors: dict[str, Executor] = {}
        for ex in self._executors:
            other = executors.get(ex.id)
            if other is not None and other is not ex:
                raise GraphValidationError(
                    f"two different executors share the id {ex.id!r} ({other!r} and {ex!r}); ids must be unique"
                )
            executors[ex.id] = ex
        start_id = self._start if isinstance(self._start, str) else self._start.id
        for ref in [start_id, *(i for g in self._groups for i in (*g.sources, *g.targets))]:
            if ref not in executors:
                raise GraphValidationError(f"executor {ref!r} is referred to by id but was never added")
        for ex in executors.values():
            if not ex.handlers:
                raise GraphValidationError(f"executor {ex.id!r} has no @handler methods")
            # Executors that write a key from several steps at once declare its reducer (agents: the conversation).
            declared = getattr(ex, "state_reducers", None)
            for key, reducer in (declared() if callable(declared) else {}).items():
                self._reducers.setdefault(key, reducer)
        self._check_duplicates()
        self._check_types(executors)
        self._check_reachable(start_id, executors)
        check_response_handlers(executors.values())
        for ex in executors.values():
            for h in ex.handlers:
                for tp in (h.input_type, *h.output_types, *h.workflow_output_types):
                    for t in structured_types_in(tp):
                        register_type(t)
            for r in ex.response_handlers:
                for tp in (r.request_type, r.response_type, *r.output_types, *r.workflow_output_types):
                    for t in structured_types_in(tp):
                        register_type(t)
        for t in self._types:
            register_type(t)
        topology = self._topology(start_id, executors)
        graph = Graph(
            topology=topology,
            executors=executors,
            groups=list(self._groups),
            reducer_funcs={k: v for k, v in self._reducers.items() if callable(v)},
            description=self._description,
            name_generated=self._name_generated,
        )
        workflow = Workflow(graph, checkpoint_storage=self._storage, checkpoint_every=self._checkpoint_every)
        if any(isinstance(ex, WorkflowExecutor) for ex in executors.values()):
            name_subworkflows(workflow)
        return workflow

    def _designation(self, executors: dict[str, Executor]) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
        """``(output_from, intermediate_from)`` as executor ids, checked.

        Raises:
            GraphValidationError: an executor not in the graph, one named twice
                or in both lists, or explicit lists that name nobody.
        """
        declaring = [eid for eid, ex in executors.items() if ex.workflow_output_types]

        def ids(what: str, sel: Any) -> list[str] | None:
            if sel is None:
                return None
            if sel == "all":
                return list(declaring)
            if isinstance(sel, str):
                return None  # "all_other": relative to output_from, below
            out: list[str] = []
            for item in sel:
                eid = item if isinstance(item, str) else getattr(item, "id", None)
                if (
                    not isinstance(eid, str)
                    or eid not in executors
                    or (isinstance(item, Executor) and executors[eid] is not item)
                ):
                    raise GraphValidationError(
                        f"{what} names {item!r}, which is not an executor of this workflow; "
                        f"executors: {sorted(executors)}"
                    )
                if eid in out:
                    raise GraphValidationError(f"{what} names executor {eid!r} twice")
                out.append(eid)
            return out

        outputs = ids("output_from", self._output_from)
        if self._intermediate_from == "all_other":
            intermediates: list[str] | None = [e for e in declaring if e not in (outputs or [])]
        else:
            intermediates = ids("intermediate_output_from", self._intermediate_from)
        if outputs is None and intermediates is None:
            return None, ()
        both = sorted(set(outputs or ()) & set(intermediates or ()))
        if both:
            raise GraphValidationError(f"executors {both} are named in both output_from and intermediate_output_from")
        if not outputs and not intermediates:
            raise GraphValidationError(
                "output_from / intermediate_output_from name no executor, so no yield_output would ever be seen; "
                "name at least one executor, or give neither to make every executor's yields outputs"
            )
        return tuple(outputs or ()), tuple(intermediates or ())

    def _check_duplicates(self) -> None:
        seen: dict[tuple[str, str], str] = {}
        for g in self._groups:
            for s in g.sources:
                for t in dict.fromkeys(g.targets):
                    if (s, t) in seen:
                        raise GraphValidationError(
                            f"duplicate edge {s!r} -> {t!r}: declared by {seen[(s, t)]!r} and {g.id!r}"
                        )
                    seen[(s, t)] = g.id

    def _check_types(self, executors: dict[str, Executor]) -> None:
        for g in self._groups:
            for t in g.targets:
                target = executors[t]
                ins = target.input_types
                if g.kind == "fan_in" and not any(is_list_of(i) is not None or i is Any or i is object for i in ins):
                    raise GraphValidationError(
                        f"fan-in target {t!r} needs a handler that takes a list (e.g. list[T]); "
                        f"it handles {[type_name(i) for i in ins]}"
                    )
                for s in g.sources:
                    outs = executors[s].output_types
                    if not outs:
                        continue  # undeclared: checked at send time instead
                    if g.kind == "fan_in":
                        ok = any(compatible(list[o], i) for o in outs for i in ins)  # type: ignore[valid-type]
                    else:
                        ok = any(compatible(o, i) for o in outs for i in ins)
                    if not ok:
                        raise GraphValidationError(
                            f"edge {s!r} -> {t!r}: {s!r} sends {[type_name(o) for o in outs]} but {t!r} "
                            f"handles {[type_name(i) for i in ins]}"
                        )

    def _check_reachable(self, start_id: str, executors: dict[str, Executor]) -> None:
        adj: dict[str, list[str]] = {}
        for g in self._groups:
            for s in g.sources:
                adj.setdefault(s, []).extend(g.targets)
        seen = {start_id}
        todo = [start_id]
        while todo:
            for n in adj.get(todo.pop(), []):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        unreachable = [e for e in executors if e not in seen]
        if unreachable:
            raise GraphValidationError(
                f"executors {unreachable} cannot be reached from the start executor {start_id!r}"
            )

    def _topology(self, start_id: str, executors: dict[str, Executor]) -> Topology:
        from temporal_workflows._graph.subworkflow import WorkflowExecutor

        edges = tuple(g.describe() for g in self._groups)
        reducers = {k: (v if isinstance(v, str) else "callable") for k, v in self._reducers.items()}
        shape = {
            # A made-up name is not part of the shape: the graph's signature stays what it was without one.
            "name": None if self._name_generated else self._name,
            "start": start_id,
            "executors": [
                {
                    "id": e.id,
                    "class": f"{type(e).__module__}.{type(e).__qualname__}",
                    "inputs": [type_name(t) for t in e.input_types],
                    # A sub-workflow executor is as its child graph is: a changed child changes the parent.
                    **({"subworkflow": e.workflow.graph_signature_hash} if isinstance(e, WorkflowExecutor) else {}),
                }
                for e in executors.values()
            ],
            "edges": edges,
            "reducers": {
                k: (v if isinstance(v, str) else getattr(v, "__qualname__", "callable"))
                for k, v in self._reducers.items()
            },
        }
        digest = hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()
        fan_ins = {g.id: FanInGroup(g.id, tuple(g.sources), g.targets[0]) for g in self._groups if g.kind == "fan_in"}
        output_from, intermediate_from = self._designation(executors)
        return Topology(
            name=self._name,
            start_executor_id=start_id,
            executor_ids=tuple(executors),
            fan_in_groups=fan_ins,
            reducers=reducers,
            max_iterations=self._max_iterations,
            signature_hash=digest,
            edges=edges,
            output_from=output_from,
            intermediate_from=intermediate_from,
        )


def _one_of(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The value of an option that has an older alias; both given is an error, neither is ``None``."""
    if value is not _UNSET and alias_value is not _UNSET:
        raise TypeError(f"pass {name} or {alias} (its earlier name), not both")
    if value is not _UNSET:
        return value
    return None if alias_value is _UNSET else alias_value
