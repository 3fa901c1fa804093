"""The examples, run end to end in process; results checked against what each graph must produce."""

from __future__ import annotations

import asyncio
import io
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from examples import approval, counter_loop, research
from temporal_workflows import Workflow, WorkflowRunResult, WorkflowRunState
from temporal_workflows.events import RequestInfoEvent

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("module", "name"), [(research, "research"), (approval, "approval"), (counter_loop, "counter_loop")]
)
def test_each_example_exposes_build_workflow_and_sample_input(module: ModuleType, name: str) -> None:
    assert isinstance(module.workflow, Workflow) and module.workflow.name == name
    fresh = module.build()
    assert isinstance(fresh, Workflow) and fresh is not module.workflow
    assert fresh.graph_signature_hash == module.workflow.graph_signature_hash
    start = fresh.executors[fresh.start_executor_id]
    assert start.accepts_message(module.SAMPLE_INPUT)


# -- research: fan-out / fan-in ----------------------------------------------------------------


async def test_research_fans_out_to_three_researchers_and_joins_their_findings() -> None:
    result = await research.build().run(research.SAMPLE_INPUT)
    assert result.get_final_state() is WorkflowRunState.IDLE
    (report,) = result.get_outputs()
    assert isinstance(report, research.Report)
    topic = research.SAMPLE_INPUT.topic
    assert report.topic == topic and report.audience == research.SAMPLE_INPUT.audience
    # one section per researcher, in fan-in source order, each answering its own question
    assert [f.researcher for f in report.sections] == list(research.RESEARCHERS)
    assert [f.question for f in report.sections] == [q.format(topic=topic) for q in research.RESEARCHERS.values()]
    # the "append" reducer combined the three concurrent writes in the same, deterministic order
    assert result.state["findings"] == report.sections
    assert all(isinstance(f, research.Finding) for f in result.state["findings"])
    assert report.confidence == pytest.approx(sum(f.confidence for f in report.sections) / 3, abs=1e-3)
    assert all(f.summary in report.text for f in report.sections)
    # planner, then the three researchers together, then the writer once
    steps = [e.executor_ids for e in result if e.type == "superstep_started"]
    assert steps == [["planner"], list(research.RESEARCHERS), ["writer"]]


async def test_research_is_deterministic_and_accepts_plain_json_input() -> None:
    typed = await research.build().run(research.SAMPLE_INPUT)
    from_json = await research.build().run(research.SAMPLE_INPUT.model_dump(mode="json"))
    assert from_json.get_outputs() == typed.get_outputs()
    assert from_json.state == typed.state


# -- approval: human input and a rework loop ------------------------------------------------------


async def drive(wf: Workflow, answer: Any, start: Any = None) -> tuple[WorkflowRunResult, list[RequestInfoEvent]]:
    """Run ``wf``, answering every request with ``answer(request)``, until it is idle without requests."""
    result = await wf.run(approval.SAMPLE_INPUT if start is None else start)
    asked: list[RequestInfoEvent] = []
    while result.get_request_info_events():
        requests = result.get_request_info_events()
        asked += requests
        result = await wf.run(responses={r.request_id: answer(r) for r in requests})
    return result, asked


async def test_approval_with_auto_answer_reworks_once_then_publishes(capsys: pytest.CaptureFixture[str]) -> None:
    wf = approval.build()
    result, asked = await drive(wf, approval.auto_answer)
    # round 1 has no sources, so the reviewer asks for them; the rework adds them; round 2 is approved
    assert [r.data.draft.round for r in asked] == [1, 2]
    assert "Sources:" not in asked[0].data.draft.text and "Sources:" in asked[1].data.draft.text
    (pub,) = result.get_outputs()
    assert isinstance(pub, approval.Publication)
    assert pub.status == "published" and pub.rounds == 2 and pub.text == asked[1].data.draft.text
    assert [(r["round"], r["approved"]) for r in result.state["reviews"]] == [(1, False), (2, True)]
    assert result.state["reviews"][0]["feedback"] in pub.text  # the rework addressed the feedback
    assert wf.run_state is WorkflowRunState.IDLE
    assert asked[0].request_id in capsys.readouterr().out


async def test_approval_approved_at_once_publishes_the_first_draft() -> None:
    result, asked = await drive(approval.build(), lambda r: approval.ReviewDecision(approved=True))
    (pub,) = result.get_outputs()
    assert len(asked) == 1 and pub.status == "published" and pub.rounds == 1
    assert pub.text == approval.fake_llm_write(approval.SAMPLE_INPUT.topic)


