"""A thin wrapper over a HF ``tokenizers`` ``tokenizer.json``.

It knows the engine's special tokens (mask, end, pad) and can tell the exact
bytes each token stands for, which the constraint engine needs to build its
token automaton.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

from .canonical_pairs import PAIRS_FILE, CanonicalPairs
from .chat_template import END, MASK, PAD
from .errors import CheckpointError, TokenizerMismatchError


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes→unicode map used by byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


_BYTE_DECODER = _byte_decoder()


class Tokenizer:
    """Encode/decode text; expose special ids and per-token bytes."""

    def __init__(
        self,
        hf: HFTokenizer,
        *,
        mask_token: str | None = MASK,
        end_token: str | None = END,
        pad_token: str | None = PAD,
        source: str = "<memory>",
        pairs_file: str | Path | None = None,
    ) -> None:
        self.hf = hf
        self.source = source
        #: Saved canonical-pair rows to start from (``canonical_pairs.npz``), if any.
        self.pairs_file = Path(pairs_file) if pairs_file is not None else None
        self.mask_id = hf.token_to_id(mask_token) if mask_token else None
        self.end_id = hf.token_to_id(end_token) if end_token else None
        self.pad_id = hf.token_to_id(pad_token) if pad_token else None

    @classmethod
    def from_file(cls, path: str | Path, **special: str | None) -> Tokenizer:
        """Read ``tokenizer.json`` (and the canonical-pair rows saved beside it, if any)."""
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"tokenizer file not found: {path}", path=path)
        try:
            hf = HFTokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise CheckpointError(f"cannot read tokenizer {path}: {exc}", path=path) from exc
        return cls(hf, source=str(path), pairs_file=saved_pairs(path.parent), **special)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], *, skip_special: bool = False) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=skip_special)

    @cached_property
    def special_ids(self) -> frozenset[int]:
        return frozenset(t.id if hasattr(t, "id") else i for i, t in self._added().items())

    def _added(self) -> dict[int, object]:
        return {i: tok for i, tok in self.hf.get_added_tokens_decoder().items() if tok.special}

    @cached_property
    def is_byte_level(self) -> bool:
        model = json.loads(self.hf.to_str()).get("pre_tokenizer") or {}
        text = json.dumps(model)
        return "ByteLevel" in text

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes a (non-special) token contributes to the decoded text."""
        piece = self.hf.id_to_token(token_id)
        if piece is None:
            raise KeyError(token_id)
        if self.is_byte_level:
            try:
                return bytes(_BYTE_DECODER[c] for c in piece)
            except KeyError:
                pass
        if (
            piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6
        ):  # SentencePiece byte fallback
            return bytes([int(piece[3:5], 16)])
        return piece.replace("▁", " ").encode("utf-8")

    @cached_property
    def canonical_pairs(self) -> CanonicalPairs:
        """Which token may follow which in this tokenizer's own output (built lazily,
        from the rows of ``pairs_file`` when there is one)."""
        if self.pairs_file is not None:
            return CanonicalPairs.load(self, self.pairs_file)
        return CanonicalPairs(self)

    @cached_property
    def fingerprint(self) -> str:
        """A stable hash of the vocabulary and special ids (cache key for compiled constraints)."""
        h = hashlib.sha256(self.hf.to_str().encode())
        h.update(f"{self.mask_id}/{self.end_id}/{self.pad_id}".encode())
        return h.hexdigest()[:16]


def saved_pairs(folder: Path) -> Path | None:
    """``folder``'s canonical-pair file, when it has one."""
    path = folder / PAIRS_FILE
    return path if path.is_file() else None


def check_same_tokenizer(drafter: Tokenizer, verifier: Tokenizer) -> None:
    """Raise :class:`TokenizerMismatchError` unless both models share one tokenizer."""
    if drafter.fingerprint != verifier.fingerprint:
        raise TokenizerMismatchError(
            f"the verifier's tokenizer ({verifier.source}, {verifier.vocab_size} tokens, "
            f"fingerprint {verifier.fingerprint}) differs from the drafter's ({drafter.source}, "
            f"{drafter.vocab_size} tokens, fingerprint {drafter.fingerprint}); hybrid decoding "
            "compares token ids, so both models must use the same tokenizer"
        )
