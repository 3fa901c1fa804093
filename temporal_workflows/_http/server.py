"""uvicorn, with what a server facing slow or hostile clients needs: a request deadline and a cap on strangers.

uvicorn's own timeouts do not stop a slowloris client: its keep-alive timer
is cancelled by the first byte that arrives, and nothing bounds how long a
request head may take to trickle in (#23.7: 33 connections dripping a header
byte every 2 s kept the old codec server at 503 for 70 s). So the protocol
here adds two rules:

- **A whole-request deadline**: from the moment a connection starts waiting
  for a request (when it opens, and again after each response), the request
  head must arrive within ``request_timeout`` seconds, else the connection
  gets 408 and is closed; the body must arrive by the same deadline (the app
  reads it under :data:`DEADLINE_KEY`, and answers 408 when it passes).
- **A cap on unauthenticated connections** that tells a slow client from a
  crowd: a connection is a stranger until its request head has arrived (only
  then can its token be checked). Past ``max_unauthenticated`` strangers, a
  new one evicts the oldest stranger that is *slow*: waiting longer than
  ``stranger_grace`` seconds with nothing of its request unread. A crowd (a
  thousand pages opened at once) is connections whose requests are in the
  socket, or were sent a moment ago, that the server has not read yet: none
  of them is evicted, each is served as the server gets to it. So slow
  clients cannot fill the server (each is dropped by newer arrivals or its
  deadline, and a client that sends its request at once is served however
  many slow ones are connected), and a crowd is never mistaken for them.
  Past ``32 times max_unauthenticated`` strangers, the oldest without a request
  waiting is evicted whatever its age, so a flood stays bounded.

Everything after the head (the token check, 401, the body, SSE streams that
last hours) is the app's, on the event loop, where idle connections cost
almost nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DEADLINE_KEY", "Limits", "ServerHandle", "bind", "guarded_protocol"]

DEADLINE_KEY = "temporal_workflows.request_deadline"
"""Scope ``extensions`` key: the ``loop.time()`` by which the request (head and body) must have arrived."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """How much a client may take before it is served.

    Attributes:
        request_timeout: Seconds for a whole request (head and body) to arrive.
        max_unauthenticated: Connections held at once that have not yet sent a request head.
        max_body: Largest request body, in bytes.
    """

    request_timeout: float = 30.0
    max_unauthenticated: int = 32
    max_body: int = 32 * 1024 * 1024
    stranger_grace: float = 1.0
    """Seconds a new connection may wait for its request head before it counts as slow (never more than a
    quarter of ``request_timeout``)."""


def _unread(proto: Any) -> bool:
    """Whether bytes of the connection's request wait in its socket, not yet read by the server (a crowd)."""
    transport = getattr(proto, "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as peek:
            return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return False


class _Strangers:
    """Connections still waiting for their request head, oldest first (one per server)."""

    def __init__(self, cap: int, grace: float = 1.0) -> None:
        self.cap = max(1, cap)
        self.flood = 32 * self.cap
        self.grace = grace
        self._waiting: OrderedDict[int, Any] = OrderedDict()
        self.evicted = 0

    def add(self, proto: Any) -> None:
        self._waiting[id(proto)] = proto
        self._waiting.move_to_end(id(proto))
        if len(self._waiting) <= self.cap:
            return
        now = proto.loop.time()
        for key, oldest in list(self._waiting.items()):
            if len(self._waiting) <= self.cap:
                break
            young = now - getattr(oldest, "waiting_since", now) < self.grace
            if young and len(self._waiting) <= self.flood:
                break  # the rest are younger still: a crowd being served, not slow clients
            if oldest is proto or _unread(oldest):
                continue  # its request is here: the server gets to it next
            del self._waiting[key]
            self.evicted += 1
            oldest.drop(b"503 Service Unavailable")

    def discard(self, proto: Any) -> None:
        self._waiting.pop(id(proto), None)

    def __len__(self) -> int:
        return len(self._waiting)


def guarded_protocol(limits: Limits) -> type[H11Protocol]:
    """An ``H11Protocol`` class with the request deadline and the stranger cap (state shared by its connections)."""
    strangers = _Strangers(limits.max_unauthenticated, min(limits.stranger_grace, limits.request_timeout / 4))

    class GuardedH11Protocol(H11Protocol):
        stats = strangers
        _deadline_timer: asyncio.TimerHandle | None = None
        _deadline: float = 0.0
        waiting_since: float = 0.0

        def _wait_for_request(self) -> None:
            self.waiting_since = self.loop.time()
            self._deadline = self.waiting_since + limits.request_timeout
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
            self._deadline_timer = self.loop.call_at(self._deadline, self._too_slow)
            strangers.add(self)

        def _request_arrived(self) -> None:
            strangers.discard(self)
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
                self._deadline_timer = None

        def _too_slow(self) -> None:
            self._deadline_timer = None
            strangers.discard(self)
            self.drop(b"408 Request Timeout")

        def drop(self, status: bytes) -> None:
            """Answer ``status`` and close, for a connection whose request head has not arrived."""
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
                self._deadline_timer = None
            if self.transport is None or self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:
                with contextlib.suppress(Exception):
                    self.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._wait_for_request()

        def connection_lost(self, exc: Exception | None) -> None:
            strangers.discard(self)
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
                self._deadline_timer = None
            super().connection_lost(exc)

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before and self.cycle is not None:
                # The head has arrived: the app checks the token now, and reads the body by the same deadline.
                self._request_arrived()
                extensions: dict[str, Any] = self.scope.setdefault("extensions", {})  # type: ignore[assignment]
                extensions[DEADLINE_KEY] = self._deadline

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.cycle is not None and self.cycle.response_complete:
                self._wait_for_request()  # a keep-alive connection waits for its next request: a stranger again

    return GuardedH11Protocol


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), so the port is known before serving."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(4096)  # a crowd connecting at once waits in the backlog, not refused by the kernel
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class ServerHandle:
    """A uvicorn server on a bound socket: ``serve_forever()`` here, or ``start()`` in a thread; ``shutdown()``.

    Attributes:
        server_port: The port it listens on.
        protocol: Its protocol class (``protocol.stats``: the connections waiting for a request head).
    """

    def __init__(self, app: Any, sock: socket.socket, limits: Limits, *, log_level: str = "warning") -> None:
        self.socket = sock
        self.server_address = sock.getsockname()[:2]
        self.server_port: int = int(self.server_address[1])
        self.protocol = guarded_protocol(limits)
        config = uvicorn.Config(
            app,
            http=self.protocol,
            lifespan="off",
            log_level=log_level,
            access_log=False,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=1,
            h11_max_incomplete_event_size=64 * 1024,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    async def serve(self) -> None:
        await self._server.serve(sockets=[self.socket])

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or Ctrl-C) in this thread."""
        asyncio.run(self.serve())  # uvicorn handles Ctrl-C itself when this is the main thread

    def start(self) -> ServerHandle:
        """Serve in a daemon thread; returns once it accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True, name="temporal-workflows-http")
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            threading.Event().wait(0.01)
        return self

    def shutdown(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def server_close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()
