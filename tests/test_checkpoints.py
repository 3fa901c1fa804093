"""Checkpoints: one before the first superstep and one per boundary, resume, time travel, storages, isolation,
failures."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    CheckpointStorage,
    Executor,
    FileCheckpointStorage,
    InMemoryCheckpointStorage,
    Workflow,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    WorkflowRunState,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.errors import (
    CheckpointNotFoundError,
    CheckpointStorageError,
    ExecutorFailedError,
    GraphSignatureMismatchError,
    WorkflowError,
)
from temporal_workflows.events import SuperStepCompletedEvent


class Item(BaseModel):
    name: str
    n: int


@pytest.fixture(params=["memory", "file"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStorage:
    if request.param == "memory":
        return InMemoryCheckpointStorage()
    return FileCheckpointStorage(tmp_path / "checkpoints")


FLAGS: dict[str, bool] = {"fail_c": False}


def chain(storage: CheckpointStorage | None = None, name: str = "chain") -> Workflow:
    """a → b → c → d; each adds to "total" and records who ran; d yields the total."""

    def step(eid: str, last: bool = False) -> Executor:
        @executor(id=eid)
        async def run(n: int, ctx: WorkflowContext[int, dict[str, Any]]) -> None:
            if eid == "c" and FLAGS["fail_c"]:
                raise RuntimeError("c is broken")
            ctx.set_state("total", ctx.get_state("total", 0) + n)
            ctx.set_state("ran", [*ctx.get_state("ran", []), eid])
            if last:
                await ctx.yield_output({"total": ctx.get_state("total"), "ran": ctx.get_state("ran")})
            else:
                await ctx.send_message(n + 1)

        return run

    a, b, c, d = step("a"), step("b"), step("c"), step("d", last=True)
    return WorkflowBuilder(start_executor=a, name=name, checkpoint_storage=storage).add_chain([a, b, c, d]).build()


@pytest.fixture(autouse=True)
def _reset_flags() -> Iterator[None]:
    yield
    FLAGS["fail_c"] = False


# -- one checkpoint per boundary --------------------------------------------------------------


async def test_a_checkpoint_is_saved_before_the_first_superstep_and_at_every_boundary(
    storage: CheckpointStorage,
) -> None:
    result = await chain(storage).run(1)
    cps = await storage.list_checkpoints(workflow_name="chain")
    assert [c.superstep for c in cps] == [0, 1, 2, 3, 4]
    assert [c.iteration_count for c in cps] == [0, 1, 2, 3, 4]  # MAF's "iteration 0": the start message in flight
    assert {c.run_id for c in cps} == {result.run_id}
    assert [c.previous_checkpoint_id for c in cps] == [None, *(c.checkpoint_id for c in cps[:-1])]
    completed = [e for e in result if isinstance(e, SuperStepCompletedEvent)]
    assert [e.checkpoint_id for e in completed] == [c.checkpoint_id for c in cps[1:]]
    assert [c.state["total"].data for c in cps[1:]] == [1, 3, 6, 10] and cps[0].state == {}
    assert [[m.target_id for m in c.messages] for c in cps] == [["a"], ["b"], ["c"], ["d"], []]
    for c in cps:
        assert c.graph_signature_hash == chain().graph_signature_hash and c.workflow_name == "chain"
        assert WorkflowCheckpoint.model_validate_json(c.model_dump_json()) == c  # JSON only


async def test_no_storage_means_no_checkpoints_and_run_storage_overrides_the_builders() -> None:
    builder_store, run_store = InMemoryCheckpointStorage(), InMemoryCheckpointStorage()
    result = await chain().run(1)
    assert all(e.checkpoint_id is None for e in result if isinstance(e, SuperStepCompletedEvent))
    await chain(builder_store).run(1, checkpoint_storage=run_store)
    assert await builder_store.list_checkpoint_ids(workflow_name="chain") == []
    assert len(await run_store.list_checkpoint_ids(workflow_name="chain")) == 5


async def test_a_storage_object_that_is_falsy_is_still_used() -> None:
    class SizedStore(InMemoryCheckpointStorage):
        def __len__(self) -> int:
            return len(self._items)

    store = SizedStore()
    assert not store  # empty: falsy, but a storage nonetheless
    await chain().run(1, checkpoint_storage=store)
    assert len(store) == 5
    await chain(SizedStore()).run(1, checkpoint_storage=store)
    assert len(store) == 10


# -- resume and time travel --------------------------------------------------------------------


async def test_resume_from_each_checkpoint_in_a_fresh_workflow_reaches_the_same_result(
    storage: CheckpointStorage,
) -> None:
    full = await chain(storage).run(1)
    cps = await storage.list_checkpoints(workflow_name="chain", run_id=full.run_id)
    for cp in reversed(cps[:-1]):  # time travel: the oldest last
        resumed = await chain().run(checkpoint_id=cp.checkpoint_id, checkpoint_storage=storage)
        assert resumed.get_outputs() == full.get_outputs() == [{"total": 10, "ran": ["a", "b", "c", "d"]}]
        assert resumed.state == full.state and resumed.run_id == full.run_id
        ran = [e.executor_id for e in resumed if e.type == "executor_invoked"]
        assert ran == ["a", "b", "c", "d"][cp.superstep :]  # only what came after the checkpoint


async def test_resuming_extends_the_checkpoint_chain_from_the_resumed_checkpoint() -> None:
    storage = InMemoryCheckpointStorage()
    full = await chain(storage).run(1)
    first = (await storage.list_checkpoints(workflow_name="chain"))[1]
    await chain().run(checkpoint_id=first.checkpoint_id, checkpoint_storage=storage)
    cps = await storage.list_checkpoints(workflow_name="chain", run_id=full.run_id)
    forks = [c for c in cps if c.previous_checkpoint_id == first.checkpoint_id]
    assert len(cps) == 8 and len(forks) == 2  # the original third checkpoint and the resumed one
    latest = await storage.get_latest(workflow_name="chain", run_id=full.run_id)
    assert latest is not None and latest.superstep == 4 and latest.checkpoint_id == cps[-1].checkpoint_id


async def test_a_checkpoint_from_before_a_failure_resumes_once_the_handler_is_fixed(
    storage: CheckpointStorage,
) -> None:
    FLAGS["fail_c"] = True
    wf = chain(storage)
    with pytest.raises(ExecutorFailedError) as info:
        await wf.run(1)
    assert info.value.executor_id == "c" and info.value.superstep == 3
    assert wf.run_state is WorkflowRunState.FAILED
    latest = await storage.get_latest(workflow_name="chain")
    assert latest is not None and latest.superstep == 2
    FLAGS["fail_c"] = False
    result = await wf.run(checkpoint_id=latest.checkpoint_id, checkpoint_storage=storage)
    assert result.get_outputs() == [{"total": 10, "ran": ["a", "b", "c", "d"]}]
    assert wf.run_state is WorkflowRunState.IDLE


async def test_resume_needs_a_storage_a_known_id_and_the_same_graph(storage: CheckpointStorage) -> None:
    await chain(storage).run(1)
    cp = (await storage.list_checkpoints(workflow_name="chain"))[0]
    with pytest.raises(WorkflowError, match="checkpoint storage"):
        await chain().run(checkpoint_id=cp.checkpoint_id)
    with pytest.raises(CheckpointNotFoundError) as info:
        await chain().run(checkpoint_id="no-such-checkpoint", checkpoint_storage=storage)
    assert info.value.checkpoint_id == "no-such-checkpoint" and "'no-such-checkpoint'" in str(info.value)

    @executor(id="a")
    async def other_a(n: int, ctx: WorkflowContext) -> None:
        pass

    changed = WorkflowBuilder(start_executor=other_a, name="chain").build()
    assert changed.graph_signature_hash != chain().graph_signature_hash
    with pytest.raises(GraphSignatureMismatchError, match=cp.checkpoint_id):
        await changed.run(checkpoint_id=cp.checkpoint_id, checkpoint_storage=storage)
    with pytest.raises(WorkflowError, match="not both"):
        await chain().run(1, checkpoint_id=cp.checkpoint_id, checkpoint_storage=storage)


# -- storage API -----------------------------------------------------------------------------


async def test_storage_lists_filters_and_deletes(storage: CheckpointStorage) -> None:
    r1 = await chain(storage).run(1)
    r2 = await chain(storage).run(100)
    await chain(storage, name="other").run(1)
    ids1 = await storage.list_checkpoint_ids(workflow_name="chain", run_id=r1.run_id)
    ids2 = await storage.list_checkpoint_ids(workflow_name="chain", run_id=r2.run_id)
    assert len(ids1) == len(ids2) == 5 and not set(ids1) & set(ids2)
    assert len(await storage.list_checkpoints(workflow_name="chain")) == 10
    assert len(await storage.list_checkpoints(workflow_name="other")) == 5
    assert await storage.list_checkpoints(workflow_name="missing") == []
    assert await storage.get_latest(workflow_name="missing") is None

    latest1 = await storage.get_latest(workflow_name="chain", run_id=r1.run_id)
    assert latest1 is not None and latest1.checkpoint_id == ids1[-1] and latest1.state["total"].data == 10
    latest2 = await storage.get_latest(workflow_name="chain", run_id=r2.run_id)
    assert latest2 is not None and latest2.state["total"].data == 406

    loaded = await storage.load(ids1[2])
    assert loaded.checkpoint_id == ids1[2] and loaded.superstep == 2 and loaded.run_id == r1.run_id
    ids1 = ids1[1:]
    assert await storage.delete(ids1[1]) is True
    assert await storage.delete(ids1[1]) is False
    with pytest.raises(CheckpointNotFoundError):
        await storage.load(ids1[1])
    before = (await storage.list_checkpoint_ids(workflow_name="chain", run_id=r1.run_id))[:1]
    assert await storage.list_checkpoint_ids(workflow_name="chain", run_id=r1.run_id) == [*before, ids1[0], *ids1[2:]]


async def test_two_runs_sharing_a_storage_resume_only_their_own_checkpoints(storage: CheckpointStorage) -> None:
    wf1, wf2 = chain(storage), chain(storage)
    r1, r2 = await wf1.run(1), await wf2.run(1000)
    own = await storage.get_latest(workflow_name="chain", run_id=r1.run_id)
    assert own is not None and own.run_id == r1.run_id
    second = (await storage.list_checkpoints(workflow_name="chain", run_id=r1.run_id))[1]
    resumed = await wf2.run(checkpoint_id=second.checkpoint_id, checkpoint_storage=storage)
    assert resumed.run_id == r1.run_id and resumed.get_outputs() == r1.get_outputs()
    assert r2.get_outputs() == [{"total": 4006, "ran": ["a", "b", "c", "d"]}]


async def test_the_checkpoint_after_a_restore_keeps_fan_in_buffers_and_pending_requests() -> None:
    class Asker(Executor):
        @handler
        async def ask(self, msg: str, ctx: WorkflowContext[str]) -> None:
            await ctx.request_info(Item(name=msg, n=0), str)
            await ctx.send_message("from asker")

        @response_handler
        async def on(self, req: Item, answer: str, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output(f"answer {answer}")

    def relay(eid: str) -> Executor:
        @executor(id=eid)
        async def run(msg: str, ctx: WorkflowContext[str]) -> None:
            await ctx.send_message(f"{msg}>{eid}")

        return run

    @executor(id="start")
    async def start(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(msg)

    @executor(id="join")
    async def join(msgs: list[str], ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(" + ".join(msgs))

    def build(storage: CheckpointStorage) -> Workflow:
        asker, s1, s2, s3 = Asker("asker"), relay("s1"), relay("s2"), relay("s3")
        return (
            WorkflowBuilder(start_executor=start, name="buffers", checkpoint_storage=storage)
            .add_fan_out_edges(start, [asker, s1])
            .add_chain([s1, s2, s3])
            .add_fan_in_edges([asker, s3], join)
            .build()
        )

    storage = InMemoryCheckpointStorage()
    first = await build(storage).run("go")
    cps = await storage.list_checkpoints(workflow_name="buffers")
    after_asking = cps[2]  # superstep 2: asker asked and buffered its message; s2 still to run
    assert after_asking.superstep == 2 and len(after_asking.pending_requests) == 1
    assert buffered(after_asking) == [{"asker": ["from asker"]}]

    store2 = InMemoryCheckpointStorage()
    await store2.save(after_asking)
    wf = build(store2)
    resumed = await wf.run(checkpoint_id=after_asking.checkpoint_id)
    after_restore = await store2.list_checkpoints(workflow_name="buffers")
    assert [c.superstep for c in after_restore] == [2, 3, 4, 5]
    next_cp = after_restore[1]
    assert next_cp.previous_checkpoint_id == after_asking.checkpoint_id
    assert next_cp.pending_requests == after_asking.pending_requests  # still unanswered
    assert buffered(next_cp) == [{"asker": ["from asker"]}]  # s3 has not sent yet
    assert resumed.get_outputs() == first.get_outputs() == ["from asker + go>s1>s2>s3"]
    (req,) = wf.pending_requests
    final = await wf.run(responses={req.request_id: "yes"})
    assert final.get_outputs() == ["answer yes"]


# -- failures of the storage -------------------------------------------------------------------


def buffered(cp: WorkflowCheckpoint) -> list[dict[str, list[Any]]]:
    return [{src: [m.data for m in msgs] for src, msgs in b.items()} for b in cp.fan_in_buffers.values()]


class BrokenStorage(InMemoryCheckpointStorage):
    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.calls = 0

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        self.calls += 1
        if self.calls == self.fail_at:
            raise ConnectionError("checkpoint database unreachable")
        return await super().save(checkpoint)


async def test_a_storage_whose_save_raises_makes_run_raise() -> None:
    storage = BrokenStorage(fail_at=3)  # before superstep 1, after 1, after 2: fails
    wf = chain(storage)
    seen: list[str] = []
    with pytest.raises(CheckpointStorageError, match=r"after superstep 2 could not be saved: .*unreachable") as info:
        async for ev in wf.run(1, stream=True):
            seen.append(ev.type)
    assert isinstance(info.value.__cause__, CheckpointStorageError | ConnectionError)
    assert info.value.superstep == 2
    assert seen.count("superstep_completed") == 1  # superstep 2 never reports a checkpoint it lacks
    assert seen[-2:] == ["failed", "status"]  # the failure is an event too, as on Temporal
    assert wf.run_state is WorkflowRunState.FAILED
    assert [c.superstep for c in await storage.list_checkpoints(workflow_name="chain")] == [0, 1]
    latest = await storage.get_latest(workflow_name="chain")
    assert latest is not None
    resumed = await chain().run(checkpoint_id=latest.checkpoint_id, checkpoint_storage=storage)
    assert resumed.get_outputs() == [{"total": 10, "ran": ["a", "b", "c", "d"]}]


async def test_file_storage_writes_atomically_and_reports_os_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = FileCheckpointStorage(tmp_path)
    await chain(storage).run(1)
    cp = (await storage.list_checkpoints(workflow_name="chain"))[0]
    path = tmp_path / f"{cp.checkpoint_id}.json"
    before = path.read_bytes()

    def failing_replace(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    changed = cp.model_copy(update={"metadata": {"edited": True}})
    with pytest.raises(CheckpointStorageError, match="disk full") as info:
        await storage.save(changed)
    assert cp.checkpoint_id in str(info.value)
    assert path.read_bytes() == before  # the old file is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{c}.json" for c in await storage.list_checkpoint_ids(workflow_name="chain")
    )


async def test_file_storage_holds_readable_json_and_never_pickles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pickle(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle used")

    for name in ("dumps", "loads", "dump", "load"):
        monkeypatch.setattr(pickle, name, no_pickle)
    storage = FileCheckpointStorage(tmp_path)
    result = await chain(storage).run(1)
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 5
    docs = [json.loads(f.read_text()) for f in files]
    assert {d["run_id"] for d in docs} == {result.run_id}
    assert sorted(d["state"]["total"]["data"] for d in docs if d["state"]) == [1, 3, 6, 10]
    latest = await storage.get_latest(workflow_name="chain")
    assert latest is not None
    resumed = await chain().run(checkpoint_id=latest.checkpoint_id, checkpoint_storage=FileCheckpointStorage(tmp_path))
    assert resumed.state == result.state


async def test_file_storage_rejects_ids_that_are_paths(tmp_path: Path) -> None:
    storage = FileCheckpointStorage(tmp_path / "inner")
    (tmp_path / "secret.json").write_text("{}")
    for bad in ("../secret", "a/b", ".hidden", ""):
        with pytest.raises(CheckpointNotFoundError):
            await storage.load(bad)
        assert await storage.delete(bad) is False
    assert (tmp_path / "secret.json").exists()


async def test_checkpoint_timestamps_and_metadata_round_trip_through_files(tmp_path: Path) -> None:
    storage = FileCheckpointStorage(tmp_path)
    await chain(storage).run(1)
    cp = (await storage.list_checkpoints(workflow_name="chain"))[0]
    assert isinstance(cp.timestamp, str)  # ISO 8601, as Agent Framework gives it
    assert datetime.fromisoformat(cp.timestamp) == cp.created_at and cp.created_at.tzinfo is not None
    assert cp.created_at <= datetime.now(UTC)
    copy = cp.model_copy(update={"checkpoint_id": "copy", "metadata": {"note": "manual"}})
    assert await storage.save(copy) == "copy"
    assert (await storage.load("copy")).metadata == {"note": "manual"}


def test_a_checkpoint_built_from_a_snapshot_is_what_model_construct_builds() -> None:
    """``from_snapshot`` builds the model directly: every field, in declaration order, all of them set."""
    from temporal_workflows._checkpoints.base import iso_timestamp
    from temporal_workflows._engine.machine import EngineSnapshot, Output, RoutedMessage
    from temporal_workflows._engine.serde import Envelope

    one = Envelope(None, 1)
    snap = EngineSnapshot(
        superstep=3,
        iterations=4,
        state={"k": one},
        pending=(RoutedMessage("b", (one,), ("a",), None),),
        fan_in_buffers={"g": {"a": (one,)}},
        pending_requests={},
        responses=(("r1", one),),
        outputs=(Output("d", one),),
        outputs_released=2,
    )
    when = datetime(2026, 1, 2, 3, 4, 5, 60, tzinfo=UTC)
    args: dict[str, Any] = {
        "checkpoint_id": "cp",
        "workflow_name": "w",
        "run_id": "r",
        "graph_signature_hash": "h",
        "previous_checkpoint_id": None,
        "timestamp": when,
        "metadata": {"m": 1},
    }
    cp = WorkflowCheckpoint.from_snapshot(snap, **args)
    expected = WorkflowCheckpoint.model_validate(cp.model_dump())
    assert cp == expected and list(cp.__dict__) == list(WorkflowCheckpoint.model_fields)
    assert cp.model_fields_set == set(WorkflowCheckpoint.model_fields)
    # Checkpoints share one fields set: a copy made with an update gets its own, the others keep theirs.
    copied = cp.model_copy(update={"metadata": {"n": 2}})
    assert copied.metadata == {"n": 2} and cp.metadata == {"m": 1}
    assert copied.model_fields_set is not cp.model_fields_set
    assert cp.timestamp == "2026-01-02T03:04:05.000060+00:00" == iso_timestamp(when.isoformat())
    assert cp.to_snapshot() == snap
    # Within one second, and across one: the same text ``isoformat`` gives.
    for later in (when.replace(microsecond=999999), when.replace(second=6, microsecond=0), when):
        assert iso_timestamp(later) == later.isoformat(timespec="microseconds")

    class Tagged(WorkflowCheckpoint):
        tag: str = "t"

    sub = Tagged.from_snapshot(snap, **args)
    assert isinstance(sub, Tagged) and sub.tag == "t" and sub.state == cp.state


def test_checkpoint_of_an_engine_is_from_snapshot_of_its_snapshot() -> None:
    """``checkpoint_of`` (the engine's fields as lists, no snapshot between) is ``from_snapshot`` of its snapshot."""
    from temporal_workflows._checkpoints.base import checkpoint_of
    from temporal_workflows._engine.machine import Engine
    from temporal_workflows._engine.serde import Envelope

    wf = chain(name="parts")
    engine = Engine(wf._runner.graph.topology)
    engine.start(Envelope(None, 1))  # (the start message pending: a boundary before the first superstep)
    when = datetime.now(UTC)
    args: dict[str, Any] = {"checkpoint_id": "c", "run_id": "r", "previous_checkpoint_id": None, "timestamp": when}
    by_parts = checkpoint_of(engine, **args)
    by_snapshot = WorkflowCheckpoint.from_snapshot(
        engine.snapshot(),
        workflow_name=engine.topology.name or "",
        graph_signature_hash=engine.topology.signature_hash,
        metadata={},
        **args,
    )
    assert by_parts == by_snapshot and list(by_parts.__dict__) == list(by_snapshot.__dict__)
    assert by_parts.messages and isinstance(by_parts.messages, list) and by_parts.to_snapshot() == engine.snapshot()


def test_in_process_checkpoint_ids_are_distinct_random_uuids() -> None:
    """Drawn in batches from ``os.urandom``: each the canonical text of a version 4 UUID, none repeated."""
    import uuid

    from temporal_workflows._local.runner import _checkpoint_uuid

    ids = [_checkpoint_uuid() for _ in range(300)]  # several batches
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
