"""One engine, two hosts: every scenario runs in process and on Temporal, and both must agree.

For each scenario the suite drives the graph in process and on Temporal the same way (start
it, answer its requests or let them time out, resume it from a checkpoint),
records what a user sees (every event, the outputs, the committed state, the
pending requests at each pause, the run's error) and puts both records through
one normaliser that masks only what is specific to a run: run ids, checkpoint
ids, request ids (numbered ``req-1``, ``req-2`` in order of first appearance,
also where messages quote them) and timestamps. The two records must then be
equal, event for event.

The in-process and Temporal hosts could be wrong in the same way, so each scenario also states a few
facts by hand (two failing steps give two ``ExecutorFailedEvent``s, a state
conflict names its key, ...), checked on each host's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from examples import approval, counter_loop, research
from temporal_workflows import Workflow, WorkflowEvent, WorkflowRunState
from temporal_workflows._engine.limits import TRUNCATED_KEY, max_payload_bytes, truncated_state
from temporal_workflows._engine.serde import encode, type_key
from temporal_workflows.errors import (
    CheckpointStorageError,
    ExecutorFailedError,
    ReducerError,
    RequestTimeoutError,
    StateConflictError,
    SuperstepLimitError,
    WorkflowRunError,
)
from temporal_workflows.events import (
    RequestInfoEvent,
    SuperStepCompletedEvent,
    WorkflowResetEvent,
    WorkflowStartedEvent,
    WorkflowStatusEvent,
)
from temporal_workflows.temporal import RunHandle, start_run
from tests.conformance import scenarios as sc
from tests.conftest import TASK_QUEUE
from tests.integration import robust_graphs as rg
from tests.integration import subgraphs as sg

pytestmark = pytest.mark.usefixtures("worker")

RUN_TIMEOUT = 30.0
"""Longest one host may take over one scenario before the test gives up (a hang is a failure)."""

TIME_OUT: Any = object()
"""An answer policy's way of saying "do not answer this request: let it time out"."""

Answer = Callable[[str, Any], Any]
"""``(executor_id, request as JSON) -> response`` (or ``TIME_OUT``)."""

Json = Any


# -- what one host showed ------------------------------------------------------------------


@dataclass
class Segment:
    """The events of a run up to a resume (or the end), and the pending requests at each pause in it."""

    events: list[WorkflowEvent] = field(default_factory=list)
    pending: list[list[dict[str, Json]]] = field(default_factory=list)
    """At each pause with requests, each pending request in its one form (``RequestInfoEvent`` JSON, data as stored)."""


@dataclass
class Observed:
    """Everything a user of one host saw of one scenario, before normalisation."""

    host: str
    segments: list[Segment] = field(default_factory=lambda: [Segment()])
    state: dict[str, Json] = field(default_factory=dict)
    error: BaseException | None = None
    run_ids: set[str] = field(default_factory=set)
    """Run-specific ids (run id, workflow id) masked as ``<run>`` wherever they appear."""
    checkpoints: list[int] = field(default_factory=list)
    """The superstep of each checkpoint of the run, oldest first (a graph with a checkpoint storage)."""

    @property
    def segment(self) -> Segment:
        return self.segments[-1]

    def resumed(self) -> Segment:
        self.segments.append(Segment())
        return self.segment


# -- the normaliser (one for both graph hosts) ------------------------------------------------------

_CHECKPOINT_LIKE = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
_REQUEST_LIKE = re.compile(
    r"(?<![0-9a-f-])(?:[0-9a-f]{20}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?![0-9a-f-])"
)
"""A request id: derived ones are UUIDs (20 hex digits in runs recorded before)."""
_TIME_KEYS = {"created_at", "deadline", "timestamp", "duration", "elapsed"}


class Masker:
    """Masks run-specific values consistently within one segment of one host's record."""

    def __init__(self, run_ids: set[str]) -> None:
        # Longest first, so an id that contains another is replaced whole.
        self.run_ids = sorted((r for r in run_ids if r), key=len, reverse=True)
        self.requests: dict[str, str] = {}
        self.checkpoints: dict[str, str] = {}

    def request(self, rid: str) -> str:
        return self.requests.setdefault(rid, f"req-{len(self.requests) + 1}")

    def checkpoint(self, cid: str | None) -> str | None:
        return None if cid is None else self.checkpoints.setdefault(cid, f"cp-{len(self.checkpoints) + 1}")

    def text(self, s: str) -> str:
        for rid in self.run_ids:
            s = s.replace(rid, "<run>")
        for rid in list(self.requests):
            s = s.replace(rid, self.requests[rid])
        s = _CHECKPOINT_LIKE.sub(lambda m: self.checkpoint(m.group()) or "", s)
        return _REQUEST_LIKE.sub(lambda m: self.request(m.group()), s)

    def value(self, v: Json, key: str | None = None) -> Json:
        if key in _TIME_KEYS and v is not None:
            return "<time>"
        if key == "request_id" and isinstance(v, str):
            return self.request(v)
        if key == "checkpoint_id" and isinstance(v, str):
            return self.checkpoint(v)
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v

    def event(self, ev: WorkflowEvent) -> dict[str, Json]:
        body = ev.model_dump(mode="json", fallback=_jsonable)  # a plain class in an event's data: its stored JSON
        body.pop("timestamp", None)  # when the event was published: Temporal's workflow time, none in process
        body.pop("worker", None)  # which worker ran a step: a Temporal worker's identity, none in process
        if isinstance(ev, WorkflowStartedEvent):
            body["run_id"] = "<run>"
        # Request ids first, so that messages quoting them are mapped in order of appearance.
        if isinstance(ev, RequestInfoEvent):
            self.request(ev.request_id)
        return {"class": type(ev).__name__, **self.value(body)}


@dataclass
class Seen:
    """One host's record, normalised: what the two hosts must agree on."""

    events: list[list[dict[str, Json]]]
    """Per segment (the run, then what follows each resume), every event in order."""
    pending: list[list[list[dict[str, Json]]]]
    """Per segment, at each pause with requests, the pending requests in order (id, executor, data)."""
    requests: list[list[list[dict[str, Json]]]]
    """The same pending requests whole: every field of the one form both graph hosts list them in."""
    outputs: list[Json]
    state: dict[str, Json]
    error: dict[str, Json] | None
    checkpoints: list[int] = field(default_factory=list)
    """The superstep of each of the run's checkpoints, oldest first (Agent Framework's ``iteration_count``)."""

    def comparable(self) -> dict[str, Json]:
        return {
            "events": self.events,
            "pending": self.pending,
            "requests": self.requests,
            "outputs": self.outputs,
            "state": self.state,
            "error": self.error,
            "checkpoints": self.checkpoints,
        }

    def all_events(self) -> Iterator[dict[str, Json]]:
        for segment in self.events:
            yield from segment

    def of(self, cls: str, segment: int | None = None) -> list[dict[str, Json]]:
        events = self.all_events() if segment is None else iter(self.events[segment])
        return [e for e in events if e["class"] == cls]

    def steps(self, segment: int = 0) -> list[list[str]]:
        return [e["executor_ids"] for e in self.of("SuperStepStartedEvent", segment)]


_LIBRARY = "temporal_workflows."


