"""Checkpoints, reset and fork of runs on a real dev server."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from examples import approval
from temporal_workflows import SqliteCheckpointStorage
from temporal_workflows.errors import (
    CheckpointNotFoundError,
    CheckpointStorageError,
    GraphSignatureMismatchError,
    UndeliverableMessageError,
    UnknownRequestError,
)
from temporal_workflows.events import RequestInfoEvent, WorkflowResetEvent, WorkflowWarningEvent
from temporal_workflows.temporal import RunHandle, fork, get_run, start_run
from temporal_workflows.temporal.integration import LINEAGE_MEMO
from tests.conftest import TASK_QUEUE
from tests.integration import graphs
from tests.integration.cli import run_cli
from tests.integration.streams import events_until, nth

pytestmark = pytest.mark.usefixtures("worker")


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def _final_state(handle: RunHandle) -> dict[str, Any]:
    await handle.result()
    return await handle.state()


async def _held(client: Client, wid: str, upto: int, hold_round: int, **kwargs: Any) -> tuple[RunHandle, graphs.Hold]:
    """Start a ticker whose step of ``hold_round`` waits for the test; return once it is in flight."""
    hold = graphs.Hold(hold_round)
    graphs.HOLDS[wid] = hold
    handle = await start_run(
        client,
        kwargs.pop("workflow", graphs.ticker),
        graphs.Count(n=1, upto=upto),
        id=wid,
        task_queue=TASK_QUEUE,
        **kwargs,
    )
    await asyncio.wait_for(hold.reached.wait(), 30)
    return handle, hold


async def _request(handle: RunHandle, n: int = 1) -> RequestInfoEvent:
    """The run's ``n``-th request (counted over its whole event stream, across resets)."""
    seen = await events_until(handle, nth(RequestInfoEvent, n))
    ev = seen[-1]
    assert isinstance(ev, RequestInfoEvent)
    return ev


async def test_reset_to_checkpoint_mid_loop_matches_uninterrupted_run(client: Client) -> None:
    reference = await start_run(client, graphs.ticker, graphs.Count(n=1, upto=10), id=_id("ref"), task_queue=TASK_QUEUE)
    expected = await reference.result()
    expected_state = await reference.state()
    assert expected_state == {"total": 55, "count": 10}

    wid = _id("reset")
    handle, hold = await _held(client, wid, upto=10, hold_round=6, checkpoint_every=1)
    listed = await handle.checkpoints()
    assert [c["superstep"] for c in listed] == [0, 1, 2, 3, 4, 5]  # 0: the start message, before superstep 1
    assert [c["trigger"] for c in listed] == ["entry", *["auto"] * 5]
    assert [c["parent_id"] for c in listed] == [None, *[c["checkpoint_id"] for c in listed[:-1]]]
    third = listed[3]

    accepted = await handle.reset(checkpoint_id=third["checkpoint_id"])
    assert accepted == {"accepted": True, "checkpoint_id": third["checkpoint_id"], "superstep": 3}
    hold.release.set()  # the first superstep-6 step finishes now; its result must be discarded

    result = await handle.result()
    assert result["outputs"] == expected["outputs"]
    assert result["superstep"] == expected["superstep"]
    assert await handle.state() == expected_state
    status = await handle.status()
    assert status["resets"] == 1
    # After the reset, steps run in a new epoch: new idempotency keys for re-run supersteps.
    keys = graphs.EFFECTS[wid]
    assert len(keys) == len(set(keys))
    assert sum("@1:" in k for k in keys) == 7  # supersteps 4..10 after the reset
    # The run's checkpoints go on from the restored one: superstep 4's parent is the third.
    after = [c for c in await handle.checkpoints() if c["superstep"] == 4]
    assert after[-1]["parent_id"] == third["checkpoint_id"]


async def test_checkpoint_ids_are_the_same_on_replay_and_in_storage(
    client: Client, checkpoint_db: SqliteCheckpointStorage
) -> None:
    # A worker that caches nothing replays the whole history on every task.
    queue = f"no-cache-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, max_cached_workflows=0):
        wid = _id("replay")
        handle = await start_run(client, graphs.ticker, graphs.Count(n=1, upto=6), id=wid, task_queue=queue)
        taken = await handle.checkpoint("mid-run")
        assert taken is not None
        await handle.result()
        listed = await handle.checkpoints()
    stored = await checkpoint_db.list_checkpoint_ids(workflow_name="it_ticker", run_id=wid)
    assert [c["checkpoint_id"] for c in listed] == stored
    assert taken["checkpoint_id"] in stored
    assert (await checkpoint_db.load(taken["checkpoint_id"])).metadata["label"] == "mid-run"


