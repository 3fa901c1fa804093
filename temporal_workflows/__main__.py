"""``python -m temporal_workflows``: the ``temporal-workflows`` command (see ``temporal_workflows._cli``).

``describe_event``, ``follow`` and ``hard_exit`` stay importable from here for
scripts that used them (``examples/demo.py``).
"""

from temporal_workflows._cli import describe_event, follow, hard_exit, main

__all__ = ["describe_event", "follow", "hard_exit", "main"]

if __name__ == "__main__":
    main()
