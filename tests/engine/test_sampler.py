"""Block-diffusion sampler: exact cache, batching, determinism, stopping, constraints, errors."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
import torch
from engine_testing import make_config, make_model

from agentflow.engine import sampler
from agentflow.engine.errors import ContextLengthError, InfeasibleConstraintError
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import KVCache, Transformer
from agentflow.engine.sampler import DiffusionEngine

PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [20, 21, 22, 23, 24]]


class EndAfter(Transformer):
    """A model that strongly predicts the end token at positions >= ``end_position``.

    ``project`` sees only hidden states; the sampler projects the last positions
    of the forward input (the block), so the positions of those are looked up.
    """

    end_position = 10**9
    _positions: torch.Tensor

    def forward(
        self, tokens: torch.Tensor, *, hidden_only: bool = False, **kw: object
    ) -> torch.Tensor:  # type: ignore[override]
        self._positions = kw["positions"]  # type: ignore[assignment]
        hidden = super().forward(tokens, hidden_only=True, **kw)  # type: ignore[arg-type]
        return hidden if hidden_only else self.project(hidden)

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = super().project(hidden)
        positions = self._positions[:, -hidden.shape[1] :]
        logits[..., self.config.end_token_id] += (positions >= self.end_position).float() * 1e4
        return logits


@torch.no_grad()
def reference_decode(model: Transformer, prompt: list[int], cfg: GenerationConfig) -> list[int]:
    """Greedy block diffusion of one row without any cache: every step forwards the whole sequence."""
    mc = model.config
    p = len(prompt)
    seq, ids = list(prompt), list(range(p))
    out: list[int] = []
    k = 0
    while len(out) < cfg.max_new_tokens:
        length = min(cfg.block_length, cfg.max_new_tokens - len(out))
        blk = [mc.mask_token_id] * length
        masked = [True] * length
        step = 0
        while any(masked):
            toks = torch.tensor([seq + blk])
            pos = torch.arange(toks.shape[1]).unsqueeze(0)
            bid = torch.tensor([ids + [p + k] * length])
            logits = model(toks, positions=pos, block_ids=bid)[0, len(seq) :].float()
            logits[:, mc.mask_token_id] = float("-inf")
            conf, tok = torch.softmax(logits, -1).max(-1)
            cand = sorted((i for i in range(length) if masked[i]), key=lambda i: -float(conf[i]))
            need = max(1, math.ceil(len(cand) / max(cfg.steps - step, 1)))
            if cfg.threshold is not None:
                need = max(need, sum(float(conf[i]) >= cfg.threshold for i in cand))
            for i in cand[:need]:
                blk[i], masked[i] = int(tok[i]), False
            if mc.end_token_id in [blk[i] for i in range(length) if not masked[i]]:
                first = min(i for i in range(length) if not masked[i] and blk[i] == mc.end_token_id)
                for i in range(first + 1, length):
                    if masked[i]:
                        blk[i], masked[i] = mc.end_token_id, False
            step += 1
        seq += blk
        ids += [p + k] * length
        k += 1
        if mc.end_token_id in blk:
            return out + blk[: blk.index(mc.end_token_id)]
        out += blk
    return out


@pytest.mark.parametrize("threshold", [0.6, None])
def test_cached_decoding_equals_uncached_reference(
    block_model: Transformer, threshold: float | None
) -> None:
    cfg = GenerationConfig(max_new_tokens=10, block_length=4, steps=3, threshold=threshold)
    engine = DiffusionEngine(block_model)
    for prompt in PROMPTS:
        assert engine.generate(prompt, cfg).sequences[0] == reference_decode(
            block_model, prompt, cfg
        )


@pytest.mark.parametrize(
    ("attention", "shift"), [("block", 0), ("bidirectional", 0), ("bidirectional", 1)]
)
def test_batch_equals_one_by_one(attention: str, shift: int) -> None:
    model = make_model(make_config(attention, logits_shift=shift), seed=3)  # type: ignore[arg-type]
    engine = DiffusionEngine(model)
    cfg = GenerationConfig(max_new_tokens=9, block_length=4, steps=4, threshold=0.5)
    batch = engine.generate(PROMPTS, cfg)
    singles = [engine.generate(p, cfg) for p in PROMPTS]
    assert batch.sequences == [s.sequences[0] for s in singles]
    for row, single in zip(batch.stats.rows, singles, strict=True):
        assert row.tokens == single.stats.rows[0].tokens
        assert row.nfe == single.stats.rows[0].nfe


def test_rows_whose_block_is_done_sit_out_the_blocks_later_passes(fixed_answer) -> None:
    model = make_model(make_config("block"), seed=3)
    engine = DiffusionEngine(model)
    cfg = GenerationConfig(max_new_tokens=8, block_length=4, steps=4, threshold=None)
    sizes: list[int] = []
    hook = model.register_forward_hook(lambda m, args, out: sizes.append(args[0].shape[0]))
    try:
        # Row 0 is forced whole, block by block, and stays in the batch (its answer outlasts
        # the budget); row 1 takes four passes a block.
        cons = [fixed_answer(list(range(10, 18)), jump=True), None]
        batch = engine.generate(PROMPTS[:2], cfg, constraints=cons)
    finally:
        hook.remove()
    assert 1 in sizes  # passes that read row 1 alone
    singles = [
        engine.generate(
            [PROMPTS[0]], cfg, constraints=[fixed_answer(list(range(10, 18)), jump=True)]
        ),
        engine.generate([PROMPTS[1]], cfg),
    ]
    assert batch.sequences == [s.sequences[0] for s in singles]


def test_a_shifted_block_model_with_ar_weights_decodes_like_the_ar_model() -> None:
    """A block model with ``logits_shift=1`` started from causal weights (the embedded
    drafter's recipe) predicts a block's first position from the clean token before
    it: with one-token blocks that is exactly autoregressive decoding."""
    from agentflow.engine.autoregressive import ARDecoder

    ar = make_model(make_config("causal", end_token_id=None), seed=4)
    dlm = make_model(make_config("block", end_token_id=None, logits_shift=1), seed=6)
    dlm.load_state_dict(ar.state_dict())
    cfg = GenerationConfig(max_new_tokens=10, block_length=1, steps=1, threshold=None)
    expected = ARDecoder(ar).generate(PROMPTS, cfg).sequences
    assert all(1 not in row for row in expected)  # the sampler never answers the mask token
    assert DiffusionEngine(dlm).generate(PROMPTS, cfg).sequences == expected


def test_prefix_order_commits_confident_runs_and_the_model_sets_the_default() -> None:
    model = make_model(make_config("block", end_token_id=None), seed=2)
    engine = DiffusionEngine(model)
    sure = GenerationConfig(max_new_tokens=8, block_length=4, steps=4, threshold=0.0)
    # every position is confident enough: one forward pass per block, as with "confidence"
    assert engine.generate(PROMPTS[0], replace(sure, order="prefix")).stats.nfe == 2
    unsure = replace(sure, threshold=None, order="prefix")
    assert engine.generate(PROMPTS[0], unsure).stats.nfe == 8  # one per step, left to right
    default = engine.generate(PROMPTS[0], replace(unsure, order=None)).sequences
    model.config.commit_order = "prefix"
    assert engine.generate(PROMPTS[0], replace(unsure, order=None)).sequences == (
        engine.generate(PROMPTS[0], unsure).sequences
    )
    assert default == engine.generate(PROMPTS[0], replace(unsure, order="confidence")).sequences
    with pytest.raises(ValueError, match="order"):
        GenerationConfig(order="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="commit_order"):
        make_config("block", commit_order="random")


def test_greedy_is_deterministic_and_seeded_sampling_reproducible(block_model: Transformer) -> None:
    engine = DiffusionEngine(block_model)
    greedy = GenerationConfig(max_new_tokens=8, block_length=4, steps=4)
    assert engine.generate(PROMPTS, greedy).sequences == engine.generate(PROMPTS, greedy).sequences
    hot = GenerationConfig(max_new_tokens=8, block_length=4, steps=4, temperature=5.0, seed=11)
    first = engine.generate(PROMPTS[0], hot).sequences
    assert engine.generate(PROMPTS[0], hot).sequences == first
    other = GenerationConfig(max_new_tokens=8, block_length=4, steps=4, temperature=5.0, seed=12)
    assert engine.generate(PROMPTS[0], other).sequences != first


def test_top_p_restricts_samples_to_the_nucleus(block_model: Transformer) -> None:
    engine = DiffusionEngine(block_model)
    greedy = engine.generate(
        PROMPTS[0], GenerationConfig(max_new_tokens=8, block_length=8, steps=8)
    )
    # A tiny nucleus keeps only the top token: sampling at any temperature equals greedy.
    tight = GenerationConfig(
        max_new_tokens=8, block_length=8, steps=8, temperature=3.0, top_p=1e-6, seed=1
    )
    assert engine.generate(PROMPTS[0], tight).sequences == greedy.sequences


def test_steps_cap_and_threshold_set_the_number_of_forward_passes(block_model: Transformer) -> None:
    engine = DiffusionEngine(block_model)
    fixed = engine.generate(
        PROMPTS[0], GenerationConfig(max_new_tokens=16, block_length=8, steps=2, threshold=None)
    )
    assert fixed.stats.nfe == 2 * 2 and fixed.stats.tokens == 16
    assert fixed.stats.tokens_per_forward == pytest.approx(4.0)
    one_step = engine.generate(
        PROMPTS[0], GenerationConfig(max_new_tokens=16, block_length=8, steps=8, threshold=0.0)
    )
    assert one_step.stats.nfe == 2
    serial = engine.generate(
        PROMPTS[0], GenerationConfig(max_new_tokens=8, block_length=8, steps=8, threshold=None)
    )
    assert serial.stats.nfe == 8


def test_stops_at_end_token_and_streams_blocks() -> None:
    cfg_model = make_config("block")
    model = EndAfter(cfg_model)
    model.load_state_dict(make_model(cfg_model).state_dict())
    model.eval()
    model.end_position = 10  # prompt of 3 tokens: 7 answer tokens, then end
    streamed: dict[int, list[int]] = {}
    res = DiffusionEngine(model).generate(
        [PROMPTS[1], PROMPTS[0]],
        GenerationConfig(max_new_tokens=32, block_length=4, steps=4),
        on_block=lambda row, toks: streamed.setdefault(row, []).extend(toks),
    )
    assert [len(s) for s in res.sequences] == [7, 3]
    assert all(2 not in s for s in res.sequences)
    assert [streamed[0], streamed[1]] == res.sequences
    assert all(r.finished for r in res.stats.rows)
    assert res.stats.tokens == 10
    # Row 1 finished in its first block, row 0 in its second: the batch needs only 2 blocks.
    assert res.stats.rows[1].nfe < res.stats.rows[0].nfe


def test_text_prompts_round_trip_through_the_tokenizer(tokenizer, model_factory) -> None:
    model = model_factory("block", vocab_size=tokenizer.vocab_size)
    res = DiffusionEngine(model, tokenizer).generate(
        "Where is order 58213?", GenerationConfig(max_new_tokens=6, block_length=3, steps=3)
    )
    assert res.text == tokenizer.decode(res.sequences[0])
    assert res.stats.rows[0].prompt_tokens == len(tokenizer.encode("Where is order 58213?"))


@pytest.mark.parametrize("jump", [False, True])
def test_constraint_plumbing(block_model: Transformer, fixed_answer, jump: bool) -> None:
    target = [40, 41, 42, 43, 44, 45]
    cons = [fixed_answer(target, jump=jump), None]
    res = DiffusionEngine(block_model).generate(
        [PROMPTS[0], PROMPTS[1]],
        GenerationConfig(max_new_tokens=16, block_length=4, steps=4),
        constraints=cons,
    )
    assert res.sequences[0] == target
    assert res.stats.rows[0].finished and cons[0].done
    assert "finish_block" in cons[0].calls
    if jump:
        # Every token is forced: the constrained row never needs a forward pass.
        assert res.stats.rows[0].forced_tokens == len(target)
        assert res.stats.rows[0].nfe == 0
        assert "propose" not in cons[0].calls
    else:
        assert res.stats.forced_tokens == 0
        assert res.stats.rows[0].nfe >= 2
    # The unconstrained row is unaffected by its neighbour's constraint.
    alone = DiffusionEngine(block_model).generate(
        PROMPTS[1], GenerationConfig(max_new_tokens=16, block_length=4, steps=4)
    )
    assert res.sequences[1] == alone.sequences[0]


def _forwarded_lengths(model: Transformer) -> list[int]:
    """Records the number of tokens of every forward pass of ``model``."""
    lengths: list[int] = []
    model.register_forward_pre_hook(lambda _m, args: lengths.append(args[0].shape[1]))
    return lengths


@pytest.mark.parametrize("shift", [0, 1])
def test_block_prefix_cache_shortens_passes_and_keeps_blocks_exact(
    model_factory, fixed_answer, monkeypatch: pytest.MonkeyPatch, shift: int
) -> None:
    """With ``cache_block_prefix``, later steps of a block forward only the positions
    from the first masked one on; a finished block still enters the cache exactly, so
    the cache a run leaves (every block but the last) equals the run without it."""
    targets = [[40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50], [60, 61, 62, 63, 64, 65, 66]]
    made: list[KVCache] = []

    class RecordedCache(KVCache):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(sampler, "KVCache", RecordedCache)
    lengths, outputs = [], []
    for flag in (False, True):
        model = model_factory("block", seed=5, logits_shift=shift)
        seen = _forwarded_lengths(model)
        engine = DiffusionEngine(model)
        cfg = GenerationConfig(
            max_new_tokens=16, block_length=8, steps=8, threshold=None, cache_block_prefix=flag
        )
        res = engine.generate(
            [PROMPTS[0], PROMPTS[2]],
            cfg,
            constraints=[fixed_answer(t, jump=False) for t in targets],
        )
        outputs.append(res.sequences)
        lengths.append(seen)
    assert outputs[0] == outputs[1] == targets  # the constraint fixes the tokens
    plain, cached = lengths
    assert len(plain) == len(cached)  # one token per step either way (threshold None)
    assert sum(cached) < sum(plain)
    assert cached[0] == plain[0]  # the prompt pass
    before, after = made
    assert before.length == after.length
    n = before.length
    assert torch.equal(before.valid[:, :n], after.valid[:, :n])
    assert torch.allclose(before.k[:, :, :, :n], after.k[:, :, :, :n], atol=1e-6)
    assert torch.allclose(before.v[:, :, :, :n], after.v[:, :, :, :n], atol=1e-6)


def test_prompt_longer_than_context_raises(block_model: Transformer) -> None:
    engine = DiffusionEngine(block_model)
    too_long = list(range(3, 3 + 10)) * 26  # 260 > max_seq_len 256
    with pytest.raises(ContextLengthError) as info:
        engine.generate(too_long, GenerationConfig(max_new_tokens=4))
    assert info.value.prompt_tokens == 260 and info.value.max_tokens == 256
    assert "260" in str(info.value) and "256" in str(info.value)


def test_generation_is_clamped_to_the_context(block_model: Transformer) -> None:
    prompt = [7] * 250
    res = DiffusionEngine(block_model).generate(prompt, GenerationConfig(max_new_tokens=64))
    assert len(res.sequences[0]) <= 6


def test_bad_inputs_are_rejected(block_model: Transformer, causal_model: Transformer) -> None:
    with pytest.raises(ValueError, match="causal"):
        DiffusionEngine(causal_model)
    engine = DiffusionEngine(block_model)
    with pytest.raises(ValueError, match="tokenizer"):
        engine.generate("text without a tokenizer")
    with pytest.raises(ValueError, match="empty"):
        engine.generate([[5], []])
    with pytest.raises(ValueError, match="block_length"):
        GenerationConfig(block_length=0)
    with pytest.raises(ValueError, match="threshold"):
        GenerationConfig(threshold=1.5)


def test_a_constraint_that_commits_nothing_is_infeasible(
    block_model: Transformer, fixed_answer
) -> None:
    stuck = fixed_answer([40, 41])
    stuck.commit = lambda *args, **kwargs: []  # refuses every proposal
    with pytest.raises(InfeasibleConstraintError, match="block 0"):
        DiffusionEngine(block_model).generate(
            PROMPTS[0], GenerationConfig(max_new_tokens=8, block_length=4), constraints=stuck
        )


def test_prompts_may_be_tensors(block_model: Transformer) -> None:
    engine = DiffusionEngine(block_model)
    cfg = GenerationConfig(max_new_tokens=4, block_length=4, steps=4)
    expected = engine.generate(PROMPTS[0], cfg).sequences
    assert engine.generate(torch.tensor(PROMPTS[0]), cfg).sequences == expected
    with pytest.raises(TypeError, match="token ids"):
        engine.generate([[5, 6.5]], cfg)


@pytest.mark.parametrize("shift", [0, 1])
def test_bidirectional_refresh_equals_a_full_forward_per_block(shift: int) -> None:
    """With one step per block, the refreshed prefix cache is exact: compare with full forwards."""
    model = make_model(make_config("bidirectional", logits_shift=shift), seed=5)
    mc = model.config
    prompt, length, blocks = PROMPTS[0], 4, 3
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(blocks):
            logits = model(torch.tensor([[*seq, *[mc.mask_token_id] * length]]))[0].float()
            logits = logits[len(seq) - shift : len(seq) - shift + length]
            logits[:, mc.mask_token_id] = float("-inf")
            seq += logits.argmax(-1).tolist()
    expected = seq[len(prompt) :]
    if mc.end_token_id in expected:
        expected = expected[: expected.index(mc.end_token_id)]
    cfg = GenerationConfig(max_new_tokens=length * blocks, block_length=length, threshold=0.0)
    res = DiffusionEngine(model).generate(prompt, cfg)
    assert res.sequences[0] == expected and len(expected) > length
    assert res.stats.nfe == min(blocks, len(expected) // length + 1)


def test_any_end_token_of_the_model_stops_a_row() -> None:
    cfg = GenerationConfig(max_new_tokens=16, block_length=4, steps=4)
    free = DiffusionEngine(make_model(make_config("block"))).generate(PROMPTS[0], cfg)
    stop = free.sequences[0][5]
    chat = make_model(make_config("block", extra_end_token_ids=(stop,)))
    res = DiffusionEngine(chat).generate(PROMPTS[0], cfg)
    out = res.sequences[0]
    assert stop not in out and res.stats.rows[0].finished
    assert len(out) < len(free.sequences[0]) == 16