def normalise(obs: Observed) -> Seen:
    maskers = [Masker(obs.run_ids) for _ in obs.segments]
    events = [[m.event(ev) for ev in seg.events] for m, seg in zip(maskers, obs.segments, strict=True)]
    pending = [
        [
            [
                {
                    "request_id": m.request(p["request_id"]),
                    "executor_id": p["source_executor_id"],
                    "data": m.value(p["data"]),
                }
                for p in pause
            ]
            for pause in seg.pending
        ]
        for m, seg in zip(maskers, obs.segments, strict=True)
    ]
    requests = [
        [[m.value(p) for p in pause] for pause in seg.pending] for m, seg in zip(maskers, obs.segments, strict=True)
    ]
    last = maskers[-1]
    error = None
    if obs.error is not None:
        error = {
            # what the caller catches and prints: a step's own exception (also ExecutorFailedError), or the library's
            "class": type(obs.error).__name__,
            "message": last.text(str(obs.error)),
            # the library's account of it, which the WorkflowFailedEvent gives
            "library_class": next(
                (c.__name__ for c in type(obs.error).__mro__ if c.__module__.startswith(_LIBRARY)), None
            ),
            "summary": last.text(getattr(obs.error, "summary", str(obs.error))),
            "superstep": getattr(obs.error, "superstep", None),
            "executor_id": getattr(obs.error, "executor_id", None),
            # the step's own error class, named the same in process and on Temporal (a user's class is rebuilt from it)
            "error_class": getattr(obs.error, "error_class", None),
        }
    outputs = [e["data"] for seg in events for e in seg if e["class"] == "WorkflowOutputEvent"]
    return Seen(events, pending, requests, outputs, last.value(obs.state), error, obs.checkpoints)


def wf_run_id(obs: Observed) -> str:
    """The in-process run id (from its ``started`` event)."""
    return next(ev.run_id for seg in obs.segments for ev in seg.events if isinstance(ev, WorkflowStartedEvent))


def _jsonable(value: Any) -> Json:
    """A value as a Temporal run shows it (state query, pending requests): its stored JSON, tagged where needed."""
    return encode(value).data


def _pending_json_local(request: RequestInfoEvent) -> dict[str, Json]:
    """A pending request as ``Workflow.pending_requests`` lists it, its (restored) data as stored JSON again."""
    return {**request.model_dump(mode="json", exclude={"data"}), "data": _jsonable(request.data)}


def _pending_json_remote(request: RequestInfoEvent) -> dict[str, Json]:
    """A pending request as ``RunHandle.pending_requests(restore=False)`` lists it: the same type, data as stored."""
    return {**request.model_dump(mode="json", exclude={"data"}), "data": request.data}


def _checkpoint_after(events: list[WorkflowEvent], superstep: int) -> str:
    for ev in events:
        if isinstance(ev, SuperStepCompletedEvent) and ev.superstep == superstep and ev.checkpoint_id:
            return ev.checkpoint_id
    raise AssertionError(f"no checkpoint was taken after superstep {superstep}")


# -- the scenarios ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    graph: Workflow
    message: Any
    answer: Answer | None = None
    """Given when the run waits for input; ``None``: the run is not expected to ask."""
    fails_with: type[BaseException] | None = None
    resume_from: int | None = None
    """At the first pause with requests, resume from the checkpoint taken after this superstep
    (0: the one taken before the first superstep)."""
    facts: Callable[[Seen], None] | None = None
    """Assertions written by hand, checked on each host's record."""


def _review(executor_id: str, request: Any) -> approval.ReviewDecision:
    """The approval example's reviewer: ask for sources once, then approve."""
    ok = "Sources:" in request["draft"]["text"]
    return approval.ReviewDecision(approved=ok, feedback="" if ok else "please cite your sources")


def _let_it_time_out(executor_id: str, request: Any) -> Any:
    return TIME_OUT


def chain_facts(s: Seen) -> None:
    assert s.steps() == [["upper"], ["exclaim"], ["deliver"]]
    assert s.outputs == [{"text": "HELLO!", "hops": 3}]
    assert s.state == {"path": ["upper", "exclaim", "deliver"], "length": 6}
    (progress,) = s.of("Progress")
    assert progress["step"] == "exclaim" and progress["length"] == 5
    (out,) = s.of("WorkflowOutputEvent")
    assert out["executor_id"] == "deliver" and out["data_type"] == "tests.conformance.scenarios:Shout"


def live_facts(s: Seen) -> None:
    # The step's live items arrive while it runs, numbered and tagged with their step; its committed
    # events follow at the superstep's commit, in the order it produced them (invoked, the committed
    # marker, its own events, completed); the next step streams nothing.
    narrate = [e["class"] for e in s.events[0]]
    start = narrate.index("SuperStepStartedEvent") + 1
    assert narrate[start : start + 7] == [
        "StepProgressEvent",
        "StepProgressEvent",
        "StepProgressEvent",
        "ExecutorInvokedEvent",
        "LiveCommittedEvent",
        "Progress",
        "ExecutorCompletedEvent",
    ]
    items = s.of("StepProgressEvent")
    assert [(e["message"], e["seq"], e["attempt"], e["executor_id"], e["superstep"]) for e in items] == [
        ("one", 1, 1, "narrate", 1),
        ("two", 2, 1, "narrate", 1),
        ("three", 3, 1, "narrate", 1),
    ]
    (marker,) = s.of("LiveCommittedEvent")
    assert (marker["executor_id"], marker["attempt"], marker["items"]) == ("narrate", 1, 3)
    assert s.outputs == ["ONE TWO THREE"]


def live_too_large_facts(s: Seen) -> None:
    # The event over the limit is not streamed: a note with its tags, class and size stands in for it, and
    # the items around it arrive as ever (the same in process and on Temporal: the rule is the step context's).
    items = [e for e in s.events[0] if e["class"] in ("StepProgressEvent", "LiveOmittedEvent")]
    assert [(e["class"], e["seq"]) for e in items] == [
        ("StepProgressEvent", 1),
        ("LiveOmittedEvent", 2),
        ("StepProgressEvent", 3),
    ]
    note = items[1]
    assert (note["executor_id"], note["event_type"]) == ("oversharer", "progress")
    assert note["event_class"] == "temporal_workflows._live:StepProgressEvent" and note["size"] > note["limit"]
    (marker,) = s.of("LiveCommittedEvent")
    assert marker["items"] == 3
    assert s.outputs == ["shared"]


def fan_facts(s: Seen) -> None:
    assert s.steps() == [["scatter"], ["times2", "times3", "times5"], ["gather"]]
    assert s.outputs == [{"products": [14, 21, 35], "total": 70}]  # fan-in in source order
    assert s.state == {"total": 70, "log": ["scatter", "times2", "times3", "times5"]}


def research_facts(s: Seen) -> None:
    (report,) = s.outputs
    assert report["topic"] == research.SAMPLE_INPUT.topic
    assert [f["researcher"] for f in report["sections"]] == list(research.RESEARCHERS)
    assert s.state["findings"] == report["sections"]
    assert s.steps() == [["planner"], list(research.RESEARCHERS), ["writer"]]


