"""Keys and values of recent prompts, for later prompts that start the same way.

An agent's steps share most of their prompt: step 2 is step 1's prompt plus
the action and the tool's result, and an ``auto`` step re-done in hybrid mode
reads the very prompt its diffusion attempt read. For a model whose prompt
attention is causal (``causal`` and ``block`` checkpoints: a prompt token sees
only the tokens before it), a token's key and value depend on the tokens before
it alone, so a prompt's cached prefix serves any prompt that starts with it.
:class:`PrefixStore` keeps the prompt part of recent single-row caches and
copies the longest stored prefix into a new cache, which then reads only the
rest: the prefix-caching idea of vLLM and SGLang, for one process and a few
prompts. The reused keys and values equal recomputed ones up to float rounding
(~1e-5 on the embedded models: GEMMs over a different number of rows), the
same kind of difference a verify pass's shape already makes.

Bidirectional checkpoints (LLaDA, Dream) read their prompt both ways: a longer
prompt changes every earlier key, and the store refuses them. The stored values
belong to the weights that computed them: after changing a model's weights in
place, :meth:`PrefixStore.clear` its engines' stores (or build new engines).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .model import KVCache, Transformer

#: Prompts kept per model (least recently used dropped first).
DEFAULT_CAPACITY = 8
#: Shorter shared prefixes are not worth a copy.
MIN_REUSE = 16


@dataclass(frozen=True)
class _Entry:
    tokens: tuple[int, ...]
    #: [layers, kv_heads, n, head_dim], one row's keys and values at positions 0..n-1.
    k: Tensor
    v: Tensor


class PrefixStore:
    """The cached prompt prefixes of one model (single-row caches, positions from 0)."""

    def __init__(
        self, model: Transformer, capacity: int = DEFAULT_CAPACITY, min_reuse: int = MIN_REUSE
    ) -> None:
        if model.config.attention == "bidirectional":
            raise ValueError("a bidirectional model's prompt keys depend on the whole prompt")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.min_reuse = max(1, min_reuse)
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        #: Prompt tokens read from the store instead of a forward pass, over all fills.
        self.reused_tokens = 0

    @classmethod
    def for_model(cls, model: Transformer, capacity: int) -> PrefixStore | None:
        """A store for ``model``, or None where there is none to keep (``capacity`` 0, or
        a bidirectional model)."""
        if capacity == 0 or model.config.attention == "bidirectional":
            return None
        return cls(model, capacity)

    def __len__(self) -> int:
        return len(self._entries)

    def fill(self, cache: KVCache, prompt: Sequence[int], limit: int) -> int:
        """Copy the longest stored prefix of ``prompt``, at most ``limit`` tokens, into
        row 0 of the empty ``cache``; return how many tokens it holds now (0: none)."""
        return self.fill_rows(cache, [prompt], len(prompt), len(prompt) - limit)[0]

    def fill_rows(
        self, cache: KVCache, prompts: Sequence[Sequence[int]], width: int, keep: int
    ) -> list[int]:
        """Fill the leading positions of the empty ``cache`` from the store, for left-padded
        rows (``prompts[r]`` ends at position ``width``), as far as every row's stored
        prefix reaches and leaving each row's last ``keep`` tokens to be read; return the
        tokens copied per row (the positions filled are the cache's new length)."""
        if cache.length != 0:
            raise ValueError("fill needs an empty cache")
        with self._lock:
            found = [self._longest(p, len(p) - keep) for p in prompts]
            pads = [width - len(p) for p in prompts]
            reach = min(pad + n for pad, (_, n) in zip(pads, found, strict=True))
            if all(reach - pad < self.min_reuse for pad in pads):
                return [0] * len(prompts)
            for (entry, _), pad in zip(found, pads, strict=True):
                if entry is not None and reach > pad:
                    self._entries.move_to_end(entry.tokens)
                    self.reused_tokens += reach - pad
        if reach > cache.max_len:
            cache.reserve(reach)
        for r, ((entry, _), pad) in enumerate(zip(found, pads, strict=True)):
            n = reach - pad
            if entry is None or n <= 0:
                continue
            cache.k[:, r, :, pad:reach] = entry.k[:, :, :n]
            cache.v[:, r, :, pad:reach] = entry.v[:, :, :n]
            cache.block_ids[r, pad:reach] = torch.arange(n, device=cache.block_ids.device)
            cache.valid[r, pad:reach] = True
        cache.length = reach
        return [max(0, reach - pad) for pad in pads]

    def save(self, cache: KVCache, prompt: Sequence[int]) -> None:
        """Keep the keys and values of ``prompt`` from row 0 of ``cache``, whose first
        ``len(prompt)`` positions (or as many as it holds) are that prompt's."""
        self.save_rows(cache, [prompt], len(prompt))

    def save_rows(self, cache: KVCache, prompts: Sequence[Sequence[int]], width: int) -> None:
        """Keep each left-padded row's prompt (``prompts[r]`` ends at position ``width``)
        from ``cache``, as far as the cache holds it."""
        for r, prompt in enumerate(prompts):
            pad = width - len(prompt)
            n = min(len(prompt), cache.length - pad)
            if n < self.min_reuse:
                continue
            tokens = tuple(int(t) for t in prompt[:n])
            k = cache.k[:, r, :, pad : pad + n].clone()
            v = cache.v[:, r, :, pad : pad + n].clone()
            with self._lock:
                # A stored prompt this one extends (or repeats) is no longer needed.
                for key in [
                    e for e in self._entries if _common_prefix(e, tokens, len(e)) == len(e)
                ]:
                    del self._entries[key]
                self._entries[tokens] = _Entry(tokens, k, v)
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)

    def _longest(self, prompt: Sequence[int], limit: int) -> tuple[_Entry | None, int]:
        """The stored entry sharing the longest prefix with ``prompt`` (at most ``limit``)."""
        best, n = None, 0
        for entry in self._entries.values():
            m = _common_prefix(entry.tokens, prompt, limit)
            if m > n:
                best, n = entry, m
        return (best, n) if n >= self.min_reuse else (None, 0)

    def clear(self) -> None:
        """Forget every stored prompt."""
        with self._lock:
            self._entries.clear()


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the common prefix of ``a`` and ``b``, at most ``limit``."""
    n = max(0, min(len(a), len(b), limit))
    if tuple(a[:n]) == tuple(b[:n]):
        return n
    i = 0
    while a[i] == b[i]:  # they differ before n
        i += 1
    return i
