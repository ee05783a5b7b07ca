"""Handoffs, agents as tools, pipelines (sequence, fan-out/fan-in, router), concurrent runs."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Literal

import anyio
import pytest
from runtime_helpers import last_user_text, observations, script

from agentflow import (
    Action,
    Agent,
    AgentflowError,
    FunctionModel,
    HandoffEvent,
    RouteError,
    RunStore,
    TestModel,
    fan_out,
    router,
    sequence,
    tool,
)
from agentflow.models.base import StepRequest


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


@pytest.mark.anyio
async def test_handoff_passes_the_conversation_to_the_target_agent() -> None:
    seen_by_billing: list[StepRequest] = []

    def billing_decides(request: StepRequest) -> Action:
        seen_by_billing.append(request)
        obs = observations(request)
        if "refund" not in obs:
            return Action.call(("refund", {"order_id": "9"}))
        return Action.final_output(obs["refund"])

    billing = Agent(
        "billing",
        "You handle refunds.",
        [refund],
        model=FunctionModel(billing_decides),
        description="Refunds",
    )
    triage = Agent(
        "triage",
        "Route the customer.",
        model=FunctionModel(script(Action.call(("transfer_to_billing", {})))),
        handoffs=[billing],
    )
    assert "transfer_to_billing" in triage.tool_map
    assert triage.tool_map["transfer_to_billing"].description.endswith("billing agent: Refunds")
    result = await triage.run("I want my money back for order 9")
    assert result.output == "refunded 9"
    assert result.agent == "billing"
    assert [s.agent for s in result.steps] == ["triage", "billing", "billing"]
    handoffs = [e for e in result.trace if isinstance(e, HandoffEvent)]
    assert [(e.agent, e.to_agent) for e in handoffs] == [("triage", "billing")]
    first = seen_by_billing[0]
    assert first.instructions == "You handle refunds."
    assert [t.name for t in first.tools] == ["refund"]
    assert last_user_text(first.messages) == "I want my money back for order 9"


@pytest.mark.anyio
async def test_only_one_handoff_per_step() -> None:
    a = Agent("a", model=TestModel(final_output="from a"))
    b = Agent("b", model=TestModel(final_output="from b"))
    both = Action.call(("transfer_to_a", {}), ("transfer_to_b", {}))
    triage = Agent("triage", model=FunctionModel(script(both)), handoffs=[a, b])
    result = await triage.run("x")
    assert result.output == "from a"
    errors = [o.error for o in result.steps[0].tool_results]
    assert errors[0] is None and "only one handoff per step" in (errors[1] or "")


@pytest.mark.anyio
async def test_handoff_run_resumes_with_the_agent_that_had_control(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()

    @tool
    def close_ticket(ticket: str) -> str:
        """Close a ticket."""
        calls[ticket] += 1
        return "closed"

    fail_next = {"on": True}

    def closer_decides(request: StepRequest) -> Action:
        if "close_ticket" not in observations(request):
            return Action.call(("close_ticket", {"ticket": "T1"}))
        if fail_next["on"]:
            raise RuntimeError("crash")
        return Action.final_output("ticket closed")

    closer = Agent("closer", tools=[close_ticket], model=FunctionModel(closer_decides))
    store = RunStore(tmp_path / "runs.db")
    front = Agent(
        "front",
        model=FunctionModel(script(Action.call(("transfer_to_closer", {})))),
        handoffs=[closer],
        store=store,
    )
    with pytest.raises(RuntimeError):
        await front.run("close T1", run_id="h1")
    fail_next["on"] = False
    result = await front.resume("h1")
    assert result.output == "ticket closed" and result.agent == "closer"
    assert calls == {"T1": 1}


@pytest.mark.anyio
async def test_agent_as_tool_runs_a_sub_agent_and_adds_its_usage() -> None:
    researcher = Agent(
        "researcher", "Answer research questions.", model=TestModel(final_output="42")
    )
    tasks: list[str] = []

    def manager_decides(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("researcher", {"task": "What is the answer?"}))
        tasks.append(str(obs["researcher"]))
        return Action.final_output(f"The researcher says {obs['researcher']}")

    manager = Agent("manager", tools=[researcher.as_tool()], model=FunctionModel(manager_decides))
    spec = manager.tool_map["researcher"]
    assert spec.description == "Answer research questions."
    assert list(spec.parameters["properties"]) == ["task"]
    result = await manager.run("Ask the researcher")
    assert result.output == "The researcher says 42"
    assert result.usage.steps == 3  # two of the manager, one of the researcher
    assert result.usage.modes == {"function": 2, "test": 1}


def upper_agent(name: str) -> Agent:
    return Agent(
        name, model=FunctionModel(lambda r: Action.final_output(last_user_text(r.messages).upper()))
    )


def suffix_agent(name: str, suffix: str) -> Agent:
    return Agent(
        name,
        model=FunctionModel(lambda r: Action.final_output(last_user_text(r.messages) + suffix)),
    )


@pytest.mark.anyio
async def test_sequence_feeds_each_output_to_the_next_stage() -> None:
    pipeline = sequence(upper_agent("shout"), suffix_agent("bang", "!"))
    result = await pipeline.run("hello")
    assert result.output == "HELLO!"
    assert [name for name, _ in result.stages] == ["shout", "bang"]
    assert result.usage.steps == 2
    nested = sequence(pipeline, suffix_agent("more", "?"), name="outer")
    assert (await nested.run("hi")).output == "HI!?"
    with pytest.raises(AgentflowError, match="use await"):
        nested.run_sync("a")


def test_pipeline_run_sync() -> None:
    assert sequence(upper_agent("shout"), suffix_agent("bang", "!")).run_sync("a").output == "A!"


@pytest.mark.anyio
async def test_fan_out_runs_branches_concurrently_and_fans_in() -> None:
    started: list[str] = []
    all_started = anyio.Event()

    async def barrier_echo(request: StepRequest) -> Action:
        # Each branch waits until all three are running: deadlock (timeout) if sequential.
        started.append(last_user_text(request.messages))
        if len(started) % 3 == 0:
            all_started.set()
        with anyio.fail_after(5):
            await all_started.wait()
        return Action.final_output(last_user_text(request.messages))

    branches = [Agent(f"b{i}", model=FunctionModel(barrier_echo)) for i in range(3)]
    plain = await fan_out(*branches).run("x")
    assert plain.output == {"b0": "x", "b1": "x", "b2": "x"}

    joined = await fan_out(*branches, combine=lambda outs: "+".join(sorted(outs))).run("x")
    assert joined.output == "b0+b1+b2"
    summarised = await fan_out(*branches, combine=upper_agent("summary")).run("x")
    assert summarised.output == '{"B0":"X","B1":"X","B2":"X"}'
    assert summarised.usage.steps == 4
    with pytest.raises(AgentflowError, match="distinct names"):
        fan_out(branches[0], branches[0])


@pytest.mark.anyio
async def test_router_picks_a_route_with_an_agent_or_a_function() -> None:
    routes = {
        "billing": suffix_agent("billing", " -> billing"),
        "tech": suffix_agent("tech", " -> tech"),
    }
    classifier = Agent(
        "classify",
        output_type=Literal["billing", "tech"],
        model=FunctionModel(
            lambda r: Action.final_output(
                "billing" if "refund" in last_user_text(r.messages) else "tech"
            )
        ),
    )
    by_agent = router(classifier, routes)
    first = await by_agent.run("refund please")
    assert (first.route, first.output) == ("billing", "refund please -> billing")
    assert (await by_agent.run("wifi broken")).route == "tech"

    by_function = router(lambda text: "nonsense", routes, default="tech")
    assert (await by_function.run("x")).output == "x -> tech"
    with pytest.raises(RouteError, match="'nonsense', which is not one of"):
        await router(lambda text: "nonsense", routes).run("x")
    with pytest.raises(AgentflowError, match="default 'other'"):
        router(classifier, routes, default="other")


@pytest.mark.anyio
async def test_two_hundred_concurrent_runs_keep_their_own_results() -> None:
    @tool
    async def echo(text: str) -> str:
        """Echo after a random delay."""
        await anyio.sleep(random.random() * 0.01)
        return text

    def decide(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("echo", {"text": last_user_text(request.messages)}))
        return Action.final_output(obs["echo"])

    agent = Agent("echo", tools=[echo], model=FunctionModel(decide))
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        results[i] = (await agent.run(f"message {i}")).output

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(one, i)
    assert results == {i: f"message {i}" for i in range(200)}
