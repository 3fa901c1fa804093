"""``built_event``: the events the driver builds without validation are the events validation builds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from temporal_workflows._engine.reporting import STEP_EVENT_DATA_LIMIT
from temporal_workflows._events import (
    ExecutorCompletedEvent,
    ExecutorInvokedEvent,
    SuperStepCompletedEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowIntermediateEvent,
    WorkflowOutputEvent,
    WorkflowRunState,
    WorkflowStatusEvent,
    WorkflowWarningEvent,
    built_event,
)

# Every event the driver builds with built_event, with the field sets it passes.
CASES: list[tuple[type[WorkflowEvent], dict[str, Any]]] = [
    (ExecutorInvokedEvent, {"executor_id": "a", "superstep": 1, "data": 5, "data_type": None}),
    (ExecutorInvokedEvent, {"executor_id": "a", "superstep": 2, "data": [1, "x"], "item_types": [None, None]}),
    (ExecutorInvokedEvent, {"executor_id": "a", "superstep": 2, "data": [{"k": 1}], "data_type": "list[m:M]"}),
    (ExecutorInvokedEvent, {"executor_id": "a", "superstep": 3, "data_omitted": 300_000}),
    (ExecutorCompletedEvent, {"executor_id": "b", "superstep": 1, "data": None}),
    (ExecutorCompletedEvent, {"executor_id": "b", "superstep": 1, "data": [2, 3]}),
    (ExecutorCompletedEvent, {"executor_id": "b", "superstep": 4, "data_omitted": 262_145}),
    (SuperStepStartedEvent, {"superstep": 1, "executor_ids": ["a", "b"]}),
    (SuperStepCompletedEvent, {"superstep": 1, "state_keys_written": ["k"], "checkpoint_id": None}),
    (SuperStepCompletedEvent, {"superstep": 2, "state_keys_written": [], "checkpoint_id": "cp-1"}),
    (WorkflowStatusEvent, {"state": WorkflowRunState.IN_PROGRESS}),
    (WorkflowOutputEvent, {"executor_id": "c", "data": {"x": 1}, "data_type": "m:Out"}),
    (WorkflowIntermediateEvent, {"executor_id": "c", "data": "partial", "data_type": None}),
]


@pytest.mark.parametrize(("cls", "fields"), CASES, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CASES)])
def test_a_built_event_is_the_validated_event(cls: type[WorkflowEvent], fields: dict[str, Any]) -> None:
    built, validated = built_event(cls, **fields), cls(**fields)
    assert type(built) is cls
    assert list(built.__dict__.items()) == list(validated.__dict__.items())  # same fields, same order
    assert built.model_fields_set == validated.model_fields_set
    assert built == validated
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump() == validated.model_dump()
    assert repr(built) == repr(validated)
    assert (built.origin, built.iteration, built.details) == (validated.origin, validated.iteration, validated.details)
    assert built.model_copy(update={"data": "other"}).data == "other"
    assert cls.model_validate_json(built.model_dump_json()) == validated


def test_each_built_event_has_its_own_list_default() -> None:
    a, b = built_event(SuperStepStartedEvent, superstep=1), built_event(SuperStepStartedEvent, superstep=2)
    a.executor_ids.append("x")
    assert b.executor_ids == [] and SuperStepStartedEvent(superstep=3).executor_ids == []


def test_a_built_event_refuses_what_the_validated_one_refuses() -> None:
    with pytest.raises(ValidationError, match="superstep"):
        built_event(ExecutorInvokedEvent, executor_id="a")
    with pytest.raises(TypeError, match="nonsense"):
        built_event(ExecutorInvokedEvent, executor_id="a", superstep=1, nonsense=1)


def test_an_event_with_validators_of_its_own_is_built_the_validated_way() -> None:
    warning = built_event(WorkflowWarningEvent, message="bad signal")
    assert warning.data == "bad signal"  # its model validator ran


@pytest.mark.parametrize(
    "values",
    [
        [5],
        [True, None, 1.5e308, -(2**63)],
        ["é" * 1000, "\x00" * 1000],
        ["x" * (STEP_EVENT_DATA_LIMIT // 6 - 3)],  # the bound says small: it is
        ["x" * (STEP_EVENT_DATA_LIMIT - 10)],  # the bound cannot tell: measured, and small
        ["x" * STEP_EVENT_DATA_LIMIT],  # over the limit
        ["\x01" * (STEP_EVENT_DATA_LIMIT // 6 + 1)],  # escapes to 6 bytes a character: over
        [2 ** (3 * STEP_EVENT_DATA_LIMIT)],  # an int of about 800,000 digits
        [{"a": 1}, [1, 2]],
        ["x" * 100_000, "y" * 100_000, "z" * 100_000],
    ],
)
def test_step_event_data_is_left_out_exactly_when_its_json_is_over_the_limit(values: list[Any]) -> None:
    """The cheap bound that skips measuring small data never changes what an event carries."""
    import sys

    from temporal_workflows._engine.limits import json_size
    from temporal_workflows._engine.reporting import _step_data
    from temporal_workflows._engine.serde import Envelope

    digits = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # the huge int's JSON
    try:
        items = [Envelope(None, v) for v in values]
        fields = {"data": values}
        size = sum(json_size(v) for v in values) + len(values)
        expected = fields if size <= STEP_EVENT_DATA_LIMIT else {"data_omitted": size}
        assert _step_data(fields, items) == expected
    finally:
        sys.set_int_max_str_digits(digits)


def test_a_checkpoint_is_constructed_as_model_construct_makes_it() -> None:
    from temporal_workflows._checkpoints.base import WorkflowCheckpoint
    from temporal_workflows._events import constructed

    fields: dict[str, Any] = {
        "checkpoint_id": "cp",
        "workflow_name": "w",
        "run_id": "r",
        "graph_signature_hash": "h",
        "timestamp": "2026-01-01T00:00:00.000000+00:00",
        "superstep": 3,
        "state": {},
        "messages": [],
        "metadata": {"k": 1},
    }
    fast, slow = constructed(WorkflowCheckpoint, **fields), WorkflowCheckpoint.model_construct(**fields)
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())
    assert fast.model_fields_set == slow.model_fields_set
    assert fast == slow and fast.model_dump_json() == slow.model_dump_json()
    other = constructed(WorkflowCheckpoint, **fields)
    assert other.outputs is not fast.outputs  # each its own default list
    # A missing field: pydantic's own model_construct decides (it leaves the field out).
    partial = {k: v for k, v in fields.items() if k != "superstep"}
    assert constructed(WorkflowCheckpoint, **partial).__dict__ == WorkflowCheckpoint.model_construct(**partial).__dict__


def _builder_cases() -> list[tuple[WorkflowEvent, WorkflowEvent]]:
    from temporal_workflows._events import (
        completed_event,
        invoked_event,
        status_event,
        superstep_completed_event,
        superstep_started_event,
    )

    return [
        (invoked_event("a", 1, 5, None), ExecutorInvokedEvent(executor_id="a", superstep=1, data=5, data_type=None)),
        (
            invoked_event("a", 2, {"k": 1}, "m:M"),
            ExecutorInvokedEvent(executor_id="a", superstep=2, data={"k": 1}, data_type="m:M"),
        ),
        (completed_event("b", 3, [2]), ExecutorCompletedEvent(executor_id="b", superstep=3, data=[2])),
        (superstep_started_event(4, ["a", "b"]), SuperStepStartedEvent(superstep=4, executor_ids=["a", "b"])),
        (
            superstep_completed_event(4, ["k"], "cp-1"),
            SuperStepCompletedEvent(superstep=4, state_keys_written=["k"], checkpoint_id="cp-1"),
        ),
        (
            superstep_completed_event(5, [], None),
            SuperStepCompletedEvent(superstep=5, state_keys_written=[], checkpoint_id=None),
        ),
        (status_event(WorkflowRunState.IDLE), WorkflowStatusEvent(state=WorkflowRunState.IDLE)),
    ]


@pytest.mark.parametrize("i", range(len(_builder_cases())))
def test_the_drivers_builders_make_the_validated_event(i: int) -> None:
    built, validated = _builder_cases()[i]
    assert type(built) is type(validated)
    assert list(built.__dict__.items()) == list(validated.__dict__.items())  # same fields, same order
    assert built.model_fields_set == validated.model_fields_set
    assert built == validated and repr(built) == repr(validated) and str(built) == str(validated)
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert (built.origin, built.iteration, built.details) == (validated.origin, validated.iteration, validated.details)
    assert type(validated).model_validate_json(built.model_dump_json()) == validated


def test_events_built_alike_never_share_a_change_to_their_fields_set() -> None:
    """The run's events share one fields set per kind; changing one event changes no other."""
    import copy
    import pickle

    from temporal_workflows._events import completed_event

    a, b, c = (completed_event("x", n, [n]) for n in (1, 2, 3))
    a.data_type = "m:M"  # pydantic records an assigned field in the event's fields set
    assert "data_type" in a.model_fields_set
    assert "data_type" not in b.model_fields_set and "data_type" not in c.model_dump(exclude_unset=True)
    b.model_fields_set.add("item_types")  # a reader changing the set it was given
    assert "item_types" not in c.model_fields_set
    for other in (pickle.loads(pickle.dumps(c)), copy.copy(c), copy.deepcopy(c), c.model_copy()):
        assert other == c and type(other.model_fields_set) is set
        other.data_omitted = 1
        assert "data_omitted" not in c.model_fields_set