def counter_loop_facts(s: Seen) -> None:
    (final,) = s.outputs
    assert final["reached_target"] is True and final["score"] >= counter_loop.SAMPLE_INPUT.target_score
    assert len(s.state["scores"]) == final["rounds"]
    assert "@refiner/rounds" not in s.state  # executor-private state is not shared state


def approval_facts(s: Seen) -> None:
    assert len(s.of("RequestInfoEvent")) == 2
    assert [len(p) for p in s.pending[0]] == [1, 1]
    assert [p[0]["executor_id"] for p in s.pending[0]] == ["reviewer", "reviewer"]
    (pub,) = s.outputs
    assert pub["status"] == "published" and pub["rounds"] == 2 and "Sources:" in pub["text"]
    assert [r["approved"] for r in s.state["reviews"]] == [False, True]


def raises_facts(s: Seen) -> None:
    (failed,) = s.of("ExecutorFailedEvent")
    assert failed["executor_id"] == "explode" and failed["superstep"] == 2
    assert failed["error_type"] == "ValueError" and failed["error"] == "cannot handle 'boom'"
    assert s.error is not None
    # The step's own exception, as Agent Framework raises it, that is also the library's ExecutorFailedError.
    assert (s.error["class"], s.error["message"]) == ("ValueError", "cannot handle 'boom'")
    assert s.error["library_class"] == "ExecutorFailedError"
    assert s.error["summary"] == "executor 'explode' failed in superstep 2: ValueError: cannot handle 'boom'"
    assert s.error["executor_id"] == "explode" and s.error["superstep"] == 2
    assert s.error["error_class"] == "builtins.ValueError"
    assert s.state == {"prepared": "boom"}  # the failed superstep's write is discarded
    assert s.outputs == []


def large_state_facts(s: Seen) -> None:
    (failed,) = s.of("ExecutorFailedEvent")
    # Four values of 1.8 MB fit (each step read the state in pages, on Temporal one query per page); a fifth
    # would take the state past STATE_PAYLOADS payloads.
    assert failed["executor_id"] == "write_e" and failed["superstep"] == 5
    assert failed["error_type"] == "PayloadTooLargeError"
    error = str(failed["error"])
    assert "'e' (1,800,037 bytes, by 'write_e')" in error and "'a' (1,800,037 bytes)" in error
    assert s.error is not None and s.error["executor_id"] == "write_e"
    # The previous boundary's state, as the state query answers it: cut to one payload, with a note.
    assert list(s.state) == ["a", TRUNCATED_KEY]
    assert str(s.state[TRUNCATED_KEY]).startswith("3 of 4 state keys")


def own_error_facts(s: Seen) -> None:
    """A step's own exception class is named by its qualified name on both graph hosts (rebuilt on the client)."""
    (failed,) = s.of("ExecutorFailedEvent")
    assert failed["error_type"] == "QuotaExceeded" and failed["error"] == "quota exceeded for 'ann'"
    assert s.error is not None and s.error["error_class"] == "tests.conformance.scenarios.QuotaExceeded"
    # Rebuilt on the client (the class is imported there and takes its message): the same as in process.
    assert (s.error["class"], s.error["message"]) == ("QuotaExceeded", "quota exceeded for 'ann'")
    assert s.error["library_class"] == "ExecutorFailedError"


def missing_key_facts(s: Seen) -> None:
    """An exception whose message quotes its argument reads as Python shows it, once quoted, on both graph hosts."""
    (failed,) = s.of("ExecutorFailedEvent")
    assert (failed["error_type"], failed["error"]) == ("KeyError", "'missing-key'")
    assert s.error is not None and (s.error["class"], s.error["message"]) == ("KeyError", "'missing-key'")
    assert s.error["summary"] == "executor 'look_up' failed in superstep 1: KeyError: 'missing-key'"


def paused_facts(s: Seen) -> None:
    """Agent Framework's numbering of a run resumed from its request's checkpoint and answered (issue #39).

    Agent Framework 1.23 lists ``iteration_count`` 0, 1, 2, 2, 3, 4 for this run: the
    start's checkpoint, the request's, the restored run's first superstep (it runs with
    nothing to deliver), the answer's entry checkpoint, then the two supersteps it starts.
    """
    assert s.steps(0) == [["asker"]]
    assert s.steps(1) == [[], ["asker"], ["archive"]]
    assert [e["superstep"] for e in s.of("SuperStepStartedEvent", 1)] == [2, 3, 4]
    assert s.checkpoints == [0, 1, 2, 2, 3, 4]
    assert s.outputs == ["archived bees: asker heard 'what about bees?'"]


def in_send_order_facts(s: Seen) -> None:
    """One sender's three messages to one executor are handled one after another, in the order sent (MAF's order):
    the executor's attribute collects 1, 2, 3 in process and on Temporal, though the first takes longest."""
    assert s.steps() == [["dispatch"], ["collector"] * 3]
    assert s.outputs == [[1], [1, 2], [1, 2, 3]]


def answer_fails_facts(s: Seen) -> None:
    """A response handler's own exception: raised as itself by the call that answered, in process and on Temporal."""
    (failed,) = s.of("ExecutorFailedEvent")
    assert (failed["executor_id"], failed["superstep"], failed["error_type"]) == ("gatekeeper", 2, "QuotaExceeded")
    assert s.error is not None
    assert (s.error["class"], s.error["message"]) == ("QuotaExceeded", "quota exceeded for 'yes'")
    assert s.error["library_class"] == "ExecutorFailedError" and s.error["superstep"] == 2
    assert s.error["summary"] == "executor 'gatekeeper' failed in superstep 2: QuotaExceeded: quota exceeded for 'yes'"


def two_fail_facts(s: Seen) -> None:
    failed = s.of("ExecutorFailedEvent")
    assert [(f["executor_id"], f["superstep"], f["error_type"]) for f in failed] == [
        ("first", 2, "ValueError"),
        ("second", 2, "ValueError"),
    ], failed
    assert [f["error"] for f in failed] == ["first refuses 'go'", "second refuses 'go'"]
    # Each step reports how it ended, in task order: the steady one completed (with what it sent).
    step2 = [(e["class"], e["executor_id"]) for e in s.all_events() if e.get("superstep") == 2 and "executor_id" in e]
    assert step2 == [
        ("ExecutorInvokedEvent", "first"),
        ("ExecutorFailedEvent", "first"),
        ("ExecutorInvokedEvent", "steady"),
        ("ExecutorCompletedEvent", "steady"),
        ("ExecutorInvokedEvent", "second"),
        ("ExecutorFailedEvent", "second"),
        ("WorkflowFailedEvent", "first"),
    ], step2
    (steady,) = s.of("ExecutorCompletedEvent", 0)[1:]
    assert steady["data"] == ["go"]
    assert s.error is not None and s.error["executor_id"] == "first"  # the first in task order, not in time
    assert (s.error["class"], s.error["message"]) == ("ValueError", "first refuses 'go'")
    assert s.error["summary"] == "executor 'first' failed in superstep 2: ValueError: first refuses 'go'"
    assert s.state == {}  # nothing of the failed superstep is committed, not even the steady step's write


