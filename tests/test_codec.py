"""Payload and checkpoint encryption without a server: the codec, the key ring, the stores, the codec server."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes

from temporal_workflows import (
    FileCheckpointStorage,
    SqliteCheckpointStorage,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    executor,
)
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._http.guard import GuardConfigError, read_token_file
from temporal_workflows.errors import CheckpointStorageError
from temporal_workflows.temporal import EncryptionCodec, EncryptionError, KeyRing, TemporalWorkflowsPlugin
from temporal_workflows.temporal._activities.steps import build_activities
from temporal_workflows.temporal._client.codec_server import (
    DEFAULT_MAX_BODY,
    ENV_CODEC_TOKEN,
    CodecServer,
    CodecServerConfigError,
)
from temporal_workflows.temporal.integration import ENCRYPTED_ENCODING, KEY_ID_METADATA, make_codec_server

SECRET = "codec-unit-secret-4e1b"
K1, K2 = os.urandom(32), os.urandom(32)


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def json_payload(value: Any) -> Payload:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0]


@pytest.fixture
def codec() -> EncryptionCodec:
    return EncryptionCodec(KeyRing({"k1": K1}))


# -- the codec ---------------------------------------------------------------------------------


async def test_round_trip_hides_data_and_metadata(codec: EncryptionCodec) -> None:
    original = [json_payload({"secret": SECRET}), json_payload([1, 2, 3])]
    encoded = await codec.encode(original)
    for p in encoded:
        assert dict(p.metadata) == {"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: b"k1"}
        assert SECRET.encode() not in p.SerializeToString() and b"json/plain" not in p.data
    assert await codec.decode(encoded) == original


async def test_every_payload_gets_a_fresh_nonce(codec: EncryptionCodec) -> None:
    same = json_payload(SECRET)
    a, b = await codec.encode([same, same])
    assert a.data[:12] != b.data[:12] and a.data != b.data


async def test_a_tampered_payload_fails_authentication(codec: EncryptionCodec) -> None:
    (enc,) = await codec.encode([json_payload(SECRET)])
    data = bytearray(enc.data)
    data[-1] ^= 1
    enc.data = bytes(data)
    with pytest.raises(EncryptionError, match="failed authentication"):
        await codec.decode([enc])


async def test_a_payload_sealed_with_another_key_of_the_same_id_fails(codec: EncryptionCodec) -> None:
    (enc,) = await codec.encode([json_payload(SECRET)])
    with pytest.raises(EncryptionError, match="failed authentication"):
        await EncryptionCodec(KeyRing({"k1": K2})).decode([enc])


async def test_an_unknown_key_id_is_named(codec: EncryptionCodec) -> None:
    (enc,) = await codec.encode([json_payload(SECRET)])
    with pytest.raises(EncryptionError, match=r"key 'k1'.*it has: other"):
        await EncryptionCodec(KeyRing({"other": K2})).decode([enc])


async def test_rotation_encrypts_with_the_current_key_and_decrypts_with_any(codec: EncryptionCodec) -> None:
    (old,) = await codec.encode([json_payload("old")])
    rotated = EncryptionCodec(KeyRing({"k2": K2, "k1": K1}))  # k2 first: current
    assert rotated.key_ring.current == "k2"
    (new,) = await rotated.encode([json_payload("new")])
    assert new.metadata[KEY_ID_METADATA] == b"k2"
    assert await rotated.decode([old, new]) == [json_payload("old"), json_payload("new")]
    assert KeyRing({"k1": K1, "k2": K2}, current="k2").current == "k2"


async def test_unencrypted_payloads_pass_through_decode(codec: EncryptionCodec) -> None:
    plain = [json_payload({"written": "before encryption"}), Payload(metadata={"encoding": b"binary/null"})]
    assert await codec.decode(plain) == plain


async def test_an_encrypted_payload_without_key_id_is_refused(codec: EncryptionCodec) -> None:
    with pytest.raises(EncryptionError, match=KEY_ID_METADATA):
        await codec.decode([Payload(metadata={"encoding": ENCRYPTED_ENCODING}, data=b"x" * 40)])


def test_keys_never_appear_in_repr() -> None:
    ring = KeyRing({"k1": K1})
    assert b64(K1) not in repr(ring) and repr(K1) not in repr(ring)


# -- keys from the environment -----------------------------------------------------------------


def test_no_variable_means_no_encryption() -> None:
    assert EncryptionCodec.from_env({}) is None
    assert KeyRing.from_env({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": "  "}) is None


def test_a_list_of_keys_the_first_one_current() -> None:
    ring = KeyRing.from_env({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": f" new:{b64(K2)} , old:{b64(K1)}"})
    assert ring is not None and ring.current == "new" and ring.keys == {"new": K2, "old": K1}


def test_a_single_key_with_and_without_id() -> None:
    ring = KeyRing.from_env({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": b64(K1)})
    assert ring is not None and ring.keys == {"default": K1}
    env = {"TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": b64(K1), "TEMPORAL_WORKFLOWS_ENCRYPTION_KEY_ID": "2025-06"}
    ring = KeyRing.from_env(env)
    assert ring is not None and ring.current == "2025-06"
    urlsafe = base64.urlsafe_b64encode(K1).decode()
    assert KeyRing.from_env({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": urlsafe}).keys == {"default": K1}  # type: ignore[union-attr]


def test_a_generated_key_is_usable() -> None:
    assert len(base64.b64decode(KeyRing.generate_key())) == 32
    assert KeyRing.from_env({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": KeyRing.generate_key()}) is not None


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": b64(os.urandom(16))}, r"'default' is 16 bytes; AES-256-GCM needs 32"),
        ({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": "not base64!"}, "not valid base64"),
        ({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": b64(K1)}, "'id:base64key'"),
        ({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": f"a:{b64(K1)},a:{b64(K2)}"}, "appears twice"),
        ({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": f"bad id:{b64(K1)}"}, "is invalid"),
        ({"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": ","}, "names no key"),
        (
            {"TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": f"a:{b64(K1)}", "TEMPORAL_WORKFLOWS_ENCRYPTION_KEY": b64(K2)},
            "not both",
        ),
    ],
)
def test_malformed_keys_are_clear_errors_without_key_material(env: dict[str, str], match: str) -> None:
    with pytest.raises(EncryptionError, match=match) as info:
        EncryptionCodec.from_env(env)
    assert b64(K1) not in str(info.value) and b64(K2) not in str(info.value)


def test_the_current_key_must_be_in_the_ring() -> None:
    with pytest.raises(EncryptionError, match="'k9' is not in the ring"):
        KeyRing({"k1": K1}, current="k9")


# -- the plugin ----------------------------------------------------------------------------------


@executor(id="noop")
async def noop(msg: str, ctx: WorkflowContext) -> None:
    pass


def test_the_plugin_encrypts_when_the_environment_has_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS", raising=False)
    monkeypatch.delenv("TEMPORAL_WORKFLOWS_ENCRYPTION_KEY", raising=False)
    assert TemporalWorkflowsPlugin(tracing=False).codec is None
    monkeypatch.setenv("TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS", f"k1:{b64(K1)}")
    plugin = TemporalWorkflowsPlugin(tracing=False)
    assert plugin.codec is not None and plugin.codec.key_ring.keys == {"k1": K1}
    assert TemporalWorkflowsPlugin(tracing=False, encryption=None).codec is None


def test_the_plugins_converter_is_pydantic_with_the_codec(codec: EncryptionCodec) -> None:
    from temporal_workflows.temporal._converter import json_data_converter
    from temporal_workflows.temporal._failures import CycleSafeFailureConverter
    from temporal_workflows.temporal._worker.plugin import data_converter

    assert data_converter(None) is json_data_converter
    converter = data_converter(codec)
    assert converter.payload_codec is codec
    assert converter.payload_converter_class is json_data_converter.payload_converter_class
    # Failure messages often quote values: they are encrypted too (and looping cause chains are cut first).
    assert issubclass(converter.failure_converter_class, DefaultFailureConverterWithEncodedAttributes)
    assert issubclass(converter.failure_converter_class, CycleSafeFailureConverter)
    assert converter.failure_converter._encode_common_attributes


def test_the_worker_encrypts_file_and_sqlite_stores_without_a_cipher(codec: EncryptionCodec, tmp_path: Path) -> None:
    own = FileCheckpointStorage(tmp_path / "own")
    keyed = FileCheckpointStorage(tmp_path / "keyed", cipher=KeyRing({"x": K2}))
    default = SqliteCheckpointStorage(tmp_path / "default.sqlite")
    g1 = WorkflowBuilder(start_executor=noop, name="enc_own", checkpoint_storage=own).build()
    g2 = WorkflowBuilder(start_executor=noop, name="enc_keyed", checkpoint_storage=keyed).build()
    build_activities([g1, g2], default, cipher=codec.key_ring)
    assert own.cipher is codec.key_ring and default.cipher is codec.key_ring
    assert keyed.cipher is not codec.key_ring  # a store's own cipher wins


# -- checkpoints at rest -------------------------------------------------------------------------


def checkpoint(cid: str, *, previous: str | None = None, state: dict[str, Any] | None = None) -> WorkflowCheckpoint:
    return WorkflowCheckpoint(
        checkpoint_id=cid,
        workflow_name="g",
        run_id="run-1",
        graph_signature_hash="h",
        previous_checkpoint_id=previous,
        timestamp=datetime(2025, 1, 1, tzinfo=UTC),
        superstep=1,
        state={k: Envelope(None, v) for k, v in (state or {"secret": SECRET}).items()},
        messages=[],
        outputs=[],
        metadata={"note": SECRET},
    )


def files_under(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in directory.rglob("*") if p.is_file())


async def test_file_store_encrypts_whole_files(tmp_path: Path) -> None:
    ring = KeyRing({"k1": K1})
    store = FileCheckpointStorage(tmp_path, cipher=ring)
    await store.save(checkpoint("cp-1"))
    assert SECRET.encode() not in files_under(tmp_path)
    assert (await store.load("cp-1")).state["secret"].data == SECRET
    assert [c.checkpoint_id for c in await store.list_checkpoints(workflow_name="g")] == ["cp-1"]
    with pytest.raises(CheckpointStorageError, match="is encrypted and this store has no cipher"):
        await FileCheckpointStorage(tmp_path).load("cp-1")
    with pytest.raises(EncryptionError):
        await FileCheckpointStorage(tmp_path, cipher=KeyRing({"k1": K2})).load("cp-1")


async def test_file_store_reads_plain_files_and_refuses_a_moved_blob(tmp_path: Path) -> None:
    await FileCheckpointStorage(tmp_path).save(checkpoint("plain"))
    store = FileCheckpointStorage(tmp_path, cipher=KeyRing({"k1": K1}))
    assert (await store.load("plain")).state["secret"].data == SECRET  # written before encryption
    await store.save(checkpoint("cp-1"))
    (tmp_path / "cp-1.json").rename(tmp_path / "cp-2.json")
    with pytest.raises(EncryptionError, match="failed authentication"):
        await store.load("cp-2")  # bound to its checkpoint id


async def test_sqlite_store_encrypts_bodies_and_state_values_including_deltas(tmp_path: Path) -> None:
    ring = KeyRing({"k1": K1})
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStorage(path, cipher=ring)
    await store.save(checkpoint("cp-1", state={"secret": SECRET, "n": 1}))
    await store.save(checkpoint("cp-2", previous="cp-1", state={"secret": SECRET + "-2", "n": 1}))
    await store.delete("cp-1")  # rewrites cp-2 whole, still encrypted
    await store.save(checkpoint("cp-3", previous="cp-2", state={"secret": SECRET + "-3"}))
    store.close()
    assert SECRET.encode() not in files_under(tmp_path)
    with closing(sqlite3.connect(path)) as db:
        values = [v for (v,) in db.execute("SELECT value FROM checkpoint_state") if v is not None]
        bodies = [b for (b,) in db.execute("SELECT body FROM checkpoints")]
    assert values and all(isinstance(v, bytes) for v in values) and all(isinstance(b, bytes) for b in bodies)
    fresh = SqliteCheckpointStorage(path, cipher=ring)
    cp3 = await fresh.load("cp-3")
    assert {k: e.data for k, e in cp3.state.items()} == {"secret": SECRET + "-3"}
    assert (await fresh.load("cp-2")).metadata == {"note": SECRET}
    with pytest.raises(CheckpointStorageError, match="is encrypted and this store has no cipher"):
        await SqliteCheckpointStorage(path).load("cp-3")


async def test_sqlite_store_reads_rows_written_before_encryption(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    plain = SqliteCheckpointStorage(path)
    await plain.save(checkpoint("cp-1", state={"a": 1, "b": 2}))
    plain.close()
    store = SqliteCheckpointStorage(path, cipher=KeyRing({"k1": K1}))
    await store.load("cp-1")  # the delta base, plain
    await store.save(checkpoint("cp-2", previous="cp-1", state={"a": 1, "b": 3}))  # delta, encrypted
    fresh = SqliteCheckpointStorage(path, cipher=KeyRing({"k1": K1}))
    assert {k: e.data for k, e in (await fresh.load("cp-2")).state.items()} == {"a": 1, "b": 3}


async def test_sqlite_state_values_are_bound_to_their_key(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStorage(path, cipher=KeyRing({"k1": K1}))
    await store.save(checkpoint("cp-1", state={"public": "p", "secret": SECRET}))
    store.close()
    with closing(sqlite3.connect(path)) as db:
        (sealed,) = db.execute("SELECT value FROM checkpoint_state WHERE key = 'secret'").fetchone()
        db.execute("UPDATE checkpoint_state SET value = ? WHERE key = 'public'", (sealed,))
        db.commit()
    with pytest.raises(EncryptionError, match="failed authentication"):
        await SqliteCheckpointStorage(path, cipher=KeyRing({"k1": K1})).load("cp-1")


# -- the codec server ----------------------------------------------------------------------------

TOKEN = "codec-token-0123456789abcdef"
UI = "http://localhost:8233"


@pytest.fixture
def serve(codec: EncryptionCodec, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., str]]:
    """Starts codec servers on a free loopback port (keyword arguments go to make_codec_server); stops them all."""
    monkeypatch.delenv(ENV_CODEC_TOKEN, raising=False)
    servers: list[CodecServer] = []

    def start(origins: list[str] | None = None, **kwargs: Any) -> str:
        server = make_codec_server(codec, "127.0.0.1", 0, origins or [UI], **kwargs).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def codec_server(serve: Callable[..., str]) -> str:
    return serve(allow_encode=True)


def post(url: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST") -> tuple[int, Any, bytes]:
    req = urllib.request.Request(
        url, data=body, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def raw_request(url: str, head: str, body: bytes = b"", *, wait: float = 10) -> tuple[int | None, str]:
    """Send ``head`` (request line and headers, ``\n``-separated) and ``body`` as they are: (status, response).

    The status is ``None`` when the server closed the connection without answering.
    """
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(head.strip().replace("\n", "\r\n").encode() + b"\r\n\r\n" + body)
        received = b""
        with contextlib.suppress(ConnectionError):
            while chunk := sock.recv(65536):
                received += chunk
    text = received.decode(errors="replace")
    match = re.match(r"HTTP/1\.[01] (\d{3})", text)
    return (int(match.group(1)) if match else None), text


def payloads_json(payloads: list[Payload]) -> bytes:
    return json.dumps({"payloads": [json_format.MessageToDict(p) for p in payloads]}).encode()


async def test_codec_server_decodes_for_the_web_ui(codec: EncryptionCodec, codec_server: str) -> None:
    encrypted = await codec.encode([json_payload({"secret": SECRET})])
    status, headers, body = post(
        f"{codec_server}/default/decode",
        payloads_json(encrypted),
        {"Origin": "http://localhost:8233", "X-Namespace": "default"},
    )
    assert status == 200 and headers["Access-Control-Allow-Origin"] == "http://localhost:8233"
    decoded = [json_format.ParseDict(p, Payload()) for p in json.loads(body)["payloads"]]
    assert decoded == [json_payload({"secret": SECRET})]
    status, _, body = post(f"{codec_server}/encode", payloads_json(decoded))
    assert status == 200
    (again,) = [json_format.ParseDict(p, Payload()) for p in json.loads(body)["payloads"]]
    assert again.metadata["encoding"] == ENCRYPTED_ENCODING and await codec.decode([again]) == decoded


def test_codec_server_answers_preflight_only_for_allowed_origins(codec_server: str) -> None:
    status, headers, _ = post(f"{codec_server}/decode", b"", {"Origin": "http://localhost:8233"}, method="OPTIONS")
    assert status == 200 and "X-Namespace" in headers["Access-Control-Allow-Headers"]
    assert headers["Access-Control-Allow-Credentials"] == "true"  # an origin it was given, by name
    status, headers, _ = post(f"{codec_server}/decode", b"", {"Origin": "https://evil.example"}, method="OPTIONS")
    assert "Access-Control-Allow-Origin" not in headers
    assert post(f"{codec_server}/decode", b"{}", {"Origin": "https://evil.example"})[0] == 403
    assert post(f"{codec_server}/elsewhere", b"{}")[0] == 404
    assert post(f"{codec_server}/decode", b"not json")[0] == 400


async def test_codec_server_never_sends_credentials_with_a_wildcard_origin(
    codec: EncryptionCodec, serve: Callable[..., str]
) -> None:
    body = payloads_json(await codec.encode([json_payload(SECRET)]))
    anyone = serve(["*"])
    for method in ("OPTIONS", "POST"):
        status, headers, _ = post(f"{anyone}/decode", body, {"Origin": "https://evil.example"}, method=method)
        assert status == 200 and headers["Access-Control-Allow-Origin"] == "*"  # never the echoed origin
        assert "Access-Control-Allow-Credentials" not in headers
    named_and_any = serve(["*", UI])
    status, headers, _ = post(f"{named_and_any}/decode", body, {"Origin": UI})
    assert headers["Access-Control-Allow-Origin"] == UI and headers["Access-Control-Allow-Credentials"] == "true"
    assert "Origin" in headers["Vary"]
    status, headers, _ = post(f"{named_and_any}/decode", body, {"Origin": "https://evil.example"})
    assert headers["Access-Control-Allow-Origin"] == "*" and "Access-Control-Allow-Credentials" not in headers


def test_codec_server_refuses_host_names_that_are_not_its_own(serve: Callable[..., str]) -> None:
    """DNS rebinding: a page on evil.example, its name resolved to 127.0.0.1, sends Host: evil.example:<port>."""
    url = serve()
    port = int(url.rsplit(":", 1)[1])

    def status_for(host: str | None) -> int | None:
        header = "" if host is None else f"\nHost: {host}"
        return raw_request(url, f"POST /decode HTTP/1.1{header}\nContent-Length: 2\nConnection: close", b"{}")[0]

    for own in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost.:{port}", f"[::1]:{port}"):
        assert status_for(own) == 200, own
    for other in (f"evil.example:{port}", "evil.example", f"localhost:{port + 1}", "localhost", f"127.0.0.1:{port}x"):
        assert status_for(other) == 403, other
    assert status_for(None) in (400, 403)  # HTTP/1.1 without Host is malformed before it is foreign
    assert raw_request(url, f"OPTIONS /decode HTTP/1.1\nHost: evil.example:{port}\nOrigin: {UI}")[0] == 403

    proxied = serve(allowed_hosts=["codec.example.com", "other.example.com:443"])
    proxied_port = int(proxied.rsplit(":", 1)[1])
    for host, expected in {
        "codec.example.com": 200,
        "codec.example.com:8443": 200,
        "other.example.com:443": 200,
        "other.example.com": 403,
        f"127.0.0.1:{proxied_port}": 200,
        "evil.example": 403,
    }.items():
        head = f"POST /decode HTTP/1.1\nHost: {host}\nContent-Length: 2\nConnection: close"
        assert raw_request(proxied, head, b"{}")[0] == expected, host
    with pytest.raises(CodecServerConfigError, match="allowed host"):
        serve(allowed_hosts=["not a host/"])


def test_codec_server_answers_malformed_lengths_at_once_and_keeps_serving(serve: Callable[..., str]) -> None:
    url = serve()
    host = f"Host: 127.0.0.1:{url.rsplit(':', 1)[1]}"
    for lengths, expected in {
        ("abc",): 400,
        ("-1",): 400,
        ("1e3",): 400,
        ("+2",): 400,
        ("2", "3"): 400,
        (str(DEFAULT_MAX_BODY + 1),): 413,
        ("99999999999999999999999",): 400,
    }.items():
        head = f"POST /decode HTTP/1.1\n{host}\n" + "\n".join(f"Content-Length: {n}" for n in lengths)
        started = time.monotonic()
        status, text = raw_request(url, head, b"{}", wait=5)
        assert status == expected, (lengths, text)
        assert time.monotonic() - started < 3  # answered, not waiting for a body that never comes
    chunked = f"POST /decode HTTP/1.1\n{host}\nTransfer-Encoding: chunked\nConnection: close"
    assert raw_request(url, chunked, b"2\r\n{}\r\n0\r\n\r\n")[0] == 411
    assert post(f"{url}/decode", b"{}")[0] == 200


def test_a_slow_client_gets_a_timeout_and_cannot_hold_the_server(serve: Callable[..., str]) -> None:
    url = serve(timeout=0.5, max_connections=2)
    port = int(url.rsplit(":", 1)[1])
    started = time.monotonic()
    status, _ = raw_request(url, f"POST /decode HTTP/1.1\nHost: 127.0.0.1:{port}\nContent-Length: 100", b"{", wait=5)
    assert status == 408 and time.monotonic() - started < 3
    # Two connections that send nothing take every slot for strangers: a client that sends its request at once
    # is still served, and the oldest silent one, slow by now (past its grace, a quarter of the deadline),
    # makes room for it (503, closed).
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        time.sleep(0.3)
        assert raw_request(url, f"POST /decode HTTP/1.1\nHost: 127.0.0.1:{port}\nContent-Length: 2", b"{}")[0] == 200
        assert idle[0].recv(1024).startswith(b"HTTP/1.1 503")
        idle[1].settimeout(5)  # the other one is dropped by its deadline
        assert idle[1].recv(1024).startswith(b"HTTP/1.1 408")
    finally:
        for sock in idle:
            sock.close()
    assert post(f"{url}/decode", b"{}")[0] == 200


def test_slowloris_cannot_keep_an_authenticated_client_out(codec: EncryptionCodec, serve: Callable[..., str]) -> None:
    """#23.7: 33 connections dripping a header byte at a time, without the token; the right token is served."""
    url = serve(token=TOKEN, timeout=3.0)  # 32 strangers at most (the default)
    port = int(url.rsplit(":", 1)[1])
    head = f"POST /decode HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 2\r\nX-Padding: ".encode()
    slow = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(33)]
    stop = threading.Event()
    closed_at: list[float] = []
    started = time.monotonic()

    def drip() -> None:
        i = 0
        while not stop.is_set() and len(closed_at) < len(slow):
            for sock in slow:
                if sock.fileno() == -1:
                    continue
                try:
                    sock.sendall(head[i % len(head) : i % len(head) + 1])
                except OSError:
                    closed_at.append(time.monotonic() - started)
                    sock.close()
            i += 1
            stop.wait(0.2)

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        served: list[float] = []
        for _ in range(5):
            time.sleep(0.3)
            t0 = time.monotonic()
            status, _, _ = post(f"{url}/decode", b"{}", {"Authorization": f"Bearer {TOKEN}"})
            assert status == 200
            served.append(time.monotonic() - t0)
        assert max(served) < 2.0, served
        # No token: refused at once, never decrypted, even under the drip.
        assert post(f"{url}/decode", b"{}")[0] == 401
        # Every slow connection is dropped: evicted by newer ones, or at its whole-request deadline.
        dripper.join(timeout=15)
        assert len(closed_at) == len(slow) and max(closed_at) < 10, closed_at
    finally:
        stop.set()
        for sock in slow:
            sock.close()


