"""Closed choices inside a block (``GenerationConfig.score_choices``), for :mod:`.sampler`.

Before a denoising step, a row whose leftmost masked position opens a closed
choice (a tool name, an enum value: :mod:`.constraints.closed_choices`) gets
it decided whole: the block's clean tokens before it and the tokens not yet in
the cache are the context of :func:`.choice_scoring.choose`, and the chosen
candidate is committed like a run of model-chosen tokens, with its probability
among the candidates as their confidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .choice_scoring import ChoicePrior, ChoiceQuery, choose
from .constraints.protocol import ChoiceConstraint, DecodeConstraint
from .decode_batch import Segment
from .model import KVCache, Transformer


def open_choice(c: DecodeConstraint | None, tokens: Tensor, masked: Tensor) -> bool:
    """True when a closed choice opens at the row's leftmost mask."""
    return (
        isinstance(c, ChoiceConstraint)
        and bool(masked.any())
        and c.block_choice(tokens, masked) is not None
    )


def make_choices(
    model: Transformer,
    cache: KVCache,
    current: Segment,
    pending: Segment,
    cached: int,
    cons: Sequence[DecodeConstraint | None],
    masked: Tensor,
    confidence: Tensor,
    priors: Sequence[ChoicePrior | None],
    prior_weight: float,
) -> set[int] | None:
    """Fill every row's closed choice at its leftmost mask (``score_choices``).

    Returns the rows scored by a forward pass (empty when every choice had one
    candidate), or None when no row had a choice.
    """
    tokens = current.tokens
    queries: list[ChoiceQuery] = []
    found_at: list[int] = []
    for r, c in enumerate(cons):
        if not isinstance(c, ChoiceConstraint) or not bool(masked[r].any()):
            continue
        found = c.block_choice(tokens[r], masked[r])
        if found is None:
            continue
        start, choice = found
        row = torch.tensor([r], device=tokens.device)
        context = pending.rows(row).cat(current.slice(cached, start).rows(row))
        queries.append(ChoiceQuery(r, choice, context, int(current.positions[r, start])))
        found_at.append(start)
    if not queries:
        return None
    given = [
        None if priors[q.row] is None else (priors[q.row], tokens[q.row, :start].tolist())
        for q, start in zip(queries, found_at, strict=True)
    ]
    results = choose(model, cache, queries, given, prior_weight)  # type: ignore[arg-type]
    for q, start, res in zip(queries, found_at, results, strict=True):
        c = cons[q.row]
        assert isinstance(c, ChoiceConstraint)
        c.fill_choice(tokens[q.row], masked[q.row], start, res.candidate)
        confidence[q.row, start : start + len(res.candidate.tokens)] = res.confidence
    return {q.row for q in queries if len(q.choice.candidates) > 1}
