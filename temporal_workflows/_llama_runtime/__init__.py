"""LlamaIndex ``workflows`` programs, unchanged, on Temporal: the ``TemporalRuntime`` host (README.md here).

Private: users import ``TemporalRuntime`` and ``StepOptions`` from ``temporal_workflows.llama``. This
``__init__`` imports none of its modules, so importing one of them never runs the others first (no
import cycle through the package).
"""

__all__: list[str] = []
