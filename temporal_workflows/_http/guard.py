"""Who may talk to the console and codec endpoints: host names, origins, the bearer token and its cookie.

One place for the checks both the console's pages and the codec endpoints
make, so they read the same (the codec server's protections, now shared):

- **Host** (DNS rebinding): the ``Host`` header must be one of the server's
  own names (its bind address, ``localhost``, ``127.0.0.1``, ``[::1]``, with
  its port) or an ``allowed_hosts`` entry; else 403.
- **Origin**: a request that carries an ``Origin`` must come from the page's
  own host, or (codec endpoints) a configured Web UI origin, or (the AG-UI
  endpoints) an app origin named with ``--allowed-origin``; else 403.
- **Token**: with a token, every request but a CORS preflight and the login
  page needs ``Authorization: Bearer <token>`` or the session cookie the
  login page sets (an HMAC of the token, so the cookie is not the token);
  compared in constant time; else 401.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "COOKIE_NAME",
    "ENV_CODEC_TOKEN",
    "MIN_TOKEN_CHARS",
    "Guard",
    "GuardConfigError",
    "check_origin",
    "is_loopback",
    "read_token_file",
    "split_host",
    "token_from",
]

ENV_CODEC_TOKEN = "TEMPORAL_WORKFLOWS_CODEC_TOKEN"
"""A bearer token every codec server request (but a CORS preflight) must carry, when set."""

COOKIE_NAME = "tw_console_session"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_TOKEN = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces: sendable in a header as it is


class GuardConfigError(ValueError):
    """The server cannot start as configured: a malformed or empty token, allowed host or origin."""


def split_host(value: str) -> tuple[str, int | None] | None:
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


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_ORIGIN = re.compile(r"https?://[a-z0-9_.-]+(:\d{1,5})?|https?://\[[0-9a-f:.]+\](:\d{1,5})?")


def check_origin(origin: str) -> str:
    """An origin as browsers send it (``scheme://host[:port]``, lower case, no path); refused otherwise.

    Raises:
        GuardConfigError: not an origin (``*`` is refused: every front end is named).
    """
    value = origin.strip().rstrip("/").lower()
    if not _ORIGIN.fullmatch(value):
        raise GuardConfigError(
            f"allowed origin {origin!r} is not an origin: give scheme, host and port as the browser sends them, "
            "e.g. https://app.example.com or http://localhost:3000 (no path, no '*')"
        )
    return value


def _check_token(token: str) -> str:
    if not _TOKEN.fullmatch(token) or len(token) < MIN_TOKEN_CHARS:
        raise GuardConfigError(
            f"the token must be at least {MIN_TOKEN_CHARS} printable ASCII characters without spaces; "
            "generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token


def token_from(token: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The token given (``""``: explicitly none), else ``$TEMPORAL_WORKFLOWS_CODEC_TOKEN`` if set and not blank.

    Raises:
        GuardConfigError: the token is malformed (too short, spaces).
    """
    if token is None:
        token = (os.environ if environ is None else environ).get(ENV_CODEC_TOKEN, "")
    token = token.strip()
    return _check_token(token) if token else None


def read_token_file(path: str | Path) -> str:
    """The token in ``path``; an empty or blank file is refused, never taken as "no token".

    A token file is how an operator asks for authentication, so a file that
    is empty (a failed secret mount, ``echo > file``) must stop the server
    rather than start it open (#23.8).

    Raises:
        GuardConfigError: the file cannot be read, is blank, or holds a malformed token.
    """
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise GuardConfigError(f"cannot read --token-file {str(path)!r}: {e}") from None
    token = text.strip()
    if not token:
        raise GuardConfigError(
            f"--token-file {str(path)!r} is empty: refusing to start without the authentication it asks for "
            "(write a token into it, or leave --token-file out)"
        )
    return _check_token(token)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class Guard:
    """The checks of one server, built once it knows the address it is bound to.

    Attributes:
        token: The bearer token, or ``None`` for none.
        bound: ``(host, port)`` the server listens on.
        allowed_hosts: Further ``(name, port or None)`` clients reach it by.
        origins: Web UI origins (lower case, no trailing ``/``) allowed to call the codec endpoints.
        any_origin: ``*`` was given: any origin, never with credentials.
        app_origins: Front-end origins (lower case, no trailing ``/``) allowed to call the AG-UI endpoints.
    """

    token: str | None
    bound: tuple[str, int]
    allowed_hosts: tuple[tuple[str, int | None], ...] = ()
    origins: frozenset[str] = frozenset()
    any_origin: bool = False
    app_origins: frozenset[str] = frozenset()
    _expected: bytes | None = field(default=None, repr=False)

    @classmethod
    def make(
        cls,
        token: str | None,
        bound: tuple[str, int],
        *,
        allowed_hosts: Sequence[str] = (),
        origins: Sequence[str] = (),
        app_origins: Sequence[str] = (),
    ) -> Guard:
        extra: list[tuple[str, int | None]] = []
        for entry in allowed_hosts:
            parsed = split_host(entry)
            if parsed is None:
                raise GuardConfigError(f"allowed host {entry!r} is not a host name or address (with an optional port)")
            extra.append(parsed)
        exact = frozenset(o.strip().rstrip("/").lower() for o in origins if o.strip() != "*")
        apps = frozenset(check_origin(o) for o in app_origins)
        return cls(
            token=token,
            bound=bound,
            allowed_hosts=tuple(extra),
            origins=exact,
            any_origin=any(o.strip() == "*" for o in origins),
            app_origins=apps,
            _expected=_digest(token) if token else None,
        )

    @property
    def token_required(self) -> bool:
        return self._expected is not None

    def host_allowed(self, values: Sequence[str]) -> bool:
        """Whether the request's ``Host`` header values name this server."""
        if len(values) != 1:
            return False
        parsed = split_host(values[0])
        if parsed is None:
            return False
        name, given_port = parsed
        bound_host, bound_port = self.bound
        own = {*LOOPBACK_NAMES, bound_host.lower().strip("[]")}
        if name in own and (given_port or 80) == bound_port:
            return True
        return any(name == h and (p is None or p == (given_port or 80)) for h, p in self.allowed_hosts)

    def same_origin(self, origin: str, host: str) -> bool:
        """Whether ``origin`` is the page's own (``http(s)://<Host header>``)."""
        origin = origin.strip().rstrip("/").lower()
        return origin in (f"http://{host.lower()}", f"https://{host.lower()}")

    def app_origin(self, origin: str) -> bool:
        """Whether ``origin`` is a front end named with ``--allowed-origin`` (AG-UI endpoints)."""
        return origin.strip().rstrip("/").lower() in self.app_origins

    def web_ui_origin(self, origin: str) -> bool:
        return self.any_origin or origin.strip().rstrip("/").lower() in self.origins

    def bearer_ok(self, authorization: str | None) -> bool:
        if self._expected is None:
            return True
        scheme, _, given = (authorization or "").strip().partition(" ")
        # Hashing first makes the comparison's time independent of the token's length too.
        return hmac.compare_digest(_digest(given.strip()), self._expected) and scheme.lower() == "bearer"

    def session_value(self) -> str:
        """The session cookie's value: an HMAC of the token (a stolen cookie does not reveal the token)."""
        assert self.token is not None
        return hmac.new(self.token.encode(), b"temporal-workflows console session", hashlib.sha256).hexdigest()

    def cookie_ok(self, cookie: str | None) -> bool:
        if self._expected is None:
            return True
        if not cookie:
            return False
        return hmac.compare_digest(cookie.encode(), self.session_value().encode())

    def token_ok(self, given: str) -> bool:
        return self._expected is None or hmac.compare_digest(_digest(given.strip()), self._expected)
