"""The activities of the Temporal host: the steps (user code) and checkpoint saving and loading."""
