"""Checkpoints and where they are kept: in memory, in files, in SQLite (deltas), or in workflow history."""
