"""A query's closed-choice candidates as one input row: tree attention.

:mod:`.choice_scoring` reads every candidate of a choice in one forward pass. A
row holds the query's context once, then the candidates' tokens as a trie:
candidates that start alike (copy candidates are runs of one to six words of
the request: ``dana``, ``dana@example.com``, ``dana@example.com for``) share
their common tokens, and an explicit attention mask lets each trie token see
the cached prompt, the context and its own ancestors only — the tree attention
of speculative-decoding verifiers (SpecInfer, Medusa). Every candidate's score
equals a pass of its own over the context and the candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from .model import KVCache

if TYPE_CHECKING:
    from .choice_scoring import ChoiceQuery


@dataclass
class CandidateTrie:
    """One query's input row: its context, then its candidates' tails (the scored
    tokens but the last) as a token trie: candidates that start alike share their
    common tokens, and each trie token sees the context and its own ancestors only."""

    #: How many of the row's tokens are the context (the rest is the trie).
    context: int
    tokens: list[int]
    positions: list[int]
    block_ids: list[int]
    valid: list[bool]
    #: Index in the row of the trie token before which each candidate's scored token
    #: ``j >= 1`` is predicted: ``paths[c][j - 1]``.
    paths: list[list[int]]
    #: Per trie token (by index after the context): the indices of its ancestors and itself.
    lineage: list[list[int]]

    @classmethod
    def of(cls, q: ChoiceQuery) -> CandidateTrie:
        ctx = q.context
        row = cls(
            ctx.length,
            ctx.tokens[0].tolist(),
            ctx.positions[0].tolist(),
            ctx.block_ids[0].tolist(),
            ctx.valid[0].tolist(),
            [],
            [],
        )
        nodes: dict[tuple[int, int], int] = {}  # (parent index or -1, token) -> index
        for cand in q.choice.candidates:
            path: list[int] = []
            parent = -1
            for depth, token in enumerate(cand.scored[:-1]):  # the last is never input
                key = (parent, int(token))
                if key not in nodes:
                    nodes[key] = len(row.tokens)
                    row.tokens.append(int(token))
                    row.positions.append(q.start + depth)
                    row.block_ids.append(q.start + depth)
                    row.valid.append(True)
                    above = row.lineage[parent - row.context] if parent >= 0 else []
                    row.lineage.append([*above, nodes[key]])
                parent = nodes[key]
                path.append(parent)
            row.paths.append(path)
        return row


def trie_inputs(
    rows: Sequence[CandidateTrie], scratch: KVCache, dev: torch.device
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Tokens, positions, block ids, validity [R, W] and the attention mask
    [R, W, cached + W] of the tree rows, read over ``scratch``'s cached positions."""
    width = max(len(r.tokens) for r in rows)
    shape = (len(rows), width)
    tokens = torch.zeros(shape, dtype=torch.long)
    positions = torch.zeros(shape, dtype=torch.long)
    block_ids = torch.zeros(shape, dtype=torch.long)
    valid = torch.zeros(shape, dtype=torch.bool)
    # Which new tokens each new token may see beyond the block-id rule: the context
    # sees the context; a trie token sees the context and its lineage.
    lineage = torch.zeros(len(rows), width, width, dtype=torch.bool)
    for i, r in enumerate(rows):
        n = len(r.tokens)
        if not n:
            continue
        tokens[i, :n], positions[i, :n] = torch.tensor(r.tokens), torch.tensor(r.positions)
        block_ids[i, :n], valid[i, :n] = torch.tensor(r.block_ids), torch.tensor(r.valid)
        lineage[i, :n, : r.context] = True
        for k, seen in enumerate(r.lineage):
            lineage[i, r.context + k, seen] = True
    tokens, positions, block_ids, valid, lineage = (
        t.to(dev) for t in (tokens, positions, block_ids, valid, lineage)
    )
    cached = scratch.length
    query_blocks = block_ids.unsqueeze(2)
    old = (scratch.block_ids[:, None, :cached] <= query_blocks) & scratch.valid[:, None, :cached]
    new = (block_ids.unsqueeze(1) <= query_blocks) & valid.unsqueeze(1) & lineage
    # A padded query with no visible key would produce NaNs; let it see itself.
    eye = torch.eye(width, dtype=torch.bool, device=dev).unsqueeze(0) & ~valid.unsqueeze(2)
    return tokens, positions, block_ids, valid, torch.cat((old, new | eye), dim=2)
