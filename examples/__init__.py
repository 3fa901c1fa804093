"""Runnable example graphs: ``python -m examples.research`` (or ``approval``, ``counter_loop``).

Each module defines ``build() -> Workflow``, a module-level ``workflow = build()``
and a ``SAMPLE_INPUT``; the "LLM" calls in them are deterministic functions, so
the examples run offline and their results can be asserted in tests.
"""
