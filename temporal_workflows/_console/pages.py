"""The page itself (``/``, static), the login form that sets the session cookie, and the page's ready hold.

The page is static and fills itself from the JSON routes, so a browser's
``load`` event would come before anything is shown ("Loading…"). The page
holds it: ``index.html`` carries one image, ``/ready.gif``, whose answer the
console keeps back until the page lets it go, once its first view has drawn
(data, picture, first events), or 10 s at most. So a screenshot taken when a
page has loaded (``page.goto(url)`` then ``page.screenshot()``) shows the
run, not "Loading…". The same moment sets ``<html data-ready="true">``
(``false`` while a view is being drawn, after the hash changes): a marker to
wait on where no load event comes.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from temporal_workflows._console.state import ConsoleState
from temporal_workflows._http.body import BodyRefused, read_body
from temporal_workflows._http.guard import COOKIE_NAME
from temporal_workflows._http.server import Limits

__all__ = ["READY_HOLD_SECONDS", "routes"]

READY_HOLD_SECONDS = 10.0
"""The longest the page's load event is held for its first view to draw."""
_GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")


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

    async def ready(request: Request) -> Response:
        # Kept back until the page drops the request (it sets the image's src elsewhere once drawn), 10 s at most.
        loop = asyncio.get_running_loop()
        until = loop.time() + READY_HOLD_SECONDS
        while loop.time() < until and not await request.is_disconnected():
            await asyncio.sleep(0.1)
        return Response(_GIF, media_type="image/gif", headers={"Cache-Control": "no-store"})

    return [
        Route("/", index),
        Route("/ready.gif", ready),
        Route("/login", login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]