async def test_clean_reset_clears_a_pending_request(client: Client) -> None:
    handle = await start_run(
        client, approval.workflow, approval.ArticleRequest(topic="bees"), id=_id("clean"), task_queue=TASK_QUEUE
    )
    first = (await _request(handle)).request_id

    await handle.reset()
    second = (await _request(handle, 2)).request_id
    assert second != first
    with pytest.raises(UnknownRequestError) as unknown:
        await handle.respond(first, approval.ReviewDecision(approved=True))
    assert "no pending request" in str(unknown.value)
    await handle.respond(second, approval.ReviewDecision(approved=True))
    result = await handle.result()
    assert result["outputs"][0]["status"] == "published"
    resets = [e async for e in _events_until_end(handle) if isinstance(e, WorkflowResetEvent)]
    assert [(e.checkpoint_id, e.resets) for e in resets] == [(None, 1)]


async def _events_until_end(handle: RunHandle) -> Any:
    async for ev in handle.events():
        yield ev


async def test_reset_with_new_input(client: Client) -> None:
    handle = await start_run(
        client, approval.workflow, approval.ArticleRequest(topic="bees"), id=_id("newinput"), task_queue=TASK_QUEUE
    )
    await _request(handle)
    await handle.reset(message=approval.ArticleRequest(topic="ants"))
    second = await _request(handle, 2)
    assert second.data.draft.topic == "ants"
    with pytest.raises(UndeliverableMessageError) as undeliverable:
        await handle.reset(message={"not": "an article request"})
    assert "start executor" in str(undeliverable.value) or "drafter" in str(undeliverable.value)
    await handle.respond(second.request_id, approval.ReviewDecision(approved=True))
    assert (await handle.result())["outputs"][0]["text"].startswith("ants")


async def test_fork_two_runs_from_one_checkpoint_and_answer_differently(client: Client) -> None:
    source = await start_run(
        client,
        approval.workflow,
        approval.ArticleRequest(topic="owls", max_rounds=2),
        id=_id("source"),
        task_queue=TASK_QUEUE,
    )
    await _request(source)
    taken = await source.checkpoint("before review")
    assert taken is not None and taken["superstep"] == 2

    a = await source.fork(taken["checkpoint_id"], _id("fork-a"), task_queue=TASK_QUEUE)
    b = await fork(client, source.id, taken["checkpoint_id"], _id("fork-b"), task_queue=TASK_QUEUE)
    # The forks start with the source's pending request, under the same id.
    req_a = (await a.pending_requests())[0]
    req_b = (await b.pending_requests())[0]
    assert req_a.request_id == req_b.request_id
    await a.respond(req_a.request_id, approval.ReviewDecision(approved=True))
    await b.respond(req_b.request_id, approval.ReviewDecision(approved=False, feedback="add sources"))
    out_a = (await a.result())["outputs"]
    assert out_a[0]["status"] == "published"
    req_b2 = await _request(b, 2)  # the fork's stream: the restored request, then the second review
    await b.respond(req_b2.request_id, approval.ReviewDecision(approved=True))
    out_b = (await b.result())["outputs"]
    assert out_b[0]["status"] == "published" and "Sources" in out_b[0]["text"] and out_b != out_a

    lineage = {"workflow_id": source.id, "checkpoint_id": taken["checkpoint_id"]}
    assert (await a.status())["lineage"] == lineage
    # The fork's memo names its source (beside the trace context a traced client records at start).
    assert (await (await b.describe()).memo())[LINEAGE_MEMO] == lineage
    # The source is untouched, still waiting for its own review.
    assert (await source.status())["status"] == "waiting_for_input"
    await source.handle.terminate("test done")


