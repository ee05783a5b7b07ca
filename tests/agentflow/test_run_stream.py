"""``run_stream``: events in order, draft text, and the final result."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from agentflow import (
    Action,
    Agent,
    DraftText,
    FinalEvent,
    FunctionModel,
    StepStart,
    TestModel,
    ToolCallEvent,
    ToolResultEvent,
    tool,
)
from agentflow.models.base import StepRequest


@tool
async def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


@pytest.mark.anyio
async def test_stream_yields_step_draft_tool_and_final_events_in_order() -> None:
    agent = Agent("ops", tools=[ping], model=TestModel(stream_chunk=5))
    events = [e async for e in agent.run_stream("is db1 up?")]
    kinds = [e.type for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "final"
    assert kinds.index("step_start") < kinds.index("draft") < kinds.index("step_end")
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("final")
    drafts = [e.text for e in events if isinstance(e, DraftText) and e.step == 0]
    assert len(drafts) > 2 and all(b.startswith(a) for a, b in itertools.pairwise(drafts))
    assert drafts[-1] == '{"tool_calls":[{"name":"ping","arguments":{"host":"a"}}]}'
    call = next(e for e in events if isinstance(e, ToolCallEvent))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert (call.call_id, result.call_id, result.result) == ("s0c0", "s0c0", "a is up")
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.result is not None
    assert final.result.output == final.output and final.result.trace == events
    assert [e.step for e in events if isinstance(e, StepStart)] == [0, 1]


@pytest.mark.anyio
async def test_stream_function_drafts_pass_through() -> None:
    async def stream(request: StepRequest) -> AsyncIterator[str]:
        for piece in ('{"final":', '"hel', 'lo"}'):
            yield piece

    model = FunctionModel(lambda r: Action.final_output("unused"), stream_function=stream)
    events = [e async for e in Agent("a", model=model).run_stream("x")]
    assert [e.text for e in events if isinstance(e, DraftText)] == [
        '{"final":',
        '{"final":"hel',
        '{"final":"hello"}',
    ]
    assert events[-1].output == "hello"
