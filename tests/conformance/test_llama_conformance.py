"""The LlamaIndex model on both hosts: the same run, event for event, in process and on Temporal.

A LlamaIndex-style run is the same engine and driver as a graph's, so the
record a user of either host sees (every superstep, step, streamed event,
output, status, failure; the committed state) must be identical. In process
the record is the run's driver events (``LlamaLocalRun.record``); on Temporal the
run's event stream. Both are normalised by the graph suite's normaliser.

The waiting scenario is the interesting one: in process the waiting step
stays suspended; on Temporal it runs again from the top when the answer
comes. The records must still agree, because the re-run repeats nothing the
run can see.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_core import to_jsonable_python
from temporalio.client import Client, WorkflowExecutionStatus

from temporal_workflows import WorkflowEvent
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._events import WorkflowStartedEvent
from temporal_workflows._graph.runs import materialize
from temporal_workflows.errors import StateConflictError
from temporal_workflows.llama import (
    Event,
    HumanResponseEvent,
    InputRequiredEvent,
    Workflow,
    start_run,
)
from temporal_workflows.llama._runtime import LlamaStreamEvent
from temporal_workflows.llama.handler import WorkflowHandler
from tests.conformance import scenarios as sc
from tests.conformance.test_conformance import RUN_TIMEOUT, Observed, Seen, differences, normalise
from tests.conftest import TASK_QUEUE

pytestmark = pytest.mark.usefixtures("worker")

Answer = Callable[[InputRequiredEvent], Event | list[Event]]


@dataclass(frozen=True)
class LlamaScenario:
    name: str
    workflow: Workflow
    start: dict[str, Any]
    answer: Answer | None = None
    fails_with: type[BaseException] | None = None
    facts: Callable[[Seen], None] | None = None


def _inner(ev: dict[str, Any]) -> dict[str, Any]:
    return ev["event"]["data"]  # type: ignore[no-any-return]


def _is_step_state(ev: dict[str, Any]) -> bool:
    return str(ev["event"]["type"]).endswith(":StepStateChanged")


def _streamed(s: Seen) -> list[dict[str, Any]]:
    """What the steps streamed themselves (``write_event_to_stream``, waiter events, notices)."""
    return [e for e in s.of("LlamaStreamEvent") if not _is_step_state(e)]


def _step_states(s: Seen) -> list[tuple[str, str, str, str | None, str]]:
    states = [_inner(e) for e in s.of("LlamaStreamEvent") if _is_step_state(e)]
    return [(d["name"], d["step_state"], d["input_event_name"], d["output_event_name"], d["worker_id"]) for d in states]


def chain_facts(s: Seen) -> None:
    assert s.steps() == [["a"], ["b"]]
    # A step's stream write sits between its running and not_running, as it was made, on both hosts.
    order = [
        (_inner(e)["name"], _inner(e)["step_state"]) if _is_step_state(e) else "write" for e in s.of("LlamaStreamEvent")
    ]
    assert order == [("a", "running"), "write", ("a", "not_running"), ("b", "running"), ("b", "not_running")]
    (streamed,) = _streamed(s)
    assert _inner(streamed) == {"text": "writing about bees"}
    assert s.outputs == [{"result": {"shout": "BEES!", "topic": "bees"}}]
    assert s.state == {"topic": "bees", "shout": "BEES!"}


def fan_facts(s: Seen) -> None:
    # The four events `square` got in superstep 2 are one task (one activity on Temporal).
    assert s.steps() == [["scatter"], ["square"], ["join"]]
    assert s.outputs == [{"result": [0, 1, 4, 9]}]


def loop_facts(s: Seen) -> None:
    assert s.steps() == [["tick"]] * 4
    assert s.outputs == [{"result": {"rounds": 4, "seen": [0, 1, 2, 3]}}]
    assert s.state == {"rounds": 4, "seen": [0, 1, 2, 3]}


def human_facts(s: Seen) -> None:
    (asked,) = _streamed(s)
    assert asked["event"]["type"].endswith(":InputRequiredEvent") and _inner(asked) == {"prefix": "what about bees?"}
    assert s.steps() == [["ask"], ["hear"]]
    assert s.outputs == [{"result": "heard 'yes'"}]
    states = [e["state"] for e in s.of("WorkflowStatusEvent")]
    assert "IDLE" in states[:-1], "the run idles until the answer comes, as a LlamaIndex run does"


def wait_facts(s: Seen) -> None:
    streamed = [_inner(e) for e in _streamed(s)]
    assert streamed == [{"text": "before the wait"}, {"prefix": "name?"}]  # each once, on both hosts
    assert s.steps() == [["ask"], ["note"], ["ask"]]
    # As in LlamaIndex, the wait ends the attempt (not_running, no output) and the answer runs the step again.
    assert [(n, st, out) for n, st, _, out, _ in _step_states(s) if n == "ask"] == [
        ("ask", "running", None),
        ("ask", "not_running", None),
        ("ask", "running", None),
        ("ask", "not_running", "<class 'temporal_workflows.llama.events.StopEvent'>"),
    ]
    assert s.outputs == [{"result": {"reply": "Ann", "n": 1}}]
    assert s.state == {"n": 1, "noted": "sent before the wait", "reply": "Ann"}
    states = [e["state"] for e in s.of("WorkflowStatusEvent")]
    assert "IDLE_WITH_PENDING_REQUESTS" in states


def fails_facts(s: Seen) -> None:
    (failed,) = s.of("ExecutorFailedEvent")
    assert failed["executor_id"] == "explode" and failed["error_type"] == "ValueError"
    assert failed["error"] == "cannot handle 'boom'"
    assert s.state == {"prepared": "boom"}
    assert s.outputs == []


def conflict_facts(s: Seen) -> None:
    assert s.error is not None
    assert s.error["message"].startswith("state key 'owner' was written by both 'left' and 'right' in superstep 2")
    assert s.state == {}


def halt_facts(s: Seen) -> None:
    assert s.steps() == [["start"], ["fast", "slow"]]  # the note `slow` queued for `fast` never runs
    assert s.outputs == [{"result": "fast wins"}]


def unhandled_facts(s: Seen) -> None:
    streamed = [e["event"] for e in _streamed(s)]
    assert [e["type"].rsplit(":", 1)[1] for e in streamed] == ["InputRequiredEvent", "UnhandledEvent"]
    assert streamed[1]["data"] == {
        "event_type": "LlamaStray",
        "qualified_name": "tests.conformance.scenarios.LlamaStray",
        "step_name": None,
        "idle": True,
    }
    assert s.outputs == [{"result": "pong hi"}]


def race_facts(s: Seen) -> None:
    # The fastest query answered; the slow step was cancelled (invoked, never completed) at once.
    assert s.outputs == [{"result": "fast"}]
    assert s.steps() == [["scatter"], ["crawl", "ask"]]
    completed = [e["executor_id"] for e in s.of("ExecutorCompletedEvent")]
    assert completed == ["scatter", "ask"]


def arrival_facts(s: Seen) -> None:
    """What two steps of one superstep sent is queued in the order they returned (#25.13), on both hosts."""
    assert s.steps() == [["scatter"], ["late", "early"], ["join"]]
    assert s.outputs == [{"result": ["early", "late"]}]


def step_state_facts(s: Seen) -> None:
    # LlamaIndex's StepStateChanged (stream_events(expose_internal=True)): each handled event's running, then
    # not_running with str() of the input and output classes. `square` (num_workers=2) gets its four events as one
    # task: two start on workers 0 and 1, the other two wait (preparing, "<enqueued>") for a free worker.
    note, part = "<class 'tests.conformance.scenarios.LlamaNote'>", "<class 'tests.conformance.scenarios.LlamaPart'>"
    start, none = "<class 'temporal_workflows.llama.events.StartEvent'>", "<class 'NoneType'>"
    stop = "<class 'temporal_workflows.llama.events.StopEvent'>"
    square = [("square", "running", "LlamaPart", None, w) for w in "0101"]
    squared = [("square", "not_running", part, note, w) for w in "0101"]
    joins = [("join", "running", "LlamaNote", None, w) for w in "0123"]
    joined = [("join", "not_running", note, none if w != "3" else stop, w) for w in "0123"]
    assert _step_states(s) == [
        ("scatter", "running", "StartEvent", None, "0"),
        ("scatter", "not_running", start, none, "0"),
        *[("square", "preparing", "LlamaPart", None, "<enqueued>")] * 2,
        *[pair[i] for pair in zip(square, squared, strict=True) for i in (0, 1)],
        *[pair[i] for pair in zip(joins, joined, strict=True) for i in (0, 1)],
    ]
    fan_facts(s)


def _stray_then_ping(ev: InputRequiredEvent) -> list[Event]:
    return [sc.LlamaStray(n=1), sc.LlamaPing(text="hi")]


def _name_answer(ev: InputRequiredEvent) -> HumanResponseEvent:
    return HumanResponseEvent(response="Ann", kind="name")


def _yes(ev: InputRequiredEvent) -> HumanResponseEvent:
    return HumanResponseEvent(response="yes")


SCENARIOS = [
    LlamaScenario("llama_chain", sc.CflChain(), {"topic": "bees"}, facts=chain_facts),
    LlamaScenario("llama_fan_out_collect", sc.CflFanOut(), {"width": 4}, facts=fan_facts),
    LlamaScenario("llama_step_state_changed", sc.CflFanOut(), {"width": 4}, facts=step_state_facts),
    LlamaScenario("llama_loop_typed_state", sc.CflLoop(), {}, facts=loop_facts),
    LlamaScenario("llama_input_required", sc.CflHuman(timeout=None), {"topic": "bees"}, _yes, facts=human_facts),
    LlamaScenario("llama_wait_for_event", sc.CflWait(timeout=None), {}, _name_answer, facts=wait_facts),
    LlamaScenario("llama_step_raises", sc.CflFails(), {"what": "boom"}, fails_with=ValueError, facts=fails_facts),
    LlamaScenario("llama_state_conflict", sc.CflConflict(), {}, fails_with=StateConflictError, facts=conflict_facts),
    LlamaScenario("llama_stop_event_halts", sc.CflHalt(), {}, facts=halt_facts),
    LlamaScenario("llama_unhandled_event", sc.CflUnhandled(), {}, _stray_then_ping, facts=unhandled_facts),
    LlamaScenario("llama_first_stop_event_wins_losers_cancelled", sc.CflRace(), {}, facts=race_facts),
    LlamaScenario("llama_events_queued_in_arrival_order", sc.CflArrival(), {}, facts=arrival_facts),
]


def _answers(s: LlamaScenario, ev: InputRequiredEvent) -> list[Event]:
    assert s.answer is not None
    got = s.answer(ev)
    return got if isinstance(got, list) else [got]


def _recorded(event: WorkflowEvent | Envelope) -> WorkflowEvent:
    return materialize(event)


def _llama_event(ev: WorkflowEvent) -> Event | None:
    if isinstance(ev, LlamaStreamEvent):
        from temporal_workflows._engine.serde import decode

        inner = decode(Envelope(ev.event["type"], ev.event["data"]))
        return inner if isinstance(inner, Event) else None
    return None


async def run_in_process(s: LlamaScenario) -> Observed:
    obs = Observed("in process")
    handler: WorkflowHandler = s.workflow.run(**s.start)
    run = handler._run
    run.record = lambda ev: obs.segment.events.append(_recorded(ev))
    obs.run_ids.add(run.run_id)
    try:
        async for ev in handler.stream_events():
            if isinstance(ev, InputRequiredEvent) and s.answer is not None:
                for answer in _answers(s, ev):
                    handler.ctx.send_event(answer)
        await handler
    except Exception as e:  # the run's failure, compared below
        obs.error = e
    obs.state = to_jsonable_python({k: v for k, v in run.engine.state.items() if not k.startswith("@")})
    obs.state = {k: v["data"] if isinstance(v, dict) and "data" in v else v for k, v in obs.state.items()}
    return obs


async def run_on_temporal(s: LlamaScenario, client: Client, workflow_id: str) -> Observed:
    obs = Observed("temporal", run_ids={workflow_id})
    run = await start_run(client, s.workflow, id=workflow_id, task_queue=TASK_QUEUE, **s.start)
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            async for ev in run.run.events():
                obs.segment.events.append(ev)
                if isinstance(ev, WorkflowStartedEvent):
                    obs.run_ids.add(ev.run_id)
                inner = _llama_event(ev)
                if isinstance(inner, InputRequiredEvent) and s.answer is not None:
                    for answer in _answers(s, inner):
                        await run.send_event(answer)
            try:
                await run.result()
            except Exception as e:  # the run's failure, compared below
                obs.error = e
        obs.state = await run.run.state()
    finally:
        with contextlib.suppress(Exception):
            if (await run.run.describe()).status == WorkflowExecutionStatus.RUNNING:
                await run.run.handle.terminate("conformance scenario done")
    return obs


def _error(obs: Observed) -> tuple[str, str] | None:
    return None if obs.error is None else (type(obs.error).__name__, str(obs.error))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_both_hosts_tell_the_same_llamaindex_story(
    scenario: LlamaScenario, client: Client, workflow_id: str
) -> None:
    local_obs = await asyncio.wait_for(run_in_process(scenario), RUN_TIMEOUT)
    remote_obs = await run_on_temporal(scenario, client, workflow_id)
    # The run's error as a LlamaIndex user sees it: the step's own exception class on both hosts.
    assert _error(local_obs) == _error(remote_obs), (_error(local_obs), _error(remote_obs))
    if scenario.fails_with is not None:
        assert isinstance(local_obs.error, scenario.fails_with), local_obs.error
    else:
        assert local_obs.error is None, local_obs.error
    local, remote = normalise(local_obs), normalise(remote_obs)
    problems = differences(local, remote)
    assert not problems, "\n\n".join(problems)
    if scenario.facts is not None:
        scenario.facts(local)
        scenario.facts(remote)


def test_every_llama_scenario_workflow_is_hosted_by_the_test_worker() -> None:
    from tests.conftest import hosted_workflows

    hosted = {wf.name for wf in hosted_workflows()}
    assert {s.workflow._temporal_name() for s in SCENARIOS} <= hosted
