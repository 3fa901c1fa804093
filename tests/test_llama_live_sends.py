"""How a ``TemporalRuntime`` run takes a running step's live sends and store writes (``PATCH_LIVE_SENDS``),
without a server: each flush carries the step's whole patch from the store it started with, and the run
applies only what moved since the step's last view, so no write lands twice (a retried attempt re-sends)
and a write another step made meanwhile is not undone."""

from __future__ import annotations

from typing import Any

from workflows.context.state_store import apply_state_patch

from temporal_workflows._llama_runtime._live_sends import LiveSends, apply_leniently, json_diff


def _store(**data: Any) -> dict[str, Any]:
    return {"store_type": "in_memory", "state_data": {"_tree": "dict", "_data": data}}


def _patch(base: dict[str, Any], **data: Any) -> list[dict[str, Any]]:
    """The patch a step that turned ``base``'s data into ``data`` returns (the diff LlamaIndex makes)."""
    return json_diff(base, _store(**data))


def test_a_diff_applied_gives_the_target_and_keeps_python_types_apart() -> None:
    a = {"x": {"y": [1, 2], "z": 1, "gone": 0}, "a/b~": 1}
    b = {"x": {"y": [1, 2, 3], "z": True, "new": {"k": 1.0}}, "a/b~": 2}
    ops = json_diff(a, b)
    assert apply_state_patch(a, ops) == b
    assert type(apply_state_patch(a, ops)["x"]["z"]) is bool  # 1 and True differ in the store
    assert json_diff(b, b) == []
    assert a == {"x": {"y": [1, 2], "z": 1, "gone": 0}, "a/b~": 1}  # the input is left as it was


def test_a_flush_then_the_result_apply_each_write_once_and_keep_another_steps_write() -> None:
    base = _store(n=0, log=["start"])
    live = LiveSends(base=base)
    run = base
    # The sender writes n, a key, and appends to a list, then sends: the flush carries all of it.
    run = apply_leniently(run, live.take(_patch(base, n=1, log=["start", "s"], shared="sender")))
    assert run["state_data"]["_data"] == {"n": 1, "log": ["start", "s"], "shared": "sender"}
    # The receiver the send started writes the shared key (its result lands while the sender works).
    run = apply_state_patch(run, [{"op": "replace", "path": "/state_data/_data/shared", "value": "receiver"}])
    # The sender completes: its result's patch is from its start, as ever; only `after` is new.
    final = _patch(base, n=1, log=["start", "s"], shared="sender", after=2)
    run = apply_leniently(run, live.take(final))
    assert run["state_data"]["_data"] == {"n": 1, "log": ["start", "s"], "shared": "receiver", "after": 2}


def test_a_retried_attempt_resending_its_flushes_does_not_write_twice() -> None:
    base = _store(log=[])
    live = LiveSends(base=base)
    run = base
    first = _patch(base, log=["a"])
    run = apply_leniently(run, live.take(first))
    # The worker died; the retried attempt runs from the same start and flushes the same writes again.
    run = apply_leniently(run, live.take(first))
    run = apply_leniently(run, live.take(_patch(base, log=["a", "b"])))
    assert run["state_data"]["_data"] == {"log": ["a", "b"]}


def test_a_step_that_undoes_a_flushed_write_undoes_it_in_the_run() -> None:
    base = _store(n=0)
    live = LiveSends(base=base)
    run = apply_leniently(base, live.take(_patch(base, n=0, tmp=1)))
    assert run["state_data"]["_data"] == {"n": 0, "tmp": 1}
    run = apply_leniently(run, live.take([]))  # its result: nothing changed from its start after all
    assert run["state_data"]["_data"] == {"n": 0}


def test_an_op_whose_path_another_writer_removed_is_skipped() -> None:
    run = _store(kept=1)
    ops = [
        {"op": "remove", "path": "/state_data/_data/gone"},
        {"op": "replace", "path": "/state_data/_data/missing/deep", "value": 1},
        {"op": "add", "path": "/state_data/_data/new", "value": 2},
    ]
    assert apply_leniently(run, ops)["state_data"]["_data"] == {"kept": 1, "new": 2}


def test_no_store_no_change() -> None:
    assert LiveSends(base=None).take([{"op": "add", "path": "/x", "value": 1}]) == []


def test_the_patch_bundle_stands_for_every_patch_a_run_asks_and_never_changes() -> None:
    """New runs record one marker (``llama-runtime-patches-1``) for the seven patches older runs asked one by
    one; the bundle's list is fixed (a later patch is asked on its own after it)."""
    from temporal_workflows._llama_runtime import _protocol

    asked = {v for k, v in vars(_protocol).items() if k.startswith("PATCH_") and k != "PATCH_BUNDLE"}
    assert set(_protocol.PATCHES_BUNDLED) <= asked
    assert _protocol.PATCHES_BUNDLED == (
        "llama-runtime-step-batches",
        "llama-runtime-collect-speculation",
        "llama-runtime-live-stream",
        "llama-runtime-typed-stop-result",
        "llama-runtime-run-ahead",
        "llama-runtime-settle-started",
        "llama-runtime-live-sends",
    )
