"""Acceptance rules of the hybrid verifier: greedy agreement and speculative sampling.

Speculative sampling (Leviathan et al.; Chen et al.): a draft token ``x`` drawn
from the draft distribution ``q`` is kept with probability
``min(1, p(x) / q(x))``, where ``p`` is the verifier's distribution at the same
position; on rejection a token is drawn from the residual
``norm(max(0, p - q))``. Whatever ``q`` is, the emitted token is distributed as
``p`` — provided ``x`` really was drawn from ``q`` given everything ``p`` and
``q`` depend on. A deterministic draft token is the special case
``q = one_hot(x)``: it is kept with probability ``p(x)`` and the residual is
``p`` without ``x``.

``p`` and ``q`` here are the distributions the decoders actually sample from:
nucleus filtering (``top_p``) on the unmasked logits, then temperature, then the
constraint's allowed-token mask, renormalized — the same order as
:func:`agentflow.engine.selection.select_tokens`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from agentflow.kernels import unpack_bits

from .errors import InfeasibleConstraintError
from .selection import apply_top_p, select_tokens


def unpack_allowed(allowed: Tensor, vocab: int) -> Tensor:
    """bool [V] from an int32 bitmask; tokens past the mask's width are not allowed."""
    bits = unpack_bits(allowed.to(torch.int32), allowed.shape[-1] * 32)
    out = torch.zeros(vocab, dtype=torch.bool, device=allowed.device)
    n = min(vocab, bits.shape[-1])
    out[:n] = bits[:n]
    return out


def target_probs(
    logits: Tensor, *, temperature: float, top_p: float = 1.0, allowed: Tensor | None = None
) -> Tensor:
    """The sampling distribution fp32 [V] for one position's ``logits`` [V].

    ``allowed`` is an int32 bitmask of the constraint (None: every token).
    Raises :class:`InfeasibleConstraintError` when no allowed token has a finite logit.
    """
    if temperature <= 0.0:
        raise ValueError(f"target_probs needs temperature > 0, got {temperature}")
    scores = apply_top_p(logits.float().unsqueeze(0), top_p, temperature)[0] / temperature
    if allowed is not None:
        ok = unpack_allowed(allowed.to(scores.device), scores.shape[0])
        scores = scores.masked_fill(~ok, float("-inf"))
    if not bool(torch.isfinite(scores).any()):
        raise InfeasibleConstraintError("no allowed token has a finite logit at this position")
    return torch.softmax(scores, dim=-1)


def fit_mask(mask: Tensor, vocab: int) -> Tensor:
    """A constraint's bitmask cut or widened (with zero words) to ``vocab`` logits columns."""
    words = (vocab + 31) // 32
    if mask.shape[-1] == words:
        return mask
    out = torch.zeros(words, dtype=torch.int32, device=mask.device)
    n = min(words, mask.shape[-1])
    out[:n] = mask[:n]
    return out


def is_allowed(allowed: Tensor, token: int) -> bool:
    """Whether bit ``token`` of the int32 bitmask ``allowed`` [ceil(V/32)] is set."""
    word = token >> 5
    return 0 <= word < allowed.shape[-1] and (int(allowed[word]) >> (token & 31)) & 1 == 1


def greedy_pick(
    logits: Tensor,
    allowed: Tensor | None,
    top: int | None = None,
    refused: Callable[[int, Tensor], int | None] | None = None,
) -> int:
    """The constrained greedy token from ``logits`` [V]; -1 if none is allowed.

    The unmasked argmax ``top`` (precomputed for many rows at once, or None) when
    it is finite and allowed. Where it is refused, ``refused(top, logits)`` (a
    constraint's ``refused_pick``: the allowed token closest to what the model
    meant) when it names one; otherwise the masked argmax, lowest id among ties
    (``select_tokens(temperature=0, allowed=...)``).
    """
    if top is None:
        top = int(logits.argmax())
    if float(logits[top]) > float("-inf") and (allowed is None or is_allowed(allowed, top)):
        return top
    if allowed is not None and refused is not None:
        token = refused(top, logits)
        if token is not None and float(logits[token]) > float("-inf"):
            return token
    tok, _ = select_tokens(
        logits.unsqueeze(0),
        temperature=0.0,
        allowed=None
        if allowed is None
        else fit_mask(allowed.to(logits.device), logits.shape[-1]).unsqueeze(0),
    )
    return int(tok[0])


def sample(probs: Tensor, generator: torch.Generator | None) -> int:
    """One token id drawn from ``probs`` [V]."""
    return int(torch.multinomial(probs, 1, generator=generator)[0])


@dataclass(frozen=True)
class Verdict:
    """Outcome of one speculative test: the emitted token and whether it is the draft's."""

    token: int
    accepted: bool


def speculative_step(
    p: Tensor, q: Tensor | None, draft_token: int, generator: torch.Generator | None
) -> Verdict:
    """Keep ``draft_token`` with probability ``min(1, p/q)``, else draw from ``norm(max(0, p - q))``.

    ``p``/``q`` are fp32 [V] (q may be narrower or wider: missing entries are 0);
    ``q=None`` means the draft token was deterministic (``q = one_hot``).
    """
    vocab = p.shape[0]
    if q is None:
        q_full = torch.zeros_like(p)
        if 0 <= draft_token < vocab:
            q_full[draft_token] = 1.0
    else:
        q_full = torch.zeros_like(p)
        n = min(vocab, q.shape[0])
        q_full[:n] = q[:n].to(p)
    px = float(p[draft_token]) if 0 <= draft_token < vocab else 0.0
    qx = float(q_full[draft_token]) if 0 <= draft_token < vocab else 0.0
    if qx <= 0.0 and px > 0.0:
        raise ValueError(f"draft token {draft_token} has probability 0 under its own draft q")
    u = float(torch.rand((), generator=generator))
    if px > 0.0 and u * qx < px:  # u < p/q without dividing by a tiny q
        return Verdict(draft_token, True)
    residual = (p - q_full).clamp_min(0.0)
    total = float(residual.sum())
    if total <= 0.0:  # p == q: rejection has probability 0; only rounding gets here
        return Verdict(sample(p, generator), False)
    return Verdict(sample(residual / total, generator), False)
