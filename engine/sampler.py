"""Block diffusion decoding: :class:`DiffusionEngine` and the reusable :func:`denoise_block`.

The answer is produced block by block. A block of ``block_length`` positions
starts fully masked and is refined in parallel: each step runs one forward pass
over the block (the prefix comes from the KV cache), picks every masked
position's best token and its confidence, and commits positions by the commit
order — ``confidence``: all positions whose confidence reaches ``threshold``;
``prefix``: the leftmost masked position and the run right after it that reaches
``threshold`` — at least one, and enough that the block finishes within
``steps`` steps.

Caches. Block-trained (``attention="block"``) models see the prompt causally
and each block with full attention inside it, so a finished block's keys and
values are exact: they enter the cache during the *next* block's first forward
pass, which runs [previous clean block + masked next block] and commits the
first part (``commit_len``). No forward pass is spent only on caching.
Bidirectional checkpoints (LLaDA, Dream) let every token see every other, so no
cache is exact; as in Fast-dLLM the cache is rebuilt once per block — the
block's first step forwards [whole clean sequence + masked block] — and reused
for the block's later steps (approximate: the prefix does not see later edits
of the block). ``GenerationConfig.cache_block_prefix`` also caches a block's
clean leading positions for the block's later steps (shorter passes, approximate
inside the block); the cache is rolled back when the block is done, so finished
blocks still enter it exactly.

Models with ``logits_shift=1`` (Dream) predict position ``i`` from the output
at ``i - 1``: the last clean token is kept out of the cache and forwarded with
every step, so the block's first position always has fresh logits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from .block_choices import make_choices, open_choice
from .block_step import commit_positions, fill_after_end, propose_tokens
from .choice_scoring import ChoicePrior, ChoicePriors, choice_prior_list, supports_choices
from .constraints.protocol import ChoiceConstraint, DecodeConstraint, FreeTextConstraint
from .decode_batch import (
    Constraints,
    Prompts,
    Segment,
    check_context,
    constraint_list,
    encode_prompts,
    left_pad,
    step_seed,
)
from .errors import InfeasibleConstraintError
from .generation import (
    BlockCallback,
    GenerationConfig,
    GenerationResult,
    GenerationStats,
    MadeChoice,
    RowStats,
    end_index,
)
from .model import KVCache, Transformer
from .prefix_store import DEFAULT_CAPACITY, PrefixStore
from .second_choice import decode_second
from .tokenizer import Tokenizer


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


def _lowest_committed(res: BlockOutcome, i: int, n: int) -> float:
    """The lowest confidence among the first ``n`` positions of row ``i`` that the model
    committed (forced positions aside); 1.0 when there is none."""
    conf = res.confidence[i, :n][~res.forced[i, :n]]
    return float(conf.min()) if conf.numel() else 1.0


def _note_choices(rs: RowStats, res: BlockOutcome, i: int, at: int, n: int) -> None:
    """Note on ``rs`` the confidences of the first ``n`` positions of row ``i`` (output
    positions from ``at`` on) and its first choice, if this block made it."""
    forced = res.forced[i, :n].tolist()
    conf = res.confidence[i, :n].tolist()
    rs.confidences.extend(None if f else c for c, f in zip(conf, forced, strict=True))
    if rs.first_choice is None:
        made = [c for c in res.choices[i] if c.offset < n] if res.choices else []
        if made:
            rs.first_choice = replace(made[0], offset=at + made[0].offset)


def _clean_lead(masked: Tensor) -> int:
    """Leading block positions that are clean in every row [b, L]."""
    still = masked.any(dim=0).nonzero()
    return int(still[0]) if still.numel() else masked.shape[1]


class DiffusionEngine:
    """Block-diffusion decoding of a mask-predicting :class:`Transformer`."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer | None = None,
        *,
        prompt_cache: int = DEFAULT_CAPACITY,
        prompt_store: PrefixStore | None = None,
    ) -> None:
        """``prompt_cache``: recent prompts whose keys and values later prompts that start
        the same way copy instead of reading (:mod:`.prefix_store`; 0: off; never for a
        bidirectional model). ``prompt_store``: a store of this model's prompts to share
        instead of a store of its own (:class:`~.hybrid.HybridEngine` gives its drafts'
        store to its diffusion passes)."""
        cfg = model.config
        if cfg.attention == "causal":
            raise ValueError("a causal model cannot be decoded by diffusion; use ARDecoder")
        if cfg.mask_token_id is None:
            raise ValueError("the model config has no mask_token_id; it cannot do diffusion")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.prompts = (
            prompt_store if prompt_store is not None else PrefixStore.for_model(model, prompt_cache)
        )

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.inference_mode()
    def generate(
        self,
        prompts: Prompts,
        config: GenerationConfig | None = None,
        *,
        constraints: Constraints = None,
        on_block: BlockCallback | None = None,
        choice_priors: ChoicePriors = None,
        min_confidence: float | None = None,
    ) -> GenerationResult:
        """Decode a prompt or a batch of prompts (text or token ids) block by block.

        ``choice_priors`` (one per prompt: the conversation without its request)
        calibrate closed choices under ``config.score_choices``. ``min_confidence``
        stops a row at the first block in which the model commits a token (forced
        ones aside) below it: the row's output is its blocks before that one, and
        ``RowStats.low_confidence`` says why (``mode="auto"`` of :class:`HybridEngine`
        re-does such rows); its constraint has advanced over the stopping block.
        With ``config.second_choice``, rows whose first choice was close are decoded
        again with the runner-up (:mod:`.second_choice`); ``on_block`` streams their
        first decode only.
        """
        config = config or GenerationConfig()
        ids = encode_prompts(prompts, self.tokenizer)
        result = self._decode(ids, config, constraints, on_block, choice_priors, min_confidence)
        if config.second_choice is not None and constraints is not None:
            cons = constraint_list(constraints, len(ids))
            decode_second(self, ids, config, cons, choice_priors, result, min_confidence)
        return result

    def _decode(
        self,
        ids: list[list[int]],
        config: GenerationConfig,
        constraints: Constraints,
        on_block: BlockCallback | None,
        choice_priors: ChoicePriors,
        min_confidence: float | None,
    ) -> GenerationResult:
        if min_confidence is not None and not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
        t0 = time.perf_counter()
        cfg = self.model.config
        b = len(ids)
        cons = constraint_list(constraints, b)
        budgets = check_context(ids, cfg.max_seq_len, config.max_new_tokens)
        priors = choice_prior_list(self.model, choice_priors, ids, config, self.tokenizer)
        dev = self.device
        pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        prompt, lengths = left_pad(ids, pad_id, dev)
        bidirectional = cfg.attention == "bidirectional"
        if bidirectional:
            prompt.block_ids.zero_()
        width = prompt.length
        dtype = next(self.model.parameters()).dtype
        cache = KVCache(cfg, b, width + max(budgets) + 1, device=dev, dtype=dtype)

        stats = GenerationStats(
            mode="diffusion", rows=[RowStats(prompt_tokens=len(p)) for p in ids]
        )
        out: list[list[int]] = [[] for _ in range(b)]
        live = list(range(b))  # original row index of each batch row still decoding
        if self.prompts is not None:
            copied = self.prompts.fill_rows(cache, ids, width, keep=max(1, cfg.logits_shift))
            for rs, n in zip(stats.rows, copied, strict=True):
                rs.cached_tokens = n
        pending = prompt.slice(cache.length)
        history = prompt  # every clean token so far (bidirectional models rebuild the cache)
        generated = 0
        k = 0
        while live:
            room = max(budgets[r] for r in live) - generated
            length = min(config.block_length, room)
            n = len(live)
            offs = torch.arange(length, device=dev)
            positions = (lengths.unsqueeze(1) + generated + offs).expand(n, length)
            if bidirectional:
                block_ids = torch.zeros(n, length, dtype=torch.long, device=dev)
                cache.truncate(0)
                pending = history
            else:
                block_ids = (lengths + k).unsqueeze(1).expand(n, length).contiguous()
            block = Segment(
                torch.full((n, length), cfg.mask_token_id, dtype=torch.long, device=dev),
                positions.contiguous(),
                block_ids,
                torch.ones(n, length, dtype=torch.bool, device=dev),
            )
            res = denoise_block(
                self.model,
                cache,
                pending,
                block,
                config,
                constraints=[cons[r] for r in live],
                seeds=[config.row_seed(r) for r in live],
                block_index=k,
                priors=[priors[r] for r in live],
            )
            if k == 0 and self.prompts is not None:  # every row's prompt is in the cache now
                self.prompts.save_rows(cache, ids, width)
            pending = res.pending
            history = history.cat(Segment(res.tokens, block.positions, block_ids, block.valid))
            stats.nfe += res.nfe
            keep = []
            for i, r in enumerate(live):
                row = res.tokens[i].tolist()
                rs = stats.rows[r]
                rs.nfe += int(res.row_nfe[i])
                cut = end_index(row, cfg.end_token_ids)
                room_r = budgets[r] - len(out[r])
                if min_confidence is not None:
                    low = _lowest_committed(
                        res, i, min(room_r, len(row) if cut is None else cut + 1)
                    )
                    if low < min_confidence:
                        rs.low_confidence = low
                        continue  # stopped: this block is not its output
                prior = priors[r]
                if prior is not None:
                    prior.extend(row)
                ended = cut is not None
                if cut is not None:
                    row = row[:cut]
                c = cons[r]
                finished = ended or (c is not None and c.done)
                row = row[:room_r]
                rs.forced_tokens += int(res.forced[i, : len(row)].sum())
                _note_choices(rs, res, i, len(out[r]), len(row))
                out[r].extend(row)
                if row and on_block is not None:
                    on_block(r, row)
                if finished:
                    rs.finished = True
                elif len(out[r]) < budgets[r]:
                    keep.append(i)
            generated += length
            k += 1
            if len(keep) < len(live):
                idx = torch.tensor(keep, dtype=torch.long, device=dev)
                cache.select_rows(idx)
                pending, history = pending.rows(idx), history.rows(idx)
                lengths = lengths[idx]
                live = [live[i] for i in keep]
        for r, rs in enumerate(stats.rows):
            rs.tokens = len(out[r])
            prior = priors[r]
            if prior is not None:  # the prior's own passes, one row each
                rs.nfe += prior.passes
                stats.nfe += prior.passes
        stats.tokens = sum(rs.tokens for rs in stats.rows)
        stats.forced_tokens = sum(rs.forced_tokens for rs in stats.rows)
        stats.seconds = time.perf_counter() - t0
        texts = [self.tokenizer.decode(s) for s in out] if self.tokenizer is not None else None
        return GenerationResult(out, stats, texts)
