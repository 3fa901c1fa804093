"""Connecting through ``ConnectionConfig`` to the session's dev server, from code and from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from temporal_workflows.temporal import ConnectionConfig, TemporalWorkflowsPlugin, start_run
from tests.conftest import TASK_QUEUE
from tests.integration.cli import run_cli

pytestmark = pytest.mark.usefixtures("worker")


async def test_a_client_from_the_environment_starts_and_reads_a_run(temporal_address: str, workflow_id: str) -> None:
    from examples import research

    config = ConnectionConfig.from_env({"TEMPORAL_ADDRESS": temporal_address, "TEMPORAL_NAMESPACE": "default"})
    client = await config.connect(plugins=[TemporalWorkflowsPlugin(tracing=False, encryption=None)])
    assert client.namespace == "default"
    handle = await start_run(client, research.workflow, research.SAMPLE_INPUT, id=workflow_id, task_queue=TASK_QUEUE)
    assert (await handle.result())["status"] == "completed"


async def test_an_api_key_travels_as_a_bearer_token(temporal_address: str) -> None:
    # The dev server ignores authorization; TLS is forced off because it speaks plain gRPC.
    client = await ConnectionConfig(address=temporal_address, api_key="test-key", tls=False).connect()
    assert client.service_client.config.api_key == "test-key"
    await client.count_workflows()


async def test_cli_flags_override_the_environment(temporal_address: str) -> None:
    code, out, err = await run_cli(
        "unreachable.invalid:1",  # TEMPORAL_ADDRESS: overridden by the flag
        "--address",
        temporal_address,
        "--no-tls",
        "run",
        "examples.research:workflow",
        "--input",
        '{"topic": "flags"}',
        "--task-queue",
        TASK_QUEUE,
        "--no-wait",
    )
    assert code == 0, err
    assert out.startswith("started ")


async def test_cli_refuses_half_an_mtls_pair_before_connecting(tmp_path: Path, temporal_address: str) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("not really a certificate")
    code, _, err = await run_cli(temporal_address, "status", "any-id", env={"TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert)})
    assert code == 2
    assert "--tls-cert is set but --tls-key is not" in err
    code, out, _ = await run_cli(temporal_address, "--help")
    assert code == 0 and "--tls-server-name" in out and "--api-key" in out
