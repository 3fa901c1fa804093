"""The gate every request passes before any route: host, origin, token or session cookie, CSRF.

A pure ASGI middleware, so a refused request never reaches a route (nor the
Temporal client, nor the codec). What it answers:

- 403 for a ``Host`` that is not the server's (DNS rebinding) and for an
  ``Origin`` that is neither the page's own nor (codec endpoints) a
  configured Web UI origin;
- 401 without the token (``Authorization: Bearer``) or the session cookie,
  on every path but the login page, the static assets and DevUI's page (no
  data in them) and a codec CORS preflight; a page load without them is
  sent to ``/login``;
- 403 for a console action (any method but GET/HEAD) without the
  ``X-TW-Console`` header: a cross-site form cannot send it, and a
  cross-site script cannot either without a preflight, which is refused.

The AG-UI endpoints (``/ag-ui/...``) and DevUI's API (``/v1/...``, ``/meta``,
``/health``) are called by front ends, not the console's page:
they answer 401 as JSON (never a redirect to the login page), take the
bearer token (or the page's own cookie), and need no ``X-TW-Console``
header: their ``POST`` must be JSON (``Content-Type: application/json``,
which a cross-site form cannot send and a cross-site script cannot without a
preflight). A front end on another origin is let in only when named with
``--allowed-origin``: its preflight is answered with CORS headers (no
credentials: it sends the token as a bearer header); any other origin gets 403.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from http.cookies import SimpleCookie
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from temporal_workflows._http.codec import is_codec_path
from temporal_workflows._http.guard import COOKIE_NAME, Guard

__all__ = ["ACTION_HEADER", "AG_UI_PREFIX", "Gate", "is_ag_ui_path"]

ACTION_HEADER = "x-tw-console"
"""A header every console action carries (CSRF: cross-site requests cannot send it without a refused preflight)."""

_OPEN_PATHS = ("/login", "/favicon.ico")
AG_UI_PREFIX = "/ag-ui"
"""Where the console serves its AG-UI endpoints (``temporal_workflows.ag_ui``)."""
DEVUI_API = ("/v1/", "/meta", "/health")
"""Agent Framework DevUI's API, which its page calls at the root (``temporal_workflows.ag_ui._devui``)."""
DEVUI_PAGE = "/devui"


def is_ag_ui_path(path: str) -> bool:
    """A front end's API (AG-UI, DevUI's): JSON 401, bearer or cookie, ``--allowed-origin`` CORS, no CSRF header."""
    if path == AG_UI_PREFIX or path.startswith(AG_UI_PREFIX + "/"):
        return True
    return path.startswith(DEVUI_API[0]) or path in DEVUI_API[1:]


"""Paths served without the token (the static assets, under ``/static/``, too): no data in any of them."""


def _cookie(headers: Headers) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:
        return None
    morsel = jar.get(COOKIE_NAME)
    return morsel.value if morsel is not None else None


