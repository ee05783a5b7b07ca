"""Training batches for the two objectives: block diffusion (BD3-LM style) and next token.

**Block diffusion.** A sample is ``prompt | target`` where the target (one assistant
turn, closed by ``<|end|>`` and padded with ``<|end|>`` to a multiple of the block
length B) is split into blocks aligned at its first token. The model input is::

    [ prompt (causal) | clean target blocks 0..K-2 | noised copy 1 | ... | noised copy C ]

Visibility (``True`` = the query may attend to the key):

- a prompt token sees the prompt causally;
- clean block b sees the whole prompt and clean blocks <= b (full inside a block);
- noised block b of copy c sees the whole prompt, clean blocks < b, and its own
  block b of copy c.

This is exactly what the sampler sees at inference: the prompt cached causally,
finished blocks cached with one block id each, the current block bidirectional.
Noised copies reuse the clean copy's positions (RoPE). Each (copy, block) gets its
own mask rate r ~ U(min_rate, 1); the loss is the plain mean cross-entropy over
masked positions (unweighted — more stable than the 1/r ELBO weights at this scale).
Several noised copies per prompt amortize the prompt's cost over more scored tokens.

**Shifted block diffusion** (``logits_shift=1``, as in Dream): the output at position
``i`` predicts token ``i + 1``, so a model initialized from an autoregressive
checkpoint keeps what it learned. Inside a noised block, token ``j`` is scored at
``j - 1`` of the same copy; a block's first token is scored once, at the clean
token before it (the prompt's last token or the previous clean block's last),
which cannot see the noised block — exactly what the sampler gives that position.

**Next token.** ``prompt | target <|end|>``, causal; loss on the target tokens only.

**Position gaps** (both objectives, ``OptimSettings.position_gap``): the corpus' samples
are at most ``data.max_len`` tokens, so a model trained on them never sees a query
and a key further apart than that; a real prompt with a long tool list is longer
(the demo's answer step: 595 tokens), and a small model's answers there fall
apart. With a gap, a share of the rows skip ahead by up to ``position_gap``
positions at a random point of the prompt: the tokens are the same, the distances
across the gap are longer — positional skip-wise training (PoSE, Zhu et al.
2023) with one skip. Rows without a gap keep their positions, so short prompts
stay in distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

IGNORE = -100


@dataclass(frozen=True)
class Example:
    """One tokenized sample: context ids and the target assistant turn (without ``<|end|>``)."""

    prompt: list[int]
    target: list[int]


@dataclass
class Batch:
    """Model inputs plus the positions to score and their labels."""

    tokens: Tensor  # [B, T]
    positions: Tensor  # [B, T]
    attn_mask: Tensor | None  # [B, T, T] or None (then block_ids/valid apply)
    valid: Tensor  # [B, T]
    labels: Tensor  # [B, T], IGNORE where not scored
    block_ids: Tensor | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.valid.sum())


def pad_target(target: Sequence[int], end_id: int, block_length: int) -> list[int]:
    """``target + <|end|>``, then ``<|end|>`` up to a multiple of ``block_length``."""
    out = [*target, end_id]
    out += [end_id] * (-len(out) % block_length)
    return out


def diffusion_batch(
    examples: Sequence[Example],
    *,
    block_length: int | Sequence[int],
    mask_id: int,
    end_id: int,
    pad_id: int,
    generator: torch.Generator,
    noise_copies: int = 2,
    min_rate: float = 0.1,
    logits_shift: int = 0,
    position_gap: int = 0,
    gap_rate: float = 0.0,
    max_positions: int | None = None,
) -> Batch:
    """A BD3-LM batch (see the module docstring for the layout).

    ``logits_shift=1`` scores each target token at the position before it (see
    "Shifted block diffusion" above). ``position_gap``, ``gap_rate`` and
    ``max_positions``: as in :func:`autoregressive_batch` ("Position gaps" above).

    With several ``block_length`` s, each example draws one (the sampler's block length
    is a decoding setting, so the model is trained for more than one).
    """
    if logits_shift not in (0, 1):
        raise ValueError(f"logits_shift must be 0 or 1, got {logits_shift}")
    check_position_gap(position_gap, gap_rate)
    choices = [block_length] if isinstance(block_length, int) else list(block_length)
    rows: list[dict[str, Tensor]] = []
    for ex in examples:
        pick = int(torch.randint(len(choices), (1,), generator=generator))
        block_length = choices[pick]
        target = torch.tensor(pad_target(ex.target, end_id, block_length))
        n, p = len(target), len(ex.prompt)
        n_blocks = n // block_length
        blk = torch.arange(n) // block_length
        clean_n = n - block_length  # the last clean block is never attended to
        parts_tok = [torch.tensor(ex.prompt, dtype=torch.long), target[:clean_n]]
        parts_pos = [torch.arange(p), p + torch.arange(clean_n)]
        kind = [torch.zeros(p, dtype=torch.long), torch.ones(clean_n, dtype=torch.long)]
        block = [torch.full((p,), -1), blk[:clean_n]]
        copy = [torch.full((p,), -1), torch.full((clean_n,), -1)]
        clean_labels = torch.full((p + clean_n,), IGNORE)
        if logits_shift:
            # each block's first token, scored at the clean token just before it
            firsts = torch.arange(n_blocks) * block_length
            clean_labels[p - 1 + firsts] = target[firsts]
        labels = [clean_labels]
        for c in range(noise_copies):
            rate = min_rate + (1 - min_rate) * torch.rand(n_blocks, generator=generator)
            masked = torch.rand(n, generator=generator) < rate[blk]
            # at least one masked position per block
            force = torch.randint(block_length, (n_blocks,), generator=generator)
            masked[torch.arange(n_blocks) * block_length + force] = True
            parts_tok.append(torch.where(masked, torch.full_like(target, mask_id), target))
            parts_pos.append(p + torch.arange(n))
            kind.append(torch.full((n,), 2))
            block.append(blk)
            copy.append(torch.full((n,), c))
            scored = torch.where(masked, target, torch.full_like(target, IGNORE))
            if logits_shift:
                scored[blk * block_length == torch.arange(n)] = IGNORE  # scored clean, above
                scored = torch.cat((scored[1:], torch.tensor([IGNORE])))
            labels.append(scored)
        positions = torch.cat(parts_pos)
        if position_gap and gap_rate:  # drawn last: a config without gaps keeps its noise
            _skip_positions(positions, p + n, p, position_gap, gap_rate, max_positions, generator)
        rows.append(
            {
                "tok": torch.cat(parts_tok),
                "pos": positions,
                "kind": torch.cat(kind),
                "block": torch.cat(block),
                "copy": torch.cat(copy),
                "labels": torch.cat(labels),
            }
        )
    t = max(len(r["tok"]) for r in rows)
    tok, pos, kind, block, copy, labels, valid = _stack(rows, t, pad_id)
    mask = diffusion_mask(pos, kind, block, copy, valid)
    return Batch(tok, pos, mask, valid, labels)


def _stack(rows: list[dict[str, Tensor]], t: int, pad_id: int) -> tuple[Tensor, ...]:
    def pad(key: str, value: int) -> Tensor:
        return torch.stack(
            [torch.cat((r[key], torch.full((t - len(r[key]),), value))) for r in rows]
        ).long()

    valid = torch.stack([torch.arange(t) < len(r["tok"]) for r in rows])
    return (
        pad("tok", pad_id),
        pad("pos", 0),
        pad("kind", -1),
        pad("block", -1),
        pad("copy", -1),
        pad("labels", IGNORE),
        valid,
    )


def diffusion_mask(pos: Tensor, kind: Tensor, block: Tensor, copy: Tensor, valid: Tensor) -> Tensor:
    """Boolean [B, T, T] visibility for the clean + noised layout (query rows, key columns)."""
    qk = kind.unsqueeze(2)
    kk = kind.unsqueeze(1)
    qb, kb = block.unsqueeze(2), block.unsqueeze(1)
    prompt_key = kk == 0
    from_prompt = (qk == 0) & prompt_key & (pos.unsqueeze(1) <= pos.unsqueeze(2))
    from_clean = (qk == 1) & (prompt_key | ((kk == 1) & (kb <= qb)))
    same_noise = (kk == 2) & (copy.unsqueeze(1) == copy.unsqueeze(2)) & (kb == qb)
    from_noised = (qk == 2) & (prompt_key | ((kk == 1) & (kb < qb)) | same_noise)
    mask = (from_prompt | from_clean | from_noised) & valid.unsqueeze(1) & valid.unsqueeze(2)
    # padded query rows see themselves (no all-False rows → no NaNs)
    eye = torch.eye(pos.shape[1], dtype=torch.bool).unsqueeze(0)
    return mask | (eye & ~valid.unsqueeze(2))


def autoregressive_batch(
    examples: Sequence[Example],
    *,
    end_id: int,
    pad_id: int,
    position_gap: int = 0,
    gap_rate: float = 0.0,
    max_positions: int | None = None,
    generator: torch.Generator | None = None,
) -> Batch:
    """A next-token batch: causal over ``prompt | target <|end|>``, loss on the target turn.

    With ``position_gap`` > 0, each row with probability ``gap_rate`` skips
    1..``position_gap`` positions after a random prompt token (never past
    ``max_positions``); ``generator`` draws the rows, points and gaps.
    """
    check_position_gap(position_gap, gap_rate)
    rows: list[dict[str, Tensor]] = []
    for ex in examples:
        seq = torch.tensor([*ex.prompt, *ex.target, end_id], dtype=torch.long)
        labels = torch.full_like(seq, IGNORE)
        p = len(ex.prompt)
        # position i predicts token i + 1
        labels[p - 1 : -1] = seq[p:]
        rows.append({"tok": seq, "labels": labels})
    t = max(len(r["tok"]) for r in rows)
    tok = torch.stack(
        [torch.cat((r["tok"], torch.full((t - len(r["tok"]),), pad_id))) for r in rows]
    )
    labels = torch.stack(
        [torch.cat((r["labels"], torch.full((t - len(r["labels"]),), IGNORE))) for r in rows]
    )
    valid = torch.stack([torch.arange(t) < len(r["tok"]) for r in rows])
    positions = torch.arange(t).expand(len(rows), t).clone()
    if position_gap and gap_rate:
        for i, ex in enumerate(examples):
            _skip_positions(  # the padding after a short row shifts too: bound by t
                positions[i],
                t,
                len(ex.prompt),
                position_gap,
                gap_rate,
                max_positions,
                generator,
            )
    return Batch(tok, positions, None, valid, labels, block_ids=positions.clone())


def check_position_gap(position_gap: int, gap_rate: float) -> None:
    """Raise ``ValueError`` unless ``position_gap >= 0`` and ``gap_rate`` is in [0, 1]."""
    if position_gap < 0 or not 0.0 <= gap_rate <= 1.0:
        raise ValueError(
            f"position_gap must be >= 0 and gap_rate in [0, 1], got {position_gap}, {gap_rate}"
        )


def _skip_positions(
    positions: Tensor,
    length: int,
    prompt_length: int,
    position_gap: int,
    gap_rate: float,
    max_positions: int | None,
    generator: torch.Generator | None,
) -> None:
    """Add a gap of 1..``position_gap`` positions after a random prompt token, in place.

    ``positions`` is one row laid out prompt first; ``length`` is its largest
    position + 1 (noised copies reuse the clean positions)."""
    room = position_gap if max_positions is None else min(position_gap, max_positions - length)
    draws = torch.rand(3, generator=generator).tolist()
    if draws[0] >= gap_rate or room < 1 or prompt_length < 2:
        return
    after = 1 + int(draws[1] * (prompt_length - 1))  # the gap opens before token `after`
    positions[after:] += 1 + int(draws[2] * room)
