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

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..tokenizer import Tokenizer
from .automaton import TokenAutomaton

if TYPE_CHECKING:
    from agentflow.kernels.automaton_sweep_host import HostTables

#: Upper bound on one forced string, in bytes.
MAX_FORCED_BYTES = 512
#: Entries of :attr:`ForcedText.tokenized` (copy candidates tokenize the same spans at
#: every choice, step after step).
TOKENIZED_MEMO_SIZE = 4096
#: Entries of :attr:`ForcedText.copies` (one per automaton state and span).
COPIES_MEMO_SIZE = 16384


def _remember(memo: dict[Any, Any], key: Any, value: Any, size: int) -> None:
    """``memo[key] = value``, dropping the oldest entry once ``memo`` holds ``size``."""
    if len(memo) >= size:
        del memo[next(iter(memo))]
    memo[key] = value


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
    #: int64 [S, 256]: the state after the single-byte token for byte b, -1 if none;
    #: ``None`` when the vocabulary is not byte-complete.
    byte_next: np.ndarray | None
    #: bool [S]: final states (host copy).
    final: np.ndarray
    #: State-major transition lists (host copies of the automaton's).
    offsets: np.ndarray
    tokens: np.ndarray
    next_states: np.ndarray
    #: :meth:`tokenize` results so far, keyed by the bytes (the oldest dropped first).
    tokenized: dict[bytes, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)
    #: Copy candidates so far (:func:`.copy_choices.copy_candidates`), keyed by (state,
    #: span): an agent's next step, or the next request, offers much the same spans at
    #: the same value openings (the oldest dropped first).
    copies: dict[tuple[int, str], Any] = field(default_factory=dict, repr=False, compare=False)
    #: Per state inside a string, or at a number's end: the (token, state after) pairs
    #: that may close the string or end the number there (:mod:`.copy_choices`).
    closers: dict[int, tuple[tuple[int, int], ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def remember_copy(self, key: tuple[int, str], found: Any) -> None:
        """Keep a copy candidate (or why there is none) in :attr:`copies`."""
        _remember(self.copies, key, found, COPIES_MEMO_SIZE)

    @cached_property
    def quote_tokens(self) -> tuple[int, ...]:
        """The tokens whose bytes start with ``"`` (those that may close a string)."""
        return tuple(t for t, data in enumerate(self.token_bytes) if data[:1] == b'"')

    @classmethod
    def build(cls, automaton: TokenAutomaton, tokenizer: Tokenizer) -> ForcedText:
        """Index the single-byte transitions of ``automaton``."""
        v = automaton.vocab_size
        special = tokenizer.special_ids
        token_bytes = tuple(
            b"" if tid in special or tid >= tokenizer.vocab_size else tokenizer.token_bytes(tid)
            for tid in range(v)
        )
        offsets = automaton.offsets.cpu().numpy().astype(np.int64)
        tokens = automaton.tokens.cpu().numpy().astype(np.int64)
        next_states = automaton.next_states.cpu().numpy().astype(np.int64)
        final = automaton.final.cpu().numpy().astype(bool)
        byte_of = np.full(v, -1, dtype=np.int64)
        seen: set[int] = set()
        single: set[int] = set()
        for tid, data in enumerate(token_bytes):
            seen.update(data)
            if len(data) == 1 and data[0] not in single:
                single.add(data[0])
                byte_of[tid] = data[0]
        byte_next = None
        if seen <= single:
            s = automaton.num_states
            src = np.repeat(np.arange(s, dtype=np.int64), np.diff(offsets))
            byte = byte_of[tokens]
            keep = byte >= 0
            byte_next = np.full((s, 256), -1, dtype=np.int64)
            byte_next[src[keep], byte[keep]] = next_states[keep]
        return cls(
            automaton, tokenizer, token_bytes, byte_next, final, offsets, tokens, next_states
        )

    def forced_bytes(self, state: int, live: np.ndarray, limit: int = MAX_FORCED_BYTES) -> bytes:
        """The bytes every accepted continuation from ``state`` starts with (within ``live`` states)."""
        if self.byte_next is None:
            return b""
        out = bytearray()
        while len(out) < limit and not self.final[state]:
            nxt = self.byte_next[state]
            choices = np.flatnonzero((nxt >= 0) & live[np.maximum(nxt, 0)])
            if choices.size != 1:
                break
            byte = int(choices[0])
            out.append(byte)
            state = int(nxt[byte])
        return bytes(out)

    def tokenize(self, data: bytes) -> list[int]:
        """Canonical token ids of the longest UTF-8-complete prefix of ``data`` (exact bytes only)."""
        found = self.tokenized.get(data)
        if found is None:
            found = tuple(self._tokenize(data))
            _remember(self.tokenized, data, found, TOKENIZED_MEMO_SIZE)
        return list(found)

    def _tokenize(self, data: bytes) -> list[int]:
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

    def may_merge(self, state: int, token: int, allowed_next: np.ndarray) -> bool:
        """True if a token allowed at ``state`` extends ``token``'s bytes (the model may prefer it).

        ``allowed_next`` is a bool [S] set of acceptable next states.
        """
        lo, hi = int(self.offsets[state]), int(self.offsets[state + 1])
        piece = self.token_bytes[token]
        ok = allowed_next[self.next_states[lo:hi]]
        for tid in self.tokens[lo:hi][ok].tolist():
            data = self.token_bytes[tid]
            if len(data) > len(piece) and data.startswith(piece):
                return True
        return False


def single_token(t: HostTables, state: int, ok: np.ndarray) -> tuple[int, int] | None:
    """(token, next state) when exactly one token leads from ``state`` into ``ok``."""
    lo, hi = int(t.offsets[state]), int(t.offsets[state + 1])
    viable = np.flatnonzero(ok[t.next_states[lo:hi]])
    if viable.size != 1:
        return None
    k = lo + int(viable[0])
    return int(t.tokens[k]), int(t.next_states[k])


@dataclass(frozen=True)
class ForcedRun:
    """Tokens forced from a state, and the token the forced text continues with."""

    tokens: list[int]
    #: The canonical token right after ``tokens`` when the forced text goes on but that
    #: token was left to the model, because a longer allowed token may fit there
    #: (``":"`` before a value that may start ``":"/``); ``None`` otherwise.
    boundary: int | None = None


def forced_run(
    t: HostTables,
    forced: ForcedText,
    state: int,
    room: int,
    allowed_after: Callable[[int], np.ndarray],
    *,
    stop_at: int | None = None,
) -> ForcedRun:
    """Up to ``room`` tokens forced from ``state``: single forced tokens, then forced text.

    ``allowed_after(k)`` is the bool [S] set the state after the k-th token must
    belong to (a block's backward sweep, or the budget's exit level in AR decoding).
    A single forced token that reaches state ``stop_at`` (the automaton's done
    state, for AR decoding) ends the run.
    """
    run: list[int] = []
    boundary: int | None = None
    while len(run) < room:
        single = single_token(t, state, allowed_after(len(run)))
        if single is not None:  # e.g. the end token after DONE
            run.append(single[0])
            state = single[1]
            if state == stop_at:
                break
            continue
        ids = forced.tokenize(forced.forced_bytes(state, t.live))
        steps: list[tuple[int, int]] = []  # (state before, token)
        cur = state
        for tid in ids[: room - len(run)]:
            nxt = t.step(cur, tid)
            if nxt < 0 or not allowed_after(len(run) + len(steps))[nxt]:
                break
            steps.append((cur, tid))
            cur = nxt
        if steps and len(steps) == len(ids) and not forced.final[cur]:
            # Leave the tail to the model where a longer allowed token may cover it: the
            # forced text's canonical tokens ('"}', '}') are not the text's tokens when
            # what follows merges with it ('"}}]}').
            while steps and forced.may_merge(*steps[-1], allowed_after(len(run) + len(steps) - 1)):
                boundary = steps.pop()[1]
            cur = t.step(*steps[-1]) if steps else state
        if not steps:
            break
        run.extend(tid for _, tid in steps)
        state = cur
        if len(steps) < len(ids):
            break
    return ForcedRun(run, boundary)
