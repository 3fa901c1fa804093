"""Two agents and a human: ``python -m examples.agents [--interactive]``.

    writer ──▶ reviewer ──(human approves the publish tool)──▶ published

The writer drafts a short piece, the reviewer reads it and calls its
``publish`` tool, which needs a person's approval: the run waits for it as a
pending request (``respond`` answers it), then the reviewer goes on from
there. Both agents' text streams to the terminal as it is produced.

The agents are Agent Framework ``Agent`` objects. With ``OPENAI_API_KEY`` in
the environment they talk to OpenAI (``OPENAI_MODEL``, default
``gpt-4o-mini``; needs ``pip install agent-framework-openai``); without it,
to a scripted model that gives the same answers every time (what
``make demo`` and the tests use).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agent_framework import Agent, AgentResponse, AgentResponseUpdate, Content, Message, tool

from temporal_workflows import Workflow, WorkflowBuilder, WorkflowEvent
from temporal_workflows.agents import AgentRunUpdateEvent
from temporal_workflows.agents.testing import Reply, ScriptedChatClient, ToolCall
from temporal_workflows.events import ExecutorCompletedEvent, RequestInfoEvent

SAMPLE_INPUT = "Write a three-sentence note on why bicycles are efficient."

PUBLISHED: list[dict[str, str]] = []
"""What the publish tool published (in this process)."""


@tool(approval_mode="always_require")
def publish(title: str, body: str) -> str:
    """Publish the reviewed piece; a person approves each call."""
    PUBLISHED.append({"title": title, "body": body})
    return f"published {title!r}"


# -- a scripted model, for running without an API key -------------------------------------------

WRITER_TEXT = (
    "A cyclist turns about a quarter of their food energy into motion, more than any other traveller. "
    "Rolling tyres and a light frame waste little of it. "
    "So a bicycle carries you farther per calorie than walking, a car or even a salmon."
)


def _writer_reply(messages: list[Message]) -> str:
    return WRITER_TEXT


def _reviewer_reply(messages: list[Message]) -> Reply:
    results = [c for m in messages for c in m.contents if c.type == "function_result"]
    if not results:
        draft = next((m.text for m in reversed(messages) if m.role == "assistant" and m.text), "")
        return ToolCall("publish", {"title": "Why bicycles are efficient", "body": draft})
    outcome = str(results[-1].result or "")
    if "published" in outcome:
        return "Clear and accurate; I published it as 'Why bicycles are efficient'."
    return "The piece was not approved for publishing, so I left it unpublished."


def _clients(scripted: bool | None) -> tuple[Any, Any]:
    if scripted is None:
        scripted = not os.environ.get("OPENAI_API_KEY")
    if not scripted:
        try:
            from agent_framework.openai import OpenAIChatClient  # pip install agent-framework-openai
        except ImportError:
            print("OPENAI_API_KEY is set, but agent-framework-openai is not installed: scripted model", file=sys.stderr)
        else:
            model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
            return OpenAIChatClient(model=model), OpenAIChatClient(model=model)
    return ScriptedChatClient(_writer_reply, delay=0.02), ScriptedChatClient(_reviewer_reply, delay=0.02)


def build(*, scripted: bool | None = None) -> Workflow:
    """The graph. ``scripted``: the scripted model (``None``: unless ``OPENAI_API_KEY`` is set)."""
    writer_client, reviewer_client = _clients(scripted)
    writer = Agent(
        client=writer_client,
        name="writer",
        instructions="You write short, accurate pieces. Answer with the piece only.",
    )
    reviewer = Agent(
        client=reviewer_client,
        name="reviewer",
        instructions=(
            "You review the writer's piece. If it is accurate, publish it with the publish tool (a title and the "
            "body), then say in one sentence what you did."
        ),
        tools=[publish],
    )
    return WorkflowBuilder(start_executor=writer, name="agents").add_edge(writer, reviewer).build()


workflow = build()


# -- watching it in a terminal -----------------------------------------------------------------------


class Printer:
    """Prints agents' streamed text as it arrives, one line per agent turn."""

    def __init__(self, out: Any = sys.stdout) -> None:
        self.out = out
        self.speaking: str | None = None

    def show(self, event: WorkflowEvent) -> None:
        if isinstance(event, AgentRunUpdateEvent) and event.data.role == "assistant":
            text = event.data.text
            if not text:
                return
            if event.executor_id != self.speaking:
                self.end()
                print(f"{event.executor_id}: ", end="", file=self.out)
                self.speaking = event.executor_id
            print(text, end="", file=self.out, flush=True)
        elif isinstance(event, RequestInfoEvent):
            self.end()
            call = event.data.function_call if isinstance(event.data, Content) else None
            if call is not None:
                args = call.parse_arguments() or {}
                print(f"approval needed: {call.name}(title={args.get('title')!r})", file=self.out)

    def end(self) -> None:
        if self.speaking is not None:
            print(file=self.out)
            self.speaking = None


