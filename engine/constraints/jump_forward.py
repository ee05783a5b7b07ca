"""Forced text for jump-forward: the unique string the automaton admits ahead of a state.

With a byte-complete vocabulary (every byte that occurs in a token is also a
token by itself, as in byte-level BPE), the single-byte transitions of the token
automaton are the byte-level automaton of the constraint: any multi-byte token
is a chain of single-byte steps. So the string forced at a state is found by
walking single bytes while exactly one byte keeps acceptance reachable and the
state is not final. The forced text is then tokenized canonically by the
tokenizer, and each token is checked against the token automaton before use.

A vocabulary that is not byte-complete gets no byte walk (forced strings would
be unsound there); only single forced tokens are then jumped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..tokenizer import Tokenizer
from .automaton import TokenAutomaton

#: Upper bound on one forced string, in bytes.
MAX_FORCED_BYTES = 512


def _utf8_complete_prefix(data: bytes) -> bytes:
    """The longest prefix of ``data`` that ends on a UTF-8 character boundary."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return data[:cut]
    return b""


@dataclass(frozen=True)
class ForcedText:
    """Per-constraint tables for forced strings; built once by :meth:`build`."""

    automaton: TokenAutomaton
    tokenizer: Tokenizer
    #: Bytes of every token id (``b""`` for special tokens).
    token_bytes: tuple[bytes, ...]
    #: int32 [S, 256]: the state after the single-byte token for byte b, -1 if none;
    #: ``None`` when the vocabulary is not byte-complete.
    byte_next: Tensor | None

    @classmethod
    def build(cls, automaton: TokenAutomaton, tokenizer: Tokenizer) -> ForcedText:
        """Index the single-byte transitions of ``automaton``."""
        v = automaton.vocab_size
        special = tokenizer.special_ids
        token_bytes = tuple(
            b"" if tid in special or tid >= tokenizer.vocab_size else tokenizer.token_bytes(tid)
            for tid in range(v)
        )
        byte_of = torch.full((v,), -1, dtype=torch.int64)
        seen: set[int] = set()
        single: set[int] = set()
        for tid, data in enumerate(token_bytes):
            seen.update(data)
            if len(data) == 1 and data[0] not in single:
                single.add(data[0])
                byte_of[tid] = data[0]
        if not seen <= single:
            return cls(automaton, tokenizer, token_bytes, None)
        s = automaton.num_states
        offsets = automaton.offsets.cpu()
        src = torch.repeat_interleave(torch.arange(s), offsets[1:] - offsets[:-1])
        byte = byte_of[automaton.tokens.cpu().long()]
        keep = byte >= 0
        byte_next = torch.full((s, 256), -1, dtype=torch.int32)
        byte_next[src[keep], byte[keep]] = automaton.next_states.cpu()[keep]
        return cls(automaton, tokenizer, token_bytes, byte_next)

    def forced_bytes(self, state: int, live: Tensor, limit: int = MAX_FORCED_BYTES) -> bytes:
        """The bytes every accepted continuation from ``state`` starts with (within ``live`` states)."""
        if self.byte_next is None:
            return b""
        out = bytearray()
        final = self.automaton.final.cpu()
        live = live.cpu()
        while len(out) < limit and not bool(final[state]):
            nxt = self.byte_next[state]
            ok = (nxt >= 0) & live[nxt.clamp(min=0).long()]
            choices = torch.nonzero(ok).flatten()
            if choices.numel() != 1:
                break
            byte = int(choices[0])
            out.append(byte)
            state = int(nxt[byte])
        return bytes(out)

    def tokenize(self, data: bytes) -> list[int]:
        """Canonical token ids of the longest UTF-8-complete prefix of ``data`` (exact bytes only)."""
        text_bytes = _utf8_complete_prefix(data)
        if not text_bytes:
            return []
        ids = self.tokenizer.encode(text_bytes.decode("utf-8"))
        out: list[int] = []
        pos = 0
        for tid in ids:
            piece = self.token_bytes[tid] if tid < len(self.token_bytes) else b""
            if not piece or text_bytes[pos : pos + len(piece)] != piece:
                break  # the tokenizer normalized the text; stop where bytes diverge
            out.append(tid)
            pos += len(piece)
        return out

    def may_merge(self, state: int, token: int, allowed_next: Tensor) -> bool:
        """True if a token allowed at ``state`` extends ``token``'s bytes (the model may prefer it).

        ``allowed_next`` is a bool [S] set of acceptable next states.
        """
        lo, hi = int(self.automaton.offsets[state]), int(self.automaton.offsets[state + 1])
        piece = self.token_bytes[token]
        toks = self.automaton.tokens[lo:hi].tolist()
        nexts = self.automaton.next_states[lo:hi].tolist()
        for tid, nxt in zip(toks, nexts, strict=True):
            data = self.token_bytes[tid]
            if len(data) > len(piece) and data.startswith(piece) and bool(allowed_next[nxt]):
                return True
        return False
