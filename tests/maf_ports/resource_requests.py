"""Agent Framework's sample of a sub-workflow's parallel requests, ported:
``python -m tests.maf_ports.resource_requests [ADDRESS]``.

A sub-workflow turns seven computing-resource requests into seven requests
for input (``ctx.request_info``). The parent's ``ResourceAllocator`` and
``PolicyEngine`` intercept them (``SubWorkflowRequestMessage``): they answer
what they can at once (``create_response``) and ask the outside world for the
rest; the outside answers go back to the sub-workflow, which resumes once per
answer, in order, and yields its summary as the parent's output
(``allow_direct_output``). The printed output is compared with what Agent
Framework 1.23 prints for its own sample (``resource_requests.expected.txt``).

Like Agent Framework's sample, executors keep their bookkeeping in attributes;
that holds while one process runs the steps (here), but a deployment with
several workers keeps such state in ``ctx`` state instead.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Never

from temporal_workflows import (
    Executor,
    SubWorkflowRequestMessage,
    SubWorkflowResponseMessage,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowExecutor,
    handler,
    response_handler,
)
from temporal_workflows.events import RequestInfoEvent

Resource = Literal["cpu", "memory", "disk", "gpu"]


@dataclass
class ComputingResourceRequest:
    request_type: Literal["resource", "policy"]
    resource_type: Resource
    amount: int
    priority: Literal["low", "normal", "high"] | None = None
    policy_type: Literal["quota", "security"] | None = None


@dataclass
class ResourceRequest:
    resource_type: Resource
    amount: int
    priority: Literal["low", "normal", "high"]
    id: str = "resource"


@dataclass
class PolicyRequest:
    policy_type: Literal["quota", "security"]
    resource_type: Resource
    amount: int
    id: str = "policy"


@dataclass
class ResourceResponse:
    resource_type: str
    allocated: int
    source: str


@dataclass
class PolicyResponse:
    approved: bool
    reason: str


REQUESTS = [
    ComputingResourceRequest("resource", "cpu", 2, priority="normal"),
    ComputingResourceRequest("policy", "cpu", 3, policy_type="quota"),
    ComputingResourceRequest("resource", "memory", 15, priority="normal"),
    ComputingResourceRequest("policy", "memory", 100, policy_type="quota"),
    ComputingResourceRequest("resource", "gpu", 1, priority="high"),
    ComputingResourceRequest("policy", "disk", 500, policy_type="quota"),
    ComputingResourceRequest("policy", "cpu", 1, policy_type="security"),
]

# -- the sub-workflow -------------------------------------------------------------------------------


class Distributor(Executor):
    @handler
    async def distribute(
        self, requests: list[ComputingResourceRequest], ctx: WorkflowContext[ResourceRequest | PolicyRequest | int]
    ) -> None:
        for r in requests:
            if r.request_type == "resource":
                assert r.priority is not None
                await ctx.send_message(ResourceRequest(r.resource_type, r.amount, r.priority))
            else:
                assert r.policy_type is not None
                await ctx.send_message(PolicyRequest(r.policy_type, r.resource_type, r.amount))
        await ctx.send_message(len(requests))  # tells the collector how many answers to wait for


class ResourceRequester(Executor):
    @handler
    async def ask(self, request: ResourceRequest, ctx: WorkflowContext) -> None:
        await ctx.request_info(request, ResourceResponse)

    @response_handler
    async def answered(
        self, request: ResourceRequest, response: ResourceResponse, ctx: WorkflowContext[ResourceResponse]
    ) -> None:
        print(f"Resource allocated: {response.allocated} {response.resource_type} from {response.source}")
        await ctx.send_message(response)


class PolicyChecker(Executor):
    @handler
    async def ask(self, request: PolicyRequest, ctx: WorkflowContext) -> None:
        await ctx.request_info(request, PolicyResponse)

    @response_handler
    async def answered(
        self, request: PolicyRequest, response: PolicyResponse, ctx: WorkflowContext[PolicyResponse]
    ) -> None:
        print(f"Policy check result: {response.approved} - {response.reason}")
        await ctx.send_message(response)


class Collector(Executor):
    def __init__(self, id: str) -> None:
        super().__init__(id)
        self.expected = 0
        self.responses: list[ResourceResponse | PolicyResponse] = []

    @handler
    async def expect(self, count: int, ctx: WorkflowContext) -> None:
        self.expected = count

    @handler
    async def collect(self, response: ResourceResponse | PolicyResponse, ctx: WorkflowContext[Never, str]) -> None:
        self.responses.append(response)
        print(f"Collected {len(self.responses)}/{self.expected} responses")
        if len(self.responses) == self.expected:
            await ctx.yield_output(f"All {self.expected} requests processed.")


def build_child() -> Workflow:
    distributor = Distributor("orchestrator")
    resources, policies, collector = (
        ResourceRequester("resource_requester"),
        PolicyChecker("policy_checker"),
        Collector("result_collector"),
    )
    return (
        WorkflowBuilder(start_executor=distributor)
        .add_edge(distributor, resources)
        .add_edge(distributor, policies)
        .add_edge(resources, collector)
        .add_edge(policies, collector)
        .add_edge(distributor, collector)
        .build()
    )


# -- the parent: two executors that intercept the sub-workflow's requests ---------------------------


class ResourceAllocator(Executor):
    def __init__(self, id: str) -> None:
        super().__init__(id)
        self.cache = {"cpu": 10, "memory": 50, "disk": 100}
        self.waiting: dict[str, RequestInfoEvent] = {}

    @handler
    async def intercept(
        self, request: SubWorkflowRequestMessage, ctx: WorkflowContext[SubWorkflowResponseMessage]
    ) -> None:
        asked = request.source_event.data
        if not isinstance(asked, ResourceRequest):
            return  # the policy engine's
        if self.cache.get(asked.resource_type, 0) >= asked.amount:
            self.cache[asked.resource_type] -= asked.amount
            await ctx.send_message(
                request.create_response(ResourceResponse(asked.resource_type, asked.amount, "cache"))
            )
        else:
            self.waiting[asked.id] = request.source_event
            await ctx.request_info(asked, ResourceResponse)

    @response_handler
    async def answered(
        self, asked: ResourceRequest, response: ResourceResponse, ctx: WorkflowContext[SubWorkflowResponseMessage]
    ) -> None:
        print(f"External resource allocated: {response.allocated} {response.resource_type} from {response.source}")
        event = self.waiting.pop(asked.id)
        await ctx.send_message(SubWorkflowResponseMessage(data=response, source_event=event))


class PolicyEngine(Executor):
    def __init__(self, id: str) -> None:
        super().__init__(id)
        self.quota = {"cpu": 5, "memory": 20, "disk": 1000}
        self.waiting: dict[str, RequestInfoEvent] = {}

    @handler
    async def intercept(
        self, request: SubWorkflowRequestMessage, ctx: WorkflowContext[SubWorkflowResponseMessage]
    ) -> None:
        asked = request.source_event.data
        if not isinstance(asked, PolicyRequest):
            return  # the resource allocator's
        if asked.policy_type == "quota":
            within = asked.amount <= self.quota.get(asked.resource_type, 0)
            verdict = (
                PolicyResponse(True, "Within quota limits") if within else PolicyResponse(False, "Exceeds quota limits")
            )
            await ctx.send_message(request.create_response(verdict))
        else:
            self.waiting[asked.id] = request.source_event
            await ctx.request_info(asked, PolicyResponse)

    @response_handler
    async def answered(
        self, asked: PolicyRequest, response: PolicyResponse, ctx: WorkflowContext[SubWorkflowResponseMessage]
    ) -> None:
        print(f"External policy check result: {response.approved} - {response.reason}")
        event = self.waiting.pop(asked.id)
        await ctx.send_message(SubWorkflowResponseMessage(data=response, source_event=event))


def build() -> Workflow:
    allocator, engine = ResourceAllocator("resource_allocator"), PolicyEngine("policy_engine")
    # The sub-workflow is where the parent starts and where it ends: its output is the parent's.
    sub = WorkflowExecutor(build_child(), "sub_workflow_executor", allow_direct_output=True)
    return (
        WorkflowBuilder(start_executor=sub, name="maf_resource_requests")
        .add_edge(sub, allocator)
        .add_edge(allocator, sub)
        .add_edge(sub, engine)
        .add_edge(engine, sub)
        .build()
    )


def external_answer(asked: Any) -> ResourceResponse | PolicyResponse:
    """What the outside world answers: the whole resource, and policy approval."""
    if isinstance(asked, ResourceRequest):
        return ResourceResponse(asked.resource_type, asked.amount, "external_provider")
    return PolicyResponse(True, "External system approved")


def show(outputs: list[Any]) -> None:
    print("\nWorkflow completed with outputs:")
    for output in outputs:
        print(f"- {output}")


async def in_process() -> None:
    workflow = build()
    print(f"Testing with {len(REQUESTS)} mixed requests.")
    print("Starting main workflow...")
    result = await workflow.run(REQUESTS)
    asked = result.get_request_info_events()
    if asked:
        print(f"\nHandling {len(asked)} request info events...\n")
        result = await workflow.run(responses={e.request_id: external_answer(e.data) for e in asked})
    show(result.get_outputs())


async def on_temporal(address: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from temporal_workflows import WorkflowRunState
    from temporal_workflows.events import WorkflowStatusEvent
    from temporal_workflows.temporal import TemporalWorkflowsPlugin, start_run

    workflow = build()
    client = await Client.connect(address, plugins=[TemporalWorkflowsPlugin([workflow], tracing=False)])
    queue = f"maf-resources-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue):
        print(f"Testing with {len(REQUESTS)} mixed requests.")
        print("Starting main workflow...")
        handle = await start_run(client, workflow, REQUESTS, task_queue=queue, max_steps_in_flight=1)
        async for ev in handle.events():
            if isinstance(ev, WorkflowStatusEvent) and ev.state is WorkflowRunState.IDLE_WITH_PENDING_REQUESTS:
                break
        asked = await handle.pending_requests()
        print(f"\nHandling {len(asked)} request info events...\n")
        for p in asked:
            await handle.respond(p.request_id, external_answer(p.data))
        show(await handle.outputs())


def main(argv: list[str]) -> Any:
    if not argv:
        return asyncio.run(in_process())
    from temporal_workflows.__main__ import hard_exit

    asyncio.run(on_temporal(argv[0]))
    # The SDK's runtime threads can abort the finalization of a short-lived process (exit -6).
    hard_exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
