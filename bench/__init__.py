"""Benchmarks: this project on Temporal, hand-written Temporal, and the in-process runner, side by side.

Run ``python -m bench`` (full, about 15 minutes) or ``python -m bench --quick --json``
(CI: checks that every measurement still runs). Modules:

- :mod:`bench.shapes`: the shapes as graphs of this project;
- :mod:`bench.baseline`: the same shapes as idiomatic hand-written Temporal workflows;
- :mod:`bench.local`: in-process measurements;
- :mod:`bench.measure`: history size, CPU, medians;
- :mod:`bench.recovery`: kill -9 of the only worker mid-step, and the worker process it kills;
- :mod:`bench.run`: the harness, the targets and the table.
"""
