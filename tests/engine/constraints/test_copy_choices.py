"""Copy choices: a string value opening in block decoding offers the request's spans whole."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable

import jsonschema
import pytest
import torch

import agentflow.engine.choice_scoring as choice_scoring
import agentflow.engine.constraints.copy_choices as copy_choices
from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.chat_template import ChatMessage, copy_sources
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.copy_choices import likeliest_starts, number_spans, request_spans
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["id", "n"],
    "additionalProperties": False,
}
REQUEST = 'Where is order A-58213, and the ticket "disk full on db-3"? thanks'
MASK = 1


def test_the_sources_are_the_request_and_the_tool_results_after_it() -> None:
    messages = [
        ChatMessage(role="user", content="earlier question about 111"),
        ChatMessage(role="assistant", content="answer"),
        ChatMessage(role="user", content=REQUEST),
        ChatMessage(role="assistant", content='{"tool_calls":[]}'),
        ChatMessage(role="tool", content='{"ticket": "T-9"}'),
    ]
    assert copy_sources(messages) == [REQUEST, '{"ticket": "T-9"}']
    assert copy_sources(messages[1:2]) == []
    assert "T-9" in request_spans(copy_sources(messages))


def test_spans_are_word_runs_trimmed_and_quoted_phrases_stay_whole() -> None:
    spans = request_spans([REQUEST])
    assert "A-58213" in spans and "order A-58213" in spans and "Where" in spans
    assert "disk full on db-3" in spans
    assert "full on db-3" not in spans and "disk full" not in spans  # cuts the quote
    assert not any('"' in s or s != s.strip(",.?!") for s in spans)
    assert len(spans) == len(set(spans))
    assert {"redis's", "redis"} <= set(request_spans(["check redis's journal"]))
    assert request_spans(["k b c d e f g h"], max_words=2) == tuple(
        ["k", "k b", "b", "b c", "c", "c d", "d", "d e", "e", "e f", "f", "f g", "g", "g h", "h"]
    )


def test_spans_of_chatter_alone_are_not_offered() -> None:
    spans = request_spans(["restart haproxy asap please, as soon as possible"])
    assert "haproxy" in spans and "haproxy asap" in spans  # chatter beside a value stays
    assert not {"asap", "please", "asap please", "as soon as possible", "soon"} & set(spans)


@pytest.fixture(scope="module")
def constraint(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(SCHEMA).regex), tokenizer)


def _row(length: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((length,), MASK, dtype=torch.long), torch.ones(length, dtype=torch.bool)


def test_a_string_value_opening_offers_the_spans_the_automaton_accepts(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    plain = constraint.session()
    tokens, masked = _row()
    plain.jump_forward(tokens, masked)
    assert plain.block_choice(tokens, masked) is None  # free text, no sources
    with pytest.raises(TypeError, match="sequence of texts"):
        plain.copy_from(REQUEST)  # type: ignore[arg-type]

    session = constraint.session()
    session.copy_from([REQUEST])
    tokens, masked = _row()
    filled = session.jump_forward(tokens, masked)
    assert tokenizer.decode(tokens[:filled].tolist()) == '{"id":"'
    found = session.block_choice(tokens, masked)
    assert found is not None
    start, choice = found
    assert start == filled and choice.copy
    texts = {c.text for c in choice.candidates}
    assert {"A-58213", "disk full on db-3"} <= texts <= set(request_spans([REQUEST]))
    for cand in choice.candidates:
        assert tokenizer.decode(list(cand.tokens)) == cand.text
        assert all(tokenizer.decode([t]).startswith('"') for t, _ in cand.closers)


def test_a_second_session_of_the_constraint_gets_the_same_candidates_from_its_memos(
    constraint: Constraint,
) -> None:
    # Sessions of one constraint share its tokenization and automaton memos (an agent
    # decodes every step over the same tools and much the same spans).
    def offered() -> list[tuple[str, tuple[int, ...]]]:
        session = constraint.session()
        session.copy_from([REQUEST])
        tokens, masked = _row()
        session.jump_forward(tokens, masked)
        found = session.block_choice(tokens, masked)
        assert found is not None
        return [(c.text, c.tokens) for c in found[1].candidates]

    constraint.forced.copies.clear()
    first = offered()
    memo = constraint.forced.tokenized
    assert memo
    key = next(iter(memo))
    constraint.forced.tokenize(key).append(0)  # a caller's list is its own
    kept = dict(constraint.forced.copies)
    assert len(kept) >= len(request_spans([REQUEST]))  # every span at the value opening
    assert offered() == first
    assert constraint.forced.copies == kept  # the second session only read the memo
    # A span the memo knows is not worked out again: a planted entry is what is offered.
    entry, cand = next((k, v) for k, v in kept.items() if v is not None and v.text == first[0][0])
    constraint.forced.copies[entry] = dataclasses.replace(cand, text="planted")
    assert "planted" in [text for text, _ in offered()]
    constraint.forced.copies.clear()


def test_a_value_opening_at_the_blocks_first_position_is_offered_too(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    head = tokenizer.encode('{"id":"')
    session = constraint.session()
    session.copy_from([REQUEST])
    tokens, masked = _row(len(head))
    assert session.jump_forward(tokens, masked) == len(head)
    session.finish_block(tokens)  # the block ends right after the opening quote
    tokens, masked = _row(16)
    found = session.block_choice(tokens, masked)
    assert found is not None and found[0] == 0 and found[1].copy
    assert "A-58213" in {c.text for c in found[1].candidates}

    # A rollback restores the state before the prefix's last token with the prefix (the
    # hybrid verifier rolls its session back after each draft): the same offer again.
    offered = {c.text for c in found[1].candidates}
    snapshot = session.checkpoint()
    session.advance(tokenizer.encode("A-58213"))
    session.rollback(snapshot)
    again = session.block_choice(*_row(16))
    assert again is not None and {c.text for c in again[1].candidates} == offered

    closing = constraint.session()  # a block that starts right after a closing quote
    closing.copy_from([REQUEST])
    closing.advance(tokenizer.encode('{"id":"x"'))
    assert closing.block_choice(*_row(16)) is None


def test_patterns_narrow_the_spans_and_keys_or_mid_string_offer_none(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer, constraint: Constraint
) -> None:
    digits = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^[0-9]+$"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    session = Constraint(build_automaton(compile_json_schema(digits).regex), tokenizer).session()
    session.copy_from(["order 58213 or 77 please"])
    tokens, masked = _row()
    session.jump_forward(tokens, masked)
    found = session.block_choice(tokens, masked)
    assert found is not None and {c.text for c in found[1].candidates} == {"58213", "77"}

    free_keys = {"type": "object", "additionalProperties": {"type": "integer"}}
    keys = Constraint(build_automaton(compile_json_schema(free_keys).regex), tokenizer).session()
    keys.copy_from(["order 58213"])
    tokens, masked = _row()
    opening = tokenizer.encode('{"')
    tokens[: len(opening)], masked[: len(opening)] = torch.tensor(opening), False
    assert keys.block_choice(tokens, masked) is None  # an object key is structure

    inside = constraint.session()
    inside.copy_from([REQUEST])
    tokens, masked = _row()
    head = tokenizer.encode('{"id":"A')
    tokens[: len(head)], masked[: len(head)] = torch.tensor(head), False
    assert inside.block_choice(tokens, masked) is None  # the value is under way


def test_a_copy_past_the_block_is_owed_to_the_next_and_a_declined_one_is_not_offered_again(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    session = constraint.session()
    session.copy_from([REQUEST])
    head = tokenizer.encode('{"id":"')
    length = len(head) + 2  # room for two tokens of the value
    tokens, masked = _row(length)
    session.jump_forward(tokens, masked)
    start, choice = session.block_choice(tokens, masked)  # type: ignore[misc]
    long = next(c for c in choice.candidates if c.text == "disk full on db-3")
    assert len(long.tokens) + 1 > length - start
    closed = (*long.tokens, long.closers[0][0])
    pick = type(long)(long.text, closed, closed, (*long.states, long.closers[0][1]))
    session.fill_choice(tokens, masked, start, pick)
    assert not bool(masked.any())
    session.jump_forward(tokens, masked)  # the same block again: nothing owed yet
    session.finish_block(tokens)
    written = tokens.tolist()
    nxt, holes = _row(16)
    paid = session.jump_forward(nxt, holes)
    assert paid >= len(closed) - (length - start)
    written += nxt[:paid].tolist()
    assert tokenizer.decode(written).startswith('{"id":"disk full on db-3","n":')

    # Under a tight budget every candidate offered can be committed (and finished).
    tight = constraint.session(len(tokenizer.encode('{"id":"x","n":0}')) + 1)
    tight.copy_from([REQUEST])
    tokens, masked = _row(length)
    tight.jump_forward(tokens, masked)
    start, narrow = tight.block_choice(tokens, masked)  # type: ignore[misc]
    assert 0 < len(narrow.candidates) < len(choice.candidates)
    choice = narrow
    for cand in choice.candidates:
        closed = (*cand.tokens, cand.closers[0][0])
        pick = type(cand)(cand.text, closed, closed, (*cand.states, cand.closers[0][1]))
        tight.fill_choice(tokens.clone(), masked.clone(), start, pick)

    again = constraint.session()
    again.copy_from([REQUEST])
    tokens, masked = _row()
    again.jump_forward(tokens, masked)
    start, _ = again.block_choice(tokens, masked)  # type: ignore[misc]
    again.decline_choice(tokens, masked, start)
    assert again.block_choice(tokens, masked) is None


@pytest.mark.parametrize("always", [True, False])
@pytest.mark.parametrize("decoder", ["diffusion", "autoregressive"])
def test_the_decoders_copy_whole_spans_or_write_as_without_them(
    decoder: str,
    always: bool,
    constraint: Constraint,
    tokenizer: Tokenizer,
    model_factory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Thresholds at the extremes: every copy choice made, or none. The AR decoder (and
    # so the hybrid verifier) makes them where a string value opens after its prefix.
    monkeypatch.setattr(choice_scoring, "COPY_MIN_CLOSE", 0.0 if always else 2.0)
    monkeypatch.setattr(choice_scoring, "NUMBER_MIN_CLOSE", 0.0 if always else 2.0)
    if always:  # a number is offered only where the model may start it: here, always
        monkeypatch.setattr(copy_choices, "WORD_MIN_START", 1e-30)
    vocab = tokenizer.vocab_size
    if decoder == "diffusion":
        model = model_factory("block", vocab_size=vocab, logits_shift=1, seed=11, block_length=8)
        engine: DiffusionEngine | ARDecoder = DiffusionEngine(model)
        config = GenerationConfig(max_new_tokens=48, block_length=8, steps=8, score_choices=True)
    else:
        engine = ARDecoder(model_factory("causal", vocab_size=vocab, seed=12))
        config = GenerationConfig(max_new_tokens=48, score_choices=True)
    for text in (REQUEST, "cancel 58213 now", "x"):
        prompt = tokenizer.encode(text)
        session = constraint.session(48)
        session.copy_from([text])
        out = engine.generate([prompt], config, constraints=[session])
        value = json.loads(tokenizer.decode(out.sequences[0], skip_special=True))
        jsonschema.validate(value, SCHEMA)
        plain = engine.generate([prompt], config, constraints=[constraint.session(48)])
        if always:
            assert value["id"] in request_spans([text])
            if number_spans([text]):  # "58213": the integer is copied too
                assert str(value["n"]) in number_spans([text])
        else:
            assert out.sequences == plain.sequences


def test_a_copy_choice_takes_its_likely_starts_from_the_last_pass_unless_a_choice_came_between(
    build_automaton: Callable[[str], TokenAutomaton],
    tokenizer: Tokenizer,
    model_factory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Right after a denoising pass, the pass's logits at the value's first position say
    which candidates to score: no pass of its own. After a closed choice was filled
    (here an enum before the string), those logits did not see it: one short pass."""
    import agentflow.engine.block_choices as block_choices

    monkeypatch.setattr(choice_scoring, "COPY_MIN_CLOSE", 0.0)
    asked: list[list[bool]] = []  # per call: which copy queries needed a pass
    real = block_choices.first_logprobs

    def spy(model, cache, queries):  # type: ignore[no-untyped-def]
        asked.append([q.first_logprobs is None for q in queries])
        return real(model, cache, queries)

    monkeypatch.setattr(block_choices, "first_logprobs", spy)
    # One block holds the whole object, so no block's first pass comes between.
    model = model_factory(
        "block", vocab_size=tokenizer.vocab_size, logits_shift=1, seed=11, block_length=48
    )
    config = GenerationConfig(max_new_tokens=48, block_length=48, steps=48, score_choices=True)
    enum_first = {
        "type": "object",
        "properties": {"kind": {"enum": ["order", "ticket"]}, "id": {"type": "string"}},
        "required": ["kind", "id"],
        "additionalProperties": False,
    }
    for schema, needs_pass in ((SCHEMA, False), (enum_first, True)):
        constraint = Constraint(build_automaton(compile_json_schema(schema).regex), tokenizer)
        session = constraint.session(48)
        session.copy_from([REQUEST])
        asked.clear()
        out = DiffusionEngine(model).generate(
            [tokenizer.encode(REQUEST)], config, constraints=[session]
        )
        value = json.loads(tokenizer.decode(out.sequences[0], skip_special=True))
        jsonschema.validate(value, schema)
        assert value["id"] in request_spans([REQUEST])  # the copy was made
        assert asked and asked[0] == [needs_pass], schema


