"""TestModel and FunctionModel: what users' own tests rely on."""

from __future__ import annotations

from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from agentflow import Action, Agent, FunctionModel, TestModel, tool
from agentflow.engine.chat_template import ChatMessage
from agentflow.models.base import ActionParseError, StepRequest, parse_action
from agentflow.models.test import sample_from_schema


class Item(BaseModel):
    sku: str = Field(min_length=3)
    qty: int = Field(ge=1)


class Order(BaseModel):
    id: int
    items: list[Item] = Field(min_length=1)
    kind: Literal["retail", "wholesale"]
    note: str | None
    email: str = Field(json_schema_extra={"format": "email"})


@pytest.mark.parametrize(
    "schema",
    [
        Order.model_json_schema(),
        {"type": "number", "exclusiveMinimum": 2},
        {"type": ["null", "integer"], "minimum": -5},
        {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
        {"anyOf": [{"type": "null"}, {"type": "string", "format": "date"}]},
        {"allOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}]},
    ],
)
def test_sample_from_schema_is_valid(schema: dict[str, Any]) -> None:
    jsonschema.validate(sample_from_schema(schema), schema)


def test_test_model_one_tool_per_step_when_not_parallel() -> None:
    @tool
    def first(x: int) -> int:
        return x + 1

    @tool
    def second(y: str) -> str:
        return y * 2

    @tool
    def never() -> None:
        raise AssertionError("filtered out")

    model = TestModel(parallel=False, call_tools=["first", "second"])
    result = Agent("a", tools=[first, second, never], model=model).run_sync("go")
    assert [[c.name for c in s.action.tool_calls] for s in result.steps[:-1]] == [
        ["first"],
        ["second"],
    ]
    assert result.output == '{"first":1,"second":"aa"}'


def test_test_model_final_output_and_no_tools() -> None:
    assert Agent("a", model=TestModel()).run_sync("x").output == "success (no tool calls)"
    assert Agent(
        "a", output_type=Item, model=TestModel(final_output={"sku": "abc", "qty": 2})
    ).run_sync("x").output == Item(sku="abc", qty=2)


@pytest.mark.anyio
async def test_function_model_accepts_actions_text_and_dicts_and_rejects_others() -> None:
    request = StepRequest(
        messages=[ChatMessage(role="user", content="x")], tools=[], action_schema={}
    )
    for value in (Action.final_output(1), '{"final":1}', {"final": 1}):
        response = await FunctionModel(lambda r, v=value: v).step(request)
        assert response.action == Action.final_output(1) and response.text == '{"final":1}'

    async def async_fn(r: StepRequest) -> Action:
        return Action.call(("t", {"a": 1}))

    response = await FunctionModel(async_fn).step(request)
    assert response.action.tool_calls[0].arguments == {"a": 1}
    with pytest.raises(TypeError, match="must return an Action"):
        await FunctionModel(lambda r: 42).step(request)  # type: ignore[arg-type, return-value]


def test_parse_action_names_the_problem() -> None:
    assert parse_action('{"tool_calls":[{"name":"a","arguments":"{\\"x\\":1}"}]}').tool_calls[
        0
    ].arguments == {"x": 1}
    for text, message in [
        ("[1]", "must be a JSON object"),
        ('{"final":1,"tool_calls":[]}', "exactly one key"),
        ('{"tool_calls":[]}', "non-empty list"),
        ('{"tool_calls":[{"arguments":{}}]}', "needs a string 'name'"),
        ('{"tool_calls":[{"name":"a","arguments":[1]}]}', "must be an object"),
        ("{", "not valid JSON"),
    ]:
        with pytest.raises(ActionParseError, match=message):
            parse_action(text)
    with pytest.raises(ValueError, match="needs at least one tool call or a final output"):
        Action(tool_calls=(), final=None, is_final=False)
    with pytest.raises(ValueError, match="either tool calls or the final output"):
        Action(tool_calls=Action.call(("a", {})).tool_calls, final=1, is_final=True)
