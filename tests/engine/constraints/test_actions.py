"""Action schemas: the union of a tool set's calls and the final output."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from agentflow.engine.chat_template import ToolSpec, format_final, format_tool_calls
from agentflow.engine.constraints import action_schema, compile_json_schema


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")


class OrderArgs(BaseModel):
    order_id: str = Field(description="The order number", max_length=12)
    quantity: int = Field(ge=1, le=99)
    note: str | None = None
    speed: Literal["fast", "slow"] = "fast"
    ship_to: Address | None = None
    tags: list[str] = []


class Answer(BaseModel):
    status: Literal["shipped", "pending"]
    eta_days: int = Field(ge=0)


@pytest.fixture
def tools() -> list[ToolSpec]:
    return [
        ToolSpec("get_order", "Look up an order.", OrderArgs.model_json_schema()),
        ToolSpec("ping", "", {"type": "object", "properties": {}}),
    ]


def test_shape_and_key_order(tools: list[ToolSpec]) -> None:
    schema = action_schema(tools, None)
    calls, final = schema["anyOf"]
    assert list(calls["properties"]) == ["tool_calls"] and calls["required"] == ["tool_calls"]
    item = calls["properties"]["tool_calls"]["items"]["anyOf"][0]
    assert list(item["properties"]) == ["name", "arguments"]
    assert item["properties"]["name"] == {"const": "get_order"}
    assert final["properties"]["final"] == {"type": "string"}
    assert calls["properties"]["tool_calls"]["maxItems"] == 4


def test_pydantic_tools_compile_and_accept_template_actions(tools: list[ToolSpec]) -> None:
    compiled = compile_json_schema(action_schema(tools, Answer.model_json_schema()))
    good = [
        format_tool_calls([("get_order", {"order_id": "58213", "quantity": 2})]),
        format_tool_calls(
            [
                (
                    "get_order",
                    {
                        "order_id": "1",
                        "quantity": 1,
                        "note": None,
                        "speed": "slow",
                        "ship_to": {"street": "Main 1", "city": "Oslo"},
                        "tags": ["x"],
                    },
                ),
                ("ping", {}),
            ]
        ),
        format_final({"status": "shipped", "eta_days": 3}),
    ]
    for text in good:
        assert compiled.matches(text), text
    bad = [
        format_tool_calls([("get_order", {"order_id": "58213", "quantity": 0})]),
        format_tool_calls([("get_order", {"quantity": 2})]),
        format_tool_calls([("refund", {})]),
        format_tool_calls([]),
        format_final("free text"),
        json.dumps({"final": {"status": "lost", "eta_days": 1}}, separators=(",", ":")),
    ]
    for text in bad:
        assert not compiled.matches(text), text


def test_parallel_limit_and_single_call(tools: list[ToolSpec]) -> None:
    five = format_tool_calls([("ping", {})] * 5)
    two = format_tool_calls([("ping", {})] * 2)
    assert not compile_json_schema(action_schema(tools, None)).matches(five)
    assert compile_json_schema(action_schema(tools, None, max_parallel=5)).matches(five)
    single = compile_json_schema(action_schema(tools, None, parallel_calls=False))
    assert not single.matches(two) and single.matches(format_tool_calls([("ping", {})]))


def test_no_tools_leaves_only_the_final_branch() -> None:
    schema = action_schema([], None)
    assert len(schema["anyOf"]) == 1
    compiled = compile_json_schema(schema)
    assert compiled.matches(format_final("done"))
    assert not compiled.matches(format_tool_calls([("ping", {})]))


def test_bad_tool_sets_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools are named"):
        action_schema([ToolSpec("a"), ToolSpec("a")], None)
    with pytest.raises(ValueError, match="must describe an object"):
        action_schema([ToolSpec("a", parameters={"type": "string"})], None)
    with pytest.raises(ValueError, match="max_parallel"):
        action_schema([ToolSpec("a")], None, max_parallel=0)
