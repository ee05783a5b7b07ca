"""OpenAIModel against an in-process fake endpoint (httpx.MockTransport): no network."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.models.base import StepDelta, StepRequest, StepResponse
from agentflow.models.openai import (
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
    OpenAIModel,
    RetryPolicy,
    parse_retry_after,
)

ORDER_TOOL = ToolSpec(
    name="get_order",
    description="Look up an order.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)
ACTION_SCHEMA: dict[str, Any] = {"type": "object"}  # the remote model does not use it


def completion(message: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "remote-1",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def tool_call_message(name: str, arguments: str, call_id: str = "call_a") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


class FakeEndpoint:
    """Scripted replies; records every request body and the sleeps the model asked for."""

    def __init__(self, replies: list[httpx.Response | Exception | Callable[[], httpx.Response]]):
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []
        self.sleeps: list[float] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply() if callable(reply) else reply

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def model(self, **kwargs: Any) -> OpenAIModel:
        kwargs.setdefault("retry", RetryPolicy(max_retries=3, initial_delay=0.5, jitter=0.0))
        return OpenAIModel(
            "remote-1",
            base_url="http://fake.test/v1",
            api_key="sk-test",
            transport=httpx.MockTransport(self.handler),
            sleep=self.sleep,
            **kwargs,
        )


def request(**kwargs: Any) -> StepRequest:
    kwargs.setdefault("messages", [ChatMessage("user", "Where is order 58213?")])
    kwargs.setdefault("tools", [ORDER_TOOL])
    return StepRequest(action_schema=ACTION_SCHEMA, **kwargs)


def run(coro_fn: Callable[[], Any]) -> Any:
    return anyio.run(coro_fn)


def test_tool_call_round_trip_and_request_shape() -> None:
    fake = FakeEndpoint(
        [
            httpx.Response(
                200, json=completion(tool_call_message("get_order", '{"order_id":"58213"}'))
            )
        ]
    )
    model = fake.model()
    resp = run(
        lambda: model.step(
            request(instructions="Be brief.", settings={"temperature": 0, "seed": 3})
        )
    )
    assert resp.action.tool_calls[0].name == "get_order"
    assert resp.action.tool_calls[0].arguments == {"order_id": "58213"}
    assert resp.action.tool_calls[0].id == "call_a"
    assert not resp.action.is_final
    assert json.loads(resp.text) == {
        "tool_calls": [{"name": "get_order", "arguments": {"order_id": "58213"}}]
    }
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (11, 7)
    assert resp.usage.model == "remote-1"
    body = fake.bodies[0]
    assert body["model"] == "remote-1"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1] == {"role": "user", "content": "Where is order 58213?"}
    assert body["tools"][0]["function"]["name"] == "get_order"
    assert body["tools"][0]["function"]["parameters"]["required"] == ["order_id"]
    assert body["temperature"] == 0 and body["seed"] == 3
    assert "response_format" not in body and "stream" not in body
    assert fake.headers[0]["authorization"] == "Bearer sk-test"


def test_engine_token_cap_maps_to_max_tokens() -> None:
    fake = FakeEndpoint(
        [httpx.Response(200, json=completion({"role": "assistant", "content": "ok"}))]
    )
    run(lambda: fake.model().step(request(settings={"max_new_tokens": 99, "threshold": 0.5})))
    assert fake.bodies[0]["max_tokens"] == 99 and "threshold" not in fake.bodies[0]


def test_structured_final_uses_json_schema_response_format() -> None:
    schema = {
        "type": "object",
        "properties": {"status": {"type": "string"}},
        "required": ["status"],
    }
    fake = FakeEndpoint(
        [
            httpx.Response(
                200, json=completion({"role": "assistant", "content": '{"status":"shipped"}'})
            )
        ]
    )
    resp = run(lambda: fake.model().step(request(output_schema=schema)))
    assert resp.action.is_final and resp.action.final == {"status": "shipped"}
    fmt = fake.bodies[0]["response_format"]
    assert fmt == {
        "type": "json_schema",
        "json_schema": {"name": "final_output", "schema": schema, "strict": True},
    }


def test_plain_text_final() -> None:
    fake = FakeEndpoint(
        [httpx.Response(200, json=completion({"role": "assistant", "content": "It shipped."}))]
    )
    resp = run(lambda: fake.model().step(request()))
    assert resp.action.is_final and resp.action.final == "It shipped."
    assert json.loads(resp.text) == {"final": "It shipped."}


def test_history_links_tool_results_to_call_ids() -> None:
    messages = [
        ChatMessage("user", "Where are 1 and 2?"),
        ChatMessage(
            "assistant",
            '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"1"}},'
            '{"name":"get_order","arguments":{"order_id":"2"}}]}',
        ),
        ChatMessage("tool", '{"status":"shipped"}', name="get_order"),
        ChatMessage("tool", '{"status":"lost"}', name="get_order"),
    ]
    fake = FakeEndpoint(
        [httpx.Response(200, json=completion({"role": "assistant", "content": "done"}))]
    )
    run(lambda: fake.model().step(request(messages=messages)))
    sent = fake.bodies[0]["messages"]
    assistant = sent[1]
    assert assistant["role"] == "assistant" and assistant["content"] is None
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == 2
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {"order_id": "2"}
    assert [m["tool_call_id"] for m in sent[2:]] == ids
    assert sent[3]["content"] == '{"status":"lost"}'


def test_retries_429_and_5xx_with_exponential_backoff() -> None:
    ok = httpx.Response(200, json=completion({"role": "assistant", "content": "ok"}))
    fake = FakeEndpoint(
        [
            httpx.Response(429, json={"error": {"message": "slow down"}}),
            httpx.Response(502),
            httpx.Response(503),
            ok,
        ]
    )
    resp = run(lambda: fake.model().step(request()))
    assert resp.action.final == "ok"
    assert len(fake.bodies) == 4
    assert fake.sleeps == [0.5, 1.0, 2.0]


def test_retry_after_header_is_honoured() -> None:
    ok = httpx.Response(200, json=completion({"role": "assistant", "content": "ok"}))
    fake = FakeEndpoint([httpx.Response(429, headers={"Retry-After": "7"}), ok])
    run(lambda: fake.model().step(request()))
    assert fake.sleeps == [7.0]


def test_jitter_stays_within_bounds() -> None:
    policy = RetryPolicy(initial_delay=1.0, multiplier=2.0, max_delay=3.0, jitter=0.5)
    import random

    rng = random.Random(0)
    delays = [policy.delay(n, rng) for n in range(4) for _ in range(50)]
    assert all(0.5 <= d <= 1.0 for d in delays[:50])
    assert all(1.5 <= d <= 3.0 for d in delays[150:])  # capped at max_delay
    assert len(set(delays)) > 10


def test_parse_retry_after_http_date() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412500.0) == pytest.approx(
        10.0
    )
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_gives_up_after_max_retries_with_status_and_body() -> None:
    fake = FakeEndpoint([httpx.Response(500, text="boom")] * 3)
    with pytest.raises(ModelHTTPError) as info:
        run(lambda: fake.model(retry=RetryPolicy(max_retries=2, jitter=0.0)).step(request()))
    assert info.value.status == 500 and info.value.body == "boom" and info.value.attempts == 3
    assert len(fake.bodies) == 3


def test_client_errors_are_not_retried() -> None:
    fake = FakeEndpoint(
        [
            httpx.Response(
                400, json={"error": {"message": "Invalid schema for function 'get_order'"}}
            )
        ]
    )
    with pytest.raises(ModelHTTPError, match="Invalid schema for function") as info:
        run(lambda: fake.model().step(request()))
    assert info.value.status == 400
    assert len(fake.bodies) == 1 and fake.sleeps == []


def test_timeouts_are_retried_then_raised() -> None:
    def timeout() -> httpx.Response:
        raise httpx.ReadTimeout("read timed out")

    ok = httpx.Response(200, json=completion({"role": "assistant", "content": "ok"}))
    fake = FakeEndpoint([timeout, ok])
    assert run(lambda: fake.model().step(request())).action.final == "ok"
    fake = FakeEndpoint([timeout] * 2)
    with pytest.raises(ModelTimeoutError, match="timed out on all 2 attempts"):
        run(lambda: fake.model(retry=RetryPolicy(max_retries=1)).step(request()))


def test_real_timeout_against_a_slow_asgi_endpoint() -> None:
    """A server that answers after 2 s, a 0.1 s timeout: ModelTimeoutError, quickly."""
    import threading
    import time as _time

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def slow(_: Any) -> JSONResponse:
        await anyio.sleep(2.0)
        return JSONResponse(completion({"role": "assistant", "content": "late"}))

    app = Starlette(routes=[Route("/v1/chat/completions", slow, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            _time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        model = OpenAIModel(
            "m",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="x",
            timeout=0.1,
            retry=RetryPolicy(max_retries=0),
        )
        started = _time.perf_counter()
        with pytest.raises(ModelTimeoutError):
            anyio.run(model.step, request())
        assert _time.perf_counter() - started < 1.5
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def test_connection_errors_raise_specific_error() -> None:
    fake = FakeEndpoint([httpx.ConnectError("refused")] * 2)
    with pytest.raises(
        ModelConnectionError, match=re.escape("cannot reach http://fake.test/v1/chat/completions")
    ):
        run(lambda: fake.model(retry=RetryPolicy(max_retries=1)).step(request()))


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (httpx.Response(200, text="<html>oops</html>"), "not JSON"),
        (httpx.Response(200, json={"object": "chat.completion", "choices": []}), "no 'choices'"),
        (httpx.Response(200, json={"choices": [{"index": 0}]}), "no 'message'"),
        (
            httpx.Response(200, json=completion({"role": "assistant", "content": None})),
            "neither content nor tool calls",
        ),
        (
            httpx.Response(200, json=completion(tool_call_message("get_order", '{"order_id": '))),
            "arguments are not valid JSON",
        ),
        (
            httpx.Response(200, json=completion(tool_call_message("get_order", "[1, 2]"))),
            "must be a JSON object",
        ),
        (
            httpx.Response(
                200, json=completion({"role": "assistant", "tool_calls": [{"function": {}}]})
            ),
            "without a function name",
        ),
        (
            httpx.Response(
                200, json=completion({"role": "assistant", "content": None, "refusal": "no"})
            ),
            "refused",
        ),
    ],
)
def test_malformed_responses_raise_model_response_error(reply: httpx.Response, match: str) -> None:
    fake = FakeEndpoint([reply])
    with pytest.raises(ModelResponseError, match=match):
        run(lambda: fake.model().step(request()))


def test_structured_output_that_is_not_json_names_truncation() -> None:
    body = completion({"role": "assistant", "content": '{"status": "sh'})
    body["choices"][0]["finish_reason"] = "length"
    fake = FakeEndpoint([httpx.Response(200, json=body)])
    with pytest.raises(ModelResponseError, match="cut off by max_tokens"):
        run(lambda: fake.model().step(request(output_schema={"type": "object"})))


def test_unknown_tool_and_invalid_arguments_reach_the_runtime_unchanged() -> None:
    """Validation is the runtime's job (it feeds errors back); the model must not drop them."""
    fake = FakeEndpoint(
        [
            httpx.Response(
                200, json=completion(tool_call_message("delete_everything", '{"order_id": 5}'))
            )
        ]
    )
    resp = run(lambda: fake.model().step(request()))
    assert resp.action.tool_calls[0].name == "delete_everything"
    assert resp.action.tool_calls[0].arguments == {"order_id": 5}