def test_a_crowd_is_served_not_evicted_as_slow_clients(codec: EncryptionCodec, serve: Callable[..., str]) -> None:
    """#36: 400 clients connecting at once, each sending its request at once, against a cap of 32 strangers: a
    crowd the server has not read yet is not a slowloris, so every one is served (none evicted with 503)."""
    url = serve(token=TOKEN)
    port = int(url.rsplit(":", 1)[1])
    body = b"{}"
    head = (
        f"POST /decode HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    crowd = []
    try:
        for _ in range(400):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(head + body)
            crowd.append(sock)
        statuses = []
        for sock in crowd:
            answer = b""
            while b"\r\n" not in answer:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
            statuses.append(answer.split(b" ", 2)[1] if answer else b"closed")
    finally:
        for sock in crowd:
            sock.close()
    assert statuses.count(b"200") == 400, {s: statuses.count(s) for s in set(statuses)}


async def test_encode_is_off_unless_allowed(codec: EncryptionCodec, serve: Callable[..., str]) -> None:
    plain = payloads_json([json_payload(SECRET)])
    status, _, body = post(f"{serve()}/default/encode", plain)
    assert status == 403 and b"encoding is off" in body
    status, _, body = post(f"{serve(allow_encode=True)}/default/encode", plain)
    assert status == 200


async def test_a_token_is_required_for_everything_but_a_preflight(
    codec: EncryptionCodec, serve: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = payloads_json(await codec.encode([json_payload(SECRET)]))
    for url in (serve(token=TOKEN), serve(environ={ENV_CODEC_TOKEN: f" {TOKEN} "})):
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
            status, response_headers, answer = post(f"{url}/decode", body, {"Origin": UI, **headers})
            assert status == 401 and SECRET.encode() not in answer, headers
            assert response_headers["WWW-Authenticate"].startswith("Bearer")
            assert response_headers["Access-Control-Allow-Origin"] == UI  # so the Web UI can show why
        status, _, answer = post(f"{url}/decode", body, {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and SECRET.encode() in base64.b64decode(json.loads(answer)["payloads"][0]["data"])
        assert post(f"{url}/decode", body, {"Authorization": f"bearer  {TOKEN}"})[0] == 200
        assert post(f"{url}/decode", b"", {"Origin": UI}, method="OPTIONS")[0] == 200  # browsers send no token here
        assert post(f"{url}/decode", b"", {"Authorization": f"Bearer {TOKEN}"}, method="GET")[0] == 405
        assert post(f"{url}/decode", b"", method="GET")[0] == 401
    monkeypatch.setenv(ENV_CODEC_TOKEN, TOKEN)
    assert post(f"{serve()}/decode", body)[0] == 401  # read from the environment by default
    assert post(f"{serve(token='')}/decode", body)[0] == 200  # "" turns it off explicitly
    for bad in ("short", "has a space in the middle of it"):
        with pytest.raises(CodecServerConfigError, match="token"):
            serve(token=bad)


def test_the_server_says_whether_it_needs_a_token_and_serves_encode(
    codec: EncryptionCodec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the CLI prints when it starts one."""
    monkeypatch.delenv(ENV_CODEC_TOKEN, raising=False)
    for kwargs, token_required, encode_allowed in (
        ({}, False, False),
        ({"token": TOKEN, "allow_encode": True}, True, True),
        ({"environ": {ENV_CODEC_TOKEN: TOKEN}}, True, False),
    ):
        server = make_codec_server(codec, "127.0.0.1", 0, **kwargs)  # type: ignore[arg-type]
        try:
            assert (server.token_required, server.encode_allowed) == (token_required, encode_allowed)
        finally:
            server.server_close()


@pytest.mark.parametrize("content", ["", "\n", "   ", " \t\r\n "])
def test_an_empty_token_file_refuses_to_start(content: str, tmp_path: Path) -> None:
    """#23.8: a token file asks for authentication; a blank one must not start the server open."""
    token_file = tmp_path / "token"
    token_file.write_text(content)
    with pytest.raises(GuardConfigError, match="is empty"):
        read_token_file(token_file)
    env = {**os.environ, "TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS": f"k1:{b64(K1)}"}
    env.pop(ENV_CODEC_TOKEN, None)
    done = subprocess.run(
        [sys.executable, "-m", "temporal_workflows", "codec-server", "--port", "0", "--token-file", str(token_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2 and "is empty" in done.stderr and "codec server on" not in done.stdout
    token_file.write_text(f"{TOKEN}\n")
    assert read_token_file(token_file) == TOKEN
