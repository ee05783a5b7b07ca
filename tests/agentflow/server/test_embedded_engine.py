"""The server on the real engine path: EmbeddedModel over a tiny random-weight checkpoint.

Random weights know nothing, so these tests check what the constraint guarantees:
whatever the model emits validates against the tool's / response_format's schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import openai
import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from agentflow.engine.chat_template import SPECIAL_TOKENS
from agentflow.engine.checkpoints import save_checkpoint
from agentflow.engine.model import ModelConfig, Transformer
from agentflow.models.embedded import EmbeddedModel
from agentflow.server import create_app

ORDER_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "maxLength": 8},
        "expedite": {"type": "boolean"},
    },
    "required": ["order_id", "expedite"],
    "additionalProperties": False,
}
STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"enum": ["shipped", "lost", "late"]}, "days": {"type": "integer"}},
    "required": ["status", "days"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run faster on one thread on the shared 2-core runner."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny block-diffusion checkpoint with random weights and a small byte-level BPE."""
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(
        [
            '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"58213"}}]}',
            '{"final":"ok"}',
        ],
        trainer,
    )
    config = ModelConfig(
        vocab_size=hf.get_vocab_size(),
        dim=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=64,
        max_seq_len=1024,
        attention="block",
        block_length=8,
        mask_token_id=1,
        end_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = Transformer(config)
    model.init_weights(0)
    return save_checkpoint(
        model.eval(), hf, tmp_path_factory.mktemp("ckpt") / "tiny-random", dtype=torch.float32
    )


@pytest.fixture(scope="module")
def app(checkpoint: Path) -> Any:
    return create_app(EmbeddedModel(checkpoint))


@pytest.fixture
def client(app: Any) -> Iterator[openai.AsyncOpenAI]:
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
    yield openai.AsyncOpenAI(
        base_url="http://agentflow.test/v1", api_key="unused", http_client=http, max_retries=0
    )


def test_tool_call_is_schema_valid(client: openai.AsyncOpenAI) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_order",
                "description": "Look up an order.",
                "parameters": ORDER_PARAMS,
            },
        }
    ]

    async def main() -> Any:
        return await client.chat.completions.create(
            model="tiny-random",
            messages=[{"role": "user", "content": "Where is order 58213?"}],
            tools=tools,
            tool_choice="required",
            max_tokens=64,
            temperature=0,
        )

    completion = anyio.run(main)
    assert completion.choices[0].finish_reason == "tool_calls"
    for call in completion.choices[0].message.tool_calls:
        assert call.function.name == "get_order"
        jsonschema.validate(json.loads(call.function.arguments), ORDER_PARAMS)
    stats = completion.model_extra["agentflow"]
    assert stats["forward_passes"] > 0 and stats["forced_tokens"] > 0


def test_json_schema_answer_is_valid(client: openai.AsyncOpenAI) -> None:
    async def main() -> Any:
        return await client.chat.completions.create(
            model="tiny-random",
            messages=[{"role": "user", "content": "Status?"}],
            max_tokens=48,
            temperature=0,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "status", "schema": STATUS_SCHEMA},
            },
        )

    completion = anyio.run(main)
    jsonschema.validate(json.loads(completion.choices[0].message.content), STATUS_SCHEMA)


def test_streamed_text_equals_the_unstreamed_answer(client: openai.AsyncOpenAI) -> None:
    params: dict[str, Any] = {
        "model": "tiny-random",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 32,
        "temperature": 0,
    }

    async def main() -> tuple[str, str]:
        whole = await client.chat.completions.create(**params)
        stream = await client.chat.completions.create(**params, stream=True)
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return whole.choices[0].message.content, "".join(pieces)

    whole, streamed = anyio.run(main)
    assert isinstance(whole, str)
    assert streamed == whole