async def test_runs_sharing_a_sqlite_store_stay_isolated(
    client: Client, checkpoint_db: SqliteCheckpointStorage
) -> None:
    ids = [_id("iso-a"), _id("iso-b")]
    handles = await asyncio.gather(
        *(
            start_run(client, graphs.ticker, graphs.Count(n=1, upto=u), id=i, task_queue=TASK_QUEUE, checkpoint_every=1)
            for i, u in zip(ids, (4, 6), strict=True)
        )
    )
    await asyncio.gather(*(h.result() for h in handles))
    for wid, n in zip(ids, (4, 6), strict=True):
        cps = await checkpoint_db.list_checkpoints(workflow_name="it_ticker", run_id=wid)
        assert [c.superstep for c in cps] == list(range(n + 1))  # 0: before the first superstep
        assert {c.run_id for c in cps} == {wid}
        latest = await checkpoint_db.get_latest(workflow_name="it_ticker", run_id=wid)
        assert latest is not None and latest.superstep == n and latest.state["count"].data == n
    # A checkpoint of run B cannot be restored into run A... (A is closed: fork shows the same scoping.)
    other = (await handles[1].checkpoints())[0]["checkpoint_id"]
    bad = await fork(client, ids[0], other, _id("iso-fork"), task_queue=TASK_QUEUE)
    with pytest.raises(CheckpointNotFoundError) as not_found:
        await bad.result()
    assert "belongs to workflow" in str(not_found.value)


async def test_failing_storage_fails_the_checkpoint_request_and_the_run_goes_on(client: Client) -> None:
    wid = _id("failing")
    handle, hold = await _held(client, wid, upto=5, hold_round=3, workflow=graphs.failing_ticker)
    ask = asyncio.ensure_future(handle.checkpoint("doomed"))
    await handle.checkpoint(wait=False)
    hold.release.set()
    with pytest.raises(CheckpointStorageError) as failed:
        await ask
    assert "disk full" in str(failed.value) and "superstep" in str(failed.value)
    result = await handle.result()
    assert result["outputs"] == [{"rounds": 5}]
    warnings = (await handle.status())["warnings"]
    assert any("disk full" in w["message"] for w in warnings)


async def test_history_only_checkpoints_reset_and_fork(client: Client) -> None:
    wid = _id("hist")
    handle, hold = await _held(client, wid, upto=8, hold_round=5, workflow=graphs.history_ticker, checkpoint_every=1)
    taken = (await handle.checkpoints())[-1]
    assert taken["superstep"] == 4
    cp = await handle.get_checkpoint(taken["checkpoint_id"])
    assert cp is not None and cp.superstep == 4 and cp.state["total"].data == 10 and cp.run_id == wid
    with pytest.raises(CheckpointNotFoundError) as nope:
        await handle.reset(checkpoint_id="nope")
    assert "no checkpoint 'nope'" in str(nope.value)
    await handle.reset(checkpoint_id=taken["checkpoint_id"])
    hold.release.set()
    assert (await handle.result())["outputs"] == [{"rounds": 8}]
    assert await handle.state() == {"total": 36, "count": 8}
    # A fork reads the checkpoint from the source run by query (the source is closed by now).
    forked = await handle.fork(taken["checkpoint_id"], _id("hist-fork"), task_queue=TASK_QUEUE)
    assert (await forked.result())["outputs"] == [{"rounds": 8}]
    assert await forked.state() == {"total": 36, "count": 8}


async def test_signature_mismatch_is_refused_unless_allowed(client: Client) -> None:
    source = await start_run(
        client,
        graphs.planted_ticker,
        graphs.Count(n=1, upto=3),
        id=_id("planted"),
        task_queue=TASK_QUEUE,
        checkpoint_every=1,
    )
    await source.result()
    good = (await source.checkpoints())[0]["checkpoint_id"]
    original = await graphs.shared_store.load(good)
    old = original.model_copy(update={"checkpoint_id": f"old-{good}", "graph_signature_hash": "0" * 64})
    await graphs.shared_store.save(old)

    refused = await fork(client, source.id, old.checkpoint_id, _id("mismatch"), task_queue=TASK_QUEUE)
    with pytest.raises(GraphSignatureMismatchError) as mismatch:
        await refused.result()
    assert "graph signature" in str(mismatch.value)
    allowed = await fork(
        client, source.id, old.checkpoint_id, _id("allowed"), task_queue=TASK_QUEUE, allow_signature_mismatch=True
    )
    assert (await allowed.result())["outputs"] == [{"rounds": 3}]
    unknown = await fork(client, source.id, "no-such-checkpoint", _id("unknown"), task_queue=TASK_QUEUE)
    with pytest.raises(CheckpointNotFoundError) as not_found:
        await unknown.result()
    assert "no-such-checkpoint" in str(not_found.value)


