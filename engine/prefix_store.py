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
prompt changes every earlier key, and the store refuses them.
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

    def __len__(self) -> int:
        return len(self._entries)

    def fill(self, cache: KVCache, prompt: Sequence[int], limit: int) -> int:
        """Copy the longest stored prefix of ``prompt``, at most ``limit`` tokens, into
        row 0 of the empty ``cache``; return how many tokens it holds now (0: none)."""
        if cache.length != 0:
            raise ValueError("fill needs an empty cache")
        with self._lock:
            best, n = None, 0
            for entry in self._entries.values():
                m = _common_prefix(entry.tokens, prompt, limit)
                if m > n:
                    best, n = entry, m
            if best is None or n < self.min_reuse:
                return 0
            self._entries.move_to_end(best.tokens)
            self.reused_tokens += n
        if n > cache.max_len:
            cache.reserve(n)
        cache.k[:, 0, :, :n] = best.k[:, :, :n]
        cache.v[:, 0, :, :n] = best.v[:, :, :n]
        cache.block_ids[0, :n] = torch.arange(n, device=cache.block_ids.device)
        cache.valid[0, :n] = True
        cache.length = n
        return n

    def save(self, cache: KVCache, prompt: Sequence[int]) -> None:
        """Keep the keys and values of ``prompt`` from row 0 of ``cache``, whose first
        ``len(prompt)`` positions (or as many as it holds) are that prompt's."""
        n = min(len(prompt), cache.length)
        if n < self.min_reuse:
            return
        tokens = tuple(int(t) for t in prompt[:n])
        entry = _Entry(tokens, cache.k[:, 0, :, :n].clone(), cache.v[:, 0, :, :n].clone())
        with self._lock:
            # A stored prompt this one extends (or repeats) is no longer needed.
            for key in [k for k in self._entries if _common_prefix(k, tokens, len(k)) == len(k)]:
                del self._entries[key]
            self._entries[tokens] = entry
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
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
