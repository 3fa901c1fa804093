"""SQLite checkpoint storage: the embedded default, with writes that grow with the change.

A run checkpointed every superstep would write its whole state each time if
checkpoints were stored whole, so a 1 MB state checkpointed 100 times would
write 100 MB. Here a checkpoint whose parent this process saved or loaded is
stored as a delta: the state keys whose value changed since the parent (and
the keys removed), plus a link to the parent. Every ``full_every``-th
checkpoint in a chain is stored whole, so loading walks at most that many rows.
Only the state is delta-encoded; messages, requests and outputs are small and
stored whole.

With a cipher, the body (messages, requests, outputs, metadata) and every state
value are stored as encrypted blobs, each bound to its checkpoint id (and state
key); ids, graph names, supersteps, timestamps and state key names stay readable
so lookups and deltas work. Rows written without a cipher still load.

The store notices when its file is deleted or replaced under it (``rm``, a
restore that swaps the file): SQLite would go on writing to the unlinked file
through its open descriptor, and every save would "succeed" into a file that
no longer has a name, lost at the next restart. So each operation first checks
that the file (and its write-ahead log) at ``path`` is still the one the
connection has open, and a save checks again after it commits: if not, the
save, load, listing or delete raises :class:`CheckpointStorageError` naming the
path. Reads fail too, since what they would return is no longer on disk.
``close()`` (or a restart) opens whatever is at the path then.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from temporal_workflows._checkpoints.base import CheckpointCipher, CheckpointId, WorkflowCheckpoint, _DerivedQueries
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import CheckpointNotFoundError, CheckpointStorageError

__all__ = ["DEFAULT_CHECKPOINT_DB", "SqliteCheckpointStorage"]

DEFAULT_CHECKPOINT_DB = ".temporal/checkpoints.sqlite"
"""Where the default store lives unless ``TEMPORAL_WORKFLOWS_CHECKPOINT_DB`` says otherwise."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    checkpoint_id TEXT PRIMARY KEY,
    workflow_name TEXT,
    run_id TEXT NOT NULL,
    superstep INTEGER NOT NULL,
    timestamp TEXT NOT NULL,
    base_id TEXT,
    depth INTEGER NOT NULL,
    body TEXT NOT NULL  -- JSON, or an encrypted BLOB
);
CREATE INDEX IF NOT EXISTS checkpoints_by_run ON checkpoints (workflow_name, run_id, timestamp);
CREATE TABLE IF NOT EXISTS checkpoint_state (
    checkpoint_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT,  -- JSON, an encrypted BLOB, or NULL: removed since the base
    PRIMARY KEY (checkpoint_id, key)
);
"""


_Row = tuple[str, str, str | None]
_FileId = tuple[int, int]


def _file_id(path: Path) -> _FileId | None:
    """(device, inode) of the file at ``path``; ``None`` if there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _dump_env(env: Envelope) -> str:
    return json.dumps(env.to_json(), separators=(",", ":"))


def _where(checkpoint_id: str, key: str | None) -> bytes:
    """What an encrypted blob is bound to: its checkpoint, and for a state value its key."""
    return checkpoint_id.encode() if key is None else f"{checkpoint_id}\0{key}".encode()


def _load_env(text: str) -> Envelope:
    return Envelope.from_json(json.loads(text))


