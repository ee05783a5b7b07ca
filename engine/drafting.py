"""The diffusion side of hybrid decoding: one request's drafter, its KV cache and its drafts.

A :class:`Drafter` holds the drafter's cache and the clean tokens not yet in it
(``pending``). A draft block is never written to the cache: the tokens the
verifier keeps (plus its own next token) are appended to ``pending`` and enter
the cache with the next draft's first forward pass, exactly as the block
sampler carries a finished block into the next one. So rolling the drafter
back to the accepted prefix costs nothing.

Block ids: the prompt is causal (block id = position); the tokens kept in one
verify round share one block id, the position of their first token, so a fully
kept block looks to the drafter exactly like a finished block of the block
sampler. A draft block's id is its first position, larger than every id before
it. Bidirectional drafters (LLaDA, Dream) use block id 0 everywhere and rebuild
their cache from the whole history at each draft, as the block sampler does.

Two kinds of draft:

- :meth:`Drafter.denoise` — the block sampler's own multi-step denoising
  (:func:`~agentflow.engine.block_denoising.denoise_block`) under the constraint's
  in-step enforcement. Used for greedy hybrid decoding and for the diffusion
  pass of ``mode="auto"``.
- :meth:`Drafter.parallel` — one forward pass over the masked block, then a
  walk left to right under the constraint: each position takes the masked
  argmax (greedy) or is drawn from that pass's distribution (sampling), and the
  constraint's forced tokens follow it without a pass of their own. A sampled
  draft token is then drawn from a distribution ``q`` known exactly given
  everything before it, which the speculative-sampling rule needs to be exact
  (see ``docs/hybrid.md``). The walk keeps each position's allowed mask and
  the forced run after each token, so the verifier, walking the same prefix,
  does not ask the constraint again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from .block_denoising import denoise_block
from .constraints.protocol import DecodeConstraint
from .decode_batch import Segment, left_pad
from .generation import GenerationConfig, end_index
from .model import KVCache, Transformer
from .prefix_store import PrefixStore
from .speculative import greedy_pick, sample, target_probs


@dataclass
class Draft:
    """A proposed continuation of the accepted prefix."""

    tokens: list[int]
    #: Per token, the distribution it was drawn from; None where it was deterministic.
    probs: list[Tensor | None]
    #: Allowed-token masks at the prefix before token ``j`` (one-pass drafts only).
    masks: dict[int, Tensor] = field(default_factory=dict)
    #: The constraint's whole forced run after token ``j`` (one-pass drafts only; the
    #: draft itself may hold fewer of them when it ends first).
    forced_after: dict[int, list[int]] = field(default_factory=dict)
    #: Drafter forward passes spent on this draft.
    nfe: int = 0


def grow_cache(cache: KVCache, need: int) -> None:
    """Make room for ``need`` positions, at least doubling (appending to a cache copies it)."""
    if need > cache.max_len:
        cache.reserve(max(need, 2 * cache.max_len))


def cut_after_end(tokens: list[int], ends: Collection[int]) -> list[int]:
    """``tokens`` up to and including the first end token (any of ``ends``)."""
    cut = end_index(tokens, ends)
    return tokens if cut is None else tokens[: cut + 1]


class Drafter:
    """One request's diffusion drafter: cache, pending clean tokens, next position."""

    def __init__(
        self,
        model: Transformer,
        prompt: list[int],
        capacity: int = 0,
        store: PrefixStore | None = None,
    ) -> None:
        """``capacity``: cache positions to allocate up front (it grows when exceeded).
        ``store``: earlier prompts' keys and values (causal-prompt drafters): the first
        draft copies the longest prefix of ``prompt`` found there instead of reading it,
        and keeps the prompt there once read."""
        cfg = model.config
        if cfg.mask_token_id is None:
            raise ValueError(
                "the drafter's config has no mask_token_id; it cannot draft by diffusion"
            )
        if cfg.attention == "causal":
            raise ValueError(
                "the drafter must be a diffusion model (block or bidirectional attention)"
            )
        self.model = model
        self.bidirectional = cfg.attention == "bidirectional"
        dev = next(model.parameters()).device
        pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        seg, _ = left_pad([prompt], pad_id, dev)
        if self.bidirectional:
            seg.block_ids.zero_()
        self.pending = seg
        # Only a bidirectional drafter re-reads its whole history at each draft.
        self.history = seg if self.bidirectional else None
        self.position = len(prompt)
        # Allocated by the first draft: a request the verifier decodes alone never needs it.
        self.cache: KVCache | None = None
        self._size = max(capacity, len(prompt) + 2 * cfg.block_length + 8)
        self._dtype = next(model.parameters()).dtype
        self._carry = seg
        self._cache_len = 0
        # Kept tokens not yet turned into tensors, (tokens, first position) per round.
        self._pieces: list[tuple[list[int], int]] = []
        #: Drafts made so far (the first one also prefills the cache).
        self.drafts = 0
        self._prompt = list(prompt)
        self._store = None if self.bidirectional else store
        self._stored = False
        #: Prompt tokens the first draft copied from the store.
        self.cached_tokens = 0

    @property
    def device(self) -> torch.device:
        return self.pending.tokens.device

    def _ids(self, length: int, block_id: int) -> Tensor:
        value = 0 if self.bidirectional else block_id
        return torch.full((1, length), value, dtype=torch.long, device=self.device)

    def _masked_block(self, length: int) -> Segment:
        cfg = self.model.config
        positions = (self.position + torch.arange(length, device=self.device)).unsqueeze(0)
        return Segment(
            torch.full((1, length), cfg.mask_token_id or 0, dtype=torch.long, device=self.device),
            positions,
            self._ids(length, self.position),
            torch.ones(1, length, dtype=torch.bool, device=self.device),
        )

    def _flush(self) -> None:
        """Turn the kept tokens accepted since the last draft into one pending segment."""
        if not self._pieces:
            return
        tokens = [t for piece, _ in self._pieces for t in piece]
        positions = [start + i for piece, start in self._pieces for i in range(len(piece))]
        ids = [0 if self.bidirectional else start for piece, start in self._pieces for _ in piece]
        dev = self.device
        seg = Segment(
            torch.tensor([tokens], dtype=torch.long, device=dev),
            torch.tensor([positions], dtype=torch.long, device=dev),
            torch.tensor([ids], dtype=torch.long, device=dev),
            torch.ones(1, len(tokens), dtype=torch.bool, device=dev),
        )
        self._pieces.clear()
        self.pending = self._carry.cat(seg)
        self._carry = self.pending
        if self.history is not None:
            self.history = self.history.cat(seg)

    def _start(self, length: int) -> KVCache:
        self._flush()
        self.drafts += 1
        if self.cache is None:
            need = max(self._size, self.pending.length + length + 8)
            self.cache = KVCache(self.model.config, 1, need, device=self.device, dtype=self._dtype)
            if self._store is not None:
                shift = self.model.config.logits_shift
                reused = self._store.fill(self.cache, self._prompt, len(self._prompt) - shift)
                self.pending = self.pending.slice(reused)
                self.cached_tokens = reused
        if self.history is not None:
            self.cache.truncate(0)
            self.pending = self.history
        grow_cache(self.cache, self.cache.length + self.pending.length + length)
        self._cache_len = self.cache.length
        self._carry = self.pending
        return self.cache

    def _remember_prompt(self) -> None:
        """Once a draft has read the prompt into the cache, keep it in the store."""
        if self._store is not None and not self._stored and self.cache is not None:
            self._stored = True
            self._store.save(self.cache, self._prompt)

    def cancel(self) -> None:
        """Forget a draft that failed midway: the cache and pending tokens are as before it."""
        if self.cache is not None:
            self.cache.truncate(min(self._cache_len, self.cache.length))
        self._carry = self.pending

    def accept(self, tokens: list[int]) -> None:
        """Append the tokens kept this round; they enter the cache with the next draft."""
        if tokens:
            self._pieces.append((list(tokens), self.position))
            self.position += len(tokens)

    def denoise(
        self,
        length: int,
        constraint: DecodeConstraint | None,
        config: GenerationConfig,
        *,
        seed: int | None,
        block_index: int,
    ) -> Draft:
        """A block of ``length`` by multi-step denoising; the constraint is not advanced."""
        cache = self._start(length)
        block = self._masked_block(length)
        cfg = replace(config, max_new_tokens=length, block_length=length)
        res = denoise_block(
            self.model,
            cache,
            self.pending,
            block,
            cfg,
            constraints=[constraint],
            seeds=[seed],
            block_index=block_index,
            finish=False,
        )
        self._carry = res.pending.slice(0, res.pending.length - length)
        self._remember_prompt()
        tokens = cut_after_end(res.tokens[0].tolist(), self.model.config.end_token_ids)
        return Draft(tokens=tokens, probs=[None] * len(tokens), nfe=res.nfe)

    def _block_logits(self, length: int) -> Tensor:
        """One forward pass over [pending + masked block]; the block's logits fp32 [L, V]."""
        cfg = self.model.config
        shift = cfg.logits_shift
        cache = self._start(length)
        seg = self.pending.cat(self._masked_block(length))
        commit = self.pending.length - shift
        logits = self.model(
            seg.tokens,
            positions=seg.positions,
            block_ids=seg.block_ids,
            valid=seg.valid,
            cache=cache,
            commit_len=commit,
        )
        self._carry = self.pending.slice(commit)
        self._remember_prompt()
        out = logits[0, commit : commit + length].float()
        if cfg.mask_token_id is not None:
            out[:, cfg.mask_token_id] = float("-inf")
        return out

    def parallel(
        self,
        length: int,
        constraint: DecodeConstraint | None,
        config: GenerationConfig,
        generator: torch.Generator | None,
        budget_left: int,
    ) -> Draft:
        """A block from one forward pass, picked left to right under the constraint.

        Greedy (``temperature == 0``): each position's constrained greedy token
        (:func:`~.speculative.greedy_pick`). Sampling: each
        position drawn from that pass's distribution; ``probs`` holds it. After each
        picked token the constraint's forced tokens follow (deterministic, as in
        autoregressive decoding); the constraint is restored before returning.
        """
        logits = self._block_logits(length)
        greedy = config.temperature == 0.0
        tops = logits.argmax(dim=-1).tolist() if greedy else []
        ends = self.model.config.end_token_ids
        draft = Draft(tokens=[], probs=[], nfe=1)
        tokens = draft.tokens
        snapshot = constraint.checkpoint() if constraint is not None else None
        try:
            while len(tokens) < length:
                j = len(tokens)
                mask = constraint.next_token_mask() if constraint is not None else None
                if mask is not None:
                    draft.masks[j] = mask
                if greedy:
                    refused = constraint.refused_pick if constraint is not None else None
                    tok = greedy_pick(logits[j], mask, tops[j], refused)
                    if tok < 0:  # nothing allowed here: the verifier will say so
                        break
                    q = None
                else:
                    q = target_probs(
                        logits[j], temperature=config.temperature, top_p=config.top_p, allowed=mask
                    )
                    tok = sample(q, generator)
                tokens.append(tok)
                draft.probs.append(q)
                if tok in ends:
                    break
                if constraint is None:
                    continue
                constraint.advance([tok])
                if constraint.done:
                    break
                run = constraint.forced_tokens()
                draft.forced_after[j] = run
                room = min(length - len(tokens), budget_left - len(tokens) - 1)
                forced = run[: max(room, 0)]
                if forced:
                    constraint.advance(forced)
                    tokens += forced
                    draft.probs += [None] * len(forced)
        finally:
            if constraint is not None:
                constraint.rollback(snapshot)
        return draft
