"""The plan-act-observe loop: tools, observations, output validation, and every failure path."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import jsonschema
import pytest
from pydantic import BaseModel
from runtime_helpers import observations, script

from agentflow import (
    Action,
    Agent,
    FunctionModel,
    MaxStepsExceeded,
    ModelBehaviorError,
    RetryEvent,
    RunContext,
    TestModel,
    tool,
)
from agentflow.models.base import StepRequest


class Ticket(BaseModel):
    order_id: str
    status: str


@tool
def get_order(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped"}


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"database is down ({reason})")


@tool(timeout=0.05)
async def hang(seconds: float) -> str:
    """Sleeps too long."""
    await anyio.sleep(seconds)
    return "woke up"


def test_run_sync_with_test_model_calls_tools_then_answers() -> None:
    agent = Agent("support", "Help customers.", [get_order], model=TestModel())
    result = agent.run_sync("Where is order 1?")
    assert result.completed
    assert [s.action.is_final for s in result.steps] == [False, True]
    assert result.tool_calls[0].result == {"order_id": "a", "status": "shipped"}
    assert json.loads(result.output) == {"get_order": {"order_id": "a", "status": "shipped"}}
    assert result.usage.steps == 2 and result.usage.tool_calls == 1
    assert result.usage.modes == {"test": 2}
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.anyio
async def test_structured_output_is_validated_into_output_type() -> None:
    def decide(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("get_order", {"order_id": "58213"}))
        return Action.final_output(obs["get_order"])

    agent = Agent("support", tools=[get_order], output_type=Ticket, model=FunctionModel(decide))
    result = await agent.run("Where is 58213?")
    assert result.output == Ticket(order_id="58213", status="shipped")
    assert agent.output_schema is not None and agent.output_schema["required"] == [
        "order_id",
        "status",
    ]


@pytest.mark.anyio
async def test_parallel_tool_calls_run_concurrently_and_results_keep_call_order() -> None:
    second_started = anyio.Event()

    @tool(timeout=5)
    async def wait(tag: str) -> str:
        if tag == "first":  # finishes only once "second" is running: deadlock if sequential
            await second_started.wait()
        else:
            second_started.set()
        return tag

    model = FunctionModel(
        script(
            Action.call(("wait", {"tag": "first"}), ("wait", {"tag": "second"})),
            Action.final_output("ok"),
        )
    )
    result = await Agent("a", tools=[wait], model=model).run("go")
    assert [o.result for o in result.steps[0].tool_results] == ["first", "second"]
    finished = [e.result for e in result.trace if e.type == "tool_result"]
    assert finished == ["second", "first"]  # events come in completion order
    tool_msgs = [m.content for m in result.messages if m.role == "tool"]
    assert tool_msgs == ['"first"', '"second"']  # observations keep call order


@pytest.mark.anyio
async def test_tool_that_raises_becomes_an_observation() -> None:
    seen: list[dict[str, Any]] = []

    def decide(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("explode", {"reason": "test"}))
        seen.append(obs)
        return Action.final_output("sorry, try later")

    result = await Agent("a", tools=[explode], model=FunctionModel(decide)).run("hi")
    assert result.output == "sorry, try later"
    assert seen == [{"explode": {"error": "ValueError: database is down (test)"}}]
    assert result.tool_calls[0].error == "ValueError: database is down (test)"


@pytest.mark.anyio
async def test_tool_that_hangs_past_its_timeout_is_cancelled_and_reported() -> None:
    seen: list[dict[str, Any]] = []

    def decide(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("hang", {"seconds": 30}))
        seen.append(obs)
        return Action.final_output("gave up")

    started = time.perf_counter()
    result = await Agent("a", tools=[hang], model=FunctionModel(decide)).run("hi")
    assert time.perf_counter() - started < 10  # not the tool's 30 s
    assert seen == [{"hang": {"error": "TimeoutError: tool 'hang' did not finish within 0.05s"}}]
    assert result.output == "gave up"


@pytest.mark.anyio
async def test_agent_default_tool_timeout_applies_to_sync_tools() -> None:
    @tool
    def blocking() -> str:
        time.sleep(3)  # the abandoned worker thread finishes on its own
        return "late"

    model = FunctionModel(script(Action.call(("blocking", {})), Action.final_output("done")))
    started = time.perf_counter()
    result = await Agent("a", tools=[blocking], model=model, tool_timeout=0.05).run("hi")
    assert time.perf_counter() - started < 2.5  # did not wait for the thread
    assert result.tool_calls[0].error == "TimeoutError: tool 'blocking' did not finish within 0.05s"


@pytest.mark.anyio
async def test_unknown_tool_from_remote_model_is_fed_back_and_retried() -> None:
    requests: list[StepRequest] = []

    def decide(request: StepRequest) -> Action:
        requests.append(request)
        if len(requests) == 1:
            return Action.call(("get_ordr", {"order_id": "1"}))
        if len(requests) == 2:
            return Action.call(("get_order", {"order_id": "1"}))
        return Action.final_output("shipped")

    result = await Agent("a", tools=[get_order], model=FunctionModel(decide)).run("where?")
    assert result.output == "shipped"
    feedback = json.loads(requests[1].messages[-1].content)
    assert feedback == {"error": "unknown tool 'get_ordr'; available tools: get_order"}
    assert result.steps[0].retry_reason is not None
    assert any(isinstance(e, RetryEvent) for e in result.trace)


@pytest.mark.anyio
async def test_invalid_arguments_are_fed_back_with_bounded_retries() -> None:
    requests: list[StepRequest] = []

    def always_wrong(request: StepRequest) -> Action:
        requests.append(request)
        return Action.call(("get_order", {"id": 5}))

    agent = Agent("a", tools=[get_order], model=FunctionModel(always_wrong), max_retries=2)
    with pytest.raises(ModelBehaviorError, match="3 invalid actions in a row") as info:
        await agent.run("where?")
    assert len(requests) == 3
    error = json.loads(requests[1].messages[-1].content)["error"]
    assert error.startswith("invalid arguments for tool 'get_order':")
    assert "order_id: Field required" in error and "id: Extra inputs are not permitted" in error
    partial = info.value.partial
    assert partial is not None and not partial.completed and len(partial.steps) == 3
    assert partial.trace[-1].type == "run_failed"


@pytest.mark.anyio
async def test_a_valid_step_resets_the_retry_budget() -> None:
    bad = Action.call(("nope", {}))
    good = Action.call(("get_order", {"order_id": "1"}))
    model = FunctionModel(script(bad, good, bad, good, Action.final_output("ok")))
    result = await Agent("a", tools=[get_order], model=model, max_retries=1).run("x")
    assert result.output == "ok"


@pytest.mark.anyio
async def test_invalid_final_output_and_unparseable_text_are_retried() -> None:
    model = FunctionModel(
        script(
            "this is not JSON",
            Action.final_output({"order_id": "1"}),  # missing status
            {"final": {"order_id": "1", "status": "lost"}},
        )
    )
    agent = Agent("a", output_type=Ticket, model=model)
    result = await agent.run("x")
    assert result.output == Ticket(order_id="1", status="lost")
    reasons = [s.retry_reason or "" for s in result.steps]
    assert reasons[0].startswith("invalid action: action is not valid JSON")
    assert reasons[1] == "invalid final output: status: Field required"
    seen = [m.content for m in result.messages if m.role == "user"]
    assert seen[1].startswith("Error: invalid action")


@pytest.mark.anyio
async def test_max_steps_raises_with_the_partial_run() -> None:
    model = FunctionModel(lambda request: Action.call(("get_order", {"order_id": "1"})))
    agent = Agent("loop", tools=[get_order], model=model, max_steps=3)
    with pytest.raises(MaxStepsExceeded, match="max_steps=3") as info:
        await agent.run("forever")
    partial = info.value.partial
    assert partial is not None and partial.output is None and not partial.completed
    assert len(partial.steps) == 3 and len(partial.tool_calls) == 3
    assert partial.usage.steps == 3


@pytest.mark.anyio
async def test_deps_and_context_reach_tools() -> None:
    @tool
    def balance(ctx: RunContext[dict[str, int]], account: str) -> int:
        assert ctx.step == 0 and ctx.agent_name == "bank" and ctx.call_id == "s0c0"
        return ctx.deps[account]

    model = FunctionModel(
        script(Action.call(("balance", {"account": "ada"})), Action.final_output("done"))
    )
    result = await Agent("bank", tools=[balance], model=model).run("x", deps={"ada": 42})
    assert result.tool_calls[0].result == 42


@pytest.mark.anyio
async def test_message_history_continues_a_conversation() -> None:
    first = await Agent("a", model=TestModel(final_output="hello")).run("hi")
    seen: list[int] = []

    def decide(request: StepRequest) -> Action:
        seen.append(len(request.messages))
        return Action.final_output("again")

    await Agent("a", model=FunctionModel(decide)).run("and now?", message_history=first.messages)
    assert seen == [3]


def test_bad_agent_configuration_is_rejected() -> None:
    from agentflow import AgentflowError, ToolDefinitionError

    with pytest.raises(AgentflowError, match="max_steps must be at least 1"):
        Agent("a", max_steps=0)
    with pytest.raises(AgentflowError, match="agent name"):
        Agent("has space")
    with pytest.raises(AgentflowError, match="mode must be"):
        Agent("a", mode="fast")  # type: ignore[arg-type]
    agent = Agent("a", tools=[get_order, get_order], model=TestModel())
    with pytest.raises(ToolDefinitionError, match="two tools named 'get_order'"):
        agent.run_sync("x")


@pytest.mark.anyio
async def test_mode_and_settings_reach_the_model() -> None:
    seen: list[StepRequest] = []

    def decide(request: StepRequest) -> Action:
        seen.append(request)
        return Action.final_output("ok")

    agent = Agent(
        "a",
        "Be brief.",
        model=FunctionModel(decide),
        mode="hybrid",
        model_settings={"temperature": 0},
    )
    await agent.run("x")
    assert seen[0].mode == "hybrid" and seen[0].settings == {"temperature": 0}
    assert seen[0].instructions == "Be brief."
    validator = jsonschema.Draft202012Validator(seen[0].action_schema)
    assert validator.is_valid({"final": "text"})
    assert not validator.is_valid({"final": 3})
    assert not validator.is_valid({"tool_calls": [{"name": "x", "arguments": {}}]})


@pytest.mark.anyio
async def test_auto_mode_redoes_a_rejected_output_in_hybrid_mode() -> None:
    seen: list[tuple[str | None, str | None]] = []

    def decide(request: StepRequest) -> Action:
        seen.append((request.mode, request.settings.get("reason")))
        if len(seen) == 1:
            return Action.final_output({"order_id": "1"})  # missing status
        return Action.final_output({"order_id": "1", "status": "ok"})

    agent = Agent("a", output_type=Ticket, model=FunctionModel(decide), mode="auto")
    await agent.run("x")
    assert seen == [("auto", None), ("hybrid", "validation: status: Field required")]
