"""The in-process host: the superstep driver with asyncio, for tests and notebooks."""
