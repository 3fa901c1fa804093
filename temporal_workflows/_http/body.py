"""Reading a request's body as every endpoint here does: by ``Content-Length`` only, bounded, by a deadline.

The console's JSON routes, the codec endpoints and the AG-UI and DevUI
endpoints all read their bodies through :func:`read_body`, so a body is refused
the same way (and in the same words) wherever it is sent.
"""

from __future__ import annotations

import asyncio
import re

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from temporal_workflows._http.server import DEADLINE_KEY, Limits

__all__ = ["BodyRefused", "read_body"]

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
