"""Canonical pairs: which token may follow which in the tokenizer's own output."""

from __future__ import annotations

import itertools

import pytest
from engine_testing import split_word

from agentflow.engine.canonical_pairs import CanonicalPairs
from agentflow.engine.tokenizer import Tokenizer

TEXTS = [
    '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"58213"}}]}',
    "Where is my order 58213? I paid 42.50 on Jane.Doe@Example.com",
    '{"final":"Order 58213 has shipped.","ok":true,"tags":["a","b"]}',
    "  spaces,\tpunctuation!!! and caps: HELLO world",
]


def test_the_tokenizers_own_output_has_only_canonical_pairs(tokenizer: Tokenizer) -> None:
    pairs = CanonicalPairs(tokenizer)
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert len(ids) > 3
        for left, right in itertools.pairwise(ids):
            assert pairs.allows(left, right), (text, left, right)


def test_a_word_split_in_two_is_refused_both_ways(tokenizer: Tokenizer) -> None:
    pairs = CanonicalPairs(tokenizer)
    whole, left, right = split_word(tokenizer)
    assert tokenizer.decode([left, right]) == tokenizer.decode([whole])
    assert not pairs.allows(left, right)
    after, before = pairs.after(left), pairs.before(right)
    assert after is not None and before is not None
    assert not after[right] and not before[left]
    # the row is built once and kept
    assert pairs.after(left) is after


def test_special_tokens_and_missing_neighbours_are_never_refused(tokenizer: Tokenizer) -> None:
    pairs = CanonicalPairs(tokenizer)
    _, left, right = split_word(tokenizer)
    end = tokenizer.end_id
    assert end is not None
    assert pairs.after(end) is None and pairs.before(end) is None
    assert pairs.allows(end, right) and pairs.allows(left, end)
    assert pairs.allows(None, right) and pairs.allows(left, None)
    after = pairs.after(left)
    assert after is not None and bool(after[end])


def test_the_tokenizer_keeps_one_table(tokenizer: Tokenizer) -> None:
    assert tokenizer.canonical_pairs is tokenizer.canonical_pairs


@pytest.mark.parametrize("seed", [3, 11])
def test_the_shipped_tokenizer_reads_its_training_text_as_canonical(seed: int) -> None:
    """Every adjacent pair of encoded training conversations passes the pair test: the
    rule never refuses what the embedded models were trained on."""
    from agentflow.engine.checkpoints import resolve_model_path
    from agentflow.engine.training.evaluate import eval_cases

    tokenizer = Tokenizer.from_file(resolve_model_path("agentflow-tiny-dlm") / "tokenizer.json")
    pairs = CanonicalPairs(tokenizer)
    checked = 0
    for sample in eval_cases(6, seed, "train"):
        ids = tokenizer.encode(sample.prompt())
        for left, right in itertools.pairwise(ids):
            assert pairs.allows(left, right), tokenizer.decode([left, right])
            checked += 1
    assert checked > 500
