"""Token selection for the decoders: nucleus filtering, then the kernels' select.

Every decoder picks tokens through :func:`agentflow.kernels.constrained_select`
(one pass over the vocabulary; Triton on CUDA, a PyTorch reference elsewhere).
``top_p`` is applied beforehand by setting the logits outside each row's
nucleus to ``-inf``, so the kernel never chooses them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def apply_top_p(logits: Tensor, top_p: float, temperature: float) -> Tensor:
    """``logits`` [N, V] with every token outside the ``top_p`` nucleus set to ``-inf``.

    The nucleus is measured on the distribution at ``temperature`` (greedy
    decoding is unaffected: the argmax is always inside the nucleus).
    """
    if top_p >= 1.0 or temperature <= 0.0:
        return logits
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    # Keep a token if the mass strictly before it is < top_p (the top token always stays).
    before = sorted_probs.cumsum(-1) - sorted_probs
    drop_sorted = before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def select_tokens(
    logits: Tensor,
    *,
    temperature: float,
    top_p: float = 1.0,
    seed: int | None = None,
    allowed: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """(token [N] int64, confidence [N] fp32) for logits [N, V], through the kernels' dispatch."""
    from agentflow.kernels import constrained_select

    logits = apply_top_p(logits, top_p, temperature)
    return constrained_select(logits, allowed, temperature, seed)
