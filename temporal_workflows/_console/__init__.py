"""The web console (``temporal-workflows console``) and the codec endpoints: one ASGI app under uvicorn.

Needs the ``console`` extra (Starlette, uvicorn, sse-starlette). ``app.py``
puts the console together from its routes, which live by subject over one
``state.ConsoleState``: ``pages.py`` (the page, login), ``runs.py`` (runs and
a run), ``events.py`` (a run's events over SSE), ``actions.py`` (answers,
resets, forks, checkpoints, starts); ``codec.py`` the codec server protocol,
``gate.py`` the checks every request passes, ``guard.py`` the token and host
rules, ``server.py`` uvicorn with a request deadline and a cap on
unauthenticated connections; ``static/`` the page (plain ES modules, and a
vendored Mermaid for the graph picture: no build step, works offline).
"""