async def test_reset_signal_with_unknown_checkpoint_is_a_warning(client: Client) -> None:
    wid = _id("badreset")
    handle, hold = await _held(client, wid, upto=4, hold_round=2)
    await handle.reset(checkpoint_id="missing", wait=False)
    warned = None
    async for ev in handle.events():
        if isinstance(ev, WorkflowWarningEvent):
            warned = ev
            break
    assert warned is not None and "missing" in warned.message
    hold.release.set()
    assert (await handle.result())["outputs"] == [{"rounds": 4}]
    assert (await handle.status())["resets"] == 0


async def test_cli_checkpoint_checkpoints_reset_and_fork(client: Client, temporal_address: str) -> None:
    wid = _id("cli")
    handle = await start_run(client, approval.workflow, approval.SAMPLE_INPUT, id=wid, task_queue=TASK_QUEUE)
    first = await _request(handle)
    # Waiting for input is a boundary: the checkpoint is taken at once.
    code, out, _ = await run_cli(temporal_address, "checkpoint", wid, "--label", "from-cli")
    assert code == 0 and '"superstep": 2' in out
    cp_id = json.loads(out)["checkpoint_id"]
    code, out, _ = await run_cli(temporal_address, "checkpoints", wid)
    assert code == 0 and [(c["checkpoint_id"], c["label"]) for c in json.loads(out)] == [(cp_id, "from-cli")]

    code, out, _ = await run_cli(temporal_address, "fork", cp_id, "--from", wid, "--id", f"{wid}-fork")
    assert code == 0 and json.loads(out)["started"] == f"{wid}-fork"
    forked = get_run(client, f"{wid}-fork")
    assert [r.request_id for r in await forked.pending_requests()] == [first.request_id]
    await forked.handle.terminate("test done")

    code, out, _ = await run_cli(temporal_address, "reset", wid, "--to", "no-such-checkpoint")
    assert code == 1 and "no-such-checkpoint" in out + _
    code, out, _ = await run_cli(temporal_address, "reset", wid, "--to", cp_id)
    assert code == 0 and json.loads(out)["superstep"] == 2
    again = await _request(handle, 2)  # the restored request, raised again by the new execution
    assert again.request_id == first.request_id
    await handle.respond(first.request_id, approval.ReviewDecision(approved=True))
    assert (await handle.result())["outputs"][0]["status"] == "published"
    code, _, err = await run_cli(temporal_address, "reset", wid)
    assert code == 1 and "completed" in err  # a closed run cannot be reset: fork it instead


async def test_checkpoint_cost_grows_with_what_changed_not_with_the_state(
    client: Client, checkpoint_db: SqliteCheckpointStorage
) -> None:
    """A 1 MB state checkpointed at each of 7 supersteps: history and store hold it about once."""
    size, steps = 1_000_000, 6
    wid = _id("cost")
    handle = await start_run(
        client, "it_big_state", {"size": size, "steps": steps}, id=wid, task_queue=TASK_QUEUE, checkpoint_every=1
    )
    assert (await handle.result())["outputs"] == [size]
    ids = await checkpoint_db.list_checkpoint_ids(workflow_name="it_big_state", run_id=wid)
    assert len(ids) == steps + 2  # one per superstep, and the start message's before the first
    # Checkpoints reach the store through a local activity: only their ids are in history.
    history = await handle.handle.fetch_history()
    assert sum(e.ByteSize() for e in history.events) < 1.5 * size
    # The store keeps the blob once; later checkpoints are deltas (the counter).
    db = checkpoint_db._db("measure the stored state")
    marks = ",".join("?" * len(ids))
    stored = db.execute(f"SELECT SUM(LENGTH(value)) FROM checkpoint_state WHERE checkpoint_id IN ({marks})", ids)
    assert stored.fetchone()[0] < 1.2 * size
    latest = await SqliteCheckpointStorage(checkpoint_db.path).load(ids[-1])  # a fresh reader: from disk
    assert len(latest.state["blob"].data) == size and latest.state["reads"].data == steps
