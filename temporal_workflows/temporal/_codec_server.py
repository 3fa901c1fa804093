"""A codec server: lets the Temporal Web UI and CLI show encrypted payloads to someone holding the keys.

    python -m temporal_workflows codec-server --port 8081

It speaks Temporal's codec server protocol: ``POST /decode`` and ``POST
/encode`` (also under a namespace segment, ``/{namespace}/decode``), each with
a JSON body ``{"payloads": [...]}`` in proto3 JSON form, answered in the same
form. The Web UI calls it from the browser, so it answers CORS preflights for
the origins it is given. Standard library only: it is a debugging aid for
people who already hold the keys, not a service to expose.

What it refuses, so that reaching it from a browser or a network is not enough
to decrypt:

- **Other hosts** (DNS rebinding): a request whose ``Host`` header is not one
  of the server's own names (the address it is bound to, ``localhost``,
  ``127.0.0.1`` or ``[::1]``, each with its port) or an ``allowed_hosts``
  entry gets 403. A web page on ``evil.example`` whose name is made to resolve
  to 127.0.0.1 therefore cannot use it.
- **Other origins**: only the configured Web UI origins are echoed in CORS
  headers, with ``Access-Control-Allow-Credentials``; ``*`` allows any origin
  without credentials (``Access-Control-Allow-Origin: *``, never an echoed
  origin). A request carrying another ``Origin`` gets 403.
- **Without the token**: with a bearer token (argument, or
  ``TEMPORAL_WORKFLOWS_CODEC_TOKEN``), every request but a CORS preflight
  needs ``Authorization: Bearer <token>`` (compared in constant time), else 401.
- **Encoding**: ``/encode`` encrypts whatever it is sent, so it is off (403)
  unless ``allow_encode=True``.
- **Bad bodies**: a ``Content-Length`` that is not a non-negative integer, or
  several that differ, gets 400; a chunked body 411; a body over ``max_body``
  bytes 413; a body not received within ``timeout`` seconds 408. Every socket
  read and write times out, and at most ``max_connections`` connections are
  served at once (others get 503), so slow clients cannot hold threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from temporal_workflows.temporal._codec import EncryptionCodec, EncryptionError

__all__ = [
    "DEFAULT_CODEC_ORIGINS",
    "ENV_CODEC_TOKEN",
    "CodecServer",
    "CodecServerConfigError",
    "make_codec_server",
]

DEFAULT_CODEC_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
"""The dev server's Web UI, under both names a browser may use for it."""

ENV_CODEC_TOKEN = "TEMPORAL_WORKFLOWS_CODEC_TOKEN"
"""A bearer token every codec server request (but a CORS preflight) must carry, when set."""

DEFAULT_MAX_BODY = 32 * 1024 * 1024
"""Largest request body accepted, in bytes (Temporal payloads are at most 2 MiB each by default)."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a client may take to send its request body (and the limit on any one socket read or write)."""

DEFAULT_MAX_CONNECTIONS = 32
"""Connections served at once; more get 503."""

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_MIN_TOKEN_CHARS = 16
_TOKEN = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces: sendable in a header as it is
_CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")
_log = logging.getLogger(__name__)


