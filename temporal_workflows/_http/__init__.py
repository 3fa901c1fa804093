"""The HTTP pieces the console and the codec server share: one ASGI stack (Starlette under uvicorn).

Needs the ``console`` extra (Starlette, uvicorn). ``server.py`` runs an app
under uvicorn with a whole-request deadline and a cap on unauthenticated
connections; ``guard.py`` holds the rules for who may talk to it (host names,
origins, the bearer token and its session cookie); ``gate.py`` is the ASGI
middleware that applies them before any route; ``body.py`` reads a request's
body (by ``Content-Length``, bounded, by the deadline); ``codec.py`` speaks
Temporal's codec server protocol (``/decode``, ``/encode``).

Who imports this folder: the codec server (``temporal/_client/codec_server.py``),
the console (``_console/``), the AG-UI and DevUI endpoints (``ag_ui/``), and the
CLI. It imports nothing of them: never ``_console/`` (the console stands on
these pieces, not the other way round), which ``tests/test_layout.py`` checks.
This ``__init__`` imports nothing, so importing one piece loads only that piece.
"""
