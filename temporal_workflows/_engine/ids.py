"""Ids and type names that fit Temporal's limit by construction: readable where they fit, hashed where not.

Temporal refuses a workflow id, activity id, workflow type or activity type
longer than ``limit.maxIDLength`` (1,000 bytes of UTF-8 by default). Some of
ours are built from parts: a child run's id is its parent's id, the
executor's id and the superstep (``<parent>/<executor>/<superstep>.<index>``),
so five levels of sub-workflows under 250-character executor ids pass the
limit; an unnamed child graph is named after its place (``<parent>.<executor>``),
and its steps' activity type adds the executor's id again. Left as they are,
the server refuses the command that names them (``BadStartChildExecutionAttributes
... Length=1002 Limit=1000``) and the parent's workflow task fails for ever.

:func:`bounded_id` leaves every id that fits as it is, byte for byte (so a
recorded history replays, and ids users already know do not move), and turns
one that does not into its head, a digest of the whole id, and its tail: the
same id in every process and on every replay (a pure function of the
readable id), distinct for distinct ids, and still readable at both ends
(the root run, and the child's own executor and superstep).
"""

from __future__ import annotations

import hashlib

__all__ = ["MAX_ID_BYTES", "bounded_id"]

MAX_ID_BYTES = 1000
"""Temporal's default ``limit.maxIDLength``: ids and type names, in UTF-8 bytes."""

_DIGEST_CHARS = 32
"""Hex characters of the SHA-256 digest that stands for what a bounded id leaves out (128 bits)."""


def bounded_id(readable: str, limit: int = MAX_ID_BYTES) -> str:
    """``readable`` if it fits in ``limit`` UTF-8 bytes, else ``<head>~<digest>~<tail>`` within ``limit``."""
    raw = readable.encode()
    if len(raw) <= limit:
        return readable
    digest = hashlib.sha256(raw).hexdigest()[:_DIGEST_CHARS]
    room = limit - _DIGEST_CHARS - 2
    tail_bytes = room // 3
    # Cut on bytes; a character split in two is dropped (the result is then shorter, never longer).
    head = raw[: room - tail_bytes].decode(errors="ignore")
    tail = raw[len(raw) - tail_bytes :].decode(errors="ignore")
    return f"{head}~{digest}~{tail}"