class Gate:
    """Wraps the app: checks each HTTP request (see the module's docstring) before the app sees it."""

    def __init__(self, app: ASGIApp, guard: Guard, *, console: bool = True) -> None:
        """``console=False``: the codec server alone (no pages, no actions, no login)."""
        self.app = app
        self.guard = guard
        self.console = console

    def _cors(self, origin: str | None) -> dict[str, str]:
        if origin is None or not self.guard.web_ui_origin(origin):
            return {}
        headers = {
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type, X-Namespace, Authorization",
            "Access-Control-Max-Age": "600",
        }
        if origin.strip().rstrip("/").lower() in self.guard.origins:
            headers["Access-Control-Allow-Origin"] = origin.strip()
            headers["Access-Control-Allow-Credentials"] = "true"
        else:  # "*": any origin, but never an echoed one, and never with credentials
            headers["Access-Control-Allow-Origin"] = "*"
        return headers

    def _app_cors(self, origin: str | None) -> dict[str, str]:
        """CORS headers for an AG-UI front end named with ``--allowed-origin`` (bearer token, no cookies)."""
        if origin is None or not self.guard.app_origin(origin):
            return {}
        return {
            "Access-Control-Allow-Origin": origin.strip(),
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type, Authorization, Accept, Last-Event-ID",
            "Access-Control-Max-Age": "600",
        }

    def _check_ag_ui(self, headers: Headers, method: str, host: str) -> tuple[Response | None, dict[str, str]]:
        origin = headers.get("origin")
        cors = self._app_cors(origin)
        if self.guard.app_origins:
            cors["Vary"] = "Origin"
        if (
            origin is not None
            and not self.guard.same_origin(origin, host)
            and not cors.get("Access-Control-Allow-Origin")
        ):
            return JSONResponse(
                {"error": "origin not allowed: name the front end's origin with --allowed-origin"}, 403
            ), cors
        if method == "OPTIONS":
            return (Response(status_code=204) if origin is not None else None), cors
        authorized = self.guard.bearer_ok(headers.get("authorization")) or self.guard.cookie_ok(_cookie(headers))
        if not authorized:
            why = "this endpoint needs the console's token (Authorization: Bearer ...)"
            refusal = JSONResponse({"error": why}, 401)
            return refusal, {**cors, "WWW-Authenticate": 'Bearer realm="temporal-workflows-console"'}
        return None, cors

    def _check(self, scope: Scope) -> tuple[Response | None, dict[str, str]]:
        """A refusal (or ``None``) and the CORS headers every answer to this request carries."""
        headers = Headers(scope=scope)
        path: str = scope["path"]
        method: str = scope["method"]
        if self.console and is_ag_ui_path(path):
            host_values = headers.getlist("host")
            if not self.guard.host_allowed(host_values):
                return JSONResponse(
                    {"error": "this server is not reachable under that host name (add it to its allowed hosts)"},
                    403,
                ), {}
            return self._check_ag_ui(headers, method, host_values[0])
        codec = is_codec_path(path)
        origin = headers.get("origin")
        cors = self._cors(origin) if codec else {}
        if self.guard.origins:
            cors["Vary"] = "Origin"
        host_values = headers.getlist("host")
        if not self.guard.host_allowed(host_values):
            return (
                PlainTextResponse(
                    "this server is not reachable under that host name (add it to its allowed hosts)", 403
                ),
                cors,
            )
        if origin is not None:
            own = self.guard.same_origin(origin, host_values[0])
            if not own and not (codec and self.guard.web_ui_origin(origin)):
                return PlainTextResponse("origin not allowed", 403), cors
        if codec and method == "OPTIONS":
            return None, cors  # a CORS preflight: browsers send no token with it
        if self.console and (
            path in _OPEN_PATHS
            or path.startswith("/static/")
            or path == DEVUI_PAGE
            or path.startswith(DEVUI_PAGE + "/")
        ):
            return None, cors
        authorized = self.guard.bearer_ok(headers.get("authorization")) or (
            not codec and self.guard.cookie_ok(_cookie(headers))
        )
        if not authorized:
            if codec:
                return PlainTextResponse("missing or wrong bearer token", 401), {
                    **cors,
                    "WWW-Authenticate": 'Bearer realm="temporal-workflows-codec"',
                }
            if path.startswith("/api/"):
                return JSONResponse({"error": "sign in: the console needs its token"}, 401), {
                    "WWW-Authenticate": 'Bearer realm="temporal-workflows-console"'
                }
            if not self.console:
                return PlainTextResponse("missing or wrong bearer token", 401), {
                    "WWW-Authenticate": 'Bearer realm="temporal-workflows-codec"'
                }
            return RedirectResponse("/login", 303), {}
        if self.console and not codec and method not in ("GET", "HEAD") and headers.get(ACTION_HEADER) != "1":
            return JSONResponse({"error": f"console actions carry the {ACTION_HEADER} header"}, 403), {}
        return None, cors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal, extra = self._check(scope)
        if refusal is not None:
            refusal.headers.update(extra)
            refusal.headers["Connection"] = "close"
            await refusal(scope, receive, send)
            return
        if not extra:
            await self.app(scope, receive, send)
            return

        async def send_with(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in extra.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with)