def bad_reducer_facts(s: Seen) -> None:
    assert s.error is not None
    assert "'merged'" in s.error["message"] and "refusing to merge 2 writes" in s.error["message"]
    assert "superstep 2" in s.error["message"] and s.error["superstep"] == 2
    assert sorted(e["executor_id"] for e in s.of("ExecutorCompletedEvent") if e["superstep"] == 2) == ["alpha", "beta"]
    assert not s.of("ExecutorFailedEvent")  # the steps did not fail; the commit did
    assert s.state == {"opened": "go"}


def conflict_facts(s: Seen) -> None:
    assert s.error is not None
    assert s.error["message"].startswith("state key 'owner' was written by both 'left' and 'right' in superstep 2")
    assert s.error["superstep"] == 2
    assert s.state == {"claimed_by": []}


def limit_facts(s: Seen) -> None:
    assert s.error is not None
    assert s.error["message"].startswith(f"max_iterations={sc.LIMIT} exceeded: superstep {sc.LIMIT + 1}")
    assert [e["superstep"] for e in s.of("SuperStepCompletedEvent")] == list(range(1, sc.LIMIT + 1))
    assert s.state == {"laps": sc.LIMIT}


def timeout_respond_facts(s: Seen) -> None:
    (asked,) = s.of("RequestInfoEvent")
    assert asked["timeout"] == sc.DEADLINE_SECONDS and asked["source_executor_id"] == "gate"
    assert s.pending == [[[{"request_id": "req-1", "executor_id": "gate", "data": asked["data"]}]]]
    assert s.outputs == [f"timed out after {sc.DEADLINE_SECONDS:g}s"]
    assert s.state == {"decision": "timed out"}
    assert s.steps() == [["gate"], ["gate"]]


def timeout_fail_facts(s: Seen) -> None:
    assert s.error is not None
    assert (
        s.error["message"] == f"request 'req-1' from executor 'gate' got no response within {sc.DEADLINE_SECONDS:g} s"
    )
    assert s.error["executor_id"] == "gate"
    assert s.outputs == [] and s.steps() == [["gate"]]


def unsaved_facts(s: Seen) -> None:
    assert s.error is not None
    assert "superstep 1" in s.error["message"] and "disk full" in s.error["message"]
    assert s.error["superstep"] == 1
    assert s.steps() == [["note"]]  # the run stops at the checkpoint it could not take


def undeliverable_facts(s: Seen) -> None:
    assert s.error is not None
    message = s.error["message"]
    assert message.startswith("executor 'talker' failed in superstep 1: UndeliverableMessageError")
    assert "'listener'" in message and "int" in message
    (failed,) = s.of("ExecutorFailedEvent")
    assert failed["executor_id"] == "talker" and failed["error_type"] == "UndeliverableMessageError"
    assert s.steps() == [["talker"]]


def human_facts(s: Seen) -> None:
    (asked,) = s.of("RequestInfoEvent")
    assert asked["data"] == {"topic": "bees", "text": "what about bees?"}
    assert asked["data_type"] == "tests.conformance.scenarios:Question"
    assert asked["response_type"].endswith("Answer")
    assert s.pending == [[[{"request_id": "req-1", "executor_id": "asker", "data": asked["data"]}]]]
    assert s.steps() == [["asker"], ["asker"], ["archive"]]
    assert s.outputs == ["archived bees: asker heard 'what about bees?'"]
    assert s.state == {"asked": "bees", "answer": "asker heard 'what about bees?'"}
    states = [e["state"] for e in s.of("WorkflowStatusEvent")]
    assert states[0] == "IN_PROGRESS" and "IDLE_WITH_PENDING_REQUESTS" in states and states[-1] == "IDLE"


def resume_facts(s: Seen) -> None:
    assert len(s.events) == 2, "the run, then what follows the resume"
    assert s.steps(0) == [["count"], ["count"], ["count"], ["confirmer"]]
    assert s.steps(1) == [["count"], ["confirmer"], ["confirmer"]]  # supersteps 3, 4 again, then the answer
    assert [e["superstep"] for e in s.of("SuperStepStartedEvent", 1)] == [3, 4, 5]
    assert len(s.pending[0]) == 1 and len(s.pending[1]) == 1
    assert s.outputs == ["confirm 3 ticks? -> confirmer heard 'confirm 3 ticks?'"]
    assert s.state == {"ticks": 3, "confirmation": "confirmer heard 'confirm 3 ticks?'"}


def ordered_facts(s: Seen) -> None:
    seg = s.events[0]
    start = next(i for i, e in enumerate(seg) if e["class"] == "SuperStepStartedEvent" and e["superstep"] == 2)
    end = next(i for i, e in enumerate(seg) if e["class"] == "SuperStepCompletedEvent" and e["superstep"] == 2)
    told = [(e["class"], e.get("executor_id") or e.get("step") or e.get("state")) for e in seg[start + 1 : end]]
    assert told == [
        ("ExecutorInvokedEvent", "talky"),
        ("WorkflowOutputEvent", "talky"),
        ("Progress", "talky"),
        ("WorkflowOutputEvent", "talky"),
        ("ExecutorCompletedEvent", "talky"),
        ("ExecutorInvokedEvent", "quiet"),
        ("ExecutorCompletedEvent", "quiet"),
        ("ExecutorInvokedEvent", "curious"),
        ("WorkflowOutputEvent", "curious"),
        ("RequestInfoEvent", None),
        ("WorkflowStatusEvent", "IN_PROGRESS_PENDING_REQUESTS"),
        ("Progress", "asked"),
        ("ExecutorCompletedEvent", "curious"),
    ], told
    invoked = {e["executor_id"]: e["data"] for e in s.of("ExecutorInvokedEvent", 0) if e["superstep"] < 4}
    assert invoked == {"kickoff": "go", "talky": "go", "quiet": "go", "curious": "go", "sink": "keep"}
    completed = {e["executor_id"]: e.get("data") for e in s.of("ExecutorCompletedEvent", 0) if e["superstep"] < 4}
    # What a step sent (the message that went nowhere too), then what it yielded: MAF's executor_completed data.
    assert completed["talky"] == ["drop", "keep", "go-1", "go-2"]
    assert completed["quiet"] is None and completed["curious"] == ["curious"]
    answered = [e for e in s.of("ExecutorInvokedEvent") if e["superstep"] == 4]
    assert [e["data"] for e in answered] == [{"text": "curious heard 'why go?'"}]  # the response it received
    states = [e["state"] for e in s.of("WorkflowStatusEvent")]
    assert states[:3] == ["IN_PROGRESS", "IN_PROGRESS_PENDING_REQUESTS", "IDLE_WITH_PENDING_REQUESTS"], states
    assert s.outputs == ["go-1", "go-2", "curious", "sink keep", "why go? curious heard 'why go?'"]


def hooks_facts(s: Seen) -> None:
    assert s.steps(0) == [["numbers"], *[["factorizer"]] * 4, ["reporter"]]
    # Back to after superstep 2 (one number done): the factorizer's attributes come back with the
    # checkpoint, so it counts 4 steps, not 4 + 3.
    assert s.steps(1) == [*[["factorizer"]] * 3, ["reporter"], ["reporter"]]
    assert s.outputs == ["confirm 4 steps? -> reporter heard 'confirm 4 steps?'"]
    saved = [e for e in s.of("SuperStepCompletedEvent") if "@factorizer/" in e["state_keys_written"]]
    assert len(saved) == 7  # every factorizer step changed its checkpoint state, before and after the resume
    assert "@factorizer/" not in s.state  # executor checkpoint state is not shared state


