"""Autoregressive decoding with a KV cache: the verifier's and the baseline's path.

:class:`ARDecoder` decodes a causal checkpoint token by token. With a
constraint, the tokens it forces after the prefix (``forced_tokens``) are
appended without sampling and fed to the model in the same forward pass as the
sampled token before them, so a forced run costs no extra forward pass.
Rows of a batch may append different numbers of tokens in one step; the
shorter ones are right-padded with invalid tokens, which nothing ever attends to.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from .choice_scoring import (
    ChoicePrior,
    ChoicePriors,
    ChoiceQuery,
    choice_prior_list,
    choose,
    supports_choices,
)
from .constraints.copy_choices import likeliest_starts
from .constraints.protocol import ChoiceConstraint, DecodeConstraint
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
    RowStats,
    end_index,
)
from .model import KVCache, Transformer
from .prefix_store import DEFAULT_CAPACITY, PrefixStore
from .selection import select_tokens
from .speculative import greedy_pick
from .tokenizer import Tokenizer


def causal_forward(
    model: Transformer, cache: KVCache, segment: Segment, *, hidden_only: bool = False
) -> Tensor:
    """Forward ``segment`` with causal visibility, append all of it to ``cache``; logits [b, T, V].

    The cache grows when needed. This is the hybrid verifier's scoring call:
    roll back with ``cache.truncate`` afterwards to drop rejected tokens.
    ``hidden_only`` returns final hidden states instead (project the positions
    you need with ``model.project``).
    """
    cache.reserve(cache.length + segment.length)
    return model(
        segment.tokens,
        positions=segment.positions,
        block_ids=segment.positions,
        valid=segment.valid,
        cache=cache,
        commit_len=segment.length,
        hidden_only=hidden_only,
    )


def _right_pad(
    pieces: list[list[int]], starts: Tensor, pad_id: int, device: torch.device
) -> Segment:
    """Per-row token runs (different lengths) as one right-padded segment; padding is invalid."""
    width = max(len(p) for p in pieces)
    tokens = torch.full((len(pieces), width), pad_id, dtype=torch.long, device=device)
    valid = torch.zeros(len(pieces), width, dtype=torch.bool, device=device)
    for i, p in enumerate(pieces):
        tokens[i, : len(p)] = torch.tensor(p, dtype=torch.long, device=device)
        valid[i, : len(p)] = True
    positions = starts.unsqueeze(1) + torch.arange(width, device=device)
    return Segment(tokens, positions, positions.clone(), valid)


class ARDecoder:
    """Token-by-token decoding of a causal (or block-trained, read causally) :class:`Transformer`."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer | None = None,
        *,
        prompt_cache: int = DEFAULT_CAPACITY,
    ) -> None:
        """``prompt_cache``: recent prompts whose keys and values later prompts that start
        the same way copy instead of reading (:mod:`.prefix_store`; 0: off)."""
        if model.config.attention == "bidirectional":
            raise ValueError("a bidirectional model cannot be decoded autoregressively")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.prompts = PrefixStore.for_model(model, prompt_cache)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        """An empty cache of the model's dtype on the model's device."""
        dtype = next(self.model.parameters()).dtype
        return KVCache(self.model.config, batch_size, max_len, device=self.device, dtype=dtype)

    def forward(self, cache: KVCache, segment: Segment) -> Tensor:
        """Logits [b, T, V] for ``segment`` after the cached prefix; appends it to the cache."""
        return causal_forward(self.model, cache, segment)

    def _pick(
        self,
        logits: Tensor,
        cons: list[DecodeConstraint | None],
        config: GenerationConfig,
        seeds: list[int | None],
    ) -> list[int]:
        """One token per row from its last logits [b, V], under each row's constraint."""
        b, vocab = logits.shape
        allowed = None
        if any(c is not None for c in cons):
            words = (vocab + 31) // 32
            allowed = torch.full((b, words), -1, dtype=torch.int32, device=logits.device)
            for r, c in enumerate(cons):
                if c is not None:
                    # The constraint may know fewer tokens than the model has logits.
                    mask = c.next_token_mask().to(logits.device)
                    allowed[r] = 0
                    allowed[r, : mask.numel()] = mask
        if config.temperature == 0.0:
            tops = logits.argmax(dim=-1).tolist()
            return [
                greedy_pick(
                    logits[r],
                    None if allowed is None else allowed[r],
                    tops[r],
                    c.refused_pick if c is not None else None,
                )
                for r, c in enumerate(cons)
            ]
        out = []
        for r in range(b):
            tok, _ = select_tokens(
                logits[r : r + 1],
                temperature=config.temperature,
                top_p=config.top_p,
                seed=seeds[r],
                allowed=None if allowed is None else allowed[r : r + 1],
            )
            out.append(int(tok[0]))
        return out

    @torch.inference_mode()
    def generate(
        self,
        prompts: Prompts,
        config: GenerationConfig | None = None,
        *,
        constraints: Constraints = None,
        on_block: BlockCallback | None = None,
        choice_priors: ChoicePriors = None,
    ) -> GenerationResult:
        """Decode a prompt or a batch of prompts token by token (block/steps/threshold are ignored).

        ``choice_priors`` (one per prompt: the conversation without its request)
        calibrate closed choices under ``config.score_choices``.
        """
        config = config or GenerationConfig()
        t0 = time.perf_counter()
        cfg = self.model.config
        ids = encode_prompts(prompts, self.tokenizer)
        b = len(ids)
        cons = constraint_list(constraints, b)
        budgets = check_context(ids, cfg.max_seq_len, config.max_new_tokens)
        priors = choice_prior_list(self.model, choice_priors, ids, config, self.tokenizer)
        dev = self.device
        pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        ends = cfg.end_token_ids
        stats = GenerationStats(mode="ar", rows=[RowStats(prompt_tokens=len(p)) for p in ids])
        out: list[list[int]] = [[] for _ in range(b)]

        # Tokens forced right after the prompt join the prefill.
        first: list[list[int]] = []
        for r, c in enumerate(cons):
            forced = c.forced_tokens()[: budgets[r]] if c is not None else []
            if forced:
                c.advance(forced)  # type: ignore[union-attr]
            first.append(forced)
            if priors[r] is not None:
                priors[r].extend(forced)  # type: ignore[union-attr]
        full = [p + f for p, f in zip(ids, first, strict=True)]
        prompt, _ = left_pad(full, pad_id, dev)
        cache = self.new_cache(b, prompt.length + max(budgets) + 1)
        if self.prompts is not None:
            copied = self.prompts.fill_rows(cache, full, prompt.length, keep=1)
            for r, n in enumerate(copied):  # prompt tokens only (not the forced ones after it)
                stats.rows[r].cached_tokens = min(n, len(ids[r]))
        logits = self.model.project(
            causal_forward(self.model, cache, prompt.slice(cache.length), hidden_only=True)[:, -1]
        )
        if self.prompts is not None:
            self.prompts.save_rows(cache, full, prompt.length)
        stats.nfe += 1
        live: list[int] = []
        nexts = torch.zeros(b, dtype=torch.long, device=dev)
        for r in range(b):
            stats.rows[r].nfe += 1
            self._emit(r, first[r], out, stats, on_block, forced=True)
            nexts[r] = len(ids[r]) + len(first[r])
            if not self._stopped(r, first[r], cons[r], out, budgets, stats):
                live.append(r)
        keep = torch.tensor(live, dtype=torch.long, device=dev)
        if len(live) < b:
            cache.select_rows(keep)
            logits, nexts = logits[keep], nexts[keep]
        step = 0
        while live:
            seeds = [step_seed(config.row_seed(r), step) for r in live]
            picked = self._pick(logits, [cons[r] for r in live], config, seeds)
            chosen = self._choose(
                logits, cache, live, cons, priors, nexts, out, budgets, config, stats
            )
            pieces: list[list[int]] = []
            still: list[int] = []
            for i, r in enumerate(live):
                tok = picked[i]
                if tok < 0:
                    raise InfeasibleConstraintError(
                        f"row {r}: no token is allowed after the prefix"
                    )
                piece = list(chosen.get(i, [tok]))
                tok = piece[-1]
                c = cons[r]
                forced: list[int] = []
                if c is not None:
                    c.advance(piece)
                    if not c.done and tok not in ends:
                        forced = c.forced_tokens()[: budgets[r] - len(out[r]) - len(piece)]
                        if forced:
                            c.advance(forced)
                self._emit(r, piece, out, stats, on_block, forced=False)
                piece += forced
                pieces.append(piece)
                if priors[r] is not None:
                    priors[r].extend(piece)  # type: ignore[union-attr]
                self._emit(r, forced, out, stats, on_block, forced=True)
                if not self._stopped(r, piece, c, out, budgets, stats):
                    still.append(i)
            step += 1
            if not still:
                break
            idx = torch.tensor(still, dtype=torch.long, device=dev)
            if len(still) < len(live):
                cache.select_rows(idx)
                nexts = nexts[idx]
                pieces = [pieces[i] for i in still]
                live = [live[i] for i in still]
            seg = _right_pad(pieces, nexts, pad_id, dev)
            hidden = causal_forward(self.model, cache, seg, hidden_only=True)
            last = torch.tensor([len(p) - 1 for p in pieces], device=dev)
            logits = self.model.project(hidden[torch.arange(len(pieces), device=dev), last])
            nexts = nexts + torch.tensor([len(p) for p in pieces], device=dev)
            stats.nfe += 1
            for r in live:
                stats.rows[r].nfe += 1
        for r, rs in enumerate(stats.rows):
            rs.tokens = len(out[r])
        stats.tokens = sum(rs.tokens for rs in stats.rows)
        stats.forced_tokens = sum(rs.forced_tokens for rs in stats.rows)
        stats.seconds = time.perf_counter() - t0
        texts = [self.tokenizer.decode(s) for s in out] if self.tokenizer is not None else None
        return GenerationResult(out, stats, texts)

    def _choose(
        self,
        logits: Tensor,
        cache: KVCache,
        live: list[int],
        cons: list[DecodeConstraint | None],
        priors: list[ChoicePrior | None],
        nexts: Tensor,
        out: list[list[int]],
        budgets: list[int],
        config: GenerationConfig,
        stats: GenerationStats,
    ) -> dict[int, tuple[int, ...]]:
        """Batch row -> the tokens of the closed choice it makes this step (``score_choices``)."""
        if not config.score_choices or config.temperature > 0 or not supports_choices(self.model):
            return {}
        queries: list[ChoiceQuery] = []
        empty = Segment.empty(logits.device)
        for i, r in enumerate(live):
            c = cons[r]
            if not isinstance(c, ChoiceConstraint):
                continue
            choice = c.next_choice(budgets[r] - len(out[r]))
            if choice is not None:
                first = logits[i].float().log_softmax(-1)
                if choice.copy:
                    choice = likeliest_starts(choice, first)
                    if not choice.candidates:
                        continue  # a copy inside free text that the model is not writing
                queries.append(ChoiceQuery(i, choice, empty, int(nexts[i]), first))
        if not queries:
            return {}
        used = {q.row: p for q in queries if (p := priors[live[q.row]]) is not None}
        before = {i: p.passes for i, p in used.items()}
        given = [(used[q.row], ()) if q.row in used else None for q in queries]
        results = choose(self.model, cache, queries, given, config.choice_prior_weight)
        scored = [q for q in queries if len(q.choice.candidates) > 1 or q.choice.copy]
        if scored:
            stats.nfe += 1
            for q in scored:
                stats.rows[live[q.row]].nfe += 1
        for i, p in used.items():  # the priors' own passes, one row each
            extra = p.passes - before[i]
            stats.nfe += extra
            stats.rows[live[i]].nfe += extra
        # A declined copy choice (None) leaves the row to its own next token.
        return {
            q.row: res.candidate.tokens
            for q, res in zip(queries, results, strict=True)
            if res is not None
        }

    def _emit(
        self,
        r: int,
        piece: list[int],
        out: list[list[int]],
        stats: GenerationStats,
        on_block: BlockCallback | None,
        *,
        forced: bool,
    ) -> None:
        cut = end_index(piece, self.model.config.end_token_ids)
        text = piece if cut is None else piece[:cut]
        if not text:
            return
        out[r].extend(text)
        if forced:
            stats.rows[r].forced_tokens += len(text)
        if on_block is not None:
            on_block(r, text)

    def _stopped(
        self,
        r: int,
        piece: list[int],
        c: DecodeConstraint | None,
        out: list[list[int]],
        budgets: list[int],
        stats: GenerationStats,
    ) -> bool:
        ended = end_index(piece, self.model.config.end_token_ids) is not None
        if ended or (c is not None and c.done):
            stats.rows[r].finished = True
            return True
        return len(out[r]) >= budgets[r]
