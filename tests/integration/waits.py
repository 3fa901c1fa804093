"""Waiting on a condition in an integration test: poll it, fail naming it after a generous deadline.

A wait polls what the test can see (a file, a query's answer, an event log); the
short sleep between polls is the poll interval, never the synchronisation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["DEADLINE", "until", "until_async"]

DEADLINE = 120.0
"""Longest any awaited condition may take on a slow, shared machine (a broken guarantee fails, never hangs)."""

T = TypeVar("T")


async def until(what: str, probe: Callable[[], T], timeout: float = DEADLINE) -> T:
    """Poll ``probe`` until it returns something truthy (returned); fail naming ``what`` after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"gave up after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)  # poll interval, not synchronisation


async def until_async(what: str, probe: Callable[[], Awaitable[T]], timeout: float = DEADLINE) -> T:
    """:func:`until` for a probe that must await (a describe call, a query)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"gave up after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)  # poll interval, not synchronisation
