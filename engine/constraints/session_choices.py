"""Closed choices on a :class:`~.enforcement.ConstraintSession` (``GenerationConfig.score_choices``).

The session finds where the constraint leaves a choice among a few whole
strings (:mod:`.closed_choices`) — at a block's leftmost mask for block
diffusion, right after the prefix for autoregressive decoding — and commits the
candidate the decoder chose. Kept apart from the step protocol of
:mod:`.enforcement`, which it extends; the bonuses a runtime adds to the
choices' scores are in :mod:`.session_preferences`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from ..errors import InfeasibleConstraintError
from .closed_choices import Candidate, ClosedChoice, fit
from .copy_choices import (
    copy_candidates,
    number_spans,
    opens_number,
    opens_string,
    request_spans,
)
from .session_preferences import SessionPreferences
from .word_copies import next_word, value_spans, word_candidates

if TYPE_CHECKING:
    from agentflow.kernels.automaton_sweep_host import BlockSweep, HostTables

    from .enforcement import Constraint


class SessionChoices(SessionPreferences):
    """The closed-choice methods of a constraint session (a mixin of ``ConstraintSession``)."""

    _c: Constraint
    _t: HostTables
    _state: int
    _used: int
    _tokens: list[int]
    _last: int | None
    _before_last: int | None
    #: Spans a string value may be copied from (:meth:`copy_from`), and their
    #: candidates by automaton state.
    _spans: tuple[str, ...] = ()
    _copies: dict[int, tuple[Candidate, ...]]
    #: The numbers offered where a number opens (:func:`.copy_choices.number_spans`),
    #: and their candidates by automaton state.
    _numbers: tuple[str, ...] = ()
    _number_copies: dict[int, tuple[Candidate, ...]]
    #: The value-like spans offered inside free text (:mod:`.word_copies`), and their
    #: candidates by (automaton state, word in progress).
    _word_spans: tuple[str, ...] = ()
    _word_copies: dict[tuple[int, bytes], tuple[Candidate, ...]]
    #: The word in progress at the end of the prefix (None: not inside free text).
    _word: bytes | None
    #: Copy choices the decoder declined, by (prefix state, tokens used, block tokens before).
    _declined: set[tuple[int, int, tuple[int, ...]]]
    #: A choice's tokens past its block: (prefix state, tokens used, tokens) they follow.
    _owed: tuple[int, int, tuple[int, ...]] | None = None

    if TYPE_CHECKING:

        @property
        def done(self) -> bool: ...

        def _block(self, tokens: Tensor, masked: Tensor) -> BlockSweep: ...

        def _check_row(self, tokens: Tensor, masked: Tensor) -> None: ...

        def _exit_level(self, after: int) -> int: ...

    @property
    def copy_spans(self) -> tuple[str, ...]:
        """The spans offered where a string value opens (:meth:`copy_from`; empty: none)."""
        return self._spans

    def copy_from(self, texts: Sequence[str], *, within_text: bool = False) -> None:
        """Offer the spans of ``texts`` (the request, the tool results it follows) as
        whole candidates where a string value opens (:mod:`.copy_choices`) and, with
        ``within_text``, to finish a value that free text has started to quote
        (:mod:`.word_copies`); an empty sequence turns copy choices off."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("copy_from takes a sequence of texts (e.g. [request]), not one string")
        spans = request_spans(texts)
        self._spans = spans
        self._numbers = number_spans(texts)
        self._copies = {}
        self._number_copies = {}
        self._declined = set()
        self._word_spans = value_spans(spans) if within_text else ()
        self._word_copies = {}

    def _offer_as(self, other: SessionChoices) -> None:
        """Offer the spans ``other`` offers (:meth:`copy_from`), its candidates by state
        shared and nothing declined yet."""
        if not (other._spans or other._numbers or other._word_spans):
            return
        self._spans, self._numbers, self._word_spans = (
            other._spans,
            other._numbers,
            other._word_spans,
        )
        self._copies = other._copies
        self._number_copies = other._number_copies
        self._word_copies = other._word_copies
        self._declined = set()

    @property
    def word_spans(self) -> tuple[str, ...]:
        """The spans offered inside free text (``copy_from(..., within_text=True)``)."""
        return self._word_spans

    def block_choice(self, tokens: Tensor, masked: Tensor) -> tuple[int, ClosedChoice] | None:
        """(leftmost masked position, its closed or copy choice) when one opens there and
        every position right of it is still masked; None otherwise."""
        self._check_row(tokens, masked)
        row = self._block(tokens, masked)
        if True not in row.masked:
            return None
        start = row.masked.index(True)
        if not all(row.masked[start:]):
            return None
        states = row.viable(start)
        if states.size != 1:
            return None
        cands = self._c.candidates(int(states[0]))

        def fitting(found: tuple[Candidate, ...]) -> ClosedChoice | None:
            return fit(found, row.length - start, lambda k: row.backward[start + 1 + k])

        if cands is None:
            other = (
                self._key_choice(int(states[0]), fitting)
                or self._copy_choice(row, start)
                or self._word_choice(row, start)
            )
            return None if other is None else (start, other)
        choice = self._preferring(fitting(cands), row.tokens[:start])
        return None if choice is None else (start, choice)

    def decline_choice(self, tokens: Tensor, masked: Tensor, start: int) -> None:
        """Stop offering the copy choice at block position ``start`` (the decoder passed on it)."""
        self._check_row(tokens, masked)
        self._declined.add(self._copy_key(tokens.tolist(), start))

    def _copy_key(self, tokens: list[int], start: int) -> tuple[int, int, tuple[int, ...]]:
        return (self._state, self._used, tuple(tokens[:start]))

    def _copy_choice(self, row: BlockSweep, start: int) -> ClosedChoice | None:
        """The copy choice at block position ``start`` when a string value or a number
        opens there (at the block's first position, the quote or the ``:`` is the
        prefix's last token)."""
        if not self._spans or self._copy_key(row.tokens, start) in self._declined:
            return None
        if start == 0:
            if self._last is None or self._before_last is None:
                return None
            before, last = self._before_last, self._last
        else:
            viable = row.viable(start - 1)
            if viable.size != 1:
                return None
            before, last = int(viable[0]), row.tokens[start - 1]
        state = int(row.viable(start)[0])
        opening = self._opening(before, last, state)
        if opening is None:
            return None
        kept = self._fit_block(row, start, opening.candidates)
        return replace(opening, candidates=kept) if kept else None

    def _opening(self, before: int, last: int, state: int) -> ClosedChoice | None:
        """The copy choice at ``state``, which token ``last`` led to from ``before``, before
        it is fitted to the room: the spans where that token opened a string, the numbers
        where a number opens; None elsewhere."""
        forced, free_text = self._c.forced, self._c.free_text
        if opens_string(forced, free_text, before, last):
            return ClosedChoice(self._copy_candidates(state), copy=True)
        if self._numbers and opens_number(forced, free_text, state, last):
            return ClosedChoice(self._number_candidates(state), copy=True, number=True)
        return None

    def _word_choice(self, row: BlockSweep, start: int) -> ClosedChoice | None:
        """The copy choice inside free text at block position ``start`` (:mod:`.word_copies`):
        the value-like spans that the word in progress there starts."""
        if not self._word_spans or self._copy_key(row.tokens, start) in self._declined:
            return None
        word = self._word
        token_bytes = self._c.forced.token_bytes
        for k in range(start):
            after = row.viable(k + 1)
            in_text = after.size == 1 and self._c.free_text(int(after[0]))
            word = next_word(word, token_bytes[row.tokens[k]], in_text)
        if not word:
            return None
        kept = self._fit_block(row, start, self._word_candidates(int(row.viable(start)[0]), word))
        return ClosedChoice(kept, copy=True, within_text=True) if kept else None

    def _fit_block(
        self, row: BlockSweep, start: int, candidates: Sequence[Candidate]
    ) -> tuple[Candidate, ...]:
        """The copy candidates the block allows from ``start``: inside the block, every
        state; when one ends inside it, a closer that leads to an allowed state. The
        tokens past the block are owed to the next one (:meth:`fill_choice`)."""
        room = row.length - start
        kept: list[Candidate] = []
        for c in candidates:
            n = len(c.tokens)
            inside = c.states[:room]
            if not all(row.backward[start + 1 + k][s] for k, s in enumerate(inside)):
                continue
            if n + 1 > room:
                kept.append(c)
            elif (closed := _closed_within(c, row.backward[start + 1 + n])) is not None:
                kept.append(closed)
        return tuple(kept)

    def _copy_candidates(self, state: int) -> tuple[Candidate, ...]:
        """The copy candidates where a string value opens at automaton ``state`` (cached)."""
        if state not in self._copies:
            self._copies[state] = copy_candidates(
                self._c.forced, self._t.cached_step, state, self._t.live, self._spans
            )
        return self._copies[state]

    def _number_candidates(self, state: int) -> tuple[Candidate, ...]:
        """The number candidates where a number opens at automaton ``state`` (cached)."""
        if state not in self._number_copies:
            self._number_copies[state] = copy_candidates(
                self._c.forced, self._t.cached_step, state, self._t.live, self._numbers, number=True
            )
        return self._number_copies[state]

    def _word_candidates(self, state: int, word: bytes) -> tuple[Candidate, ...]:
        """The within-text candidates of ``word`` at automaton ``state`` (cached)."""
        key = (state, word)
        if key not in self._word_copies:
            self._word_copies[key] = word_candidates(
                self._c.forced,
                self._t.cached_step,
                state,
                self._t.live,
                self._word_spans,
                word,
                self._c.word_enders(),
            )
        return self._word_copies[key]

    def fill_choice(self, tokens: Tensor, masked: Tensor, start: int, candidate: Candidate) -> None:
        """Commit ``candidate`` (of :meth:`block_choice`) at ``start``, in place.

        A copy candidate longer than the block's room is committed as far as the
        block goes; the rest is owed to the next block, whose :meth:`jump_forward`
        fills it first.
        """
        self._check_row(tokens, masked)
        stop = min(start + len(candidate.tokens), tokens.shape[0])
        if start >= stop or not bool(masked[start:].all()):
            raise ValueError(f"block positions {start}..{tokens.shape[0] - 1} are not all masked")
        row = self._block(tokens, masked)
        states = row.viable(start)
        cur = int(states[0]) if states.size == 1 else -1
        inside = stop - start
        block_exit = -1  # the state after the block: the owed tokens follow it
        for k, tid in enumerate(candidate.tokens):
            cur = self._t.step(cur, tid) if cur >= 0 else -1
            if cur < 0 or not (
                row.backward[start + 1 + k][cur] if k < inside else self._t.live[cur]
            ):
                raise InfeasibleConstraintError(
                    f"choice {candidate.text!r} is not allowed at block position {start}"
                )
            if k == inside - 1:
                block_exit = cur
        tokens[start:stop] = torch.tensor(candidate.tokens[:inside], dtype=tokens.dtype)
        masked[start:stop] = False
        rest = candidate.tokens[inside:]
        self._owed = (block_exit, self._used + row.length, rest) if rest else None

    def _pay_owed(self, tokens: Tensor, masked: Tensor) -> int:
        """Fill the tokens a choice left owing at the block's start (:meth:`fill_choice`);
        how many were filled. Dropped when the prefix is not the one they follow, or
        when the constraint refuses them here."""
        owed = self._owed
        if owed is None or owed[1] > self._used:
            return 0  # still in the block that owes them
        self._owed = None
        if owed[:2] != (self._state, self._used) or not bool(masked[0]):
            return 0
        run = list(owed[2][: int(masked.long().cumprod(0).sum())])
        row = self._block(tokens, masked)
        cur = self._state
        for k, tid in enumerate(run):
            cur = self._t.step(cur, tid)
            if cur < 0 or not row.backward[k + 1][cur]:
                return 0
        tokens[: len(run)] = torch.tensor(run, dtype=tokens.dtype)
        masked[: len(run)] = False
        if len(run) < len(owed[2]):
            self._owed = (cur, self._used + row.length, owed[2][len(run) :])
        return len(run)

    def next_choice(self, room: int) -> ClosedChoice | None:
        """The closed choice right after the prefix — or, when a string value has just
        opened, its copy choice; inside free text, the copy choice of the word in
        progress — its candidates within ``room`` tokens and the budget; None when
        there is none."""
        if self.done or room < 1:
            return None
        cands = self._c.candidates(self._state)

        def fitting(found: tuple[Candidate, ...]) -> ClosedChoice | None:
            return fit(found, room, lambda k: self._t.level(self._exit_level(k + 1)))

        if cands is None:
            return (
                self._key_choice(self._state, fitting)
                or self._next_copy(room)
                or self._next_word(room)
            )
        return self._preferring(fitting(cands))

    def _next_copy(self, room: int) -> ClosedChoice | None:
        """The copy choice right after the prefix (autoregressive decoding): offered when
        the prefix's last token opened a string value or a number opens after it; each
        candidate with its closing token must fit ``room`` and the budget. A declined
        one is not offered again because the next token moves the prefix on."""
        if not self._spans or self._last is None or self._before_last is None:
            return None
        opening = self._opening(self._before_last, self._last, self._state)
        if opening is None:
            return None
        kept = self._fit_next(room, opening.candidates)
        return replace(opening, candidates=kept) if kept else None

    def _next_word(self, room: int) -> ClosedChoice | None:
        """The copy choice inside free text right after the prefix (:mod:`.word_copies`)."""
        if not self._word_spans or not self._word:
            return None
        kept = self._fit_next(room, self._word_candidates(self._state, self._word))
        return ClosedChoice(kept, copy=True, within_text=True) if kept else None

    def _fit_next(self, room: int, candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
        """The copy candidates that fit ``room`` and the budget after the prefix, each
        with a closer that leads to an allowed state."""
        levels: dict[int, np.ndarray] = {}  # states allowed after k more tokens

        def allowed(k: int) -> np.ndarray:
            if k not in levels:
                levels[k] = self._t.level(self._exit_level(k))
            return levels[k]

        kept: list[Candidate] = []
        for c in candidates:
            n = len(c.tokens)
            if n + 1 > room or not all(allowed(k + 1)[s] for k, s in enumerate(c.states)):
                continue
            if (closed := _closed_within(c, allowed(n + 1))) is not None:
                kept.append(closed)
        return tuple(kept)


def _closed_within(c: Candidate, allowed: np.ndarray) -> Candidate | None:
    """``c`` with only the closing tokens that lead to an ``allowed`` state (the likeliest
    is scored when it is chosen); None when none does."""
    closers = tuple((t, q) for t, q in c.closers if allowed[q])
    if not closers:
        return None
    return replace(c, closers=closers, scored=(*c.tokens, closers[0][0]))