class CodecServerConfigError(EncryptionError):
    """The codec server cannot start as configured (a malformed token, allowed host or origin)."""


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(host, port)`` of a ``Host`` header or an allowed-host entry (lower case, IPv6 unbracketed).

    Returns:
        ``None`` when it is not a host name, IPv4 or bracketed IPv6 address
        with an optional port.
    """
    value = value.strip().lower()
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
        port_text = rest[1:]
    else:
        host, _, port_text = value.partition(":")
        if not re.fullmatch(r"[a-z0-9_.-]+", host):
            return None
    host = host.rstrip(".")
    if not host:
        return None
    if not port_text:
        return host, None
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return host, int(port_text)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _token_from(token: str | None, environ: Mapping[str, str] | None) -> str | None:
    if token is None:
        token = (os.environ if environ is None else environ).get(ENV_CODEC_TOKEN, "")
    token = token.strip()
    if not token:
        return None
    if not _TOKEN.fullmatch(token) or len(token) < _MIN_TOKEN_CHARS:
        raise CodecServerConfigError(
            f"the codec server token must be at least {_MIN_TOKEN_CHARS} printable ASCII characters without "
            "spaces; generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token


class CodecServer(ThreadingHTTPServer):
    """What :func:`make_codec_server` returns: a threading server serving at most ``max_connections`` at once.

    Attributes:
        token_required: Whether requests need ``Authorization: Bearer <token>``.
        encode_allowed: Whether ``/encode`` is served.
    """

    token_required = False
    encode_allowed = False

    daemon_threads = True
    block_on_close = False  # closing never waits for a slow client

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, max_connections))
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def make_codec_server(
    codec: EncryptionCodec,
    host: str = "127.0.0.1",
    port: int = 8081,
    origins: Sequence[str] = DEFAULT_CODEC_ORIGINS,
    *,
    token: str | None = None,
    allow_encode: bool = False,
    allowed_hosts: Sequence[str] = (),
    max_body: int = DEFAULT_MAX_BODY,
    timeout: float = DEFAULT_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    environ: Mapping[str, str] | None = None,
) -> CodecServer:
    """A server (not yet serving: call ``serve_forever``) decoding (and, if allowed, encoding) with ``codec``.

    Args:
        origins: Web UI origins allowed to call it from a browser; ``*``:
            any origin, without credentials.
        token: A bearer token every request but a CORS preflight must carry
            (``Authorization: Bearer <token>``; at least 16 characters).
            ``None``: ``$TEMPORAL_WORKFLOWS_CODEC_TOKEN`` if set; ``""``: none.
        allow_encode: Serve ``/encode`` (encrypting whatever it is sent);
            off by default.
        allowed_hosts: Further names clients may reach it by (``Host``
            header), e.g. a reverse proxy's ``codec.example.com`` (any port)
            or ``codec.example.com:443``. Its bind address and the loopback
            names, with its port, are always allowed.
        max_body: Largest request body, in bytes.
        timeout: Seconds a client may take to send its body; also the limit
            on each socket read and write.
        max_connections: Connections served at once; more get 503.
        environ: Where to read the token from (default ``os.environ``).

    Raises:
        CodecServerConfigError: The token or an allowed host is malformed.
    """
    secret = _token_from(token, environ)
    expected = _digest(secret) if secret is not None else None
    extra_hosts: list[tuple[str, int | None]] = []
    for entry in allowed_hosts:
        parsed = _split_host(entry)
        if parsed is None:
            raise CodecServerConfigError(
                f"allowed host {entry!r} is not a host name or address (with an optional port)"
            )
        extra_hosts.append(parsed)
    exact_origins = frozenset(o.strip().rstrip("/").lower() for o in origins if o.strip() != "*")
    any_origin = any(o.strip() == "*" for o in origins)
    if any_origin and secret is None:
        _log.warning(
            "codec server: origin '*' lets every web page its users open call it; set a token (%s) or name the "
            "Web UI's origin",
            ENV_CODEC_TOKEN,
        )

    max_timeout: float = timeout
    bound: tuple[str, int] = (host, port)  # the address actually bound, set below

    class Handler(BaseHTTPRequestHandler):
        server_version = "temporal-workflows-codec"
        sys_version = ""
        timeout = max_timeout  # every socket read and write (StreamRequestHandler applies it)

        def log_message(self, format: str, *args: Any) -> None:
            _log.info("%s " + format, self.address_string(), *args)

        # -- checks --------------------------------------------------------------------------------

        def _host_allowed(self) -> bool:
            values = self.headers.get_all("Host") or []
            if len(values) != 1:
                return False
            parsed = _split_host(values[0])
            if parsed is None:
                return False
            name, given_port = parsed
            bound_host, bound_port = bound
            own_names = {*_LOOPBACK_NAMES, str(host).lower().strip("[]"), str(bound_host).lower()}
            if name in own_names and (given_port or 80) == bound_port:
                return True
            return any(name == h and (p is None or p == (given_port or 80)) for h, p in extra_hosts)

        def _origin(self) -> tuple[str | None, bool]:
            """The request's ``Origin`` and whether it may call this server."""
            origin = self.headers.get("Origin")
            if origin is None:
                return None, True
            return origin, any_origin or origin.strip().rstrip("/").lower() in exact_origins

        def _authorized(self) -> bool:
            if expected is None:
                return True
            scheme, _, given = (self.headers.get("Authorization") or "").strip().partition(" ")
            # Hashing first makes the comparison's time independent of the token's length too.
            return hmac.compare_digest(_digest(given.strip()), expected) and scheme.lower() == "bearer"

        def _body_length(self) -> int | HTTPStatus:
            if self.headers.get("Transfer-Encoding") is not None:
                return HTTPStatus.LENGTH_REQUIRED
            values = {v.strip() for v in self.headers.get_all("Content-Length") or []}
            if not values:
                return 0
            if len(values) > 1 or not _CONTENT_LENGTH.fullmatch(next(iter(values))):
                return HTTPStatus.BAD_REQUEST
            length = int(next(iter(values)))
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE if length > max_body else length

        def _read_body(self, length: int) -> bytes | None:
            """The body, or ``None`` when the client took longer than ``timeout`` or went away."""
            deadline = time.monotonic() + timeout
            chunks: list[bytes] = []
            remaining = length
            try:
                while remaining:
                    if time.monotonic() > deadline:
                        raise TimeoutError
                    chunk = self.rfile.read1(min(remaining, 64 * 1024))  # type: ignore[attr-defined]
                    if not chunk:
                        self.close_connection = True
                        return None
                    chunks.append(chunk)
                    remaining -= len(chunk)
            except TimeoutError:
                self._reply(HTTPStatus.REQUEST_TIMEOUT, b"the request body did not arrive in time")
                return None
            return b"".join(chunks)

        # -- answers -------------------------------------------------------------------------------

        def _cors(self) -> None:
            origin, allowed = self._origin()
            if origin is None or not allowed:
                return
            if origin.strip().rstrip("/").lower() in exact_origins:
                self.send_header("Access-Control-Allow-Origin", origin.strip())
                self.send_header("Access-Control-Allow-Credentials", "true")
            else:  # "*": any origin, but never an echoed one, and never with credentials
                self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
            self.send_header("Access-Control-Max-Age", "600")

        def _reply(self, status: HTTPStatus, body: bytes = b"", content_type: str = "text/plain") -> None:
            try:
                self.send_response(status)
                self._cors()
                if exact_origins:
                    self.send_header("Vary", "Origin")
                if status == HTTPStatus.UNAUTHORIZED:
                    self.send_header("WWW-Authenticate", 'Bearer realm="temporal-workflows-codec"')
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
            except (ConnectionError, TimeoutError):
                pass
            self.close_connection = True

        def _operation(self) -> str | None:
            path = self.path.split("?", 1)[0].rstrip("/")
            op = path.rsplit("/", 1)[-1]
            # "/decode" or "/<namespace>/decode"
            return op if op in ("encode", "decode") and path.count("/") <= 2 else None

        def _refused(self, *, preflight: bool = False) -> bool:
            """Answer and return ``True`` if the request may not go on (host, origin, token)."""
            if not self._host_allowed():
                self._reply(
                    HTTPStatus.FORBIDDEN,
                    b"this codec server is not reachable under that host name (add it to its allowed hosts)",
                )
                return True
            if not self._origin()[1]:
                self._reply(HTTPStatus.FORBIDDEN, b"origin not allowed")
                return True
            if not preflight and not self._authorized():
                self._reply(HTTPStatus.UNAUTHORIZED, b"missing or wrong bearer token")
                return True
            return False

        def do_OPTIONS(self) -> None:
            if self._refused(preflight=True):
                return
            self._reply(HTTPStatus.OK if self._operation() else HTTPStatus.NOT_FOUND)

        def do_GET(self) -> None:
            if self._refused():
                return
            self._reply(HTTPStatus.METHOD_NOT_ALLOWED if self._operation() else HTTPStatus.NOT_FOUND)

        def do_POST(self) -> None:
            if self._refused():
                return
            op = self._operation()
            if op is None:
                self._reply(HTTPStatus.NOT_FOUND)
                return
            if op == "encode" and not allow_encode:
                self._reply(HTTPStatus.FORBIDDEN, b"encoding is off on this codec server (start it with allow_encode)")
                return
            length = self._body_length()
            if isinstance(length, HTTPStatus):
                reason = {
                    HTTPStatus.LENGTH_REQUIRED: b"send the body with a Content-Length, not chunked",
                    HTTPStatus.BAD_REQUEST: b"Content-Length must be one non-negative integer",
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: f"the body is over {max_body} bytes".encode(),
                }[length]
                self._reply(length, reason)
                return
            raw = self._read_body(length)
            if raw is None:
                return
            try:
                payloads = json_format.Parse(raw or b"{}", Payloads())
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

    server = CodecServer((host, port), Handler, max_connections)
    server.token_required = secret is not None
    server.encode_allowed = allow_encode
    bound = (str(server.server_address[0]), int(server.server_address[1]))
    if secret is None and not _is_loopback(host):
        _log.warning(
            "codec server on %s without a token: anyone who can reach it can decrypt; set %s", host, ENV_CODEC_TOKEN
        )
    return server


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
