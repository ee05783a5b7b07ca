"""Denoising one block of a batch of rows: :func:`denoise_block`, for :mod:`.sampler` and drafts.

A block of ``block_length`` positions starts fully masked and is refined in
parallel: each step runs one forward pass over the block (the prefix comes from
the KV cache), picks every masked position's best token and its confidence, and
commits positions by the commit order — ``confidence``: all positions whose
confidence reaches ``threshold``; ``prefix``: the leftmost masked position and
the run right after it that reaches ``threshold`` — at least one, and enough
that the block finishes within ``steps`` steps. Under a constraint, forced
tokens are filled first (jump-forward) and closed choices are made whole
(:mod:`.block_choices`).

Models with ``logits_shift=1`` (Dream) predict position ``i`` from the output
at ``i - 1``: the last clean token is kept out of the cache and forwarded with
every step, so the block's first position always has fresh logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .block_choices import make_choices, open_choice
from .block_step import commit_positions, fill_after_end, propose_tokens
from .choice_scoring import ChoicePrior, supports_choices
from .constraints.protocol import ChoiceConstraint, DecodeConstraint, FreeTextConstraint
from .decode_batch import Segment, step_seed
from .errors import InfeasibleConstraintError
from .generation import GenerationConfig, MadeChoice
from .model import KVCache, Transformer


@dataclass
class BlockOutcome:
    """What :func:`denoise_block` produced for a batch of rows."""

    #: The committed block [b, L] (a row's positions after its end token hold the end token).
    tokens: Tensor
    #: Confidence of each position when it was committed [b, L] (1.0 for forced tokens).
    confidence: Tensor
    #: Forward passes spent on the block (one serves every row).
    nfe: int
    #: Per row, forward passes in which the row still had masks [b].
    row_nfe: Tensor
    #: Positions filled by jump-forward without a forward pass [b, L].
    forced: Tensor
    #: Clean tokens not yet in the cache (the carry and, always, this block);
    #: pass it as ``pending`` with the next block.
    pending: Segment
    #: Per row, the closed value choices it made (``score_choices``; copies and keys
    #: aside), in order; their ``offset`` is a block position.
    choices: list[list[MadeChoice]] = field(default_factory=list)


def denoise_block(
    model: Transformer,
    cache: KVCache,
    pending: Segment,
    block: Segment,
    config: GenerationConfig,
    *,
    constraints: Sequence[DecodeConstraint | None] | None = None,
    seeds: Sequence[int | None] | None = None,
    block_index: int = 0,
    finish: bool = True,
    priors: Sequence[ChoicePrior | None] | None = None,
) -> BlockOutcome:
    """Denoise one block for a batch of rows; the model reads the prefix from ``cache``.

    ``pending`` holds clean tokens not yet in the cache: they are forwarded with
    the block's first step and committed to the cache then (all but the last
    ``logits_shift`` tokens, which ride along with every step). ``block`` gives
    the block's positions and block ids; its tokens are the mask token where a
    position is still to be decoded (prefilled tokens are kept). With
    ``constraints`` (one per row, or None), the step protocol of
    :mod:`agentflow.engine.constraints.protocol` is followed; ``finish`` calls
    ``finish_block`` once a row's block is complete. ``priors`` (one per row, or
    None) calibrate closed choices under ``config.score_choices``
    (:mod:`agentflow.engine.choice_scoring`).
    """
    mask_id = model.config.mask_token_id
    end_ids = model.config.end_token_ids
    if mask_id is None:
        raise ValueError("the model config has no mask_token_id; it cannot do diffusion decoding")
    b, length = block.tokens.shape
    shift = model.config.logits_shift
    if pending.length < shift:
        raise ValueError(f"logits_shift={shift} needs at least {shift} pending clean token(s)")
    cons: Sequence[DecodeConstraint | None] = constraints or [None] * b
    row_seeds: Sequence[int | None] = seeds or [config.seed] * b
    tokens = block.tokens.clone()
    masked = tokens == mask_id
    confidence = torch.where(masked, 0.0, 1.0).float()
    forced = torch.zeros(b, length, dtype=torch.bool, device=tokens.device)
    row_nfe = torch.zeros(b, dtype=torch.long)
    commit_order = config.order or model.config.commit_order
    nfe = 0
    step = 0
    # With ``cache_block_prefix``: how many leading block positions are cached for the
    # rest of this block, the cache length and pending tail the block's first pass left.
    cached = 0
    block_start: int | None = None
    carry = pending
    current = Segment(tokens, block.positions, block.block_ids, block.valid)  # views `tokens`
    choosing = config.score_choices and config.temperature == 0 and supports_choices(model)
    # The last denoising pass's logits, and the rows no choice has filled since.
    last_logits: Tensor | None = None
    fresh = torch.zeros(b, dtype=torch.bool)
    choices: list[list[MadeChoice]] = [[] for _ in range(b)]
    # The busy rows of the last pass that left some out, the cache length then, and
    # their copy of the cache.
    sub: tuple[Tensor, int, KVCache] | None = None
    while bool(masked.any()):
        for r, c in enumerate(cons):
            if c is not None and bool(masked[r].any()):
                before = masked[r].clone()
                c.jump_forward(tokens[r], masked[r])
                forced[r] |= before & ~masked[r]
                confidence[r][forced[r]] = 1.0
        if not bool(masked.any()):
            break
        hold: set[int] = set()
        if choosing:
            if block_start is None:
                # The pending tokens (the prompt, the previous block) enter the cache with
                # this pass first; rows that face a closed choice commit nothing this step.
                hold = {r for r, c in enumerate(cons) if open_choice(c, tokens[r], masked[r])}
            else:
                made = make_choices(
                    model,
                    cache,
                    current,
                    pending,
                    cached,
                    cons,
                    masked,
                    confidence,
                    priors or [None] * b,
                    config.choice_prior_weight,
                    last_logits,
                    fresh,
                )
                if made is not None and made.scored:
                    nfe += made.passes
                    row_nfe[sorted(made.scored)] += made.passes
                if made is not None and made.filled:
                    for r, chosen in made.made:
                        choices[r].append(chosen)
                    fresh[sorted(made.filled_rows)] = False
                    continue  # jump forward over what the choice forces next
        if config.cache_block_prefix and block_start is not None:
            lead = _clean_lead(masked)
            if lead > cached:  # these ride with this pass as pending and enter the cache
                pending = pending.cat(current.slice(cached, lead))
                cached = lead
        seg = pending.cat(current.slice(cached))
        commit = pending.length - shift
        start = pending.length - shift
        busy = masked.any(dim=1)
        if commit == 0 and not bool(busy.all()):
            # Rows whose block is done sit this pass out: it writes nothing to the
            # cache, so they read a copy of the busy rows' cache (made once per set).
            rows = busy.nonzero().flatten()
            if sub is None or sub[1] != cache.length or not torch.equal(sub[0], rows):
                sub = (rows, cache.length, _cache_rows(cache, rows, seg.length))
            hidden = model(
                seg.tokens[rows],
                positions=seg.positions[rows],
                block_ids=seg.block_ids[rows],
                valid=seg.valid[rows],
                cache=sub[2],
                commit_len=0,
                hidden_only=True,
            )
            part = model.project(hidden[:, start : start + length - cached]).float()
            block_logits = part.new_zeros(b, length, part.shape[-1])
            block_logits[rows, cached:] = part
        else:
            hidden = model(
                seg.tokens,
                positions=seg.positions,
                block_ids=seg.block_ids,
                valid=seg.valid,
                cache=cache,
                commit_len=commit,
                hidden_only=True,
            )
            # Only the block's positions need vocabulary logits (cached ones: zeros, never read).
            part = model.project(hidden[:, start : start + length - cached]).float()
            if cached:
                block_logits = part.new_zeros(b, length, part.shape[-1])
                block_logits[:, cached:] = part
            else:
                block_logits = part
        block_logits[..., mask_id] = float("-inf")  # the mask token is never an answer
        last_logits = block_logits
        fresh[:] = True
        pending = pending.slice(commit)
        if block_start is None:
            block_start, carry = cache.length, pending
        nfe += 1
        row_nfe += masked.any(dim=1).long().cpu()
        seeds_now = [step_seed(s, block_index, step) for s in row_seeds]
        prop, conf = propose_tokens(block_logits, tokens, masked, cons, config, seeds_now)
        steps_left = config.steps - step
        remaining = int(masked.sum())
        for r in range(b):
            if not bool(masked[r].any()) or r in hold:
                continue
            order = commit_positions(conf[r], masked[r], config.threshold, steps_left, commit_order)
            c = cons[r]
            if c is None:
                tokens[r, order] = prop[r, order]
                masked[r, order] = False
                done = order
            else:
                extra: dict[str, Any] = (
                    {"until_choice": True} if choosing and isinstance(c, ChoiceConstraint) else {}
                )
                if (
                    config.text_threshold is not None
                    and isinstance(c, FreeTextConstraint)
                    and steps_left >= int(masked[r].sum())  # the step cap comes first
                ):
                    extra.update(confidence=conf[r], text_threshold=config.text_threshold)
                done = c.commit(
                    tokens[r],
                    masked[r],
                    order,
                    prop[r],
                    block_logits[r],
                    temperature=config.temperature,
                    seed=seeds_now[r],
                    **extra,
                )
            confidence[r, done] = conf[r, done]
            if c is None and end_ids:
                fill_after_end(tokens[r], masked[r], confidence[r], end_ids)
        if int(masked.sum()) == remaining and not hold:  # a constraint rejected every proposal
            raise InfeasibleConstraintError(
                f"no position of block {block_index} could be committed"
            )
        step += 1
    if finish:
        for r, c in enumerate(cons):
            if c is not None:
                c.finish_block(tokens[r])
    if cached:
        # The cached prefix saw a partly masked block: drop it, so that the whole clean
        # block enters the cache with the next block's first pass, exact as without it.
        cache.truncate(block_start)
        pending = carry
    return BlockOutcome(tokens, confidence, nfe, row_nfe, forced, pending.cat(current), choices)


def _cache_rows(cache: KVCache, rows: Tensor, room: int) -> KVCache:
    """A copy of ``rows`` of ``cache`` (its cached positions) with ``room`` more."""
    return KVCache.gather([(cache, int(r), cache.length) for r in rows.tolist()], room)


def _clean_lead(masked: Tensor) -> int:
    """Leading block positions that are clean in every row [b, L]."""
    still = masked.any(dim=0).nonzero()
    return int(still[0]) if still.numel() else masked.shape[1]
