"""The embedded tokenizer: special ids, exact round-trip of every byte, copy-friendly splits."""

from __future__ import annotations

import pytest

from agentflow.engine.chat_template import SPECIAL_TOKENS
from agentflow.engine.tokenizer import Tokenizer
from agentflow.engine.training.tokenizer_training import train_tokenizer


def test_special_tokens_take_the_first_ids_in_template_order(small_tokenizer: Tokenizer) -> None:
    assert [small_tokenizer.hf.token_to_id(t) for t in SPECIAL_TOKENS] == list(
        range(len(SPECIAL_TOKENS))
    )
    assert (small_tokenizer.pad_id, small_tokenizer.mask_id, small_tokenizer.end_id) == (0, 1, 2)
    assert small_tokenizer.vocab_size == 512


@pytest.mark.parametrize(
    "text",
    [
        "".join(chr(c) for c in range(256)),
        "Order ORDER order oRdEr — JANE.Doe@Example.COM",
        "emoji 😀🚀, CJK 漢字, RTL עברית, tabs\t\tand\nnewlines\r\n",
        '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"ORD-58213"}}]}',
        "  leading and trailing spaces  ",
    ],
)
def test_every_byte_and_casing_round_trips(small_tokenizer: Tokenizer, text: str) -> None:
    assert small_tokenizer.decode(small_tokenizer.encode(text)) == text


def test_every_token_has_exact_bytes(small_tokenizer: Tokenizer) -> None:
    text = "Refund 25.50 EUR to jane_doe@inbox.dev on web-03.internal"
    ids = small_tokenizer.encode(text)
    assert b"".join(small_tokenizer.token_bytes(i) for i in ids) == text.encode()


@pytest.mark.parametrize("value", ["58213", "web-prod-03", "Jane.Doe@Example.com", "v2.13.0"])
def test_a_value_tokenizes_the_same_after_a_space_and_after_a_quote(
    small_tokenizer: Tokenizer, value: str
) -> None:
    after_space = small_tokenizer.encode(f"order {value}")
    after_quote = small_tokenizer.encode(f'"order_id":"{value}')
    in_user_text = after_space[len(small_tokenizer.encode("order ")) :]
    assert after_quote[-len(in_user_text) :] == in_user_text


def test_too_small_a_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(["abc"], vocab_size=100)
