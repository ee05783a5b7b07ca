"""Tiny models and a tiny tokenizer shared by the engine tests (others may reuse them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from engine_testing import FixedAnswer, make_config, make_model
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from agentflow.engine.chat_template import SPECIAL_TOKENS
from agentflow.engine.model import AttentionMode, Transformer
from agentflow.engine.tokenizer import Tokenizer

_CORPUS = [
    "Where is order 58213? Let me look it up for you.",
    '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"58213"}}]}',
    '{"final":"Your order ships tomorrow."}',
    "get_weather(city: string, unit?: string) - Current weather for a city.",
    "The quick brown fox jumps over the lazy dog. 0123456789",
]


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    """Tiny models run several times faster on one thread than on two contended ones."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def model_factory() -> Callable[..., Transformer]:
    """``model_factory(attention, seed=0, **config_overrides)`` → a tiny random Transformer."""

    def build(
        attention: AttentionMode = "block", seed: int = 0, **overrides: object
    ) -> Transformer:
        return make_model(make_config(attention, **overrides), seed)

    return build


@pytest.fixture
def block_model() -> Transformer:
    return make_model(make_config("block"))


@pytest.fixture
def causal_model() -> Transformer:
    return make_model(make_config("causal"), seed=1)


@pytest.fixture(scope="session")
def hf_tokenizer() -> HFTokenizer:
    """A byte-level BPE with the embedded special tokens first (ids 0..7), 96 tokens in all."""
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=96 + 256,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer)
    return tok


@pytest.fixture
def tokenizer(hf_tokenizer: HFTokenizer) -> Tokenizer:
    return Tokenizer(hf_tokenizer)


@pytest.fixture
def fixed_answer() -> Callable[..., FixedAnswer]:
    """``fixed_answer(target, vocab=96, jump=False)`` → a fake constraint forcing ``target`` + end."""

    def build(target: list[int], vocab: int = 96, *, jump: bool = False) -> FixedAnswer:
        return FixedAnswer(target, end_id=2, vocab=vocab, jump=jump)

    return build
