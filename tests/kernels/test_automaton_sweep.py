"""automaton_sweep and allowed_mask: semantics by brute force, Triton against the reference."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch

from agentflow.kernels import (
    SweepTables,
    allowed_mask,
    automaton_sweep,
    unpack_bits,
)

pytestmark = pytest.mark.triton

MakeTables = Callable[[int, int, float, int], SweepTables]


def _delta(tables: SweepTables) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    offsets = tables.offsets.tolist()
    for q in range(tables.num_states):
        for k in range(offsets[q], offsets[q + 1]):
            out[(q, int(tables.tokens[k]))] = int(tables.next_states[k])
    return out


def _run(delta: dict[tuple[int, int], int], state: int, seq: tuple[int, ...]) -> int | None:
    for t in seq:
        nxt = delta.get((state, t))
        if nxt is None:
            return None
        state = nxt
    return state


def _row(
    g: torch.Generator, length: int, vocab: int, p_mask: float
) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, vocab, (length,), generator=g)
    masked = torch.rand(length, generator=g) < p_mask
    return tokens, masked


def test_sweeps_and_mask_match_brute_force(make_tables: MakeTables) -> None:
    """A token is allowed at a mask iff some completion of the row ends in a live state."""
    tables = make_tables(6, 4, 0.45, 3)
    delta = _delta(tables)
    live = unpack_bits(tables.exit_bits, 6)
    g = torch.Generator().manual_seed(0)
    for _ in range(12):
        tokens, masked = _row(g, 4, 4, 0.5)
        entry = int(torch.randint(0, 6, (1,), generator=g))
        fwd, bwd = automaton_sweep(tokens[None], masked[None], torch.tensor([entry]), tables)
        fwd_b, bwd_b = unpack_bits(fwd[0], 6), unpack_bits(bwd[0], 6)
        choices = [range(4) if m else [int(t)] for t, m in zip(tokens, masked, strict=True)]
        accepted = [
            seq
            for seq in itertools.product(*choices)
            if (end := _run(delta, entry, seq)) is not None and bool(live[end])
        ]
        assert bool((fwd_b[-1] & bwd_b[-1]).any()) == bool(accepted)
        for i in range(4):  # forward[i] = states reachable after i positions
            reach = {_run(delta, entry, seq[:i]) for seq in itertools.product(*choices)}
            assert {q for q in range(6) if fwd_b[i, q]} == reach - {None}
        positions = [i for i in range(4) if masked[i]]
        if not positions:
            continue
        idx = torch.tensor(positions)
        mask = allowed_mask(fwd[0, idx], bwd[0, idx + 1], tables)
        bits = unpack_bits(mask, 4)
        for k, i in enumerate(positions):
            expect = {seq[i] for seq in accepted}
            assert {t for t in range(4) if bits[k, t]} == expect


@pytest.mark.parametrize(
    ("states", "vocab", "seed"), [(1, 3, 0), (7, 11, 1), (40, 70, 2), (20, 33, 3)]
)
def test_triton_matches_reference(
    states: int,
    vocab: int,
    seed: int,
    make_tables: MakeTables,
    device: torch.device,
    triton_ok: None,
) -> None:
    tables = make_tables(states, vocab, 0.2, seed)
    tables_dev = SweepTables(
        **{
            k: (v.to(device) if isinstance(v, torch.Tensor) else v)
            for k, v in tables.__dict__.items()
        }
    )
    g = torch.Generator().manual_seed(seed)
    rows = [_row(g, 6, vocab, 0.6) for _ in range(3)]
    tokens = torch.stack([r[0] for r in rows]).to(device)
    masked = torch.stack([r[1] for r in rows]).to(device)
    masked[0] = True  # an all-mask row
    masked[1, :] = False  # an all-fixed row
    entry = torch.randint(0, states, (3,), generator=g).to(device)
    ref = automaton_sweep(tokens, masked, entry, tables_dev, backend="torch")
    tri = automaton_sweep(tokens, masked, entry, tables_dev, backend="triton")
    assert torch.equal(ref[0], tri[0])
    assert torch.equal(ref[1], tri[1])
    words = ref[0].shape[-1]
    fwd = ref[0][:, :-1].reshape(-1, words)
    bwd = ref[1][:, 1:].reshape(-1, words)
    m_ref = allowed_mask(fwd, bwd, tables_dev, backend="torch")
    m_tri = allowed_mask(fwd, bwd, tables_dev, backend="triton")
    assert torch.equal(m_ref, m_tri)


def test_infeasible_block_has_empty_sets_and_masks(make_tables: MakeTables) -> None:
    tables = make_tables(5, 6, 0.3, 4)
    delta = _delta(tables)
    missing = next((q, t) for q in range(5) for t in range(6) if (q, t) not in delta)
    tokens = torch.tensor([[missing[1], 0]])
    masked = torch.tensor([[False, True]])
    fwd, bwd = automaton_sweep(tokens, masked, torch.tensor([missing[0]]), tables)
    assert not bool(unpack_bits(fwd[0, 1], 5).any())  # the fixed token kills every path
    assert not bool(unpack_bits(allowed_mask(fwd[0, 1:2], bwd[0, 2:3], tables), 6).any())


def test_bad_inputs_are_named(make_tables: MakeTables) -> None:
    tables = make_tables(4, 5, 0.5, 0)
    tokens = torch.zeros(1, 3, dtype=torch.int64)
    masked = torch.zeros(1, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="entry states"):
        automaton_sweep(tokens, masked, torch.tensor([4]), tables)
    with pytest.raises(ValueError, match="fixed tokens"):
        automaton_sweep(tokens + 5, masked, torch.tensor([0]), tables)
    with pytest.raises(ValueError, match="masked must be bool"):
        automaton_sweep(tokens, masked.int(), torch.tensor([0]), tables)
    with pytest.raises(ValueError, match="state bitsets"):
        allowed_mask(
            torch.zeros(2, 3, dtype=torch.int32), torch.zeros(2, 1, dtype=torch.int32), tables
        )
    with pytest.raises(ValueError, match="offsets"):
        SweepTables.from_transitions(
            2,
            3,
            torch.tensor([0, 1]),
            torch.tensor([0], dtype=torch.int32),
            torch.tensor([1], dtype=torch.int32),
            torch.ones(2, dtype=torch.bool),
        )
