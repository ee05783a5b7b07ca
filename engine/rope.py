"""Rotary position embeddings (RoPE), with the frequency scalings real checkpoints use.

A checkpoint's ``rope_scaling`` (the Hugging Face ``config.json`` object) changes
the rotation frequencies once, for every position:

- ``linear`` (position interpolation): every frequency divided by ``factor``;
- ``llama3`` (Llama 3.1 / 3.2): wavelengths shorter than
  ``original_max_position_embeddings / high_freq_factor`` are kept, those longer
  than ``original_max_position_embeddings / low_freq_factor`` are divided by
  ``factor``, and those in between are blended linearly in the inverse wavelength.

Scalings that depend on the sequence length (``dynamic``) or also rescale
attention (``yarn``, ``longrope``) are refused by :func:`check_rope_scaling` with
the list of supported ones, rather than run with the wrong positions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

#: ``rope_scaling`` types this engine implements (``default`` means none).
ROPE_SCALINGS = ("default", "linear", "llama3")

_REQUIRED = {
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}


def scaling_type(scaling: Mapping[str, Any]) -> str:
    """The scaling's type: ``rope_type`` (current configs) or ``type`` (older ones)."""
    return str(scaling.get("rope_type", scaling.get("type", "default")))


def check_rope_scaling(scaling: Mapping[str, Any] | None) -> None:
    """Raise ``ValueError`` naming the problem unless ``scaling`` is one this engine implements."""
    if scaling is None:
        return
    if not isinstance(scaling, Mapping):
        raise ValueError(f"rope_scaling must be an object or null, got {scaling!r}")
    kind = scaling_type(scaling)
    if kind not in ROPE_SCALINGS:
        raise ValueError(
            f"rope_scaling type {kind!r} is not implemented; supported: {', '.join(ROPE_SCALINGS)}"
        )
    for key in _REQUIRED.get(kind, ()):
        value = scaling.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError(
                f"rope_scaling {kind!r} needs a positive number {key!r}, got {value!r}"
            )
    if kind == "llama3" and scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
        raise ValueError("rope_scaling 'llama3' needs high_freq_factor > low_freq_factor")


def inverse_frequencies(
    head_dim: int,
    theta: float,
    scaling: Mapping[str, Any] | None = None,
    device: torch.device | None = None,
) -> Tensor:
    """The ``head_dim / 2`` rotation frequencies (radians per position), scaled."""
    exponents = torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / (theta**exponents)
    kind = "default" if scaling is None else scaling_type(scaling)
    if kind == "linear":
        return inv_freq / float(scaling["factor"])  # type: ignore[index]
    if kind == "llama3":
        assert scaling is not None
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        context = float(scaling["original_max_position_embeddings"])
        wavelength = 2 * math.pi / inv_freq
        # 0 where the wavelength is long (divide by factor), 1 where short (keep).
        keep = ((context / wavelength - low) / (high - low)).clamp(0.0, 1.0)
        return (1 - keep) * inv_freq / factor + keep * inv_freq
    return inv_freq


def rope_tables(positions: Tensor, inv_freq: Tensor) -> tuple[Tensor, Tensor]:
    """cos/sin of shape [B, 1, T, head_dim/2] (broadcast over heads) for integer
    ``positions`` [B, T]."""
    angles = positions.float().unsqueeze(-1) * inv_freq.to(positions.device)
    return angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate halves (the Llama/Qwen "rotate_half" convention), in float32.
    x: [B, H, T, D]; cos/sin from :func:`rope_tables`."""
    x1, x2 = x.float().chunk(2, dim=-1)
    out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return out if out.dtype == x.dtype else out.to(x.dtype)
