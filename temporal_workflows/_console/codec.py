"""Temporal's codec server protocol as Starlette routes: ``POST /decode`` and ``/encode``, with or without namespace.

The Temporal Web UI (and ``temporal --codec-endpoint``) posts ``{"payloads":
[...]}`` in proto3 JSON and gets the same shape back, decrypted (or, if
allowed, encrypted). Host, origin and token are checked before a route runs
(:mod:`.app`'s gate); here: encoding off unless allowed (403), bodies by
``Content-Length`` only (chunked: 411, malformed: 400, too large: 413), read
by the request's deadline (408).
"""

from __future__ import annotations

import asyncio
import json
import re

from google.protobuf import json_format
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payloads

from temporal_workflows._console.server import DEADLINE_KEY, Limits
from temporal_workflows.temporal._codec import EncryptionCodec, EncryptionError

__all__ = ["codec_routes", "is_codec_path", "read_body"]

_CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")
_CODEC_PATH = re.compile(r"^(?:/[^/]+)?/(?:decode|encode)/?$")


def is_codec_path(path: str) -> bool:
    """``/decode``, ``/encode``, or either under one namespace segment (``/default/decode``)."""
    return bool(_CODEC_PATH.match(path)) and not path.startswith(("/api/", "/static/"))


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


def codec_routes(codec: EncryptionCodec, limits: Limits, *, allow_encode: bool) -> list[Route]:
    async def convert(request: Request) -> Response:
        op = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        if request.method == "OPTIONS":
            return Response(status_code=200)
        if request.method != "POST":
            return PlainTextResponse("POST a payloads JSON body", 405)
        if op == "encode" and not allow_encode:
            return PlainTextResponse("encoding is off on this codec server (start it with allow_encode)", 403)
        try:
            raw = await read_body(request, limits)
        except BodyRefused as e:
            return e.response
        try:
            payloads = json_format.Parse(raw or b"{}", Payloads())
            conv = codec.encode_payload if op == "encode" else codec.decode_payload
            out = Payloads(payloads=[conv(p) for p in payloads.payloads])
        except (json_format.ParseError, json.JSONDecodeError, UnicodeDecodeError) as e:
            return PlainTextResponse(f"not a payloads JSON body: {e}", 400)
        except EncryptionError as e:
            return PlainTextResponse(str(e), 400)
        return JSONResponse({"payloads": [json_format.MessageToDict(p) for p in out.payloads]})

    methods = ["POST", "OPTIONS", "GET"]
    return [
        Route(path, convert, methods=methods)
        for path in ("/decode", "/encode", "/{namespace:str}/decode", "/{namespace:str}/encode")
    ]
