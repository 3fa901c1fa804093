"""The graph API: what a user writes (executors, edges, the builder, the handler context) and the built ``Workflow``."""
