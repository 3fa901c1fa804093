"""Hosting graphs on Temporal: the plugin, the client layer, connections, encryption and the dev-server helper.

    from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run

What a user of a worker or a client needs (``__all__``, listed in ``docs/api.md``).
The names for integrators who talk to the workflow without this client (the
workflow class and its start input, the wire constants, the codec server's
parts) are in :mod:`temporal_workflows.temporal.integration`; imported from
here they still work for one release, with a ``DeprecationWarning``.

The graph workflow's own module lives in this package, so its names are
imported on first use: a worker or a workflow sandbox importing the workflow
pulls in no client, codec-server or dev-server code. Every module is imported
statically, never by a string.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporal_workflows.temporal._client.client import RunHandle, fork, get_run, send_or_start, start_run
    from temporal_workflows.temporal._client.connect import ConnectionConfig, ConnectionConfigError
    from temporal_workflows.temporal._client.devserver import start_dev_server
    from temporal_workflows.temporal._client.durable import DurableWorkflow
    from temporal_workflows.temporal._client.schedules import create_schedule, list_schedules
    from temporal_workflows.temporal._codec import EncryptionCodec, EncryptionError, KeyRing
    from temporal_workflows.temporal._telemetry.config import configure_tracing
    from temporal_workflows.temporal._worker.plugin import TemporalWorkflowsPlugin
    from temporal_workflows.temporal._worker.versioning import WorkerVersioning

_LAZY = {
    "CheckpointCipher": "temporal_workflows._checkpoints.base",
    "LINEAGE_MEMO": "temporal_workflows.temporal._client.client",
    "RawEvent": "temporal_workflows.temporal._client.client",
    "RawLiveEvent": "temporal_workflows.temporal._client.client",
    "EventView": "temporal_workflows.temporal._client.client",
    "EventStream": "temporal_workflows.temporal._client.client",
    "RunHandle": "temporal_workflows.temporal._client.client",
    "fork": "temporal_workflows.temporal._client.client",
    "get_run": "temporal_workflows.temporal._client.client",
    "send_or_start": "temporal_workflows.temporal._client.client",
    "start_run": "temporal_workflows.temporal._client.client",
    "start_input": "temporal_workflows.temporal._client.client",
    "create_schedule": "temporal_workflows.temporal._client.schedules",
    "describe_schedule": "temporal_workflows.temporal._client.schedules",
    "get_schedule": "temporal_workflows.temporal._client.schedules",
    "list_schedules": "temporal_workflows.temporal._client.schedules",
    "ENCRYPTED_ENCODING": "temporal_workflows.temporal._codec",
    "ENV_ENCRYPTION_KEY": "temporal_workflows.temporal._codec",
    "ENV_ENCRYPTION_KEY_ID": "temporal_workflows.temporal._codec",
    "ENV_ENCRYPTION_KEYS": "temporal_workflows.temporal._codec",
    "KEY_ID_METADATA": "temporal_workflows.temporal._codec",
    "EncryptionCodec": "temporal_workflows.temporal._codec",
    "EncryptionError": "temporal_workflows.temporal._codec",
    "KeyRing": "temporal_workflows.temporal._codec",
    "CodecServer": "temporal_workflows.temporal._client.codec_server",
    "make_codec_server": "temporal_workflows.temporal._client.codec_server",
    "ConnectionConfig": "temporal_workflows.temporal._client.connect",
    "ConnectionConfigError": "temporal_workflows.temporal._client.connect",
    "start_dev_server": "temporal_workflows.temporal._client.devserver",
    "DurableWorkflow": "temporal_workflows.temporal._client.durable",
    "DEFAULT_TASK_QUEUE": "temporal_workflows.temporal._worker.plugin",
    "PASSTHROUGH_MODULES": "temporal_workflows.temporal._worker.plugin",
    "TemporalWorkflowsPlugin": "temporal_workflows.temporal._worker.plugin",
    "STATUS_SEARCH_ATTRIBUTE": "temporal_workflows.temporal._protocol",
    "RunInput": "temporal_workflows.temporal._protocol",
    "step_activity_name": "temporal_workflows.temporal._protocol",
    "configure_tracing": "temporal_workflows.temporal._telemetry.config",
    "WorkerVersioning": "temporal_workflows.temporal._worker.versioning",
    "build_id_for": "temporal_workflows.temporal._worker.versioning",
    "flush_tracing": "temporal_workflows.temporal._telemetry.config",
    "GraphWorkflow": "temporal_workflows.temporal._workflow.workflow",
}


_INTEGRATION = (
    "CheckpointCipher",
    "CodecServer",
    "DEFAULT_TASK_QUEUE",
    "ENCRYPTED_ENCODING",
    "ENV_ENCRYPTION_KEY",
    "ENV_ENCRYPTION_KEYS",
    "ENV_ENCRYPTION_KEY_ID",
    "EventStream",
    "EventView",
    "GraphWorkflow",
    "KEY_ID_METADATA",
    "LINEAGE_MEMO",
    "PASSTHROUGH_MODULES",
    "RawEvent",
    "RawLiveEvent",
    "RunInput",
    "STATUS_SEARCH_ATTRIBUTE",
    "build_id_for",
    "flush_tracing",
    "make_codec_server",
    "step_activity_name",
)
"""The names ``temporal_workflows.temporal.integration`` exports (kept importable here, deprecated)."""


def _module(name: str) -> ModuleType:
    if name == "temporal_workflows._checkpoints.base":
        from temporal_workflows._checkpoints import base

        return base
    if name == "temporal_workflows.temporal._client.client":
        from temporal_workflows.temporal._client import client

        return client
    if name == "temporal_workflows.temporal._client.schedules":
        from temporal_workflows.temporal._client import schedules

        return schedules
    if name == "temporal_workflows.temporal._codec":
        from temporal_workflows.temporal import _codec

        return _codec
    if name == "temporal_workflows.temporal._client.codec_server":
        from temporal_workflows.temporal._client import codec_server

        return codec_server
    if name == "temporal_workflows.temporal._client.connect":
        from temporal_workflows.temporal._client import connect

        return connect
    if name == "temporal_workflows.temporal._client.devserver":
        from temporal_workflows.temporal._client import devserver

        return devserver
    if name == "temporal_workflows.temporal._client.durable":
        from temporal_workflows.temporal._client import durable

        return durable
    if name == "temporal_workflows.temporal._worker.plugin":
        from temporal_workflows.temporal._worker import plugin

        return plugin
    if name == "temporal_workflows.temporal._protocol":
        from temporal_workflows.temporal import _protocol

        return _protocol
    if name == "temporal_workflows.temporal._telemetry.config":
        from temporal_workflows.temporal._telemetry import config

        return config
    if name == "temporal_workflows.temporal._worker.versioning":
        from temporal_workflows.temporal._worker import versioning

        return versioning
    if name == "temporal_workflows.temporal._workflow.workflow":
        from temporal_workflows.temporal._workflow import workflow

        return workflow
    raise AssertionError(name)


_MOVED = frozenset(_INTEGRATION)
"""Names this module exported before they moved to ``temporal_workflows.temporal.integration``."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _MOVED:
        warnings.warn(
            f"importing {name} from temporal_workflows.temporal is deprecated: it is for integrators, "
            f"import it from temporal_workflows.temporal.integration; the old import goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_module(module), name)
    value = getattr(_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    # worker
    "TemporalWorkflowsPlugin",
    "WorkerVersioning",
    "configure_tracing",
    # client
    "DurableWorkflow",
    "RunHandle",
    "fork",
    "get_run",
    "send_or_start",
    "start_run",
    # schedules
    "create_schedule",
    "list_schedules",
    # connections and encryption
    "ConnectionConfig",
    "ConnectionConfigError",
    "EncryptionCodec",
    "EncryptionError",
    "KeyRing",
    # development
    "start_dev_server",
]
