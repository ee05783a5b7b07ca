"""Closed choices inside a block (``GenerationConfig.score_choices``), for :mod:`.sampler`.

Before a denoising step, a row whose leftmost masked position opens a closed
choice (a tool name, an enum value: :mod:`.constraints.closed_choices`) gets
it decided whole: the block's clean tokens before it and the tokens not yet in
the cache are the context of :func:`.choice_scoring.choose`, and the chosen
candidate is committed like a run of model-chosen tokens, with its probability
among the candidates as their confidence. A copy choice the scorer declines
(:mod:`.constraints.copy_choices`) is handed back to the session, which stops
offering it, and the denoising step writes that value instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from .choice_scoring import ChoicePrior, ChoiceQuery, choose, first_logprobs
from .constraints.copy_choices import likeliest_starts
from .constraints.protocol import ChoiceConstraint, DecodeConstraint
from .decode_batch import Segment
from .generation import MadeChoice
from .model import KVCache, Transformer


def open_choice(c: DecodeConstraint | None, tokens: Tensor, masked: Tensor) -> bool:
    """True when a closed choice opens at the row's leftmost mask."""
    return (
        isinstance(c, ChoiceConstraint)
        and bool(masked.any())
        and c.block_choice(tokens, masked) is not None
    )


@dataclass(frozen=True)
class ChoiceStep:
    """What :func:`make_choices` did."""

    #: Rows scored by a forward pass (not those whose choice had one closed candidate).
    scored: set[int]
    #: Rows that committed a choice.
    filled_rows: set[int]
    #: Forward passes it took (when ``scored`` is not empty).
    passes: int = 1
    #: The value choices it committed (copies and keys aside), by row (``offset``: the
    #: block position).
    made: tuple[tuple[int, MadeChoice], ...] = ()

    @property
    def filled(self) -> bool:
        """True when some row committed a choice."""
        return bool(self.filled_rows)


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
    last_logits: Tensor | None = None,
    fresh: Tensor | None = None,
) -> ChoiceStep | None:
    """Fill every row's closed choice at its leftmost mask (``score_choices``);
    None when no row had a choice to make.

    ``last_logits`` [b, L, V] are the block's last denoising pass, and ``fresh`` [b]
    marks the rows no choice has filled since: a copy choice there takes its likely
    first tokens from them instead of a pass of its own (the whole candidates are
    scored exactly either way)."""
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
    copies = [i for i, q in enumerate(queries) if q.choice.copy]
    passes = 0
    if copies:  # where each value is likely to start: the last pass, or one short pass
        known = [
            None
            if last_logits is None or fresh is None or not bool(fresh[queries[i].row])
            else last_logits[queries[i].row, found_at[i]].float().log_softmax(-1)
            for i in copies
        ]
        asked = [replace(queries[i], first_logprobs=f) for i, f in zip(copies, known, strict=True)]
        firsts = first_logprobs(model, cache, asked)
        passes = int(any(f is None for f in known))
        for i, first in zip(copies, firsts, strict=True):
            queries[i] = replace(queries[i], choice=likeliest_starts(queries[i].choice, first))
        # A copy inside free text that the model is not writing is declined unscored.
        looked = {queries[i].row for i in copies}
        unwritten = [
            (q, s) for q, s in zip(queries, found_at, strict=True) if not q.choice.candidates
        ]
        for q, s in unwritten:
            c = cons[q.row]
            assert isinstance(c, ChoiceConstraint)
            c.decline_choice(tokens[q.row], masked[q.row], s)
        kept = [(q, s) for q, s in zip(queries, found_at, strict=True) if q.choice.candidates]
        if not kept:
            return ChoiceStep(looked, set(), passes)
        queries, found_at = [q for q, _ in kept], [s for _, s in kept]
    given = [
        None if priors[q.row] is None else (priors[q.row], tokens[q.row, :start].tolist())
        for q, start in zip(queries, found_at, strict=True)
    ]
    results = choose(model, cache, queries, given, prior_weight)  # type: ignore[arg-type]
    filled: set[int] = set()
    made: list[tuple[int, MadeChoice]] = []
    for q, start, res in zip(queries, found_at, results, strict=True):
        c = cons[q.row]
        assert isinstance(c, ChoiceConstraint)
        if res is None:
            c.decline_choice(tokens[q.row], masked[q.row], start)
            continue
        c.fill_choice(tokens[q.row], masked[q.row], start, res.candidate)
        confidence[q.row, start : start + len(res.candidate.tokens)] = res.confidence
        filled.add(q.row)
        if not (q.choice.copy or q.choice.key):
            texts = tuple(c.text for c in q.choice.candidates)
            chosen = texts.index(res.candidate.text)
            made.append(
                (q.row, MadeChoice(start, len(res.candidate.tokens), texts, res.logprobs, chosen))
            )
    scored = {q.row for q in queries if len(q.choice.candidates) > 1 or q.choice.copy}
    if copies:
        scored |= looked
    return ChoiceStep(scored, filled, passes + 1, tuple(made))