def ask(request: RequestInfoEvent, interactive: bool) -> Content:
    """The human's answer to an approval request: from stdin with ``--interactive``, else yes."""
    approved = True
    if interactive:
        approved = input("approve? [y/N] ").strip().lower() in ("y", "yes")
    return request.data.to_function_approval_response(approved=approved)  # type: ignore[no-any-return]


async def run(
    message: str = SAMPLE_INPUT, *, interactive: bool = False, out: Any = sys.stdout, scripted: bool | None = None
) -> list[AgentResponse]:
    """Run in process, streaming to ``out``; answers approvals (see :func:`ask`); returns the agents' responses.

    As in Agent Framework, a streamed run's outputs are the agents' updates
    (``AgentResponseUpdate``s); each finished turn's response is built from
    its updates (a turn that stopped for an approval goes on in a later step).
    """
    printer = Printer(out)
    wf = build(scripted=scripted)
    answers: dict[str, Any] | None = None
    outputs: list[AgentResponse] = []
    turn: dict[str, list[AgentResponseUpdate]] = {}
    events: AsyncIterator[WorkflowEvent] = wf.run(message, stream=True)
    while True:
        pending: list[RequestInfoEvent] = []
        async for event in events:
            printer.show(event)
            if isinstance(event, AgentRunUpdateEvent) and event.executor_id is not None:
                turn.setdefault(event.executor_id, []).append(event.data)
            elif isinstance(event, RequestInfoEvent):
                pending.append(event)
                turn.pop(event.source_executor_id, None)  # the turn stopped for a person; it goes on later
            elif isinstance(event, ExecutorCompletedEvent) and turn.get(event.executor_id):
                outputs.append(AgentResponse.from_updates(turn.pop(event.executor_id)))
        printer.end()
        if not pending:
            return outputs
        answers = {r.request_id: ask(r, interactive) for r in pending}
        events = wf.run(responses=answers, stream=True)


async def on_temporal(client: Any, *, task_queue: str, run_id: str, out: Any = sys.stdout) -> dict[str, Any]:
    """Run on Temporal (a worker hosting ``workflow`` must poll ``task_queue``), streaming to ``out``.

    The agents' text arrives while their steps run (``RunHandle.events()``);
    the approval is answered with ``respond``, as any client would.
    """
    from temporal_workflows.temporal import start_run

    printer = Printer(out)
    handle = await start_run(client, workflow, SAMPLE_INPUT, id=run_id, task_queue=task_queue)
    async for event in handle.events():
        printer.show(event)
        if isinstance(event, RequestInfoEvent):
            await handle.respond(event.request_id, ask(event, interactive=False))
            print("approved (the demo plays the human)", file=out)
    printer.end()
    result: dict[str, Any] = await handle.result()
    return result


def main(argv: Sequence[str] | None = None) -> None:
    interactive = "--interactive" in (argv if argv is not None else sys.argv[1:])
    asyncio.run(run(interactive=interactive))


if __name__ == "__main__":
    main()
