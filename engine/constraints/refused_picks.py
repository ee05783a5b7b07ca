"""What to take when the constraint refuses the model's greedy token.

The plain answer is the masked argmax: the most likely allowed token. But a
refused token says what the model *meant*, and the masked argmax ignores it: a
drafter that means ``"}}]}`` (close the string and the call) while a required
key is still missing gets ``}}]}`` written *into* the string, and one that means
``deactivate`` where the only allowed spelling of the tool is ``de|activate|User``
gets whichever other tool scores next.

:class:`ByteNeighbours` keeps the model's intent at the byte level: among the
allowed tokens, those sharing the longest byte prefix with the refused token,
and of those the one the model scores highest (``"`` or ``"}}]}`` for a refused
``","``, as the logits say; ``de`` for ``deactivate``). When no allowed token
shares even the first byte, there is no intent to keep and the caller falls
back to the masked argmax. At the boundary a jump-forward left to the model
(:func:`.jump_forward.forced_run` held back a token a longer one might replace),
:func:`repick` takes the forced text's own token first: there the drafter has
read the forced text as ending elsewhere (the key ``re|k|il|u`` as unfinished)
and its pick is about another position.

Greedy decoding only: a sampled draft must keep its masked distribution, which
the hybrid acceptance rule relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

#: Bytes of a token compared at most (longer tokens are compared on this prefix).
MAX_COMPARED_BYTES = 16


def repick(
    neighbours: ByteNeighbours,
    refused: int,
    allowed: np.ndarray,
    logits: Tensor,
    boundary: int | None = None,
    structural: Callable[[int], bool] | None = None,
) -> tuple[int, float] | None:
    """(token, confidence) to take at a block position where greedy ``refused`` was
    refused, or None for the masked argmax.

    ``boundary`` is the token a jump-forward held back at this position (the forced
    text goes on with it; the model, having read the forced text as ending
    elsewhere, picked something else): when allowed, it or an allowed token that
    extends it (``":[`` or ``":["``), whichever the model scores higher, so the
    text is split where the tokenizer would split it. An extension must pass
    ``structural`` (when given): one that writes a string's content (``":"#``)
    would take a value's first bytes away from the copy choice that opens there.
    Otherwise the allowed token nearest to ``refused`` (:meth:`ByteNeighbours.closest`).
    The confidence is the token's probability among the ``allowed`` (bool [V']) tokens.
    """
    choice = None
    if boundary is not None and 0 <= boundary < len(allowed) and allowed[boundary]:
        choice = neighbours.likeliest_extension(boundary, allowed, logits, structural)
    if choice is None:
        choice = neighbours.closest(refused, allowed, logits)
    if choice is None:
        return None
    mask = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
    mask[: len(allowed)] = torch.from_numpy(allowed[: logits.shape[-1]]).to(logits.device)
    probs = torch.softmax(logits.float().masked_fill(~mask, float("-inf")), dim=0)
    return choice, float(probs[choice])


class ByteNeighbours:
    """Token bytes as a padded matrix, for longest-common-prefix queries over a vocabulary."""

    def __init__(self, token_bytes: Sequence[bytes]) -> None:
        width = min(max((len(b) for b in token_bytes), default=1), MAX_COMPARED_BYTES)
        # -1 pads: it never equals a byte, so a shorter token's prefix ends there.
        self._bytes = np.full((len(token_bytes), width), -1, dtype=np.int16)
        for tid, data in enumerate(token_bytes):
            cut = data[:width]
            self._bytes[tid, : len(cut)] = np.frombuffer(cut, dtype=np.uint8)
        self._lengths = np.array([min(len(b), width) for b in token_bytes], dtype=np.int64)

    def likeliest_extension(
        self,
        token: int,
        allowed: np.ndarray,
        logits: Tensor,
        keep: Callable[[int], bool] | None = None,
    ) -> int:
        """Among ``token`` and the allowed tokens whose bytes start with its bytes (and
        that ``keep`` accepts), the one ``logits`` score highest (``token`` itself when
        none extends it)."""
        n = min(len(allowed), len(self._lengths))
        size = int(self._lengths[token])
        ids = np.flatnonzero(allowed[:n])
        if size == 0 or ids.size == 0:
            return token
        longer = ids[
            (self._lengths[ids] > size)
            & (self._bytes[ids, :size] == self._bytes[token, :size][None, :]).all(axis=1)
        ]
        if keep is not None:
            longer = longer[[keep(int(tid)) for tid in longer]]
        if longer.size == 0:
            return token
        candidates = np.insert(longer, 0, token)  # a tie keeps the held-back token
        return int(candidates[int(logits[candidates].float().argmax())])

    def closest(self, token: int, allowed: np.ndarray, logits: Tensor) -> int | None:
        """The allowed token nearest to ``token`` by shared byte prefix, then by ``logits``.

        ``allowed`` is bool [V'] (V' may differ from the vocabulary; missing ids are
        not allowed); ``logits`` [>= V']. None when no allowed token shares the first
        byte (or ``token`` has no bytes: a special token).
        """
        if not 0 <= token < len(self._lengths) or self._lengths[token] == 0:
            return None
        n = min(len(allowed), len(self._lengths))
        ids = np.flatnonzero(allowed[:n])
        if ids.size == 0:
            return None
        same = self._bytes[ids] == self._bytes[token][None, :]
        shared = np.cumprod(same, axis=1).sum(axis=1)
        best = int(shared.max())
        if best == 0:
            return None
        nearest = ids[shared == best]
        scores = logits[nearest].float()
        return int(nearest[int(scores.argmax())])
