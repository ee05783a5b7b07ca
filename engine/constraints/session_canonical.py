"""Canonical pairs on a :class:`~.enforcement.ConstraintSession` (``canonical=True``).

A token is allowed at a block position only if it pairs canonically
(:mod:`agentflow.engine.canonical_pairs`) with the clean tokens left and right
of it, and — where the next position is still open and the state before it is
known — if some token the automaton allows after it pairs canonically with it
(``n`` where the text must go on ``ew`` is a dead end: only ``new`` is the
tokenizer's). Whenever that leaves no allowed token, the automaton's own set
stands: the rule narrows choices and never makes a block infeasible. Kept
apart from the step protocol of :mod:`.enforcement`, which it extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from agentflow.kernels.automaton_sweep_host import BlockSweep, HostTables

    from ..canonical_pairs import CanonicalPairs


class SessionCanonical:
    """The canonical-pair methods of a constraint session (a mixin of ``ConstraintSession``)."""

    _t: HostTables
    _last: int | None
    _pairs: CanonicalPairs | None

    def _pair_neighbours(
        self, tokens: list[int], masked: list[bool], pos: int
    ) -> tuple[int | None, int | None]:
        """The clean tokens left and right of block position ``pos`` (None: masked or none)."""
        left = self._last if pos == 0 else (None if masked[pos - 1] else tokens[pos - 1])
        right = None if pos + 1 >= len(tokens) or masked[pos + 1] else tokens[pos + 1]
        return left, right

    def _allowed_at(
        self,
        row: BlockSweep,
        tokens: list[int],
        masked: list[bool],
        pos: int,
        refused: int | None = None,
    ) -> np.ndarray:
        """bool [V]: the automaton's allowed tokens at ``pos``, narrowed to those pairing
        canonically with the clean neighbours (and without ``refused`` when it is a dead
        end) unless that leaves none: the rule never makes a block infeasible."""
        allowed = row.allowed(pos)
        if self._pairs is None:
            return allowed
        left, right = self._pair_neighbours(tokens, masked, pos)
        dead = None
        if refused is not None and 0 <= refused < allowed.shape[0]:
            dead = self._dead_token(row, masked, pos, refused, left, right)
        return self._narrow(allowed, left, right, dead)

    def _allows(
        self, row: BlockSweep, tokens: list[int], masked: list[bool], pos: int, token: int
    ) -> bool:
        """Is ``token`` allowed at masked position ``pos`` (automaton and canonical pairs)?"""
        if not row.allows(pos, token):
            return False
        pairs = self._pairs
        if pairs is None:
            return True
        left, right = self._pair_neighbours(tokens, masked, pos)
        paired = pairs.allows(left, token) and pairs.allows(token, right)
        dead = self._dead_token(row, masked, pos, token, left, right)
        if paired and dead is None:
            return True
        # Refused, unless no canonical token is left at ``pos``.
        return bool(self._narrow(row.allowed(pos), left, right, dead)[token])

    def _dead_token(
        self,
        row: BlockSweep,
        masked: list[bool],
        pos: int,
        token: int,
        left: int | None,
        right: int | None,
    ) -> int | None:
        """``token`` when it pairs canonically with its neighbours but is a dead end, else
        None (a token the pairs already refuse needs no look ahead)."""
        assert self._pairs is not None
        if not (self._pairs.allows(left, token) and self._pairs.allows(token, right)):
            return None
        return token if self._dead_end(row, masked, pos, token) else None

    def _dead_end(self, row: BlockSweep, masked: list[bool], pos: int, token: int) -> bool:
        """True when no token the automaton allows after ``token`` pairs canonically with
        it (``n`` where the text must go on ``ew``: only ``new`` is canonical). Checked
        where the next position is open and the state before ``pos`` is known."""
        assert self._pairs is not None
        if pos + 1 >= len(masked) or not masked[pos + 1]:
            return False
        states = row.viable(pos)
        if states.size != 1:
            return False
        t = self._t
        nxt = t.step(int(states[0]), token)
        if nxt < 0:
            return False
        lo, hi = int(t.offsets[nxt]), int(t.offsets[nxt + 1])
        following = t.tokens[lo:hi][t.live[t.next_states[lo:hi]]]
        after = self._pairs.after(token)
        if after is None or following.size == 0:
            return False
        return not bool(after[following].any())

    def _after_last(self, allowed: np.ndarray) -> np.ndarray:
        """bool [V]: the tokens allowed right after the prefix (autoregressive use),
        narrowed to those pairing canonically with its last token unless none does."""
        if self._pairs is None:
            return allowed
        return self._narrow(allowed, self._last, None, None)

    def _narrow(
        self, allowed: np.ndarray, left: int | None, right: int | None, dead: int | None
    ) -> np.ndarray:
        """``allowed`` without the tokens that pair non-canonically with ``left`` or
        ``right`` and without ``dead``, unless that leaves none."""
        assert self._pairs is not None
        v = allowed.shape[0]
        keep = allowed.copy()
        after = self._pairs.after(left) if left is not None else None
        before = self._pairs.before(right) if right is not None else None
        if after is not None:
            keep &= after[:v]
        if before is not None:
            keep &= before[:v]
        if dead is not None:
            keep[dead] = False
        return keep if keep.any() else allowed
