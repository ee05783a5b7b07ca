"""The training layouts must match what the sampler and the AR decoder see at inference."""

from __future__ import annotations

import itertools

import pytest
import torch

from agentflow.engine.model import ModelConfig, Transformer
from agentflow.engine.training.objectives import (
    IGNORE,
    Batch,
    Example,
    autoregressive_batch,
    diffusion_batch,
    pad_target,
)

MASK, END, PAD = 1, 2, 0
B = 4


def _model(attention: str) -> Transformer:
    cfg = ModelConfig(
        vocab_size=40,
        dim=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=64,
        attention=attention,
        block_length=B,  # type: ignore[arg-type]
    )
    model = Transformer(cfg)
    model.init_weights(3)
    return model.eval()


def test_pad_target_closes_with_end_up_to_a_block_multiple() -> None:
    assert pad_target([5, 6, 7], END, 4) == [5, 6, 7, END]
    assert pad_target([5, 6, 7, 8], END, 4) == [5, 6, 7, 8, END, END, END, END]


def test_noised_blocks_see_exactly_what_inference_sees() -> None:
    """Hidden states of each noised block equal a block-id forward of prompt + clean past + that block."""
    model = _model("block")
    examples = [
        Example([9, 10, 11, 12, 13], [20, 21, 22, 23, 24, 25, 26]),
        Example([14, 15], [30, 31]),
    ]
    gen = torch.Generator().manual_seed(0)
    batch = diffusion_batch(
        examples,
        block_length=B,
        mask_id=MASK,
        end_id=END,
        pad_id=PAD,
        generator=gen,
        noise_copies=2,
    )
    with torch.no_grad():
        hidden = model(
            batch.tokens, positions=batch.positions, attn_mask=batch.attn_mask, hidden_only=True
        )
    for row, ex in enumerate(examples):
        target = pad_target(ex.target, END, B)
        p, n = len(ex.prompt), len(target)
        noised_start = p + n - B
        for copy in range(2):
            for b in range(n // B):
                start = noised_start + copy * n + b * B
                noised = batch.tokens[row, start : start + B]
                labels = batch.labels[row, start : start + B]
                # masked positions carry the mask token and are scored with the clean token
                assert torch.equal(noised == MASK, labels != IGNORE)
                assert (
                    labels[labels != IGNORE]
                    == torch.tensor(target[b * B : (b + 1) * B])[labels != IGNORE]
                ).all()
                seq = torch.tensor([*ex.prompt, *target[: b * B], *noised.tolist()]).unsqueeze(0)
                block_ids = torch.tensor(
                    list(range(p)) + [p + i // B for i in range(b * B)] + [p + b] * B
                ).unsqueeze(0)
                with torch.no_grad():
                    ref = model(seq, block_ids=block_ids, hidden_only=True)[0, -B:]
                torch.testing.assert_close(
                    hidden[row, start : start + B], ref, atol=1e-5, rtol=1e-4
                )


def test_shifted_batches_score_each_token_at_the_position_before_it() -> None:
    """logits_shift=1: masked tokens are scored one position earlier in their noised copy,
    and each block's first token once, at the clean token before the block."""
    ex = Example([9, 10, 11], [20, 21, 22, 23, 24, 25])
    target = pad_target(ex.target, END, B)
    full = [*ex.prompt, *target]
    p, n, copies = len(ex.prompt), len(target), 3
    batch = diffusion_batch(
        [ex],
        block_length=B,
        mask_id=MASK,
        end_id=END,
        pad_id=PAD,
        generator=torch.Generator().manual_seed(4),
        noise_copies=copies,
        logits_shift=1,
    )
    tokens, positions, labels = batch.tokens[0], batch.positions[0], batch.labels[0]
    scored = (labels != IGNORE).nonzero().flatten().tolist()
    for i in scored:  # the label is the token that follows position i
        assert int(labels[i]) == full[int(positions[i]) + 1]
    clean = [i for i in scored if i < p + n - B]
    assert [int(positions[i]) + 1 - p for i in clean] == list(range(0, n, B))
    noised_start = p + n - B
    for c in range(copies):
        start = noised_start + c * n
        masked = [j for j in range(n) if int(tokens[start + j]) == MASK and j % B]
        assert [i - start + 1 for i in scored if start <= i < start + n] == masked


def test_shifted_diffusion_refuses_other_shifts() -> None:
    with pytest.raises(ValueError, match="logits_shift"):
        diffusion_batch(
            [Example([3], [4])],
            block_length=B,
            mask_id=MASK,
            end_id=END,
            pad_id=PAD,
            generator=torch.Generator(),
            logits_shift=2,
        )


def test_every_noised_block_has_a_masked_position() -> None:
    gen = torch.Generator().manual_seed(1)
    ex = Example([3, 4], list(range(10, 30)))
    for _ in range(20):
        batch = diffusion_batch(
            [ex], block_length=B, mask_id=MASK, end_id=END, pad_id=PAD, generator=gen, min_rate=0.0
        )
        scored = (batch.labels[0] != IGNORE).view(-1)[-2 * 24 :].view(-1, B)
        assert scored.any(dim=1).all()


def test_autoregressive_batch_scores_only_the_target_turn_and_end() -> None:
    batch = autoregressive_batch(
        [Example([5, 6, 7], [8, 9]), Example([5], [8])], end_id=END, pad_id=PAD
    )
    assert batch.tokens[0].tolist() == [5, 6, 7, 8, 9, END]
    assert batch.labels[0].tolist() == [IGNORE, IGNORE, 8, 9, END, IGNORE]
    assert batch.labels[1].tolist() == [8, END, IGNORE, IGNORE, IGNORE, IGNORE]
    assert batch.valid[1].tolist() == [True, True, True, False, False, False]
    model = _model("causal")
    with torch.no_grad():
        out = model(
            batch.tokens, positions=batch.positions, block_ids=batch.block_ids, valid=batch.valid
        )
    assert torch.isfinite(out).all()


def test_autoregressive_position_gaps_stretch_distances_inside_the_prompt() -> None:
    examples = [Example(list(range(10, 30)), [8, 9]), Example([5, 6, 7], [8])]

    def batch(rate: float, seed: int = 3) -> Batch:
        return autoregressive_batch(
            examples,
            end_id=END,
            pad_id=PAD,
            position_gap=100,
            gap_rate=rate,
            max_positions=40,
            generator=torch.Generator().manual_seed(seed),
        )

    plain, gapped = batch(0.0), batch(1.0)
    # Same tokens and labels: only the distances change.
    assert torch.equal(gapped.tokens, plain.tokens)
    assert torch.equal(gapped.labels, plain.labels)
    width = plain.tokens.shape[1]
    assert torch.equal(plain.positions, torch.arange(width).expand(2, width))  # rate 0: no gap
    for row, ex in enumerate(examples):
        pos = gapped.positions[row].tolist()
        steps = [b - a for a, b in itertools.pairwise(pos)]
        jumps = [i + 1 for i, d in enumerate(steps) if d != 1]
        assert len(jumps) == 1 and 1 <= jumps[0] < len(ex.prompt)  # one gap, inside the prompt
        assert steps[jumps[0] - 1] > 1
        assert pos[len(ex.prompt) + len(ex.target)] < 40  # the <|end|> label stays in range
        assert torch.equal(gapped.block_ids[row], gapped.positions[row])  # still causal
    for seed in range(20):  # the short row's padding shifts too and stays in range
        assert int(batch(1.0, seed).positions.max()) < 40
    assert torch.equal(batch(1.0).positions, gapped.positions)  # reproducible
    with pytest.raises(ValueError, match="gap_rate"):
        autoregressive_batch(examples, end_id=END, pad_id=PAD, position_gap=10, gap_rate=1.5)


def test_diffusion_position_gaps_keep_tokens_labels_and_visibility() -> None:
    example = [Example(list(range(9, 21)), [20, 21, 22, 23, 24, 25, 26])]

    def batch(gap: int) -> Batch:
        return diffusion_batch(
            example,
            block_length=B,
            mask_id=MASK,
            end_id=END,
            pad_id=PAD,
            generator=torch.Generator().manual_seed(4),
            logits_shift=1,
            position_gap=gap,
            gap_rate=1.0,
            max_positions=64,
        )

    plain, gapped = batch(0), batch(40)
    assert torch.equal(gapped.tokens, plain.tokens)  # the noise is drawn before the gap
    assert torch.equal(gapped.labels, plain.labels)
    assert torch.equal(gapped.attn_mask, plain.attn_mask)
    shift = (gapped.positions - plain.positions)[0].tolist()
    start = shift.index(next(d for d in shift if d))
    assert 1 <= start < len(example[0].prompt)  # the gap opens inside the prompt
    assert set(shift[:start]) == {0} and len(set(shift[start:])) == 1  # one gap, kept after
    assert int(gapped.positions.max()) < 64
