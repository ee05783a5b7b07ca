"""The server under uvicorn on 127.0.0.1, driven by the synchronous openai client and OpenAIModel."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import openai
import pytest
from server_fakes import ScriptedModel

from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.models.base import Action, StepRequest, StepResponse
from agentflow.models.openai import OpenAIModel, RetryPolicy
from agentflow.server import BackgroundServer, create_app


@pytest.fixture
def served(model: ScriptedModel) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(model)) as server:
        yield server


def test_sync_client_streams_over_real_sse(served: BackgroundServer, model: ScriptedModel) -> None:
    model.drafts = ['{"final":"Hel', '{"final":"Hello, wo']
    model.script.append(Action.final_output("Hello, world"))
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello, world"


def test_openai_model_talks_to_our_server(served: BackgroundServer, model: ScriptedModel) -> None:
    """Our own client and server agree on the wire format, streamed and not."""
    tool = ToolSpec(
        "get_order",
        "Look up an order.",
        {"type": "object", "properties": {"order_id": {"type": "string"}}},
    )
    model.script.extend(
        [Action.call(("get_order", {"order_id": "9"})), Action.final_output({"ok": True})]
    )
    remote = OpenAIModel(
        "tiny", base_url=f"{served.url}/v1", api_key="x", retry=RetryPolicy(max_retries=0)
    )
    history = [
        ChatMessage("user", "Where is 9?"),
        ChatMessage(
            "assistant", '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"9"}}]}'
        ),
        ChatMessage("tool", '{"status":"late"}', name="get_order"),
    ]

    async def main() -> tuple[StepResponse, list[object]]:
        async with remote:
            first = await remote.step(
                StepRequest(messages=history[:1], tools=[tool], action_schema={})
            )
            items = [
                item
                async for item in remote.stream_step(
                    StepRequest(
                        messages=history,
                        tools=[tool],
                        action_schema={},
                        output_schema={"type": "object"},
                    )
                )
            ]
        return first, items

    first, items = anyio.run(main)
    assert first.action.tool_calls[0].arguments == {"order_id": "9"}
    last = items[-1]
    assert isinstance(last, StepResponse) and last.action.final == {"ok": True}
    second = model.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[2].name == "get_order"
    assert json.loads(second.messages[1].content)["tool_calls"][0]["arguments"] == {"order_id": "9"}
    assert second.output_schema == {"type": "object"}


def test_openai_model_survives_separate_event_loops(
    served: BackgroundServer, model: ScriptedModel
) -> None:
    """Two ``anyio.run`` calls (like two ``agent.run_sync``) on one model over real sockets."""
    model.script.extend([Action.final_output("one"), Action.final_output("two")])
    remote = OpenAIModel(
        "tiny", base_url=f"{served.url}/v1", api_key="x", retry=RetryPolicy(max_retries=0)
    )
    request = StepRequest(messages=[ChatMessage("user", "hi")], tools=[], action_schema={})
    assert anyio.run(remote.step, request).action.final == "one"
    assert anyio.run(remote.step, request).action.final == "two"


def test_agent_loop_through_openai_model_and_server() -> None:
    """Agent → OpenAIModel → HTTP → server → TestModel: a full tool loop over the wire."""
    from agentflow import Agent, tool
    from agentflow.models import TestModel

    @tool
    def get_order(order_id: str) -> dict[str, str]:
        """Look up an order."""
        return {"order_id": order_id, "status": "shipped"}

    with BackgroundServer(create_app(TestModel())) as server:
        remote = OpenAIModel(
            "test", base_url=f"{server.url}/v1", api_key="x", retry=RetryPolicy(max_retries=0)
        )
        agent = Agent("support", instructions="Help.", tools=[get_order], model=remote)
        result = agent.run_sync("Where is order 58213?")
    assert [c.name for c in result.tool_calls] == ["get_order"]
    assert result.tool_calls[0].result["status"] == "shipped"
    # TestModel's final answer echoes the tool results it was shown: the tool message
    # made the round trip (OpenAI tool_call_id links and back to a named tool turn).
    assert json.loads(result.output) == {"get_order": {"order_id": "a", "status": "shipped"}}
    assert result.usage.steps == 2
