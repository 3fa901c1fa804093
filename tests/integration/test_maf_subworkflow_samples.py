"""Agent Framework's sub-workflow samples, ported, print what Agent Framework prints: in process and on Temporal.

Each port (``tests/maf_ports``) runs in a process of its own (the samples keep
state in executor attributes, as Agent Framework's do); its output is
compared, line for line, with the output of Agent Framework 1.23 running its
own sample (``*.expected.txt``, recorded with ``agent-framework-core==1.23.0``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORTS = ROOT / "tests" / "maf_ports"
SAMPLES = ["text_processing", "resource_requests"]


def run_port(name: str, *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", f"tests.maf_ports.{name}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


@pytest.mark.parametrize("name", SAMPLES)
def test_the_port_prints_what_agent_framework_prints_in_process(name: str) -> None:
    expected = (PORTS / f"{name}.expected.txt").read_text()
    assert run_port(name).splitlines() == expected.splitlines()


def test_the_sub_workflow_basics_print_what_agent_framework_prints_on_temporal(temporal_address: str) -> None:
    # With default options: one sender's messages to one executor run in send order, as in Agent Framework.
    expected = (PORTS / "text_processing.expected.txt").read_text()
    assert run_port("text_processing", temporal_address).splitlines() == expected.splitlines()


def test_the_parallel_requests_sample_prints_what_agent_framework_prints_on_temporal(temporal_address: str) -> None:
    expected = (PORTS / "resource_requests.expected.txt").read_text().splitlines()
    printed = run_port("resource_requests", temporal_address).splitlines()
    # Everything up to the two outside answers, in order: the sub-workflow's requests, the
    # parent's interceptions, and the sub-workflow resumed once per answer, in task order.
    cut = expected.index("Handling 2 request info events...") + 2
    assert printed[:cut] == expected[:cut]
    # A run on Temporal takes outside input at the first boundary after it arrives: the two
    # answers, sent one after the other, may reach one boundary or two, and in the second
    # case the first answer's lines come before the second's. The lines themselves are the same.
    tail = expected[-3:]
    assert printed[-3:] == tail
    assert sorted(printed[cut:-3]) == sorted(expected[cut:-3])
    first_answer = printed.index("External resource allocated: 1 gpu from external_provider")
    assert printed.index("Resource allocated: 1 gpu from external_provider") > first_answer
    assert printed.index("Collected 7/7 responses") == len(printed) - 4
