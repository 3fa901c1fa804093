"""The activities of temporal_workflows, for readers of this repository who look for them here.

They live in ``temporal_workflows.temporal._activities`` (steps, callable
reducers, topology pinning, validation, checkpoint saving and loading). This
folder is not installed: the distribution claims only ``temporal_workflows``,
so an application's own ``activities.py`` (the layout Temporal's samples use)
never collides with it.
"""

from temporal_workflows.temporal._activities.checkpoints import build_checkpoint_activities
from temporal_workflows.temporal._activities.steps import StateCache, build_activities

__all__ = ["StateCache", "build_activities", "build_checkpoint_activities"]
