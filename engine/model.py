"""One transformer for every checkpoint: RMSNorm, RoPE, SwiGLU, GQA, optional qkv bias.

Attention visibility is expressed with *block ids*: a query may see a key iff
``key_block <= query_block`` (and the key is valid). That single rule covers the
three attention modes:

- ``causal``: block id = position (each token its own block);
- ``bidirectional``: block id = 0 everywhere;
- ``block``: full attention inside a block, causal across blocks. The prompt is
  causal (one token per block) and each generated block of ``block_length``
  tokens shares one id.

Callers may also pass an explicit boolean ``attn_mask`` (training uses it for the
BD3-LM "clean copy + noised copy" layout).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .generation import COMMIT_ORDERS, CommitOrder
from .rope import apply_rope, check_rope_scaling, inverse_frequencies, rope_tables

AttentionMode = Literal["bidirectional", "causal", "block"]


@dataclass
class ModelConfig:
    """Shape and behaviour of a :class:`Transformer`."""

    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    max_seq_len: int = 2048
    rope_theta: float = 10000.0
    #: A checkpoint's ``rope_scaling`` object (:mod:`.rope`: ``linear``, ``llama3``); None: none.
    rope_scaling: dict[str, Any] | None = None
    norm_eps: float = 1e-5
    qkv_bias: bool = False
    tie_embeddings: bool = True
    attention: AttentionMode = "block"
    block_length: int = 16
    mask_token_id: int | None = None
    end_token_id: int | None = None
    pad_token_id: int | None = None
    #: More tokens that end a generation like ``end_token_id`` does: a chat model's
    #: end of turn (``<|eot_id|>``) next to its end of text (the checkpoint's
    #: ``eos_token_id`` list, ``generation_config.json``, ``tokenizer_config.json``).
    extra_end_token_ids: tuple[int, ...] = ()
    # Dream-style models predict token i from the logits at i - 1.
    logits_shift: int = 0
    #: The sampler's default commit order for this model (``GenerationConfig.order`` overrides).
    commit_order: CommitOrder = "confidence"

    def __post_init__(self) -> None:
        self.extra_end_token_ids = tuple(
            int(t) for t in self.extra_end_token_ids if t != self.end_token_id
        )
        check_rope_scaling(self.rope_scaling)
        if self.commit_order not in COMMIT_ORDERS:
            raise ValueError(
                f"commit_order must be one of {', '.join(COMMIT_ORDERS)}, got {self.commit_order!r}"
            )

    @property
    def end_token_ids(self) -> frozenset[int]:
        """Every token that ends a generation (empty when the model has none)."""
        first = () if self.end_token_id is None else (self.end_token_id,)
        return frozenset((*first, *self.extra_end_token_ids))

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _linear(x: Tensor, layer: nn.Linear) -> Tensor:
    return F.linear(x, layer.weight, layer.bias)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        # One fused op (in float32, then back): a 1-token pass calls this 9 times.
        out = F.rms_norm(x.float(), self.weight.shape, self.weight.float(), self.eps)
        return out.to(x.dtype)


class KVCache:
    """Pre-allocated keys/values for every layer, shared length across the batch.

    Rows of a batch are left-padded by the caller; ``valid`` marks real keys and
    ``block_ids`` carries each key's block id for the visibility rule.
    """

    def __init__(
        self,
        config: ModelConfig,
        batch_size: int,
        max_len: int,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (config.n_layers, batch_size, config.n_kv_heads, max_len, config.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.block_ids = torch.zeros(batch_size, max_len, dtype=torch.long, device=device)
        self.valid = torch.zeros(batch_size, max_len, dtype=torch.bool, device=device)
        self.length = 0
        self.max_len = max_len

    @property
    def batch_size(self) -> int:
        return self.k.shape[1]

    def truncate(self, length: int) -> None:
        """Roll the cache back to its first ``length`` positions."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of length {self.length} to {length}")
        self.valid[:, length : self.length] = False
        self.length = length

    def reserve(self, max_len: int) -> None:
        """Grow the cache to hold at least ``max_len`` positions, keeping its contents."""
        if max_len <= self.max_len:
            return
        extra = max_len - self.max_len
        pad = (*self.k.shape[:3], extra, self.k.shape[4])
        self.k = torch.cat((self.k, self.k.new_zeros(pad)), dim=3)
        self.v = torch.cat((self.v, self.v.new_zeros(pad)), dim=3)
        self.block_ids = torch.cat(
            (self.block_ids, self.block_ids.new_zeros(self.batch_size, extra)), 1
        )
        self.valid = torch.cat((self.valid, self.valid.new_zeros(self.batch_size, extra)), 1)
        self.max_len = max_len

    def copy_rows(self, rows: Tensor, room: int, length: int | None = None) -> KVCache:
        """A new cache with the first ``length`` (default: all) cached positions of
        ``rows``, and ``room`` more positions; this cache is left as it is."""
        n = self.length if length is None else length
        return KVCache.gather([(self, int(r), n) for r in rows.tolist()], room)

    @staticmethod
    def gather(parts: Sequence[tuple[KVCache, int, int]], room: int) -> KVCache:
        """A new cache whose row ``i`` holds the first ``n`` positions of row ``row``
        of ``cache`` (``parts[i] = (cache, row, n)``), then ``room`` more positions.
        Rows shorter than the longest are padded with invalid entries."""
        if not parts:
            raise ValueError("gather needs at least one part")
        for cache, row, n in parts:
            if not 0 <= n <= cache.length or not 0 <= row < cache.batch_size:
                raise ValueError(
                    f"cannot copy {n} positions of row {row} of a cache of "
                    f"{cache.batch_size} rows and length {cache.length}"
                )
        like = parts[0][0]
        width = max(n for _, _, n in parts) + room
        out = KVCache.__new__(KVCache)
        shape = (like.k.shape[0], len(parts), like.k.shape[2], width, like.k.shape[4])
        out.k, out.v = like.k.new_zeros(shape), like.v.new_zeros(shape)
        out.block_ids = like.block_ids.new_zeros(len(parts), width)
        out.valid = like.valid.new_zeros(len(parts), width)
        for i, (cache, row, n) in enumerate(parts):
            out.k[:, i, :, :n] = cache.k[:, row, :, :n]
            out.v[:, i, :, :n] = cache.v[:, row, :, :n]
            out.block_ids[i, :n] = cache.block_ids[row, :n]
            out.valid[i, :n] = cache.valid[row, :n]
        out.length, out.max_len = width - room, width
        return out

    def select_rows(self, rows: Tensor) -> None:
        """Keep only the given batch rows (finished requests leave the batch)."""
        self.k = self.k[:, rows]
        self.v = self.v[:, rows]
        self.block_ids = self.block_ids[rows]
        self.valid = self.valid[rows]


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.head_dim
        hd = config.head_dim
        self.wq = nn.Linear(config.dim, config.n_heads * hd, bias=config.qkv_bias)
        self.wk = nn.Linear(config.dim, config.n_kv_heads * hd, bias=config.qkv_bias)
        self.wv = nn.Linear(config.dim, config.n_kv_heads * hd, bias=config.qkv_bias)
        self.wo = nn.Linear(config.n_heads * hd, config.dim, bias=False)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        mask: Tensor,
        cache: KVCache | None,
        layer: int,
        commit_len: int,
    ) -> Tensor:
        b, t, _ = x.shape
        # F.linear rather than the modules' __call__: same math, without the module
        # dispatch that costs about as much as the product itself at these sizes.
        q = _linear(x, self.wq).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = _linear(x, self.wk).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = _linear(x, self.wv).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            # Write all new keys/values after the cached ones and attend over a view of
            # the cache (no copy). Only the first ``commit_len`` count as cached: the
            # rest is scratch space beyond ``cache.length``, overwritten next call.
            start, end = cache.length, cache.length + t
            cache.k[layer, :, :, start:end] = k
            cache.v[layer, :, :, start:end] = v
            k, v = cache.k[layer, :, :, :end], cache.v[layer, :, :, :end]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask.unsqueeze(1), enable_gqa=self.n_heads != self.n_kv_heads
        )
        return _linear(out.transpose(1, 2).reshape(b, t, -1), self.wo)


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.ffn_dim, bias=False)  # gate
        self.w3 = nn.Linear(config.dim, config.ffn_dim, bias=False)  # up
        self.w2 = nn.Linear(config.ffn_dim, config.dim, bias=False)  # down

    def forward(self, x: Tensor) -> Tensor:
        return _linear(F.silu(_linear(x, self.w1)) * _linear(x, self.w3), self.w2)