def designated_facts(s: Seen) -> None:
    assert s.outputs == ["answer: why"]
    (inter,) = s.of("WorkflowIntermediateEvent")
    assert inter["executor_id"] == "planner" and inter["data"] == "plan: why"
    researched = next(e for e in s.of("ExecutorCompletedEvent") if e["executor_id"] == "researcher")
    assert researched["data"] == ["why", "notes: why"]  # the hidden yield shows only here


def restart_facts(s: Seen) -> None:
    assert len(s.events) == 2
    assert s.steps(0) == [["note_topic"], ["restart_asker"]]
    # Back to before superstep 1: the start message again, nothing of the first pass left.
    assert s.steps(1) == [["note_topic"], ["restart_asker"], ["restart_asker"], ["archive"]]
    assert [e["superstep"] for e in s.of("SuperStepStartedEvent", 1)] == [1, 2, 3, 4]
    assert s.state["notes"] == ["tea"] and len(s.pending[0]) == 1 and len(s.pending[1]) == 1
    assert s.outputs == ["archived tea: restart_asker heard 'what about tea?'"]


def typed_fan_facts(s: Seen) -> None:
    completed = {e["executor_id"]: e for e in s.of("ExecutorCompletedEvent")}
    # A sent model next to a yielded string: each item keeps its own type key.
    assert completed["left"]["data"] == [{"n": 1}, "left:HI"]
    assert completed["left"]["item_types"] == ["tests.conformance.scenarios:Part", None]
    (joined,) = [e for e in s.of("ExecutorInvokedEvent") if e["executor_id"] == "join_parts"]
    assert joined["data"] == [{"n": 1}, {"n": 2}] and joined["data_type"] == "list[tests.conformance.scenarios:Part]"
    assert s.outputs == ["left:HI", "right:HI", "joined:1,2"]


def values_facts(s: Seen) -> None:
    """Enums, tuples, int-keyed dicts, datetimes and a plain class keep their types through a message, state, a
    request, outputs, a checkpoint and a resume: each step reports the exact types it saw after decoding."""
    assert s.steps(0) == [["pack"], ["inspector"]]
    assert s.steps(1) == [["inspector"], ["inspector"]]  # superstep 2 again from the checkpoint, then the answer
    assert s.state["start_types"] == "tuple[str, int]"
    assert s.state["parcel_types"] == (
        "Parcel(tones=dict[int: Tone, int: Tone], route=list[tuple[str, int]], sent=datetime(UTC), "
        "coin=Coin(int, str), grades=frozenset[Grade])"
    )
    grade = f"${type_key(sc.Grade)}"
    assert s.state["by_grade"] == [[{grade: 1}, {"$tuple": ["parcel", 3]}], [{grade: 2}, {"$tuple": ["parcel", 4]}]]
    assert s.state["sent"] == "2025-01-02T03:04:05.000678+00:00" and s.state["coin"] == {
        "cents": 300,
        "currency": "EUR",
    }
    asked = s.of("RequestInfoEvent")
    assert len(asked) == 2 and all(a["data_type"] == "tuple" for a in asked)  # asked, and asked again after the resume
    assert [e.get("data_type") for e in s.of("WorkflowOutputEvent")] == ["tuple", None]  # empty data_type: left out
    assert s.outputs[1] == (
        "dict[str: tuple[Coin(int, str), Tone], str: Tone, str: dict[Grade: tuple[str, int], Grade: tuple[str, int]], "
        "str: datetime(UTC), str: Coin(int, str)]"
    )


def markers_facts(s: Seen) -> None:
    """A field-less marker message and a state value whose __init__ does not take its attributes round-trip."""
    assert s.outputs == ["SplitCompleted: WordCount(['a', 'b', 'c'], 3)"]
    assert s.state["counted"] == {"words": ["a", "b", "c"], "count": 3}
    (sent,) = [e for e in s.of("ExecutorCompletedEvent") if e["executor_id"] == "split_words"]
    assert sent["data"] == [{}] and sent["data_type"] == f"list[{type_key(sc.SplitCompleted)}]"


def answered_together_facts(s: Seen) -> None:
    """Answers given in one call reach the run at one boundary: both response handlers run in one superstep."""
    assert s.steps() == [["quiz"], ["quiz", "quiz"], ["minutes", "minutes"]]
    assert len(s.pending) == 1 and len(s.pending[0][0]) == 2
    assert sorted(s.outputs) == [
        "noted bees: quiz heard 'what about bees?'",
        "noted owls: quiz heard 'what about owls?'",
    ]


def sub_several_facts(s: Seen) -> None:
    assert s.steps() == [["split"], ["counter"] * 3, ["tally"] * 3]
    assert s.outputs == ["'a b': 2 words", "'c d e': 3 words", "'': 0 words"]
    assert s.state == {"tallied": ["a b", "c d e", ""]}  # the children's own state stays theirs


def sub_out_of_order_facts(s: Seen) -> None:
    """Children finish in reverse order; their results reach the parent in the order the children started."""
    assert s.steps() == [["split"], ["slow_counter"] * 3, ["collect"] * 3]
    texts = ["a b c", "d e", "f"]
    assert s.outputs == [f"collected {t!r}" for t in texts]
    assert s.state == {"collected": texts}
    completed = [e["executor_id"] for e in s.of("ExecutorCompletedEvent") if e["superstep"] == 3]
    assert completed == ["collect"] * 3


def sub_intermediate_facts(s: Seen) -> None:
    """A child's intermediate outputs, its own child's too, are its executor's ``intermediate`` events (MAF)."""
    assert s.steps() == [["split"], ["progress"] * 2, ["told"] * 2]
    shown = [(e["executor_id"], e["data"]) for e in s.of("WorkflowIntermediateEvent")]
    assert shown == [
        ("progress", {"text": "a b", "words": 2}),
        ("progress", "planned 'a b'"),
        ("progress", {"text": "c", "words": 1}),
        ("progress", "planned 'c'"),
    ]
    assert s.of("WorkflowIntermediateEvent")[0]["data_type"] == type_key(sg.Count)
    assert s.outputs == ["parent got \"solved 'a b'\"", "parent got \"solved 'c'\""]


def sub_propagated_facts(s: Seen) -> None:
    (asked,) = s.of("RequestInfoEvent")
    assert asked["source_executor_id"] == "interview" and asked["data"] == {"topic": "bees", "text": "what about bees?"}
    assert s.pending == [[[{"request_id": "req-1", "executor_id": "interview", "data": asked["data"]}]]]
    assert s.steps() == [["begin"], ["interview"], ["interview"], ["finish"]]
    assert s.outputs == ["parent got \"bees: interview heard 'what about bees?'\""]


def sub_nested_facts(s: Seen) -> None:
    (asked,) = s.of("RequestInfoEvent")
    assert asked["source_executor_id"] == "middle" and asked["data"]["topic"] == "BEES"
    assert s.outputs == ["parent got \"[BEES: middle heard 'what about BEES?']\""]


def sub_unintercepted_facts(s: Seen) -> None:
    (asked,) = s.of("RequestInfoEvent")
    assert asked["source_executor_id"] == "interview" and asked["data"]["topic"] == "owls"
    assert s.outputs == ["parent got \"owls: interview heard 'what about owls?'\""]


