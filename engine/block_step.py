"""One denoising step of a block, row by row: proposals, positions to commit, end fill.

:func:`propose_tokens` picks every masked position's token and confidence from
the step's logits (through each row's constraint where it has one);
:func:`commit_positions` chooses which of them the step commits, by the commit
order; :func:`fill_after_end` repeats a committed end token over the masked
positions after it. :func:`agentflow.engine.block_denoising.denoise_block` drives them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from .constraints.protocol import DecodeConstraint
from .generation import GenerationConfig
from .selection import apply_top_p, select_tokens


def commit_positions(
    conf: Tensor, masked: Tensor, threshold: float | None, steps_left: int, order: str
) -> list[int]:
    """Masked positions to commit this step.

    ``confidence``: the most confident first, every one at or above ``threshold``.
    ``prefix``: the leftmost masked position, then the run of masked positions right
    after it at or above ``threshold``. Either way at least one, and enough that
    the block finishes within ``steps_left`` steps (topped up by confidence).
    """
    idx = masked.nonzero().flatten()
    if idx.numel() == 0:
        return []
    scores = conf[idx]
    ranked = idx[scores.argsort(descending=True, stable=True)].tolist()
    need = max(1, math.ceil(idx.numel() / max(steps_left, 1)))
    if order == "prefix":
        positions = idx.tolist()
        run = 1
        while (
            threshold is not None
            and run < len(positions)
            and positions[run] == positions[run - 1] + 1
            and float(scores[run]) >= threshold
        ):
            run += 1
        chosen = positions[:run]
        if len(chosen) < need:
            taken = set(chosen)
            chosen += [j for j in ranked if j not in taken][: need - len(chosen)]
        return chosen
    if threshold is not None:
        need = max(need, int((scores >= threshold).sum()))
    return ranked[:need]


def propose_tokens(
    logits: Tensor,
    tokens: Tensor,
    masked: Tensor,
    constraints: Sequence[DecodeConstraint | None],
    config: GenerationConfig,
    seeds: Sequence[int | None],
) -> tuple[Tensor, Tensor]:
    """Proposed token and confidence for every block position [b, L]."""
    b, length, vocab = logits.shape
    plain = [r for r in range(b) if constraints[r] is None]
    prop = torch.zeros(b, length, dtype=torch.long, device=logits.device)
    conf = torch.zeros(b, length, dtype=torch.float32, device=logits.device)
    if plain and config.temperature == 0.0:
        rows = torch.tensor(plain, device=logits.device)
        tok, c = select_tokens(logits[rows].reshape(-1, vocab), temperature=0.0)
        prop[rows], conf[rows] = tok.view(len(plain), length), c.view(len(plain), length)
    elif plain:
        for r in plain:
            prop[r], conf[r] = select_tokens(
                logits[r], temperature=config.temperature, top_p=config.top_p, seed=seeds[r]
            )
    for r in range(b):
        c = constraints[r]
        if c is not None and bool(masked[r].any()):
            row_logits = apply_top_p(logits[r], config.top_p, config.temperature)
            prop[r], conf[r] = c.propose(
                tokens[r], masked[r], row_logits, temperature=config.temperature, seed=seeds[r]
            )
    return prop, conf


def fill_after_end(
    tokens: Tensor, masked: Tensor, confidence: Tensor, end_ids: frozenset[int]
) -> None:
    """Once an end token is committed, the masked positions after it repeat that token."""
    is_end = torch.zeros_like(masked)
    for end_id in end_ids:
        is_end |= tokens == end_id
    ends = (is_end & ~masked).nonzero()
    if ends.numel():
        first = int(ends[0])
        after = torch.zeros_like(masked)
        after[first + 1 :] = True
        fill = after & masked
        tokens[fill] = tokens[first]
        confidence[fill] = 1.0
        masked[fill] = False
