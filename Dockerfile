# The temporal_workflows worker image. It hosts the example graphs by default and
# connects to the Temporal frontend named by TEMPORAL_ADDRESS (no dev server inside).
#
#   docker build -t temporal-workflows-worker .
#   docker run --rm -e TEMPORAL_ADDRESS=host.docker.internal:7233 temporal-workflows-worker
#   docker run --rm -e TEMPORAL_ADDRESS=... temporal-workflows-worker --workflow myapp.graphs:workflow
#
# The arguments after the image name replace CMD, i.e. worker.py's flags.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# An unprivileged user owns nothing but the checkpoint directory.
RUN groupadd --system --gid 10001 worker \
    && useradd --system --uid 10001 --gid worker --home-dir /app --no-create-home --shell /usr/sbin/nologin worker

WORKDIR /app

# The library and its OTLP exporter (traces go out when OTEL_EXPORTER_OTLP_ENDPOINT is set).
COPY pyproject.toml README.md ./
COPY temporal_workflows/ temporal_workflows/
RUN pip install ".[otlp]" && rm -rf build ./*.egg-info

# The worker entry point and the graphs it hosts.
COPY worker.py ./
COPY examples/ examples/

# Default SQLite checkpoint store. It is one file: mount a volume on /data (a new
# named volume takes this directory's owner) and share it only between workers on
# the same host; a fleet on several hosts needs a shared CheckpointStorage or
# HistoryCheckpointStorage.
RUN mkdir -p /data && chown worker:worker /data
ENV TEMPORAL_WORKFLOWS_CHECKPOINT_DB=/data/checkpoints.sqlite \
    OTEL_SERVICE_NAME=temporal-workflows-worker

USER worker

# Exec form, so the worker is PID 1 and receives SIGTERM itself: it stops polling
# and gives in-flight steps --graceful-shutdown seconds (30 by default) to finish.
ENTRYPOINT ["python", "worker.py"]
CMD ["--workflow", "examples.research:workflow", "--workflow", "examples.approval:workflow", "--workflow", "examples.counter_loop:workflow"]
