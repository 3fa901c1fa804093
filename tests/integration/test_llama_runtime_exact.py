"""``TemporalRuntime`` runs exactly the program its starter built, reads outside input only as that program's
classes, and answers the project's tools (docs/llama-runtime.md; the shapes: temporal_workflows/_llama_runtime/
README.md). On the dev server, with worker processes started as users start them (the CLI), killed by pid."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("workflows")

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from workflows import Context, Workflow, step
from workflows.errors import WorkflowCancelledByUser
from workflows.events import Event, HumanResponseEvent, InputRequiredEvent, StartEvent, StopEvent

from temporal_workflows.llama import TemporalRuntime
from temporal_workflows.temporal import ConnectionConfig

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
async def runtime(temporal_address: str) -> AsyncIterator[TemporalRuntime]:
    rt = TemporalRuntime(
        worker=True,
        task_queue=f"llama-exact-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
    )
    yield rt
    await rt.destroy()


class Question(InputRequiredEvent):
    question: str


class Reply(HumanResponseEvent):
    text: str
    score: int = 0


class AsksOnce(Workflow):
    """Writes the store, asks a person, and finishes with the answer."""

    @step
    async def ask(self, ctx: Context, ev: StartEvent) -> Question:
        await ctx.store.set("asked", ev.get("who", "you"))
        return Question(question="name?")

    @step
    async def answered(self, ctx: Context, ev: Reply) -> StopEvent:
        return StopEvent(result=f"{ev.text}/{ev.score}/{await ctx.store.get('asked')}")


async def _status(client: Client, run_id: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.get_workflow_handle(run_id).query("status")
    return result


async def _until(check: Any, timeout: float = 60.0) -> Any:
    """Poll ``check()`` (async) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout} s: {value!r}")
        await asyncio.sleep(0.1)


async def test_a_waiting_run_answers_the_tools_queries_and_takes_an_event_by_update(runtime: TemporalRuntime) -> None:
    """``status`` says waiting for input; ``pending_requests`` lists the ``InputRequiredEvent`` with the
    ``HumanResponseEvent`` type that answers it and its schema; ``state`` is the store as JSON; ``llama_context``
    is ``ctx.to_dict()``; ``submit_event`` refuses a wrong name or shape (listing what the run accepts) and
    takes a right one, which finishes the run."""
    handler = AsksOnce(timeout=60, runtime=runtime).run(who="Ann")
    client = await runtime.client()
    status = await _until(
        lambda: _waiting(client, handler.run_id),
    )
    assert status["kind"] == "llama_index" and status["in_flight"] == [] and status["error"] is None
    requests = await client.get_workflow_handle(handler.run_id).query("pending_requests")
    assert len(requests) == 1
    request = requests[0]
    assert request["type"] == "request_info" and request["data"]["question"] == "name?"
    assert request["request_type"].endswith(".Question") and request["response_type"].endswith(".Reply")
    assert set(request["response_schema"]["properties"]) >= {"text", "score"}
    assert await client.get_workflow_handle(handler.run_id).query("state") == {"asked": "Ann"}
    context = await client.get_workflow_handle(handler.run_id).query("llama_context")
    assert context["is_running"] and context["state"]["state_data"]

    run = client.get_workflow_handle(handler.run_id)
    with pytest.raises(WorkflowUpdateFailedError) as wrong_name:
        await run.execute_update("submit_event", {"event": {"text": "x"}, "event_type": "Replyy"})
    message = str(wrong_name.value.cause)
    assert "'Replyy' is not one this run accepts" in message and ".Reply" in message, message
    with pytest.raises(WorkflowUpdateFailedError) as wrong_shape:
        await run.execute_update(
            "submit_event", {"event": {"score": "not a number", "text": "s3cret"}, "event_type": "Reply"}
        )
    message = str(wrong_shape.value.cause)
    assert "score" in message and "s3cret" not in message and "not a number" not in message, message
    accepted = await run.execute_update("submit_event", {"event": {"text": "Bo", "score": 7}, "event_type": "Reply"})
    assert accepted["accepted"].endswith(".Reply")
    assert await asyncio.wait_for(handler, 60) == "Bo/7/Ann"
    done = await _status(client, handler.run_id)
    assert done["status"] == "completed" and done["pending_requests"] == 0


