"""Autoregressive use of a :class:`~.enforcement.ConstraintSession`: the next token's mask.

The AR decoder and the hybrid verifier (and hybrid drafts picked left to right)
ask, after the committed prefix, which tokens may come next
(``next_token_mask``), which token to take when the greedy one is refused
(``refused_pick``) and which tokens are forced (``forced_tokens``); they then
``advance`` the session, which the block-diffusion path shares. Kept apart from
the step protocol of :mod:`.enforcement`, which it extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from torch import Tensor

from agentflow.kernels.automaton_sweep_host import pack_rows

from .jump_forward import forced_run

if TYPE_CHECKING:
    from agentflow.kernels.automaton_sweep_host import HostTables

    from .enforcement import Constraint

#: Upper bound on the tokens :meth:`SessionAutoregressive.forced_tokens` returns at once.
MAX_FORCED_TOKENS = 256


class SessionAutoregressive:
    """The autoregressive methods of a constraint session (a mixin of ``ConstraintSession``)."""

    _c: Constraint
    _t: HostTables
    _state: int

    if TYPE_CHECKING:

        @property
        def done(self) -> bool: ...

        def _exit_level(self, after: int) -> int: ...

        def _after_last(self, allowed: np.ndarray) -> np.ndarray: ...

    def _next_allowed(self) -> np.ndarray:
        """bool [V]: the tokens allowed right after the prefix, within the budget."""
        t = self._t
        lo, hi = int(t.offsets[self._state]), int(t.offsets[self._state + 1])
        ok = t.level(self._exit_level(1))[t.next_states[lo:hi]]
        bits = np.zeros(t.vocab_size, dtype=bool)
        bits[t.tokens[lo:hi][ok]] = True
        return self._after_last(bits)

    def next_token_mask(self) -> Tensor:
        """Allowed-token bitmask int32 [ceil(V/32)] for the next token after the prefix."""
        return pack_rows(self._next_allowed()[None, :])[0].to(self._c.tables.offsets.device)

    def refused_pick(self, token: int, logits: Tensor) -> int | None:
        """The token to take after the prefix when the greedy ``token`` is refused: the
        allowed token closest to it (:mod:`.refused_picks`), or None."""
        return self._c.neighbours().closest(token, self._next_allowed(), logits)

    def forced_tokens(self) -> list[int]:
        """Tokens forced right after the prefix (not consumed; :meth:`advance` them)."""
        if self.done:
            return []
        return forced_run(
            self._t,
            self._c.forced,
            self._state,
            MAX_FORCED_TOKENS,
            lambda k: self._t.level(self._exit_level(k + 1)),
            stop_at=self._c.automaton.done_state,
        ).tokens
