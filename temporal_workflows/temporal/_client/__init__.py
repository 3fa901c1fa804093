"""Client side: starting, reading and steering runs from outside (``RunHandle``, the durable twin,
connections, the codec server for the Web UI, a local dev server).
"""
