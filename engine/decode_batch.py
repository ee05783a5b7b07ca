"""Left-padded batches of token segments, the unit every decoder forwards.

A :class:`Segment` is a run of tokens with, per token, its RoPE position, its
attention block id and whether it is real (``valid``) or padding. Batches are
left-padded: every row's prompt ends at the same cache column, so generated
blocks line up across rows while each row keeps its own positions.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .constraints.protocol import DecodeConstraint
from .errors import ContextLengthError
from .tokenizer import Tokenizer

Prompts = str | Sequence[int] | Sequence[str] | Sequence[Sequence[int]]
Constraints = DecodeConstraint | Sequence[DecodeConstraint | None] | None


@dataclass
class Segment:
    """Tokens [b, T] with positions, block ids and validity of the same shape."""

    tokens: Tensor
    positions: Tensor
    block_ids: Tensor
    valid: Tensor

    @classmethod
    def empty(cls, device: torch.device | str = "cpu") -> Segment:
        """One row of no tokens."""
        ids = torch.zeros(1, 0, dtype=torch.long, device=device)
        return cls(
            ids, ids.clone(), ids.clone(), torch.zeros(1, 0, dtype=torch.bool, device=device)
        )

    @property
    def length(self) -> int:
        return self.tokens.shape[1]

    def cat(self, other: Segment) -> Segment:
        return Segment(
            torch.cat((self.tokens, other.tokens), 1),
            torch.cat((self.positions, other.positions), 1),
            torch.cat((self.block_ids, other.block_ids), 1),
            torch.cat((self.valid, other.valid), 1),
        )

    def slice(self, start: int, stop: int | None = None) -> Segment:
        return Segment(
            self.tokens[:, start:stop],
            self.positions[:, start:stop],
            self.block_ids[:, start:stop],
            self.valid[:, start:stop],
        )

    def rows(self, index: Tensor) -> Segment:
        return Segment(
            self.tokens[index], self.positions[index], self.block_ids[index], self.valid[index]
        )


def normalize_prompts(prompts: Sequence[int] | Sequence[Sequence[int]]) -> list[list[int]]:
    """One prompt (a list of ids) or a batch of them → a list of id lists; rejects empty prompts."""
    if isinstance(prompts, Tensor):
        prompts = prompts.tolist()
    if len(prompts) == 0:
        raise ValueError("no prompt given")
    single = not isinstance(prompts[0], Sequence | Tensor)
    rows = [prompts] if single else prompts
    batch: list[list[int]] = []
    for i, row in enumerate(rows):
        try:
            ids = [operator.index(t) for t in (row.tolist() if isinstance(row, Tensor) else row)]  # type: ignore[union-attr]
        except TypeError as exc:
            raise TypeError(f"prompt {i} must be a sequence of int token ids") from exc
        if not ids:
            raise ValueError(f"prompt {i} is empty; a prompt needs at least one token")
        batch.append(ids)
    return batch


def left_pad(prompts: list[list[int]], pad_id: int, device: torch.device) -> tuple[Segment, Tensor]:
    """The batch's prompts as one left-padded segment with causal block ids, and their lengths.

    Padding is invalid; positions count from 0 at each row's first real token.
    """
    lengths = torch.tensor([len(p) for p in prompts], device=device)
    width = int(lengths.max())
    tokens = torch.full((len(prompts), width), pad_id, dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        tokens[i, width - len(p) :] = torch.tensor(p, dtype=torch.long, device=device)
    col = torch.arange(width, device=device).expand(len(prompts), width)
    pad = (width - lengths).unsqueeze(1)
    valid = col >= pad
    positions = (col - pad).clamp(min=0)
    return Segment(tokens, positions, positions.clone(), valid), lengths


def step_seed(seed: int | None, *parts: int) -> int | None:
    """A per-step seed derived from a row seed and step coordinates (None stays None)."""
    if seed is None:
        return None
    h = seed & (2**62 - 1)
    for p in parts:
        h = (h * 0x100000001B3 + p + 1) % (2**62)
    return h


def constraint_list(constraints: Constraints, b: int) -> list[DecodeConstraint | None]:
    """One constraint per row (None for unconstrained rows)."""
    if constraints is None:
        return [None] * b
    if isinstance(constraints, DecodeConstraint):
        if b != 1:
            raise ValueError(f"one constraint given for a batch of {b}; pass one per row")
        return [constraints]
    out = list(constraints)
    if len(out) != b:
        raise ValueError(f"{len(out)} constraints given for a batch of {b} prompts")
    return out


def encode_prompts(prompts: Prompts, tokenizer: Tokenizer | None) -> list[list[int]]:
    """Text or token-id prompts (one or a batch) → token id lists."""
    if isinstance(prompts, str):
        prompts = [prompts]
    if len(prompts) and isinstance(prompts[0], str):
        if tokenizer is None:
            raise ValueError("text prompts need a tokenizer; pass token ids or a tokenizer")
        return normalize_prompts([tokenizer.encode(p) for p in prompts])  # type: ignore[arg-type]
    return normalize_prompts(prompts)  # type: ignore[arg-type]


def check_context(prompts: list[list[int]], max_seq_len: int, max_new: int) -> list[int]:
    """Per-row budgets of new tokens; a prompt that leaves no room raises ContextLengthError."""
    budgets = []
    for p in prompts:
        if len(p) >= max_seq_len:
            raise ContextLengthError(len(p), max_seq_len)
        budgets.append(min(max_new, max_seq_len - len(p)))
    return budgets
