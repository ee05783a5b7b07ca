"""The training layouts must match what the sampler and the AR decoder see at inference."""

from __future__ import annotations

import pytest
import torch

from agentflow.engine.model import ModelConfig, Transformer
from agentflow.engine.training.objectives import (
    IGNORE,
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
