"""Closed choices on a :class:`~.enforcement.ConstraintSession` (``GenerationConfig.score_choices``).

The session finds where the constraint leaves a choice among a few whole
strings (:mod:`.closed_choices`) — at a block's leftmost mask for block
diffusion, right after the prefix for autoregressive decoding — and commits the
candidate the decoder chose. Kept apart from the step protocol of
:mod:`.enforcement`, which it extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..errors import InfeasibleConstraintError
from .closed_choices import Candidate, ClosedChoice, fit

if TYPE_CHECKING:
    from agentflow.kernels.automaton_sweep_host import BlockSweep, HostTables

    from .enforcement import Constraint


class SessionChoices:
    """The closed-choice methods of a constraint session (a mixin of ``ConstraintSession``)."""

    _c: Constraint
    _t: HostTables
    _state: int

    if TYPE_CHECKING:

        @property
        def done(self) -> bool: ...

        def _block(self, tokens: Tensor, masked: Tensor) -> BlockSweep: ...

        def _check_row(self, tokens: Tensor, masked: Tensor) -> None: ...

        def _exit_level(self, after: int) -> int: ...

    def block_choice(self, tokens: Tensor, masked: Tensor) -> tuple[int, ClosedChoice] | None:
        """(leftmost masked position, its closed choice) when one opens there and every
        position right of it is still masked; None otherwise."""
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
        if cands is None:
            return None
        choice = fit(cands, row.length - start, lambda k: row.backward[start + 1 + k])
        return None if choice is None else (start, choice)

    def fill_choice(self, tokens: Tensor, masked: Tensor, start: int, candidate: Candidate) -> None:
        """Commit ``candidate`` (of :meth:`block_choice`) at ``start``, in place."""
        self._check_row(tokens, masked)
        stop = start + len(candidate.tokens)
        if stop > tokens.shape[0] or not bool(masked[start:stop].all()):
            raise ValueError(f"block positions {start}..{stop - 1} are not all masked")
        row = self._block(tokens, masked)
        states = row.viable(start)
        cur = int(states[0]) if states.size == 1 else -1
        for k, tid in enumerate(candidate.tokens):
            cur = self._t.step(cur, tid) if cur >= 0 else -1
            if cur < 0 or not row.backward[start + 1 + k][cur]:
                raise InfeasibleConstraintError(
                    f"choice {candidate.text!r} is not allowed at block position {start}"
                )
        tokens[start:stop] = torch.tensor(candidate.tokens, dtype=tokens.dtype)
        masked[start:stop] = False

    def next_choice(self, room: int) -> ClosedChoice | None:
        """The closed choice right after the prefix, its candidates within ``room``
        tokens and the budget; None when there is none."""
        if self.done or room < 1:
            return None
        cands = self._c.candidates(self._state)
        if cands is None:
            return None
        return fit(cands, room, lambda k: self._t.level(self._exit_level(k + 1)))
