"""Canonical pairs: which token may follow which in the tokenizer's own output."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import pytest
from engine_testing import split_word

from agentflow.engine.canonical_pairs import PAIRS_FILE, CanonicalPairs, write_pairs_file
from agentflow.engine.errors import CheckpointError
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
    pairs = tokenizer.canonical_pairs  # the shipped table (checked against the rule below)
    checked = 0
    for sample in eval_cases(6, seed, "train"):
        ids = tokenizer.encode(sample.prompt())
        for left, right in itertools.pairwise(ids):
            assert pairs.allows(left, right), tokenizer.decode([left, right])
            checked += 1
    assert checked > 500


def _rows(pairs: CanonicalPairs, tokens: range) -> list[tuple[object, object]]:
    return [(pairs.after(t), pairs.before(t)) for t in tokens]


def _same(a: list[tuple[object, object]], b: list[tuple[object, object]]) -> bool:
    def eq(x: object, y: object) -> bool:
        if x is None or y is None:
            return x is y
        return bool(np.array_equal(x, y))  # type: ignore[arg-type]

    return all(eq(x[0], y[0]) and eq(x[1], y[1]) for x, y in zip(a, b, strict=True))


def test_saved_rows_are_read_back_instead_of_built(tokenizer: Tokenizer, tmp_path: Path) -> None:
    path = write_pairs_file(tokenizer, tmp_path)
    assert path == tmp_path / PAIRS_FILE
    loaded = CanonicalPairs.load(tokenizer, path)
    assert loaded.complete
    fresh = CanonicalPairs(tokenizer)
    every = range(tokenizer.vocab_size)
    assert not fresh.complete
    # the same answers, ``before`` included (a column of the loaded table)
    assert _same(_rows(loaded, every), _rows(fresh, every))
    _, left, right = split_word(tokenizer)
    assert not loaded.allows(left, right)


def test_a_tokenizer_file_brings_its_saved_rows(tokenizer: Tokenizer, tmp_path: Path) -> None:
    tokenizer.hf.save(str(tmp_path / "tokenizer.json"))
    assert Tokenizer.from_file(tmp_path / "tokenizer.json").pairs_file is None
    write_pairs_file(tokenizer, tmp_path)
    again = Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert again.pairs_file == tmp_path / PAIRS_FILE
    assert again.canonical_pairs.complete


def test_rows_of_another_tokenizer_are_ignored(
    tokenizer: Tokenizer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_pairs_file(tokenizer, tmp_path)
    data = dict(np.load(path))
    data["fingerprint"] = np.array("0123456789abcdef")
    np.savez_compressed(path, **data)
    with caplog.at_level(logging.WARNING):
        pairs = CanonicalPairs.load(tokenizer, path)
    assert "written for another tokenizer" in caplog.text and str(path) in caplog.text
    assert not pairs.complete
    _, left, right = split_word(tokenizer)
    assert not pairs.allows(left, right)  # built as needed, still right


@pytest.mark.parametrize("content", [b"not a numpy file", b""])
def test_an_unreadable_pairs_file_names_itself(
    tokenizer: Tokenizer, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / PAIRS_FILE
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="canonical pairs") as info:
        CanonicalPairs.load(tokenizer, path)
    assert info.value.path == path
    with pytest.raises(CheckpointError, match="not found"):
        CanonicalPairs.load(tokenizer, tmp_path / "missing.npz")


def test_the_shipped_models_carry_their_tokenizers_table() -> None:
    """The embedded models start with the whole table, and it is their tokenizer's:
    rows read from the file equal rows built from the tokenizer now."""
    from agentflow.engine.checkpoints import resolve_model_path

    for name in ("agentflow-tiny-dlm", "agentflow-tiny-ar"):
        tokenizer = Tokenizer.from_file(resolve_model_path(name) / "tokenizer.json")
        shipped = tokenizer.canonical_pairs
        assert shipped.complete, name
        sample = range(0, tokenizer.vocab_size, 97)
        assert _same(_rows(shipped, sample), _rows(CanonicalPairs(tokenizer), sample)), name
