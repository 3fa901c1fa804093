"""``GraphWorkflow`` is declared in parts (mixins): the SDK must still see every signal, update and query."""

from __future__ import annotations

from typing import Any

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


def test_a_continue_as_new_is_postponed_while_its_carry_is_most_of_the_history(monkeypatch: Any) -> None:
    """A long agent conversation's state is its conversation: continuing as new would record it twice more
    (issue #39: 8.15 MB of history for 1.54 MB of conversation, where one segment holds 3.06 MB)."""
    from temporal_workflows._engine.machine import Engine, Topology
    from temporal_workflows._engine.serde import Envelope
    from temporal_workflows.temporal._protocol import POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES
    from temporal_workflows.temporal._workflow import continuation as c

    history = {"size": 4_000_000, "length": 3_000}

    class Info:
        def get_current_history_size(self) -> int:
            return history["size"]

        def get_current_history_length(self) -> int:
            return history["length"]

    class Patches:
        def get(self, patch: str) -> bool:
            return True

    monkeypatch.setattr(c.workflow, "info", lambda: Info())
    later = c.Continuation.__new__(c.Continuation)
    later.patches = Patches()  # type: ignore[assignment]
    later.max_events, later.explicit_max_events, later._not_worth_at = 8_000, False, None
    engine = Engine(Topology("g", "a", ("a",), {}, {}, 100, "h"))
    engine.state = {"conversation:a": Envelope(None, ["x" * 1_000_000, "y" * 1_000_000])}
    assert not later.worth_continuing(engine)  # 2 MB to carry, 4 MB of history: it would not pay
    history["size"] = 4_500_000
    assert not later.worth_continuing(engine)  # not measured again until history grew by a quarter
    history["size"] = 8_100_000
    assert later.worth_continuing(engine)  # now it pays
    later._not_worth_at = None
    history["size"] = POSTPONE_CONTINUE_AS_NEW_HISTORY_BYTES
    engine.state = {"conversation:a": Envelope(None, ["x" * 30_000_000])}
    assert later.worth_continuing(engine)  # at the postponement limit, whatever it carries
    history["size"], later.explicit_max_events = 1_000, True
    history["length"] = later.max_events
    assert later.worth_continuing(engine)  # a bound the run asked for is kept
