"""Closed choices scored whole: the scores equal a plain forward pass, priors calibrate them."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from engine_testing import make_config, make_model

from agentflow.engine.choice_scoring import (
    ChoicePrior,
    ChoiceQuery,
    choice_prior_list,
    choose,
    score,
    supports_choices,
)
from agentflow.engine.constraints.closed_choices import Candidate, ClosedChoice
from agentflow.engine.decode_batch import Segment
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import KVCache, Transformer

PROMPT = [9, 17, 33, 41, 12, 50, 7, 64]
CHOICE = ClosedChoice(
    (
        Candidate("a", (20, 21), (20, 21, 30), (0, 0)),
        Candidate("b", (22,), (22, 30), (0,)),
        Candidate("c", (23, 24, 25), (23, 24, 25, 31), (0, 0, 0)),
    )
)


def _reference(model: Transformer, before: list[int], scored: tuple[int, ...]) -> float:
    """log p(scored | before) by one causal forward pass without a cache."""
    ids = torch.tensor([before + list(scored)])
    pos = torch.arange(ids.shape[1])[None]
    with torch.no_grad():
        logp = model(ids, positions=pos, block_ids=pos).float().log_softmax(-1)[0]
    return sum(float(logp[len(before) + j - 1, t]) for j, t in enumerate(scored))


def _cached(model: Transformer, ids: list[int]) -> KVCache:
    cache = KVCache(model.config, 1, len(ids))
    pos = torch.arange(len(ids))[None]
    with torch.no_grad():
        model(torch.tensor([ids]), positions=pos, block_ids=pos, cache=cache, commit_len=len(ids))
    return cache


def _segment(ids: list[int], start: int) -> Segment:
    pos = torch.arange(start, start + len(ids))[None]
    return Segment(torch.tensor([ids]), pos, pos.clone(), torch.ones_like(pos, dtype=torch.bool))


@pytest.fixture
def causal() -> Transformer:
    return make_model(make_config("causal", max_seq_len=64), seed=3, peak=2.0)


def test_scores_from_a_cache_and_context_equal_a_plain_forward_pass(causal: Transformer) -> None:
    cache = _cached(causal, PROMPT[:5])
    query = ChoiceQuery(0, CHOICE, _segment(PROMPT[5:], 5), len(PROMPT))
    got = score(causal, cache, [query])[0]
    want = [_reference(causal, PROMPT, c.scored) for c in CHOICE.candidates]
    assert got == pytest.approx(want, abs=1e-4)
    assert cache.length == 5  # the caller's cache is untouched


def test_candidates_that_start_alike_share_their_tokens_and_score_alone(
    causal: Transformer,
) -> None:
    # Copy candidates are runs of words from the request: "dana", "dana@example.com",
    # "dana@example.com for"... they share their first tokens, read once in the pass.
    shared = ClosedChoice(
        (
            Candidate("p", (20, 21), (20, 21, 30), (0, 0)),
            Candidate("q", (20, 21, 22), (20, 21, 22, 30), (0, 0, 0)),
            Candidate("r", (20, 23), (20, 23, 31), (0, 0)),
            Candidate("s", (24,), (24, 30), (0,)),
        )
    )
    cache = _cached(causal, PROMPT[:5])
    query = ChoiceQuery(0, shared, _segment(PROMPT[5:], 5), len(PROMPT))
    seen: list[int] = []
    original = causal.forward

    def spy(tokens: torch.Tensor, **kwargs: object) -> torch.Tensor:
        seen.append(tokens.shape[1])
        return original(tokens, **kwargs)

    causal.forward = spy  # type: ignore[method-assign]
    got = score(causal, cache, [query])[0]
    del causal.forward
    # Context (3) + trie {20, 21, 22, 23, 24}: 8 tokens, not 3 + 9.
    assert seen == [8]
    want = [_reference(causal, PROMPT, c.scored) for c in shared.candidates]
    assert got == pytest.approx(want, abs=1e-4)


def test_an_empty_context_takes_the_first_token_from_the_last_pass(causal: Transformer) -> None:
    cache = _cached(causal, PROMPT)
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        last = causal(ids).float().log_softmax(-1)[0, -1]
    empty = _segment([], len(PROMPT))
    query = ChoiceQuery(0, CHOICE, empty, len(PROMPT), first_logprobs=last)
    got = score(causal, cache, [query])[0]
    want = [_reference(causal, PROMPT, c.scored) for c in CHOICE.candidates]
    assert got == pytest.approx(want, abs=1e-4)
    with pytest.raises(ValueError, match="first_logprobs"):
        score(causal, cache, [ChoiceQuery(0, CHOICE, empty, len(PROMPT))])


def test_queries_of_several_rows_score_in_one_pass_like_alone(causal: Transformer) -> None:
    other = [5, 6, 70, 71, 72, 73, 74, 75]
    cache = KVCache(causal.config, 2, 8)
    pos = torch.arange(7)[None].expand(2, 7)
    with torch.no_grad():
        causal(
            torch.tensor([PROMPT[:7], other[:7]]),
            positions=pos,
            block_ids=pos,
            cache=cache,
            commit_len=7,
        )
    queries = [
        ChoiceQuery(0, CHOICE, _segment(PROMPT[7:], 7), 8),
        ChoiceQuery(1, CHOICE, _segment(other[7:], 7), 8),
    ]
    both = score(causal, cache, queries)
    assert both[0] == pytest.approx(
        [_reference(causal, PROMPT, c.scored) for c in CHOICE.candidates], abs=1e-4
    )
    assert both[1] == pytest.approx(
        [_reference(causal, other, c.scored) for c in CHOICE.candidates], abs=1e-4
    )


def test_choose_takes_the_best_score_and_a_prior_subtracts_its_weighted_score(
    causal: Transformer,
) -> None:
    cache = _cached(causal, PROMPT[:-1])
    query = ChoiceQuery(0, CHOICE, _segment(PROMPT[-1:], len(PROMPT) - 1), len(PROMPT))
    plain = [_reference(causal, PROMPT, c.scored) for c in CHOICE.candidates]
    (res,) = choose(causal, cache, [query])
    assert res.candidate == CHOICE.candidates[max(range(3), key=plain.__getitem__)]
    assert res.confidence == pytest.approx(float(torch.tensor(plain).softmax(0).max()), abs=1e-5)

    prior_prompt = [9, 17, 64]
    prior = ChoicePrior(causal, prior_prompt)
    prior.extend([40, 41])  # the answer so far
    (calibrated,) = choose(causal, cache, [query], [(prior, [42])], prior_weight=0.5)
    base = [_reference(causal, [*prior_prompt, 40, 41, 42], c.scored) for c in CHOICE.candidates]
    want = [p - 0.5 * b for p, b in zip(plain, base, strict=True)]
    assert calibrated.logprobs == pytest.approx(tuple(want), abs=1e-4)
    assert calibrated.candidate == CHOICE.candidates[max(range(3), key=want.__getitem__)]
    assert prior.passes == 1  # its prompt; its candidates ride with the request's pass


def test_a_choices_bonus_is_added_to_each_candidates_score(causal: Transformer) -> None:
    cache = _cached(causal, PROMPT[:-1])
    plain = [_reference(causal, PROMPT, c.scored) for c in CHOICE.candidates]
    worst = min(range(3), key=plain.__getitem__)
    bonus = tuple(max(plain) - min(plain) + 1.0 if i == worst else 0.0 for i in range(3))
    preferred = replace(CHOICE, bonus=bonus)
    query = ChoiceQuery(0, preferred, _segment(PROMPT[-1:], len(PROMPT) - 1), len(PROMPT))
    (res,) = choose(causal, cache, [query])
    assert res.candidate == CHOICE.candidates[worst]
    want = [p + b for p, b in zip(plain, bonus, strict=True)]
    assert res.logprobs == pytest.approx(tuple(want), abs=1e-4)


def test_a_single_candidate_is_taken_without_a_pass(causal: Transformer) -> None:
    only = ClosedChoice(CHOICE.candidates[:1])
    cache = _cached(causal, PROMPT)
    (res,) = choose(causal, cache, [ChoiceQuery(0, only, _segment([], 8), 8)])
    assert res.candidate == only.candidates[0] and res.confidence == 1.0


def test_which_models_and_configs_use_choices(causal: Transformer) -> None:
    assert supports_choices(causal)
    assert supports_choices(make_model(make_config("block", logits_shift=1)))
    assert not supports_choices(make_model(make_config("block")))  # predicts masked positions
    on = GenerationConfig(score_choices=True)
    priors = choice_prior_list(causal, [PROMPT, None], [PROMPT, PROMPT], on, None)
    assert isinstance(priors[0], ChoicePrior) and priors[1] is None
    assert choice_prior_list(causal, [PROMPT], [PROMPT], GenerationConfig(), None) == [None]
    sampled = GenerationConfig(score_choices=True, temperature=0.7)
    assert choice_prior_list(causal, [PROMPT], [PROMPT], sampled, None) == [None]
    with pytest.raises(ValueError, match="2 choice priors for 1 prompts"):
        choice_prior_list(causal, [PROMPT, PROMPT], [PROMPT], on, None)
    with pytest.raises(ValueError, match="choice_prior_weight"):
        GenerationConfig(choice_prior_weight=-1.0)


@pytest.mark.parametrize("attention", ["causal", "block"])
def test_a_prior_reads_the_prompt_it_shares_with_the_request_from_the_requests_cache(
    attention: str,
) -> None:
    model = make_model(make_config(attention, max_seq_len=64, logits_shift=1), seed=5, peak=2.0)
    request = [9, 17, 33, 41, 12, 50, 7, 64, 3]  # the conversation with the request
    prior_prompt = [9, 17, 33, 41, 12, 64]  # the same conversation without it
    other = [70, 71, 72]
    # A left-padded batch cache holding both requests' prompts (but the last token).
    width = len(request) - 1
    ids = torch.tensor([request[:-1], [0] * (width - 2) + other[:2]])
    valid = torch.tensor([[True] * width, [False] * (width - 2) + [True, True]])
    pos = torch.tensor([list(range(width)), [0] * (width - 2) + [0, 1]])
    cache = KVCache(model.config, 2, width)
    with torch.no_grad():
        model(ids, positions=pos, block_ids=pos, valid=valid, cache=cache, commit_len=width)
    shared = ChoicePrior(model, prior_prompt, request)
    assert shared.shared == 5  # [9, 17, 33, 41, 12]
    shared.extend([40])
    fresh = ChoicePrior(model, prior_prompt)
    fresh.extend([40])
    got = shared.logprobs(CHOICE, [41], (cache, 0))
    want = fresh.logprobs(CHOICE, [41])
    assert got == pytest.approx(want, abs=1e-4)
    ref = [_reference(model, [*prior_prompt, 40, 41], c.scored) for c in CHOICE.candidates]
    assert got == pytest.approx(ref, abs=1e-4)
    assert (shared.passes, fresh.passes) == (1, 2)  # no pass over the shared prompt
    assert shared.query(CHOICE, [41])[0] is shared.query(CHOICE)[0]  # read once
    # Padding before a row's prompt is skipped: row 1 shares only its own tokens.
    padded = ChoicePrior(model, [70, 71, 5], other)
    values = padded.logprobs(CHOICE, [], (cache, 1))
    assert values == pytest.approx(
        [_reference(model, [70, 71, 5], c.scored) for c in CHOICE.candidates], abs=1e-4
    )
