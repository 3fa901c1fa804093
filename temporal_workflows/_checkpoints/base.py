"""The contract of a checkpoint store (and of the cipher a store may encrypt with), with the stores' shared parts.

The checkpoint itself (``WorkflowCheckpoint``, made by ``checkpoint_of``) is
the engine's: ``_engine/checkpoint.py``; it is imported from there and named
here too, where the stores and their users have always found it. The file and
SQLite stores take an optional :class:`CheckpointCipher` that encrypts what
they write (a ``KeyRing`` of ``temporal_workflows.temporal`` is one).

This module does no I/O: the stores live beside it (``memory.py``,
``file.py``, ``sqlite.py``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from temporal_workflows._engine.checkpoint import (
    CheckpointId,
    WorkflowCheckpoint,
    check_signature,
    checkpoint_of,
    iso_timestamp,
)
from temporal_workflows._engine.reporting import request_event
from temporal_workflows._errors import CheckpointStorageError

__all__ = [
    "CheckpointCipher",
    "CheckpointId",
    "CheckpointStorage",
    "WorkflowCheckpoint",
    "check_signature",
    "checkpoint_of",
    "iso_timestamp",
    "request_event",
]


@runtime_checkable
class CheckpointCipher(Protocol):
    """Encrypts blobs a checkpoint store writes, and decrypts them when it reads.

    ``encrypt`` returns a self-describing blob that must not start with ``{``
    (stores tell encrypted from plain JSON by it, so stores written before
    encryption was turned on still read). ``associated_data`` is where the
    blob is stored (checkpoint id, state key): a blob moved elsewhere must
    fail to decrypt.
    """

    def encrypt(self, data: bytes, associated_data: bytes = b"") -> bytes: ...

    def decrypt(self, data: bytes, associated_data: bytes = b"") -> bytes: ...


@runtime_checkable
class CheckpointStorage(Protocol):
    """Where checkpoints are kept. Every method is async so stores may do I/O.

    ``save`` must raise on failure: a checkpoint the caller believes exists
    but does not is worse than a failed request.
    """

    async def save(self, checkpoint: WorkflowCheckpoint) -> CheckpointId: ...

    async def load(self, checkpoint_id: CheckpointId) -> WorkflowCheckpoint: ...

    async def list_checkpoints(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> list[WorkflowCheckpoint]: ...

    async def list_checkpoint_ids(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> list[CheckpointId]: ...

    async def get_latest(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> WorkflowCheckpoint | None: ...

    async def delete(self, checkpoint_id: CheckpointId) -> bool: ...


def _unseal(cipher: CheckpointCipher | None, data: bytes, associated_data: bytes, where: str) -> bytes:
    """Plain JSON as it is; an encrypted blob decrypted (or a clear error without a cipher)."""
    if data[:1] == b"{":
        return data
    if cipher is None:
        raise CheckpointStorageError(
            f"{where} is encrypted and this store has no cipher: pass cipher=KeyRing.from_env() (or the plugin's)"
        )
    return cipher.decrypt(data, associated_data)


def _matches(cp: WorkflowCheckpoint, workflow_name: str | None, run_id: str | None) -> bool:
    return cp.workflow_name == workflow_name and (run_id is None or cp.run_id == run_id)


def _order(cps: list[WorkflowCheckpoint]) -> list[WorkflowCheckpoint]:
    return sorted(cps, key=lambda c: (c.created_at, c.superstep))


class _DerivedQueries:
    """``list_checkpoint_ids`` and ``get_latest``, derived from a store's ``list_checkpoints``."""

    async def list_checkpoints(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> list[WorkflowCheckpoint]:
        raise NotImplementedError

    async def list_checkpoint_ids(self, *, workflow_name: str | None, run_id: str | None = None) -> list[CheckpointId]:
        return [c.checkpoint_id for c in await self.list_checkpoints(workflow_name=workflow_name, run_id=run_id)]

    async def get_latest(self, *, workflow_name: str | None, run_id: str | None = None) -> WorkflowCheckpoint | None:
        cps = await self.list_checkpoints(workflow_name=workflow_name, run_id=run_id)
        return cps[-1] if cps else None
