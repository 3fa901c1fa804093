"""``WorkflowBuilder``: what ``build()`` accepts, and every graph it must refuse before it runs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from temporal_workflows import (
    Case,
    Default,
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)
from temporal_workflows.errors import GraphValidationError


class Animal(BaseModel):
    name: str


class Dog(Animal):
    barks: bool = True


class Report(BaseModel):
    text: str


@executor(id="src")
async def src(msg: str, ctx: WorkflowContext[str]) -> None:
    await ctx.send_message(msg)


@executor(id="src_int")
async def src_int(msg: str, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(len(msg))


@executor(id="text_sink")
async def text_sink(msg: str, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(msg)


@executor(id="int_sink")
async def int_sink(msg: int, ctx: WorkflowContext[None, int]) -> None:
    await ctx.yield_output(msg)


@executor(id="float_sink")
async def float_sink(msg: float, ctx: WorkflowContext[None, float]) -> None:
    await ctx.yield_output(msg)


@executor(id="join")
async def join(msgs: list[str], ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(",".join(msgs))


class Counter(Executor):
    @handler(output=int)
    async def count(self, msg: str, ctx: WorkflowContext) -> None:
        await ctx.send_message(len(msg))


class DogBreeder(Executor):
    @handler
    async def breed(self, msg: str, ctx: WorkflowContext[Dog]) -> None:
        await ctx.send_message(Dog(name=msg))


class AnimalShelter(Executor):
    @handler
    async def take(self, animal: Animal, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{type(animal).__name__} {animal.name}")


def invalid(build: Any, *fragments: str) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        build()
    for fragment in fragments:
        assert fragment in str(info.value)
    return info.value


# -- a valid graph -------------------------------------------------------------------------------


def small_graph(name: str = "small") -> Workflow:
    return (
        WorkflowBuilder(start_executor=src, name=name, description="a small graph", max_iterations=7)
        .add_edge(src, text_sink, condition=lambda m: bool(m))
        .build()
    )


def test_build_returns_a_described_workflow() -> None:
    wf = small_graph()
    assert wf.name == "small" and wf.description == "a small graph" and wf.max_iterations == 7
    assert wf.start_executor_id == "src" and list(wf.executors) == ["src", "text_sink"]
    assert wf.topology.start_executor_id == "src" and wf.topology.executor_ids == ("src", "text_sink")
    assert [(e["kind"], e["sources"], e["targets"]) for e in wf.topology.edges] == [("single", ["src"], ["text_sink"])]
    assert "small" in repr(wf)


def test_the_graph_signature_is_stable_for_one_shape_and_changes_with_it() -> None:
    assert small_graph().graph_signature_hash == small_graph().graph_signature_hash
    assert small_graph().graph_signature_hash != small_graph("renamed").graph_signature_hash
    unconditional = WorkflowBuilder(start_executor=src, name="small").add_edge(src, text_sink).build()
    assert unconditional.graph_signature_hash != small_graph().graph_signature_hash


def test_executors_can_be_referred_to_by_id_once_added() -> None:
    wf = (
        WorkflowBuilder(start_executor="src", name="by_id")
        .add_executor(src)
        .add_executor(text_sink)
        .add_edge("src", "text_sink")
        .build()
    )
    assert wf.start_executor_id == "src" and list(wf.executors) == ["src", "text_sink"]


def test_default_executor_ids() -> None:
    @executor
    async def my_step(msg: str, ctx: WorkflowContext) -> None:
        pass

    assert my_step.id == "my_step"
    assert Counter().id == "Counter" and Counter("custom").id == "custom"


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (DogBreeder("breeder"), AnimalShelter("shelter")),  # a subclass goes to a base-class handler
        (src_int, float_sink),  # an int is a float
    ],
)
def test_compatible_edges_build(source: Executor, target: Executor) -> None:
    WorkflowBuilder(start_executor=source).add_edge(source, target).build()
    WorkflowBuilder(start_executor=src).add_fan_in_edges([src], join).build()  # str into list[str]


def test_switch_case_and_chain_are_recorded_in_the_topology() -> None:
    @executor(id="other_sink")
    async def other_sink(msg: str, ctx: WorkflowContext) -> None:
        pass

    a, b, c = src, text_sink, other_sink
    wf = (
        WorkflowBuilder(start_executor=a)
        .add_switch_case_edge_group(a, [Case(condition=lambda m: m == "x", target=b), Default(target=c)])
        .build()
    )
    assert [e["kind"] for e in wf.topology.edges] == ["switch_case"]
    assert wf.topology.edges[0]["labels"] == ["condition", "default"]

    @executor(id="relay")
    async def relay(msg: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(msg)

    chain = WorkflowBuilder(start_executor=a).add_chain([a, relay, b]).build()
    assert [(e["sources"], e["targets"]) for e in chain.topology.edges] == [
        (["src"], ["relay"]),
        (["relay"], ["text_sink"]),
    ]


# -- refused graphs -----------------------------------------------------------------------------


def test_a_graph_without_start_executor_is_refused() -> None:
    invalid(lambda: WorkflowBuilder().add_edge(src, text_sink).build(), "no start executor")


def test_a_start_executor_referred_to_by_an_unknown_id_is_refused() -> None:
    invalid(lambda: WorkflowBuilder(start_executor="ghost").add_executor(src).build(), "'ghost'", "never added")


def test_an_edge_to_an_unknown_id_is_refused() -> None:
    invalid(lambda: WorkflowBuilder(start_executor=src).add_edge(src, "ghost").build(), "'ghost'")


def test_two_executors_sharing_an_id_are_refused() -> None:
    @executor(id="text_sink")
    async def impostor(msg: str, ctx: WorkflowContext) -> None:
        pass

    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_fan_out_edges(src, [text_sink, impostor]).build(),
        "'text_sink'",
        "unique",
    )


def test_a_duplicate_edge_is_refused_even_across_edge_kinds() -> None:
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_edge(src, text_sink).add_edge(src, text_sink).build(),
        "duplicate edge 'src' -> 'text_sink'",
    )
    invalid(
        lambda: (
            WorkflowBuilder(start_executor=src)
            .add_fan_out_edges(src, [text_sink, int_sink])
            .add_edge(src, text_sink)
            .build()
        ),
        "duplicate edge 'src' -> 'text_sink'",
        "fan_out",
    )


def test_unreachable_executors_are_refused() -> None:
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_edge(src, text_sink).add_executor(int_sink).build(),
        "['int_sink']",
        "cannot be reached",
        "'src'",
    )
    invalid(  # reachable only from an executor that is itself unreachable
        lambda: WorkflowBuilder(start_executor=src).add_edge(src, text_sink).add_edge(src_int, int_sink).build(),
        "src_int",
        "int_sink",
    )


def test_an_edge_whose_types_do_not_match_is_refused_naming_both_ends() -> None:
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_edge(src, int_sink).build(),
        "'src' -> 'int_sink'",
        "['str']",
        "['int']",
    )


def test_handler_output_declared_in_the_decorator_is_checked() -> None:
    counter = Counter("counter")
    invalid(lambda: WorkflowBuilder(start_executor=counter).add_edge(counter, text_sink).build(), "'counter'", "int")
    WorkflowBuilder(start_executor=counter).add_edge(counter, int_sink).build()


def test_a_base_class_is_not_accepted_where_a_subclass_is_handled() -> None:
    class AnimalSource(Executor):
        @handler
        async def emit(self, msg: str, ctx: WorkflowContext[Animal]) -> None:
            await ctx.send_message(Animal(name=msg))

    class DogOnly(Executor):
        @handler
        async def walk(self, dog: Dog, ctx: WorkflowContext) -> None:
            pass

    s, t = AnimalSource("animals"), DogOnly("dogs")
    invalid(lambda: WorkflowBuilder(start_executor=s).add_edge(s, t).build(), "'animals' -> 'dogs'")


def test_undeclared_outputs_are_checked_at_send_time_instead() -> None:
    @executor(id="vague")
    async def vague(msg: str, ctx: WorkflowContext) -> None:
        await ctx.send_message(msg)

    WorkflowBuilder(start_executor=vague).add_edge(vague, int_sink).build()


def test_a_switch_case_group_needs_exactly_one_default_last() -> None:
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_switch_case_edge_group(
            src, [Case(condition=lambda m: True, target=text_sink)]
        ),
        "Default",
    )
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_switch_case_edge_group(
            src, [Default(target=join), Case(condition=lambda m: True, target=text_sink)]
        ),
        "Default",
    )
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_switch_case_edge_group(
            src, [Default(target=join), Default(target=text_sink)]
        ),
        "exactly one Default",
    )


def test_a_fan_in_target_needs_a_list_handler() -> None:
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_fan_in_edges([src], text_sink).build(),
        "fan-in target 'text_sink'",
        "list",
    )


def test_a_fan_in_list_of_the_wrong_type_is_refused() -> None:
    @executor(id="numbers")
    async def numbers(msgs: list[int], ctx: WorkflowContext) -> None:
        pass

    invalid(lambda: WorkflowBuilder(start_executor=src).add_fan_in_edges([src], numbers).build(), "'src' -> 'numbers'")


def test_other_builder_mistakes_are_refused() -> None:
    class Empty(Executor):
        pass

    invalid(lambda: WorkflowBuilder(start_executor=Empty("empty")).build(), "'empty'", "no @handler")
    invalid(lambda: WorkflowBuilder(start_executor=src, max_iterations=0).build(), "max_iterations")
    invalid(lambda: WorkflowBuilder(start_executor=src).add_state_reducer("k", "max"), "unknown reducer 'max'")
    invalid(lambda: WorkflowBuilder(start_executor=src).add_state_reducer("@private", "append"), "'@private'")
    invalid(lambda: WorkflowBuilder(start_executor=src).add_state_reducer("k", 42), "'k'")  # type: ignore[arg-type]
    invalid(
        lambda: WorkflowBuilder(start_executor=src).add_multi_selection_edge_group(src, [text_sink], "nope"),  # type: ignore[arg-type]
        "selection_func",
    )
    invalid(lambda: WorkflowBuilder(start_executor=src).add_edge(src, object()), "Executor")  # type: ignore[arg-type]


# -- handler signatures are checked when they are defined -------------------------------------------


def test_handler_signatures_are_checked_at_definition_time() -> None:
    with pytest.raises(TypeError, match="async"):

        @executor(id="sync")
        def sync(msg: str, ctx: WorkflowContext) -> None:  # type: ignore[arg-type]
            pass

    with pytest.raises(TypeError, match="annotate the message parameter"):

        @executor(id="untyped")
        async def untyped(msg, ctx: WorkflowContext) -> None:  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(TypeError, match="takes 1 parameters"):

        class OneParam(Executor):
            @handler
            async def h(self, msg: str) -> None:
                pass

    with pytest.raises(TypeError, match="original_request, response, ctx"):

        class BadResponse(Executor):
            @response_handler
            async def on(self, response: str, ctx: WorkflowContext) -> None:
                pass
