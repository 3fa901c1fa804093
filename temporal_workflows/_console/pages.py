"""The page itself (``/``, static) and the login form that sets the session cookie."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from temporal_workflows._console.codec import BodyRefused, read_body
from temporal_workflows._console.guard import COOKIE_NAME
from temporal_workflows._console.server import Limits
from temporal_workflows._console.state import ConsoleState

__all__ = ["routes"]


def routes(state: ConsoleState) -> list[Any]:
    static = state.static
    guard = state.guard

    async def index(request: Request) -> Response:
        return FileResponse(str(static / "index.html"), headers={"Cache-Control": "no-store"})

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return FileResponse(str(static / "login.html"))
        try:  # a urlencoded form, parsed here: no multipart parser needed for one field
            limits = Limits(request_timeout=state.settings.limits.request_timeout, max_body=4096)
            raw = await read_body(request, limits)
        except BodyRefused as e:
            return e.response
        given = (parse_qs(raw.decode(errors="replace")).get("token") or [""])[0]
        if not guard.token_required:
            return RedirectResponse("/", 303)
        if not guard.token_ok(given):
            return HTMLResponse(
                (static / "login.html").read_text().replace("<!--error-->", "<p class=error>Wrong token.</p>"), 401
            )
        response = RedirectResponse("/", 303)
        response.set_cookie(
            COOKIE_NAME,
            guard.session_value(),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    return [
        Route("/", index),
        Route("/login", login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]
