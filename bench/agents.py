"""Agents: what live streaming costs, and a long conversation here vs Pydantic AI's own Temporal integration.

    python -m bench --only agents          # this stage alone (a few minutes)
    python -m bench --only agents --quick  # checks it runs: 20 turns, one repetition

Three measurements, on one dev server of their own:

* **Streaming cost.** One agent step whose model streams a 4 KB answer in
  400 pieces (10 ms apart), once with its updates published live and once
  without (``AgentExecutor(stream=False)``): the ratio of the two runs'
  history bytes.
* **Streaming latency.** While the streamed run goes, a client reading
  ``RunHandle.events()`` notes when each update arrives; the model notes when
  it produced each piece (same process, same clock): how long after the step
  published it a client sees the first item, and the longest any piece waited.
* **A 200-turn conversation.** The same Pydantic AI agent (``FunctionModel``:
  each turn calls a tool that returns 5 KB, then answers) as an
  ``AgentExecutor`` in a keep-alive run, a ``send`` per turn; and through
  Pydantic AI's Temporal integration (``TemporalDurability``), a workflow that
  calls ``agent.run(prompt, message_history=...)`` per turn, as its docs
  show. For each: turns completed, history bytes (every run of the workflow
  id, continue-as-new included) ÷ bytes of conversation written (the
  conversation's messages as JSON), the largest history segment, wall time,
  and how the peer ended if it did not finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.api.history.v1 import History
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

__all__ = ["AVAILABLE", "TARGETS", "render", "run_agents_bench"]

try:
    import agent_framework  # noqa: F401
    import pydantic_ai  # noqa: F401
except ImportError:  # pragma: no cover - the agent extras are not installed
    AVAILABLE = False
else:
    AVAILABLE = True

TASK_QUEUE = "bench-agents"
PEER_TASK_QUEUE = "bench-agents-peer"
PIECES = 400
PIECE = "abcdefghi "  # 10 bytes: 400 of them make the 4 KB answer
PIECE_GAP = 0.01
TOOL_OUTPUT_BYTES = 5 * 1024
TURNS = 200
QUICK_TURNS = 20
SEGMENT_LIMIT = 10 * 1024 * 1024

TARGETS = {
    "stream_history_ratio": ("<=", 2.5),
    "stream_first_item_latency_s": ("<=", 1.0),
    "conversation_history_to_data_ratio": ("<=", 3.0),
    "conversation_largest_segment_bytes": ("<=", SEGMENT_LIMIT),
}
"""The issue's targets for this project's figures (the peer's are reported as measured)."""

PUBLISHED: dict[str, list[float]] = {}
"""Per streaming run's ticket: when the model produced each piece (``time.time()``)."""


def _log(msg: str) -> None:
    import sys

    print(f"[bench agents] {msg}", file=sys.stderr, flush=True)


# -- the models (deterministic, the same for both sides) ----------------------------------------


def _ticket_of(messages: list[Any]) -> str:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content.split()[0]
    return "?"


def _narrator() -> Any:
    """A model that streams a 4 KB answer in 400 pieces, noting when it produced each."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    async def whole(messages: list[Any], info: Any) -> ModelResponse:
        # Not streamed (AgentExecutor(stream=False)): the same answer after the same time.
        await asyncio.sleep(PIECES * PIECE_GAP)
        return ModelResponse(parts=[TextPart("".join(f"{i:03d}{PIECE[3:]}" for i in range(PIECES)))])

    async def stream(messages: list[Any], info: Any) -> AsyncIterator[str]:
        times = PUBLISHED.setdefault(_ticket_of(messages), [])
        for i in range(PIECES):
            if i:
                await asyncio.sleep(PIECE_GAP)
            times.append(time.time())
            yield f"{i:03d}{PIECE[3:]}"

    return Agent(FunctionModel(whole, stream_function=stream), name="narrator")


def _conversation_model() -> Any:
    """Each turn: a tool call that fetches 5 KB, then a short answer."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    def decide(messages: list[Any]) -> tuple[str, int]:
        turn = sum(1 for m in messages if isinstance(m, ModelRequest) and not _returns(m))
        last = messages[-1]
        return ("answer" if isinstance(last, ModelRequest) and _returns(last) else "call"), turn

    def _returns(m: Any) -> bool:
        return any(isinstance(p, ToolReturnPart) for p in m.parts)

    def whole(messages: list[Any], info: Any) -> ModelResponse:
        what, turn = decide(messages)
        if what == "call":
            return ModelResponse(parts=[ToolCallPart("fetch", {"turn": turn}, tool_call_id=f"fetch-{turn}")])
        return ModelResponse(parts=[TextPart(f"Noted document {turn}.")])

    async def stream(messages: list[Any], info: Any) -> AsyncIterator[Any]:
        what, turn = decide(messages)
        if what == "call":
            yield {0: DeltaToolCall(name="fetch", json_args=json.dumps({"turn": turn}), tool_call_id=f"fetch-{turn}")}
            return
        for piece in ("Noted ", "document ", f"{turn}."):
            yield piece

    return FunctionModel(whole, stream_function=stream)


def _document(turn: int) -> str:
    """5 KB that differs per turn (as a real tool's output would)."""
    seed = f"document {turn}: "
    body = "".join(f"{(turn * 7919 + i) % 100003:06d} " for i in range(TOOL_OUTPUT_BYTES // 7 + 1))
    return (seed + body)[:TOOL_OUTPUT_BYTES]


def _conversation_agent(*, durable: bool) -> Any:
    from pydantic_ai import Agent

    capabilities: list[Any] = []
    if durable:
        from pydantic_ai.durable_exec.temporal import TemporalDurability

        capabilities.append(TemporalDurability())
    agent = Agent(_conversation_model(), name="peer_assistant" if durable else "assistant", capabilities=capabilities)

    @agent.tool_plain
    def fetch(turn: int) -> str:
        """Fetch the document for this turn."""
        return _document(turn)

    return agent


# -- this project's graphs ------------------------------------------------------------------------


def _graphs() -> dict[str, Any]:
    from temporal_workflows import WorkflowBuilder
    from temporal_workflows.agents import AgentExecutor

    narrator = _narrator()
    return {
        "live": WorkflowBuilder(
            start_executor=AgentExecutor(narrator, id="narrator"), name="bench_agent_stream_live"
        ).build(),
        "quiet": WorkflowBuilder(
            start_executor=AgentExecutor(narrator, id="narrator", stream=False), name="bench_agent_stream_quiet"
        ).build(),
        "chat": WorkflowBuilder(
            # Default options: each turn's AgentResponse is an output, as in Agent Framework.
            start_executor=AgentExecutor(_conversation_agent(durable=False)),
            name="bench_agent_conversation",
        ).build(),
    }


# -- measuring ------------------------------------------------------------------------------------


@dataclass
class Histories:
    segments: list[int] = field(default_factory=list)
    """History bytes of each run of the workflow id, oldest first."""

    @property
    def total(self) -> int:
        return sum(self.segments)

    @property
    def largest(self) -> int:
        return max(self.segments, default=0)


async def _histories(client: Client, workflow_id: str) -> Histories:
    runs: list[tuple[Any, str]] = []
    async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        runs.append((w.start_time, w.run_id))
    out = Histories()
    for _, run_id in sorted(runs):
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        out.segments.append(History(events=history.events).ByteSize())
    return out


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, every: float = 0.01) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(every)


async def _visible_runs(client: Client, workflow_id: str, n: int) -> None:
    """Visibility lags a little behind: wait until it lists ``n`` runs of the id."""

    async def listed() -> bool:
        return len([w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]) >= n

    with contextlib.suppress(TimeoutError):
        await _until(listed, 10, every=0.2)


async def _stream_once(client: Client, graphs: dict[str, Any], variant: str) -> dict[str, Any]:
    from temporal_workflows.agents import AgentRunUpdateEvent
    from temporal_workflows.temporal import start_run

    ticket = f"s{uuid.uuid4().hex[:10]}"
    wid = f"bench-agents-{variant}-{ticket}"
    handle = await start_run(client, graphs[variant], f"{ticket} tell me", id=wid, task_queue=TASK_QUEUE)
    arrivals: list[tuple[float, str]] = []
    async for ev in handle.events():
        if isinstance(ev, AgentRunUpdateEvent):
            arrivals.append((time.time(), ev.data.text or ""))
    await handle.result()
    await _visible_runs(client, wid, 1)
    hist = await _histories(client, wid)
    out: dict[str, Any] = {"history_bytes": hist.total, "updates_received": len(arrivals)}
    if variant == "live":
        published = PUBLISHED.pop(ticket, [])
        waits: list[float] = []
        seen = 0
        for at, text in arrivals:
            pieces = len(text) // len(PIECE)
            waits.extend(at - published[i] for i in range(seen, min(seen + pieces, len(published))))
            seen += pieces
        assert seen == PIECES == len(published), (seen, len(published))
        out["first_item_latency_s"] = round(arrivals[0][0] - published[0], 3)
        out["longest_wait_s"] = round(max(waits), 3)
        out["median_wait_s"] = round(statistics.median(waits), 3)
    return out


async def _conversation_ours(client: Client, graphs: dict[str, Any], turns: int) -> dict[str, Any]:
    from temporal_workflows.agents import conversation_key
    from temporal_workflows.temporal import start_run

    wid = f"bench-agents-chat-{uuid.uuid4().hex[:10]}"
    handle = await start_run(client, graphs["chat"], None, id=wid, task_queue=TASK_QUEUE, keep_alive=True)
    t0 = time.perf_counter()
    done = 0
    error: str | None = None
    try:
        for turn in range(1, turns + 1):
            await handle.send("assistant", f"question {turn}")

            async def answered(expected: int = turn) -> bool:
                status = await handle.status()
                if status["status"] == "failed":
                    raise RuntimeError(status["error"])
                return bool(status["superstep"] >= expected and status["status"] == "idle")

            await _until(answered, 60)
            done = turn
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    state = await handle.state()
    conversation = state.get(conversation_key("assistant"), [])
    written = len(json.dumps(conversation, separators=(",", ":")))
    with contextlib.suppress(Exception):
        await handle.close()
        await asyncio.wait_for(handle.result(), 60)
    wall = time.perf_counter() - t0
    status = await handle.status()
    result: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        result = await asyncio.wait_for(handle.result(), 10)
    await _visible_runs(client, wid, status.get("continued_as_new", 0) + 1)
    hist = await _histories(client, wid)
    return {
        "turns_completed": done,
        "conversation_bytes": written,
        "history_bytes": hist.total,
        "history_to_data_ratio": round(hist.total / written, 3) if written else None,
        "segments": len(hist.segments),
        "largest_segment_bytes": hist.largest,
        "wall_s": round(wall, 1),
        "outputs_kept": len(result.get("outputs") or []),
        "outputs_released": result.get("outputs_released", 0),
        "error": error,
    }


async def _conversation_peer(address: str, turns: int, bytes_per_turn: float) -> dict[str, Any]:
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

    peer_class = _PeerConversation
    assert peer_class is not None
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    worker = Worker(client, task_queue=PEER_TASK_QUEUE, workflows=[peer_class])
    wid = f"bench-agents-peer-{uuid.uuid4().hex[:10]}"
    error: str | None = None
    done: int | None = None
    t0 = time.perf_counter()
    async with worker:
        handle = await client.start_workflow(
            "bench_peer_conversation",
            turns,
            id=wid,
            task_queue=PEER_TASK_QUEUE,
            result_type=int,
            execution_timeout=timedelta(minutes=10),
        )
        try:
            done = await asyncio.wait_for(handle.result(), 600)
        except (WorkflowFailureError, RPCError, TimeoutError) as e:
            error = f"{type(e).__name__}: {getattr(e, 'cause', None) or e}"
        wall = time.perf_counter() - t0
        desc = await handle.describe()
    await _visible_runs(client, wid, 1)
    hist = await _histories(client, wid)
    history = await handle.fetch_history()
    # Turns it got through: one tool call completes per turn.
    tool_calls = sum(
        1
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and "tool" in e.activity_task_scheduled_event_attributes.activity_type.name
    )
    if done is None:
        done = max(0, tool_calls - 1)
    conversation = int(bytes_per_turn * done)  # the same messages as ours, turn for turn
    if error is None and desc.status != WorkflowExecutionStatus.COMPLETED:
        error = f"ended {desc.status.name if desc.status else 'unknown'}"
    return {
        "turns_completed": done,
        "conversation_bytes": conversation,
        "history_bytes": hist.total,
        "history_to_data_ratio": round(hist.total / conversation, 3) if conversation else None,
        "segments": len(hist.segments),
        "largest_segment_bytes": hist.largest,
        "wall_s": round(wall, 1),
        "status": desc.status.name if desc.status else None,
        "error": error,
    }


async def run_agents_bench(*, quick: bool, address: str | None = None) -> dict[str, Any]:
    """Every agent measurement (on its own dev server unless ``address`` is given); the JSON report."""
    if not AVAILABLE:
        return {"skipped": "needs agent-framework-core and pydantic-ai-slim (pip install 'temporal-workflows[agents]')"}
    from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_dev_server

    env: WorkflowEnvironment | None = None
    if address is None:
        env = await start_dev_server()
        address = env.client.service_client.config.target_host
    graphs = _graphs()
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin(list(graphs.values()))])
    report: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        async with Worker(client, task_queue=TASK_QUEUE):
            reps = 1 if quick else 3
            samples: dict[str, list[dict[str, Any]]] = {"live": [], "quiet": []}
            for rep in range(reps):
                _log(f"a 4 KB answer in {PIECES} pieces, streamed and not: repetition {rep + 1}/{reps}")
                for variant in ("live", "quiet") if rep % 2 == 0 else ("quiet", "live"):
                    samples[variant].append(await _stream_once(client, graphs, variant))
            live_bytes = statistics.median(s["history_bytes"] for s in samples["live"])
            quiet_bytes = statistics.median(s["history_bytes"] for s in samples["quiet"])
            report["stream_history_ratio"] = round(live_bytes / quiet_bytes, 3)
            report["stream_first_item_latency_s"] = statistics.median(
                s["first_item_latency_s"] for s in samples["live"]
            )
            report["stream"] = {
                "history_bytes": {"streamed": int(live_bytes), "unstreamed": int(quiet_bytes)},
                "updates_received": [s["updates_received"] for s in samples["live"]],
                "first_item_latency_s": [s["first_item_latency_s"] for s in samples["live"]],
                "longest_wait_s": [s["longest_wait_s"] for s in samples["live"]],
                "median_wait_s": [s["median_wait_s"] for s in samples["live"]],
            }
            turns = QUICK_TURNS if quick else TURNS
            _log(f"a {turns}-turn conversation, each turn adding a 5 KB tool output: this project")
            ours = await _conversation_ours(client, graphs, turns)
        _log(f"the same conversation through Pydantic AI's Temporal integration ({turns} turns or until it fails)")
        per_turn = ours["conversation_bytes"] / max(1, ours["turns_completed"])
        peer = await _conversation_peer(address, turns, per_turn)
        report["conversation_history_to_data_ratio"] = ours["history_to_data_ratio"]
        report["conversation_largest_segment_bytes"] = ours["largest_segment_bytes"]
        report["conversation_turns_completed"] = ours["turns_completed"]
        report["conversation"] = {"turns": turns, "ours": ours, "pydantic_ai_temporal": peer}
    finally:
        if env is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(env.shutdown(), 30)
    report["targets"] = {
        key: {"target": f"{op} {bound:,}", "met": None if quick else _met(report.get(key), op, bound)}
        for key, (op, bound) in TARGETS.items()
    }
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["quick"] = quick
    return report