class Block(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)
        self.feed_forward = FeedForward(config)

    def forward(self, x: Tensor, cos, sin, mask, cache, layer: int, commit_len: int) -> Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, mask, cache, layer, commit_len)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    """Decoder stack shared by diffusion and autoregressive checkpoints."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # nn.Embedding's own init (a standard normal) is skipped on the "meta" device, where
        # checkpoints are built before their weights are assigned: normal_ on meta tensors
        # imports torch._dynamo, ~1.6 s of the first load in a process.
        weight = torch.empty(config.vocab_size, config.dim)
        if weight.device.type != "meta":
            nn.init.normal_(weight)
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim, _weight=weight)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.output = (
            None if config.tie_embeddings else nn.Linear(config.dim, config.vocab_size, bias=False)
        )
        self._inv_freq: dict[torch.device, Tensor] = {}  # RoPE frequencies per device

    def init_weights(self, seed: int = 0) -> None:
        """GPT-2 style initialisation (used for training from scratch and tests)."""
        gen = torch.Generator().manual_seed(seed)
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 1:
                if name.endswith("bias"):
                    p.data.zero_()
                else:
                    p.data.fill_(1.0)
                continue
            scale = (
                std / math.sqrt(2 * self.config.n_layers)
                if name.endswith(("wo.weight", "w2.weight"))
                else std
            )
            p.data.copy_(torch.randn(p.shape, generator=gen) * scale)

    def default_block_ids(self, positions: Tensor) -> Tensor:
        """Block ids implied by the attention mode for a plain (prompt-like) sequence."""
        mode = self.config.attention
        if mode == "bidirectional":
            return torch.zeros_like(positions)
        return positions.clone()

    def forward(
        self,
        tokens: Tensor,
        *,
        positions: Tensor | None = None,
        block_ids: Tensor | None = None,
        valid: Tensor | None = None,
        cache: KVCache | None = None,
        commit_len: int = 0,
        attn_mask: Tensor | None = None,
        hidden_only: bool = False,
    ) -> Tensor:
        """Logits [B, T, V] for ``tokens`` [B, T] (final hidden states [B, T, D] with ``hidden_only``).

        ``positions``/``block_ids``/``valid`` are [B, T]; defaults: positions count
        on from the cache, block ids follow the attention mode, every token valid.
        With a ``cache``, the new tokens see the cached keys; the first
        ``commit_len`` of them are appended to the cache afterwards.
        ``attn_mask`` [B, T, T_total] overrides the block-id rule.
        """
        b, t = tokens.shape
        start = cache.length if cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + t, device=tokens.device).expand(b, t)
        if block_ids is None:
            block_ids = self.default_block_ids(positions)
        if valid is None:
            valid = torch.ones(b, t, dtype=torch.bool, device=tokens.device)
        if cache is not None and start + t > cache.max_len:
            raise ValueError(f"KV cache overflow: {start + t} > {cache.max_len}")

        if attn_mask is None:
            if cache is not None:
                key_blocks = torch.cat((cache.block_ids[:, :start], block_ids), dim=1)
                key_valid = torch.cat((cache.valid[:, :start], valid), dim=1)
            else:
                key_blocks, key_valid = block_ids, valid
            attn_mask = (key_blocks.unsqueeze(1) <= block_ids.unsqueeze(2)) & key_valid.unsqueeze(1)
            # A padded query row with no visible key would produce NaNs; let it see itself.
            eye = torch.eye(t, dtype=torch.bool, device=tokens.device)
            attn_mask[:, :, start:] |= eye & ~valid.unsqueeze(2)

        cos, sin = rope_tables(positions, self._inverse_frequencies(positions.device))
        x = self.tok_embeddings(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, attn_mask, cache, i, commit_len)
        if cache is not None and commit_len:
            cache.block_ids[:, start : start + commit_len] = block_ids[:, :commit_len]
            cache.valid[:, start : start + commit_len] = valid[:, :commit_len]
            cache.length = start + commit_len
        x = self.norm(x)
        return x if hidden_only else self.project(x)

    def _inverse_frequencies(self, device: torch.device) -> Tensor:
        """The rotation frequencies, computed once per device (every pass needs them)."""
        inv_freq = self._inv_freq.get(device)
        if inv_freq is None:
            c = self.config
            inv_freq = inverse_frequencies(c.head_dim, c.rope_theta, c.rope_scaling, device)
            self._inv_freq[device] = inv_freq
        return inv_freq

    def project(self, hidden: Tensor) -> Tensor:
        """Vocabulary logits for final hidden states (training projects only the positions it scores)."""
        weight = self.tok_embeddings.weight if self.output is None else self.output.weight
        return F.linear(hidden, weight)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
