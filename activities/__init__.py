"""Temporal activities of temporal_workflows: running a step, persisting checkpoints."""