def _met(value: Any, op: str, bound: float) -> bool | None:
    if not isinstance(value, (int, float)):
        return None
    return value <= bound if op == "<=" else value >= bound


def render(report: dict[str, Any]) -> str:
    """The agents table (plain text)."""
    if "skipped" in report:
        return f"agents: skipped: {report['skipped']}"
    s = report["stream"]
    c = report["conversation"]
    ours, peer = c["ours"], c["pydantic_ai_temporal"]

    def mark(key: str) -> str:
        met = report["targets"][key]["met"]
        return "" if met is None else (" (met)" if met else " (NOT met)")

    def mb(n: int) -> str:
        return f"{n / 1e6:.2f} MB"

    lines = [
        "Agents (python -m bench --only agents)",
        f"  streamed 4 KB answer, {PIECES} pieces: history {s['history_bytes']['streamed']:,} B vs "
        f"{s['history_bytes']['unstreamed']:,} B unstreamed = {report['stream_history_ratio']}x "
        f"(target <= 2.5x){mark('stream_history_ratio')}",
        f"  first live item seen by a client after {report['stream_first_item_latency_s']} s "
        f"(target <= 1 s){mark('stream_first_item_latency_s')}; longest any piece waited "
        f"{max(s['longest_wait_s'])} s; updates received {s['updates_received']}",
        f"  {c['turns']}-turn conversation, 5 KB tool output per turn:",
        f"    this project:   {ours['turns_completed']} turns, history {mb(ours['history_bytes'])} for "
        f"{mb(ours['conversation_bytes'])} of conversation = {ours['history_to_data_ratio']}x (target <= 3x)"
        f"{mark('conversation_history_to_data_ratio')}, {ours['segments']} segment(s), largest "
        f"{mb(ours['largest_segment_bytes'])}{mark('conversation_largest_segment_bytes')}, {ours['wall_s']} s, "
        f"outputs kept {ours.get('outputs_kept')}, released {ours.get('outputs_released')} (default options)"
        + (f", error: {ours['error']}" if ours["error"] else ""),
        f"    Pydantic AI on Temporal: {peer['turns_completed']} turns, history {mb(peer['history_bytes'])} for "
        f"{mb(peer['conversation_bytes'])} of conversation = {peer['history_to_data_ratio']}x, "
        f"{peer['segments']} segment(s), largest {mb(peer['largest_segment_bytes'])}, {peer['wall_s']} s, "
        f"status {peer['status']}" + (f", error: {peer['error']}" if peer["error"] else ""),
    ]
    return "\n".join(lines)


# -- the peer's workflow (module level: the SDK refuses workflow classes defined in a function) ---------

_PeerConversation: type | None = None

if AVAILABLE:
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow

    _peer_agent = _conversation_agent(durable=True)

    @workflow.defn(name="bench_peer_conversation", sandboxed=False)
    class PeerConversation(PydanticAIWorkflow):
        """Pydantic AI's documented shape: a workflow listing its durable agent, calling ``agent.run`` per turn."""

        __pydantic_ai_agents__ = (_peer_agent,)

        @workflow.run
        async def run(self, turns: int) -> int:
            history: list[Any] = []
            for i in range(turns):
                result = await _peer_agent.run(f"question {i + 1}", message_history=history)
                history = list(result.all_messages())
            return turns

    _PeerConversation = PeerConversation
