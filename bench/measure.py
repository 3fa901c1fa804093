"""Measurement helpers: history size, CPU of this process and of the dev server, medians and ratios.

History events and bytes are read from the fetched history (``len(events)``
and the protobuf size of the ``History`` message), exactly what the server
stores and what a worker downloads to replay the run. Server CPU comes from
``/proc`` for the dev server process tree this benchmark started, so it counts
only the server's own work.
"""

from __future__ import annotations

import collections
import os
import statistics
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory

__all__ = [
    "Sample",
    "Timer",
    "activity_breakdown",
    "bytes_by_event_type",
    "history_bytes",
    "median",
    "percentile",
    "ratio",
    "server_cpu_seconds",
    "timed",
]


def history_bytes(history: WorkflowHistory) -> int:
    """Serialized size of the whole history, as the server stores and sends it."""
    return History(events=history.events).ByteSize()


def bytes_by_event_type(history: WorkflowHistory) -> dict[str, tuple[int, int]]:
    """``{event attributes name: (count, bytes)}``, largest first: where a history's bytes go."""
    count: collections.Counter[str] = collections.Counter()
    size: collections.Counter[str] = collections.Counter()
    for e in history.events:
        kind = (e.WhichOneof("attributes") or "unknown").removesuffix("_event_attributes")
        count[kind] += 1
        size[kind] += e.ByteSize()
    return {k: (count[k], size[k]) for k, _ in size.most_common()}


def _descendants(root: int) -> list[int]:
    """Pids of every process below ``root`` (the dev server and its helpers), read from /proc."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        children[ppid].append(int(entry))
    out: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        out.extend(children.get(pid, ()))
        todo.extend(children.get(pid, ()))
    return out


def server_cpu_seconds() -> float:
    """CPU seconds used so far by this process's child processes (the dev server), or 0 off Linux."""
    if not os.path.isdir("/proc"):
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


@dataclass
class Timer:
    """Wall time, this process's CPU (worker and client) and the dev server's CPU over a block."""

    wall: float = 0.0
    cpu: float = 0.0
    server_cpu: float = 0.0


@contextmanager
def timed() -> Iterator[Timer]:
    t = Timer()
    w, c, s = time.perf_counter(), time.process_time(), server_cpu_seconds()
    try:
        yield t
    finally:
        t.wall = time.perf_counter() - w
        t.cpu = time.process_time() - c
        t.server_cpu = server_cpu_seconds() - s


@dataclass
class Sample:
    """Repeated measurements of one variant of one shape; reported as medians."""

    values: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))

    def add(self, **metrics: float) -> None:
        for k, v in metrics.items():
            self.values[k].append(v)

    def median(self, key: str) -> float:
        return median(self.values[key])


def median(values: Iterable[float]) -> float:
    vals = list(values)
    return statistics.median(vals) if vals else float("nan")


def percentile(values: Iterable[float], p: int) -> float:
    """The ``p``-th percentile (1-99) by linear interpolation between closest ranks; NaN for no values.

    ``statistics.quantiles(method="inclusive")``: the same as NumPy's default
    and Excel's ``PERCENTILE.INC``; the 50th is the median, and a percentile
    never lies outside the values measured.
    """
    if not 1 <= p <= 99:
        raise ValueError(f"percentile must be 1-99, not {p}")
    vals = list(values)
    if len(vals) < 2:  # quantiles() needs two points before Python 3.13
        return vals[0] if vals else float("nan")
    return statistics.quantiles(vals, n=100, method="inclusive")[p - 1]


def ratio(ours: float, theirs: float) -> float:
    """``ours / theirs``, rounded for reading; NaN when there is nothing to divide by."""
    return round(ours / theirs, 3) if theirs else float("nan")


def activity_breakdown(history: WorkflowHistory) -> dict[str, int]:
    """Bytes of a history's activity events split by what they carry, summed over the run.

    ``input`` and ``result`` are the activity payloads (the data each side
    chose to send), ``summary`` the Web UI summary (user metadata), ``header``
    the propagated trace context; ``rest`` is Temporal's own bookkeeping
    (ids, types, timeouts, retry policy, workflow tasks).
    """
    out = {"input": 0, "result": 0, "summary": 0, "header": 0, "marker": 0, "rest": 0}
    for e in history.events:
        kind = e.WhichOneof("attributes")
        total = e.ByteSize()
        if kind == "activity_task_scheduled_event_attributes":
            a = e.activity_task_scheduled_event_attributes
            out["input"] += a.input.ByteSize()
            out["header"] += a.header.ByteSize()
            out["summary"] += e.user_metadata.ByteSize()
            total -= a.input.ByteSize() + a.header.ByteSize() + e.user_metadata.ByteSize()
        elif kind == "activity_task_completed_event_attributes":
            r = e.activity_task_completed_event_attributes.result
            out["result"] += r.ByteSize()
            total -= r.ByteSize()
        elif kind == "marker_recorded_event_attributes":
            out["marker"] += total
            total = 0
        out["rest"] += total
    return out
