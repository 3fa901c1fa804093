"""LlamaIndex's own test-suite workflows, run on its default runtime and on ``TemporalRuntime``."""
