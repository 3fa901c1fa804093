"""Encrypted runs on the real dev server: nothing readable in history or checkpoint storage without the key.

A separate client and worker (own task queue, own key, own SQLite checkpoint
store) run a graph whose input, messages, state, request, response and output
all carry a marker string. The raw history, fetched by a client without the
codec, and every file of the checkpoint store must not contain the marker, in
plain bytes or base64; the keyed client reads everything back.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Never

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.history.v1 import History
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from temporal_workflows import (
    Executor,
    SqliteCheckpointStorage,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.errors import ExecutorFailedError, InvalidResponseError
from temporal_workflows.events import RequestInfoEvent
from temporal_workflows.temporal import (
    EncryptionCodec,
    EncryptionError,
    KeyRing,
    TemporalWorkflowsPlugin,
    start_run,
)
from temporal_workflows.temporal._client.devserver import temporal_cli_path
from temporal_workflows.temporal.integration import ENCRYPTED_ENCODING

MARKER = "tw-plaintext-marker-9c41e7d2"
ROOT = Path(__file__).parents[2]


class Secret(BaseModel):
    text: str


class Verdict(BaseModel):
    approved: bool
    note: str


@executor(id="enc_intake")
async def intake(msg: Secret, ctx: WorkflowContext[Secret]) -> None:
    ctx.set_state("dossier", {"note": f"{msg.text}-state"})
    await ctx.send_message(Secret(text=f"{msg.text}-message"))


class Reviewer(Executor):
    @handler
    async def review(self, msg: Secret, ctx: WorkflowContext[Never]) -> None:
        await ctx.request_info(Secret(text=f"{msg.text}-request"), Verdict)

    @response_handler
    async def decided(self, request: Secret, verdict: Verdict, ctx: WorkflowContext[Never, Secret]) -> None:
        ctx.set_state("verdict", verdict.note)
        await ctx.yield_output(Secret(text=f"{verdict.note}-output"))


@executor(id="enc_refuse")
async def refuse(msg: Secret, ctx: WorkflowContext) -> None:
    raise ApplicationError(f"refusing {msg.text}", type="Refused", non_retryable=True)


review_graph = (
    WorkflowBuilder(start_executor=intake, name="enc_review").add_edge(intake, Reviewer("enc_reviewer")).build()
)
refuse_graph = WorkflowBuilder(start_executor=refuse, name="enc_refuse").build()


def leaks(blob: bytes) -> bool:
    """Whether the marker is in ``blob``, as bytes or base64 (at any of the three alignments)."""
    if MARKER.encode() in blob:
        return True
    for pad in range(3):
        inner = base64.b64encode(b"\0" * pad + MARKER.encode())[4:-4]
        if inner in blob:
            return True
    return False


@dataclass
class Encrypted:
    client: Client
    plain: Client  # same server, no codec: reads what the server stores
    codec: EncryptionCodec
    store_dir: Path
    task_queue: str


@pytest.fixture
async def encrypted(temporal_address: str, tmp_path: Path) -> AsyncIterator[Encrypted]:
    codec = EncryptionCodec(KeyRing({"it-key-1": os.urandom(32)}))
    store = SqliteCheckpointStorage(tmp_path / "checkpoints.sqlite")  # the plugin gives it the key ring
    plugin = TemporalWorkflowsPlugin(
        [review_graph, refuse_graph], tracing=False, checkpoint_storage=store, encryption=codec
    )
    client = await Client.connect(temporal_address, plugins=[plugin])
    plain = await Client.connect(temporal_address)
    queue = f"encrypted-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue):
        yield Encrypted(client, plain, codec, tmp_path, queue)
    store.close()


async def raw_history(env: Encrypted, workflow_id: str) -> History:
    """The history as the server stores it, straight from the gRPC service (no data converter involved)."""
    history = History()
    token = b""
    while True:
        resp = await env.plain.workflow_service.get_workflow_execution_history(
            GetWorkflowExecutionHistoryRequest(
                namespace=env.plain.namespace,
                execution=WorkflowExecution(workflow_id=workflow_id),
                next_page_token=token,
            )
        )
        history.events.extend(resp.history.events)
        token = resp.next_page_token
        if not token:
            return history


async def test_history_and_checkpoints_hold_no_plaintext(encrypted: Encrypted, workflow_id: str) -> None:
    handle = await start_run(
        encrypted.client,
        review_graph,
        Secret(text=MARKER),
        id=workflow_id,
        task_queue=encrypted.task_queue,
        checkpoint_every=1,
    )
    async for ev in handle.events():
        if isinstance(ev, RequestInfoEvent):
            assert MARKER in str(ev.data)  # the keyed client reads the request
            await handle.respond(ev.request_id, Verdict(approved=True, note=f"{MARKER}-response"))
            break
    result = await handle.result()
    assert result["outputs"] == [{"text": f"{MARKER}-response-output"}]
    state = await handle.state()
    assert state == {"dossier": {"note": f"{MARKER}-state"}, "verdict": f"{MARKER}-response"}
    assert len(await handle.checkpoints()) >= 2

    history = await raw_history(encrypted, workflow_id)
    assert not leaks(history.SerializeToString())
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    assert started.metadata["encoding"] == ENCRYPTED_ENCODING
    # ... and it is the marker underneath: the codec decrypts it.
    (inner,) = await encrypted.codec.decode([started])
    assert MARKER.encode() in inner.data

    files = [p for p in encrypted.store_dir.iterdir() if p.is_file()]
    assert files and not any(leaks(p.read_bytes()) for p in files)
    with closing(sqlite3.connect(encrypted.store_dir / "checkpoints.sqlite")) as db:
        bodies = [b for (b,) in db.execute("SELECT body FROM checkpoints WHERE run_id = ?", (workflow_id,))]
    assert len(bodies) >= 2 and all(isinstance(b, bytes) for b in bodies)


async def test_control_the_same_run_unencrypted_is_readable(
    encrypted: Encrypted, temporal_address: str, workflow_id: str, tmp_path: Path
) -> None:
    """Without encryption the same checks find the marker: they can see a leak."""
    store = SqliteCheckpointStorage(tmp_path / "plain" / "checkpoints.sqlite")
    plugin = TemporalWorkflowsPlugin([review_graph], tracing=False, checkpoint_storage=store, encryption=None)
    client = await Client.connect(temporal_address, plugins=[plugin])
    queue = f"plain-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue):
        handle = await start_run(
            client, review_graph, Secret(text=MARKER), id=workflow_id, task_queue=queue, checkpoint_every=1
        )
        await handle.checkpoint()
        await client.get_workflow_handle(workflow_id).terminate()
    store.close()
    assert leaks((await raw_history(encrypted, workflow_id)).SerializeToString())
    assert any(leaks(p.read_bytes()) for p in (tmp_path / "plain").iterdir())


async def test_a_client_without_the_key_cannot_read_the_run(encrypted: Encrypted, workflow_id: str) -> None:
    await start_run(
        encrypted.client, review_graph, Secret(text=MARKER), id=workflow_id, task_queue=encrypted.task_queue
    )
    # No codec: the payload converter does not know the encoding.
    with pytest.raises(Exception, match="binary/encrypted"):
        await encrypted.plain.get_workflow_handle(workflow_id).query("status")
    # Another key: the codec names the key id it is missing.
    other = await Client.connect(
        encrypted.client.service_client.config.target_host,
        plugins=[
            TemporalWorkflowsPlugin(tracing=False, encryption=EncryptionCodec(KeyRing({"other": os.urandom(32)})))
        ],
    )
    with pytest.raises(EncryptionError, match="'it-key-1'"):
        await other.get_workflow_handle(workflow_id).query("status")
    await encrypted.client.get_workflow_handle(workflow_id).terminate()


async def test_failure_messages_are_encrypted_too(encrypted: Encrypted, workflow_id: str) -> None:
    handle = await start_run(
        encrypted.client, refuse_graph, Secret(text=MARKER), id=workflow_id, task_queue=encrypted.task_queue
    )
    with pytest.raises(ExecutorFailedError) as info:
        await handle.result()
    assert MARKER in str(info.value)  # the keyed client decrypts the failure
    assert not leaks((await raw_history(encrypted, workflow_id)).SerializeToString())


def _keys(encrypted: Encrypted) -> str:
    return ",".join(f"{k}:{base64.b64encode(v).decode()}" for k, v in encrypted.codec.key_ring.keys.items())


async def _codec_server(keys: str, **env: str) -> tuple[asyncio.subprocess.Process, str]:
    """``python -m temporal_workflows codec-server`` on a free port, and the line it prints once it serves."""
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_workflows",
        "codec-server",
        "--port",
        "0",
        env={**os.environ, "TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": keys, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        line = (await asyncio.wait_for(server.stdout.readline(), 30)).decode()
    except BaseException:
        server.terminate()
        await server.wait()
        raise
    return server, line


async def test_the_codec_server_decrypts_history_for_the_temporal_cli(
    encrypted: Encrypted, temporal_address: str, workflow_id: str
) -> None:
    """`python -m temporal_workflows codec-server`, used as the Web UI would: `temporal --codec-endpoint`."""
    await start_run(
        encrypted.client, review_graph, Secret(text=MARKER), id=workflow_id, task_queue=encrypted.task_queue
    )
    keys = _keys(encrypted)
    server, line = await _codec_server(keys)
    try:
        endpoint = line.split()[3]  # "codec server on http://127.0.0.1:PORT (key ids: ...)"
        assert endpoint.startswith("http://127.0.0.1:") and "it-key-1" in line and keys not in line
        show = [temporal_cli_path(), "workflow", "show", "--address", temporal_address, "-w", workflow_id]
        plain = subprocess.run([*show, "--output", "json"], capture_output=True, text=True, timeout=60, check=True)
        assert not leaks(plain.stdout.encode())
        decoded = subprocess.run(
            [*show, "--output", "json", "--codec-endpoint", endpoint],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert leaks(decoded.stdout.encode())  # JSON output shows payload data as base64
    finally:
        server.terminate()
        await server.wait()
        await encrypted.client.get_workflow_handle(workflow_id).terminate()


CODEC_TOKEN = "codec-it-token-5b0e9a7c41d2"


async def test_a_codec_server_with_a_token_decrypts_only_for_the_cli_that_sends_it(
    encrypted: Encrypted, temporal_address: str, workflow_id: str
) -> None:
    """``TEMPORAL_WORKFLOWS_CODEC_TOKEN`` on the server; ``temporal --codec-auth 'Bearer <token>'`` on the CLI."""
    await start_run(
        encrypted.client, review_graph, Secret(text=MARKER), id=workflow_id, task_queue=encrypted.task_queue
    )
    server, line = await _codec_server(_keys(encrypted), TEMPORAL_WORKFLOWS_CODEC_TOKEN=CODEC_TOKEN)
    try:
        endpoint = line.split()[3]
        assert CODEC_TOKEN not in line
        show = [temporal_cli_path(), "workflow", "show", "--address", temporal_address, "-w", workflow_id]
        show += ["--output", "json", "--codec-endpoint", endpoint]
        for auth in ([], ["--codec-auth", "Bearer not-the-token-at-all"]):
            refused = subprocess.run([*show, *auth], capture_output=True, text=True, timeout=60)
            assert not leaks(refused.stdout.encode()), auth
        decoded = subprocess.run(
            [*show, "--codec-auth", f"Bearer {CODEC_TOKEN}"], capture_output=True, text=True, timeout=60, check=True
        )
        assert leaks(decoded.stdout.encode())
    finally:
        server.terminate()
        await server.wait()
        await encrypted.client.get_workflow_handle(workflow_id).terminate()


async def test_a_rejected_response_is_refused_and_warned_about_without_its_value(
    encrypted: Encrypted, workflow_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """pydantic's messages quote the input (``input_value='...'``); what the run reports and logs must not."""
    caplog.set_level(logging.DEBUG)
    handle = await start_run(
        encrypted.client, review_graph, Secret(text="nothing secret"), id=workflow_id, task_queue=encrypted.task_queue
    )
    request_id = None
    async for ev in handle.events():
        if isinstance(ev, RequestInfoEvent):
            request_id = ev.request_id
            break
    assert request_id is not None
    bad = {"approved": MARKER, "note": [MARKER]}
    with pytest.raises((WorkflowUpdateFailedError, InvalidResponseError)) as refused:
        await handle.respond(request_id, bad)
    reason = str(getattr(refused.value, "cause", None) or refused.value)
    assert "approved" in reason and "valid boolean" in reason and MARKER not in reason
    await handle.respond(request_id, bad, wait=False)
    for _ in range(100):
        warnings = (await handle.status())["warnings"]
        if warnings:
            break
        await asyncio.sleep(0.1)
    (warning,) = warnings
    assert warning["request_id"] == request_id and "approved" in warning["message"]
    assert MARKER not in warning["message"]
    await handle.respond(request_id, Verdict(approved=True, note="fine"))
    assert (await handle.result())["outputs"] == [{"text": "fine-output"}]
    assert MARKER not in caplog.text


def test_marker_detection_finds_base64() -> None:
    payload = Payload(data=base64.b64encode(b"xy" + MARKER.encode() + b"z"))
    assert leaks(payload.SerializeToString()) and not leaks(b"nothing here")
