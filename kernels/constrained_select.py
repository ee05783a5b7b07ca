"""``constrained_select``: the best allowed token and its confidence per row, in one pass over V.

Semantics (both backends):

- ``scores = logits.float() / T`` for ``T > 0``; ``scores = logits.float()`` for
  ``T == 0`` (the confidence of a greedy pick is measured at temperature 1).
- Forbidden tokens (bit clear in ``allowed``) score ``-inf``.
- ``T == 0``: the token is the argmax of ``scores`` (lowest id among ties).
  ``T > 0``: the token is the argmax of ``scores + gumbel(seed, row, col)``, a
  sample from ``softmax(scores)``; ``seed=None`` draws one from torch's global
  generator, so ``torch.manual_seed`` makes runs reproducible.
- ``confidence`` is the chosen token's probability under ``softmax(scores)``
  over the allowed tokens.
- A row with no allowed token of finite logit gives token ``-1``, confidence ``0``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._backend import Backend, resolve_backend
from .bitmask import num_words, unpack_bits
from .gumbel import gumbel_noise, seed_mix

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check(logits: Tensor, allowed: Tensor | None, temperature: float) -> None:
    if logits.dim() != 2:
        raise ValueError(f"logits must be [N, V], got shape {tuple(logits.shape)}")
    if logits.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"logits must be fp32, fp16 or bf16, got {logits.dtype}")
    if temperature < 0 or temperature != temperature:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if allowed is None:
        return
    n, v = logits.shape
    if allowed.dtype != torch.int32:
        raise TypeError(f"allowed must be an int32 bitmask, got {allowed.dtype}")
    if tuple(allowed.shape) != (n, num_words(v)):
        raise ValueError(
            f"allowed must be [N, ceil(V/32)] = [{n}, {num_words(v)}], got {tuple(allowed.shape)}"
        )
    if allowed.device != logits.device:
        raise ValueError(f"allowed is on {allowed.device}, logits on {logits.device}")


def _resolve_seed(temperature: float, seed: int | None) -> int | None:
    if temperature == 0:
        return None
    if seed is None:
        return int(torch.randint(0, 2**62, (1,)).item())
    return seed


def constrained_select_reference(
    logits: Tensor, allowed: Tensor | None, temperature: float, seed: int | None
) -> tuple[Tensor, Tensor]:
    """PyTorch reference of :func:`constrained_select`, same signature and results."""
    _check(logits, allowed, temperature)
    seed = _resolve_seed(temperature, seed)
    n, v = logits.shape
    scores = logits.float()
    if temperature > 0:
        scores = scores / temperature
    keep = unpack_bits(allowed, v) if allowed is not None else None
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    if n == 0:
        empty = torch.empty(0, device=logits.device)
        return empty.long(), empty.float()
    best, argbest = scores.max(dim=-1)
    if temperature > 0:
        if keep is None:
            rows = torch.arange(n, device=logits.device).unsqueeze(1)
            cols = torch.arange(v, device=logits.device).unsqueeze(0)
            key = scores + gumbel_noise(seed or 0, rows, cols)
        else:  # noise only where a token is allowed (the others stay -inf)
            rows, cols = torch.nonzero(keep, as_tuple=True)
            key = torch.full_like(scores, float("-inf"))
            key[rows, cols] = scores[rows, cols] + gumbel_noise(seed or 0, rows, cols)
        token = key.argmax(dim=-1)
        chosen = scores.gather(1, token.unsqueeze(1)).squeeze(1)
    else:
        chosen, token = best, argbest
    # Softmax denominator relative to the row max (a finite stand-in for empty rows).
    pivot = torch.where(best > float("-inf"), best, torch.zeros_like(best))
    denom = torch.exp(scores - pivot.unsqueeze(1)).sum(dim=-1)
    probability = torch.exp(chosen - pivot) / denom.clamp(min=1e-30)
    valid = chosen > float("-inf")
    confidence = torch.where(valid, probability, torch.zeros_like(chosen))
    token = torch.where(valid, token, torch.full_like(token, -1))
    return token, confidence


def _triton(
    logits: Tensor, allowed: Tensor | None, temperature: float, seed: int | None
) -> tuple[Tensor, Tensor]:
    from ._constrained_select_triton import launch

    key = seed_mix(seed) if seed is not None else 0
    return launch(logits, allowed, temperature, key)


def constrained_select(
    logits: Tensor,
    allowed: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
    *,
    backend: Backend = "auto",
) -> tuple[Tensor, Tensor]:
    """Pick one allowed token per row: ``(token int64 [N], confidence fp32 [N])``.

    ``logits`` is ``[N, V]`` fp32/fp16/bf16; ``allowed`` an int32 bitmask
    ``[N, ceil(V/32)]`` (bit ``t % 32`` of word ``t // 32`` set iff token ``t``
    is allowed) or ``None`` for no constraint. See the module docstring for the
    exact semantics. ``backend``: ``"auto"`` (Triton on CUDA, the reference
    elsewhere), ``"triton"`` or ``"torch"``.
    """
    if resolve_backend(backend, logits.device) == "torch":
        return constrained_select_reference(logits, allowed, temperature, seed)
    _check(logits, allowed, temperature)
    return _triton(logits, allowed, temperature, _resolve_seed(temperature, seed))
