"""Agent Framework's sub-workflow basics sample, ported: ``python -m tests.maf_ports.text_processing [ADDRESS]``.

A parent sends six texts to a ``WorkflowExecutor`` whose child graph counts
each text's words and characters; the six children run in one superstep and
their results come back to the parent as messages. The printed output is
compared with what Agent Framework 1.23 prints for its own sample
(``text_processing.expected.txt``), in process and, given a Temporal server
address, on Temporal (a worker in this process, with default options: the six
messages the parent sends the sub-workflow, and the six results it sends the
parent, are each handled one after another in the order sent, as Agent
Framework delivers them, so the worker prints in the same order).

Like Agent Framework's sample, the parent keeps what it collected in its
executor's attributes; that holds while one process runs the steps (here), but
a deployment with several workers keeps such state in ``ctx`` state instead.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Never

from temporal_workflows import (
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowExecutor,
    handler,
)

TEXTS = [
    "Hello world! This is a simple test.",
    "Python is a powerful programming language used for many applications.",
    "Short text.",
    "This is a longer text with multiple sentences. It contains more words and characters. "
    "We use it to test our text processing workflow.",
    "",
    "   Spaces   around   text   ",
]


@dataclass
class TextProcessingRequest:
    text: str
    task_id: str


@dataclass
class TextProcessingResult:
    task_id: str
    text: str
    word_count: int
    char_count: int


class TextProcessor(Executor):
    """The child graph's one executor: counts a text's words and characters."""

    def __init__(self) -> None:
        super().__init__(id="text_processor")

    @handler
    async def process(self, request: TextProcessingRequest, ctx: WorkflowContext[Never, TextProcessingResult]) -> None:
        shown = request.text[:50] + ("..." if len(request.text) > 50 else "")
        print(f"Sub-workflow processing text (Task {request.task_id}): '{shown}'")
        words = len(request.text.split()) if request.text.strip() else 0
        chars = len(request.text)
        print(f"Task {request.task_id}: {words} words, {chars} characters")
        print(f"Sub-workflow completed task {request.task_id}")
        await ctx.yield_output(TextProcessingResult(request.task_id, request.text, words, chars))


class Orchestrator(Executor):
    """The parent: dispatches each text to the sub-workflow and collects the results."""

    def __init__(self) -> None:
        super().__init__(id="text_orchestrator")
        self.results: list[TextProcessingResult] = []
        self.expected = 0

    @handler
    async def dispatch(self, texts: list[str], ctx: WorkflowContext[TextProcessingRequest]) -> None:
        print(f"Starting processing of {len(texts)} text strings")
        print("=" * 60)
        self.expected = len(texts)
        for number, text in enumerate(texts, start=1):
            print(f"Dispatching task_{number} to sub-workflow")
            await ctx.send_message(TextProcessingRequest(text, f"task_{number}"), target_id="text_processor_workflow")

    @handler
    async def collect(
        self, result: TextProcessingResult, ctx: WorkflowContext[Never, list[TextProcessingResult]]
    ) -> None:
        print(f"Collected result from {result.task_id}")
        self.results.append(result)
        if len(self.results) == self.expected:
            print("\nAll tasks completed!")
            await ctx.yield_output(self.results)


def build() -> Workflow:
    print("Setting up parent workflow...")
    orchestrator = Orchestrator()
    print("Setting up sub-workflow...")
    child = WorkflowBuilder(start_executor=TextProcessor()).build()
    sub = WorkflowExecutor(child, id="text_processor_workflow")
    return (
        WorkflowBuilder(start_executor=orchestrator, name="maf_text_processing")
        .add_edge(orchestrator, sub)
        .add_edge(sub, orchestrator)
        .build()
    )


def report(results: list[TextProcessingResult]) -> None:
    print("\nProcessing Results:")
    print("=" * 60)
    ordered = sorted(results, key=lambda r: r.task_id)
    for r in ordered:
        preview = r.text[:30] + "..." if len(r.text) > 30 else r.text
        preview = preview.replace("\n", " ").strip() or "(empty)"
        print(f"{r.task_id}: '{preview}' -> {r.word_count} words, {r.char_count} chars")
    words = sum(r.word_count for r in ordered)
    chars = sum(r.char_count for r in ordered)
    print("\nSummary:")
    print("=" * 60)
    print(f"Total texts processed: {len(ordered)}")
    print(f"Total words: {words}")
    print(f"Total characters: {chars}")
    print(f"Average words per text: {round(words / len(ordered), 2)}")
    print(f"Average characters per text: {round(chars / len(ordered), 2)}")
    print("\nProcessing complete!")


def header() -> None:
    print(f"\nTesting with {len(TEXTS)} text strings")
    print("=" * 60)


async def in_process() -> None:
    workflow = build()
    header()
    result = await workflow.run(TEXTS)
    (results,) = result.get_outputs()
    report(results)


async def on_temporal(address: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run

    workflow = build()
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin([workflow], tracing=False)])
    queue = f"maf-text-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue):
        header()
        handle = await start_run(client, workflow, TEXTS, task_queue=queue)
        (results,) = await handle.outputs()
        report(results)


def main(argv: list[str]) -> Any:
    if not argv:
        return asyncio.run(in_process())
    from temporal_workflows.__main__ import hard_exit

    asyncio.run(on_temporal(argv[0]))
    # The SDK's runtime threads can abort the finalization of a short-lived process (exit -6).
    hard_exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
