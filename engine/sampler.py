"""Block diffusion decoding: :class:`DiffusionEngine`.

The answer is produced block by block, each block refined in parallel by
:func:`.block_denoising.denoise_block` (the commit order, the confidence
threshold, the step cap are described there).

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

With ``GenerationConfig.second_choice``, rows whose first closed choice was
close are decoded again with the runner-up (:mod:`.second_choice`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from .block_denoising import BlockOutcome, denoise_block
from .choice_scoring import ChoicePriors, choice_prior_list
from .decode_batch import (
    Constraints,
    Prompts,
    Segment,
    check_context,
    constraint_list,
    encode_prompts,
    left_pad,
)
from .generation import (
    BlockCallback,
    GenerationConfig,
    GenerationResult,
    GenerationStats,
    RowStats,
    end_index,
)
from .model import KVCache, Transformer
from .prefix_store import DEFAULT_CAPACITY, PrefixStore
from .second_choice import decode_second
from .tokenizer import Tokenizer


def _lowest_committed(res: BlockOutcome, i: int, n: int) -> float:
    """The lowest confidence among the first ``n`` positions of row ``i`` that the model
    committed (forced positions aside); 1.0 when there is none."""
    conf = res.confidence[i, :n][~res.forced[i, :n]]
    return float(conf.min()) if conf.numel() else 1.0


def _note_choices(rs: RowStats, res: BlockOutcome, i: int, at: int, n: int) -> None:
    """Note on ``rs`` the confidences of the first ``n`` positions of row ``i`` (output
    positions from ``at`` on) and its first choice, if this block made it there."""
    forced = res.forced[i, :n].tolist()
    conf = res.confidence[i, :n].tolist()
    rs.confidences.extend(None if f else c for c, f in zip(conf, forced, strict=True))
    _note_first_choice(rs, res, i, at, n)


def _note_first_choice(rs: RowStats, res: BlockOutcome, i: int, at: int, n: int) -> None:
    """Note on ``rs`` the first choice row ``i`` made in the block's first ``n`` positions
    (output positions from ``at`` on), unless it made one before."""
    if rs.first_choice is None:
        made = [c for c in res.choices[i] if c.offset < n] if res.choices else []
        if made:
            rs.first_choice = replace(made[0], offset=at + made[0].offset)


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
                        # Not output, but a choice made: a second decode may try another.
                        _note_first_choice(rs, res, i, len(out[r]), len(row))
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
