"""Hosting graphs on Temporal: the plugin, the client layer, connections, encryption and the dev-server helper.

from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._checkpoint import CheckpointCipher
    from .._client import LINEAGE_MEMO, RawEvent, RunHandle, fork, get_run, send_or_start, start_run
    from .._codec import (
        ENCRYPTED_ENCODING,
        ENV_ENCRYPTION_KEY,
        ENV_ENCRYPTION_KEY_ID,
        ENV_ENCRYPTION_KEYS,
        KEY_ID_METADATA,
        EncryptionCodec,
        EncryptionError,
        KeyRing,
    )
    from .._codec_server import make_codec_server
    from .._connect import ConnectionConfig, ConnectionConfigError
    from .._devserver import free_port, start_dev_server, temporal_cli_path
    from .._plugin import DEFAULT_TASK_QUEUE, PASSTHROUGH_MODULES, TemporalWorkflowsPlugin
    from .._protocol import STATUS_SEARCH_ATTRIBUTE, RunInput, StepInput, step_activity_name
    from .._tracing import configure_tracing, flush_tracing
    from ._workflow import GraphWorkflow

# Imported on first use: the graph workflow's own module lives in this package, and a
# workflow sandbox (or a worker) importing it must not pull in the client, codec server
# and dev-server helpers. Each name's module is imported statically, never by a string.
_LAZY = {
    "CheckpointCipher": ".._checkpoint",
    "ConnectionConfig": ".._connect",
    "ConnectionConfigError": ".._connect",
    "DEFAULT_TASK_QUEUE": ".._plugin",
    "ENCRYPTED_ENCODING": ".._codec",
    "ENV_ENCRYPTION_KEY": ".._codec",
    "ENV_ENCRYPTION_KEYS": ".._codec",
    "ENV_ENCRYPTION_KEY_ID": ".._codec",
    "EncryptionCodec": ".._codec",
    "EncryptionError": ".._codec",
    "GraphWorkflow": "._workflow",
    "KEY_ID_METADATA": ".._codec",
    "KeyRing": ".._codec",
    "LINEAGE_MEMO": ".._client",
    "PASSTHROUGH_MODULES": ".._plugin",
    "RawEvent": ".._client",
    "RunHandle": ".._client",
    "RunInput": ".._protocol",
    "STATUS_SEARCH_ATTRIBUTE": ".._protocol",
    "StepInput": ".._protocol",
    "TemporalWorkflowsPlugin": ".._plugin",
    "configure_tracing": ".._tracing",
    "flush_tracing": ".._tracing",
    "fork": ".._client",
    "free_port": ".._devserver",
    "get_run": ".._client",
    "make_codec_server": ".._codec_server",
    "send_or_start": ".._client",
    "start_dev_server": ".._devserver",
    "start_run": ".._client",
    "step_activity_name": ".._protocol",
    "temporal_cli_path": ".._devserver",
}


def _module(name: str) -> ModuleType:
    if name == ".._checkpoint":
        from .. import _checkpoint

        return _checkpoint
    if name == ".._client":
        from .. import _client

        return _client
    if name == ".._codec":
        from .. import _codec

        return _codec
    if name == ".._codec_server":
        from .. import _codec_server

        return _codec_server
    if name == ".._connect":
        from .. import _connect

        return _connect
    if name == ".._devserver":
        from .. import _devserver

        return _devserver
    if name == ".._plugin":
        from .. import _plugin

        return _plugin
    if name == ".._protocol":
        from .. import _protocol

        return _protocol
    if name == ".._tracing":
        from .. import _tracing

        return _tracing
    if name == "._workflow":
        from . import _workflow

        return _workflow
    raise AssertionError(name)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_TASK_QUEUE",
    "ENCRYPTED_ENCODING",
    "ENV_ENCRYPTION_KEY",
    "ENV_ENCRYPTION_KEYS",
    "ENV_ENCRYPTION_KEY_ID",
    "KEY_ID_METADATA",
    "LINEAGE_MEMO",
    "PASSTHROUGH_MODULES",
    "STATUS_SEARCH_ATTRIBUTE",
    "CheckpointCipher",
    "ConnectionConfig",
    "ConnectionConfigError",
    "EncryptionCodec",
    "EncryptionError",
    "GraphWorkflow",
    "KeyRing",
    "RawEvent",
    "RunHandle",
    "RunInput",
    "StepInput",
    "TemporalWorkflowsPlugin",
    "configure_tracing",
    "fork",
    "flush_tracing",
    "free_port",
    "get_run",
    "make_codec_server",
    "send_or_start",
    "start_dev_server",
    "start_run",
    "step_activity_name",
    "temporal_cli_path",
]
