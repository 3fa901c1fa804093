"""For integrators: the workflow, its wire contract and the codec server's parts.

A user of the library needs none of this: ``TemporalWorkflowsPlugin`` registers
the workflow and its activities, ``start_run`` / ``RunHandle`` speak the wire
contract, and the CLI serves the codec. These names are for code that talks to
a graph run *without* this client: starting :class:`GraphWorkflow` with
Temporal's own client (``RunInput``), another SDK or the ``temporal`` CLI
(the status search attribute, the lineage memo, activity type names, the
default task queue), a sandboxed worker built by hand (``PASSTHROUGH_MODULES``),
a codec server or key tooling of one's own (the encryption metadata and
``ENV_*`` variables, ``CheckpointCipher``, ``make_codec_server``), or a
reader of raw event streams (``RawEvent``, ``RawLiveEvent``, ``EventView``,
``EventStream``: what ``RunHandle.events`` returns, with its resume offset; and
what ``RunHandle`` reads of a LlamaIndex run: ``LlamaEvent``, ``LlamaRestEvent``,
``LlamaRunFailedError``).

They are stable in the same way the public API is (``docs/api.md``), but
changing them changes what runs and stored histories carry, so they are kept
apart from the user's surface.
"""

from __future__ import annotations

from temporal_workflows._checkpoints.base import CheckpointCipher
from temporal_workflows.temporal._client.client import LINEAGE_MEMO, EventStream, EventView, RawEvent, RawLiveEvent
from temporal_workflows.temporal._client.codec_server import CodecServer, make_codec_server
from temporal_workflows.temporal._client.llama import LlamaEvent, LlamaRestEvent, LlamaRunFailedError
from temporal_workflows.temporal._codec import (
    ENCRYPTED_ENCODING,
    ENV_ENCRYPTION_KEY,
    ENV_ENCRYPTION_KEY_ID,
    ENV_ENCRYPTION_KEYS,
    KEY_ID_METADATA,
)
from temporal_workflows.temporal._protocol import STATUS_SEARCH_ATTRIBUTE, RunInput, step_activity_name
from temporal_workflows.temporal._telemetry.config import flush_tracing
from temporal_workflows.temporal._worker.plugin import DEFAULT_TASK_QUEUE, PASSTHROUGH_MODULES
from temporal_workflows.temporal._worker.versioning import build_id_for
from temporal_workflows.temporal._workflow.workflow import GraphWorkflow

__all__ = [
    # the workflow and its start input
    "GraphWorkflow",
    "RunInput",
    "step_activity_name",
    # what runs carry, readable from other clients and the temporal CLI
    "DEFAULT_TASK_QUEUE",
    "LINEAGE_MEMO",
    "STATUS_SEARCH_ATTRIBUTE",
    "build_id_for",
    # workers built by hand
    "PASSTHROUGH_MODULES",
    "flush_tracing",
    # encryption on the wire and codec servers
    "CheckpointCipher",
    "CodecServer",
    "ENCRYPTED_ENCODING",
    "ENV_ENCRYPTION_KEY",
    "ENV_ENCRYPTION_KEYS",
    "ENV_ENCRYPTION_KEY_ID",
    "KEY_ID_METADATA",
    "make_codec_server",
    # raw event streams
    "EventStream",
    "EventView",
    "RawEvent",
    "RawLiveEvent",
    # a LlamaIndex run (TemporalRuntime) as RunHandle reads it
    "LlamaEvent",
    "LlamaRestEvent",
    "LlamaRunFailedError",
]
