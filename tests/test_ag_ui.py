"""The AG-UI endpoint's pure parts: names derived from a request, event ids, JSON Patch, the emitter's bookkeeping."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ag_ui.core import AssistantMessage, EventType, MessagesSnapshotEvent, UserMessage
from hypothesis import given
from hypothesis import strategies as st

from temporal_workflows.ag_ui._emit import Emitter
from temporal_workflows.ag_ui._ids import TurnCursor, delivery_id, thread_workflow_id
from temporal_workflows.ag_ui._kinds import TurnContext
from temporal_workflows.ag_ui._patch import json_patch, pointer
from temporal_workflows.temporal._protocol import MAX_ID_CHARS


def test_thread_ids_name_distinct_runs_within_temporal_limits() -> None:
    assert thread_workflow_id("ag-ui", "chat", "t-1") == "ag-ui:chat:t-1"
    odd = thread_workflow_id("ag-ui", "chat", "a:b/c d")
    assert odd.startswith("ag-ui:chat#") and odd != thread_workflow_id("ag-ui", "chat", "a:b/c e")
    assert thread_workflow_id("ag-ui", "other", "t-1") != thread_workflow_id("ag-ui", "chat", "t-1")
    long = thread_workflow_id("ag-ui", "x" * 300, "t")
    assert len(long) <= MAX_ID_CHARS and long == thread_workflow_id("ag-ui", "x" * 300, "t")
    assert delivery_id("m-1") == "ag-ui:message:m-1" and delivery_id("m 1").startswith("ag-ui:message#")


def test_cursor_round_trips_and_orders() -> None:
    c = TurnCursor("i", 12, 40, 3)
    assert str(c) == "i12.40.3" and TurnCursor.parse(str(c)) == c
    assert TurnCursor.parse("f0.-1.0") == TurnCursor("f", 0, -1, 0)
    for bad in ("", "x1.2.3", "i1.2", "i1.-2.0", "i1.2.3.4", "i" + "9" * 30 + ".1.1"):
        assert TurnCursor.parse(bad) is None
    assert c.after(40, 4) and c.after(41, 0) and not c.after(40, 3) and not c.after(39, 9)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


def _apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902, the operations json_patch makes (top-level keys; ``-`` appends), as a client applies them."""
    out = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if op["op"] == "remove":
            del out[parts[0]]
        elif op["op"] == "add" and len(parts) == 2 and parts[1] == "-":
            out[parts[0]].append(op["value"])
        else:
            out[parts[0]] = op["value"]
    return out


@given(st.dictionaries(st.text(max_size=6), JSON, max_size=5), st.dictionaries(st.text(max_size=6), JSON, max_size=5))
def test_json_patch_turns_one_state_into_the_next(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert _apply(before, json_patch(before, after)) == after
    assert json_patch(after, after) == []


def test_json_patch_appends_to_a_grown_list_and_escapes_keys() -> None:
    ops = json_patch({"log": [1, 2], "a/b": 1, "t": True}, {"log": [1, 2, 3], "a/b": 2, "t": 1})
    assert {"op": "add", "path": "/log/-", "value": 3} in ops
    assert {"op": "replace", "path": "/a~1b", "value": 2} in ops
    assert {"op": "replace", "path": "/t", "value": 1} in ops  # true is not 1 in JSON
    assert pointer("~x", "y/z") == "/~0x/y~1z"


def _ctx() -> TurnContext:
    return TurnContext("th", "run-1", "ag-ui:g:th", (UserMessage(id="u1", content="hi"),))


def test_a_retried_attempt_is_taken_back_with_a_messages_snapshot() -> None:
    em = Emitter(_ctx())
    em.step_started("s", "writer")
    em.text((1, 0, 1), "Hel", name="writer")
    em.tool_call((1, 0, 1), "call-1", "lookup", '{"q":')
    em.text((2, 0, 1), "kept")
    em.void([(1, 0, 1)])
    made = [e for _, e in em.take()]
    kinds = [e.type for e in made]
    assert kinds.count(EventType.TEXT_MESSAGE_START) == 2 and EventType.TOOL_CALL_END in kinds
    snapshot = made[-1]
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["u1", "run-1/2.0.1/m1"]  # the client's message, the kept text
    assert isinstance(snapshot.messages[1], AssistantMessage) and snapshot.messages[1].content == "kept"
    em.close()
    closing = [e.type for _, e in em.take()]
    assert closing == [EventType.TEXT_MESSAGE_END, EventType.STEP_FINISHED]


def test_step_names_stay_unique_while_active() -> None:
    em = Emitter(_ctx())
    em.step_started("a", "fan")
    em.step_started("b", "fan")
    em.step_finished("a")
    em.step_started("c", "fan")
    names = [getattr(e, "step_name", None) for _, e in em.take()]
    assert names == ["fan", "fan (2)", "fan", "fan"]


@pytest.mark.parametrize("owners", [[(1, 0, 1), (1, 1, 1)], [(1, 1, 1), (1, 0, 1)]])
def test_closing_order_is_the_order_things_opened(owners: list[tuple[int, int, int]]) -> None:
    em = Emitter(_ctx())
    for o in owners:
        em.text(o, "x")
    em.take()
    em.close()
    ended = [e.message_id for _, e in em.take()]  # type: ignore[attr-defined]
    assert ended == [f"run-1/{'.'.join(map(str, o))}/m1" for o in owners]
