"""Large values by reference (claim check) on a real dev server: Temporal's external storage with our stores.

Runs on a dev server of its own: its runs' histories hold references that only a client with the store can
read, and the session-wide replay (tests/integration/test_replay.py) reads with the plain converter; this
module replays its own runs, with the store.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from temporal_workflows._engine.limits import allow_stored_values, max_payload_bytes
from temporal_workflows.errors import ExecutorFailedError, PayloadTooLargeError
from temporal_workflows.temporal import EncryptionCodec, KeyRing, TemporalWorkflowsPlugin, get_run, start_run
from temporal_workflows.temporal._storage import FileStorageDriver, LargeValues, SqliteStorageDriver
from temporal_workflows.temporal.integration import GraphWorkflow
from tests.integration import large_value_graphs as lvg

QUEUE = "tw-large-values"
MB = 1_000_000


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    from temporal_workflows.temporal import start_dev_server

    env = await start_dev_server()
    yield env
    await env.shutdown()


@pytest.fixture(autouse=True, scope="module")
def _limit_restored() -> Iterator[None]:
    """The plugin raises this process's value limit; the rest of the session keeps the default."""
    yield
    allow_stored_values(None)


async def _setup(env: WorkflowEnvironment, values: LargeValues, codec: EncryptionCodec | None = None) -> Client:
    address = env.client.service_client.config.target_host
    plugin = TemporalWorkflowsPlugin(
        lvg.all_workflows(), large_values=values, encryption=codec, tracing=False, checkpoint_storage=None
    )
    return await Client.connect(address, plugins=[plugin])


async def _history_bytes(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(e.ByteSize() for e in history.events)


@pytest.mark.parametrize("store", ["file", "sqlite"])
async def test_a_document_over_the_payload_limit_goes_through_five_steps_and_history_keeps_references(
    server: WorkflowEnvironment, tmp_path: Path, store: str
) -> None:
    driver = FileStorageDriver(tmp_path / "values") if store == "file" else SqliteStorageDriver(tmp_path / "v.db")
    client = await _setup(server, LargeValues(driver))
    size = 5 * MB  # over the 2 MiB payload limit (bench/large_values.py takes 100 MB)
    wid = f"lv-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=QUEUE):
        handle = await start_run(client, lvg.document, size, id=wid, task_queue=QUEUE, checkpoint_every=1)
        result = await asyncio.wait_for(handle.result(), 120)
        (out,) = result["outputs"]
        assert out["message_bytes"] == size + len("|first|second|third")
        assert out["tail"].endswith("|first|second|third")
        assert out["state_bytes"] == size
        state = await handle.state()  # a query's answer over the limit comes back through the store too
        assert len(state["doc"]) == size and lvg.digest(state["doc"]) == out["state_digest"]
        assert await handle.checkpoints()  # checkpoints of a 5 MB state were taken (their own store)
    assert await _history_bytes(client, wid) < 200_000  # references, not the document (5 MB x ~10 copies)
    history = await client.get_workflow_handle(wid).fetch_history()
    refs = [
        p
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        for p in e.activity_task_completed_event_attributes.result.payloads
        if p.external_payloads
    ]
    assert refs and all(p.external_payloads[0].size_bytes > 4 * MB for p in refs)
    assert all(b"sha256" in p.data for p in refs)  # the reference keeps the digest
    # Replays read the references back through the store.
    replayer = Replayer(workflows=[GraphWorkflow], data_converter=client.data_converter)
    await replayer.replay_workflow(history)


async def test_stored_values_are_encrypted_when_encryption_is_on(server: WorkflowEnvironment, tmp_path: Path) -> None:
    codec = EncryptionCodec(KeyRing({"lv-key": os.urandom(32)}))
    store = tmp_path / "values"
    client = await _setup(server, LargeValues(FileStorageDriver(store)), codec)
    wid = f"lv-enc-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=QUEUE):
        handle = await start_run(client, lvg.document, 3 * MB, id=wid, task_queue=QUEUE)
        await asyncio.wait_for(handle.result(), 120)
    files = [p for p in store.rglob("*") if p.is_file()]
    assert files
    for f in files:
        assert b"0123456789abcdef0123456789abcdef" not in f.read_bytes()  # ciphertext, not the document


async def test_a_value_whose_stored_copy_is_missing_fails_the_step_naming_it(
    server: WorkflowEnvironment, tmp_path: Path
) -> None:
    store = tmp_path / "values"
    client = await _setup(server, LargeValues(FileStorageDriver(store)))
    wid = f"lv-missing-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=QUEUE):
        await start_run(client, lvg.late, 3 * MB, id=wid, task_queue=QUEUE)
        raw = client.get_workflow_handle(wid)
        for _ in range(600):  # until late_check's step is scheduled on a queue no worker polls yet
            desc = await raw.describe()
            pending = [
                a for a in desc.raw_description.pending_activities if a.activity_type.name.endswith("late_check")
            ]
            if pending:
                break
            await asyncio.sleep(0.1)
        assert pending
        history = await raw.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name.endswith("late_check")
        ]
        (attrs,) = scheduled
        key = next(p for p in attrs.input.payloads if p.external_payloads).data
        digest = key.decode().split('"key":"', 1)[1][:64] if b'"key":"' in key else None
        assert digest is not None
        (path,) = [p for p in store.rglob(digest) if p.is_file()]
        path.unlink()  # the step's input is gone from the store
        async with Worker(client, task_queue=lvg.LATE_QUEUE):
            with pytest.raises(ExecutorFailedError) as failed:
                await asyncio.wait_for(get_run(client, wid).result(), 120)
    assert failed.value.executor_id == "late_check"
    text = str(failed.value)
    assert "StoredValueMissingError" in text or "is missing" in text, text
    assert digest[:16] in text  # the value it names