def test_number_spans_are_the_numbers_written_as_whole_words() -> None:
    text = "port 8080, refund $129.99. SO-14246 #4512 at 20% v9.22.3 -5 x-3 007"
    assert number_spans([text, '{"total": 12.50, "n": 3, "id": "A-7"}']) == (
        "8080",
        "129.99",
        "4512",
        "20",
        "-5",
        "12.50",
        "3",
    )
    assert number_spans(["no numbers here", ""]) == ()


NUMBERS = {
    "type": "object",
    "properties": {
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "price": {"type": "number"},
        "ids": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["port", "price", "ids"],
    "additionalProperties": False,
}
NUMBER_REQUEST = "is port 8080 open? it cost $129.99, orders 77 and 99999999 (or -4)"


@pytest.fixture(scope="module")
def numbers(build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(NUMBERS).regex), tokenizer)


def _after(tokenizer: Tokenizer, head: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A block row whose first tokens are ``head``, the rest masked."""
    tokens, masked = _row()
    ids = tokenizer.encode(head)
    tokens[: len(ids)], masked[: len(ids)] = torch.tensor(ids), False
    return tokens, masked


def _offered_after(session, tokenizer: Tokenizer, head: str) -> set[str] | None:  # type: ignore[no-untyped-def]
    found = session.block_choice(*_after(tokenizer, head))
    if found is None:
        return None
    start, choice = found
    assert start == len(tokenizer.encode(head)) and choice.copy
    return {c.text for c in choice.candidates}


def test_a_number_opening_offers_the_request_numbers_its_type_and_range_accept(
    numbers: Constraint, tokenizer: Tokenizer
) -> None:
    session = numbers.session()
    session.copy_from([NUMBER_REQUEST])
    # An integer in 1..65535: not a price, not a negative, not past the maximum.
    assert _offered_after(session, tokenizer, '{"port":') == {"8080", "77"}
    assert _offered_after(session, tokenizer, '{"port":8080,"price":') == {
        "8080",
        "129.99",
        "77",
        "99999999",
        "-4",
    }
    head = '{"port":8080,"price":1,"ids":['
    assert _offered_after(session, tokenizer, head) == {"8080", "77", "99999999", "-4"}
    assert _offered_after(session, tokenizer, head + "77,") == {"8080", "77", "99999999", "-4"}
    assert _offered_after(session, tokenizer, '{"port":8') is None  # the number is under way
    assert _offered_after(session, tokenizer, '{"port":8080,"') is None  # a key is structure


@pytest.fixture
def at_port(numbers: Constraint, tokenizer: Tokenizer):  # type: ignore[no-untyped-def]
    """A session given NUMBER_REQUEST, a row where the port's number opens, its choice."""
    session = numbers.session()
    session.copy_from([NUMBER_REQUEST])
    tokens, masked = _after(tokenizer, '{"port":')
    start, choice = session.block_choice(tokens, masked)
    return session, tokens, masked, start, choice


def test_a_number_candidate_is_closed_by_the_tokens_that_end_the_number(
    at_port, tokenizer: Tokenizer
) -> None:
    session, tokens, masked, start, choice = at_port
    port = next(c for c in choice.candidates if c.text == "8080")
    assert tokenizer.decode(list(port.tokens)) == "8080"
    ends = {tokenizer.decode([t]) for t, _ in port.closers}
    assert ends and all(e[0] in ",}" for e in ends)  # no digit, no quote: the number ends
    closed = (*port.tokens, port.closers[0][0])
    pick = type(port)(port.text, closed, closed, (*port.states, port.closers[0][1]))
    session.fill_choice(tokens, masked, start, pick)
    assert tokenizer.decode(tokens[~masked].tolist()).startswith('{"port":8080,')


def test_the_autoregressive_session_offers_numbers_after_its_prefix(
    numbers: Constraint, tokenizer: Tokenizer
) -> None:
    session = numbers.session()
    session.copy_from([NUMBER_REQUEST])
    session.advance(tokenizer.encode('{"port":'))
    choice = session.next_choice(16)
    assert choice is not None and choice.copy
    assert {c.text for c in choice.candidates} == {"8080", "77"}
    session.advance(tokenizer.encode("80"))
    assert session.next_choice(16) is None  # inside the number: written as it goes
    plain = numbers.session()
    plain.copy_from(["no numbers at all"])
    plain.advance(tokenizer.encode('{"port":'))
    assert plain.next_choice(16) is None


def test_a_number_is_offered_only_where_the_model_may_start_it(
    at_port, tokenizer: Tokenizer
) -> None:
    # A refund's amount is not the order number the request holds: a number whose first
    # token the model gives under WORD_MIN_START of its likeliest token's probability is
    # not a candidate, however the candidates rank among themselves.
    choice = at_port[-1]
    assert choice.number and {c.text for c in choice.candidates} == {"8080", "77"}
    eight, seven = tokenizer.encode("8")[0], tokenizer.encode("7")[0]
    first = torch.full((tokenizer.vocab_size,), -30.0)
    first[tokenizer.encode("1")[0]] = 0.0  # the model starts "1..."
    first[eight] = math.log(copy_choices.WORD_MIN_START) + 0.01
    first[seven] = math.log(copy_choices.WORD_MIN_START) - 0.01
    assert [c.text for c in likeliest_starts(choice, first).candidates] == ["8080"]
    first[eight] = -30.0
    assert likeliest_starts(choice, first).candidates == ()
    # A string value's choice keeps its likeliest starts, whatever the model's top token.
    string = dataclasses.replace(choice, number=False)
    assert {c.text for c in likeliest_starts(string, first).candidates} == {"8080", "77"}
