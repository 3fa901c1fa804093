"""Large values by reference (a claim check), on Temporal's own external storage.

A payload over a threshold (a step's result holding a 100 MB document, a
start message, a continue-as-new snapshot, a query's answer) is written to a
store, and history keeps only a reference: the driver's name and its claim
(here the key, the SHA-256 digest and the size of the stored bytes). Every
reader (the workflow, a step's worker, a client, a query, a replay) gets the
value back through the data converter, so no code of ours reads a reference.
This is the SDK's ``ExternalStorage`` (``temporalio.converter``): the
converter encodes a payload (our encryption codec included, so the stored
bytes are encrypted when encryption is on), then stores it; reading goes the
other way. This module supplies the stores and the configuration:

- :class:`FileStorageDriver`: a directory (development, one machine, or a
  shared file system);
- :class:`SqliteStorageDriver`: one SQLite file (development);
- :func:`s3_storage_driver`: any S3-compatible service, through the SDK's
  ``S3StorageDriver`` (needs ``aioboto3``: the ``s3`` extra);
- :class:`LargeValues`: the driver, the threshold, the largest value allowed;
  ``LargeValues.from_env()`` reads ``TEMPORAL_WORKFLOWS_VALUE_STORE``.

A stored value that is gone, or no longer has its digest, is a
:class:`StoredValueMissingError` naming the store, key, digest and size.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from temporal_workflows._errors import StoredValueMissingError, WorkflowError

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_THRESHOLD",
    "ENV_VALUE_STORE",
    "ENV_VALUE_THRESHOLD",
    "FileStorageDriver",
    "LargeValues",
    "SqliteStorageDriver",
    "s3_storage_driver",
]

ENV_VALUE_STORE = "TEMPORAL_WORKFLOWS_VALUE_STORE"
"""Where large values go: a directory (``/srv/values`` or ``file:///srv/values``), ``sqlite:///path/values.db``,
or ``s3://bucket/prefix?endpoint_url=http://host:9000&region=eu-west-1``. Unset: no store (values over the
payload limit are refused, ``PayloadTooLargeError``)."""
ENV_VALUE_THRESHOLD = "TEMPORAL_WORKFLOWS_VALUE_THRESHOLD"
"""Payloads of at least this many bytes go to the store (default :data:`DEFAULT_THRESHOLD`)."""

DEFAULT_THRESHOLD = 256 * 1024
"""Temporal's own default (it warns about payloads from 512 KiB; events carry data up to 256 KiB)."""
DEFAULT_MAX_VALUE_BYTES = 1024 * 1024 * 1024
"""The largest value a run takes with a store: 1 GiB (a step holds it in memory, as JSON, more than once)."""

_CLAIM_KEY, _CLAIM_DIGEST, _CLAIM_SIZE = "key", "sha256", "size"


def _claim(data: bytes) -> tuple[str, StorageDriverClaim]:
    digest = hashlib.sha256(data).hexdigest()
    return digest, StorageDriverClaim({_CLAIM_KEY: digest, _CLAIM_DIGEST: digest, _CLAIM_SIZE: str(len(data))})


def _checked(name: str, where: str, claim: StorageDriverClaim, data: bytes | None) -> Payload:
    """The payload a claim stands for, once its bytes are there and have their digest."""
    key = claim.claim_data.get(_CLAIM_KEY, "?")
    digest = claim.claim_data.get(_CLAIM_DIGEST, "")
    size = claim.claim_data.get(_CLAIM_SIZE, "?")
    said = f"stored value {key[:16]}… (sha256 {digest[:16]}…, {size} bytes) in store {name!r} ({where})"
    if data is None:
        raise StoredValueMissingError(f"{said} is missing: it was deleted, or this process reads another store")
    if hashlib.sha256(data).hexdigest() != digest:
        raise StoredValueMissingError(f"{said} does not have its digest any more: it was changed after it was stored")
    payload = Payload()
    payload.ParseFromString(data)
    return payload


