"""Copies inside free text: a value the text has started to quote is finished from the sources."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import agentflow.engine.choice_scoring as choice_scoring
from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.copy_choices import request_spans, source_texts
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.constraints.word_copies import ends_word, next_word, value_spans
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.tokenizer import Tokenizer

ANSWER = {
    "type": "object",
    "properties": {"final": {"type": "string"}},
    "required": ["final"],
    "additionalProperties": False,
}
RESULT = '{"order_id":"58213","status":"shipped","total":129.99,"name":"Sofia Silva","ok":true}'
MASK = 1


@pytest.fixture(scope="module")
def constraint(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(ANSWER).regex), tokenizer)


def test_a_json_tool_result_offers_its_values_numbers_as_written() -> None:
    assert source_texts(RESULT) == ["58213", "shipped", "129.99", "Sofia Silva"]
    assert source_texts("not {json") == ["not {json"]
    assert source_texts('[{"a": ["x y", 2.50]}]') == ["x y", "2.50"]
    spans = request_spans([RESULT])
    assert {"58213", "129.99", "Sofia Silva", "Silva"} <= set(spans)
    assert "order_id" not in spans and "true" not in spans  # keys and literals are no values


def test_value_like_spans_words_and_word_ends() -> None:
    assert value_spans(["129.99", "Sofia", "cus_630", "db-3", "shipped", "in progress"]) == (
        "129.99",
        "Sofia",
        "cus_630",
        "db-3",
    )
    assert next_word(b"", b"Found", True) == b"Found"
    assert next_word(b"Found", b" S", True) == b"S"
    assert next_word(b"S", b"ofia", True) == b"Sofia"
    assert next_word(b"x", b'"', True) is None  # a string's first word: copied whole or not
    assert next_word(None, b"Total", True) is None and next_word(None, b" 12", True) == b"12"
    assert next_word(b"x", b"1", False) is None  # structure has no words
    assert next_word(None, b"12", True) is None  # not known to be inside text yet
    assert all(ends_word(t) for t in (b" is", b".", b").", b'"', b",", b"!", b"%"))
    assert not any(ends_word(t) for t in (b"9", b".5", b"_x", b"-3", b"@a", b""))


def _written(tokenizer: Tokenizer, text: str, length: int = 24) -> tuple[torch.Tensor, ...]:
    head = tokenizer.encode(text)
    tokens = torch.full((length,), MASK, dtype=torch.long)
    masked = torch.ones(length, dtype=torch.bool)
    tokens[: len(head)], masked[: len(head)] = torch.tensor(head), False
    return tokens, masked, torch.tensor(len(head))


def test_a_started_value_is_offered_whole_in_a_block(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    session = constraint.session()
    session.copy_from([RESULT], within_text=True)
    assert "129.99" in session.word_spans and "shipped" not in session.word_spans
    tokens, masked, at = _written(tokenizer, '{"final":"The total is 12')
    found = session.block_choice(tokens, masked)
    assert found is not None
    start, choice = found
    assert start == int(at) and choice.copy and choice.within_text
    assert [c.text for c in choice.candidates] == ["129.99"]
    (cand,) = choice.candidates
    assert tokenizer.decode(list(cand.tokens)) == "9.99"
    assert all(ends_word(tokenizer.decode([t]).encode()) for t, _ in cand.closers)
    # Committed with the copy when likeliest: punctuation or a space, never a next word.
    committed = {tokenizer.decode([t]) for t in cand.committed_closers or ()}
    assert {",", '"', "."} <= committed
    assert not any(ch.isalnum() for t in committed for ch in t)
    assert any(ch.isalnum() for t, _ in cand.closers for ch in tokenizer.decode([t]))

    # A name: every span the word starts, each to be scored whole.
    tokens, masked, _ = _written(tokenizer, '{"final":"Found S')
    _, names = session.block_choice(tokens, masked)  # type: ignore[misc]
    assert {c.text for c in names.candidates} == {"Sofia", "Sofia Silva", "Silva"}

    # Nothing once the value is whole, on a word no value starts, or on a string's first
    # word; where the string opens, the value's own copy choice (copy_choices).
    for text in ('{"final":"The total is 129.99', '{"final":"Your order', '{"final":"12'):
        assert session.block_choice(*_written(tokenizer, text)[:2]) is None
    _, opening = session.block_choice(*_written(tokenizer, '{"final":"')[:2])  # type: ignore[misc]
    assert opening.copy and not opening.within_text
    values_only = constraint.session()
    values_only.copy_from([RESULT])
    assert values_only.block_choice(*_written(tokenizer, '{"final":"The total is 12')[:2]) is None


def test_a_started_value_is_offered_after_the_prefix_and_survives_a_rollback(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    session = constraint.session()
    session.copy_from([RESULT], within_text=True)
    session.advance(tokenizer.encode('{"final":"Order 582'))
    choice = session.next_choice(32)
    assert choice is not None and choice.within_text
    assert [c.text for c in choice.candidates] == ["58213"]
    assert session.next_choice(1) is None  # no room for the rest and its closer
    snapshot = session.checkpoint()
    session.advance(tokenizer.encode("13 is"))
    assert session.next_choice(32) is None
    session.rollback(snapshot)
    again = session.next_choice(32)
    assert again is not None and [c.text for c in again.candidates] == ["58213"]


def _steered(model: torch.nn.Module, token: int, bias: float = 30.0) -> torch.nn.Module:
    """``model`` whose likeliest token is always ``token``."""
    head = model.tok_embeddings.weight if model.output is None else model.output.weight
    boost = torch.zeros(head.shape[0])
    boost[token] = bias

    def project(hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, head) + boost.to(hidden.dtype)

    model.project = project  # type: ignore[method-assign]
    return model


@pytest.mark.parametrize("within_text", [True, False])
def test_the_ar_decoder_finishes_a_value_the_model_goes_on_with(
    within_text: bool,
    build_automaton: Callable[[str], TokenAutomaton],
    tokenizer: Tokenizer,
    model_factory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The text must start "Total: " (no value opens a copy there); the steered model then
    # writes 1s. A word "1" starts the source's 11119 and the model goes on with a 1: the
    # copy is made (its closing threshold at 0), not the 1s the model writes on its own.
    monkeypatch.setattr(choice_scoring, "WORD_MIN_CLOSE", 0.0)
    schema = {
        "type": "object",
        "properties": {"final": {"type": "string", "pattern": "^Total: [^\\n]*$"}},
        "required": ["final"],
        "additionalProperties": False,
    }
    automaton = build_automaton(compile_json_schema(schema).regex)
    constraint = Constraint(automaton, tokenizer)
    (one,) = tokenizer.encode("1")
    model = _steered(model_factory("causal", vocab_size=tokenizer.vocab_size, seed=3), one)
    decoder = ARDecoder(model)
    config = GenerationConfig(max_new_tokens=24, score_choices=True)
    session = constraint.session(24)
    session.copy_from(["the code is 11119"], within_text=within_text)
    out = decoder.generate([tokenizer.encode("code?")], config, constraints=[session])
    text = tokenizer.decode(out.sequences[0], skip_special=True)
    assert text.startswith('{"final":"Total: ') and "1" in text
    assert ("11119" in text) is within_text  # committed alone: the model's 1s go on after it
    if out.stats.rows[0].finished:
        assert json.loads(text)["final"].startswith("Total: ")
