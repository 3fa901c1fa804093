"""Reading a request's body as every endpoint here does: by ``Content-Length`` only, bounded, by a deadline.

The console's JSON routes, the codec endpoints and the AG-UI and DevUI
endpoints all read their bodies through :func:`read_body` (and a JSON object
through :func:`read_json_object`), so a body is refused the same way (and in
the same words) wherever it is sent.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from temporal_workflows._http.server import DEADLINE_KEY, Limits

__all__ = ["MAX_JSON_DEPTH", "BodyRefused", "read_body", "read_json_object"]

MAX_JSON_DEPTH = 100
"""Nesting a JSON body may have: deeper is refused (400) before anything reads it further."""

_CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")


class BodyRefused(Exception):
    """The body cannot be read; ``response`` says why (and closes the connection: its rest is unread)."""

    def __init__(self, response: Response) -> None:
        response.headers["Connection"] = "close"
        self.response = response


async def read_body(request: Request, limits: Limits) -> bytes:
    """The request's body, read by its deadline.

    Raises:
        BodyRefused: chunked (411), a malformed ``Content-Length`` (400), too large (413), too slow (408).
    """
    if request.headers.get("transfer-encoding") is not None:
        raise BodyRefused(PlainTextResponse("send the body with a Content-Length, not chunked", 411))
    values = {v.strip() for v in request.headers.getlist("content-length")}
    if len(values) > 1 or (values and not _CONTENT_LENGTH.fullmatch(next(iter(values)))):
        raise BodyRefused(PlainTextResponse("Content-Length must be one non-negative integer", 400))
    length = int(next(iter(values))) if values else 0
    if length > limits.max_body:
        raise BodyRefused(PlainTextResponse(f"the body is over {limits.max_body} bytes", 413))
    loop = asyncio.get_running_loop()
    deadline = request.scope.get("extensions", {}).get(DEADLINE_KEY) or loop.time() + limits.request_timeout
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in request.stream():
                chunks.append(chunk)
    except TimeoutError:
        raise BodyRefused(PlainTextResponse("the request body did not arrive in time", 408)) from None
    return b"".join(chunks)


async def read_json_object(request: Request, limits: Limits, *, empty_is_object: bool = True) -> dict[str, Any]:
    """The request's body as a JSON object, read by :func:`read_body`.

    Args:
        empty_is_object: An empty body reads as ``{}`` (the console's and DevUI's routes with nothing to
            say); ``False``: it is refused as not JSON (AG-UI, whose body is a ``RunAgentInput``).

    Raises:
        BodyRefused: as :func:`read_body`, or 400: not JSON, not an object, nested deeper than
            :data:`MAX_JSON_DEPTH` (a deep body would otherwise exhaust the parser's recursion or the
            validators' after it).
    """
    raw = await read_body(request, limits)
    too_deep = f"the body is nested too deeply (at most {MAX_JSON_DEPTH} levels of JSON)"
    try:
        value = json.loads(raw or (b"{}" if empty_is_object else b""))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BodyRefused(PlainTextResponse(f"the body is not JSON: {e}", 400)) from None
    except RecursionError:
        raise BodyRefused(PlainTextResponse(too_deep, 400)) from None
    if not isinstance(value, dict):
        raise BodyRefused(PlainTextResponse("the body is a JSON object", 400))
    if not _nests_within(value, MAX_JSON_DEPTH):
        raise BodyRefused(PlainTextResponse(too_deep, 400))
    return value


def _nests_within(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests no deeper than ``limit``, checked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True
