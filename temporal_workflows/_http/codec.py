"""Temporal's codec server protocol as Starlette routes: ``POST /decode`` and ``/encode``, with or without namespace.

The Temporal Web UI (and ``temporal --codec-endpoint``) posts ``{"payloads":
[...]}`` in proto3 JSON and gets the same shape back, decrypted (or, if
allowed, encrypted). Host, origin and token are checked before a route runs
(:mod:`.gate`); here: encoding off unless allowed (403), and the body read by
:func:`.body.read_body` (``Content-Length`` only: chunked 411, malformed 400,
too large 413; by the request's deadline: 408).
"""

from __future__ import annotations

import json
import re
from typing import Protocol

from google.protobuf import json_format
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads

from temporal_workflows._errors import WorkflowError
from temporal_workflows._http.body import BodyRefused, read_body
from temporal_workflows._http.server import Limits

__all__ = ["PayloadCipher", "codec_routes", "is_codec_path"]


class PayloadCipher(Protocol):
    """What the routes convert payloads with (``temporal/_codec.EncryptionCodec``; this room imports no host):
    one payload in, one out, raising a :class:`WorkflowError` (the codec's ``EncryptionError``) for a payload
    or key it refuses, which the client gets as a 400 in the codec's words."""

    def encode_payload(self, payload: Payload) -> Payload: ...

    def decode_payload(self, payload: Payload) -> Payload: ...


_CODEC_PATH = re.compile(r"^(?:/[^/]+)?/(?:decode|encode)/?$")


def is_codec_path(path: str) -> bool:
    """``/decode``, ``/encode``, or either under one namespace segment (``/default/decode``)."""
    return bool(_CODEC_PATH.match(path)) and not path.startswith(("/api/", "/static/"))


def codec_routes(codec: PayloadCipher, limits: Limits, *, allow_encode: bool) -> list[Route]:
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
        except WorkflowError as e:  # the codec's EncryptionError: a key or ciphertext it refuses
            return PlainTextResponse(str(e), 400)
        return JSONResponse({"payloads": [json_format.MessageToDict(p) for p in out.payloads]})

    methods = ["POST", "OPTIONS", "GET"]
    return [
        Route(path, convert, methods=methods)
        for path in ("/decode", "/encode", "/{namespace:str}/decode", "/{namespace:str}/encode")
    ]
