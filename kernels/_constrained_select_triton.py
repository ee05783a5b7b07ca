"""Triton implementation of :func:`agentflow.kernels.constrained_select` (imported lazily).

One program per row (or per column range of a row, when there are too few rows
to fill the GPU) streams the logits in ``BLOCK_V`` chunks and keeps, in
registers, the running max and rescaled sum of ``exp`` (online softmax), the
best key (score, plus Gumbel noise when sampling), its index and the chosen
token's score. Nothing of size V is written back; split rows write five numbers
per range, merged by a few tiny torch ops.
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
    part_ptr,
    V,
    span,
    stride_logits,
    stride_allowed,
    inv_temp,
    seed_key,
    HAS_MASK: tl.constexpr,
    SAMPLE: tl.constexpr,
    SPLIT: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    part = tl.program_id(1)
    offs = tl.arange(0, BLOCK_V)
    row_logits = logits_ptr + row.to(tl.int64) * stride_logits
    row_allowed = allowed_ptr + row.to(tl.int64) * stride_allowed
    row_hash = _fmix32(row.to(tl.uint32) ^ seed_key.to(tl.uint32))
    lo = part * span
    hi = tl.minimum(lo + span, V)

    neg_inf = float("-inf")
    run_max = tl.full([], neg_inf, tl.float32)
    run_sum = tl.full([], 0.0, tl.float32)
    best_key = tl.full([], neg_inf, tl.float32)
    best_score = tl.full([], neg_inf, tl.float32)
    best_idx = tl.full([], -1, tl.int32)
    for start in range(lo, hi, BLOCK_V):
        cols = start + offs
        ok = cols < hi
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

    if SPLIT:
        # Partials [4, N, P] (max, sum, key, score) as fp32, and the index in token_ptr [N, P].
        n_rows = tl.num_programs(0)
        n_parts = tl.num_programs(1)
        slot = row.to(tl.int64) * n_parts + part
        plane = n_rows.to(tl.int64) * n_parts
        tl.store(part_ptr + slot, run_max)
        tl.store(part_ptr + plane + slot, run_sum)
        tl.store(part_ptr + 2 * plane + slot, best_key)
        tl.store(part_ptr + 3 * plane + slot, best_score)
        tl.store(token_ptr + slot, best_idx.to(tl.int64))
    else:
        valid = best_score > neg_inf
        pivot = tl.where(valid, run_max, 0.0)
        conf = tl.where(valid, tl.exp(best_score - pivot) / tl.maximum(run_sum, 1e-30), 0.0)
        tok = tl.where(valid, best_idx, -1)
        tl.store(token_ptr + row, tok.to(tl.int64))
        tl.store(conf_ptr + row, conf)


def _combine(partials: Tensor, index: Tensor) -> tuple[Tensor, Tensor]:
    """Merge per-split partials [4, N, P] / [N, P] into (token, confidence)."""
    run_max, run_sum, key, score = partials.unbind(0)
    best = run_max.max(dim=1).values
    pivot = torch.where(best > float("-inf"), best, torch.zeros_like(best)).unsqueeze(1)
    total = (run_sum * torch.exp(run_max - pivot)).sum(dim=1)
    part = key.argmax(dim=1, keepdim=True)  # first split among ties = lowest token id
    chosen = score.gather(1, part).squeeze(1)
    valid = chosen > float("-inf")
    conf = torch.exp(chosen - pivot.squeeze(1)) / total.clamp(min=1e-30)
    conf = torch.where(valid, conf, torch.zeros_like(conf))
    token = torch.where(valid, index.gather(1, part).squeeze(1), torch.full_like(chosen, -1).long())
    return token, conf


def _default_splits(n: int, v: int, block_v: int, device: torch.device) -> int:
    """Split long rows across programs when there are too few rows to fill the GPU."""
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    chunks = triton.cdiv(v, block_v)
    return max(1, min(chunks, (4 * sms) // max(n, 1)))


def launch(
    logits: Tensor,
    allowed: Tensor | None,
    temperature: float,
    seed_key: int,
    *,
    block_v: int | None = None,
    splits: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Run the kernel; ``seed_key`` is :func:`agentflow.kernels.gumbel.seed_mix` of the seed.

    ``splits`` > 1 divides each row into that many column ranges, one program
    each, and merges their partial results (default: chosen from the GPU's size).
    """
    n, v = logits.shape
    token = torch.empty(n, dtype=torch.int64, device=logits.device)
    conf = torch.empty(n, dtype=torch.float32, device=logits.device)
    if n == 0:
        return token, conf
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    if allowed is not None:
        allowed = allowed if allowed.stride(1) == 1 else allowed.contiguous()
    mask_arg = allowed if allowed is not None else logits  # never read when HAS_MASK is False
    block_v = block_v or min(4096, triton.next_power_of_2(max(v, 32)))
    if splits is None:
        splits = _default_splits(n, v, block_v, logits.device)
    span = triton.cdiv(triton.cdiv(v, splits), block_v) * block_v  # whole blocks per split
    splits = triton.cdiv(v, span)
    split = splits > 1
    index = torch.empty(n, splits, dtype=torch.int64, device=logits.device) if split else token
    partials = (
        torch.empty(4, n, splits, dtype=torch.float32, device=logits.device) if split else conf
    )
    _select_kernel[(n, splits)](
        logits,
        mask_arg,
        index,
        conf,
        partials,
        v,
        span,
        logits.stride(0),
        allowed.stride(0) if allowed is not None else 0,
        1.0 / temperature if temperature > 0 else 1.0,
        seed_key,
        HAS_MASK=allowed is not None,
        SAMPLE=temperature > 0,
        SPLIT=split,
        BLOCK_V=block_v,
    )
    if split:
        return _combine(partials, index)
    return token, conf