def sub_intercept_facts(s: Seen) -> None:
    assert s.steps() == [["gate"], ["validation"] * 2, ["gate"] * 2, ["validation"] * 2, ["gate"] * 2]
    assert s.outputs == ["a@example.com accepted", "b@evil.com refused"]
    assert not s.of("RequestInfoEvent")


def sub_fails_facts(s: Seen) -> None:
    (failed,) = s.of("ExecutorFailedEvent")
    assert failed["executor_id"] == "broken" and failed["error_type"] == "ExecutorFailedError"
    assert failed["error"] == "executor 'explode' failed in superstep 1: ValueError: cannot handle 'x'"
    assert s.error is not None and s.error["executor_id"] == "broken" and s.error["superstep"] == 2
    assert s.error["error_class"] == "temporal_workflows._errors.ExecutorFailedError"  # the child's failure


def sub_deadline_facts(s: Seen) -> None:
    (asked,) = s.of("RequestInfoEvent")
    assert asked["source_executor_id"] == "waiting" and asked["timeout"] == sg.DEADLINE_SECONDS
    assert s.outputs == ["timed out"]
    assert not s.of("WorkflowWarningEvent")


def sub_resume_facts(s: Seen) -> None:
    assert len(s.events) == 2, "the run, then what follows the resume"
    assert s.steps(0) == [["reviewer"], ["interview"], ["reviewer"]]
    # from superstep 2's checkpoint: the child waits in it, its request message is delivered again
    assert [e["superstep"] for e in s.of("SuperStepStartedEvent", 1)] == [3, 4, 5, 6]
    assert s.outputs == ["owls: reviewed: reviewer heard 'what about owls?'"]


SCENARIOS = [
    Scenario("linear_chain", sc.chain, "hello", facts=chain_facts),
    Scenario("fan_out_fan_in", sc.fan, 7, facts=fan_facts),
    Scenario("example_research", research.workflow, research.SAMPLE_INPUT, facts=research_facts),
    Scenario("example_counter_loop", counter_loop.workflow, counter_loop.SAMPLE_INPUT, facts=counter_loop_facts),
    Scenario("example_approval", approval.workflow, approval.SAMPLE_INPUT, answer=_review, facts=approval_facts),
    Scenario("step_raises", sc.raises, "boom", fails_with=ExecutorFailedError, facts=raises_facts),
    Scenario("step_raises_own_class", sc.own_error, "ann", fails_with=ExecutorFailedError, facts=own_error_facts),
    Scenario("step_raises_quoting", sc.missing_key, "missing-key", fails_with=KeyError, facts=missing_key_facts),
    Scenario("two_steps_fail", sc.two_fail, "go", fails_with=ExecutorFailedError, facts=two_fail_facts),
    Scenario(
        "answer_fails_own_class",
        sc.answer_fails,
        "ann",
        answer=lambda executor_id, request: "yes",
        fails_with=sc.QuotaExceeded,
        facts=answer_fails_facts,
    ),
    Scenario("state_past_the_limit", rg.large_state, 5, fails_with=ExecutorFailedError, facts=large_state_facts),
    Scenario("reducer_raises", sc.bad_reducer, "go", fails_with=ReducerError, facts=bad_reducer_facts),
    Scenario("state_conflict", sc.conflict, "go", fails_with=StateConflictError, facts=conflict_facts),
    Scenario("superstep_limit", sc.endless, 0, fails_with=SuperstepLimitError, facts=limit_facts),
    Scenario(
        "request_times_out_respond",
        sc.deadline,
        sc.Deadline(on_timeout="respond"),
        answer=_let_it_time_out,
        facts=timeout_respond_facts,
    ),
    Scenario(
        "request_times_out_fail",
        sc.deadline,
        sc.Deadline(on_timeout="fail"),
        answer=_let_it_time_out,
        fails_with=RequestTimeoutError,
        facts=timeout_fail_facts,
    ),
    Scenario("checkpoint_save_fails", sc.unsaved, "memo", fails_with=CheckpointStorageError, facts=unsaved_facts),
    Scenario(
        "undeliverable_message", sc.undeliverable, "hello", fails_with=ExecutorFailedError, facts=undeliverable_facts
    ),
    Scenario("human_input_answered", sc.human, "bees", answer=sc.answer_question, facts=human_facts),
    Scenario("live_events", sc.live, "one two three", facts=live_facts),
    Scenario("live_event_too_large", sc.live_too_large, "0123456789", facts=live_too_large_facts),
    Scenario(
        "resume_from_checkpoint",
        sc.resumable,
        sc.Count(n=1, upto=3),
        answer=sc.answer_question,
        resume_from=sc.RESUME_FROM_SUPERSTEP,
        facts=resume_facts,
    ),
    Scenario("step_event_order", sc.ordered, "go", answer=sc.answer_question, facts=ordered_facts),
    Scenario(
        "resume_waiting_run_then_answer",
        sc.paused,
        "bees",
        answer=sc.answer_question,
        resume_from=1,
        facts=paused_facts,
    ),
    Scenario("one_sender_in_send_order", sc.in_send_order, 3, facts=in_send_order_facts),
    Scenario("checkpoint_hooks", sc.hooked, 4, answer=sc.answer_question, resume_from=2, facts=hooks_facts),
    Scenario("output_designation", sc.designated, "why", facts=designated_facts),
    Scenario("typed_event_data", sc.typed_fan, "hi", facts=typed_fan_facts),
    Scenario(
        "resume_before_first_superstep",
        sc.restartable,
        "tea",
        answer=sc.answer_question,
        resume_from=0,
        facts=restart_facts,
    ),
    Scenario(
        "ordinary_python_values", sc.values, ("parcel", 3), answer=sc.answer_tone, resume_from=1, facts=values_facts
    ),
    Scenario(
        "answers_given_together",
        sc.two_questions,
        "bees owls",
        answer=sc.answer_question,
        facts=answered_together_facts,
    ),
    Scenario("plain_classes_without_init", sc.markers, "a b c", facts=markers_facts),
    Scenario("subworkflow_several_children", sg.basic, ["a b", "c d e", ""], facts=sub_several_facts),
    Scenario(
        "subworkflow_children_finish_out_of_order", sg.out_of_order, ["a b c", "d e", "f"], facts=sub_out_of_order_facts
    ),
    Scenario("subworkflow_intermediate_outputs", sg.progress, ["a b", "c"], facts=sub_intermediate_facts),
    Scenario("subworkflow_propagated_request", sg.propagating, "bees", answer=sg.answer, facts=sub_propagated_facts),
    Scenario("subworkflow_nested", sg.nested, "bees", answer=sg.answer, facts=sub_nested_facts),
    Scenario(
        "subworkflow_request_nobody_intercepts",
        sg.unintercepted,
        "owls",
        answer=sg.answer,
        facts=sub_unintercepted_facts,
    ),
    Scenario("subworkflow_intercepted", sg.intercepting, ["a@example.com", "b@evil.com"], facts=sub_intercept_facts),
    Scenario("subworkflow_fails", sg.failing, "x", fails_with=ExecutorFailedError, facts=sub_fails_facts),
    Scenario(
        "subworkflow_request_times_out",
        sg.deadline,
        "x",
        answer=_let_it_time_out,
        facts=sub_deadline_facts,
    ),
    Scenario(
        "subworkflow_resume_with_waiting_child",
        sg.reviewing,
        ["owls"],
        answer=sg.answer,
        resume_from=2,
        facts=sub_resume_facts,
    ),
]


