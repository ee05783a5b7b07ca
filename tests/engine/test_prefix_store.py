"""The prefix store: a prompt's cached keys and values serve later prompts that extend it."""

from __future__ import annotations

import pytest
import torch
from engine_testing import make_config, make_model

from agentflow.engine.generation import GenerationConfig
from agentflow.engine.hybrid import HybridEngine
from agentflow.engine.hybrid_options import HybridOptions
from agentflow.engine.model import KVCache, Transformer
from agentflow.engine.prefix_store import PrefixStore


def _read(model: Transformer, prompt: list[int]) -> KVCache:
    """A single-row cache holding ``prompt`` (one forward pass)."""
    cache = KVCache(model.config, 1, 128)
    with torch.inference_mode():
        model(torch.tensor([prompt]), cache=cache, commit_len=len(prompt))
    return cache


def _prompt(n: int, seed: int) -> list[int]:
    return torch.randint(3, 96, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.fixture
def causal() -> Transformer:
    return make_model(make_config("causal"), seed=1)


def test_a_longer_prompt_reads_only_what_follows_the_stored_prefix(causal: Transformer) -> None:
    store = PrefixStore(causal, min_reuse=4)
    first = _prompt(20, 0)
    store.save(_read(causal, first), first)
    second = first + _prompt(9, 1)
    cache = KVCache(causal.config, 1, 128)
    n = store.fill(cache, second, len(second) - 1)
    assert n == len(first) and cache.length == n and store.reused_tokens == n
    with torch.inference_mode():
        pos = torch.arange(n, len(second))[None]
        rest = causal(
            torch.tensor([second[n:]]), positions=pos, block_ids=pos, cache=cache, commit_len=0
        )
        whole = causal(torch.tensor([second]))
    torch.testing.assert_close(rest[0], whole[0, n:], atol=1e-4, rtol=1e-4)


def test_the_reuse_stops_where_the_prompts_part_and_at_the_limit(causal: Transformer) -> None:
    store = PrefixStore(causal, min_reuse=4)
    first = _prompt(20, 0)
    store.save(_read(causal, first), first)
    other = [*first[:12], first[12] % 90 + 4, *first[13:]]  # differs at 12
    assert store.fill(KVCache(causal.config, 1, 64), other, 100) == 12
    assert store.fill(KVCache(causal.config, 1, 64), first, 19) == 19  # keep the last to read
    assert store.fill(KVCache(causal.config, 1, 64), first[:3] + other, 100) == 0  # under min
    with pytest.raises(ValueError, match="empty cache"):
        store.fill(_read(causal, first), first, 10)


def test_the_store_keeps_the_latest_prompts_and_drops_those_they_extend(
    causal: Transformer,
) -> None:
    store = PrefixStore(causal, capacity=2, min_reuse=4)
    a, b, c = _prompt(10, 1), _prompt(10, 2), _prompt(10, 3)
    for p in (a, b):
        store.save(_read(causal, p), p)
    store.save(_read(causal, a + c), a + c)  # extends a: replaces it
    assert len(store) == 2
    store.save(_read(causal, c), c)  # b is the least recently used
    assert store.fill(KVCache(causal.config, 1, 64), b + c, 100) == 0
    assert store.fill(KVCache(causal.config, 1, 64), a + c + b, 100) == 20


def test_bidirectional_models_and_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="bidirectional"):
        PrefixStore(make_model(make_config("bidirectional")))
    with pytest.raises(ValueError, match="capacity"):
        PrefixStore(make_model(make_config("causal")), capacity=0)
    with pytest.raises(ValueError, match="prompt_cache"):
        HybridOptions(prompt_cache=-1)


def test_hybrid_steps_that_extend_a_prompt_reuse_it_and_decode_the_same() -> None:
    """An agent's next step extends the previous prompt; an ``auto`` step re-done in
    hybrid mode reads its own prompt again. Both decoders copy the stored prefix and
    write what they write without the store."""
    drafter = make_model(make_config("block", logits_shift=1), seed=0)
    verifier = make_model(make_config("causal"), seed=1)
    cfg = GenerationConfig(max_new_tokens=10, block_length=4)
    stored = HybridEngine(drafter, verifier, options=HybridOptions(adaptive=False))
    plain = HybridEngine(drafter, verifier, options=HybridOptions(adaptive=False, prompt_cache=0))
    assert plain.drafter_prompts is None and plain.verifier_prompts is None
    # diffusion passes ("auto") and drafts read and fill one store
    assert stored.diffusion.prompts is stored.drafter_prompts
    assert plain.diffusion.prompts is None
    step = _prompt(24, 5)
    for k in range(3):
        for mode in ("hybrid", "auto"):
            got = stored.generate(step, cfg, mode=mode).sequences[0]
            assert got == plain.generate(step, cfg, mode=mode).sequences[0], (k, mode)
        step = step + got + _prompt(6, 10 + k)  # the action and a tool result
    assert stored.drafter_prompts is not None and stored.verifier_prompts is not None
    assert stored.drafter_prompts.reused_tokens > 0 and stored.verifier_prompts.reused_tokens > 0
    last = stored.generate(step, cfg, mode="hybrid").stats.rows[0]
    assert 0 < last.cached_tokens < len(step)  # the verifier's copied prompt


@pytest.mark.parametrize("decoder", ["diffusion", "diffusion-unshifted", "diffusion-pc", "ar"])
def test_batched_decoders_reuse_the_prompts_their_rows_extend(decoder: str) -> None:
    """Left-padded rows of different lengths: the cache is filled as far as every row's
    stored prefix reaches, and the output is what the decoder writes without the store."""
    from agentflow.engine.autoregressive import ARDecoder
    from agentflow.engine.sampler import DiffusionEngine

    if decoder.startswith("diffusion"):
        shift = 0 if decoder.endswith("unshifted") else 1
        model = make_model(make_config("block", logits_shift=shift), seed=0)
        stored, plain = DiffusionEngine(model), DiffusionEngine(model, prompt_cache=0)
    else:
        model = make_model(make_config("causal"), seed=1)
        stored, plain = ARDecoder(model), ARDecoder(model, prompt_cache=0)
    assert stored.prompts is not None and plain.prompts is None
    # diffusion-pc: a block's clean lead is cached during the block, then rolled back.
    cfg = GenerationConfig(
        max_new_tokens=8, block_length=4, cache_block_prefix=decoder.endswith("-pc")
    )
    rows = [_prompt(30, 20), _prompt(22, 21)]
    for k in range(3):
        res = stored.generate(rows, cfg)
        alone = plain.generate(rows, cfg)
        assert res.sequences == alone.sequences, k
        cached = [row.cached_tokens for row in res.stats.rows]
        assert all(0 < c < len(p) for c, p in zip(cached, rows, strict=True)) == (k > 0), cached
        assert all(row.cached_tokens == 0 for row in alone.stats.rows)
        rows = [r + g + _prompt(5, 30 + k) for r, g in zip(rows, res.sequences, strict=True)]
    assert stored.prompts.reused_tokens >= 2 * (30 + 22)  # both rows, from the second call on


def test_a_bidirectional_diffusion_model_reads_every_prompt_whole() -> None:
    from agentflow.engine.sampler import DiffusionEngine

    assert DiffusionEngine(make_model(make_config("bidirectional"))).prompts is None
