"""Triton implementation of :func:`agentflow.kernels.allowed_mask` (imported lazily).

Grid ``(P, S)``: program ``(p, q)`` returns at once unless state ``q`` is in row
``p``'s forward set; otherwise it walks ``q``'s transition list in ``BLOCK_E``
chunks and sets the bit of every token whose destination is in the row's
backward set, with ``atomic_or`` into the zero-initialised output.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .sweep_tables import SweepTables


@triton.jit
def _mask_kernel(
    fwd_ptr,
    bwd_ptr,
    out_ptr,
    offsets_ptr,
    tokens_ptr,
    next_ptr,
    W,
    VW,
    BLOCK_E: tl.constexpr,
):
    p = tl.program_id(0).to(tl.int64)
    q = tl.program_id(1)
    word = tl.load(fwd_ptr + p * W + q // 32)
    if ((word >> (q % 32)) & 1) != 0:
        lo = tl.load(offsets_ptr + q)
        hi = tl.load(offsets_ptr + q + 1)
        edges = tl.arange(0, BLOCK_E)
        row_bwd = bwd_ptr + p * W
        row_out = out_ptr + p * VW
        for e0 in range(lo, hi, BLOCK_E):
            es = e0 + edges
            eok = es < hi
            tok = tl.load(tokens_ptr + es, mask=eok, other=0)
            dst = tl.load(next_ptr + es, mask=eok, other=0)
            dst_words = tl.load(row_bwd + dst // 32, mask=eok, other=0)
            hit = eok & (((dst_words >> (dst % 32)) & 1) != 0)
            tl.atomic_or(row_out + tok // 32, 1 << (tok % 32), mask=hit)


def launch(forward: Tensor, backward: Tensor, tables: SweepTables) -> Tensor:
    """Run the mask kernel over every (row, state) pair."""
    p = forward.shape[0]
    vw = (tables.vocab_size + 31) // 32
    out = torch.zeros(p, vw, dtype=torch.int32, device=forward.device)
    if p == 0 or tables.num_states == 0:
        return out
    _mask_kernel[(p, tables.num_states)](
        forward.contiguous(),
        backward.contiguous(),
        out,
        tables.offsets,
        tables.tokens,
        tables.next_states,
        tables.state_words,
        vw,
        BLOCK_E=128,
    )
    return out