class FileStorageDriver(StorageDriver):
    """Stored payloads as files in a directory, named by their SHA-256 (written once: the same bytes, one file).

    Every worker and client of a namespace must see the same directory (one
    machine, or a shared file system); for several machines use S3.
    """

    def __init__(self, directory: str | os.PathLike[str], *, name: str = "temporal_workflows.file") -> None:
        self.directory = Path(directory)
        self._name = name

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "temporal_workflows.file"

    def _path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise StoredValueMissingError(f"{key[:80]!r} is not a key of store {self._name!r}")
        return self.directory / key[:2] / key

    def _write(self, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = []
        for p in payloads:
            data = p.SerializeToString()
            key, claim = _claim(data)
            path = self._path(key)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)  # whole or not at all: a reader never sees half a value
            claims.append(claim)
        return claims

    def _read(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        out = []
        for c in claims:
            path = self._path(c.claim_data.get(_CLAIM_KEY, ""))
            try:
                data: bytes | None = path.read_bytes()
            except FileNotFoundError:
                data = None
            out.append(_checked(self._name, str(path), c, data))
        return out

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._write, payloads)

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(self._read, claims)


class SqliteStorageDriver(StorageDriver):
    """Stored payloads in one SQLite file, keyed by their SHA-256 (for development and tests)."""

    def __init__(self, path: str | os.PathLike[str], *, name: str = "temporal_workflows.sqlite") -> None:
        self.path = Path(path)
        self._name = name
        self._lock = threading.Lock()
        self._ready = False

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "temporal_workflows.sqlite"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn.execute("CREATE TABLE IF NOT EXISTS stored_values (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
            conn.commit()
            self._ready = True
        return conn

    def _write(self, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = []
        with self._lock, contextlib.closing(self._connect()) as conn:
            for p in payloads:
                data = p.SerializeToString()
                key, claim = _claim(data)
                conn.execute("INSERT OR IGNORE INTO stored_values (key, data) VALUES (?, ?)", (key, data))
                claims.append(claim)
            conn.commit()
        return claims

    def _read(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        out = []
        with self._lock, contextlib.closing(self._connect()) as conn:
            for c in claims:
                row = conn.execute(
                    "SELECT data FROM stored_values WHERE key = ?", (c.claim_data.get(_CLAIM_KEY, ""),)
                ).fetchone()
                out.append(_checked(self._name, str(self.path), c, bytes(row[0]) if row else None))
        return out

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._write, payloads)

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(self._read, claims)


class _S3Client:
    """An ``S3StorageDriverClient`` over aioboto3 that opens its client on first use, in the loop using it."""

    def __init__(self, *, endpoint_url: str | None, region: str | None) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self._clients: dict[int, Any] = {}

    async def _client(self) -> Any:
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            import aioboto3

            session = aioboto3.Session()
            ctx = session.client("s3", endpoint_url=self.endpoint_url, region_name=self.region)
            client = await ctx.__aenter__()
            self._clients[loop] = client
        return client

    def describe(self) -> dict[str, str]:
        return {k: v for k, v in (("endpoint_url", self.endpoint_url), ("region", self.region)) if v}

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            await (await self._client()).head_object(Bucket=bucket, Key=key)
            return True
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await (await self._client()).put_object(Bucket=bucket, Key=key, Body=data)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        response = await (await self._client()).get_object(Bucket=bucket, Key=key)
        body: bytes = await response["Body"].read()
        return body


def s3_storage_driver(
    bucket: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    name: str = "temporal_workflows.s3",
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
) -> StorageDriver:
    """The SDK's ``S3StorageDriver`` for ``bucket`` on AWS or any S3-compatible service (``endpoint_url``).

    Credentials come from the usual AWS sources (environment, profile, role).
    A missing object reads as :class:`StoredValueMissingError`.

    Raises:
        WorkflowError: ``aioboto3`` is not installed (``pip install 'temporal-workflows[s3]'``).
    """
    try:
        import aioboto3  # noqa: F401
        from temporalio.contrib.aws.s3driver import S3StorageDriver
    except ImportError as e:
        raise WorkflowError(f"an S3 store needs aioboto3: pip install 'temporal-workflows[s3]' ({e})") from None

    class _Driver(S3StorageDriver):
        async def retrieve(
            self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
        ) -> list[Payload]:
            try:
                return await super().retrieve(context, claims)
            except RuntimeError as e:
                cause = e.__cause__
                code = getattr(cause, "response", {}).get("Error", {}).get("Code")
                if code in ("404", "NoSuchKey", "NotFound"):
                    raise StoredValueMissingError(f"{e}: the stored value is missing") from e
                raise
            except ValueError as e:  # the SDK driver's integrity check
                raise StoredValueMissingError(str(e)) from e

    return _Driver(
        _S3Client(endpoint_url=endpoint_url, region=region),  # type: ignore[arg-type]
        bucket,
        driver_name=name,
        max_payload_size=max_value_bytes,
    )


@dataclass(frozen=True)
class LargeValues:
    """Values over ``threshold`` bytes kept by reference in ``driver``'s store.

    Give it to :class:`~temporal_workflows.temporal.TemporalWorkflowsPlugin`
    (``large_values=``) on every worker and client of the namespace: a run's
    history then holds references, and anything that reads the run needs the
    store. With it, a value may be up to ``max_value_bytes`` (instead of the
    2 MiB payload limit).

    Attributes:
        driver: Where stored values go (:class:`FileStorageDriver`,
            :class:`SqliteStorageDriver`, :func:`s3_storage_driver`, or any
            Temporal ``StorageDriver``).
        threshold: Payloads of at least this many bytes are stored.
        max_value_bytes: The largest value a step, client or run may hand over.
    """

    driver: StorageDriver
    threshold: int = DEFAULT_THRESHOLD
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    extra_drivers: tuple[StorageDriver, ...] = field(default=())
    """Other drivers values were stored with before (read only), e.g. while moving stores."""

    def __post_init__(self) -> None:
        if self.threshold < 1024:
            raise ValueError(f"threshold must be at least 1,024 bytes, not {self.threshold}")
        if self.max_value_bytes < self.threshold:
            raise ValueError("max_value_bytes must be at least the threshold")

    def external_storage(self) -> ExternalStorage:
        """The SDK's configuration: this driver stores, every driver given reads."""
        driver = self.driver
        drivers = [driver, *self.extra_drivers]
        return ExternalStorage(
            drivers=drivers,
            driver_selector=(lambda _ctx, _payload: driver) if len(drivers) > 1 else None,
            payload_size_threshold=self.threshold,
        )

    @classmethod
    def from_url(cls, url: str, *, threshold: int | None = None) -> LargeValues:
        """A store from its URL (:data:`ENV_VALUE_STORE`'s forms).

        Raises:
            ValueError: a URL of no known form, naming the forms.
        """
        parsed = urlparse(url)
        options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        t = threshold if threshold is not None else DEFAULT_THRESHOLD
        if parsed.scheme in ("", "file"):
            path = parsed.path if parsed.scheme == "file" else url
            if not path:
                raise ValueError(f"{ENV_VALUE_STORE}={url!r}: a directory needs a path")
            return cls(FileStorageDriver(path), threshold=t)
        if parsed.scheme == "sqlite":
            path = parsed.path if not parsed.netloc else parsed.netloc + parsed.path
            if not path:
                raise ValueError(f"{ENV_VALUE_STORE}={url!r}: sqlite:///path/to/values.db")
            return cls(SqliteStorageDriver(path), threshold=t)
        if parsed.scheme == "s3":
            if not parsed.netloc:
                raise ValueError(f"{ENV_VALUE_STORE}={url!r}: s3://bucket[?endpoint_url=...&region=...]")
            return cls(
                s3_storage_driver(
                    parsed.netloc, endpoint_url=options.get("endpoint_url"), region=options.get("region")
                ),
                threshold=t,
            )
        raise ValueError(
            f"{ENV_VALUE_STORE}={url!r} is no store: a directory path, file:///dir, sqlite:///file.db or s3://bucket"
        )

    @classmethod
    def from_env(cls) -> LargeValues | None:
        """The store :data:`ENV_VALUE_STORE` names (threshold from :data:`ENV_VALUE_THRESHOLD`), or ``None``.

        Raises:
            ValueError: a value of no known form.
        """
        url = os.environ.get(ENV_VALUE_STORE, "").strip()
        if not url:
            return None
        raw = os.environ.get(ENV_VALUE_THRESHOLD, "").strip()
        try:
            threshold = int(raw) if raw else None
        except ValueError:
            raise ValueError(f"{ENV_VALUE_THRESHOLD}={raw!r} must be a whole number of bytes") from None
        return cls.from_url(url, threshold=threshold)
