"""Durable runs: steps checkpointed to SQLite; resume after a crash repeats no finished tool call."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from runtime_helpers import observations

from agentflow import (
    Action,
    Agent,
    FunctionModel,
    MaxStepsExceeded,
    RunNotFoundError,
    RunStateError,
    RunStore,
    Tool,
    tool,
)
from agentflow.models.base import StepRequest


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing in the runtime handles it."""


def make_tools(calls: Counter[str], crash_in: set[str]) -> list[Tool]:
    """``charge`` and ``ship``; a crashing ``ship`` waits for ``charge`` to finish, then dies."""
    charged = anyio.Event()

    @tool
    async def charge(order_id: str, amount: float) -> dict[str, Any]:
        """Charge the card."""
        calls["charge"] += 1
        charged.set()
        return {"charged": amount, "order_id": order_id}

    @tool
    async def ship(order_id: str) -> str:
        """Ship the order."""
        calls["ship"] += 1
        if "ship" in crash_in:
            await charged.wait()  # crash only once charge has finished and been recorded
            raise Crash
        return f"shipped {order_id}"

    return [charge, ship]


def decide(request: StepRequest) -> Action:
    obs = observations(request)
    if not obs:
        return Action.call(
            ("charge", {"order_id": "7", "amount": 9.5}), ("ship", {"order_id": "7"})
        )
    return Action.final_output(f"charged {obs['charge']['charged']}, {obs['ship']}")


def build(
    db: Path, calls: Counter[str], crash_in: set[str], model: FunctionModel | None = None
) -> Agent:
    # A fresh RunStore on the same file stands for a new process.
    return Agent(
        "fulfil",
        tools=make_tools(calls, crash_in),
        model=model or FunctionModel(decide),
        store=RunStore(db),
    )


@pytest.mark.anyio
async def test_crash_during_tools_then_resume_reruns_only_the_unfinished_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    before: Counter[str] = Counter()
    crashed = build(db, before, crash_in={"ship"})
    with pytest.raises(BaseExceptionGroup) as info:
        await crashed.run("fulfil order 7", run_id="order-7")
    assert info.group_contains(Crash)
    assert before == {"charge": 1, "ship": 1}

    store = RunStore(db)
    assert await store.list_runs(status="running") == ["order-7"]
    stored = await store.load_run("order-7")
    assert [s.complete for s in stored.steps] == [False]
    assert set(stored.steps[0].results) == {"s0c0"}  # charge finished, ship did not

    after: Counter[str] = Counter()
    result = await build(db, after, crash_in=set()).resume("order-7")
    assert after == {"ship": 1}  # the card is not charged twice
    assert result.output == "charged 9.5, shipped 7"
    replayed = {o.name: o.replayed for o in result.steps[0].tool_results}
    assert replayed == {"charge": True, "ship": False}
    assert result.trace[0].type == "run_start" and result.trace[0].resumed
    assert (await store.load_run("order-7")).status == "completed"
    assert await store.list_runs(status="running") == []


@pytest.mark.anyio
async def test_crash_in_the_model_after_a_step_resumes_at_the_next_step(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    asked: list[int] = []

    def flaky(request: StepRequest) -> Action:
        asked.append(len(request.messages))
        if observations(request):
            raise RuntimeError("model server died")
        return decide(request)

    first: Counter[str] = Counter()
    with pytest.raises(RuntimeError, match="model server died"):
        await build(db, first, set(), FunctionModel(flaky)).run("go", run_id="r1")
    assert first == {"charge": 1, "ship": 1}

    again: Counter[str] = Counter()
    result = await build(db, again, set()).resume("r1")
    assert again == {}  # step 0 was complete: nothing re-runs
    assert result.output == "charged 9.5, shipped 7"
    assert len(result.steps) == 2 and result.usage.steps == 2
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "tool", "assistant"]


