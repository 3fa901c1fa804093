"""Checkpoints as one JSON file each in a directory, written atomically."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from temporal_workflows._checkpoints.base import (
    CheckpointCipher,
    CheckpointId,
    WorkflowCheckpoint,
    _DerivedQueries,
    _matches,
    _order,
    _unseal,
)
from temporal_workflows._errors import CheckpointNotFoundError, CheckpointStorageError

__all__ = ["FileCheckpointStorage"]


class FileCheckpointStorage(_DerivedQueries):
    """One JSON file per checkpoint in a directory, written atomically.

    A crash mid-write leaves either the old file or the new one, never a torn
    one: each file is written to a temporary name, fsynced and renamed.

    Args:
        directory: Created if missing (``storage_path`` is Agent Framework's
            name for it; give one of the two).
        cipher: Encrypts each file whole (bound to its checkpoint id); files
            written without one still load. Without a cipher, an encrypted file
            fails to load with an error saying so.
        allowed_checkpoint_types: Agent Framework's list of ``"module:qualname"``
            types its pickled checkpoints may unpickle, accepted so its programs
            port unchanged and kept as :attr:`allowed_checkpoint_types`. It is not
            needed here: files are JSON, and decoding builds only the classes the
            process knows (declared by the graph, registered, or encoded in this
            process; docs/values.md), with or without the list.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        storage_path: str | os.PathLike[str] | None = None,
        cipher: CheckpointCipher | None = None,
        allowed_checkpoint_types: list[str] | None = None,
    ) -> None:
        if (directory is None) == (storage_path is None):
            raise TypeError("FileCheckpointStorage takes a directory: pass directory (or storage_path), once")
        self.directory = Path(directory if directory is not None else storage_path)  # type: ignore[arg-type]
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cipher = cipher
        self.allowed_checkpoint_types: tuple[str, ...] = tuple(allowed_checkpoint_types or ())

    @property
    def storage_path(self) -> Path:
        """Agent Framework's name for :attr:`directory`."""
        return self.directory

    def _path(self, checkpoint_id: str) -> Path:
        if not checkpoint_id or "/" in checkpoint_id or "\\" in checkpoint_id or checkpoint_id.startswith("."):
            raise CheckpointNotFoundError(checkpoint_id)
        return self.directory / f"{checkpoint_id}.json"

    def _write(self, checkpoint: WorkflowCheckpoint) -> None:
        data = checkpoint.model_dump_json().encode()
        if self.cipher is not None:
            data = self.cipher.encrypt(data, checkpoint.checkpoint_id.encode())
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path(checkpoint.checkpoint_id))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def save(self, checkpoint: WorkflowCheckpoint) -> CheckpointId:
        try:
            await asyncio.to_thread(self._write, checkpoint)
        except OSError as e:
            raise CheckpointStorageError(
                f"could not save checkpoint {checkpoint.checkpoint_id!r} to {self.directory}: {e}"
            ) from e
        return checkpoint.checkpoint_id

    def _read(self, path: Path) -> WorkflowCheckpoint:
        return WorkflowCheckpoint.model_validate_json(
            _unseal(self.cipher, path.read_bytes(), path.name.removesuffix(".json").encode(), str(path))
        )

    async def load(self, checkpoint_id: CheckpointId) -> WorkflowCheckpoint:
        path = self._path(checkpoint_id)
        try:
            return await asyncio.to_thread(self._read, path)
        except FileNotFoundError:
            raise CheckpointNotFoundError(checkpoint_id) from None

    def _all(self) -> list[WorkflowCheckpoint]:
        out = []
        for p in self.directory.glob("*.json"):
            if p.name.startswith("."):
                continue
            try:
                out.append(self._read(p))
            except FileNotFoundError:  # deleted concurrently
                continue
        return out

    async def list_checkpoints(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> list[WorkflowCheckpoint]:
        cps = await asyncio.to_thread(self._all)
        return _order([c for c in cps if _matches(c, workflow_name, run_id)])

    async def delete(self, checkpoint_id: CheckpointId) -> bool:
        try:
            self._path(checkpoint_id).unlink()
            return True
        except (FileNotFoundError, CheckpointNotFoundError):
            return False
