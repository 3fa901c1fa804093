"""``GraphWorkflow`` is declared in parts (mixins): the SDK must still see every signal, update and query."""

from __future__ import annotations

from temporalio import workflow

from temporal_workflows.temporal import _protocol as protocol
from temporal_workflows.temporal._workflow.handlers import SIGNALS, UPDATES
from temporal_workflows.temporal._workflow.workflow import GraphWorkflow


def test_every_handler_declared_in_a_part_is_the_workflows() -> None:
    defn = workflow._Definition.must_from_class(GraphWorkflow)
    assert defn.name is None and defn.sandboxed is False  # dynamic, unsandboxed, as before
    # ``None``: the dynamic handlers, which warn about (or refuse) a misspelled name.
    assert set(defn.signals) == {*SIGNALS, None}
    assert set(defn.updates) == {*UPDATES, None}
    queries = {getattr(protocol, n) for n in dir(protocol) if n.startswith("QUERY_")}
    assert set(defn.queries) == queries
