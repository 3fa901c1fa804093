"""The web console (``temporal-workflows console``): one ASGI app under uvicorn.

Needs the ``console`` extra (Starlette, uvicorn, sse-starlette). ``app.py``
puts the console together from its routes, which live by subject over one
``state.ConsoleState``: ``pages.py`` (the page, login), ``runs.py`` (runs and
a run), ``events.py`` (a run's events over SSE), ``actions.py`` (answers,
resets, forks, checkpoints, starts), ``timeline.py`` (a run's timeline);
``static/`` the page (plain ES modules, and a vendored Mermaid for the graph
picture: no build step, works offline). What it shares with the codec server
(the gate every request passes, the guard's rules, uvicorn with a request
deadline, the body reader, the codec routes it serves beside its pages) lives
in ``_http/``.
"""