@pytest.mark.parametrize("max_rounds", [1, 3])
async def test_approval_gives_up_after_max_rounds_of_rejection(max_rounds: int) -> None:
    start = approval.ArticleRequest(topic="t", max_rounds=max_rounds)
    reject = {"approved": False, "feedback": "shorter"}  # a plain JSON answer is validated into ReviewDecision
    result, asked = await drive(approval.build(), lambda r: reject, start)
    assert [r.data.draft.round for r in asked] == list(range(1, max_rounds + 1))
    (pub,) = result.get_outputs()
    assert pub.status == "abandoned" and pub.rounds == max_rounds
    assert pub.text.count("Revised after review (shorter)") == max_rounds - 1


def test_auto_answer_reads_requests_as_models_or_as_json() -> None:
    draft = approval.Draft(topic="t", text="text. Sources: x", round=1, max_rounds=3)
    typed = RequestInfoEvent(
        request_id="r1", source_executor_id="reviewer", data=approval.ReviewRequest(draft=draft), response_type="x"
    )
    as_json = typed.model_copy(update={"data": typed.data.model_dump(mode="json")})
    assert approval.auto_answer(typed) == approval.auto_answer(as_json) == approval.ReviewDecision(approved=True)
    no_sources = typed.model_copy(update={"data": approval.ReviewRequest(draft=draft.model_copy(update={"text": "t"}))})
    assert approval.auto_answer(no_sources).approved is False


def test_approval_main_answers_from_stdin_with_interactive(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\nplease add sources\ny\n"))
    approval.main(["--interactive"])
    out = capsys.readouterr().out
    assert "PUBLISHED after 2 round(s)" in out and "Revised after review (please add sources)" in out


# -- counter_loop: a loop that ends on a condition ----------------------------------------------------


async def test_counter_loop_refines_until_the_score_reaches_the_target() -> None:
    task = counter_loop.SAMPLE_INPUT
    result = await counter_loop.build().run(task)
    (final,) = result.get_outputs()
    # each round fixes exactly one unmet criterion, so the target needs this many rounds
    start_score = counter_loop.fake_critic(task.text)
    rounds = math.ceil((task.target_score - start_score) * len(counter_loop.CRITERIA) - 1e-9)
    assert final.reached_target and final.rounds == rounds
    assert final.score >= task.target_score and final.score == counter_loop.fake_critic(final.text)
    scores = result.state["scores"]
    assert len(scores) == rounds and scores == sorted(scores) and len(set(scores)) == rounds
    assert scores[-1] == final.score and all(s < task.target_score for s in scores[:-1])
    assert set(result.state) == {"scores"}  # the round counter is the refiner's private state
    invoked = [e.executor_id for e in result if e.type == "executor_invoked"]
    assert invoked == ["refiner", "critic"] * rounds + ["finalizer"]


async def test_counter_loop_stops_at_the_round_budget_when_the_target_is_unreachable() -> None:
    task = counter_loop.RefineTask(text="draft", target_score=1.5, max_rounds=6)
    result = await counter_loop.build().run(task)
    (final,) = result.get_outputs()
    assert not final.reached_target and final.rounds == 6 and final.score == 1.0
    assert len(result.state["scores"]) == 6


# -- python -m examples.<name> ------------------------------------------------------------------------


def expected_line(name: str) -> str:
    """A line ``python -m examples.<name>`` must print, derived from an in-process run."""
    if name == "research":
        return f"# {research.SAMPLE_INPUT.topic} (for {research.SAMPLE_INPUT.audience})"
    if name == "approval":
        return "PUBLISHED after 2 round(s)"  # the auto-answer policy rejects once (no sources), then approves
    loop = asyncio.new_event_loop()
    try:
        (final,) = loop.run_until_complete(counter_loop.build().run(counter_loop.SAMPLE_INPUT)).get_outputs()
    finally:
        loop.close()
    return f"final ({final.rounds} rounds, score {final.score})"


@pytest.mark.parametrize("name", ["research", "approval", "counter_loop"])
def test_examples_run_as_modules(name: str) -> None:
    expected = expected_line(name)
    proc = subprocess.run(
        [sys.executable, "-m", f"examples.{name}"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout
    assert "[superstep_started]" in proc.stdout and "[status]" in proc.stdout


def test_main_runs_in_process_too(capsys: pytest.CaptureFixture[str]) -> None:
    research.main()
    assert expected_line("research") in capsys.readouterr().out
    counter_loop.main()
    out = capsys.readouterr().out
    assert expected_line("counter_loop") in out and "score history: [" in out
