"""A codec server: lets the Temporal Web UI and CLI show encrypted payloads to someone holding the keys.

    python -m temporal_workflows codec-server --port 8081

It speaks Temporal's codec server protocol: ``POST /decode`` and ``POST
/encode`` (also under a namespace segment, ``/{namespace}/decode``), each with
a JSON body ``{"payloads": [...]}`` in proto3 JSON form, answered in the same
form. The Web UI calls it from the browser, so it answers CORS preflights for
the origins it is given. It is the shared HTTP pieces (``temporal_workflows._http``:
the gate, the guard, the codec routes) under uvicorn, with only the codec routes
(``temporal-workflows console`` serves the same routes beside its pages): it
needs the ``console`` extra.

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
  bytes 413.
- **Slow clients** (slowloris): a whole request, head and body, must arrive
  within ``timeout`` seconds of the connection starting to wait for it (408),
  and at most ``max_connections`` connections that have not yet sent their
  request head are held: one more evicts the oldest of them (503). A client
  that sends its request at once is served however many slow ones are
  connected (see ``temporal_workflows._http.server``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from temporal_workflows.temporal._codec import EncryptionCodec, EncryptionError

try:
    from starlette.applications import Starlette

    from temporal_workflows._http.codec import codec_routes
    from temporal_workflows._http.gate import Gate
    from temporal_workflows._http.guard import ENV_CODEC_TOKEN, Guard, GuardConfigError, is_loopback, token_from
    from temporal_workflows._http.server import Limits, ServerHandle, bind
except ImportError as e:  # pragma: no cover - the extra is in every test environment
    raise ImportError(
        f"the codec server needs the console extra ({e.name}): pip install 'temporal-workflows[console]'"
    ) from e

__all__ = [
    "DEFAULT_CODEC_ORIGINS",
    "ENV_CODEC_TOKEN",
    "CodecServer",
    "CodecServerConfigError",
    "make_codec_server",
]

DEFAULT_CODEC_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
"""The dev server's Web UI, under both names a browser may use for it."""

DEFAULT_MAX_BODY = 32 * 1024 * 1024
"""Largest request body accepted, in bytes (Temporal payloads are at most 2 MiB each by default)."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a client may take to send its whole request (head and body)."""

DEFAULT_MAX_CONNECTIONS = 32
"""Connections held at once that have not yet sent their request head; one more evicts the oldest."""

_log = logging.getLogger(__name__)


class CodecServerConfigError(EncryptionError, GuardConfigError):
    """The codec server cannot start as configured (a malformed or empty token, allowed host or origin)."""


class CodecServer(ServerHandle):
    """What :func:`make_codec_server` returns: ``serve_forever()`` (or ``start()`` in a thread), ``shutdown()``.

    Attributes:
        token_required: Whether requests need ``Authorization: Bearer <token>``.
        encode_allowed: Whether ``/encode`` is served.
    """

    token_required = False
    encode_allowed = False


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
    """A server, bound but not yet serving (call ``serve_forever`` or ``start``), decoding with ``codec``.

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
        timeout: Seconds a client may take to send its whole request.
        max_connections: Connections held at once that have not sent their
            request head yet; one more evicts the oldest of them.
        environ: Where to read the token from (default ``os.environ``).

    Raises:
        CodecServerConfigError: The token or an allowed host is malformed.
    """
    try:
        secret = token_from(token, environ)
        guard = Guard.make(secret, (host, port), allowed_hosts=allowed_hosts, origins=origins)
    except GuardConfigError as e:
        raise CodecServerConfigError(str(e)) from None
    if guard.any_origin and secret is None:
        _log.warning(
            "codec server: origin '*' lets every web page its users open call it; set a token (%s) or name the "
            "Web UI's origin",
            ENV_CODEC_TOKEN,
        )
    limits = Limits(request_timeout=timeout, max_unauthenticated=max_connections, max_body=max_body)
    sock = bind(host, port)
    bound_port = int(sock.getsockname()[1])
    guard = Guard.make(secret, (host, bound_port), allowed_hosts=allowed_hosts, origins=origins)
    app = Gate(Starlette(routes=codec_routes(codec, limits, allow_encode=allow_encode)), guard, console=False)
    server = CodecServer(app, sock, limits)
    server.token_required = secret is not None
    server.encode_allowed = allow_encode
    if secret is None and not is_loopback(host):
        _log.warning(
            "codec server on %s without a token: anyone who can reach it can decrypt; set %s", host, ENV_CODEC_TOKEN
        )
    return server
