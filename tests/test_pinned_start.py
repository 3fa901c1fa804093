"""The one place every start goes through: only the server's "version not learned yet" refusal of a pinned start
is sent again, for a bounded time, then named (``temporal/_client/starting.py``). On a real server:
``tests/integration/test_versioning.py::test_a_start_pinned_to_a_version_its_queue_has_not_learned_waits_for_it_and_makes_one_run``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from temporalio.client import Client
from temporalio.common import AutoUpgradeVersioningOverride, PinnedVersioningOverride, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from temporal_workflows.errors import WorkerVersionNotReadyError
from temporal_workflows.temporal._client import starting

QUEUE = "q"
PINNED = PinnedVersioningOverride(WorkerDeploymentVersion("app", "graphs-1"))
REFUSAL = "Pinned version 'app:graphs-1' is not present in task queue 'q' of type 'Workflow'"


def rpc(message: str, status: RPCStatusCode = RPCStatusCode.FAILED_PRECONDITION) -> RPCError:
    return RPCError(message, status, b"")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (rpc(REFUSAL), True),
        (rpc("Pinned version is not present in the task queue"), True),  # servers up to 1.30
        (rpc(REFUSAL, RPCStatusCode.INVALID_ARGUMENT), False),
        (rpc("Pinned version 'app:graphs-2' is not present in task queue 'q' of type 'Workflow'"), False),
        (rpc("Pinned version 'app:graphs-1' is not present in task queue 'other' of type 'Workflow'"), False),
        (rpc(REFUSAL + " (and more)"), False),
        (rpc("Workflow execution is already running"), False),
        (RuntimeError(REFUSAL), False),
    ],
    ids=["refusal", "legacy-words", "other-status", "other-version", "other-queue", "longer", "other", "not-rpc"],
)
def test_only_the_exact_refusal_for_this_version_and_queue_is_recognised(error: BaseException, expected: bool) -> None:
    assert starting.not_learned(error, PINNED, QUEUE) is expected
    assert not starting.not_learned(error, None, QUEUE)  # an unpinned start is never refused so
    assert not starting.not_learned(error, AutoUpgradeVersioningOverride(), QUEUE)


class Starts:
    """A client whose starts fail with ``errors`` in turn, then succeed; it counts them."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []

    async def start_workflow(self, workflow: str, arg: Any, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)
        return "handle"

    async def execute_update_with_start_workflow(self, update: str, arg: Any, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)
        return "accepted"


async def start(client: Starts, override: Any = PINNED, **kwargs: Any) -> Any:
    return await starting.start_workflow(
        cast(Client, client), "g", {}, id="run-1", task_queue=QUEUE, versioning_override=override, **kwargs
    )


async def test_a_refused_start_is_sent_again_until_the_queue_learns_the_version() -> None:
    client = Starts(rpc(REFUSAL), rpc(REFUSAL))
    assert await start(client, start_signal="send", start_signal_args=["hi"]) == "handle"
    assert len(client.calls) == 3
    assert all(c["start_signal"] == "send" and c["start_signal_args"] == ["hi"] for c in client.calls)
    assert all(c["id"] == "run-1" and c["versioning_override"] is PINNED for c in client.calls)


@pytest.mark.parametrize(
    "error",
    [
        rpc("Workflow execution is already running"),
        rpc(REFUSAL, RPCStatusCode.UNAVAILABLE),
        rpc("Pinned version 'app:graphs-2' is not present in task queue 'q' of type 'Workflow'"),
        ValueError("bad input"),
    ],
    ids=["other-precondition", "other-status", "other-version", "not-rpc"],
)
async def test_every_other_error_passes_through_untouched_after_one_attempt(error: BaseException) -> None:
    client = Starts(error)
    with pytest.raises(type(error)) as raised:
        await start(client)
    assert raised.value is error and len(client.calls) == 1


async def test_an_unpinned_start_is_sent_once_whatever_it_is_told() -> None:
    client = Starts(rpc(REFUSAL))
    with pytest.raises(RPCError):
        await start(client, override=None)
    assert len(client.calls) == 1


async def test_a_version_never_learned_ends_in_the_named_error_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(starting, "PINNED_START_WAIT", 0.5)
    client = Starts(*[rpc(REFUSAL) for _ in range(100)])
    with pytest.raises(WorkerVersionNotReadyError) as raised:
        await start(client)
    message = str(raised.value)
    assert "run 'run-1' was not started" in message and "worker version 'app:graphs-1'" in message
    assert "task queue 'q'" in message and "Start a worker of that version on the queue" in message
    assert isinstance(raised.value.__cause__, RPCError) and raised.value.__cause__.message == REFUSAL
    # Backoff from 0.1 s, doubling: a handful of attempts in half a second, not a busy loop.
    assert 2 <= len(client.calls) <= 5, len(client.calls)


async def test_update_with_start_makes_a_new_operation_for_each_attempt() -> None:
    client = Starts(rpc(REFUSAL))
    made: list[Any] = []

    class Operation:
        async def workflow_handle(self) -> str:
            return "handle"

    def operation() -> Any:
        made.append(Operation())
        return made[-1]

    result = await starting.update_with_start(
        cast(Client, client),
        "send_message",
        {},
        operation=operation,
        workflow_id="run-1",
        task_queue=QUEUE,
        versioning_override=PINNED,
        result_type=dict,
    )
    assert result == ("accepted", "handle")
    assert len(made) == 2 and [c["start_workflow_operation"] for c in client.calls] == made