# -- driving each host ------------------------------------------------------------------------------


async def run_in_process(s: Scenario) -> Observed:
    wf = s.graph
    obs = Observed("in process")
    asked_at: dict[str, tuple[float, float | None]] = {}
    events = wf.run(s.message, stream=True)
    resumed = False
    while True:
        try:
            async for ev in events:
                obs.segment.events.append(ev)
                if isinstance(ev, WorkflowStartedEvent):
                    obs.run_ids.add(ev.run_id)
                if isinstance(ev, RequestInfoEvent):
                    asked_at[ev.request_id] = (time.monotonic(), ev.timeout)
        except Exception as e:  # the run's failure, whatever its class: compared below
            obs.error = e
            break
        pending = wf.pending_requests
        if not pending:
            break
        obs.segment.pending.append([_pending_json_local(r) for r in pending])
        if s.resume_from is not None and not resumed:
            resumed = True
            if s.resume_from == 0:
                assert wf.checkpoint_storage is not None
                cps = await wf.checkpoint_storage.list_checkpoints(workflow_name=wf.name, run_id=wf_run_id(obs))
                checkpoint_id = next(c.checkpoint_id for c in cps if c.superstep == 0)
            else:
                checkpoint_id = _checkpoint_after(obs.segment.events, s.resume_from)
            obs.resumed()
            events = wf.run(checkpoint_id=checkpoint_id, stream=True)
            continue
        if s.answer is None:
            break
        responses: dict[str, Any] = {}
        for r in pending:
            value = s.answer(r.source_executor_id, _jsonable(r.data))
            if value is not TIME_OUT:
                responses[r.request_id] = value
        if not responses:
            # In process a deadline is applied by the next run() call after it has passed:
            # waiting for it to pass is what this scenario tests.
            due = [asked_at[r.request_id] for r in pending if r.request_id in asked_at]
            waits = [t + timeout - time.monotonic() for t, timeout in due if timeout is not None]
            assert waits, "the scenario lets requests time out, but none has a timeout"
            await asyncio.sleep(max(0.0, min(waits)) + 0.05)
        events = wf.run(responses=responses, stream=True)
    # Per key, as the state query shows it (cut to one payload, with a note, if it would not fit).
    obs.state = truncated_state({k: _jsonable(v) for k, v in wf.state.items()}, max_payload_bytes())
    if wf.checkpoint_storage is not None and obs.error is None:
        listed = await wf.checkpoint_storage.list_checkpoints(workflow_name=wf.name, run_id=wf_run_id(obs))
        obs.checkpoints = [c.superstep for c in sorted(listed, key=lambda c: c.created_at)]
    return obs


async def run_on_temporal(s: Scenario, client: Client, workflow_id: str) -> Observed:
    obs = Observed("temporal", run_ids={workflow_id})
    handle = await start_run(client, s.graph, s.message, id=workflow_id, task_queue=TASK_QUEUE)
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            waiting = await _follow(s, handle, obs)
            if not waiting:
                try:
                    await handle.result()
                except Exception as e:  # the run's failure, whatever its class: compared below
                    obs.error = e
        obs.state = await handle.state()
        if s.graph.checkpoint_storage is not None and obs.error is None:
            obs.checkpoints = [c["superstep"] for c in await handle.checkpoints()]
    finally:
        # A run left waiting (or stuck) is not left behind for the rest of the session.
        with contextlib.suppress(Exception):
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.handle.terminate("conformance scenario done")
    return obs


async def _follow(s: Scenario, handle: RunHandle, obs: Observed) -> bool:
    """Read the run's events to the end, answering or resuming at each pause; True if left waiting."""
    resumed = False
    async for ev in handle.events():
        if isinstance(ev, WorkflowResetEvent):
            obs.resumed()  # what follows is compared with what follows an in-process resume
            continue
        obs.segment.events.append(ev)
        if isinstance(ev, WorkflowStartedEvent):
            obs.run_ids.add(ev.run_id)
        if not (isinstance(ev, WorkflowStatusEvent) and ev.state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS):
            continue
        pending = await handle.pending_requests(restore=False)  # data as the run stores it, as compared
        obs.segment.pending.append([_pending_json_remote(p) for p in pending])
        if s.resume_from is not None and not resumed:
            resumed = True
            if s.resume_from == 0:
                listed = await handle.checkpoints()
                checkpoint_id = next(c["checkpoint_id"] for c in listed if c["superstep"] == 0)
            else:
                checkpoint_id = _checkpoint_after(obs.segment.events, s.resume_from)
            await handle.reset(checkpoint_id=checkpoint_id)
            continue
        if s.answer is None:
            return True
        # Given together, as in process (``run(responses=...)``): applied at one boundary.
        answers = {p.request_id: s.answer(p.source_executor_id, p.data) for p in pending}
        await handle.respond_all({rid: value for rid, value in answers.items() if value is not TIME_OUT})
    return False


# -- comparing --------------------------------------------------------------------------------------


def _lines(value: Json) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [json.dumps(v, sort_keys=True, default=str) for v in value]
    return json.dumps(value, sort_keys=True, indent=1, default=str).splitlines()


def differences(local: Seen, remote: Seen) -> list[str]:
    problems: list[str] = []
    a, b = local.comparable(), remote.comparable()
    for key in a:
        if a[key] == b[key]:
            continue
        if key == "events" and len(a[key]) == len(b[key]):
            parts = list(zip(a[key], b[key], strict=True))
        else:
            parts = [(a[key], b[key])]
        for i, (x, y) in enumerate(parts):
            if x == y:
                continue
            where = f"{key}[segment {i}]" if key == "events" and len(parts) > 1 else key
            diff = difflib.unified_diff(_lines(x), _lines(y), "in process", "temporal", lineterm="", n=1)
            problems.append(f"hosts disagree on {where}:\n" + "\n".join(diff))
    return problems