def sse(*events: dict[str, Any] | str) -> bytes:
    out = [": keep-alive\n\n"]
    for event in events:
        payload = event if isinstance(event, str) else json.dumps(event)
        out.append(f"data: {payload}\n\n")
    return "".join(out).encode()


def chunk(
    delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "remote-1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": usage,
    }


async def collect(model: OpenAIModel, req: StepRequest) -> list[StepDelta | StepResponse]:
    return [item async for item in model.stream_step(req)]


def test_streaming_tool_calls_accumulate_across_chunks() -> None:
    stream = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": ""},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"order_'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id":"58213"}'}}]}),
        chunk({}, finish="tool_calls"),
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "remote-1",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9},
        },
        "[DONE]",
    )
    fake = FakeEndpoint(
        [httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"})]
    )
    items = run(lambda: collect(fake.model(), request()))
    deltas, last = items[:-1], items[-1]
    assert all(isinstance(d, StepDelta) for d in deltas) and len(deltas) >= 2
    assert deltas[-1].text.startswith(
        '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"58213"}'
    )
    assert isinstance(last, StepResponse)
    assert last.action.tool_calls[0].arguments == {"order_id": "58213"}
    assert last.action.tool_calls[0].id == "call_x"
    assert (last.usage.input_tokens, last.usage.output_tokens) == (5, 9)
    body = fake.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_streaming_text_deltas_are_cumulative() -> None:
    stream = sse(
        chunk({"content": "It "}),
        chunk({"content": "shipped."}),
        chunk({}, finish="stop"),
        "[DONE]",
    )
    fake = FakeEndpoint([httpx.Response(200, content=stream)])
    items = run(lambda: collect(fake.model(), request()))
    assert [i.text for i in items if isinstance(i, StepDelta)] == ["It ", "It shipped."]
    assert items[-1].action.final == "It shipped."


def test_streaming_retries_before_first_byte() -> None:
    stream = sse(chunk({"content": "ok"}, finish="stop"), "[DONE]")
    fake = FakeEndpoint([httpx.Response(503), httpx.Response(200, content=stream)])
    items = run(lambda: collect(fake.model(), request()))
    assert items[-1].action.final == "ok" and fake.sleeps == [0.5]


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        (sse(chunk({"content": "It "})), "ended before a finish_reason"),
        (sse("{not json"), "stream event is not JSON"),
        (sse({"error": {"message": "overloaded"}}), "stream reported an error"),
    ],
)
def test_streaming_malformed(stream: bytes, match: str) -> None:
    fake = FakeEndpoint([httpx.Response(200, content=stream)])
    with pytest.raises(ModelResponseError, match=match):
        run(lambda: collect(fake.model(), request()))


def test_model_satisfies_the_protocol_and_closes_its_client() -> None:
    from agentflow.models.base import Model

    fake = FakeEndpoint([])
    model = fake.model()
    assert isinstance(model, Model) and model.name == "remote-1"

    async def main() -> None:
        async with model:
            client = model._http()
        assert client.is_closed

    anyio.run(main)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="model name"):
        OpenAIModel("")
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2.0)
