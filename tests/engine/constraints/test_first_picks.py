"""A session's first pick and restart, and the second decode of a close first choice
(``GenerationConfig.second_choice``) built on them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.errors import InfeasibleConstraintError
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.second_choice import sureness
from agentflow.engine.tokenizer import Tokenizer

NAMES = ["get_order", "get_orders", "cancel_order"]
PAIR_SCHEMA = {"type": "array", "items": {"enum": NAMES}, "minItems": 2, "maxItems": 2}
CALL_SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": NAMES}, "id": {"type": "string", "maxLength": 5}},
    "required": ["name", "id"],
    "additionalProperties": False,
}
PROMPTS = ("Find order 58213", "cancel it", "x", "list my orders please")
CONFIG = GenerationConfig(max_new_tokens=40, block_length=16, steps=16, score_choices=True)


@pytest.fixture(scope="module")
def pair(build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(PAIR_SCHEMA).regex), tokenizer)


@pytest.fixture(scope="module")
def call(build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(CALL_SCHEMA).regex), tokenizer)


def _candidates(session: Any) -> list[str]:
    choice = session.next_choice(room=40)
    assert choice is not None
    return [c.text for c in choice.candidates]


def test_the_first_choice_offering_the_pick_has_it_alone(
    pair: Constraint, tokenizer: Tokenizer
) -> None:
    session = pair.session(40)
    session.pick_first("cancel_order")
    session.advance(session.forced_tokens())
    assert _candidates(session) == ["cancel_order"]
    session.advance(tokenizer.encode('cancel_order","'))
    # Once the output holds it, every candidate is back.
    assert sorted(_candidates(session)) == sorted(NAMES)
    other = pair.session(40)
    other.pick_first("refund")  # offered by no choice: nothing changes
    other.advance(other.forced_tokens())
    assert sorted(_candidates(other)) == sorted(NAMES)
    with pytest.raises(TypeError, match="pick_first"):
        other.pick_first(3)  # type: ignore[arg-type]


def test_a_restarted_session_starts_over_with_the_same_preferences(
    pair: Constraint, tokenizer: Tokenizer
) -> None:
    session = pair.session(40)
    session.prefer({"get_order": 3.0, "cancel_order": 2.0, "get_orders": 1.0}, once=True)
    session.copy_from(["order 58213"])
    session.pick_first("get_orders")
    session.advance(session.forced_tokens() + tokenizer.encode('get_orders","'))
    fresh = session.restarted()
    assert fresh.state == pair.automaton.initial_state and not fresh.done
    assert fresh.preferred == session.preferred and fresh.copy_spans == session.copy_spans
    fresh.advance(fresh.forced_tokens())
    choice = fresh.next_choice(room=40)
    assert choice is not None  # the pick is not carried over: every candidate, each bonus
    bonus = {c.text: b for c, b in zip(choice.candidates, choice.bonus, strict=True)}
    assert bonus == {"get_order": 3.0, "cancel_order": 2.0, "get_orders": 1.0}


@pytest.fixture
def engine(tokenizer: Tokenizer, model_factory) -> DiffusionEngine:
    """A random-weight drafter (a shifted block model, as ours) whose choices are close."""
    model = model_factory(
        "block", vocab_size=tokenizer.vocab_size, logits_shift=1, seed=11, block_length=16
    )
    return DiffusionEngine(model)


def _name(tokenizer: Tokenizer, sequence: list[int]) -> str:
    return json.loads(tokenizer.decode(sequence, skip_special=True))["name"]


def test_a_close_first_choice_is_decoded_again_and_the_surer_decode_kept(
    call: Constraint, tokenizer: Tokenizer, engine: DiffusionEngine
) -> None:
    prompts = [tokenizer.encode(t) for t in PROMPTS]
    plain = engine.generate(prompts, CONFIG, constraints=[call.session(40) for _ in prompts])
    every = replace(CONFIG, second_choice=1e9)  # every margin is under it
    again = engine.generate(prompts, every, constraints=[call.session(40) for _ in prompts])
    kept = 0
    for i, prompt in enumerate(prompts):
        made = plain.stats.rows[i].first_choice
        assert made is not None and sorted(made.candidates) == sorted(NAMES)
        assert made.candidates[made.chosen] == _name(tokenizer, plain.sequences[i])
        assert made.runner_up is not None
        runner, margin = made.runner_up
        note = again.stats.rows[i].second_choice
        assert note is not None
        assert (note.first, note.runner_up) == (made.candidates[made.chosen], runner)
        assert note.margin == pytest.approx(margin) and margin >= 0
        # The runner-up's decode is the one a session picking it first gives.
        picked = call.session(40)
        picked.pick_first(runner)
        alone = engine.generate([prompt], CONFIG, constraints=[picked])
        assert _name(tokenizer, alone.sequences[0]) == runner
        assert note.first_sureness == pytest.approx(sureness(plain.stats.rows[i]), abs=1e-4)
        assert note.second_sureness == pytest.approx(sureness(alone.stats.rows[0]), abs=1e-4)
        assert note.kept == (note.second_sureness > note.first_sureness)
        want = alone if note.kept else plain
        row = 0 if note.kept else i
        assert again.sequences[i] == want.sequences[row]
        assert again.texts is None or again.texts[i] == want.texts[row]  # type: ignore[index]
        assert again.stats.rows[i].nfe == plain.stats.rows[i].nfe + alone.stats.rows[0].nfe
        kept += note.kept
    assert 0 < kept < len(prompts)  # both ways are exercised
    assert again.stats.nfe > plain.stats.nfe
    assert again.stats.tokens == sum(len(s) for s in again.sequences)
    # No margin is under 0: nothing is decoded again.
    none = engine.generate(
        prompts, replace(CONFIG, second_choice=0.0), constraints=[call.session(40) for _ in prompts]
    )
    assert none.sequences == plain.sequences and none.stats.nfe == plain.stats.nfe
    assert all(r.second_choice is None for r in none.stats.rows)


def test_rows_that_stop_try_the_runner_up_and_unconstrained_rows_do_not(
    call: Constraint, tokenizer: Tokenizer, engine: DiffusionEngine
) -> None:
    prompt = tokenizer.encode(PROMPTS[0])
    every = replace(CONFIG, second_choice=1e9)
    # Every row stops at its first unsure token (auto mode re-does it in hybrid mode);
    # the runner-up's decode stops too, so the row stays stopped.
    stopping = engine.generate([prompt], every, constraints=[call.session(40)], min_confidence=1.0)
    row = stopping.stats.rows[0]
    assert row.low_confidence is not None and row.first_choice is not None
    assert row.second_choice is not None and not row.second_choice.kept
    # A bound no row falls under: decoded again as without one.
    sure = engine.generate([prompt], every, constraints=[call.session(40)], min_confidence=0.0)
    plain = engine.generate([prompt], every, constraints=[call.session(40)])
    assert sure.sequences == plain.sequences
    assert sure.stats.rows[0].second_choice == plain.stats.rows[0].second_choice
    free = engine.generate([prompt], every)
    assert free.stats.rows[0].second_choice is None and free.stats.rows[0].first_choice is None
    with pytest.raises(ValueError, match="second_choice"):
        GenerationConfig(second_choice=-1.0)


def test_a_second_decode_that_fails_leaves_the_first(
    call: Constraint, tokenizer: Tokenizer, engine: DiffusionEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = [tokenizer.encode(t) for t in PROMPTS]
    plain = engine.generate(prompts, CONFIG, constraints=[call.session(40) for _ in prompts])
    first_decode = engine._decode
    calls: list[int] = []

    def failing_again(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise InfeasibleConstraintError("no position of block 0 could be committed")
        return first_decode(*args, **kwargs)

    monkeypatch.setattr(engine, "_decode", failing_again)
    every = replace(CONFIG, second_choice=1e9)
    out = engine.generate(prompts, every, constraints=[call.session(40) for _ in prompts])
    assert len(calls) == 2
    assert out.sequences == plain.sequences and out.stats.nfe == plain.stats.nfe
    assert all(r.second_choice is None for r in out.stats.rows)