async def _waiting(client: Client, run_id: str) -> dict[str, Any] | None:
    with contextlib.suppress(Exception):
        status = await _status(client, run_id)
        if status["status"] == "waiting_for_input":
            return status
    return None


async def test_bad_outside_input_is_dropped_with_a_visible_warning_and_imports_nothing(
    runtime: TemporalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``llama_tick`` naming ``this.Zen`` never imports a module; a misspelled signal and a ``send_event`` signal
    of an unknown event are warned about in the worker's log (without values) and the ``status`` query; the run
    goes on and takes the good answer."""
    assert "this" not in sys.modules
    handler = AsksOnce(timeout=60, runtime=runtime).run()
    client = await runtime.client()
    await _until(lambda: _waiting(client, handler.run_id))
    run = client.get_workflow_handle(handler.run_id)
    zen = {"type": "add_event", "event": {"__is_pydantic": True, "value": {}, "qualified_name": "this.Zen"}}
    await run.signal("llama_tick", zen)
    await run.signal("llama_tikc", {"anything": 1})
    await run.signal("send_event", {"event": {"text": "top secret"}, "event_type": "Nope"})
    status = await _until(lambda: _warned(client, handler.run_id, 3))
    texts = [w["message"] for w in status["warnings"]]
    assert any("llama_tick" in t and "this.Zen" in t for t in texts), texts
    assert any("unknown signal 'llama_tikc'" in t for t in texts), texts
    assert any("send_event" in t and "'Nope'" in t for t in texts), texts
    assert "this" not in sys.modules  # the worker runs in this process: nothing imported `this`
    assert not any("top secret" in r.getMessage() for r in caplog.records)
    await run.signal("send_event", {"event": {"text": "ok"}, "event_type": "Reply"})
    assert await asyncio.wait_for(handler, 60) == "ok/0/you"


async def _warned(client: Client, run_id: str, n: int) -> dict[str, Any] | None:
    status = await _status(client, run_id)
    return status if len(status["warnings"]) >= n else None


async def test_cancel_run_ends_the_execution_canceled_as_llamaindex_cancels(runtime: TemporalRuntime) -> None:
    """``handler.cancel_run()``: ``await handler`` raises ``WorkflowCancelledByUser`` as under the default runtime,
    and the Temporal execution is CANCELED (not FAILED), its ``status`` query says cancelled."""
    default = AsksOnce(timeout=60).run()
    await asyncio.sleep(0.2)
    await default.cancel_run()
    with pytest.raises(WorkflowCancelledByUser) as in_process:
        await default

    handler = AsksOnce(timeout=60, runtime=runtime).run()
    client = await runtime.client()
    await _until(lambda: _waiting(client, handler.run_id))
    await handler.cancel_run()
    with pytest.raises(WorkflowCancelledByUser) as on_temporal:
        await asyncio.wait_for(handler, 60)
    assert str(on_temporal.value) == str(in_process.value)
    described = await client.get_workflow_handle(handler.run_id).describe()
    assert described.status == WorkflowExecutionStatus.CANCELED
    assert (await _status(client, handler.run_id))["status"] == "cancelled"


async def test_running_a_run_id_again_attaches_to_that_run(runtime: TemporalRuntime) -> None:
    """DBOS's idiom: ``workflow.run(run_id=...)`` again goes on with the run that id names (no
    ``WorkflowAlreadyStartedError``), and after it ended returns its result; one execution, one result."""
    run_id = f"again-{uuid.uuid4().hex[:8]}"
    wf = AsksOnce(timeout=60, runtime=runtime)
    first = wf.run(run_id=run_id, who="Cy")
    client = await runtime.client()
    await _until(lambda: _waiting(client, run_id))
    second = wf.run(run_id=run_id, who="somebody else")
    await client.get_workflow_handle(run_id).execute_update(
        "submit_event", {"event": {"text": "Di"}, "event_type": "Reply"}
    )
    assert await asyncio.wait_for(second, 60) == "Di/0/Cy"
    assert await asyncio.wait_for(first, 60) == "Di/0/Cy"
    third = wf.run(run_id=run_id)
    assert await asyncio.wait_for(third, 60) == "Di/0/Cy"
    executions = [e async for e in client.list_workflows(f'WorkflowId = "{run_id}"')]
    assert len(executions) == 1


async def test_an_attach_that_failed_is_not_kept(runtime: TemporalRuntime) -> None:
    """``get_external_adapter`` of a run that does not exist (yet) fails; once the run exists, the next call
    attaches to it: the failure was not cached."""
    run_id = f"later-{uuid.uuid4().hex[:8]}"
    missing = runtime.get_external_adapter(run_id)
    with pytest.raises(RuntimeError, match="No workflow run"):
        await missing.get_result()
    handler = AsksOnce(timeout=60, runtime=runtime).run(run_id=run_id)
    client = await runtime.client()
    await _until(lambda: _waiting(client, run_id))
    runtime._adapters.pop(run_id, None)  # as another process would: nothing started here
    attached = runtime.get_external_adapter(run_id)
    await attached.send_event(_reply_tick("Ed"))
    assert await asyncio.wait_for(handler, 60) == "Ed/0/you"


def _reply_tick(text: str) -> Any:
    from workflows.runtime.types.ticks import TickAddEvent

    return TickAddEvent(event=Reply(text=text))


# -- processes: two programs on one queue, launch() from synchronous code, kill -9 and resume -----------------

PROGRAM = textwrap.dedent(
    """
    from workflows import Context, Workflow, step
    from workflows.events import StartEvent, StopEvent


    class Flow(Workflow):
        @step
        async def go(self, ctx: Context, ev: StartEvent) -> StopEvent:
            return StopEvent(result={result!r})


    workflow = Flow(timeout=30)
    """
)


def _env(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*(str(p) for p in paths), str(ROOT)])}


@contextlib.contextmanager
def _cli_worker(app: Path, queue: str, address: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "temporal_workflows",
            "worker",
            "--workflow",
            "flowapp:workflow",
            "--task-queue",
            queue,
            "--address",
            address,
        ],
        cwd=app,
        env=_env(app),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "hosting LlamaIndex workflows" in line:
                break
        else:
            raise AssertionError("the worker exited before it started")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()


async def test_two_programs_with_one_workflow_name_on_one_queue_never_run_each_others_runs(
    tmp_path: Path, temporal_address: str
) -> None:
    """Two worker processes host different ``flowapp.Flow`` classes on one queue (a rolling deploy without
    versioning): every run program one starts returns program one's result; program two's worker refuses them
    (its log and the run's history say why), never runs them."""
    one, two = tmp_path / "one", tmp_path / "two"
    for folder, result in ((one, "from one"), (two, "from two")):
        folder.mkdir()
        (folder / "flowapp.py").write_text(PROGRAM.format(result=result))
    queue = f"llama-two-programs-{uuid.uuid4().hex[:8]}"
    sys.path.insert(0, str(one))
    try:
        import flowapp  # type: ignore[import-not-found]

        with _cli_worker(one, queue, temporal_address), _cli_worker(two, queue, temporal_address):
            rt = TemporalRuntime(task_queue=queue, connection=ConnectionConfig(address=temporal_address))
            wf = flowapp.Flow(timeout=30, runtime=rt)
            results = await asyncio.wait_for(asyncio.gather(*(wf.run() for _ in range(8))), 120)
            assert results == ["from one"] * 8
            await rt.destroy()
    finally:
        sys.path.remove(str(one))
        sys.modules.pop("flowapp", None)


def test_launch_and_destroy_from_synchronous_code_leave_no_unawaited_coroutine(temporal_address: str) -> None:
    """DBOS's examples launch the runtime from synchronous code: ``launch()`` and ``destroy()`` called without
    ``await`` (and ``launch_sync()``) work and warn about nothing, under ``-W error``."""
    program = textwrap.dedent(
        f"""
        import asyncio
        from workflows import Workflow, step
        from workflows.events import StartEvent, StopEvent
        from temporal_workflows.llama import TemporalRuntime
        from temporal_workflows.temporal import ConnectionConfig

        class Hello(Workflow):
            @step
            async def go(self, ev: StartEvent) -> StopEvent:
                return StopEvent(result="hi")

        rt = TemporalRuntime(worker=True, connection=ConnectionConfig(address={temporal_address!r}))
        wf = Hello(runtime=rt, timeout=30)
        async def once():
            return await wf.run()

        rt.launch()
        print(asyncio.run(once()))
        rt.destroy()
        rt.launch_sync()
        print(asyncio.run(once()))
        rt.destroy_sync()
        """
    )
    ran = subprocess.run(
        [sys.executable, "-W", "error", "-c", program], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["hi", "hi"]
    assert "never awaited" not in ran.stderr


COUNTER = textwrap.dedent(
    """
    # LlamaIndex's examples/dbos/durable_workflow.py, the runtime swapped (DBOS's setup lines replaced by
    # TemporalRuntime's) and its timeout left at LlamaIndex's default (45 s).
    import argparse, asyncio, sys, uuid
    from pathlib import Path
    from pydantic import Field
    from workflows import Context, Workflow, step
    from workflows.events import Event, StartEvent, StopEvent
    from workflows.handler import WorkflowHandler
    from temporal_workflows.llama import TemporalRuntime

    _RUN_FILE = Path(sys.argv[2])

    class Tick(Event):
        count: int = Field(description="Current count")

    class CounterResult(StopEvent):
        final_count: int = Field(description="Final counter value")

    class CounterWorkflow(Workflow):
        @step
        async def start(self, ctx: Context, ev: StartEvent) -> Tick:
            await ctx.store.set("count", 0)
            print("[Start] Initializing counter to 0", flush=True)
            return Tick(count=0)

        @step
        async def increment(self, ctx: Context, ev: Tick) -> Tick | CounterResult:
            count = ev.count + 1
            await ctx.store.set("count", count)
            print(f"[Tick {count:2d}] count = {count}", flush=True)
            if count >= 10:
                return CounterResult(final_count=count)
            await asyncio.sleep(0.5)
            return Tick(count=count)

    def run(run_id, mode):
        runtime = TemporalRuntime(worker=True)
        workflow = CounterWorkflow(runtime=runtime)
        runtime.launch_sync()

        async def _run():
            if mode == "resume":
                handler = WorkflowHandler(workflow, runtime.get_external_adapter(run_id))
            else:  # "start", or "again": run(run_id=...) once more, as after a crash
                handler = workflow.run(start_event=StartEvent(), run_id=run_id)
            result = await handler
            print(f"Result: final_count = {result.final_count}", flush=True)

        asyncio.run(_run())
        runtime.destroy_sync()

    mode = sys.argv[1]
    if mode == "start":
        _RUN_FILE.write_text(f"counter-{uuid.uuid4().hex[:8]}")
    run(_RUN_FILE.read_text().strip(), mode)
    """
)


@pytest.mark.parametrize("how", ["resume", "again"])
async def test_the_dbos_counter_killed_mid_step_resumes_from_another_path_within_its_timeout(
    tmp_path: Path, temporal_address: str, how: str
) -> None:
    """LlamaIndex's DBOS counter, only the runtime swapped, workflow in ``__main__``: killed with ``kill -9`` in
    the middle of a step, and started again from a copy of the script at another path (``--resume`` through
    ``get_external_adapter``, or ``run(run_id=...)`` again). The step its dead worker was running runs again at
    once, not after the 30 s heartbeat timeout, so the run finishes well within LlamaIndex's default 45 s timeout,
    with the count where it was."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    for folder in (first, second):
        (folder / "counter.py").write_text(COUNTER)
    run_file = tmp_path / "last_run_id"
    env = {**_env(), "TEMPORAL_ADDRESS": temporal_address}
    proc = subprocess.Popen(
        [sys.executable, str(first / "counter.py"), "start", str(run_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "[Tick  3]" in line:
            break
    else:
        raise AssertionError("".join(seen))
    await asyncio.sleep(0.2)  # inside the tick's half-second sleep
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    began = time.monotonic()
    mode = "resume" if how == "resume" else "again"
    ran = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(second / "counter.py"), mode, str(run_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - began
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Result: final_count = 10" in ran.stdout, ran.stdout
    ticks = [line for line in ran.stdout.splitlines() if line.startswith("[Tick")]
    assert ticks and ticks[0].startswith(("[Tick  3]", "[Tick  4]")), ran.stdout  # the killed step runs again
    assert "[Start]" not in ran.stdout
    assert took < 25, took  # the heartbeat timeout (30 s) was not waited out
    client = await Client.connect(temporal_address)
    run_id = run_file.read_text().strip()
    described = await client.get_workflow_handle(run_id).describe()
    assert described.status == WorkflowExecutionStatus.COMPLETED
    assert json.dumps(str(described.id)) == json.dumps(run_id)


_slow_at = {"n": -1}


class Tick(Event):
    n: int


class MostlyShort(Workflow):
    """``tick`` runs ten times; the invocation ``_slow_at`` names takes 2 s, the others a few ms."""

    @step
    async def start(self, ev: StartEvent) -> Tick:
        return Tick(n=0)

    @step
    async def tick(self, ev: Tick) -> Tick | StopEvent:
        if ev.n == _slow_at["n"]:
            await asyncio.sleep(2)
        if ev.n >= 9:
            return StopEvent(result=ev.n)
        return Tick(n=ev.n + 1)


async def test_a_step_seen_to_be_short_runs_as_a_local_activity_until_one_takes_long(
    temporal_address: str,
) -> None:
    """``tick``'s first invocation is an activity; once it is seen to be short (``StepOptions.local_below``, 1 s
    here so that a loaded machine cannot make a trivial step look long) the next ones are local activities, on
    the run's worker; the one that takes 2 s runs once, as a local activity, and the invocations after it are
    activities again. The history replays."""
    from datetime import timedelta

    from temporal_workflows.llama import StepOptions

    rt = TemporalRuntime(
        worker=True,
        task_queue=f"llama-short-{uuid.uuid4().hex[:8]}",
        connection=ConnectionConfig(address=temporal_address),
        step_options=StepOptions(local_below=timedelta(seconds=1)),
    )
    _slow_at["n"] = 5
    try:
        handler = MostlyShort(timeout=60, runtime=rt).run()
        assert await asyncio.wait_for(handler, 60) == 9
        client = await rt.client()
        history = await client.get_workflow_handle(handler.run_id).fetch_history()
    finally:
        _slow_at["n"] = -1
        await rt.destroy()
    history = await client.get_workflow_handle(handler.run_id).fetch_history()
    kinds = []
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            kinds.append("activity")
        elif (
            e.HasField("marker_recorded_event_attributes")
            and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
        ):
            kinds.append("local")
    # start (activity), tick 0 (activity), ticks 1-5 (local, the fifth slow), ticks 6-9 (activities again)
    assert kinds == ["activity", "activity", *["local"] * 5, *["activity"] * 4], kinds
    from temporalio.worker import Replayer

    from temporal_workflows._llama_runtime._workflow import LlamaIndexRun
    from temporal_workflows.temporal._worker.plugin import data_converter

    await Replayer(workflows=[LlamaIndexRun], data_converter=data_converter(None)).replay_workflow(history)


SLOW_PROGRAM = textwrap.dedent(
    """
    import asyncio
    from workflows import Workflow, step
    from workflows.events import StartEvent, StopEvent


    class Flow(Workflow):
        @step
        async def go(self, ev: StartEvent) -> StopEvent:
            await asyncio.sleep(3)
            return StopEvent(result="slept")


    workflow = Flow(timeout=60)
    """
)


async def test_a_run_keeps_the_timeout_its_starter_built_the_workflow_with(
    tmp_path: Path, temporal_address: str
) -> None:
    """The CLI worker hosts ``Flow(timeout=60)``; a program starts ``Flow(timeout=1)``: the run times out after 1 s,
    as the starter's workflow would under the default runtime (the timeout travels with the run)."""
    from workflows.errors import WorkflowTimeoutError

    (tmp_path / "flowapp.py").write_text(SLOW_PROGRAM)
    queue = f"llama-timeout-{uuid.uuid4().hex[:8]}"
    sys.path.insert(0, str(tmp_path))
    try:
        import flowapp

        with _cli_worker(tmp_path, queue, temporal_address):
            rt = TemporalRuntime(task_queue=queue, connection=ConnectionConfig(address=temporal_address))
            with pytest.raises(WorkflowTimeoutError, match="timed out after 1"):
                await asyncio.wait_for(flowapp.Flow(timeout=1, runtime=rt).run(), 60)
            assert await asyncio.wait_for(flowapp.Flow(timeout=30, runtime=rt).run(), 60) == "slept"
            await rt.destroy()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("flowapp", None)
