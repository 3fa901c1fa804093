"""A codec server: lets the Temporal Web UI and CLI show encrypted payloads to someone holding the keys.

    python -m temporal_workflows codec-server --port 8081

It speaks Temporal's codec server protocol: ``POST /decode`` and ``POST
/encode`` (also under a namespace segment, ``/{namespace}/decode``), each with
a JSON body ``{"payloads": [...]}`` in proto3 JSON form, answered in the same
form. The Web UI calls it from the browser, so it answers CORS preflights for
the origins it is given. Standard library only: it is a debugging aid for
people who already hold the keys, not a service to expose; it binds to
loopback by default and anyone who can reach it can decrypt.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from ._codec import EncryptionCodec, EncryptionError

__all__ = ["DEFAULT_CODEC_ORIGINS", "make_codec_server"]

DEFAULT_CODEC_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
"""The dev server's Web UI, under both names a browser may use for it."""

_MAX_BODY = 64 * 1024 * 1024
_log = logging.getLogger(__name__)


def make_codec_server(
    codec: EncryptionCodec, host: str = "127.0.0.1", port: int = 8081, origins: Sequence[str] = DEFAULT_CODEC_ORIGINS
) -> ThreadingHTTPServer:
    """A server (not yet serving: call ``serve_forever``) decoding and encoding with ``codec``.

    Args:
        origins: Web UI origins allowed to call it from a browser (``*``: any).
    """
    allowed = frozenset(origins)

    class Handler(BaseHTTPRequestHandler):
        server_version = "temporal-workflows-codec"

        def log_message(self, format: str, *args: Any) -> None:
            _log.info("%s " + format, self.address_string(), *args)

        def _cors(self) -> None:
            origin = self.headers.get("Origin")
            if origin and ("*" in allowed or origin in allowed):
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Access-Control-Allow-Credentials", "true")
                self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                self.send_header("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
                self.send_header("Vary", "Origin")

        def _reply(self, status: HTTPStatus, body: bytes = b"", content_type: str = "text/plain") -> None:
            self.send_response(status)
            self._cors()
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _operation(self) -> str | None:
            path = self.path.split("?", 1)[0].rstrip("/")
            op = path.rsplit("/", 1)[-1]
            # "/decode" or "/<namespace>/decode"
            return op if op in ("encode", "decode") and path.count("/") <= 2 else None

        def do_OPTIONS(self) -> None:
            self._reply(HTTPStatus.OK if self._operation() else HTTPStatus.NOT_FOUND)

        def do_GET(self) -> None:
            self._reply(HTTPStatus.METHOD_NOT_ALLOWED if self._operation() else HTTPStatus.NOT_FOUND)

        def do_POST(self) -> None:
            op = self._operation()
            if op is None:
                self._reply(HTTPStatus.NOT_FOUND)
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
                return
            try:
                payloads = json_format.Parse(self.rfile.read(length) or b"{}", Payloads())
                convert = codec.encode_payload if op == "encode" else codec.decode_payload
                out = Payloads(payloads=[convert(p) for p in payloads.payloads])
            except (json_format.ParseError, json.JSONDecodeError, UnicodeDecodeError) as e:
                self._reply(HTTPStatus.BAD_REQUEST, f"not a payloads JSON body: {e}".encode())
                return
            except EncryptionError as e:
                self._reply(HTTPStatus.BAD_REQUEST, str(e).encode())
                return
            body = json.dumps({"payloads": [json_format.MessageToDict(p) for p in out.payloads]})
            self._reply(HTTPStatus.OK, body.encode(), "application/json")

    return ThreadingHTTPServer((host, port), Handler)
