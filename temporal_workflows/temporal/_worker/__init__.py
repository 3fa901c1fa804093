"""Worker side: what a worker process installs (the plugin, build-id versioning, eviction
handling) and what its activities publish (live events). The activities themselves are in
``_activities/``.
"""
