"""``SweepTables``: the automaton tensors the sweep and mask kernels read, in the forms they need."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .bitmask import num_words, pack_bits


@dataclass(frozen=True)
class SweepTables:
    """Transition tables of a token automaton, state-major and token-major, plus the successor relation.

    Built once per compiled constraint by :meth:`from_transitions`; every tensor
    lives on one device.
    """

    num_states: int
    vocab_size: int
    #: State-major CSR (as in ``TokenAutomaton``): state q's pairs are ``[offsets[q], offsets[q+1])``.
    offsets: Tensor  # int64 [S + 1]
    tokens: Tensor  # int32 [E]
    next_states: Tensor  # int32 [E]
    #: Token-major CSR: token t's (source, destination) pairs are ``[tok_offsets[t], tok_offsets[t+1])``.
    tok_offsets: Tensor  # int64 [V + 1]
    tok_src: Tensor  # int32 [E]
    tok_dst: Tensor  # int32 [E]
    #: The any-token successor relation, as unique pairs and as bitset rows.
    succ_src: Tensor  # int64 [P]
    succ_dst: Tensor  # int64 [P]
    succ_bits: Tensor  # int32 [S, ceil(S/32)]
    #: States from which acceptance stays reachable (the unbounded future after a block).
    exit_bits: Tensor  # int32 [ceil(S/32)]

    @property
    def state_words(self) -> int:
        """int32 words per state bitset."""
        return num_words(self.num_states)

    @classmethod
    def from_transitions(
        cls,
        num_states: int,
        vocab_size: int,
        offsets: Tensor,
        tokens: Tensor,
        next_states: Tensor,
        live: Tensor,
    ) -> SweepTables:
        """Derive every form from the state-major CSR lists and the ``live`` flags [S]."""
        if offsets.shape != (num_states + 1,):
            raise ValueError(
                f"offsets must be [S + 1] = [{num_states + 1}], got {tuple(offsets.shape)}"
            )
        if tokens.shape != next_states.shape or tokens.dim() != 1:
            raise ValueError("tokens and next_states must be 1-D and of equal length")
        if int(offsets[-1]) != tokens.numel():
            raise ValueError(
                f"offsets[-1] = {int(offsets[-1])} but there are {tokens.numel()} transitions"
            )
        if live.shape != (num_states,):
            raise ValueError(f"live must be [S] = [{num_states}], got {tuple(live.shape)}")
        device = offsets.device
        offsets = offsets.to(torch.int64)
        tok64 = tokens.to(torch.int64)
        dst64 = next_states.to(torch.int64)
        if tok64.numel() and (int(tok64.min()) < 0 or int(tok64.max()) >= vocab_size):
            raise ValueError(f"transition tokens must lie in [0, {vocab_size})")
        if dst64.numel() and (int(dst64.min()) < 0 or int(dst64.max()) >= num_states):
            raise ValueError(f"next states must lie in [0, {num_states})")
        src64 = torch.repeat_interleave(
            torch.arange(num_states, device=device), offsets[1:] - offsets[:-1]
        )
        order = torch.argsort(tok64 * num_states + src64)
        counts = torch.bincount(tok64, minlength=vocab_size)
        tok_offsets = torch.zeros(vocab_size + 1, dtype=torch.int64, device=device)
        tok_offsets[1:] = torch.cumsum(counts, 0)
        pairs = torch.unique(src64 * num_states + dst64)
        succ_src, succ_dst = pairs // num_states, pairs % num_states
        words = num_words(num_states)
        # Pairs are unique, so summing each word's distinct bits equals OR-ing them.
        succ_words = torch.zeros(num_states * words, dtype=torch.int64, device=device)
        succ_words.index_add_(
            0,
            succ_src * words + succ_dst // 32,
            torch.bitwise_left_shift(torch.ones_like(succ_dst), succ_dst % 32),
        )
        succ_words = torch.where(succ_words >= 2**31, succ_words - 2**32, succ_words)
        return cls(
            num_states=num_states,
            vocab_size=vocab_size,
            offsets=offsets,
            tokens=tokens.to(torch.int32),
            next_states=next_states.to(torch.int32),
            tok_offsets=tok_offsets,
            tok_src=src64[order].to(torch.int32),
            tok_dst=dst64[order].to(torch.int32),
            succ_src=succ_src,
            succ_dst=succ_dst,
            succ_bits=succ_words.to(torch.int32).reshape(num_states, words),
            exit_bits=pack_bits(live.to(torch.bool).unsqueeze(0)).squeeze(0),
        )