@pytest.mark.anyio
async def test_resume_refuses_unknown_finished_and_foreign_runs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    calls: Counter[str] = Counter()
    agent = build(db, calls, set())
    await agent.run("go", run_id="done")
    with pytest.raises(RunNotFoundError, match="no run with id 'missing'"):
        await agent.resume("missing")
    with pytest.raises(RunStateError, match="run 'done' is completed"):
        await agent.resume("done")
    other = Agent("other", model=FunctionModel(decide), store=RunStore(db))
    await RunStore(db).create_run("foreign", "fulfil", "x", [])
    with pytest.raises(RunStateError, match="started by agent 'fulfil', not 'other'"):
        await other.resume("foreign")
    with pytest.raises(Exception, match="has no run store"):
        await Agent("plain", model=FunctionModel(decide)).resume("done")


@pytest.mark.anyio
async def test_failed_runs_are_marked_failed(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    agent = Agent(
        "loop",
        tools=make_tools(Counter(), set()),
        model=FunctionModel(lambda r: Action.call(("charge", {"order_id": "1", "amount": 1}))),
        max_steps=2,
        store=store,
    )
    with pytest.raises(MaxStepsExceeded):
        await agent.run("x", run_id="f")
    stored = await store.load_run("f")
    assert stored.status == "failed" and "max_steps=2" in (stored.error or "")
    assert [s.complete for s in stored.steps] == [True, True]
    with pytest.raises(RunStateError, match="is failed"):
        await agent.resume("f")


class FlakyFinishStore(RunStore):
    """Dies once while marking a run completed: the final step is recorded, the status is not."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.armed = True

    async def finish_run(self, run_id: str, status: Any, **kwargs: Any) -> None:
        if self.armed and status == "completed":
            self.armed = False
            raise RuntimeError("disk unplugged")
        await super().finish_run(run_id, status, **kwargs)


@pytest.mark.anyio
async def test_resume_after_the_final_step_was_recorded_does_not_ask_the_model_again(
    tmp_path: Path,
) -> None:
    asked: list[int] = []

    def counting(request: StepRequest) -> Action:
        asked.append(1)
        return decide(request)

    store = FlakyFinishStore(tmp_path / "runs.db")
    calls: Counter[str] = Counter()
    agent = Agent(
        "fulfil", tools=make_tools(calls, set()), model=FunctionModel(counting), store=store
    )
    with pytest.raises(RuntimeError, match="disk unplugged"):
        await agent.run("go", run_id="f1")
    assert len(asked) == 2
    result = await agent.resume("f1")
    assert len(asked) == 2 and calls == {"charge": 1, "ship": 1}
    assert result.output == "charged 9.5, shipped 7"
    assert (await store.load_run("f1")).status == "completed"


@pytest.mark.anyio
async def test_resumed_caller_resumes_its_sub_agent_run(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()
    crash = {"armed": True}

    @tool
    def lookup(key: str) -> str:
        """Look something up."""
        calls[key] += 1
        return key.upper()

    def sub_decides(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("lookup", {"key": "x"}))
        if crash["armed"]:
            crash["armed"] = False
            raise Crash  # the process dies inside the sub-run, after its tool finished
        return Action.final_output(f"found {obs['lookup']}")

    def boss_decides(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(("helper", {"task": "find x"}))
        return Action.final_output(f"helper says: {obs['helper']}")

    store = RunStore(tmp_path / "runs.db")
    helper = Agent("helper", tools=[lookup], model=FunctionModel(sub_decides), store=store)
    boss = Agent("boss", tools=[helper.as_tool()], model=FunctionModel(boss_decides), store=store)
    with pytest.raises(Crash):
        await boss.run("go", run_id="b1")
    assert await store.list_runs(status="running") == ["b1", "b1.s0c0"]
    result = await boss.resume("b1")
    assert result.output == "helper says: found X"
    assert calls == {"x": 1}  # the sub-agent's finished tool call was not repeated
    assert await store.list_runs(status="running") == []
