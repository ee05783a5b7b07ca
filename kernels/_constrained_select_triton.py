"""Triton implementation of :func:`agentflow.kernels.constrained_select` (imported lazily).

One program per row streams the row's logits in ``BLOCK_V`` chunks and keeps,
in registers, the running max and rescaled sum of ``exp`` (online softmax), the
best key (score, plus Gumbel noise when sampling) and the chosen token's score.
Nothing of size V is written back.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _fmix32(h):
    h ^= h >> 16
    h *= 0x85EBCA6B
    h ^= h >> 13
    h *= 0xC2B2AE35
    h ^= h >> 16
    return h


@triton.jit
def _select_kernel(
    logits_ptr,
    allowed_ptr,
    token_ptr,
    conf_ptr,
    V,
    stride_logits,
    stride_allowed,
    inv_temp,
    seed_key,
    HAS_MASK: tl.constexpr,
    SAMPLE: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_V)
    row_logits = logits_ptr + row.to(tl.int64) * stride_logits
    row_allowed = allowed_ptr + row.to(tl.int64) * stride_allowed
    row_hash = _fmix32(row.to(tl.uint32) ^ seed_key.to(tl.uint32))

    neg_inf = float("-inf")
    run_max = tl.full([], neg_inf, tl.float32)
    run_sum = tl.full([], 0.0, tl.float32)
    best_key = tl.full([], neg_inf, tl.float32)
    best_score = tl.full([], neg_inf, tl.float32)
    best_idx = tl.full([], -1, tl.int32)
    for start in range(0, V, BLOCK_V):
        cols = start + offs
        ok = cols < V
        x = tl.load(row_logits + cols, mask=ok, other=neg_inf).to(tl.float32) * inv_temp
        if HAS_MASK:
            words = tl.load(row_allowed + cols // 32, mask=ok, other=0)
            ok = ok & (((words >> (cols % 32)) & 1) != 0)
        x = tl.where(ok, x, neg_inf)

        new_max = tl.maximum(run_max, tl.max(x, 0))
        # Subtract a finite stand-in while everything so far is -inf (avoids -inf - -inf).
        pivot = tl.where(new_max > neg_inf, new_max, 0.0)
        run_sum = run_sum * tl.exp(run_max - pivot) + tl.sum(tl.exp(x - pivot), 0)
        run_max = new_max

        if SAMPLE:
            h = _fmix32(cols.to(tl.uint32) ^ row_hash)
            u = ((h >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)
            key = x - tl.log(-tl.log(u))
        else:
            key = x
        blk_key = tl.max(key, 0)
        blk_arg = tl.argmax(key, 0)
        blk_score = tl.max(tl.where(offs == blk_arg, x, neg_inf), 0)
        better = blk_key > best_key
        best_key = tl.where(better, blk_key, best_key)
        best_score = tl.where(better, blk_score, best_score)
        best_idx = tl.where(better, start + blk_arg, best_idx)

    valid = best_score > neg_inf
    pivot = tl.where(valid, run_max, 0.0)
    conf = tl.where(valid, tl.exp(best_score - pivot) / tl.maximum(run_sum, 1e-30), 0.0)
    tok = tl.where(valid, best_idx, -1)
    tl.store(token_ptr + row, tok.to(tl.int64))
    tl.store(conf_ptr + row, conf)


def launch(
    logits: Tensor, allowed: Tensor | None, temperature: float, seed_key: int
) -> tuple[Tensor, Tensor]:
    """Run the kernel; ``seed_key`` is :func:`agentflow.kernels.gumbel.seed_mix` of the seed."""
    n, v = logits.shape
    token = torch.empty(n, dtype=torch.int64, device=logits.device)
    conf = torch.empty(n, dtype=torch.float32, device=logits.device)
    if n == 0:
        return token, conf
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    has_mask = allowed is not None
    if allowed is not None:
        allowed = allowed if allowed.stride(1) == 1 else allowed.contiguous()
    mask_arg = allowed if allowed is not None else logits  # never read when HAS_MASK is False
    block_v = min(4096, triton.next_power_of_2(max(v, 32)))
    _select_kernel[(n,)](
        logits,
        mask_arg,
        token,
        conf,
        v,
        logits.stride(0),
        allowed.stride(0) if allowed is not None else 0,
        1.0 / temperature if temperature > 0 else 1.0,
        seed_key,
        HAS_MASK=has_mask,
        SAMPLE=temperature > 0,
        BLOCK_V=block_v,
    )
    return token, conf