@pytest.mark.parametrize(
    ("emitted", "sent", "data"),
    [
        ([], [5], [5]),  # one send, no order recorded: the short way
        (["s1"], ["x"], ["x"]),  # one send, recorded: the short way
        (["s1", "s1"], [1, 2], [1, 2]),
        (["s2"], [7, 7], [7]),  # one message to two targets
        (["s1"], ["x" * STEP_EVENT_DATA_LIMIT], None),  # too large: left out, measured
    ],
)
def test_a_steps_completed_event_lists_what_it_sent_whichever_way_it_is_built(
    emitted: list[str], sent: list[Any], data: list[Any] | None
) -> None:
    from temporal_workflows._engine.machine import RoutedMessage, StepResult, StepTask
    from temporal_workflows._engine.reporting import RunReport
    from temporal_workflows._engine.serde import Envelope

    task = StepTask(superstep=2, index=0, executor_id="a", kind="message", messages=(Envelope(None, 0),))
    routed = [RoutedMessage(f"t{i}", (Envelope(None, v),), ("a",)) for i, v in enumerate(sent)]
    report = RunReport(None, None)  # type: ignore[arg-type]  # (no outputs or requests: the engine is not read)
    report.step_events(task, StepResult(sent=routed, emitted=emitted), committed=True)
    invoked, completed = report.out
    assert invoked == ExecutorInvokedEvent(executor_id="a", superstep=2, data=0, data_type=None)
    assert completed.model_fields_set >= {"executor_id", "superstep"}
    if data is None:
        assert completed.data is None and isinstance(completed, ExecutorCompletedEvent) and completed.data_omitted
    else:
        expected = ExecutorCompletedEvent(executor_id="a", superstep=2, data=data)
        assert list(completed.__dict__.items()) == list(expected.__dict__.items())
        assert completed.model_fields_set == expected.model_fields_set


def test_a_custom_event_may_set_a_private_attribute_before_pydantic_init() -> None:
    """Taking its own fields set first leaves alone an event whose set pydantic has not made yet."""
    from pydantic import PrivateAttr

    class Noted(WorkflowEvent):
        _note: str = PrivateAttr(default="")

        def __init__(self, **kwargs: Any) -> None:
            self._note = "early"  # pydantic allows this before its own __init__
            super().__init__(**kwargs)

    event = Noted(type="noted", data=1)
    assert event.data == 1 and event.model_fields_set == {"type", "data"}
    event.data = 2
    assert event.data == 2
