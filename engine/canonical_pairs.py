"""Which token may sit next to which: the tokenizer's own segmentation, pair by pair.

A text has one tokenization the tokenizer produces (the *canonical* one) and
many others that decode to the same bytes: ``n|ew`` for ``new``, ``"|,|"`` for
``","``. A model trained on canonical text has never seen the others, and a
decoder that writes one is off the training distribution from there on (the
AR model's extra calls after a forced ``"}`` were one such case,
docs/constraints.md). For BPE the canonical tokenizations are, in practice,
exactly those whose every adjacent pair is canonical on its own: ``(a, b)`` is
a canonical pair when the tokenizer encodes ``bytes(a) + bytes(b)`` as
``[a, b]``. :class:`CanonicalPairs` answers that per pair, building one row of
the table (one batch encode of the vocabulary) the first time a token is asked
about.

Special tokens and pairs whose bytes do not form valid UTF-8 (a token that is
part of a character) are never refused: the test cannot speak for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .tokenizer import Tokenizer


class CanonicalPairs:
    """Canonical-pair rows of one tokenizer, built on first use and kept."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        special = tokenizer.special_ids
        self._bytes: list[bytes | None] = [
            None if i in special else _token_bytes(tokenizer, i) for i in range(self.vocab_size)
        ]
        self._after: dict[int, np.ndarray] = {}
        self._before: dict[int, np.ndarray] = {}

    def after(self, left: int) -> np.ndarray | None:
        """bool [V]: the tokens that may follow ``left``; None when any may (special ``left``)."""
        return self._cached(left, self._after, left_side=True)

    def before(self, right: int) -> np.ndarray | None:
        """bool [V]: the tokens that may precede ``right``; None when any may."""
        return self._cached(right, self._before, left_side=False)

    def allows(self, left: int | None, right: int | None) -> bool:
        """True unless ``left`` then ``right`` is a non-canonical pair."""
        if left is None or right is None:
            return True
        row = self.after(left)
        if row is None or not 0 <= right < self.vocab_size:
            return True
        return bool(row[right])

    def _cached(
        self, token: int, rows: dict[int, np.ndarray], *, left_side: bool
    ) -> np.ndarray | None:
        if not 0 <= token < self.vocab_size or self._bytes[token] is None:
            return None
        row = rows.get(token)
        if row is None:
            row = rows[token] = self._row(token, left_side=left_side)
        return row

    def _row(self, token: int, *, left_side: bool) -> np.ndarray:
        fixed = self._bytes[token]
        assert fixed is not None
        row = np.ones(self.vocab_size, dtype=bool)
        others: list[int] = []
        texts: list[str] = []
        for other, piece in enumerate(self._bytes):
            if piece is None:
                continue
            joined = fixed + piece if left_side else piece + fixed
            try:
                texts.append(joined.decode("utf-8"))
            except UnicodeDecodeError:
                continue  # part of a character: the tokenizer cannot encode it on its own
            others.append(other)
        encoded = self._tokenizer.hf.encode_batch(texts, add_special_tokens=False)
        for other, enc in zip(others, encoded, strict=True):
            pair = [token, other] if left_side else [other, token]
            if enc.ids != pair:
                row[other] = False
        return row


def _token_bytes(tokenizer: Tokenizer, token_id: int) -> bytes | None:
    try:
        return tokenizer.token_bytes(token_id)
    except KeyError:
        return None
