"""``allowed_mask``: the allowed-token bitmask of each masked position, from the two sweeps.

Token ``t`` is allowed at a position whose forward set is ``F`` and whose next
position's backward set is ``G`` iff some ``q ∈ F`` has a transition ``q --t--> r``
with ``r ∈ G``. Rows are positions: ``forward [P, ceil(S/32)]`` holds ``F`` for
each, ``backward [P, ceil(S/32)]`` the matching ``G`` (the sweep's ``backward[i+1]``).
The result is int32 ``[P, ceil(V/32)]``, the layout ``constrained_select`` reads.
An empty row means the block is infeasible at that position.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._backend import Backend, resolve_backend
from .bitmask import pack_bits, unpack_bits
from .sweep_tables import SweepTables


def _check(forward: Tensor, backward: Tensor, tables: SweepTables) -> None:
    words = tables.state_words
    for name, t in (("forward", forward), ("backward", backward)):
        if t.dim() != 2 or t.shape[1] != words or t.dtype != torch.int32:
            raise ValueError(
                f"{name} must be int32 [P, {words}] state bitsets, got {t.dtype} {tuple(t.shape)}"
            )
    if forward.shape[0] != backward.shape[0]:
        raise ValueError(f"forward has {forward.shape[0]} rows, backward {backward.shape[0]}")


def allowed_mask_reference(forward: Tensor, backward: Tensor, tables: SweepTables) -> Tensor:
    """PyTorch reference of :func:`allowed_mask`, same signature and results."""
    _check(forward, backward, tables)
    s, v = tables.num_states, tables.vocab_size
    device = forward.device
    fwd = unpack_bits(forward, s)
    bwd = unpack_bits(backward, s)
    out = torch.zeros(forward.shape[0], v, dtype=torch.bool, device=device)
    offsets = tables.offsets.tolist()
    tokens, dst = tables.tokens.long(), tables.next_states.long()
    for p in range(forward.shape[0]):
        for q in torch.nonzero(fwd[p]).flatten().tolist():
            lo, hi = offsets[q], offsets[q + 1]
            out[p, tokens[lo:hi][bwd[p, dst[lo:hi]]]] = True
    return pack_bits(out)


def allowed_mask(
    forward: Tensor,
    backward: Tensor,
    tables: SweepTables,
    *,
    backend: Backend = "auto",
) -> Tensor:
    """Allowed-token bitmask int32 ``[P, ceil(V/32)]`` per row; see the module docstring."""
    if resolve_backend(backend, forward.device) == "torch":
        return allowed_mask_reference(forward, backward, tables)
    _check(forward, backward, tables)
    from ._allowed_mask_triton import launch

    return launch(forward, backward, tables)
