"""Hosting graphs on Temporal: the plugin, the client layer, connections, encryption and the dev-server helper.

from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run
"""

from ._checkpoint import CheckpointCipher
from ._client import LINEAGE_MEMO, RawEvent, RunHandle, fork, get_run, send_or_start, start_run
from ._codec import (
    ENCRYPTED_ENCODING,
    ENV_ENCRYPTION_KEY,
    ENV_ENCRYPTION_KEY_ID,
    ENV_ENCRYPTION_KEYS,
    KEY_ID_METADATA,
    EncryptionCodec,
    EncryptionError,
    KeyRing,
)
from ._codec_server import make_codec_server
from ._connect import ConnectionConfig, ConnectionConfigError
from ._devserver import free_port, start_dev_server, temporal_cli_path
from ._plugin import DEFAULT_TASK_QUEUE, PASSTHROUGH_MODULES, TemporalWorkflowsPlugin
from ._protocol import STATUS_SEARCH_ATTRIBUTE, RunInput, StepInput, step_activity_name
from ._temporal_workflow import GraphWorkflow
from ._tracing import configure_tracing, flush_tracing

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
