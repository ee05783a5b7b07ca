"""Packed bitsets: bit ``j`` of int32 word ``w`` stands for item ``32 * w + j``.

Token masks (``[.., ceil(V/32)]``) and state sets (``[.., ceil(S/32)]``) both use
this layout, in Triton and in the references.
"""

from __future__ import annotations

import sys

import torch
from torch import Tensor


def num_words(n: int) -> int:
    """int32 words needed for ``n`` bits."""
    return (n + 31) // 32


def pack_bits(mask: Tensor) -> Tensor:
    """bool ``[..., n]`` → int32 ``[..., ceil(n/32)]``."""
    if mask.dtype != torch.bool:
        raise TypeError(f"pack_bits expects a bool tensor, got {mask.dtype}")
    n = mask.shape[-1]
    pad = num_words(n) * 32 - n
    bits = torch.nn.functional.pad(mask.to(torch.int64), (0, pad))
    bits = bits.reshape(*mask.shape[:-1], -1, 32)
    weights = torch.bitwise_left_shift(
        torch.ones(32, dtype=torch.int64, device=mask.device),
        torch.arange(32, device=mask.device),
    )
    words = (bits * weights).sum(-1)
    # Reinterpret the low 32 bits as signed int32 (bit 31 is the sign bit).
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)


def _byte_table(device: torch.device) -> Tensor:
    """bool [256, 8]: bit j of byte value b."""
    values = torch.arange(256, device=device).unsqueeze(1)
    return torch.bitwise_and(
        torch.bitwise_right_shift(values, torch.arange(8, device=device)), 1
    ).bool()


def unpack_bits(words: Tensor, n: int) -> Tensor:
    """int32 ``[..., ceil(n/32)]`` → bool ``[..., n]``."""
    if words.dtype != torch.int32:
        raise TypeError(f"unpack_bits expects int32 words, got {words.dtype}")
    if words.shape[-1] != num_words(n):
        raise ValueError(f"{n} bits need {num_words(n)} words, got {words.shape[-1]}")
    if sys.byteorder == "little":
        # Byte k of a little-endian word holds bits 8k..8k+7: one table lookup per byte.
        data = words.contiguous().view(torch.uint8).long()
        bits = _byte_table(words.device)[data]
        return bits.reshape(*words.shape[:-1], -1)[..., :n]
    shifts = torch.arange(32, dtype=torch.int32, device=words.device)
    bits = torch.bitwise_and(torch.bitwise_right_shift(words.unsqueeze(-1), shifts), 1)
    return bits.reshape(*words.shape[:-1], -1)[..., :n].to(torch.bool)
