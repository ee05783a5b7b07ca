"""``automaton_sweep``: forward and backward reachable-state sets across a block, in one launch.

For a block row of ``L`` positions (``tokens``, ``masked``) entered in state
``entry``:

- ``forward[i]`` is the set of states reachable after the first ``i`` positions:
  ``forward[0] = {entry}``; a fixed token ``t`` maps each state ``q`` to ``δ(q, t)``
  (dropping states without that transition); a mask maps it to all successors.
- ``backward[i]`` is the set of states from which positions ``i .. L-1`` can be
  passed and end in ``exit``: ``backward[L] = exit``. By default ``exit`` is
  ``tables.exit_bits`` (the states from which acceptance stays reachable: an
  unbounded future after the block); a caller with a token budget passes the
  states that can still reach acceptance within it.

Both are int32 bitsets ``[B, L + 1, ceil(S/32)]`` (see :mod:`.bitmask`). The block
is feasible iff ``forward[i] ∩ backward[i]`` is non-empty (for any ``i``); a token
``t`` is allowed at masked ``i`` iff some ``q ∈ forward[i]`` has ``δ(q, t) ∈ backward[i+1]``
(:func:`agentflow.kernels.allowed_mask`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._backend import Backend, resolve_backend
from .bitmask import pack_bits, unpack_bits
from .sweep_tables import SweepTables


def _exit_rows(exit_states: Tensor | None, rows: int, tables: SweepTables) -> Tensor:
    words = tables.state_words
    if exit_states is None:
        return tables.exit_bits.unsqueeze(0).expand(rows, words)
    if exit_states.shape != (rows, words) or exit_states.dtype != torch.int32:
        raise ValueError(
            f"exit_states must be int32 [B, {words}] = [{rows}, {words}], "
            f"got {exit_states.dtype} {tuple(exit_states.shape)}"
        )
    return exit_states


def _check(tokens: Tensor, masked: Tensor, entry: Tensor, tables: SweepTables) -> None:
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be [B, L], got shape {tuple(tokens.shape)}")
    if masked.shape != tokens.shape or masked.dtype != torch.bool:
        raise ValueError(
            f"masked must be bool {tuple(tokens.shape)}, got {masked.dtype} {tuple(masked.shape)}"
        )
    if entry.shape != tokens.shape[:1]:
        raise ValueError(f"entry must be [B] = [{tokens.shape[0]}], got {tuple(entry.shape)}")
    if entry.numel() and (int(entry.min()) < 0 or int(entry.max()) >= tables.num_states):
        raise ValueError(f"entry states must lie in [0, {tables.num_states})")
    fixed = tokens[~masked]
    if fixed.numel() and (int(fixed.min()) < 0 or int(fixed.max()) >= tables.vocab_size):
        raise ValueError(f"fixed tokens must lie in [0, {tables.vocab_size})")


def automaton_sweep_reference(
    tokens: Tensor,
    masked: Tensor,
    entry: Tensor,
    tables: SweepTables,
    exit_states: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """PyTorch reference of :func:`automaton_sweep`, same signature and results."""
    _check(tokens, masked, entry, tables)
    exits = _exit_rows(exit_states, tokens.shape[0], tables)
    b, length = tokens.shape
    s = tables.num_states
    device = tokens.device
    fwd = torch.zeros(b, length + 1, s, dtype=torch.bool, device=device)
    bwd = torch.zeros(b, length + 1, s, dtype=torch.bool, device=device)
    fwd[torch.arange(b, device=device), 0, entry.long()] = True
    bwd[:, length] = unpack_bits(exits, s)
    tok_offsets = tables.tok_offsets.tolist()
    src, dst = tables.tok_src.long(), tables.tok_dst.long()
    rows_tokens, rows_masked = tokens.tolist(), masked.tolist()
    for r in range(b):
        for i in range(length):
            cur, nxt = fwd[r, i], fwd[r, i + 1]
            if rows_masked[r][i]:
                nxt[tables.succ_dst[cur[tables.succ_src]]] = True
            else:
                t = rows_tokens[r][i]
                lo, hi = tok_offsets[t], tok_offsets[t + 1]
                nxt[dst[lo:hi][cur[src[lo:hi]]]] = True
        for i in range(length - 1, -1, -1):
            nxt, cur = bwd[r, i + 1], bwd[r, i]
            if rows_masked[r][i]:
                cur[tables.succ_src[nxt[tables.succ_dst]]] = True
            else:
                t = rows_tokens[r][i]
                lo, hi = tok_offsets[t], tok_offsets[t + 1]
                cur[src[lo:hi][nxt[dst[lo:hi]]]] = True
    return pack_bits(fwd), pack_bits(bwd)


def automaton_sweep(
    tokens: Tensor,
    masked: Tensor,
    entry: Tensor,
    tables: SweepTables,
    exit_states: Tensor | None = None,
    *,
    backend: Backend = "auto",
) -> tuple[Tensor, Tensor]:
    """Forward and backward state bitsets ``(int32 [B, L+1, ceil(S/32)], same)`` for block rows.

    ``tokens`` int64 ``[B, L]`` (ignored where masked), ``masked`` bool ``[B, L]``,
    ``entry`` int64 ``[B]`` the state each row starts in, ``tables`` the
    automaton's :class:`SweepTables`, ``exit_states`` optional int32 ``[B, ceil(S/32)]``
    state sets allowed after each row (default: ``tables.exit_bits``). See the
    module docstring.
    """
    if resolve_backend(backend, tokens.device) == "torch":
        return automaton_sweep_reference(tokens, masked, entry, tables, exit_states)
    _check(tokens, masked, entry, tables)
    exits = _exit_rows(exit_states, tokens.shape[0], tables)
    from ._automaton_sweep_triton import launch

    return launch(tokens, masked, entry, tables, exits)
