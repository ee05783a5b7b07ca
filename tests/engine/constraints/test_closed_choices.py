"""Closed choices: the constraint finds them, the decoders take the best-scored one whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
import torch
from engine_testing import make_config, make_model

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.hybrid import HybridEngine, HybridOptions
from agentflow.engine.model import Transformer
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

NAMES = ["get_order", "get_orders", "cancel_order"]
SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": NAMES}, "id": {"type": "string", "maxLength": 5}},
    "required": ["name", "id"],
    "additionalProperties": False,
}
PREFIX = '{"name":"'


@pytest.fixture(scope="module")
def constraint(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(SCHEMA).regex), tokenizer)


def _at_name(constraint: Constraint, max_tokens: int | None = None):
    session = constraint.session(max_tokens)
    forced = session.forced_tokens()
    session.advance(forced)
    return session, forced


def test_an_enum_value_is_a_closed_choice_of_whole_candidates(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    session, forced = _at_name(constraint)
    assert tokenizer.decode(forced) == PREFIX
    choice = session.next_choice(room=40)
    assert choice is not None
    assert sorted(c.text for c in choice.candidates) == sorted(NAMES)
    for cand in choice.candidates:
        content = tokenizer.decode(list(cand.tokens))
        # get_orders extends get_order: that one also commits the token that ends it.
        assert (
            content == cand.text if cand.text != "get_order" else content.startswith('get_order"')
        )
        # The scored run ends with the first token of what follows the value.
        assert tokenizer.decode(list(cand.scored)).startswith(cand.text + '"')
        assert '","id":"'.startswith(tokenizer.decode([cand.scored[-1]]))
        # Committing a candidate leaves the session where the rest is forced.
        branch = constraint.session()
        branch.advance([*forced, *cand.tokens])
        rest = tokenizer.decode([*cand.tokens, *branch.forced_tokens()])
        assert rest.startswith(cand.text + '","id":"')
    assert choice.width == max(len(c.tokens) for c in choice.candidates)


def test_free_text_keys_and_too_little_room_open_no_choice(
    constraint: Constraint, tokenizer: Tokenizer, build_automaton
) -> None:
    session, _ = _at_name(constraint)
    longest = session.next_choice(room=40).width  # type: ignore[union-attr]
    assert session.next_choice(room=longest - 1) is None  # a candidate would not fit
    session.advance(tokenizer.encode("get_order"))
    session.advance(session.forced_tokens())
    assert session.next_choice(room=40) is None  # the id is free text
    two_keys = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    }
    keys = Constraint(build_automaton(compile_json_schema(two_keys).regex), tokenizer).session()
    keys.advance(tokenizer.encode('{"'))
    assert keys.next_choice(room=40) is None  # object keys stay token by token


def test_a_block_choice_fills_a_candidate_at_the_leftmost_mask(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    session = constraint.session()
    mask = 1
    tokens = torch.full((24,), mask, dtype=torch.long)
    masked = torch.ones(24, dtype=torch.bool)
    filled = session.jump_forward(tokens, masked)
    found = session.block_choice(tokens, masked)
    assert found is not None
    start, choice = found
    assert start == filled and tokenizer.decode(tokens[:start].tolist()) == PREFIX
    pick = next(c for c in choice.candidates if c.text == "get_orders")
    session.fill_choice(tokens, masked, start, pick)
    assert tokenizer.decode(tokens[: start + len(pick.tokens)].tolist()) == PREFIX + "get_orders"
    session.jump_forward(tokens, masked)
    end = start + len(pick.tokens)
    assert tokenizer.decode(tokens[end : end + 3].tolist()).startswith('","')
    with pytest.raises(ValueError, match="not all masked"):
        session.fill_choice(tokens, masked, start, pick)
    # A position committed right of the leftmost mask: the choice is left to the model.
    fresh = constraint.session()
    row = torch.full((24,), mask, dtype=torch.long)
    holes = torch.ones(24, dtype=torch.bool)
    fresh.jump_forward(row, holes)
    row[20], holes[20] = tokenizer.encode("}")[0], False
    assert fresh.block_choice(row, holes) is None


def _reference_scores(
    model: Transformer, prompt: list[int], prefix: list[int], choice: Any, block: bool
) -> dict[str, float]:
    """Each candidate's log-probability by a causal reading of prompt + prefix + candidate."""
    scores = {}
    for cand in choice.candidates:
        ids = prompt + prefix + list(cand.scored)
        n, p = len(prompt), len(prefix)
        pos = torch.arange(len(ids))
        block_ids = pos.clone()
        if block:  # the block's clean prefix shares one block id, as the sampler lays it out
            block_ids[n : n + p] = n
        with torch.no_grad():
            logits = model(torch.tensor([ids]), positions=pos[None], block_ids=block_ids[None])
        logp = logits.float().log_softmax(-1)[0]
        scores[cand.text] = sum(float(logp[n + p + j - 1, t]) for j, t in enumerate(cand.scored))
    return scores


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_decoders_take_the_best_scored_candidate_and_batch_like_singles(
    mode: str, constraint: Constraint, tokenizer: Tokenizer, model_factory
) -> None:
    vocab = tokenizer.vocab_size
    if mode == "diffusion":
        model = model_factory("block", vocab_size=vocab, logits_shift=1, seed=11, block_length=16)
        engine = DiffusionEngine(model)
    else:
        model = model_factory("causal", vocab_size=vocab, seed=11)
        engine = ARDecoder(model)
    config = GenerationConfig(max_new_tokens=40, block_length=16, steps=16, score_choices=True)
    prompts = [tokenizer.encode(t) for t in ("Find order 58213", "cancel it", "x")]
    session, forced = _at_name(constraint)
    choice = session.next_choice(room=40)
    batch = engine.generate(prompts, config, constraints=[constraint.session(40) for _ in prompts])
    for i, prompt in enumerate(prompts):
        value = json.loads(tokenizer.decode(batch.sequences[i], skip_special=True))
        jsonschema.validate(value, SCHEMA)
        scores = _reference_scores(model, prompt, forced, choice, mode == "diffusion")
        assert value["name"] == max(scores, key=scores.__getitem__)
        single = engine.generate([prompt], config, constraints=[constraint.session(40)])
        assert single.sequences[0] == batch.sequences[i]


