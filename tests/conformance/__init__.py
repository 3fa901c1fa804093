"""Host conformance: every scenario runs in process and on Temporal, and both must tell the same story."""