def test_the_store_from_the_environment_and_its_bad_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_WORKFLOWS_VALUE_STORE", str(tmp_path / "v"))
    lv = LargeValues.from_env()
    assert lv is not None and isinstance(lv.driver, FileStorageDriver) and lv.threshold == 256 * 1024
    monkeypatch.setenv("TEMPORAL_WORKFLOWS_VALUE_STORE", f"sqlite:///{tmp_path}/v.db")
    monkeypatch.setenv("TEMPORAL_WORKFLOWS_VALUE_THRESHOLD", "100000")
    lv = LargeValues.from_env()
    assert lv is not None and isinstance(lv.driver, SqliteStorageDriver) and lv.threshold == 100_000
    monkeypatch.setenv("TEMPORAL_WORKFLOWS_VALUE_THRESHOLD", "lots")
    with pytest.raises(ValueError, match="must be a whole number"):
        LargeValues.from_env()
    monkeypatch.delenv("TEMPORAL_WORKFLOWS_VALUE_THRESHOLD")
    monkeypatch.setenv("TEMPORAL_WORKFLOWS_VALUE_STORE", "ftp://host/x")
    with pytest.raises(ValueError, match="is no store"):
        LargeValues.from_env()
    with pytest.raises(ValueError, match="at least 1,024"):
        LargeValues(FileStorageDriver(tmp_path), threshold=10)


def test_without_a_store_the_limit_stays_and_values_over_it_are_refused(tmp_path: Path) -> None:
    from temporal_workflows._engine.limits import check_payload

    allow_stored_values(None)
    assert max_payload_bytes() < 3 * MB
    with pytest.raises(PayloadTooLargeError):
        check_payload("x" * (3 * MB), what="start message")
    TemporalWorkflowsPlugin([], large_values=LargeValues(FileStorageDriver(tmp_path)), tracing=False)
    assert max_payload_bytes() >= 1024 * MB
    check_payload("x" * (3 * MB), what="start message")
    allow_stored_values(None)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible server process: moto's standalone server (``moto[server]`` from PyPI), on loopback."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


async def test_an_s3_compatible_store_takes_the_document_and_names_a_missing_object(
    server: WorkflowEnvironment, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aioboto3

    from temporal_workflows.errors import StoredValueMissingError
    from temporal_workflows.temporal._storage import s3_storage_driver

    for k, v in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    bucket = f"tw-{uuid.uuid4().hex[:8]}"
    async with aioboto3.Session().client("s3", endpoint_url=s3_endpoint) as s3:
        await s3.create_bucket(Bucket=bucket)
    values = LargeValues.from_url(f"s3://{bucket}?endpoint_url={s3_endpoint}&region=us-east-1")
    client = await _setup(server, values)
    wid = f"lv-s3-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=QUEUE):
        handle = await start_run(client, lvg.document, 3 * MB, id=wid, task_queue=QUEUE)
        (out,) = (await asyncio.wait_for(handle.result(), 120))["outputs"]
    assert out["state_bytes"] == 3 * MB
    assert await _history_bytes(client, wid) < 200_000
    async with aioboto3.Session().client("s3", endpoint_url=s3_endpoint) as s3:
        listed = await s3.list_objects_v2(Bucket=bucket)
        keys = [o["Key"] for o in listed.get("Contents", [])]
        assert keys
        for key in keys:
            await s3.delete_object(Bucket=bucket, Key=key)
    driver = s3_storage_driver(bucket, endpoint_url=s3_endpoint, region="us-east-1")
    from temporalio.converter import StorageDriverClaim, StorageDriverRetrieveContext

    claim = StorageDriverClaim({"bucket": bucket, "key": keys[0], "hash_algorithm": "sha256", "hash_value": "0" * 64})
    with pytest.raises(StoredValueMissingError, match=keys[0][:20]):
        await driver.retrieve(StorageDriverRetrieveContext(), [claim])