def test_a_prior_scores_each_candidate_by_the_requests_lift(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    model = make_model(make_config("causal", vocab_size=tokenizer.vocab_size), seed=4, peak=1.0)
    engine = ARDecoder(model)
    config = GenerationConfig(max_new_tokens=40, score_choices=True, choice_prior_weight=0.75)
    session, forced = _at_name(constraint)
    choice = session.next_choice(room=40)
    for text in ("cancel order 58213", "where is 58213", "get my orders", "x"):
        prompt = tokenizer.encode(text)
        # The prior shares the request's first tokens (read from the decoder's cache).
        prior = prompt[:2] + tokenizer.encode(" hello")
        res = engine.generate(
            [prompt], config, constraints=[constraint.session(40)], choice_priors=[prior]
        )
        name = json.loads(tokenizer.decode(res.sequences[0], skip_special=True))["name"]
        full = _reference_scores(model, prompt, forced, choice, block=False)
        base = _reference_scores(model, prior, forced, choice, block=False)
        lift = {t: full[t] - 0.75 * base[t] for t in full}
        assert name == max(lift, key=lift.__getitem__)
        plain = engine.generate([prompt], config, constraints=[constraint.session(40)])
        if plain.sequences == res.sequences:
            # The prior's candidates ride with the request's scoring pass; what the
            # prior does not share with the request costs one pass of its own.
            shared = 2 if len(prompt) > 2 else len(prompt) - 1
            unshared = len(prior) - 1 - shared
            assert res.stats.rows[0].nfe == plain.stats.rows[0].nfe + (unshared > 0)


@pytest.mark.parametrize("agreeing", [False, True])
def test_hybrid_makes_the_verifiers_choices_and_diffusion_steps_the_drafters(
    agreeing: bool, constraint: Constraint, tokenizer: Tokenizer, model_factory
) -> None:
    vocab = tokenizer.vocab_size
    verifier = model_factory("causal", vocab_size=vocab, seed=12, n_layers=1)
    drafter = model_factory(
        "block", vocab_size=vocab, logits_shift=1, seed=11, block_length=16, n_layers=1
    )
    if agreeing:  # the verifier's own weights: drafts agree, rounds walk through choices
        drafter.load_state_dict(verifier.state_dict())
    engine = HybridEngine(drafter, verifier, options=HybridOptions(adaptive=False))
    on = GenerationConfig(max_new_tokens=40, block_length=16, score_choices=True)
    priors = [tokenizer.encode("hello")]
    for text in ("Find order 58213", "cancel 4", "list my orders please"):
        prompt = tokenizer.encode(text)
        hybrid = engine.generate(
            prompt, on, constraints=[constraint.session(40)], choice_priors=priors
        )
        ar = ARDecoder(verifier).generate(
            prompt, on, constraints=[constraint.session(40)], choice_priors=priors
        )
        assert hybrid.sequences == ar.sequences
        drafted = engine.generate(
            prompt, on, constraints=[constraint.session(40)], mode="diffusion", choice_priors=priors
        )
        alone = DiffusionEngine(drafter).generate(
            prompt, on, constraints=[constraint.session(40)], choice_priors=priors
        )
        assert drafted.sequences == alone.sequences
        assert drafted.stats.rows[0].nfe == alone.stats.rows[0].nfe


def decoder(mode: str, tokenizer: Tokenizer, model_factory) -> Any:
    """A random-weight decoder of ``mode``: diffusion, AR, or hybrid (drafter + verifier)."""
    vocab = tokenizer.vocab_size
    drafter = model_factory("block", vocab_size=vocab, logits_shift=1, seed=11, block_length=16)
    verifier = model_factory("causal", vocab_size=vocab, seed=11)
    return {
        "diffusion": lambda: DiffusionEngine(drafter),
        "ar": lambda: ARDecoder(verifier),
        "hybrid": lambda: HybridEngine(drafter, verifier, options=HybridOptions(adaptive=False)),
    }[mode]()


@pytest.mark.parametrize("mode", ["diffusion", "ar", "hybrid"])
def test_a_preferred_value_wins_by_its_bonus_in_every_decoder(
    mode: str, constraint: Constraint, tokenizer: Tokenizer, model_factory
) -> None:
    engine = decoder(mode, tokenizer, model_factory)
    config = GenerationConfig(max_new_tokens=40, block_length=16, steps=16, score_choices=True)
    prompt = tokenizer.encode("Find order 58213")

    def name(session: Any) -> str:
        out = engine.generate([prompt], config, constraints=[session])
        return json.loads(tokenizer.decode(out.sequences[0], skip_special=True))["name"]

    plain = name(constraint.session(40))
    for wanted in NAMES:
        session = constraint.session(40)
        session.prefer({n: 1e4 if n == wanted else 0.0 for n in NAMES})
        assert name(session) == wanted
    session = constraint.session(40)
    session.prefer({n: 1e4 for n in NAMES[1:]})  # not every candidate: another choice's values
    assert name(session) == plain
    session = constraint.session(40)
    session.prefer({})  # no preference: the model's own choice
    assert name(session) == plain


def test_prefer_refuses_bonuses_that_are_not_numbers(constraint: Constraint) -> None:
    session = constraint.session(40)
    with pytest.raises(ValueError, match="finite"):
        session.prefer({"get_order": float("nan")})


def test_commit_until_choice_stops_where_a_choice_opens(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    target = tokenizer.encode('{"name":"get_order","id":"7"}')
    mask = 1

    def row() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.full((24,), mask, dtype=torch.long), torch.ones(24, dtype=torch.bool)

    proposal = torch.tensor(target + [tokenizer.end_id] * (24 - len(target)))
    logits = torch.zeros(24, tokenizer.vocab_size)
    start = len(tokenizer.encode(PREFIX))
    # A confident run over the whole block: without the flag it runs through the name.
    tokens, masked = row()
    done = constraint.session().commit(tokens, masked, list(range(24)), proposal, logits)
    assert len(done) == 24
    tokens, masked = row()
    session = constraint.session()
    done = session.commit(tokens, masked, list(range(24)), proposal, logits, until_choice=True)
    assert done == list(range(start))  # '{"name":"' and not one token of the name
    assert session.block_choice(tokens, masked) is not None


PAIR_SCHEMA = {"type": "array", "items": {"enum": NAMES}, "minItems": 2, "maxItems": 2}


@pytest.mark.parametrize("mode", ["diffusion", "ar", "hybrid"])
def test_a_value_preferred_once_is_not_favoured_again(
    mode: str,
    build_automaton: Callable[[str], TokenAutomaton],
    tokenizer: Tokenizer,
    model_factory,
) -> None:
    pair = Constraint(build_automaton(compile_json_schema(PAIR_SCHEMA).regex), tokenizer)
    engine = decoder(mode, tokenizer, model_factory)
    config = GenerationConfig(max_new_tokens=40, block_length=16, steps=16, score_choices=True)
    bonuses = {"get_order": 1e4, "cancel_order": 5e3, "get_orders": 0.0}

    def values(once: bool) -> list[str]:
        session = pair.session(40)
        session.prefer(bonuses, once=once)
        out = engine.generate([tokenizer.encode("Find order 58213")], config, constraints=[session])
        return json.loads(tokenizer.decode(out.sequences[0], skip_special=True))

    assert values(once=False) == ["get_order", "get_order"]
    # Both choices fall in one block for diffusion: the block's own tokens count.
    assert values(once=True) == ["get_order", "cancel_order"]


def test_a_value_preferred_once_gets_its_bonus_back_after_a_rollback(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> None:
    pair = Constraint(build_automaton(compile_json_schema(PAIR_SCHEMA).regex), tokenizer)
    session = pair.session(40)
    session.prefer({"get_order": 3.0, "cancel_order": 2.0, "get_orders": 1.0}, once=True)
    session.advance(session.forced_tokens())
    snapshot = session.checkpoint()

    def bonus() -> dict[str, float]:
        choice = session.next_choice(room=40)
        assert choice is not None
        return {c.text: b for c, b in zip(choice.candidates, choice.bonus, strict=True)}

    assert bonus()["get_order"] == 3.0
    session.advance(tokenizer.encode('get_order","'))
    assert bonus() == {"get_order": 1.0, "cancel_order": 2.0, "get_orders": 1.0}
    session.rollback(snapshot)
    assert bonus()["get_order"] == 3.0


def test_lasting_bonuses_hold_for_every_choice(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> None:
    pair = Constraint(build_automaton(compile_json_schema(PAIR_SCHEMA).regex), tokenizer)
    session = pair.session(40)
    lasting = {"get_order": 0.0, "cancel_order": -6.0, "get_orders": 0.0}
    session.prefer({"get_order": 3.0, "cancel_order": 2.0}, once=True, lasting=lasting)
    session.advance(session.forced_tokens())

    def bonus() -> dict[str, float]:
        choice = session.next_choice(room=40)
        assert choice is not None
        return {c.text: b for c, b in zip(choice.candidates, choice.bonus, strict=True)}

    assert bonus() == {"get_order": 3.0, "cancel_order": -4.0, "get_orders": 0.0}
    session.advance(tokenizer.encode('get_order","'))
    # The once-bonus of the value held falls to the lowest (0: get_orders has none);
    # the lasting penalty stays, and is not what "lowest" reads.
    assert bonus() == {"get_order": 0.0, "cancel_order": -4.0, "get_orders": 0.0}
    # Lasting bonuses alone make the choice a preferred one.
    alone = pair.session(40)
    alone.prefer({}, lasting=lasting)
    alone.advance(alone.forced_tokens())
    choice = alone.next_choice(room=40)
    assert choice is not None
    found = {c.text: b for c, b in zip(choice.candidates, choice.bonus, strict=True)}
    assert found == lasting


KEYS_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"final": {"type": "string", "maxLength": 8}},
            "required": ["final"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "tool_calls": {"type": "array", "items": {"enum": NAMES}, "maxItems": 2}
            },
            "required": ["tool_calls"],
            "additionalProperties": False,
        },
    ]
}


