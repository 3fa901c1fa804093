"""Checkpoint storages beyond the basics: SQLite (deltas, deletes, scoping, failures, concurrency),
the history-only storage in process, and ``checkpoint_every``.

Anything loaded "from a fresh store" goes through a new ``SqliteCheckpointStorage`` on the same
file, so it reads the database rather than the saving instance's in-memory cache.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    CheckpointStorage,
    Executor,
    HistoryCheckpointStorage,
    InMemoryCheckpointStorage,
    SqliteCheckpointStorage,
    Workflow,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    WorkflowRunState,
    executor,
    handler,
    response_handler,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows.errors import CheckpointNotFoundError, CheckpointStorageError
from temporal_workflows.events import SuperStepCompletedEvent

BIG = "x" * 200_000
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class Question(BaseModel):
    topic: str
    n: int


# -- helpers -----------------------------------------------------------------------------------


class RecordingSqlite(SqliteCheckpointStorage):
    """A SQLite store that also keeps the exact objects it was asked to save."""

    def __init__(self, path: Path, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.saved: list[WorkflowCheckpoint] = []

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        cid = await super().save(checkpoint)
        self.saved.append(checkpoint)
        return cid


@pytest.fixture
def open_store() -> Iterator[Callable[..., SqliteCheckpointStorage]]:
    """Opens SQLite stores (plain or recording) and closes them all after the test."""
    opened: list[SqliteCheckpointStorage] = []

    def make(path: Path, *, recording: bool = False, **kwargs: Any) -> SqliteCheckpointStorage:
        store = RecordingSqlite(path, **kwargs) if recording else SqliteCheckpointStorage(path, **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def make_cp(
    cid: str,
    state: dict[str, Any],
    *,
    superstep: int = 0,
    previous: str | None = None,
    run_id: str = "run-1",
    workflow_name: str | None = "wf",
) -> WorkflowCheckpoint:
    return WorkflowCheckpoint(
        checkpoint_id=cid,
        workflow_name=workflow_name,
        run_id=run_id,
        graph_signature_hash="sig",
        previous_checkpoint_id=previous,
        timestamp=T0 + timedelta(seconds=superstep),
        superstep=superstep,
        state={k: Envelope(None, v) for k, v in state.items()},
        messages=[],
    )


def make_chain(states: list[dict[str, Any]], *, prefix: str = "cp", run_id: str = "run-1") -> list[WorkflowCheckpoint]:
    """Checkpoints ``{prefix}0..`` with those states, each naming the one before as its previous."""
    return [
        make_cp(f"{prefix}{i}", s, superstep=i + 1, previous=f"{prefix}{i - 1}" if i else None, run_id=run_id)
        for i, s in enumerate(states)
    ]


def plain_state(cp: WorkflowCheckpoint) -> dict[str, Any]:
    return {k: v.data for k, v in cp.state.items()}


def layout(path: Path) -> dict[str, tuple[str | None, int]]:
    """checkpoint id -> (base_id, depth), read with sqlite3 directly."""
    with closing(sqlite3.connect(path)) as db:
        return {
            cid: (base, depth)
            for cid, base, depth in db.execute("SELECT checkpoint_id, base_id, depth FROM checkpoints")
        }


def stored_bytes(path: Path) -> tuple[int, int]:
    """(sum of state value lengths, sum of body lengths) in the database."""
    with closing(sqlite3.connect(path)) as db:
        (state,) = db.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM checkpoint_state").fetchone()
        (body,) = db.execute("SELECT COALESCE(SUM(LENGTH(body)), 0) FROM checkpoints").fetchone()
    return state, body


def ticker(storage: CheckpointStorage | None = None, *, name: str = "ticker", every: int = 1) -> Workflow:
    """seed puts a big value and a counter in state; tick loops, bumping the counter, until it reaches n."""

    @executor(id="seed")
    async def seed(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_state("big", BIG)
        ctx.set_state("count", 0)
        await ctx.send_message(n)

    @executor(id="tick")
    async def tick(n: int, ctx: WorkflowContext[int, dict[str, int]]) -> None:
        count = ctx.get_state("count") + 1
        ctx.set_state("count", count)
        ctx.set_state("trail", [*ctx.get_state("trail", []), count])
        if count < n:
            await ctx.send_message(n)
        else:
            await ctx.yield_output({"count": count, "big": len(ctx.get_state("big"))})

    return (
        WorkflowBuilder(start_executor=seed, name=name, checkpoint_storage=storage, checkpoint_every=every)
        .add_edge(seed, tick)
        .add_edge(tick, tick)
        .build()
    )


def asking_graph(storage: CheckpointStorage | None = None) -> Workflow:
    """start fans out to asker (asks a question, sends) and s1→s2→s3; both branches fan in to join."""

    class Asker(Executor):
        @handler
        async def ask(self, msg: str, ctx: WorkflowContext[str]) -> None:
            ctx.set_state("asked", msg)
            await ctx.request_info(Question(topic=msg, n=1), str)
            await ctx.send_message("from asker")

        @response_handler
        async def on(self, req: Question, answer: str, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output(f"answer to {req.topic}: {answer}")

    def relay(eid: str) -> Executor:
        @executor(id=eid)
        async def run(msg: str, ctx: WorkflowContext[str]) -> None:
            ctx.set_state("path", [*ctx.get_state("path", []), eid])
            await ctx.send_message(f"{msg}>{eid}")

        return run

    @executor(id="start")
    async def start(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_state("question", Question(topic=msg, n=0))
        await ctx.send_message(msg)

    @executor(id="join")
    async def join(msgs: list[str], ctx: WorkflowContext[None, str]) -> None:
        ctx.set_state("joined", len(msgs))
        await ctx.yield_output(" + ".join(msgs))

    asker, s1, s2, s3 = Asker("asker"), relay("s1"), relay("s2"), relay("s3")
    return (
        WorkflowBuilder(start_executor=start, name="asking", checkpoint_storage=storage)
        .add_fan_out_edges(start, [asker, s1])
        .add_chain([s1, s2, s3])
        .add_fan_in_edges([asker, s3], join)
        .build()
    )


# -- 1. SQLite round trip of real checkpoints ---------------------------------------------------


async def test_sqlite_round_trips_every_checkpoint_of_a_real_run(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db, recording=True)
    assert isinstance(store, RecordingSqlite) and isinstance(store, CheckpointStorage)
    result = await asking_graph(store).run("go")
    assert result.get_outputs() == ["from asker + go>s1>s2>s3"]
    saved = store.saved
    assert [c.superstep for c in saved] == [0, 1, 2, 3, 4, 5]
    assert [c.previous_checkpoint_id for c in saved] == [None, *(c.checkpoint_id for c in saved[:-1])]
    # The checkpoints carry everything worth comparing: typed state, a fan-in buffer, a pending
    # request, messages in flight and an output.
    asked = saved[2]
    assert len(asked.pending_requests) == 1 and asked.fan_in_buffers and asked.messages
    assert asked.state["question"].type is not None and asked.state["question"].data == {"topic": "go", "n": 0}
    assert saved[-1].outputs and saved[-1].state["joined"].data == 2

    fresh = open_store(db)
    for cp in saved:
        loaded = await fresh.load(cp.checkpoint_id)
        assert loaded == cp
        assert loaded.state == cp.state and loaded.messages == cp.messages
        assert loaded.fan_in_buffers == cp.fan_in_buffers and loaded.pending_requests == cp.pending_requests
        assert loaded.outputs == cp.outputs and loaded.previous_checkpoint_id == cp.previous_checkpoint_id
        assert loaded.timestamp == cp.timestamp and loaded.graph_signature_hash == cp.graph_signature_hash
    assert await open_store(db).list_checkpoints(workflow_name="asking", run_id=result.run_id) == saved

    # Metadata survives too (through JSON: a tuple comes back as a list).
    noted = saved[3].model_copy(update={"checkpoint_id": "noted", "metadata": {"label": "before s3", "tags": ("a",)}})
    await store.save(noted)
    assert (await open_store(db).load("noted")).metadata == {"label": "before s3", "tags": ["a"]}


async def test_a_run_resumes_from_a_sqlite_checkpoint_with_its_buffer_and_request(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    first = await asking_graph(open_store(db)).run("go")
    ids = await open_store(db).list_checkpoint_ids(workflow_name="asking", run_id=first.run_id)
    wf = asking_graph()
    resumed = await wf.run(checkpoint_id=ids[2], checkpoint_storage=open_store(db))  # superstep 2, from disk
    assert resumed.get_outputs() == first.get_outputs() and resumed.run_id == first.run_id
    (req,) = wf.pending_requests
    assert req.data == Question(topic="go", n=1)
    final = await wf.run(responses={req.request_id: "yes"})
    assert final.get_outputs() == ["answer to go: yes"]


# -- 2. deltas ---------------------------------------------------------------------------------


async def test_an_unchanged_big_value_is_stored_once_across_a_chain_of_checkpoints(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db, recording=True)
    result = await ticker(store).run(19)  # seed + 19 ticks: 20 supersteps, 20 checkpoints (and the start's)
    assert result.get_outputs() == [{"count": 19, "big": len(BIG)}]
    saved = store.saved[1:]
    assert len(saved) == 20 and all(c.state["big"].data == BIG for c in saved)
    state_bytes, body_bytes = stored_bytes(db)
    assert state_bytes < 2 * len(BIG), f"{state_bytes} state bytes stored for 20 checkpoints of a {len(BIG)}-byte value"
    assert body_bytes < len(BIG)  # the state is not also in the body
    assert [depth for _, depth in layout(db).values()] != [0] * 20  # deltas were used

    fresh = open_store(db)
    for cp in saved:
        loaded = await fresh.load(cp.checkpoint_id)
        assert loaded.state == cp.state, f"superstep {cp.superstep}"
    assert plain_state(saved[-1])["trail"] == list(range(1, 20))

    # A run resumed from a delta in the middle of the chain, read from disk, ends the same way.
    resumed = await ticker().run(checkpoint_id=saved[9].checkpoint_id, checkpoint_storage=open_store(db))
    assert resumed.get_outputs() == result.get_outputs() and resumed.state == result.state


async def test_changed_removed_and_readded_keys_load_exactly_from_every_checkpoint_of_a_delta_chain(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    states: list[dict[str, Any]] = [
        {"big": BIG, "a": 1, "gone": "x"},
        {"big": BIG, "a": 2, "gone": "x"},
        {"big": BIG, "a": 3},  # "gone" removed
        {"big": BIG, "a": 3, "new": {"k": [1, None]}},
        {"big": BIG, "a": 4, "gone": "back"},  # "gone" back with another value, "new" removed
        {"a": 5, "gone": "back"},  # the big value removed
        {"a": 5, "gone": "back", "big": BIG},  # and put back
        {},
    ]
    cps = make_chain(states)
    store = open_store(db)
    for cp in cps:
        await store.save(cp)
    assert [layout(db)[c.checkpoint_id][1] for c in cps] == list(range(len(cps)))  # all deltas but the first
    state_bytes, _ = stored_bytes(db)
    assert state_bytes < 3 * len(BIG)  # stored at cp0 and cp6 only
    for reader in (store, open_store(db)):
        for cp, expected in zip(cps, states, strict=True):
            assert plain_state(await reader.load(cp.checkpoint_id)) == expected, cp.checkpoint_id


async def test_full_every_bounds_the_length_of_a_delta_chain(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    cps = make_chain([{"big": BIG, "i": i} for i in range(10)])
    store = open_store(db, full_every=4)
    for cp in cps:
        await store.save(cp)
    rows = layout(db)
    assert [rows[c.checkpoint_id][1] for c in cps] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    for cp in cps:
        base, depth = rows[cp.checkpoint_id]
        assert base == (cp.previous_checkpoint_id if depth else None)
    state_bytes, _ = stored_bytes(db)
    assert 3 * len(BIG) <= state_bytes < 4 * len(BIG)  # three full rows: cp0, cp4, cp8
    fresh = open_store(db, full_every=4)
    for i, cp in enumerate(cps):
        assert plain_state(await fresh.load(cp.checkpoint_id)) == {"big": BIG, "i": i}


async def test_full_every_one_stores_every_checkpoint_whole(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db, full_every=1)
    for cp in make_chain([{"i": i} for i in range(3)]):
        await store.save(cp)
    assert layout(db) == {"cp0": (None, 0), "cp1": (None, 0), "cp2": (None, 0)}


async def test_a_parent_the_store_never_saw_or_loaded_gives_a_whole_checkpoint_then_deltas(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    cp0, cp1, cp2 = make_chain([{"big": BIG, "i": 0}, {"big": BIG, "i": 1}, {"big": BIG, "i": 2}])
    await open_store(db).save(cp0)
    other = open_store(db)  # knows nothing of cp0 in memory
    await other.save(cp1)
    assert layout(db)["cp1"] == (None, 0)
    await other.load("cp0")
    await other.save(cp1.model_copy(update={"checkpoint_id": "cp1b"}))
    await other.save(cp2)
    rows = layout(db)
    assert rows["cp1b"] == ("cp0", 1) and rows["cp2"] == ("cp1", 1)
    fresh = open_store(db)
    assert [plain_state(await fresh.load(c))["i"] for c in ("cp0", "cp1", "cp1b", "cp2")] == [0, 1, 1, 2]


async def test_a_delta_never_spans_two_runs(tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    await store.save(make_cp("a0", {"big": BIG}, run_id="run-a"))
    await store.save(make_cp("b0", {"big": BIG, "i": 1}, previous="a0", run_id="run-b"))
    assert layout(db)["b0"] == (None, 0)
    assert plain_state(await open_store(db).load("b0")) == {"big": BIG, "i": 1}


async def test_a_value_that_changes_only_in_json_type_loads_with_its_new_type(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    before = {"flag": 1, "score": 1, "done": 0, "nested": {"ok": [1]}}
    after = {"flag": True, "score": 1.0, "done": False, "nested": {"ok": [True]}}
    cps = make_chain([before, after])
    store = open_store(db)
    for cp in cps:
        await store.save(cp)
    memory = InMemoryCheckpointStorage()
    await memory.save(cps[1])
    expected = plain_state(await memory.load("cp1"))
    loaded = plain_state(await open_store(db).load("cp1"))
    # repr, key by key: True is not 1 and 1.0 is not 1 (== says they are)
    assert {k: repr(v) for k, v in loaded.items()} == {k: repr(v) for k, v in expected.items()}
    assert {k: repr(v) for k, v in expected.items()} == {k: repr(v) for k, v in after.items()}


# -- 3. delete ---------------------------------------------------------------------------------


async def test_deleting_a_delta_base_keeps_later_checkpoints_loadable(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    states: list[dict[str, Any]] = [{"big": BIG, "i": i, **({"odd": i} if i % 2 else {})} for i in range(6)]
    cps = make_chain(states)
    store = open_store(db)
    for cp in cps:
        await store.save(cp)

    assert await store.delete("cp2") is True  # cp3 is a delta of cp2
    assert layout(db)["cp3"] == (None, 0)  # rewritten whole
    with pytest.raises(CheckpointNotFoundError):
        await store.load("cp2")
    assert await store.delete("cp0") is True  # the root: cp1 is a delta of it
    remaining = [1, 3, 4, 5]
    assert await store.list_checkpoint_ids(workflow_name="wf", run_id="run-1") == [f"cp{i}" for i in remaining]
    for reader in (store, open_store(db)):
        for i in remaining:
            assert plain_state(await reader.load(f"cp{i}")) == states[i]

    # A new checkpoint after the deleted one (a fork from it) is stored so that it loads too.
    await store.save(make_cp("fork", {"big": BIG, "i": 99}, superstep=3, previous="cp2"))
    assert plain_state(await open_store(db).load("fork")) == {"big": BIG, "i": 99}


async def test_delete_and_load_of_unknown_ids(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    store = open_store(tmp_path / "cp.sqlite")
    assert await store.delete("nope") is False
    with pytest.raises(CheckpointNotFoundError) as info:
        await store.load("nope")
    assert info.value.checkpoint_id == "nope" and "'nope'" in str(info.value)
    await store.save(make_cp("cp0", {"i": 0}))
    assert await store.delete("cp0") is True
    assert await store.delete("cp0") is False
    with pytest.raises(CheckpointNotFoundError):
        await open_store(tmp_path / "cp.sqlite").load("cp0")


async def test_a_parent_deleted_through_another_store_is_not_used_as_a_delta_base(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    writer, cleaner = open_store(db), open_store(db)
    cp0, cp1 = make_chain([{"big": BIG, "i": 0}, {"big": BIG, "i": 1}])
    await writer.save(cp0)
    assert await cleaner.delete("cp0") is True
    await writer.save(cp1)  # writer still has cp0 in memory
    assert plain_state(await open_store(db).load("cp1")) == {"big": BIG, "i": 1}


async def test_saving_over_a_delta_base_does_not_change_the_checkpoints_after_it(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    cp0, cp1 = make_chain([{"x": 1, "y": 1}, {"x": 1, "y": 2}])
    await store.save(cp0)
    await store.save(cp1)
    await store.save(make_cp("cp0", {"x": 9, "y": 1}, superstep=1))  # same id, other state
    assert plain_state(await open_store(db).load("cp0")) == {"x": 9, "y": 1}
    assert plain_state(await open_store(db).load("cp1")) == {"x": 1, "y": 2}


# -- 4. scoping --------------------------------------------------------------------------------


async def test_runs_sharing_a_file_see_only_their_own_checkpoints_oldest_first(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    r1 = await ticker(store).run(3)
    r2 = await ticker(store).run(2)
    assert r1.run_id != r2.run_id
    for reader in (store, open_store(db)):
        for run, steps, count in ((r1, [0, 1, 2, 3, 4], 3), (r2, [0, 1, 2, 3], 2)):
            cps = await reader.list_checkpoints(workflow_name="ticker", run_id=run.run_id)
            assert [c.superstep for c in cps] == steps and {c.run_id for c in cps} == {run.run_id}
            assert [c.timestamp for c in cps] == sorted(c.timestamp for c in cps)
            ids = await reader.list_checkpoint_ids(workflow_name="ticker", run_id=run.run_id)
            assert ids == [c.checkpoint_id for c in cps]
            latest = await reader.get_latest(workflow_name="ticker", run_id=run.run_id)
            assert latest is not None and latest.checkpoint_id == ids[-1] and latest.state["count"].data == count
        assert len(await reader.list_checkpoint_ids(workflow_name="ticker")) == 9
        assert await reader.list_checkpoints(workflow_name="other") == []
        assert await reader.list_checkpoint_ids(workflow_name="other", run_id=r1.run_id) == []
        assert await reader.get_latest(workflow_name="other") is None
        assert await reader.get_latest(workflow_name=None) is None
        assert await reader.get_latest(workflow_name="ticker", run_id="no-such-run") is None


async def test_listing_orders_by_timestamp_not_by_save_order(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    for i in (3, 0, 4, 1, 2):
        await store.save(make_cp(f"cp{i}", {"i": i}, superstep=i))
    await store.save(make_cp("unnamed", {"i": 9}, superstep=9, workflow_name=None))
    assert await open_store(db).list_checkpoint_ids(workflow_name="wf") == ["cp0", "cp1", "cp2", "cp3", "cp4"]
    latest = await open_store(db).get_latest(workflow_name="wf", run_id="run-1")
    assert latest is not None and latest.checkpoint_id == "cp4"
    assert await store.list_checkpoint_ids(workflow_name=None) == ["unnamed"]


# -- 5. save failures --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["db_is_a_directory", "parent_is_a_file"])
async def test_a_save_that_cannot_write_raises_naming_the_checkpoint_and_path(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage], where: str
) -> None:
    if where == "db_is_a_directory":
        db = tmp_path / "cp.sqlite"
        db.mkdir()
    else:
        (tmp_path / "file").write_text("not a directory")
        db = tmp_path / "file" / "cp.sqlite"
    store = open_store(db)
    with pytest.raises(CheckpointStorageError) as info:
        await store.save(make_cp("doomed-checkpoint", {"i": 1}))
    assert "'doomed-checkpoint'" in str(info.value) and str(db) in str(info.value)

    wf = ticker(store)
    with pytest.raises(CheckpointStorageError):
        await wf.run(2)
    assert wf.run_state is WorkflowRunState.FAILED


def remove_database(db: Path, how: str) -> None:
    """Take the database file away from under an open store, as an operator or a cleanup job might."""
    if how == "db_removed":  # rm checkpoints.sqlite
        db.unlink()
    elif how == "db_and_journal_removed":  # rm -rf .temporal
        for f in db.parent.glob(db.name + "*"):
            f.unlink()
    elif how == "db_replaced":  # a restore that writes a copy over it
        copy = db.with_name("copy.sqlite")
        shutil.copyfile(db, copy)
        os.replace(copy, db)
    elif how == "wal_removed":  # rm checkpoints.sqlite-wal: recent commits live there until a checkpoint
        db.with_name(db.name + "-wal").unlink()


@pytest.mark.parametrize("how", ["db_removed", "db_and_journal_removed", "db_replaced", "wal_removed"])
async def test_a_database_removed_under_the_store_fails_every_save_and_read_naming_it(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage], how: str
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    await store.save(make_cp("cp-1", {"i": 1}))
    remove_database(db, how)
    with pytest.raises(CheckpointStorageError) as info:
        await store.save(make_cp("cp-2", {"i": 2}, superstep=1, previous="cp-1"))
    message = str(info.value)
    assert "could not save checkpoint 'cp-2'" in message and str(db) in message
    assert ("was replaced by another file" if how == "db_replaced" else "was removed") in message
    if how == "wal_removed":
        assert "write-ahead log" in message
    # Reads fail as well, even of a checkpoint the store has in memory: it is no longer on disk.
    for call, doing in (
        (store.load("cp-1"), "could not load checkpoint 'cp-1'"),
        (store.list_checkpoint_ids(workflow_name="wf"), "could not list checkpoints"),
        (store.get_latest(workflow_name="wf"), "could not list checkpoints"),
        (store.delete("cp-1"), "could not delete checkpoint 'cp-1'"),
    ):
        with pytest.raises(CheckpointStorageError, match=doing):
            await call
    # close() opens what is at the path now; what is saved then is on disk.
    store.close()
    await store.save(make_cp("cp-3", {"i": 3}, superstep=2))
    # (Closing the last connection moved a removed log's commits into the file; a crash would have lost them.)
    expected = ["cp-3"] if how in ("db_removed", "db_and_journal_removed") else ["cp-1", "cp-3"]
    assert await open_store(db).list_checkpoint_ids(workflow_name="wf") == expected


async def test_a_database_removed_while_a_save_commits_fails_that_save(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    class RemovedMidSave(SqliteCheckpointStorage):
        def _make_whole(self, db: sqlite3.Connection, checkpoint_id: str) -> None:
            if checkpoint_id == "cp-2":
                self.path.unlink()  # after the check before the write, before its commit
            super()._make_whole(db, checkpoint_id)

    db = tmp_path / "cp.sqlite"
    store = RemovedMidSave(db)
    try:
        await store.save(make_cp("cp-1", {"i": 1}))
        with pytest.raises(CheckpointStorageError, match=r"could not save checkpoint 'cp-2'.*was removed"):
            await store.save(make_cp("cp-2", {"i": 2}, superstep=1, previous="cp-1"))
    finally:
        store.close()


async def test_a_run_whose_database_is_removed_fails_instead_of_checkpointing_into_nothing(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    assert (await ticker(store).run(2)).get_outputs() == [{"count": 2, "big": len(BIG)}]
    remove_database(db, "db_removed")
    wf = ticker(store)
    with pytest.raises(CheckpointStorageError, match="was removed"):
        await wf.run(2)
    assert wf.run_state is WorkflowRunState.FAILED


async def test_a_database_that_is_still_there_keeps_working_even_moved_away_and_back(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    chain = make_chain([{"big": BIG, "i": i} for i in range(5)])
    for cp in chain[:3]:
        await store.save(cp)
    os.rename(db, tmp_path / "elsewhere.sqlite")  # the same file, back under its name: nothing was lost
    os.rename(tmp_path / "elsewhere.sqlite", db)
    for cp in chain[3:]:
        await store.save(cp)
    assert await store.list_checkpoint_ids(workflow_name="wf") == [c.checkpoint_id for c in chain]
    fresh = open_store(db)
    assert [plain_state(await fresh.load(c.checkpoint_id)) for c in chain] == [plain_state(c) for c in chain]

    in_memory = open_store(":memory:")  # no file to watch
    for cp in chain:
        await in_memory.save(cp)
    assert await in_memory.list_checkpoint_ids(workflow_name="wf") == [c.checkpoint_id for c in chain]


# -- 6. concurrency ----------------------------------------------------------------------------


async def test_concurrent_saves_from_two_runs_all_land(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    chains = {
        run: make_chain([{"big": BIG, "run": run, "i": i} for i in range(10)], prefix=f"{run}-", run_id=run)
        for run in ("run-a", "run-b")
    }
    interleaved = [cp for pair in zip(*chains.values(), strict=True) for cp in pair]
    ids = await asyncio.gather(*(store.save(cp) for cp in interleaved))
    assert ids == [cp.checkpoint_id for cp in interleaved]
    for reader in (store, open_store(db)):
        for run, cps in chains.items():
            assert await reader.list_checkpoint_ids(workflow_name="wf", run_id=run) == [c.checkpoint_id for c in cps]
            loaded = await asyncio.gather(*(reader.load(c.checkpoint_id) for c in cps))
            assert [plain_state(c) for c in loaded] == [plain_state(c) for c in cps]


async def test_two_runs_checkpointing_concurrently_into_one_file(
    tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> None:
    db = tmp_path / "cp.sqlite"
    store = open_store(db)
    r1, r2 = await asyncio.gather(ticker(store).run(5), ticker(store).run(6))
    fresh = open_store(db)
    for run, n in ((r1, 5), (r2, 6)):
        cps = (await fresh.list_checkpoints(workflow_name="ticker", run_id=run.run_id))[1:]  # after the start's
        assert [c.state["count"].data for c in cps] == list(range(n + 1))
        assert all(c.state["big"].data == BIG for c in cps)
        resumed = await ticker().run(checkpoint_id=cps[2].checkpoint_id, checkpoint_storage=fresh)
        assert resumed.get_outputs() == run.get_outputs() == [{"count": n, "big": len(BIG)}]


# -- 7. history-only storage in process --------------------------------------------------------


async def test_history_storage_in_process_behaves_like_the_in_memory_one() -> None:
    assert HistoryCheckpointStorage().keep == 3 and HistoryCheckpointStorage(keep=2).keep == 2
    history, memory = HistoryCheckpointStorage(keep=2), InMemoryCheckpointStorage()
    assert isinstance(history, CheckpointStorage)
    runs = {}
    for store in (history, memory):
        runs[store] = await ticker(store).run(4)
    h_cps = await history.list_checkpoints(workflow_name="ticker", run_id=runs[history].run_id)
    m_cps = await memory.list_checkpoints(workflow_name="ticker", run_id=runs[memory].run_id)
    assert len(h_cps) == len(m_cps) == 6  # in process, keep does not prune
    assert [plain_state(c) for c in h_cps] == [plain_state(c) for c in m_cps]
    assert await history.list_checkpoint_ids(workflow_name="ticker") == [c.checkpoint_id for c in h_cps]
    latest = await history.get_latest(workflow_name="ticker", run_id=runs[history].run_id)
    assert latest is not None and latest == h_cps[-1]
    assert await history.load(h_cps[1].checkpoint_id) == h_cps[1]
    assert await history.get_latest(workflow_name="other") is None

    resumed = await ticker().run(checkpoint_id=h_cps[1].checkpoint_id, checkpoint_storage=history)
    assert resumed.get_outputs() == runs[history].get_outputs()

    assert await history.delete(h_cps[0].checkpoint_id) is True
    assert await history.delete(h_cps[0].checkpoint_id) is False
    with pytest.raises(CheckpointNotFoundError):
        await history.load(h_cps[0].checkpoint_id)


# -- 8. checkpoint_every -----------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, open_store: Callable[..., SqliteCheckpointStorage]
) -> CheckpointStorage:
    if request.param == "memory":
        return InMemoryCheckpointStorage()
    return open_store(tmp_path / "cp.sqlite")


async def test_checkpoint_every_saves_only_at_multiples_and_resumes_to_the_same_result(
    any_store: CheckpointStorage,
) -> None:
    wf = ticker(any_store, every=3)
    assert wf.checkpoint_every == 3
    full = await wf.run(6)  # seed + 6 ticks: 7 supersteps
    completed = [e for e in full if isinstance(e, SuperStepCompletedEvent)]
    assert [e.superstep for e in completed] == [1, 2, 3, 4, 5, 6, 7]
    assert [e.superstep for e in completed if e.checkpoint_id is not None] == [3, 6]
    start, *cps = await any_store.list_checkpoints(workflow_name="ticker", run_id=full.run_id)
    assert start.superstep == 0 and [c.superstep for c in cps] == [3, 6]  # and the start's, before superstep 1
    assert [e.checkpoint_id for e in completed if e.checkpoint_id] == [c.checkpoint_id for c in cps]
    assert (
        cps[0].previous_checkpoint_id == start.checkpoint_id and cps[1].previous_checkpoint_id == cps[0].checkpoint_id
    )
    assert cps[0].state["count"].data == 2 and cps[1].state["count"].data == 5

    again = ticker(every=3)
    resumed = await again.run(checkpoint_id=cps[0].checkpoint_id, checkpoint_storage=any_store)
    assert resumed.get_outputs() == full.get_outputs() == [{"count": 6, "big": len(BIG)}]
    assert resumed.state == full.state and resumed.run_id == full.run_id
    ran = [e.superstep for e in resumed if isinstance(e, SuperStepCompletedEvent)]
    assert ran == [4, 5, 6, 7]
    after = await any_store.list_checkpoints(workflow_name="ticker", run_id=full.run_id)
    forks = [c for c in after if c.previous_checkpoint_id == cps[0].checkpoint_id]
    assert len(after) == 4 and [c.superstep for c in forks] == [6, 6]  # the original and the resumed one


async def test_checkpoint_every_zero_saves_none_and_negative_is_refused(any_store: CheckpointStorage) -> None:
    wf = ticker(any_store, every=0)
    assert wf.checkpoint_every == 0
    result = await wf.run(4)
    assert result.get_outputs() == [{"count": 4, "big": len(BIG)}]
    completed = [e for e in result if isinstance(e, SuperStepCompletedEvent)]
    assert len(completed) == 5 and all(e.checkpoint_id is None for e in completed)
    assert await any_store.list_checkpoint_ids(workflow_name="ticker") == []
    with pytest.raises(ValueError, match="checkpoint_every"):
        WorkflowBuilder(checkpoint_every=-1)
    with pytest.raises(ValueError, match="-2"):
        ticker(any_store, every=-2)