def host_facts(s: Scenario, host: str, seen: Seen, obs: Observed) -> list[str]:
    """What must hold on each host by itself: the expected failure, how a stream ends, the hand-written facts."""
    problems: list[str] = []
    last_two = [(e["class"], e.get("state")) for e in list(seen.all_events())[-2:]]
    if s.fails_with is None:
        if obs.error is not None:
            problems.append(f"{host}: the run failed: {type(obs.error).__name__}: {obs.error}")
        if last_two[-1:] != [("WorkflowStatusEvent", "IDLE")]:
            problems.append(f"{host}: a completed run's stream ends with status IDLE, not {last_two[-1:]}")
    else:
        if not isinstance(obs.error, s.fails_with):
            got = "nothing" if obs.error is None else f"{type(obs.error).__name__}: {obs.error}"
            cause = getattr(obs.error, "cause", None) or (obs.error.__cause__ if obs.error else None)
            detail = f" (cause: {type(cause).__name__}: {getattr(cause, 'type', '')} {cause})" if cause else ""
            problems.append(f"{host}: expected the run to raise {s.fails_with.__name__}, it raised {got}{detail}")
        if last_two != [("WorkflowFailedEvent", None), ("WorkflowStatusEvent", "FAILED")]:
            problems.append(f"{host}: a failed run's stream ends with failed, status FAILED; it ends with {last_two}")
        failed = seen.of("WorkflowFailedEvent")
        if len(failed) != 1:
            problems.append(f"{host}: expected one WorkflowFailedEvent, got {len(failed)}")
        elif seen.error is not None:
            told = (failed[0]["error_type"], failed[0]["error"], failed[0]["superstep"])
            if told != (seen.error["library_class"], seen.error["summary"], seen.error["superstep"]):
                problems.append(f"{host}: the WorkflowFailedEvent {told} does not say what the run raised {seen.error}")
    if s.facts is not None:
        try:
            s.facts(seen)
        except (AssertionError, KeyError, IndexError, TypeError, ValueError) as e:
            problems.append(f"{host}: {s.name} fact does not hold: {type(e).__name__}: {e}")
    return problems


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_both_hosts_tell_the_same_story(scenario: Scenario, client: Client, workflow_id: str) -> None:
    local_obs = await asyncio.wait_for(run_in_process(scenario), RUN_TIMEOUT)
    remote_obs = await run_on_temporal(scenario, client, workflow_id)
    local, remote = normalise(local_obs), normalise(remote_obs)
    problems = [
        *differences(local, remote),
        *host_facts(scenario, "in process", local, local_obs),
        *host_facts(scenario, "temporal", remote, remote_obs),
    ]
    assert not problems, "\n\n".join(problems)


def test_every_scenario_graph_is_hosted_by_the_test_worker() -> None:
    from tests.conftest import hosted_workflows

    hosted = {wf.name for wf in hosted_workflows()}
    assert {s.graph.name for s in SCENARIOS} <= hosted
    names = [wf.name for wf in sc.all_workflows()]
    assert len(names) == len(set(names)) and all(n and n.startswith("cf_") for n in names)


def test_the_normaliser_masks_run_specific_values_only() -> None:
    rid, other = "0123456789abcdef0123", "fedcba9876543210fedc"
    obs = Observed("x", run_ids={"run-1"})
    obs.segment.events = [
        WorkflowStartedEvent(run_id="run-1"),
        RequestInfoEvent(request_id=other, source_executor_id="a", data={"n": 1}, response_type="int"),
        RequestInfoEvent(request_id=rid, source_executor_id="a", data="about run-1", response_type="int"),
        SuperStepCompletedEvent(superstep=1, checkpoint_id="c" * 32),
    ]
    obs.segment.pending = [
        [{"request_id": rid, "source_executor_id": "a", "data": {"n": 2, "created_at": "2024-01-01T00:00:00"}}]
    ]
    obs.error = WorkflowRunError(f"request {rid!r} of run-1 after checkpoint {'c' * 32}", superstep=3)
    seen = normalise(obs)
    assert [e.get("request_id") for e in seen.events[0]] == [None, "req-1", "req-2", None]
    assert seen.events[0][0]["run_id"] == "<run>" and seen.events[0][2]["data"] == "about <run>"
    assert seen.events[0][3]["checkpoint_id"] == "cp-1" and seen.events[0][3]["superstep"] == 1
    assert seen.pending == [[[{"request_id": "req-2", "executor_id": "a", "data": {"n": 2, "created_at": "<time>"}}]]]
    assert seen.requests == [
        [[{"request_id": "req-2", "source_executor_id": "a", "data": {"n": 2, "created_at": "<time>"}}]]
    ]
    assert seen.error == {
        "class": "WorkflowRunError",
        "message": "request 'req-2' of <run> after checkpoint cp-1",
        "superstep": 3,
        "executor_id": None,
        "error_class": None,
        "library_class": "WorkflowRunError",
        "summary": "request 'req-2' of <run> after checkpoint cp-1",
    }


# -- a message while the run is busy (concurrent_input): both graph hosts, event for event -----------------------


async def _busy_in_process(policy: str) -> Observed:
    obs = Observed("in process")
    wf = sc.busy
    stream = wf.run("a", stream=True)

    async def read() -> None:
        async for ev in stream:
            obs.segment.events.append(ev)

    reader = asyncio.ensure_future(read())
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, "a").wait(), RUN_TIMEOUT)
    wf.send("b", policy=policy)  # type: ignore[arg-type]
    sc.busy_gate(sc.GATES, "b").set()
    await asyncio.wait_for(reader, RUN_TIMEOUT)
    obs.run_ids.add(wf_run_id(obs))
    obs.state = {k: _jsonable(v) for k, v in wf.state.items()}
    return obs


async def _busy_on_temporal(client: Client, policy: str, workflow_id: str) -> Observed:
    obs = Observed("temporal", run_ids={workflow_id})
    handle = await start_run(client, sc.busy, "a", id=workflow_id, task_queue=TASK_QUEUE)

    async def read() -> None:
        async for ev in handle.events():
            obs.segment.events.append(ev)

    reader = asyncio.ensure_future(read())
    await asyncio.wait_for(sc.busy_gate(sc.STARTED, "a").wait(), RUN_TIMEOUT)
    accepted = await handle.send("busy_note", "b", policy=policy)  # type: ignore[arg-type]
    assert accepted is not None and accepted["interrupts"] is True
    sc.busy_gate(sc.GATES, "b").set()
    await asyncio.wait_for(handle.result(), RUN_TIMEOUT)
    await asyncio.wait_for(reader, RUN_TIMEOUT)
    obs.run_ids.update(ev.run_id for ev in obs.segment.events if isinstance(ev, WorkflowStartedEvent))
    obs.state = await handle.state()
    return obs


@pytest.mark.parametrize("policy", ["interrupt", "rollback"])
async def test_a_message_that_interrupts_a_busy_run_reads_the_same_on_both_hosts(
    client: Client, workflow_id: str, policy: str
) -> None:
    sc.GATES.clear()
    sc.STARTED.clear()
    local = await _busy_in_process(policy)
    sc.GATES.clear()
    sc.STARTED.clear()
    remote = await _busy_on_temporal(client, policy, workflow_id)
    mine, theirs = normalise(local), normalise(remote)
    assert mine.events == theirs.events, "\n".join(
        difflib.unified_diff(
            [json.dumps(e, sort_keys=True) for e in mine.events[0]],
            [json.dumps(e, sort_keys=True) for e in theirs.events[0]],
            "in process",
            "temporal",
            lineterm="",
        )
    )
    for seen in (mine, theirs):
        (interrupted,) = seen.of("WorkflowInterruptedEvent")
        assert (interrupted["policy"], interrupted["superstep"], interrupted["cancelled"]) == (
            policy,
            2,
            ["busy_answer"],
        )
        assert interrupted["rolled_back_to"] == (0 if policy == "rollback" else None)
        assert seen.outputs == ["answered b"]  # the cancelled step committed nothing
        assert seen.steps() == [["busy_note"], ["busy_answer"], ["busy_note"], ["busy_answer"]]
    assert mine.state == theirs.state == {"seen": ["b"] if policy == "rollback" else ["a", "b"]}