@pytest.fixture(scope="module")
def keys(build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(KEYS_SCHEMA).regex), tokenizer)


def test_object_keys_make_a_choice_only_when_every_key_has_a_bonus(
    keys: Constraint, tokenizer: Tokenizer
) -> None:
    session = keys.session(40)
    forced = session.forced_tokens()
    assert tokenizer.decode(forced) == '{"'
    session.advance(forced)
    assert session.next_choice(room=40) is None  # keys are the model's, token by token
    session.prefer_keys({"final": 2.0})  # not every key: still not a choice
    assert session.next_choice(room=40) is None
    session.prefer_keys({"final": 2.0, "tool_calls": 0.0})
    choice = session.next_choice(room=40)
    assert choice is not None and choice.key and not choice.copy
    assert dict(zip((c.text for c in choice.candidates), choice.bonus, strict=True)) == {
        "final": 2.0,
        "tool_calls": 0.0,
    }
    session.advance(tokenizer.encode('tool_calls":["'))
    inner = session.next_choice(room=40)  # the values inside are a value choice as before
    assert inner is not None and not inner.key
    with pytest.raises(ValueError, match="finite"):
        session.prefer_keys({"final": float("inf")})


@pytest.mark.parametrize("mode", ["diffusion", "ar", "hybrid"])
def test_a_key_bonus_decides_between_answering_and_calling_in_every_decoder(
    mode: str, keys: Constraint, tokenizer: Tokenizer, model_factory
) -> None:
    engine = decoder(mode, tokenizer, model_factory)
    config = GenerationConfig(max_new_tokens=40, block_length=16, steps=16, score_choices=True)
    prompt = tokenizer.encode("thanks, bye")
    priors = [tokenizer.encode("hello")]  # a key choice is not calibrated against it
    for wanted in ("final", "tool_calls"):
        session = keys.session(40)
        session.prefer_keys({k: 1e4 if k == wanted else 0.0 for k in ("final", "tool_calls")})
        out = engine.generate([prompt], config, constraints=[session], choice_priors=priors)
        value = json.loads(tokenizer.decode(out.sequences[0], skip_special=True))
        jsonschema.validate(value, KEYS_SCHEMA)
        assert list(value) == [wanted]
