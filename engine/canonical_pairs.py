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

A row costs one batch encode of the vocabulary (about 10 ms for 2,048 tokens),
and the first agent step of a process asks for a few dozen. A checkpoint can
carry the rows already built in :data:`PAIRS_FILE` next to its
``tokenizer.json`` (:meth:`CanonicalPairs.save`, :func:`write_pairs_file`; the
embedded models ship the whole table, 61 kB): they are read instead of built,
once the file's tokenizer fingerprint matches. With every row present,
:meth:`CanonicalPairs.before` is a column of the table.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import CheckpointError

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

logger = logging.getLogger(__name__)

#: The file, next to ``tokenizer.json``, that holds a checkpoint's built rows.
PAIRS_FILE = "canonical_pairs.npz"


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
        #: Tokens with a row: every one but the special tokens.
        self._rowed = sum(piece is not None for piece in self._bytes)

    @classmethod
    def load(cls, tokenizer: Tokenizer, path: str | Path) -> CanonicalPairs:
        """The pairs of ``tokenizer`` with the rows saved in ``path`` (:meth:`save`).

        A file written for another tokenizer is ignored (a warning; rows are then
        built as needed); an unreadable one raises :class:`CheckpointError`."""
        path = Path(path)
        pairs = cls(tokenizer)
        if not path.is_file():
            raise CheckpointError(f"canonical-pair file not found: {path}", path=path)
        try:
            with zipfile.ZipFile(path) as archive, np.load(path, allow_pickle=False) as data:
                del archive  # np.load reads a non-zip file as a bare array: refuse it first
                fingerprint = str(data["fingerprint"])
                vocab_size = int(data["vocab_size"])
                tokens = data["tokens"].astype(np.int64)
                packed = data["after"]
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"cannot read canonical pairs {path}: {exc}", path=path) from exc
        if fingerprint != tokenizer.fingerprint or vocab_size != pairs.vocab_size:
            logger.warning(
                "ignoring %s: written for another tokenizer (fingerprint %s, %d tokens; "
                "this one is %s, %d tokens)",
                path,
                fingerprint,
                vocab_size,
                tokenizer.fingerprint,
                pairs.vocab_size,
            )
            return pairs
        if packed.ndim != 2 or len(packed) != len(tokens) or (tokens >= vocab_size).any():
            raise CheckpointError(f"malformed canonical pairs in {path}", path=path)
        rows = np.unpackbits(packed, axis=1, count=vocab_size).astype(bool)
        for token, row in zip(tokens.tolist(), rows, strict=True):
            if pairs._bytes[token] is not None:
                pairs._after[token] = row
        return pairs

    def save(self, path: str | Path) -> Path:
        """Write the rows built so far (see :meth:`build_all`) to ``path``."""
        path = Path(path)
        tokens = np.array(sorted(self._after), dtype=np.int32)
        rows = (
            np.stack([self._after[t] for t in tokens.tolist()])
            if len(tokens)
            else np.ones((0, self.vocab_size), dtype=bool)
        )
        with path.open("wb") as f:
            np.savez_compressed(
                f,
                fingerprint=np.array(self._tokenizer.fingerprint),
                vocab_size=np.array(self.vocab_size),
                tokens=tokens,
                after=np.packbits(rows, axis=1),
            )
        return path

    def build_all(self) -> None:
        """Build every row (one batch encode of the vocabulary per token)."""
        for token in range(self.vocab_size):
            self.after(token)

    @property
    def complete(self) -> bool:
        """True when every row is built (then each :meth:`before` is a column)."""
        return len(self._after) == self._rowed

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
            if not left_side and self.complete:
                row = self._column(token)
            else:
                row = self._row(token, left_side=left_side)
            rows[token] = row
        return row

    def _column(self, right: int) -> np.ndarray:
        """``before(right)`` read off the complete table: ``(left, right)`` is canonical
        exactly when ``after(left)`` allows ``right``."""
        column = np.ones(self.vocab_size, dtype=bool)
        for left, row in self._after.items():
            column[left] = row[right]
        return column

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


def write_pairs_file(tokenizer: Tokenizer, folder: str | Path) -> Path:
    """Build ``tokenizer``'s whole table and write it as ``folder / PAIRS_FILE``
    (about 20 s for a 2,048-token vocabulary; meant for small vocabularies)."""
    pairs = tokenizer.canonical_pairs
    pairs.build_all()
    return pairs.save(Path(folder) / PAIRS_FILE)
