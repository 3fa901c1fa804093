"""Payload encryption: AES-256-GCM with named keys, so history and checkpoints are unreadable without them.

Temporal stores every workflow input, activity argument and result, signal,
update, query answer and memo in history, on the server, in plain JSON. With
:class:`EncryptionCodec` installed on the client and the worker, each payload
leaves the process encrypted and only processes holding the key can read it;
the server, the Web UI and anyone with read access to the namespace see
``binary/encrypted`` blobs.

The format is the one of Temporal's encryption samples (so their codec servers
in other languages can read it): the whole serialized ``Payload`` (data and
metadata, so even the encoding is hidden) is sealed with AES-256-GCM under a
fresh 12-byte nonce, and the outer payload carries ``encoding:
binary/encrypted`` and ``encryption-key-id``. Keys have ids so they can be
rotated: the current key encrypts, and any key the ring holds decrypts what it
encrypted.

The same :class:`KeyRing` encrypts checkpoints at rest
(``FileCheckpointStorage(..., cipher=ring)``, ``SqliteCheckpointStorage(..., cipher=ring)``).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from temporal_workflows._errors import WorkflowError

__all__ = [
    "ENCRYPTED_ENCODING",
    "ENV_ENCRYPTION_KEY",
    "ENV_ENCRYPTION_KEYS",
    "ENV_ENCRYPTION_KEY_ID",
    "KEY_ID_METADATA",
    "EncryptionCodec",
    "EncryptionError",
    "KeyRing",
]

ENCRYPTED_ENCODING = b"binary/encrypted"
"""The ``encoding`` metadata of an encrypted payload."""

KEY_ID_METADATA = "encryption-key-id"
"""The payload metadata naming the key that encrypted it."""

ENV_ENCRYPTION_KEYS = "TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS"
"""``id1:base64key,id2:base64key``: every key that may decrypt; the first one encrypts."""

ENV_ENCRYPTION_KEY = "TEMPORAL_WORKFLOWS_ENCRYPTION_KEY"
"""One base64 key, for a deployment that has never rotated."""

ENV_ENCRYPTION_KEY_ID = "TEMPORAL_WORKFLOWS_ENCRYPTION_KEY_ID"
"""The id of ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEY`` (default ``default``)."""

_NONCE_BYTES = 12
_KEY_BYTES = 32
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Blobs sealed by KeyRing.encrypt start with this, then "<key id>:", then nonce + ciphertext.
_BLOB_MAGIC = b"twenc1:"
_GENERATE_HINT = "generate one with: python -c 'import os, base64; print(base64.b64encode(os.urandom(32)).decode())'"


class EncryptionError(WorkflowError, ValueError):
    """A key is malformed, missing from the ring, or a ciphertext fails authentication.

    Never contains key material: messages name key ids and sizes only.
    """


def _decode_key(key_id: str, text: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip().replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionError(f"encryption key {key_id!r} is not valid base64; {_GENERATE_HINT}") from None
    return raw


@dataclass(frozen=True, eq=False)
class KeyRing:
    """AES-256-GCM keys by id: the ``current`` one encrypts, every one decrypts.

    Rotation is three deploys: add the new key to every process's ring (it
    can now decrypt), make it current (new payloads use it), and drop the old
    one once no history or checkpoint you still need was written with it.

    Args:
        keys: 32-byte keys by id (ids: letters, digits, ``.``, ``_``, ``-``).
        current: The id of the key that encrypts; default: the first key.
    """

    keys: Mapping[str, bytes] = field(repr=False)
    current: str = ""
    _aead: dict[str, AESGCM] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise EncryptionError("a key ring needs at least one key")
        for key_id, key in self.keys.items():
            if not _KEY_ID.fullmatch(key_id):
                raise EncryptionError(
                    f"encryption key id {key_id!r} is invalid: use 1-64 letters, digits, '.', '_' or '-'"
                )
            if len(key) != _KEY_BYTES:
                raise EncryptionError(
                    f"encryption key {key_id!r} is {len(key)} bytes; AES-256-GCM needs {_KEY_BYTES}. {_GENERATE_HINT}"
                )
        current = self.current or next(iter(self.keys))
        if current not in self.keys:
            raise EncryptionError(f"the current key {current!r} is not in the ring ({', '.join(self.keys)})")
        object.__setattr__(self, "keys", dict(self.keys))
        object.__setattr__(self, "current", current)
        object.__setattr__(self, "_aead", {key_id: AESGCM(key) for key_id, key in self.keys.items()})

    @staticmethod
    def generate_key() -> str:
        """A fresh random 256-bit key, base64-encoded as the environment variables expect."""
        return base64.b64encode(os.urandom(_KEY_BYTES)).decode()

    @classmethod
    def parse(cls, spec: str) -> KeyRing:
        """Keys from ``"id1:base64key,id2:base64key"``; the first one is current."""
        keys: dict[str, bytes] = {}
        for entry in spec.split(","):
            entry = entry.strip()
            if not entry:
                continue
            key_id, sep, text = entry.partition(":")
            key_id = key_id.strip()
            if not sep or not key_id:
                raise EncryptionError(f"{ENV_ENCRYPTION_KEYS} entries are 'id:base64key'; one has no id")
            if key_id in keys:
                raise EncryptionError(f"encryption key id {key_id!r} appears twice in {ENV_ENCRYPTION_KEYS}")
            keys[key_id] = _decode_key(key_id, text)
        if not keys:
            raise EncryptionError(f"{ENV_ENCRYPTION_KEYS} names no key")
        return cls(keys)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KeyRing | None:
        """The ring ``TEMPORAL_WORKFLOWS_ENCRYPTION_KEYS`` or ``..._KEY`` (+ ``..._KEY_ID``) describes.

        Returns:
            ``None`` when neither is set: encryption is off.

        Raises:
            EncryptionError: Both are set, or a key is malformed or not 32 bytes.
        """
        env = os.environ if environ is None else environ
        many = env.get(ENV_ENCRYPTION_KEYS, "").strip()
        one = env.get(ENV_ENCRYPTION_KEY, "").strip()
        if many and one:
            raise EncryptionError(f"set {ENV_ENCRYPTION_KEYS} or {ENV_ENCRYPTION_KEY}, not both")
        if many:
            return cls.parse(many)
        if one:
            key_id = env.get(ENV_ENCRYPTION_KEY_ID, "").strip() or "default"
            return cls({key_id: _decode_key(key_id, one)})
        return None

    def seal(self, plaintext: bytes, associated_data: bytes | None = None) -> tuple[str, bytes]:
        """Encrypt with the current key: its id, and nonce + ciphertext + tag."""
        nonce = os.urandom(_NONCE_BYTES)
        return self.current, nonce + self._aead[self.current].encrypt(nonce, plaintext, associated_data)

    def open(self, key_id: str, sealed: bytes, associated_data: bytes | None = None) -> bytes:
        """Decrypt what :meth:`seal` returned with key ``key_id``.

        Raises:
            EncryptionError: The ring has no key ``key_id``, or the data was
                altered (or sealed with another key or associated data).
        """
        aead = self._aead.get(key_id)
        if aead is None:
            raise EncryptionError(
                f"data is encrypted with key {key_id!r}, which this process does not have "
                f"(it has: {', '.join(self.keys)}); add it to {ENV_ENCRYPTION_KEYS}"
            )
        if len(sealed) < _NONCE_BYTES + 16:
            raise EncryptionError(f"encrypted data (key {key_id!r}) is truncated")
        try:
            return aead.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], associated_data)
        except InvalidTag:
            raise EncryptionError(
                f"encrypted data (key {key_id!r}) failed authentication: it was altered, or sealed with another "
                "key of the same id"
            ) from None

    # The cipher protocol of the checkpoint stores: self-describing blobs.

    def encrypt(self, data: bytes, associated_data: bytes = b"") -> bytes:
        """A self-describing blob (``twenc1:<key id>:`` + nonce + ciphertext) for data at rest.

        ``associated_data`` binds the blob to where it is stored (e.g. the
        checkpoint id), so a blob copied to another place fails to decrypt.
        """
        key_id, sealed = self.seal(data, associated_data)
        return _BLOB_MAGIC + key_id.encode() + b":" + sealed

    def decrypt(self, data: bytes, associated_data: bytes = b"") -> bytes:
        """The plaintext of a blob from :meth:`encrypt`, with the key it names."""
        if not data.startswith(_BLOB_MAGIC):
            raise EncryptionError("data is not an encrypted blob")
        key_id, sep, sealed = data[len(_BLOB_MAGIC) :].partition(b":")
        if not sep:
            raise EncryptionError("encrypted blob has no key id")
        return self.open(key_id.decode(errors="replace"), sealed, associated_data)


class EncryptionCodec(PayloadCodec):
    """A Temporal payload codec that encrypts every payload with a :class:`KeyRing`.

    Install it on every client and worker of the namespace (the
    :class:`~temporal_workflows.temporal.TemporalWorkflowsPlugin` does, from
    the environment). Payloads not marked encrypted pass through ``decode``
    unchanged, so histories written before encryption was turned on still read.

    Args:
        key_ring: The keys; the ring's current key encrypts.
    """

    ENCODING: ClassVar[bytes] = ENCRYPTED_ENCODING

    def __init__(self, key_ring: KeyRing) -> None:
        self.key_ring = key_ring

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EncryptionCodec | None:
        """The codec for :meth:`KeyRing.from_env`'s keys, or ``None`` when no key is set."""
        ring = KeyRing.from_env(environ)
        return cls(ring) if ring is not None else None

    def encode_payload(self, payload: Payload) -> Payload:
        """One payload, encrypted (synchronous: AES-GCM is fast and the codec server needs it)."""
        key_id, sealed = self.key_ring.seal(payload.SerializeToString())
        return Payload(metadata={"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: key_id.encode()}, data=sealed)

    def decode_payload(self, payload: Payload) -> Payload:
        """One payload, decrypted; a payload that is not encrypted comes back as it is."""
        if payload.metadata.get("encoding") != ENCRYPTED_ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID_METADATA)
        if key_id is None:
            raise EncryptionError(f"an encrypted payload has no {KEY_ID_METADATA!r} metadata")
        inner = Payload()
        inner.ParseFromString(self.key_ring.open(key_id.decode(errors="replace"), payload.data))
        return inner

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encode_payload(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decode_payload(p) for p in payloads]
