"""Autoregressive decoding: exact cache, batching, determinism, forced tokens, errors."""

from __future__ import annotations

import pytest
import torch
from engine_testing import make_config, make_model

from agentflow.engine.autoregressive import ARDecoder, causal_forward
from agentflow.engine.decode_batch import left_pad
from agentflow.engine.errors import ContextLengthError
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import Transformer

PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [20, 21, 22, 23, 24]]


@torch.no_grad()
def naive_greedy(model: Transformer, prompt: list[int], n: int) -> list[int]:
    """Greedy decoding that re-runs the whole sequence every token, without a cache."""
    seq = list(prompt)
    for _ in range(n):
        logits = model(torch.tensor([seq]))[0, -1]
        tok = int(logits.argmax())
        if tok == model.config.end_token_id:
            break
        seq.append(tok)
    return seq[len(prompt) :]


def test_cached_greedy_equals_naive_greedy(causal_model: Transformer) -> None:
    dec = ARDecoder(causal_model)
    for prompt in PROMPTS:
        res = dec.generate(prompt, GenerationConfig(max_new_tokens=12))
        assert res.sequences[0] == naive_greedy(causal_model, prompt, 12)
        assert res.stats.nfe == len(res.sequences[0])  # prefill + one pass per token but the last


def test_batch_equals_one_by_one(causal_model: Transformer) -> None:
    dec = ARDecoder(causal_model)
    cfg = GenerationConfig(max_new_tokens=10)
    batch = dec.generate(PROMPTS, cfg)
    assert batch.sequences == [dec.generate(p, cfg).sequences[0] for p in PROMPTS]


def test_sampling_is_reproducible_with_a_seed(causal_model: Transformer) -> None:
    dec = ARDecoder(causal_model)
    cfg = GenerationConfig(max_new_tokens=10, temperature=3.0, seed=7)
    first = dec.generate(PROMPTS, cfg).sequences
    assert dec.generate(PROMPTS, cfg).sequences == first
    other = GenerationConfig(max_new_tokens=10, temperature=3.0, seed=8)
    assert dec.generate(PROMPTS, other).sequences != first


def test_chunked_causal_forward_equals_one_pass(causal_model: Transformer) -> None:
    seg, _ = left_pad(PROMPTS, 0, torch.device("cpu"))
    with torch.no_grad():
        full = causal_forward(causal_model, ARDecoder(causal_model).new_cache(3, 4), seg)
        cache = ARDecoder(causal_model).new_cache(3, 2)  # grows on demand
        a = causal_forward(causal_model, cache, seg.slice(0, 3))
        b = causal_forward(causal_model, cache, seg.slice(3))
    valid = seg.valid
    torch.testing.assert_close(torch.cat((a, b), 1)[valid], full[valid], atol=1e-5, rtol=1e-5)
    cache.truncate(3)
    assert cache.length == 3 and not cache.valid[:, 3:].any()


@pytest.mark.parametrize("jump", [False, True])
def test_constraint_forced_tokens_share_a_forward(
    causal_model: Transformer, fixed_answer, jump: bool
) -> None:
    target = [40, 41, 42, 43, 44]
    cons = [None, fixed_answer(target, jump=jump)]
    streamed: dict[int, list[int]] = {}
    res = ARDecoder(causal_model).generate(
        PROMPTS[:2],
        GenerationConfig(max_new_tokens=8),
        constraints=cons,
        on_block=lambda r, t: streamed.setdefault(r, []).extend(t),
    )
    assert res.sequences[1] == target and cons[1].done
    assert streamed[1] == target and streamed[0] == res.sequences[0]
    assert res.stats.rows[1].finished
    if jump:
        assert res.stats.rows[1].forced_tokens == len(target)
        assert res.stats.rows[1].nfe == 1  # the whole answer rides along with the prefill
    else:
        assert res.stats.rows[1].forced_tokens == 0
        assert res.stats.rows[1].nfe == len(target) + 1
    assert (
        res.sequences[0]
        == ARDecoder(causal_model)
        .generate(PROMPTS[0], GenerationConfig(max_new_tokens=8))
        .sequences[0]
    )


def test_errors(causal_model: Transformer) -> None:
    with pytest.raises(ValueError, match="bidirectional"):
        ARDecoder(make_model(make_config("bidirectional")))
    with pytest.raises(ContextLengthError):
        ARDecoder(causal_model).generate([3] * 300)


def test_constraint_over_a_smaller_vocabulary_than_the_logits(
    causal_model: Transformer, fixed_answer
) -> None:
    # LLaDA-style checkpoints have more logit columns than tokenizer entries.
    cons = fixed_answer([40, 41, 42], vocab=64)
    res = ARDecoder(causal_model).generate(
        PROMPTS[0], GenerationConfig(max_new_tokens=8), constraints=cons
    )
    assert res.sequences[0] == [40, 41, 42] and cons.done


def test_any_end_token_of_the_model_stops_a_row() -> None:
    # A chat checkpoint ends a turn with <|eot_id|> as well as <|end_of_text|>.
    plain = ARDecoder(make_model(make_config("causal"), seed=1))
    cfg = GenerationConfig(max_new_tokens=12)
    free = plain.generate(PROMPTS[0], cfg).sequences[0]
    stop = free[4]
    chat = ARDecoder(make_model(make_config("causal", extra_end_token_ids=(stop,)), seed=1))
    res = chat.generate(PROMPTS[0], cfg)
    assert res.sequences[0] == free[: free.index(stop)]
    assert res.stats.rows[0].finished
