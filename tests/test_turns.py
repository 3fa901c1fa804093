"""Which rest ends the turn that took a piece of input (``temporal/_workflow/turns.py``): the record a client that
follows a run's stream (an AG-UI turn) asks about, kept without any command."""

from __future__ import annotations

from temporal_workflows.temporal._workflow.turns import MAX_TRACKED, Turns, delivery_key, request_key


class Stream:
    """The run's event stream offset (what the next published event gets)."""

    def __init__(self) -> None:
        self.offset = 0


def test_a_rest_ends_only_the_turns_of_input_already_taken() -> None:
    stream = Stream()
    turns = Turns(lambda: stream.offset)
    a, b = delivery_key("a"), request_key("r1")
    turns.queued(a)
    assert turns.where([a, b, "delivery:unknown"]) == {
        a: {"taken": False, "done_at": None, "interrupted": False},
        b: None,
        "delivery:unknown": None,
    }
    turns.taken(a)
    stream.offset = 7
    turns.queued(b)  # arrives while a's turn runs, taken only after the run rested
    turns.ended()  # the rest at offset 7
    assert turns.where([a])[a] == {"taken": True, "done_at": 7, "interrupted": False}
    assert turns.where([b])[b] == {"taken": False, "done_at": None, "interrupted": False}
    stream.offset = 9  # the run says it was idle (8), then works on b
    turns.taken(b)
    stream.offset = 12
    turns.ended()
    assert turns.where([a, b]) == {
        a: {"taken": True, "done_at": 7, "interrupted": False},
        b: {"taken": True, "done_at": 12, "interrupted": False},
    }


def test_an_interruption_ends_the_interrupted_turn_not_the_interrupting_one() -> None:
    stream = Stream()
    turns = Turns(lambda: stream.offset)
    first, second = delivery_key("first"), delivery_key("second")
    turns.queued(first)
    turns.taken(first)
    stream.offset = 5
    turns.queued(second)  # sent with policy interrupt: taken only after the interruption is carried out
    turns.ended(interrupted=True)
    turns.taken(second)
    stream.offset = 20
    turns.ended()
    assert turns.where([first, second]) == {
        first: {"taken": True, "done_at": 5, "interrupted": True},
        second: {"taken": True, "done_at": 20, "interrupted": False},
    }


def test_the_same_input_again_changes_nothing_and_the_record_is_carried() -> None:
    stream = Stream()
    turns = Turns(lambda: stream.offset)
    key = delivery_key("m1")
    turns.queued(key)
    turns.taken(key)
    stream.offset = 3
    turns.ended()
    turns.queued(key)  # a client retrying the same delivery
    turns.taken(key)
    stream.offset = 8
    turns.ended()
    assert turns.where([key])[key] == {"taken": True, "done_at": 3, "interrupted": False}
    # Across continue-as-new: an input in a turn that goes on is still open in the next execution.
    open_key = request_key("r9")
    turns.taken(open_key)
    after = Turns(lambda: 30, turns.carry())
    after.ended()
    assert after.where([key, open_key]) == {
        key: {"taken": True, "done_at": 3, "interrupted": False},
        open_key: {"taken": True, "done_at": 30, "interrupted": False},
    }


def test_the_record_is_bounded_and_lets_go_of_ended_turns_first() -> None:
    stream = Stream()
    turns = Turns(lambda: stream.offset)
    waiting = delivery_key("waiting")
    turns.queued(waiting)
    for i in range(MAX_TRACKED + 50):
        key = delivery_key(f"m{i}")
        turns.queued(key)
        turns.taken(key)
        turns.ended()
    kept = turns.carry()
    assert len(kept) == MAX_TRACKED
    assert turns.where([waiting])[waiting] is not None  # still queued: kept
    assert turns.where([delivery_key("m0")])[delivery_key("m0")] is None  # the oldest ended one went first