class SqliteCheckpointStorage(_DerivedQueries):
    """Checkpoints in one SQLite file (WAL mode), safe for one process's concurrent runs.

    Args:
        path: The database file; created with its directory. Defaults to
            ``$TEMPORAL_WORKFLOWS_CHECKPOINT_DB`` or ``.temporal/checkpoints.sqlite``.
        full_every: Store every N-th checkpoint of a chain whole (bounds load cost).
        cache_size: Checkpoints kept in memory as delta bases (one per active run is enough).
        cipher: Encrypts bodies and state values at rest (see the module docstring).

    A worker fleet on several hosts needs a store they share: implement
    :class:`~temporal_workflows.CheckpointStorage` over your database, or use
    :class:`~temporal_workflows.HistoryCheckpointStorage`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        full_every: int = 32,
        cache_size: int = 256,
        cipher: CheckpointCipher | None = None,
    ) -> None:
        self.path = Path(path or os.environ.get("TEMPORAL_WORKFLOWS_CHECKPOINT_DB") or DEFAULT_CHECKPOINT_DB)
        self.full_every = max(1, full_every)
        self._cache_size = cache_size
        self.cipher = cipher
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        # The database file and write-ahead log the connection has open (checked before every operation).
        self._file: _FileId | None = None
        self._wal: _FileId | None = None
        # checkpoint id -> (checkpoint, depth): bases for deltas, and hot loads.
        self._recent: OrderedDict[str, tuple[WorkflowCheckpoint, int]] = OrderedDict()

    @property
    def _wal_path(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    def _db(self, doing: str) -> sqlite3.Connection:
        """The connection (opened on first use), once the file at ``path`` is checked to be the one it has open.

        Args:
            doing: What the caller is doing, for the error (``"could not save checkpoint 'x'"``).

        Raises:
            CheckpointStorageError: The file was removed or replaced since it was opened.
        """
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._file = _file_id(self.path)
            self._wal = _file_id(self._wal_path)
        self._check_file(doing)
        return self._conn

    def _check_file(self, doing: str) -> None:
        """Raise if the database (or its write-ahead log) at ``path`` is not the file the connection has open."""
        if self._file is None:  # no file to watch (":memory:")
            return
        now = _file_id(self.path)
        if now is None or now != self._file:
            what = f"the checkpoint database {self.path}"
        else:
            wal = _file_id(self._wal_path)
            if self._wal is None:
                self._wal = wal  # not created when the connection opened: it is the one created since
                return
            if wal == self._wal:
                return
            now, what = wal, f"the write-ahead log of the checkpoint database {self.path} ({self._wal_path.name})"
        how = "was removed" if now is None else "was replaced by another file"
        raise CheckpointStorageError(
            f"{doing}: {what} {how} while this process had it open, so what the store writes no longer reaches "
            "the file at that path (checkpoints saved since then are not in it). Restore the file, or call close() "
            "on the store (or restart the worker) to open what is at the path now"
        )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._file = self._wal = None

    def _remember(self, cp: WorkflowCheckpoint, depth: int) -> None:
        self._recent[cp.checkpoint_id] = (cp, depth)
        self._recent.move_to_end(cp.checkpoint_id)
        while len(self._recent) > self._cache_size:
            self._recent.popitem(last=False)

    # -- encryption ------------------------------------------------------------

    def _seal(self, text: str, checkpoint_id: str, key: str | None = None) -> str | bytes:
        if self.cipher is None:
            return text
        return self.cipher.encrypt(text.encode(), _where(checkpoint_id, key))

    def _unseal(self, value: str | bytes, checkpoint_id: str, key: str | None = None) -> str:
        if isinstance(value, str):
            return value
        if self.cipher is None:
            raise CheckpointStorageError(
                f"checkpoint {checkpoint_id!r} in {self.path} is encrypted and this store has no cipher: "
                "pass cipher=KeyRing.from_env() (or the plugin's)"
            )
        return self.cipher.decrypt(bytes(value), _where(checkpoint_id, key)).decode()

    def _sealed_rows(self, rows: list[_Row]) -> list[tuple[str, str, str | bytes | None]]:
        return [(cid, k, None if v is None else self._seal(v, cid, k)) for cid, k, v in rows]

    # -- save ------------------------------------------------------------------

    def _rows(self, cp: WorkflowCheckpoint, db: sqlite3.Connection) -> tuple[list[_Row], str | None, int]:
        """State rows to write, the delta base (None: whole) and the chain depth."""
        base = self._recent.get(cp.previous_checkpoint_id or "")
        usable = (
            base is not None
            and base[0].checkpoint_id != cp.checkpoint_id
            and base[1] + 1 < self.full_every
            and base[0].run_id == cp.run_id
            # Another store on this file may have deleted it since we cached it.
            and db.execute("SELECT 1 FROM checkpoints WHERE checkpoint_id = ?", (base[0].checkpoint_id,)).fetchone()
        )
        if not usable or base is None:
            return [(cp.checkpoint_id, k, _dump_env(v)) for k, v in cp.state.items()], None, 0
        parent = base[0]
        rows: list[_Row] = []
        for k, v in cp.state.items():
            old = parent.state.get(k)
            if old is v:  # the engine shares unchanged values: no need to look inside
                continue
            text = _dump_env(v)
            # Compared as JSON: 1, 1.0 and True are equal in Python but not as values.
            if old is None or _dump_env(old) != text:
                rows.append((cp.checkpoint_id, k, text))
        rows += [(cp.checkpoint_id, k, None) for k in parent.state if k not in cp.state]
        return rows, parent.checkpoint_id, base[1] + 1

    def _make_whole(self, db: sqlite3.Connection, checkpoint_id: str) -> None:
        """Rewrite the checkpoints stored as deltas of ``checkpoint_id`` whole (before it changes or goes)."""
        children = db.execute("SELECT checkpoint_id FROM checkpoints WHERE base_id = ?", (checkpoint_id,)).fetchall()
        for (child,) in children:
            _, _, state = self._state_of(db, child)
            db.execute("DELETE FROM checkpoint_state WHERE checkpoint_id = ?", (child,))
            db.executemany(
                "INSERT INTO checkpoint_state VALUES (?, ?, ?)",
                self._sealed_rows([(child, k, _dump_env(v)) for k, v in state.items()]),
            )
            db.execute("UPDATE checkpoints SET base_id = NULL, depth = 0 WHERE checkpoint_id = ?", (child,))
            self._recent.pop(child, None)

    def _write(self, cp: WorkflowCheckpoint) -> None:
        doing = f"could not save checkpoint {cp.checkpoint_id!r}"
        with self._lock:
            db = self._db(doing)
            db.execute("BEGIN IMMEDIATE")
            try:
                rows, base_id, depth = self._rows(cp, db)
                # Saving over an existing id must not change the checkpoints built on it.
                self._make_whole(db, cp.checkpoint_id)
                db.execute("DELETE FROM checkpoint_state WHERE checkpoint_id = ?", (cp.checkpoint_id,))
                db.execute(
                    "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        cp.checkpoint_id,
                        cp.workflow_name,
                        cp.run_id,
                        cp.superstep,
                        cp.timestamp,
                        base_id,
                        depth,
                        self._seal(cp.model_dump_json(exclude={"state"}), cp.checkpoint_id),
                    ),
                )
                db.executemany("INSERT INTO checkpoint_state VALUES (?, ?, ?)", self._sealed_rows(rows))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            # Removed while it was written: the commit went to the unlinked file.
            self._check_file(doing)
            self._remember(cp, depth)

    async def save(self, checkpoint: WorkflowCheckpoint) -> CheckpointId:
        try:
            await asyncio.to_thread(self._write, checkpoint)
        except (sqlite3.Error, OSError) as e:
            raise CheckpointStorageError(
                f"could not save checkpoint {checkpoint.checkpoint_id!r} to {self.path}: {e}"
            ) from e
        return checkpoint.checkpoint_id

    # -- load ------------------------------------------------------------------

    def _state_of(self, db: sqlite3.Connection, checkpoint_id: str) -> tuple[str, int, dict[str, Envelope]]:
        """Body, depth and full state of a stored checkpoint (caller holds the lock)."""
        row = db.execute(
            "SELECT body, base_id, depth FROM checkpoints WHERE checkpoint_id = ?", (checkpoint_id,)
        ).fetchone()
        if row is None:
            raise CheckpointNotFoundError(checkpoint_id)
        body, base_id, depth = row
        # Walk to the full checkpoint at the root of the chain, then apply deltas forwards.
        chain = [checkpoint_id]
        while base_id is not None:
            if base_id in chain:
                raise CheckpointStorageError(f"checkpoint {checkpoint_id!r} has a cycle in its delta chain")
            chain.append(base_id)
            parent = db.execute("SELECT base_id FROM checkpoints WHERE checkpoint_id = ?", (base_id,)).fetchone()
            if parent is None:
                raise CheckpointStorageError(
                    f"checkpoint {checkpoint_id!r} is stored as a delta of {base_id!r}, which is missing"
                )
            base_id = parent[0]
        state: dict[str, Envelope] = {}
        for cid in reversed(chain):
            for key, value in db.execute("SELECT key, value FROM checkpoint_state WHERE checkpoint_id = ?", (cid,)):
                if value is None:
                    state.pop(key, None)
                else:
                    state[key] = _load_env(self._unseal(value, cid, key))
        return self._unseal(body, checkpoint_id), depth, state

    def _read(self, checkpoint_id: str) -> WorkflowCheckpoint:
        with self._lock:
            db = self._db(f"could not load checkpoint {checkpoint_id!r}")  # checked even when it is cached
            hit = self._recent.get(checkpoint_id)
            if hit is not None:
                return hit[0]
            body, depth, state = self._state_of(db, checkpoint_id)
            data: dict[str, Any] = json.loads(body)
            data["state"] = {k: asdict(v) for k, v in state.items()}
            cp = WorkflowCheckpoint.model_validate(data)
            self._remember(cp, depth)
            return cp

    async def load(self, checkpoint_id: CheckpointId) -> WorkflowCheckpoint:
        try:
            return await asyncio.to_thread(self._read, checkpoint_id)
        except sqlite3.Error as e:
            raise CheckpointStorageError(f"could not load checkpoint {checkpoint_id!r} from {self.path}: {e}") from e

    def _ids(self, workflow_name: str | None, run_id: str | None) -> list[str]:
        with self._lock:
            sql = "SELECT checkpoint_id FROM checkpoints WHERE workflow_name IS ?"
            args: list[Any] = [workflow_name]
            if run_id is not None:
                sql += " AND run_id = ?"
                args.append(run_id)
            sql += " ORDER BY timestamp, superstep, rowid"
            return [r[0] for r in self._db("could not list checkpoints").execute(sql, args)]

    async def list_checkpoint_ids(self, *, workflow_name: str | None, run_id: str | None = None) -> list[CheckpointId]:
        return await asyncio.to_thread(self._ids, workflow_name, run_id)

    async def list_checkpoints(
        self, *, workflow_name: str | None, run_id: str | None = None
    ) -> list[WorkflowCheckpoint]:
        return [
            await self.load(cid) for cid in await self.list_checkpoint_ids(workflow_name=workflow_name, run_id=run_id)
        ]

    async def get_latest(self, *, workflow_name: str | None, run_id: str | None = None) -> WorkflowCheckpoint | None:
        ids = await self.list_checkpoint_ids(workflow_name=workflow_name, run_id=run_id)
        return await self.load(ids[-1]) if ids else None

    def _delete(self, checkpoint_id: str) -> bool:
        with self._lock:
            db = self._db(f"could not delete checkpoint {checkpoint_id!r}")
            db.execute("BEGIN IMMEDIATE")
            try:
                # Later checkpoints stored as deltas of this one are first rewritten whole.
                self._make_whole(db, checkpoint_id)
                cur = db.execute("DELETE FROM checkpoints WHERE checkpoint_id = ?", (checkpoint_id,))
                db.execute("DELETE FROM checkpoint_state WHERE checkpoint_id = ?", (checkpoint_id,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self._recent.pop(checkpoint_id, None)
            return cur.rowcount > 0

    async def delete(self, checkpoint_id: CheckpointId) -> bool:
        return await asyncio.to_thread(self._delete, checkpoint_id)
