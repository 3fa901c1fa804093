"""Agent Framework's guessing-game sample, its executor raising, on Temporal: the exception Agent Framework raises.

The port (``guessing_game_with_human_input`` in ``tests/maf_sample_ports.py``), its
model ``forgetful_guesser``, runs with ``durable=``: its workflow is hosted by a
worker of its own and the sample's ``run`` calls go to the durable twin
(``workflow.on_temporal``), as in ``test_maf_samples_temporal.py``.
``tests/test_maf_failing_sample.py`` compares Agent Framework and this library
in process.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import agent_framework
import pytest
from pydantic import ValidationError

import temporal_workflows
from temporal_workflows.errors import ExecutorFailedError
from tests.integration.test_maf_samples_temporal import Host
from tests.maf_sample_ports import forgetful_guesser, guessing_game_with_human_input


async def raised(
    mod: Any, capsys: pytest.CaptureFixture[str], address: str | None = None, **options: Any
) -> tuple[BaseException, list[str]]:
    """What the sample raised (on Temporal with ``address``), and the lines it printed before."""
    capsys.readouterr()
    async with AsyncExitStack() as stack:
        if address is not None:
            options["durable"] = Host(address, stack)
        with pytest.raises(Exception) as info:
            await guessing_game_with_human_input(mod, script=forgetful_guesser, **options)
    return info.value, capsys.readouterr().out.splitlines()


async def test_the_samples_own_runtime_error_is_raised_on_temporal_as_agent_framework_raises_it(
    temporal_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs, printed = await raised(agent_framework, capsys, response_format=False)
    assert type(theirs) is RuntimeError
    ours, ours_printed = await raised(temporal_workflows, capsys, temporal_address, response_format=False)
    assert ours_printed == printed
    assert isinstance(ours, RuntimeError) and type(ours).__name__ == "RuntimeError"
    assert str(ours) == str(theirs) and ours.args == theirs.args
    assert isinstance(ours, ExecutorFailedError) and ours.executor_id == "turn_manager"


async def test_a_reply_that_does_not_parse_raises_the_validation_error_on_temporal(
    temporal_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs, printed = await raised(agent_framework, capsys)
    assert type(theirs) is ValidationError
    ours, ours_printed = await raised(temporal_workflows, capsys, temporal_address)
    assert ours_printed == printed
    # pydantic's ValidationError cannot be made again on a client: the library's error, naming it (docs/maf.md).
    assert isinstance(ours, ExecutorFailedError) and ours.executor_id == "turn_manager"
    assert ours.error_class == "pydantic_core._pydantic_core.ValidationError"
    assert "1 validation error for GuessOutput" in str(ours)
    assert str(theirs).splitlines()[1].strip().split(" [")[0] in str(ours)  # "Invalid JSON: expected value ..."
