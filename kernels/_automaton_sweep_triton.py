"""Triton implementation of :func:`agentflow.kernels.automaton_sweep` (imported lazily).

One program per block row runs the forward sweep then the backward sweep over
the row's positions. State sets live in the output buffers (global memory) and
are read back with volatile loads after a block barrier:

- a mask ORs the successor bitset rows of the states in the set (forward) or
  keeps the states whose successor row meets the next set (backward);
- a fixed token walks that token's (source, destination) pairs and sets bits
  with ``atomic_or``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .sweep_tables import SweepTables


@triton.jit
def _or(a, b):
    return a | b


@triton.jit
def _bits_at(set_ptr, idx, ok):
    words = tl.load(set_ptr + idx // 32, mask=ok, other=0, volatile=True)
    return ((words >> (idx % 32)) & 1) != 0


@triton.jit
def _sweep_kernel(
    tokens_ptr,
    masked_ptr,
    entry_ptr,
    fwd_ptr,
    bwd_ptr,
    succ_ptr,
    tok_off_ptr,
    tok_src_ptr,
    tok_dst_ptr,
    exit_ptr,
    L,
    S,
    W,
    BLOCK_S: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    words = tl.arange(0, BLOCK_W)
    wok = words < W
    states = tl.arange(0, BLOCK_S)
    edges = tl.arange(0, BLOCK_E)
    row_fwd = fwd_ptr + b * (L + 1) * W
    row_bwd = bwd_ptr + b * (L + 1) * W
    row_tok = tokens_ptr + b * L
    row_mask = masked_ptr + b * L

    entry = tl.load(entry_ptr + b).to(tl.int32)
    tl.atomic_or(row_fwd + entry // 32, 1 << (entry % 32))
    exit_words = tl.load(exit_ptr + b * W + words, mask=wok, other=0)
    tl.store(row_bwd + L * W + words, exit_words, mask=wok)
    tl.debug_barrier()

    for i in range(0, L):
        cur = row_fwd + i * W
        nxt = cur + W
        if tl.load(row_mask + i) != 0:
            acc = tl.zeros([BLOCK_W], dtype=tl.int32)
            for q0 in range(0, S, BLOCK_S):
                qs = q0 + states
                member = _bits_at(cur, qs, qs < S) & (qs < S)
                rows = tl.load(
                    succ_ptr + qs[:, None] * W + words[None, :],
                    mask=member[:, None] & wok[None, :],
                    other=0,
                )
                acc = acc | tl.reduce(rows, 0, _or)
            tl.store(nxt + words, acc, mask=wok)
        else:
            t = tl.load(row_tok + i)
            lo = tl.load(tok_off_ptr + t)
            hi = tl.load(tok_off_ptr + t + 1)
            for e0 in range(lo, hi, BLOCK_E):
                es = e0 + edges
                eok = es < hi
                src = tl.load(tok_src_ptr + es, mask=eok, other=0)
                dst = tl.load(tok_dst_ptr + es, mask=eok, other=0)
                hit = eok & _bits_at(cur, src, eok)
                tl.atomic_or(nxt + dst // 32, 1 << (dst % 32), mask=hit)
        tl.debug_barrier()

    for j in range(0, L):
        i = L - 1 - j
        cur = row_bwd + i * W
        nxt = cur + W
        if tl.load(row_mask + i) != 0:
            nxt_words = tl.load(nxt + words, mask=wok, other=0, volatile=True)
            for q0 in range(0, S, BLOCK_S):
                qs = q0 + states
                qok = qs < S
                rows = tl.load(
                    succ_ptr + qs[:, None] * W + words[None, :],
                    mask=qok[:, None] & wok[None, :],
                    other=0,
                )
                meets = tl.reduce(rows & nxt_words[None, :], 1, _or) != 0
                tl.atomic_or(cur + qs // 32, 1 << (qs % 32), mask=qok & meets)
        else:
            t = tl.load(row_tok + i)
            lo = tl.load(tok_off_ptr + t)
            hi = tl.load(tok_off_ptr + t + 1)
            for e0 in range(lo, hi, BLOCK_E):
                es = e0 + edges
                eok = es < hi
                src = tl.load(tok_src_ptr + es, mask=eok, other=0)
                dst = tl.load(tok_dst_ptr + es, mask=eok, other=0)
                hit = eok & _bits_at(nxt, dst, eok)
                tl.atomic_or(cur + src // 32, 1 << (src % 32), mask=hit)
        tl.debug_barrier()


def launch(
    tokens: Tensor, masked: Tensor, entry: Tensor, tables: SweepTables, exits: Tensor
) -> tuple[Tensor, Tensor]:
    """Run the sweep kernel; returns zero-initialised buffers filled by the kernel."""
    b, length = tokens.shape
    w = tables.state_words
    fwd = torch.zeros(b, length + 1, w, dtype=torch.int32, device=tokens.device)
    bwd = torch.zeros_like(fwd)
    if b == 0:
        return fwd, bwd
    block_w = triton.next_power_of_2(w)
    block_s = max(1, min(triton.next_power_of_2(tables.num_states), 8192 // block_w))
    _sweep_kernel[(b,)](
        tokens.to(torch.int64).contiguous(),
        masked.to(torch.int8).contiguous(),
        entry.to(torch.int64).contiguous(),
        fwd,
        bwd,
        tables.succ_bits,
        tables.tok_offsets,
        tables.tok_src,
        tables.tok_dst,
        exits.contiguous(),
        length,
        tables.num_states,
        w,
        BLOCK_S=block_s,
        BLOCK_W=block_w,
        BLOCK_E=128,
    )
    return fwd, bwd
