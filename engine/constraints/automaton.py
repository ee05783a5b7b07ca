"""The token automaton: a compiled constraint as tensors.

This dataclass is the contract between the schema compiler (which builds it from
``outlines_core.Index``) and the in-step enforcement / kernels (which read it).

States are dense ids ``0 .. num_states-1``. ``done_state`` is the absorbing
state entered by the end token from any final state; it loops on the end token,
so every position after the end of the answer must be the end token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def derived_tables(
    src: Tensor,
    tokens: Tensor,
    next_states: Tensor,
    num_states: int,
    vocab_size: int,
    dense_limit: int,
) -> tuple[Tensor, Tensor | None]:
    """The successor relation [S, S] and, when ``S·V <= dense_limit``, the dense table
    [S, V] (-1: no transition) of the transitions ``src --tokens--> next_states``."""
    successors = torch.zeros(num_states, num_states, dtype=torch.bool)
    successors[src, next_states.long()] = True
    table = None
    if num_states * vocab_size <= dense_limit:
        table = torch.full((num_states, vocab_size), -1, dtype=torch.int32)
        table[src, tokens.long()] = next_states
    return successors, table


@dataclass
class TokenAutomaton:
    """Per-state transitions of a constraint over a tokenizer's vocabulary."""

    num_states: int
    vocab_size: int
    initial_state: int
    done_state: int
    end_token_id: int
    #: bool [S]: states from which the end token is allowed (done_state included).
    final: Tensor
    #: CSR transition lists, sorted by token id within a state:
    #: state q's outgoing pairs are ``tokens[offsets[q]:offsets[q+1]]`` / ``next_states[...]``.
    offsets: Tensor  # int64 [S + 1]
    tokens: Tensor  # int32 [E]
    next_states: Tensor  # int32 [E]
    #: bool [S, S]: ``successors[q, r]`` iff some token leads from q to r.
    successors: Tensor
    #: bool [S]: states from which ``done_state`` can be reached (co-reachable with an unbounded future).
    live: Tensor
    #: int32 [S, V] with -1 for "no transition"; only built for small S*V (else None).
    table: Tensor | None = None

    @property
    def num_words(self) -> int:
        """int32 words per state bitset (``ceil(S / 32)``)."""
        return (self.num_states + 31) // 32

    @property
    def vocab_words(self) -> int:
        """int32 words per token bitmask (``ceil(V / 32)``)."""
        return (self.vocab_size + 31) // 32

    def step(self, state: int, token: int) -> int:
        """δ(state, token), or -1 when the token is not allowed there."""
        if self.table is not None:
            return int(self.table[state, token])
        lo, hi = int(self.offsets[state]), int(self.offsets[state + 1])
        toks = self.tokens[lo:hi]
        i = int(torch.searchsorted(toks, torch.tensor(token, dtype=toks.dtype)))
        if i < hi - lo and int(toks[i]) == token:
            return int(self.next_states[lo + i])
        return -1

    def to(self, device: torch.device | str) -> TokenAutomaton:
        """A copy with every tensor on ``device``."""
        moved = {
            name: (value.to(device) if isinstance(value, Tensor) else value)
            for name, value in self.__dict__.items()
        }
        return TokenAutomaton(**moved)
