"""The OpenAI-compatible server, exercised with the official openai client."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import jsonschema
import openai
import pytest
from server_fakes import ScriptedModel

from agentflow.engine.errors import SchemaError
from agentflow.models.base import Action, ToolCall

ORDER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look up an order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
REFUND_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "refund",
        "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}},
    },
}


def test_lists_models(client: openai.AsyncOpenAI) -> None:
    async def main() -> None:
        page = await client.models.list()
        assert [m.id for m in page.data] == ["tiny"]
        assert (await client.models.retrieve("tiny")).id == "tiny"
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("gpt-9")

    anyio.run(main)


def test_tool_call_completion(client: openai.AsyncOpenAI, model: ScriptedModel) -> None:
    model.script.append(Action.call(("get_order", {"order_id": "58213"})))

    async def main() -> Any:
        return await client.chat.completions.create(
            model="tiny",
            messages=[
                {"role": "system", "content": "You help customers."},
                {"role": "user", "content": "Where is order 58213?"},
            ],
            tools=[ORDER_TOOL],
            temperature=0,
            seed=7,
            max_tokens=64,
        )

    completion = anyio.run(main)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_order" and json.loads(call.function.arguments) == {
        "order_id": "58213"
    }
    assert call.id
    assert completion.usage.prompt_tokens == 12 and completion.usage.total_tokens == 17
    assert completion.usage.prompt_tokens_details.cached_tokens == 8  # OpenAI's field
    req = model.requests[0]
    assert req.instructions == "You help customers."
    assert [(m.role, m.content) for m in req.messages] == [("user", "Where is order 58213?")]
    assert [t.name for t in req.tools] == ["get_order"]
    assert req.settings == {"temperature": 0.0, "seed": 7, "max_new_tokens": 64}
    assert req.output_schema is None
    # The action schema allows the tool call and a text answer.
    assert "tool_calls" in json.dumps(req.action_schema) and "final" in json.dumps(
        req.action_schema
    )


def test_conversation_with_tool_results(client: openai.AsyncOpenAI, model: ScriptedModel) -> None:
    model.script.append(Action.final_output("Order 58213 has shipped."))

    async def main() -> Any:
        return await client.chat.completions.create(
            model="tiny",
            messages=[
                {"role": "user", "content": [{"type": "text", "text": "Where is order 58213?"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_order", "arguments": '{"order_id":"58213"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": '{"status":"shipped"}'},
            ],
            tools=[ORDER_TOOL],
        )

    completion = anyio.run(main)
    assert completion.choices[0].message.content == "Order 58213 has shipped."
    assert completion.choices[0].finish_reason == "stop"
    msgs = model.requests[0].messages
    assert msgs[1].role == "assistant"
    assert json.loads(msgs[1].content) == {
        "tool_calls": [{"name": "get_order", "arguments": {"order_id": "58213"}}]
    }
    assert (msgs[2].role, msgs[2].name, msgs[2].content) == (
        "tool",
        "get_order",
        '{"status":"shipped"}',
    )


def test_structured_output_with_json_schema(
    client: openai.AsyncOpenAI, model: ScriptedModel
) -> None:
    schema = {
        "type": "object",
        "properties": {"status": {"type": "string"}},
        "required": ["status"],
    }
    model.script.append(Action.final_output({"status": "shipped"}))

    async def main() -> Any:
        return await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "Status?"}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "status", "schema": schema, "strict": True},
            },
        )

    completion = anyio.run(main)
    assert json.loads(completion.choices[0].message.content) == {"status": "shipped"}
    req = model.requests[0]
    assert req.output_schema == schema
    # The action schema admits exactly the structured answer, no text and no tool calls.
    jsonschema.validate({"final": {"status": "shipped"}}, req.action_schema)
    for bad in (
        {"final": "shipped"},
        {"final": {}},
        {"tool_calls": [{"name": "x", "arguments": {}}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, req.action_schema)


def test_tool_choice_shapes_the_action_schema(
    client: openai.AsyncOpenAI, model: ScriptedModel
) -> None:
    model.script.extend(
        [
            Action.call(("refund", {"amount": 5})),
            Action.final_output("no"),
            Action.call(("get_order", {"order_id": "1"})),
        ]
    )

    async def ask(choice: Any) -> Any:
        return await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            tools=[ORDER_TOOL, REFUND_TOOL],
            tool_choice=choice,
        )

    anyio.run(ask, {"type": "function", "function": {"name": "refund"}})
    anyio.run(ask, "none")
    anyio.run(ask, "required")
    named, none, required = (json.dumps(r.action_schema) for r in model.requests)
    assert '"refund"' in named and '"get_order"' not in named and '"final"' not in named
    assert '"tool_calls"' not in none and '"final"' in none
    assert '"get_order"' in required and '"refund"' in required and '"final"' not in required


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "bad", "parameters": {"type": "nope"}},
                    }
                ]
            },
            "tool 'bad'",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": 5}},
                }
            },
            "response_format.json_schema.schema",
        ),
        (
            {
                "tool_choice": {"type": "function", "function": {"name": "missing"}},
                "tools": [ORDER_TOOL],
            },
            "'missing'",
        ),
        ({"tool_choice": "required"}, "at least one tool"),
        (
            {"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
            "does not answer",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            },
            "only text parts",
        ),
        ({"n": 2}, "n=1"),
        ({"temperature": 5}, "temperature"),
        ({"messages": []}, "messages"),
    ],
)
def test_bad_requests_are_400_naming_the_problem(
    client: openai.AsyncOpenAI, model: ScriptedModel, kwargs: dict[str, Any], match: str
) -> None:
    params: dict[str, Any] = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        **kwargs,
    }

    async def main() -> None:
        await client.chat.completions.create(**params)

    with pytest.raises(openai.BadRequestError, match=match):
        anyio.run(main)
    assert model.requests == []


def test_unknown_model_is_404(client: openai.AsyncOpenAI) -> None:
    async def main() -> None:
        await client.chat.completions.create(
            model="gpt-9", messages=[{"role": "user", "content": "hi"}]
        )

    with pytest.raises(openai.NotFoundError, match="gpt-9"):
        anyio.run(main)


def test_malformed_json_body_is_400(app: Any) -> None:
    async def main() -> httpx.Response:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as http:
            return await http.post(
                "/v1/chat/completions",
                content=b"{not json",
                headers={"content-type": "application/json"},
            )

    response = anyio.run(main)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert "not valid JSON" in response.json()["error"]["message"]


def test_model_errors_map_to_statuses(client: openai.AsyncOpenAI, model: ScriptedModel) -> None:
    model.script.extend(
        [
            SchemaError(
                "keyword 'patternProperties' is not supported", keyword="patternProperties"
            ),
            RuntimeError("boom"),
        ]
    )

    async def main() -> None:
        await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}]
        )

    with pytest.raises(openai.BadRequestError, match="patternProperties"):
        anyio.run(main)
    with pytest.raises(openai.InternalServerError, match="boom"):
        anyio.run(main)


def test_streaming_text_and_usage(client: openai.AsyncOpenAI, model: ScriptedModel) -> None:
    model.drafts = [
        '{"final":"Order 58',
        '{"final":"Order 58213 has sh',
        '{"final":"Order 58213 has shipped."}',
    ]
    model.script.append(Action.final_output("Order 58213 has shipped."))

    async def main() -> list[Any]:
        stream = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        return [chunk async for chunk in stream]

    chunks = anyio.run(main)
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert pieces == ["Order 58", "213 has sh", "ipped."]
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]
    assert chunks[-1].usage.completion_tokens == 5


def test_streaming_tool_calls(client: openai.AsyncOpenAI, model: ScriptedModel) -> None:
    model.drafts = ['{"tool_calls":[{"name":"get_order"']
    model.script.append(Action(tool_calls=(ToolCall("get_order", {"order_id": "7"}, id="call_z"),)))

    async def main() -> list[Any]:
        stream = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            tools=[ORDER_TOOL],
            stream=True,
        )
        return [chunk async for chunk in stream]

    chunks = anyio.run(main)
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].id == "call_z" and calls[0].function.name == "get_order"
    assert json.loads(calls[0].function.arguments) == {"order_id": "7"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_streaming_request_errors_get_a_status(
    client: openai.AsyncOpenAI, model: ScriptedModel
) -> None:
    model.script.append(SchemaError("cannot enforce 'not'", keyword="not"))

    async def main() -> None:
        stream = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for _ in stream:
            pass

    with pytest.raises(openai.BadRequestError, match="cannot enforce"):
        anyio.run(main)


def test_concurrent_requests(client: openai.AsyncOpenAI, model: ScriptedModel) -> None:
    model.script.extend(
        lambda req: Action.final_output(req.messages[-1].content.upper()) for _ in range(6)
    )
    answers: dict[int, str] = {}

    async def ask(i: int) -> None:
        c = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": f"q{i}"}]
        )
        answers[i] = c.choices[0].message.content

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(ask, i)

    anyio.run(main)
    assert answers == {i: f"Q{i}" for i in range(6)}


class _SlowModel(ScriptedModel):
    """Counts how many steps run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.running = 0
        self.peak = 0

    async def step(self, request: Any) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        await anyio.sleep(0.05)
        self.running -= 1
        return await super().step(request)

    async def stream_step(self, request: Any) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await anyio.sleep(0.05)
            async for item in super().stream_step(request):
                yield item
        finally:
            self.running -= 1


@pytest.mark.parametrize("stream", [False, True])
def test_max_concurrency_caps_steps_in_flight(stream: bool) -> None:
    from agentflow.server import create_app

    model = _SlowModel()
    model.script.extend(Action.final_output(f"a{i}") for i in range(5))
    app = create_app(model, max_concurrency=2)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
    client = openai.AsyncOpenAI(
        base_url="http://t/v1", api_key="x", http_client=http, max_retries=0
    )
    answers: list[str] = []

    async def ask() -> None:
        if stream:
            chunks = await client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            answers.append(
                "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
            )
        else:
            c = await client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "hi"}]
            )
            answers.append(c.choices[0].message.content)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(ask)

    anyio.run(main)
    assert sorted(answers) == [f"a{i}" for i in range(5)]
    assert model.peak == 2
