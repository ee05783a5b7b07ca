"""``canonical=True`` sessions: outputs stay on the tokenizer's own segmentation."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest
import torch
from engine_testing import make_config, make_model, split_word

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import AttentionMode, Transformer
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer
from agentflow.kernels import unpack_bits

Build = Callable[[str], TokenAutomaton]
WORDS = r'"[a-z ]{0,40}"'
LONG_WORDS = r'"[a-z ]{24,48}"'


def _special(tokenizer: Tokenizer) -> dict[str, object]:
    """Model config fields that follow the tokenizer."""
    return {
        "vocab_size": tokenizer.vocab_size,
        "mask_token_id": tokenizer.mask_id,
        "end_token_id": tokenizer.end_id,
        "pad_token_id": tokenizer.pad_id,
    }


def _model(tokenizer: Tokenizer, attention: AttentionMode) -> Transformer:
    """A tiny random model over ``tokenizer`` (unscaled head: sampled text is varied)."""
    config = make_config(attention, block_length=8, **_special(tokenizer))
    return make_model(config, seed=7, peak=1.0)


def _non_canonical_pairs(tokenizer: Tokenizer, ids: list[int]) -> int:
    pairs = tokenizer.canonical_pairs
    return sum(not pairs.allows(a, b) for a, b in itertools.pairwise(ids))


def test_autoregressive_mask_drops_the_second_half_of_asplit_word(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    _, left, right = split_word(tokenizer)
    constraint = Constraint(build_automaton(WORDS), tokenizer)
    masks = {}
    for canonical in (False, True):
        session = constraint.session(canonical=canonical)
        assert session.canonical is canonical
        session.advance([*tokenizer.encode('"'), left])
        masks[canonical] = unpack_bits(session.next_token_mask(), tokenizer.vocab_size)
    assert bool(masks[False][right]) and not bool(masks[True][right])
    # narrowing only: nothing the automaton refuses, and a closing quote still fits
    assert bool((masks[True] <= masks[False]).all())
    assert bool(masks[True][tokenizer.encode('"')[0]])


def test_autoregressive_mask_falls_back_when_every_continuation_is_a_split(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    whole, left, right = split_word(tokenizer, one_byte_right=True)
    word = tokenizer.decode([whole])
    constraint = Constraint(build_automaton('"' + re.escape(word) + '"'), tokenizer)
    session = constraint.session(canonical=True)
    session.advance([*tokenizer.encode('"'), left])
    allowed = unpack_bits(session.next_token_mask(), tokenizer.vocab_size)
    assert bool(allowed[right])  # the only way on: the automaton's own set stands
    session.advance([right])
    session.advance(session.forced_tokens())
    assert session.done


def test_checkpoint_and_rollback_restore_the_last_token(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    _, left, _ = split_word(tokenizer)
    session = Constraint(build_automaton(WORDS), tokenizer).session(canonical=True)
    session.advance([*tokenizer.encode('"'), left])
    snap = session.checkpoint()
    before = session.next_token_mask().clone()
    session.advance(tokenizer.encode(" x"))
    session.rollback(snap)
    assert torch.equal(session.next_token_mask(), before)
    with pytest.raises(ValueError, match="not a checkpoint"):
        session.rollback((0, 0))  # type: ignore[arg-type]


def test_a_block_commit_refuses_a_split_next_to_a_clean_token(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    _, left, right = split_word(tokenizer)
    quote = tokenizer.encode('"')[0]
    constraint = Constraint(build_automaton(WORDS), tokenizer)
    v = tokenizer.vocab_size
    logits = torch.zeros(4, v)
    logits[0, left] = 9.0
    logits[1, right] = 9.0
    logits[1, quote] = 5.0  # the model's second choice after ``left``
    logits[2:, tokenizer.end_id] = 9.0  # type: ignore[index]
    written = {}
    for canonical in (False, True):
        session = constraint.session(canonical=canonical)
        session.advance([quote])
        tokens = torch.full((4,), tokenizer.mask_id)  # type: ignore[arg-type]
        masked = torch.ones(4, dtype=torch.bool)
        prop, _ = session.propose(tokens, masked, logits)
        assert session.commit(tokens, masked, [0, 1], prop, logits) == (
            [0] if canonical else [0, 1]
        )
        if bool(masked[1]):
            prop, _ = session.propose(tokens, masked, logits)
            session.commit(tokens, masked, [1], prop, logits)
        written[canonical] = tokens[:2].tolist()
    assert written[False] == [left, right]
    assert written[True][0] == left and written[True][1] != right
    assert tokenizer.canonical_pairs.allows(left, written[True][1])


@pytest.mark.parametrize("attention", ["block", "causal"])
def test_random_models_write_far_fewer_split_pairs(
    attention: AttentionMode, build_automaton: Build, tokenizer: Tokenizer
) -> None:
    """A random-weight model at temperature 1 writes free text; with ``canonical`` its
    pairs are the tokenizer's (but for the automaton's fallbacks), and the text is valid."""
    model = _model(tokenizer, attention)
    engine = (
        DiffusionEngine(model, tokenizer) if attention == "block" else ARDecoder(model, tokenizer)
    )
    constraint = Constraint(build_automaton(LONG_WORDS), tokenizer)
    prompt = tokenizer.encode("Answer:")
    counts = {}
    for canonical in (False, True):
        found = 0
        for seed in range(12):
            config = GenerationConfig(
                max_new_tokens=64, block_length=8, steps=8, temperature=1.0, seed=seed
            )
            session = constraint.session(max_tokens=64, canonical=canonical)
            out = engine.generate([prompt], config, constraints=[session]).sequences[0]
            ids = [int(t) for t in out if int(t) not in tokenizer.special_ids]
            assert re.fullmatch(LONG_WORDS, tokenizer.decode(ids)), tokenizer.decode(ids)
            found += _non_canonical_pairs(tokenizer, ids)
        counts[canonical] = found
    assert counts[False] >= 4  # the plain session does write split words here
    assert counts[True] * 3 <= counts[False], counts


def test_greedy_hybrid_stays_the_verifiers_own_output(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    """Drafts and verification read the same canonical sessions: greedy hybrid output is
    the AR model's, token for token, and the rule does change what the AR model writes."""
    from agentflow.engine.hybrid import HybridEngine

    special = _special(tokenizer)
    constraint = Constraint(build_automaton(LONG_WORDS), tokenizer)
    config = GenerationConfig(max_new_tokens=64, block_length=8)
    prompt = tokenizer.encode("Answer:")
    changed = 0
    for seed in range(6):
        drafter = make_model(make_config("block", **special), seed=100 + seed)
        verifier = make_model(make_config("causal", **special), seed=seed)
        hybrid, ar = HybridEngine(drafter, verifier, tokenizer), ARDecoder(verifier, tokenizer)
        outputs = {}
        for canonical in (False, True):
            sessions = [constraint.session(64, canonical=canonical) for _ in range(2)]
            ref = ar.generate([prompt], config, constraints=sessions[:1])
            got = hybrid.generate([prompt], config, constraints=sessions[1:])
            assert got.sequences == ref.sequences
            outputs[canonical] = ref.sequences[0]
        changed += outputs[False] != outputs[True]
        assert _non_canonical_pairs(tokenizer, outputs[True]) <= _non_canonical_pairs(
            tokenizer, outputs[False]
        )
    assert changed
