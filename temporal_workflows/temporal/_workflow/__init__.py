"""Workflow side: code that runs inside the Temporal workflow (deterministic, never user code).

``workflow.py`` declares ``GraphWorkflow`` (every signal, update and query); the
other modules are its parts. Nothing here does I/O or reads the clock but
through the workflow API.
"""
