"""The pure part: the superstep machine, the one driver both graph hosts run, JSON envelopes and payload limits.

Nothing here does I/O, reads a clock or runs user code."""
