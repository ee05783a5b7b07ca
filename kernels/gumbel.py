"""The counter-based hash behind Gumbel sampling, identical in Triton and in torch.

The noise for (seed, row, column) is ``fmix32(column ^ fmix32(row ^ seed_mix))``
with ``seed_mix = fmix32(seed_lo ^ fmix32(seed_hi))`` and ``fmix32`` MurmurHash3's
32-bit finalizer. The top 23 bits ``k`` give ``u = (k + 0.5) / 2**23``, strictly
inside (0, 1) and exact in fp32 (24 bits would round the largest ``u`` to 1 and
the noise to +inf), and the Gumbel noise is ``-log(-log(u))``. Being a pure
function of its coordinates, the noise does not depend on the launch geometry,
so the Triton kernel and the reference pick the same tokens for the same seed.
"""

from __future__ import annotations

import torch
from torch import Tensor

_M32 = 0xFFFFFFFF
_C1 = 0x85EBCA6B
_C2 = 0xC2B2AE35


def fmix32_int(h: int) -> int:
    """MurmurHash3's finalizer on a Python int (host side)."""
    h &= _M32
    h ^= h >> 16
    h = (h * _C1) & _M32
    h ^= h >> 13
    h = (h * _C2) & _M32
    h ^= h >> 16
    return h


def seed_mix(seed: int) -> int:
    """Fold a 64-bit seed into the 32-bit key used by the per-element hash."""
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return fmix32_int((seed & _M32) ^ fmix32_int((seed >> 32) & _M32))


def _mul32(h: Tensor, c: int) -> Tensor:
    # (h * c) mod 2**32 for h < 2**32 in int64 without overflowing int64.
    lo = torch.bitwise_and(h, 0xFFFF) * c
    hi = torch.bitwise_and(torch.bitwise_right_shift(h, 16) * c, 0xFFFF)
    return torch.bitwise_and(lo + torch.bitwise_left_shift(hi, 16), _M32)


def fmix32(h: Tensor) -> Tensor:
    """MurmurHash3's finalizer on an int64 tensor holding 32-bit values."""
    h = torch.bitwise_xor(h, torch.bitwise_right_shift(h, 16))
    h = _mul32(h, _C1)
    h = torch.bitwise_xor(h, torch.bitwise_right_shift(h, 13))
    h = _mul32(h, _C2)
    return torch.bitwise_xor(h, torch.bitwise_right_shift(h, 16))


def gumbel_noise(seed: int, rows: Tensor, cols: Tensor) -> Tensor:
    """fp32 Gumbel noise for every (row, col) pair (broadcast), keyed by ``seed``."""
    key = seed_mix(seed)
    row_hash = fmix32(torch.bitwise_xor(rows.to(torch.int64), key))
    h = fmix32(torch.bitwise_xor(cols.to(torch.int64), row_hash))
    u = (torch.bitwise_right_shift(h, 9).to(torch.float32) + 0.5) * (1.0 / 8388608.0)
    return -torch.log(-torch.log(u))
