"""An Agent Framework sample whose executor raises, on Agent Framework and here: the same exception surface.

The port (``guessing_game_with_human_input`` in ``tests/maf_sample_ports.py``,
of ``python/samples/03-workflows/human-in-the-loop/guessing_game_with_human_input.py``)
runs here with a model that leaves the agreed format (``forgetful_guesser``). Its ``TurnManager`` raises
the sample's own ``RuntimeError`` (the agent built without ``response_format``)
or pydantic's ``ValidationError`` from reading ``.value`` (the reply does not
parse). Here the same exception reaches the caller of ``run``, with what the
sample printed before it: the step's own class where it can be combined with
``ExecutorFailedError`` (docs/maf.md), else ``ExecutorFailedError`` holding it.
``tests/integration/test_maf_failing_sample_temporal.py`` runs it on Temporal.
"""

from __future__ import annotations

from typing import Any

import agent_framework
import pytest
from pydantic import ValidationError

import temporal_workflows
from temporal_workflows.errors import ExecutorFailedError
from tests.maf_sample_ports import forgetful_guesser, guessing_game_with_human_input

SAMPLE_MESSAGE = (
    "AgentResponse.value is None. Ensure that the agent is invoked with "
    "options={'response_format': GuessOutput} so structured output is available."
)


async def raised(mod: Any, capsys: pytest.CaptureFixture[str], **options: Any) -> tuple[BaseException, list[str]]:
    """What the sample raised, and the lines it printed before."""
    capsys.readouterr()
    with pytest.raises(Exception) as info:
        await guessing_game_with_human_input(mod, script=forgetful_guesser, **options)
    return info.value, capsys.readouterr().out.splitlines()


async def test_the_samples_own_runtime_error_is_raised_as_agent_framework_raises_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    theirs, printed = await raised(agent_framework, capsys, response_format=False)
    assert type(theirs) is RuntimeError and str(theirs) == SAMPLE_MESSAGE
    ours, ours_printed = await raised(temporal_workflows, capsys, response_format=False)
    assert ours_printed == printed
    assert isinstance(ours, RuntimeError) and type(ours).__name__ == "RuntimeError"
    assert str(ours) == str(theirs) and ours.args == theirs.args
    assert isinstance(ours, ExecutorFailedError) and ours.executor_id == "turn_manager"
    assert ours.error_class == "builtins.RuntimeError"


async def test_a_reply_that_does_not_parse_raises_the_validation_error_in_the_reading_executor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    theirs, printed = await raised(agent_framework, capsys)
    assert type(theirs) is ValidationError and theirs.title == "GuessOutput"
    assert printed[-1] == "Then I would say eight."  # the reply the next executor failed to read
    ours, ours_printed = await raised(temporal_workflows, capsys)
    assert ours_printed == printed
    # pydantic's ValidationError cannot be subclassed: a plain ExecutorFailedError holds it (docs/maf.md).
    assert isinstance(ours, ExecutorFailedError) and ours.executor_id == "turn_manager"
    assert ours.error_class == "pydantic_core._pydantic_core.ValidationError"
    assert type(ours.original) is ValidationError and str(ours.original) == str(theirs)
    assert ours.__cause__ is ours.original
    assert "1 validation error for GuessOutput" in str(ours)
